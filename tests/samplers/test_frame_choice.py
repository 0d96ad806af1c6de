"""``normalize="auto"``'s frame per support size (``skflow.samplers._frame_choice``): the
sizes it is chosen at, the choice, the nearest size, and a fitted sampler that serves each
support size in the frame chosen for it."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

from skflow import LearnedFlowSampler, LedoitWolfSampler
from skflow.metrics import mmd2
from skflow.samplers._frame_choice import (
    choice_support_sizes,
    fewshot_validation_mmd2,
    frame_for_size,
    frames_by_size,
)
from skflow.tasks import FewShotClassTasks

TINY_FIT = dict(d_model=8, n_layers=1, batch_tasks=2, n_targets=4, random_state=0)


def test_choice_sizes_span_the_range_up_to_half_the_smallest_class():
    X, y = np.zeros((50, 2)), np.repeat([0, 1], [30, 20])
    assert choice_support_sizes((2, 50), None).tolist() == [2, 6, 17, 50]
    assert choice_support_sizes((2, 50), FewShotClassTasks(X, y)).tolist() == [2, 3, 6, 10]
    assert choice_support_sizes((5, 5), None).tolist() == [5]


def test_validation_mmd2_scores_each_size_on_its_own_tasks():
    """Per size: the mean over tasks of the MMD² between generated rows and the rest of the
    class, recomputed here from the same draws; a sampler that ignores its support (all
    rows at the origin) scores worse than Ledoit-Wolf, at every size."""
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(4, 1, 2)) * 3 + rng.normal(size=(4, 30, 2))).reshape(-1, 2)
    y = np.repeat(np.arange(4), 30)
    source, est = FewShotClassTasks(X, y), LedoitWolfSampler().fit(X, y)
    scores = fewshot_validation_mmd2(est, source, [2, 8], seed=3, n_tasks=5)
    draw = np.random.default_rng(3)
    for m, score in zip([2, 8], scores, strict=True):
        S, Q = source.sample_tasks(5, m, 128, random_state=draw)
        gen = est.sample(128, support=S, random_state=int(draw.integers(2**31 - 1)))
        refs = [np.unique(q, axis=0) for q in Q]
        expected = np.mean([mmd2(g, r, reference=r) for g, r in zip(gen, refs, strict=True)])
        assert score == pytest.approx(expected, rel=1e-12)

    class Origin:
        def sample(self, n, support, random_state=None):
            return np.zeros((len(support), n, 2))

    assert np.all(fewshot_validation_mmd2(Origin(), source, [2, 8], seed=3, n_tasks=5) > scores)


def test_frames_by_size_takes_the_lower_score_at_each_size():
    predictive, support = [0.10, 0.05, 0.03], [0.13, 0.04, 0.024]
    assert frames_by_size(predictive, support) == ["predictive", "support", "support"]
    assert frames_by_size(support, predictive) == ["support", "predictive", "predictive"]
    assert frames_by_size([0.0, 2e-5], [5e-5, 1e-5]) == ["predictive"] * 2  # at the noise
    assert frames_by_size([0.3], [0.3]) == ["predictive"]  # a tie keeps the predictive


def test_frame_for_size_is_the_nearest_size_on_a_log_scale():
    choice = {"sizes": [2, 8, 32], "frames": ["predictive", "support", "predictive"]}
    got = [frame_for_size(choice, m) for m in (1, 2, 3, 4, 5, 15, 16, 17, 100)]
    # log-midpoints: 4 between 2 and 8 (a tie: the smaller), 16 between 8 and 32
    assert got == ["predictive"] * 4 + ["support"] * 3 + ["predictive"] * 2


@pytest.fixture(scope="module")
def mixed(two_cluster_classes):
    return LearnedFlowSampler(**TINY_FIT, max_iter=3).fit(*two_cluster_classes)


def test_a_fit_whose_sizes_disagree_keeps_both_models(mixed):
    frames = mixed.frame_by_size_["frames"]
    assert frames[0] == "predictive" and frames[-1] == "support"
    assert mixed.frame_by_size_["sizes"][-1] == 20
    assert mixed.predictive_frame_ is not None and mixed.model_.base == "gaussian"
    other = mixed.support_frame_sampler_
    assert other.normalize_ and other.predictive_frame_ is None and other.model_.base == "nw"
    assert other.support_frame_sampler_ is None and other.n_features_in_ == 2


def test_each_support_size_is_served_by_its_frames_model(mixed, two_cluster_classes):
    X, y = two_cluster_classes
    small, large = X[y == 5][:2], X[y == 5][:20]
    other = mixed.support_frame_sampler_
    alone = pickle.loads(pickle.dumps(mixed))
    alone.frame_by_size_ = alone.support_frame_sampler_ = None  # the predictive model alone
    for S, expected in ((small, alone), (large, other)):
        got = mixed.sample(7, support=S, random_state=1)
        np.testing.assert_array_equal(got, expected.sample(7, support=S, random_state=1))
        batch = np.stack([S, S[::-1]])
        np.testing.assert_array_equal(
            mixed.sample(7, support=batch, random_state=2),
            expected.sample(7, support=batch, random_state=2),
        )
        x, t = np.ones((3, 2)), 0.4
        np.testing.assert_array_equal(
            mixed.velocity(x, t, support=S), expected.velocity(x, t, support=S)
        )
        np.testing.assert_array_equal(
            mixed.attention_weights(x, t, support=S),
            expected.attention_weights(x, t, support=S),
        )
    assert not np.array_equal(
        mixed.sample(7, support=large, random_state=1),
        alone.sample(7, support=large, random_state=1),
    )
    # a list of supports of both sizes: each served by its own frame's model
    both = mixed.sample(4, support=[small, large], random_state=0)
    np.testing.assert_array_equal(
        both[0], alone.sample(4, support=[small, large], random_state=0)[0]
    )
    np.testing.assert_array_equal(
        both[1], other.sample(4, support=[small, large], random_state=0)[1]
    )


def test_the_solver_set_after_fit_reaches_both_models(mixed, two_cluster_classes):
    """``solver`` and ``n_steps`` set on the fitted sampler serve the sizes of either frame."""
    X, y = two_cluster_classes
    large = X[y == 5][:20]
    est = pickle.loads(pickle.dumps(mixed))
    default = est.sample(5, support=large, random_state=0)
    est.set_params(solver="euler", n_steps=3)
    coarse = est.sample(5, support=large, random_state=0)
    assert not np.array_equal(coarse, default)
    other = pickle.loads(pickle.dumps(mixed.support_frame_sampler_))
    other.set_params(solver="euler", n_steps=3)
    np.testing.assert_array_equal(coarse, other.sample(5, support=large, random_state=0))


def test_a_pickled_mixed_sampler_serves_both_sizes_alike(mixed, two_cluster_classes):
    X, y = two_cluster_classes
    back = pickle.loads(pickle.dumps(mixed))
    assert back.frame_by_size_ == mixed.frame_by_size_
    for m in (2, 20):
        S = X[y == 7][:m]
        np.testing.assert_array_equal(
            back.sample(6, support=S, random_state=0), mixed.sample(6, support=S, random_state=0)
        )


def test_a_warm_start_continues_the_predictive_model_and_drops_the_other(two_cluster_classes):
    est = LearnedFlowSampler(**TINY_FIT, max_iter=3, warm_start=True)
    est.fit(*two_cluster_classes)
    assert est.support_frame_sampler_ is not None
    est.set_params(max_iter=2).fit(*two_cluster_classes)
    assert est.support_frame_sampler_ is None and est.frame_by_size_ is None
    assert est.predictive_frame_ is not None and est.n_iter_ == 5


def test_a_dataframe_support_is_checked_by_name_at_every_size(two_cluster_classes):
    """Fitted on a DataFrame: the support-frame model knows the names too, so a DataFrame
    support of any size passes without a warning, and columns in another order raise."""
    X, y = two_cluster_classes
    est = LearnedFlowSampler(**TINY_FIT, max_iter=3).fit(pd.DataFrame(X, columns=["a", "b"]), y)
    assert est.support_frame_sampler_ is not None
    x = pd.DataFrame(np.ones((3, 2)), columns=["a", "b"])
    for m in (2, 20):
        S = X[y == 5][:m]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = est.velocity(x, 0.3, support=pd.DataFrame(S, columns=["a", "b"]))
        np.testing.assert_array_equal(got, est.velocity(x.to_numpy(), 0.3, support=S))
        with pytest.raises(ValueError, match="same order"):
            est.velocity(x, 0.3, support=pd.DataFrame(S[:, ::-1], columns=["b", "a"]))


def test_a_warm_start_of_a_support_frame_network_trains_the_predictive_frame_too(
    two_cluster_classes,
):
    """A network of each support's own frame, continued on 10 classes or more: it keeps its
    frame and its history (iterations accumulate), a predictive-frame model is trained from
    the Gaussian beside it, and the validation classes choose per size."""
    X, y = two_cluster_classes
    est = LearnedFlowSampler(**TINY_FIT, max_iter=3, normalize=True, warm_start=True)
    est.fit(X[y < 6], y[y < 6])  # 6 classes: no validation, the support's frame
    first = {k: v.clone() for k, v in est.model_.state_dict().items()}
    est.set_params(normalize="auto").fit(X, y)
    assert set(est.frame_validation_mmd2_) == {"predictive", "support"}
    assert est.frame_by_size_["frames"] == ["predictive", "predictive", "support", "support"]
    assert est.model_.base == "gaussian" and est.n_iter_ == 3  # a new network
    other = est.support_frame_sampler_
    assert other.model_.base == "nw" and other.n_iter_ == 6 and len(other.loss_curve_) == 6
    assert any(not np.array_equal(first[k], v) for k, v in other.model_.state_dict().items())
    assert est.normalize == "auto" and other.normalize is True  # params; fitted: both frames


def test_a_warm_start_kept_in_its_own_frame_continues_its_history(
    two_cluster_classes, far_cluster_classes
):
    """Where the support's frame wins at every size, the continued network is the one kept,
    with its iterations accumulated; a warm start of a predictive-frame network trains no
    second model."""
    X, y = far_cluster_classes
    est = LearnedFlowSampler(**TINY_FIT, max_iter=3, normalize=True, warm_start=True)
    est.fit(X[y < 6], y[y < 6]).set_params(normalize="auto").fit(X, y)
    assert est.frame_by_size_["frames"] == ["support"] * 4
    assert est.model_.base == "nw" and est.n_iter_ == 6 and est.support_frame_sampler_ is None
    pred = LearnedFlowSampler(**TINY_FIT, max_iter=3, normalize="predictive", warm_start=True)
    pred.fit(*two_cluster_classes).set_params(normalize="auto").fit(*two_cluster_classes)
    assert pred.frame_validation_mmd2_ is None and pred.n_iter_ == 6
    assert pred.model_.base == "gaussian" and pred.support_frame_sampler_ is None


def test_the_prior_fine_tuned_on_many_classes_chooses_its_frame_per_size(two_cluster_classes):
    """``from_pretrained(...).fit(X, y)`` with the card's recipe (``normalize="auto"``): the
    prior is continued in its frame beside a new predictive-frame model; the prior's name
    and width stay with both, so a support of another width gets the prior's message."""
    X, y = two_cluster_classes
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=2)
    n0 = prior.n_iter_
    prior.set_params(max_iter=3, random_state=0).fit(X, y)
    assert prior.frame_by_size_["frames"] == ["predictive", "support", "support", "support"]
    other = prior.support_frame_sampler_
    assert prior.model_.base == "gaussian" and prior.n_iter_ == 3
    assert other.model_.base == "nw" and other.n_iter_ == n0 + 3
    for model in (prior, other):
        with pytest.raises(ValueError, match=r"from_pretrained\('general-16', n_features=3\)"):
            model.sample(2, support=np.ones((5, 3)))
    back = pickle.loads(pickle.dumps(prior))
    with pytest.raises(ValueError, match=r"from_pretrained\('general-16', n_features=3\)"):
        back.support_frame_sampler_.sample(2, support=np.ones((5, 3)))


