"""Few-shot ``LearnedFlowSampler.fit(X, y)``: scarce classes, augmentation, conditioning."""

import re

import numpy as np
import pytest

from skflow import (
    LearnedFlowSampler,
    NetworkOptions,
    NWFlowSampler,
    SolverOptions,
    TrainingOptions,
)
from skflow.tasks import (
    ClassTasks,
    FewShotClassTasks,
    GaussianMixtureTasks,
    RotatedTasks,
    rotate_tasks,
)

NETWORK = NetworkOptions(d_model=8, n_heads=2, n_layers=1)
SOLVER = SolverOptions(n_steps=4)


def tiny(**training):
    """The parameters of the tiny sampler (``training``: more fields of its TrainingOptions)."""
    training = TrainingOptions(batch_tasks=16, n_targets=8, **training)
    return dict(network=NETWORK, training=training, solver=SOLVER)


def _scarce(seed=0, n_classes=15, low=12, high=40, d=3):
    """``n_classes`` Gaussian classes of ``low..high`` rows (every row unique)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(low, high + 1, n_classes)
    sizes[:2] = low, high  # both ends of the range present
    X = np.concatenate([rng.normal(3 * rng.normal(size=d), 1.0, (n, d)) for n in sizes])
    return X, np.repeat(np.arange(n_classes), sizes), sizes


class _Recorder:
    """Wraps ``FewShotClassTasks.sample_tasks`` to record what fit draws (before any
    augmentation or normalisation)."""

    def __init__(self, monkeypatch):
        self.draws = []
        original = FewShotClassTasks.sample_tasks

        def record(tasks, *args, **kwargs):
            S, Q = original(tasks, *args, **kwargs)
            self.draws.append((id(tasks), S, Q))
            return S, Q

        monkeypatch.setattr(FewShotClassTasks, "sample_tasks", record)


def _class_of(X, y, rows):
    """Class label of every row of ``rows`` (n, d), looked up exactly in ``X``."""
    match = (rows[:, None, :] == X[None, :, :]).all(axis=-1)
    assert (match.sum(axis=1) == 1).all()  # every drawn row is one row of X
    return y[match.argmax(axis=1)]


@pytest.mark.exactness
@pytest.mark.parametrize("validation", [0.0, "auto"])
def test_every_class_is_used_and_no_support_row_is_a_target(monkeypatch, validation):
    X, y, sizes = _scarce()
    rec = _Recorder(monkeypatch)
    lf = LearnedFlowSampler(  # one frame: "auto" would also train the predictive one
        **tiny(max_iter=40, validation_fraction=validation), normalize=True, random_state=0
    ).fit(X, y)
    assert lf.support_range_ == (2, int(np.percentile(sizes, 75)) - 2)
    assert lf.augment_ == "rotate" and lf.normalize_
    seen_train, seen_val, support_sizes = set(), set(), set()
    for _, S, Q in rec.draws:
        for b in range(S.shape[0]):
            classes = set(_class_of(X, y, S[b])) | set(_class_of(X, y, Q[b]))
            assert len(classes) == 1  # one class per task
            # support rows are distinct and never among the targets
            assert len({r.tobytes() for r in S[b]}) == S.shape[1]
            assert not {r.tobytes() for r in S[b]} & {r.tobytes() for r in Q[b]}
        support_sizes.add(S.shape[1])
    val = lf.validation_classes_
    if validation == "auto":  # 15 classes: 3 held out, never trained on
        assert val is not None and len(val) == 3
    else:
        assert val is None
    for _, S, _ in rec.draws[-40:]:  # the training batches (validation drawn before)
        seen_train |= set(_class_of(X, y, S.reshape(-1, X.shape[1])))
    for _, S, _ in rec.draws[:-40]:
        seen_val |= set(_class_of(X, y, S.reshape(-1, X.shape[1])))
    if val is None:
        assert seen_train == set(range(15))
    else:
        assert seen_train == set(range(15)) - set(val.tolist())
        assert set(val.tolist()) <= seen_val  # every held-out class validates
    assert len(support_sizes) > 3  # ragged support sizes, batched by size


def test_small_classes_are_kept_down_to_four_rows():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4 + 5 + 30 + 3, 2))
    y = np.repeat([0, 1, 2, 3], [4, 5, 30, 3])
    with pytest.warns(UserWarning, match=r"class\(es\) \[3\] with \[3\] rows"):
        tasks = FewShotClassTasks(X, y)
        assert tasks.classes_.tolist() == [0, 1, 2]
    S, Q = tasks.sample_tasks(200, 2, 50, random_state=0)
    assert Q.shape == (200, 50, 2)  # the target count never shrinks
    drawn = {int(c) for c in _class_of(X, y, S[:, 0])}
    assert drawn == {0, 1, 2}
    with pytest.warns(UserWarning, match="support_size low"):  # never silently unused
        LearnedFlowSampler(**tiny(support_size=(3, 9), max_iter=1)).fit(X[y < 3], y[y < 3])


def test_fewshot_targets_cover_all_other_rows():
    X = np.arange(10.0)[:, None]
    tasks = FewShotClassTasks(X, np.zeros(10, dtype=int))
    S, Q = tasks.sample_tasks(300, 3, 40, random_state=0)
    for b in range(300):
        assert not set(S[b, :, 0]) & set(Q[b, :, 0])
    # every row is a target somewhere (uniform over the non-support rows)
    assert set(Q.ravel()) == set(range(10))
    counts = np.bincount(Q.ravel().astype(int), minlength=10)
    assert counts.min() > 0.7 * counts.mean()


@pytest.mark.parametrize("center", ["support", "origin"])
def test_rotations_preserve_within_task_distances(center):
    tasks = GaussianMixtureTasks(n_features=4)
    S, Q = tasks.sample_tasks(6, 5, 7, random_state=0)
    Sr, Qr = rotate_tasks(S, Q, random_state=1, center=center)
    P, Pr = np.concatenate([S, Q], axis=1), np.concatenate([Sr, Qr], axis=1)
    dist = np.linalg.norm(P[:, :, None] - P[:, None], axis=-1)
    dist_r = np.linalg.norm(Pr[:, :, None] - Pr[:, None], axis=-1)
    np.testing.assert_allclose(dist_r, dist, atol=1e-10)
    assert not np.allclose(Pr, P)  # it did move the tasks
    if center == "support":  # the support mean is the fixed point
        np.testing.assert_allclose(Sr.mean(axis=1), S.mean(axis=1), atol=1e-10)
    else:
        np.testing.assert_allclose(
            np.linalg.norm(Pr, axis=-1), np.linalg.norm(P, axis=-1), atol=1e-10
        )


def test_rotated_tasks_wrap_the_source_draws():
    X, y, _ = _scarce(d=4)
    base = ClassTasks(X, y, random_state=0)
    S0, Q0 = base.sample_tasks(5, 4, 6, random_state=np.random.default_rng(3))
    Sr, Qr = RotatedTasks(base).sample_tasks(5, 4, 6, random_state=np.random.default_rng(3))
    P0, Pr = np.concatenate([S0, Q0], axis=1), np.concatenate([Sr, Qr], axis=1)
    gram = lambda P: np.linalg.norm(P[:, :, None] - P[:, None], axis=-1)  # noqa: E731
    np.testing.assert_allclose(gram(Pr), gram(P0), atol=1e-10)
    assert RotatedTasks(base).n_features == 4


def test_fit_conditions_on_the_support_argument():
    """max_iter=0, exact head, no normalisation: the plug-in field of the support given."""
    X, y, _ = _scarce()
    rng = np.random.default_rng(5)
    S2 = rng.normal(2.0, 0.5, size=(9, 3))
    Xq = rng.normal(size=(11, 3))
    lf = LearnedFlowSampler(**tiny(max_iter=0), normalize=False, random_state=0).fit(X[:40])
    assert lf.support_ is not None and not np.array_equal(lf.support_[:9], S2)
    nw = NWFlowSampler(sigma_min=lf.sigma_min, solver=SOLVER).fit(S2)
    for t in (0.0, 0.3, 0.9):
        np.testing.assert_allclose(
            lf.velocity(Xq, t, support=S2), nw.velocity(Xq, t), rtol=1e-5, atol=1e-6
        )
    np.testing.assert_allclose(
        lf.sample(7, support=S2, random_state=0),
        nw.sample(7, random_state=0),
        rtol=1e-4,
        atol=1e-5,
    )


def test_normalised_fit_is_the_plug_in_of_the_support_frame():
    X, y, _ = _scarce()
    lf = LearnedFlowSampler(**tiny(max_iter=0), normalize=True, random_state=0).fit(X, y)
    assert lf.normalize_ and lf.predictive_frame_ is None
    rng = np.random.default_rng(2)
    S2 = rng.normal(-1.0, 3.0, size=(8, 3))
    Xq = rng.normal(size=(5, 3))
    centre, scale = S2.mean(axis=0), np.sqrt(((S2 - S2.mean(axis=0)) ** 2).sum() / (7 * 3))
    nw = NWFlowSampler(sigma_min=lf.sigma_min).fit((S2 - centre) / scale)
    expected = scale * nw.velocity((Xq - centre) / scale, 0.6)
    np.testing.assert_allclose(lf.velocity(Xq, 0.6, support=S2), expected, rtol=1e-5, atol=1e-6)
    # the samples start in the support's frame and end near the support
    gen = lf.sample(50, support=S2, random_state=0)
    assert np.abs(gen.mean(axis=0) - centre).max() < 2 * scale


def test_progress_reports_an_early_stop(capsys):
    X, y, _ = _scarce()
    LearnedFlowSampler(
        **tiny(max_iter=100, validation_interval=5, tol=1e9),
        verbose=1,
        normalize=True,
        random_state=0,
    ).fit(X, y)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "stopped at iteration 55 of 100: no improvement" in text
    kw = dict(tiny(max_iter=10**6, max_time=0.5), verbose=1, random_state=0)
    LearnedFlowSampler(**kw, normalize=True).fit(X, y)
    out = capsys.readouterr()
    # the training's cap is in the bar: max_time less what the preparation took
    (cap,) = set(re.findall(r"training \(max_time ([0-9.e-]+) s\)", out.err))
    assert 0.3 < float(cap) <= 0.5
    assert f"max_time reached (max_time={cap} s)" in out.out + out.err
    LearnedFlowSampler(**kw).fit(X, y)  # two models: half each at most
    out = capsys.readouterr()
    caps = re.findall(r"training \(max_time ([0-9.e-]+) s\)", out.err)
    assert caps and all(float(c) <= 0.25 for c in caps)


def test_support_size_options_are_validated():
    X, y, _ = _scarce()
    for bad in ((5, 2), (0, 3), "many", (1, 2, 3)):
        with pytest.raises(ValueError, match="support_size"):
            LearnedFlowSampler(**tiny(support_size=bad, max_iter=1)).fit(X, y)
    with pytest.raises(ValueError, match="augment"):
        LearnedFlowSampler(**tiny(max_iter=1), augment="flip").fit(X, y)
    with pytest.raises(ValueError, match="normalize"):
        LearnedFlowSampler(**tiny(max_iter=1), normalize="yes").fit(X, y)
    lf = LearnedFlowSampler(**tiny(support_size=(3, 7), max_iter=2), random_state=0).fit(X, y)
    assert lf.support_range_ == (3, 7)


def test_row_validation_sizes_the_support_range_on_the_rows_kept():
    """validation_fraction=0.2 holds out a fifth of every class's rows: the largest support
    leaves 2 target rows among those kept (16 of 20), not among all 20."""
    X = np.random.default_rng(0).normal(size=(80, 3)) + np.repeat(np.eye(3)[[0, 1, 2, 0]], 20, 0)
    y = np.repeat(np.arange(4), 20)
    lf = LearnedFlowSampler(**tiny(max_iter=2, validation_fraction=0.2), random_state=0)
    lf.fit(X, y)
    assert lf.support_range_[1] == 14
