"""``LearnedFlowSampler(normalize="predictive")``: the frame of a Gaussian predictive fitted on
the training classes, and a network that starts as that Gaussian."""

import pickle
from dataclasses import replace

import numpy as np
import pytest
import torch

from skflow import (
    EmpiricalBayesGaussianSampler,
    LearnedFlowSampler,
    NetworkOptions,
    TrainingOptions,
)
from skflow.samplers._frame import into_frame, predictive_frame
from skflow.samplers._meta_training import frame_support_sizes
from skflow.tasks import HierarchicalTasks


@pytest.fixture(scope="module")
def untrained(classes):
    """A fit of one step at a vanishing learning rate: the network as initialized."""
    X, y = classes
    est = LearnedFlowSampler(
        normalize="predictive",
        training=TrainingOptions(max_iter=1, learning_rate=1e-12, warmup=1),
        random_state=0,
    )
    return est.fit(X, y)


def test_predictive_frame_whitens_the_predictive(classes):
    """In the frame the predictive law is N(0, I): the factor reproduces its covariance, the
    inverse undoes it, and the centre maps to the origin."""
    X, y = classes
    est = EmpiricalBayesGaussianSampler().fit(X, y)
    S = np.stack([X[y == c][:4] for c in range(3)])
    centre, factor, inverse = predictive_frame(est, S)
    means, covs = est.predictive_moments(S)
    np.testing.assert_allclose(factor @ np.swapaxes(factor, -1, -2), covs, atol=1e-8)
    np.testing.assert_allclose(factor @ inverse, np.broadcast_to(np.eye(3), (3, 3, 3)), atol=1e-10)
    np.testing.assert_allclose(into_frame(centre, centre, inverse), 0.0, atol=1e-12)
    np.testing.assert_allclose(centre[:, 0], means)
    z = into_frame(X[None, :5].repeat(3, 0), centre, inverse)
    zt = into_frame(
        torch.as_tensor(X[None, :5].repeat(3, 0)), torch.as_tensor(centre), torch.as_tensor(inverse)
    )
    np.testing.assert_allclose(zt.numpy(), z, rtol=1e-12)


def test_untrained_model_samples_the_chosen_gaussian(untrained):
    """Noise starts at the predictive mean and covariance; the flow keeps that law."""
    est = untrained
    assert est.predictive_frame_ is not None and est.augment_ == "rotate" and est.normalize_
    assert est.model_.config["base"] == "gaussian"
    X = est.predictive_frame_.predictive_moments  # the chosen arm's moments
    rng = np.random.default_rng(0)
    S = rng.normal(size=(5, 3)) + [2.0, -1.0, 0.5]
    mean, cov = X(S)
    gen = est.sample(20000, support=S, random_state=0)
    np.testing.assert_allclose(gen.mean(axis=0), mean, atol=0.03)
    np.testing.assert_allclose(np.cov(gen.T), cov, atol=0.03)


@pytest.mark.exactness
def test_batched_supports_and_pickle(untrained):
    est = untrained
    rng = np.random.default_rng(1)
    batch = rng.normal(size=(2, 6, 3)) + np.array([[[3.0, 0, 0]], [[-3.0, 0, 0]]])
    out = est.sample(4000, support=batch, random_state=0)
    assert out.shape == (2, 4000, 3)
    means, _ = est.predictive_frame_.predictive_moments(batch)
    np.testing.assert_allclose(out.mean(axis=1), means, atol=0.06)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(
        again.sample(7, support=batch[0], random_state=2),
        est.sample(7, support=batch[0], random_state=2),
    )


def test_predictive_needs_labels_and_no_frame_context(classes):
    X, y = classes
    with pytest.raises(ValueError, match="needs fit\\(X, y\\)"):
        LearnedFlowSampler(normalize="predictive", training=TrainingOptions(max_iter=1)).fit(X)
    with pytest.raises(ValueError, match="cannot be combined"):
        LearnedFlowSampler(
            NetworkOptions(frame_context=True),
            normalize="predictive",
            training=TrainingOptions(max_iter=1),
        ).fit(X, y)
    with pytest.raises(Exception, match="'predictive'"):
        LearnedFlowSampler(normalize="gaussian").fit(X, y)