def test_max_time_is_the_budget_of_the_whole_fit(two_cluster_classes, monkeypatch):
    """With two trainings the choice's predicted time is kept, the first run gets half of
    the rest and the second what the first left; the preparation counts too."""
    from skflow.samplers import _meta_training
    from skflow.samplers.learned import _with_budget

    params = _meta_training.TrainingParams.of(LearnedFlowSampler(max_time=10.0))
    assert _with_budget(params, 0.5).max_time == 5.0 and params.max_time == 10.0
    assert _with_budget(params, 0.5, spent=1.0, reserve=3.0).max_time == 3.0
    assert _with_budget(params, 1.0, spent=4.0).max_time == 6.0
    assert _with_budget(params, 1.0, spent=8.0, reserve=3.0).max_time == 0.0
    assert _with_budget(_meta_training.TrainingParams(max_time=None), 0.5).max_time is None
    budgets, train = [], _meta_training.TrainingRun.train
    reserves, runs = [], []
    choice = LearnedFlowSampler._choice_seconds

    def spy_choice(self, run):
        reserves.append(choice(self, run))
        runs.append(run)
        return 4.0  # the choice's seconds, as the budgets see them

    def spy(run):
        budgets.append(run.params.max_time)
        return train(run)

    monkeypatch.setattr(LearnedFlowSampler, "_choice_seconds", spy_choice)
    monkeypatch.setattr(_meta_training.TrainingRun, "train", spy)
    LearnedFlowSampler(**TINY_FIT, max_iter=2, max_time=10.0).fit(*two_cluster_classes)
    assert reserves[0] > 0.0  # timed: 2 models x 4 sizes x 200 evaluations of a forward pass
    # half of 10 - 4 less the preparation; the second: what the (short) first run left
    assert 2.0 < budgets[0] <= 3.0 < budgets[1] <= 6.0
    reserves.clear()
    LearnedFlowSampler(**TINY_FIT, max_iter=2).fit(*two_cluster_classes)
    assert reserves == [0.0] and budgets[-2:] == [None, None]  # no budget, no clock


class _Clock:
    """A clock that advances one second at every reading."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        self.now += 1.0
        return self.now


def test_the_choice_keeps_a_flow_of_each_model_at_every_size(two_cluster_classes, monkeypatch):
    """The predicted seconds of the choice: one timed forward pass, times the solver's
    evaluations of a flow, the number of sizes and the two models (a clock of one second per
    reading makes every pass last one second)."""
    from skflow.samplers import _frame_choice
    from skflow.samplers._frame_choice import choice_support_sizes
    from skflow.solvers import evaluations_per_flow

    runs, choice = [], LearnedFlowSampler._choice_seconds

    def spy(self, run):
        runs.append(run)
        return choice(self, run)

    monkeypatch.setattr(LearnedFlowSampler, "_choice_seconds", spy)
    est = LearnedFlowSampler(**TINY_FIT, max_iter=1, max_time=60.0, solver="rk4", n_steps=7)
    est.fit(*two_cluster_classes)
    monkeypatch.setattr(_frame_choice, "time", _Clock())
    sizes = choice_support_sizes(runs[0].tasks.options.support_range, runs[0].tasks.validation)
    expected = 2 * len(sizes) * evaluations_per_flow("rk4", 7)
    assert len(sizes) == 4 and choice(est, runs[0]) == expected == 2 * 4 * 28


def test_scoring_seconds_times_the_network_without_touching_it_or_the_global_seed():
    """The prediction runs the network without gradients or state changes and draws its
    inputs from a local generator."""
    import torch

    from skflow.nn.transformer import CrossAttentionVelocity
    from skflow.samplers._frame_choice import scoring_seconds

    net = CrossAttentionVelocity(n_features=3, d_model=8, n_heads=2, n_layers=1)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    seconds = scoring_seconds(net, 2, [2, 5, 9], n_evaluations=4, n_tasks=3)
    assert torch.equal(torch.rand(3), expected)
    assert seconds > 0.0 and all(p.grad is None for p in net.parameters())
    assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