def test_frame_fitted_on_training_classes_only(untrained, classes):
    """The held-out validation classes stay unseen by the frame, as by the network."""
    X, y = classes
    est = untrained
    held = np.isin(y, est.validation_classes_)
    assert held.any()
    frame = est.predictive_frame_
    refit = type(frame)().set_params(**frame.get_params()).fit(X[~held], y[~held])
    S = X[y == 0][:5]
    for a, b in zip(frame.predictive_moments(S), refit.predictive_moments(S), strict=True):
        np.testing.assert_allclose(a, b)
    everything = type(frame)().set_params(**frame.get_params()).fit(X, y)
    assert not np.allclose(frame.predictive_moments(S)[1], everything.predictive_moments(S)[1])


def test_frame_chosen_per_support_size(untrained):
    """The frame's arm is chosen at sizes spanning the training support range, and a support
    of m rows takes the arm chosen for the nearest of them."""
    frame = untrained.predictive_frame_
    lo, hi = untrained.support_range_
    assert frame.support_sizes_.tolist() == frame_support_sizes((lo, hi))
    assert frame.support_sizes_[0] == max(lo, 2) and frame.support_sizes_[-1] == hi
    assert len(frame.best_estimators_) == len(frame.support_sizes_) == 5
    S = np.random.default_rng(0).normal(size=(hi, 3))
    for m in (2, hi // 2, hi):
        want = frame.chosen_estimator(m).predictive_moments(S[:m])
        np.testing.assert_allclose(frame.predictive_moments(S[:m])[1], want[1])


def test_velocity_maps_back_with_the_factor(classes):
    """With a wide path end (sigma_min = 0.6) the untrained flow moves: N(0, I) in the frame
    becomes N(0, (1 + sigma_min^2) I), so the samples' covariance is (1 + sigma_min^2) C only if
    the frame's velocity returns to data units through the factor L (not L^T or L^-1)."""
    X, y = classes
    est = LearnedFlowSampler(
        normalize="predictive",
        sigma_min=0.6,
        training=TrainingOptions(max_iter=1, learning_rate=1e-12, warmup=1),
        random_state=0,
    ).fit(X, y)
    S = X[y == 2][:4]
    mean, cov = est.predictive_frame_.predictive_moments(S)
    gen = est.sample(40000, support=S, random_state=1)
    np.testing.assert_allclose(np.cov(gen.T), 1.36 * cov, atol=0.04)
    np.testing.assert_allclose(gen.mean(axis=0), mean, atol=0.03)


@pytest.mark.parametrize("augment", ["rotate", None])
def test_training_tasks_rotate_about_the_frame_origin(classes, augment):
    """With augment="rotate" a drawn task is its frame image turned about the origin: every
    norm (distance to the predictive mean) is kept, the directions are not; without it the
    task is exactly its frame image."""
    from skflow.samplers._meta_training import TrainingParams, TrainingRun, training_tasks

    X, y = classes
    est = LearnedFlowSampler(
        normalize="predictive",
        augment=augment,
        training=TrainingOptions(batch_tasks=4, support_size=5, n_targets=6),
    )
    params = TrainingParams.of(est)
    tasks = training_tasks(params, X, y, np.random.RandomState(0))
    assert tasks.options.augment == augment and tasks.options.predictive
    run = TrainingRun(params, tasks, 3, "cpu", np.random.RandomState(0))
    raw_rng, rng = np.random.default_rng(5), np.random.default_rng(5)
    S_raw, Q_raw = tasks.source.sample_tasks(4, 5, 6, random_state=raw_rng)
    S, Q = run._draw(tasks.source, rng, m=5)
    centre, _, inverse = predictive_frame(tasks.predictive_frame, S_raw)
    S_f, Q_f = into_frame(S_raw, centre, inverse), into_frame(Q_raw, centre, inverse)
    np.testing.assert_allclose(np.linalg.norm(S, axis=-1), np.linalg.norm(S_f, axis=-1))
    np.testing.assert_allclose(np.linalg.norm(Q, axis=-1), np.linalg.norm(Q_f, axis=-1))
    assert np.allclose(S, S_f) == (augment is None)


def test_no_training_without_validation_data():
    """``validation_fraction=0``: nothing could show that training beats the Gaussian, so the
    network is not trained at all and the model is exactly the chosen Gaussian; with
    held-out classes the untrained model is the first validation score (iteration 0)."""
    fam = HierarchicalTasks(3, prior_cov=4.0, within_cov=0.25)
    X, y = fam.make_classes(6, 30, random_state=0)
    kw = dict(training=TrainingOptions(max_iter=20, validation_fraction=0.0), random_state=0)
    est = LearnedFlowSampler(normalize="predictive", **kw).fit(X, y)
    assert est.n_iter_ == 0 and est.loss_curve_ == [] and est.validation_classes_ is None
    S = X[y == 0][:5]
    mean, cov = est.predictive_frame_.predictive_moments(S)
    gen = est.sample(20000, support=S, random_state=0)
    np.testing.assert_allclose(gen.mean(axis=0), mean, atol=0.03)
    np.testing.assert_allclose(np.cov(gen.T), cov, atol=0.03)
    X, y = fam.make_classes(12, 30, random_state=0)
    kw = dict(training=TrainingOptions(max_iter=4, validation_interval=2), random_state=0)
    est = LearnedFlowSampler(normalize="predictive", **kw).fit(X, y)
    assert est.n_iter_ == 4 and len(est.validation_scores_) == 3  # iteration 0, 2 and 4
    assert len(LearnedFlowSampler(normalize=True, **kw).fit(X, y).validation_scores_) == 2


def _frame_of(est):
    return "predictive" if est.predictive_frame_ is not None else "support"


TINY_NETWORK = NetworkOptions(d_model=8, n_layers=1)


def tiny_fit(**training):
    """The parameters of a tiny network's short training (``training``: more fields of its
    TrainingOptions)."""
    training = TrainingOptions(batch_tasks=2, n_targets=4, **training)
    return dict(network=TINY_NETWORK, training=training, random_state=0)


@pytest.mark.exactness
@pytest.mark.parametrize("n_classes", [6, 12])
def test_auto_is_one_network_that_sees_the_support_size(n_classes):
    """``fit(X, y)`` with the defaults: one network with the support size as an input. With
    10 classes or more it runs in the predictive frame, validated on held-out classes; with
    fewer, in each support's own frame, validated on a fifth of every class's rows: bit for
    bit the explicit settings (what ``benchmarks/bench_transfer.py`` measures as
    ``pred_sized`` / ``learned_support``)."""
    fam = HierarchicalTasks(3, prior_cov=4.0, within_cov=0.25)
    X, y = fam.make_classes(n_classes, 20, random_state=0)
    auto = LearnedFlowSampler(**tiny_fit(max_iter=3)).fit(X, y)
    many = n_classes >= 10
    assert _frame_of(auto) == ("predictive" if many else "support")
    assert (auto.model_.base == "gaussian") == many
    assert auto.model_.size_embedding and auto.normalize_
    assert (auto.validation_classes_ is not None) == many
    assert len(auto.validation_scores_) >= 1  # validated either way
    explicit = LearnedFlowSampler(
        replace(TINY_NETWORK, size_embedding=True),
        training=TrainingOptions(batch_tasks=2, n_targets=4, max_iter=3),
        normalize="predictive" if many else True,
        random_state=0,
    ).fit(X, y)
    S = X[y == 3][:6]
    np.testing.assert_array_equal(
        auto.sample(5, support=S, random_state=1), explicit.sample(5, support=S, random_state=1)
    )
    fitted = [v for k, v in vars(auto).items() if k.endswith("_")]
    assert not any(isinstance(v, LearnedFlowSampler) for v in fitted)  # no second sampler


@pytest.mark.parametrize(
    "params, frame",
    [
        # the context describes the support's own frame
        ({"network__frame_context": True}, "support"),
        ({"normalize": True}, "support"),
        ({"training__validation_fraction": 0.0}, "predictive"),
    ],
)
def test_auto_frame_with_other_settings(params, frame):
    fam = HierarchicalTasks(3, prior_cov=4.0, within_cov=0.25)
    X, y = fam.make_classes(12, 20, random_state=0)
    est = LearnedFlowSampler(**tiny_fit(max_iter=2)).set_params(**params).fit(X, y)
    assert _frame_of(est) == frame and est.normalize_
    assert est.model_.base == ("gaussian" if frame == "predictive" else "nw")


def test_size_input_is_off_for_one_data_set_and_task_sources():
    """``size_embedding="auto"``: the training supports of ``fit(X)`` and of a task source
    have one size (50 by default), so the network gets no size input; on labelled data with
    one support size, neither."""
    fam = HierarchicalTasks(3, prior_cov=4.0, within_cov=0.25)
    X, y = fam.make_classes(6, 20, random_state=0)
    kw = tiny_fit(max_iter=1, support_size=5)
    assert not LearnedFlowSampler(**kw).fit(X).model_.size_embedding
    assert not LearnedFlowSampler(**kw).fit(fam).model_.size_embedding
    assert not LearnedFlowSampler(**kw).fit(X, y).model_.size_embedding
    kw = tiny_fit(max_iter=1, support_size=(2, 8))
    assert LearnedFlowSampler(**kw).fit(X, y).model_.size_embedding


@pytest.mark.parametrize("normalize, frame", [("predictive", "predictive"), (True, "support")])
def test_auto_frame_warm_start_keeps_the_networks_frame(normalize, frame):
    """A warm start continues its network in the frame it was trained in, whatever the number
    of classes of the new data; one network, no second one beside it."""
    fam = HierarchicalTasks(3, prior_cov=4.0, within_cov=0.25)
    kw = tiny_fit(max_iter=2)
    est = LearnedFlowSampler(normalize=normalize, warm_start=True, **kw)
    est.fit(*fam.make_classes(20, 20, random_state=0))
    est.set_params(normalize="auto")
    for n_classes in (6, 12):
        est.fit(*fam.make_classes(n_classes, 20, random_state=1))
        assert _frame_of(est) == frame
        assert est.model_.base == ("gaussian" if frame == "predictive" else "nw")
    assert est.n_iter_ == 6


@pytest.mark.parametrize("normalize", [True, False])
def test_auto_frame_warm_start_keeps_the_networks_normalisation(normalize):
    """``normalize="auto"`` on a warm start normalises as the continued network was trained,
    whether the new data are labelled or one data set (a network of each support's frame,
    e.g. a shipped prior, fine-tuned on one data set stays in that frame)."""
    fam = HierarchicalTasks(3, prior_cov=4.0, within_cov=0.25)
    X, y = fam.make_classes(6, 20, random_state=0)
    kw = tiny_fit(max_iter=2, support_size=5)
    est = LearnedFlowSampler(normalize=normalize, warm_start=True, **kw)
    est.fit(X, y) if normalize else est.fit(X)
    est.set_params(normalize="auto")  # alone: True for fit(X, y), False for fit(X)
    est.fit(X) if normalize else est.fit(X, y)
    assert est.normalize_ is normalize and est.n_iter_ == 4


def _mixture_classes(n_classes=12, n_rows=30):
    """Classes that are each a Gaussian mixture of their own (``GaussianMixtureTasks``)."""
    from skflow.tasks import GaussianMixtureTasks

    S, _ = GaussianMixtureTasks(n_features=2).sample_tasks(n_classes, n_rows, 1, random_state=0)
    return S.reshape(-1, 2), np.repeat(np.arange(n_classes), n_rows)


def test_auto_frame_is_the_supports_where_the_kernel_predicts_better():
    """``normalize="auto"`` keeps the predictive frame only where its Gaussian predicts
    held-out training classes at least as well as the kernel plug-in (geometric mean over the
    frame's sizes): classes that are each a mixture of their own train in each support's own
    frame, classes of a shared Gaussian law in the predictive one; ``normalize="predictive"``
    is never overruled."""
    from skflow.samplers._meta_training import fit_predictive_frame, gaussian_frame_pays

    X, y = _mixture_classes()
    frame = fit_predictive_frame(X, y, (2, 20), random_state=0)
    assert not gaussian_frame_pays(frame, X, y, random_state=0)
    est = LearnedFlowSampler(**tiny_fit(max_iter=1)).fit(X, y)
    assert _frame_of(est) == "support" and est.model_.base == "nw" and est.normalize_
    assert est.model_.size_embedding  # one network for every size in that frame too
    forced = LearnedFlowSampler(**tiny_fit(max_iter=1), normalize="predictive").fit(X, y)
    assert _frame_of(forced) == "predictive"
    fam = HierarchicalTasks(2, prior_cov=4.0, within_cov=0.25)
    X, y = fam.make_classes(12, 30, random_state=0)
    frame = fit_predictive_frame(X, y, (2, 20), random_state=0)
    assert gaussian_frame_pays(frame, X, y, random_state=0)
