"""Task draws in Torch on a device (issue 55): the same laws as the NumPy draws.

Every task source draws ``device=None`` in NumPy (unchanged) and, given a device, in Torch from
a local ``torch.Generator``. These tests run the Torch draws on the CPU (``device="cpu"``, the
same functions a GPU runs) and compare their law with the NumPy draws':

* per-task statistics (the task's mean, log spread, kurtosis of the radii, anisotropy and
  orientation of its covariance; family-specific ones such as the number of mixture
  components or shell radii) are iid across tasks, so each one's mean is compared with a
  two-sample z-test at 5 standard errors (a false alarm has probability 6e-7 per statistic);
* a two-sample MMD² permutation test on the standardized per-task statistics (999
  permutations, refused below p = 0.001) compares their joint law;
* discrete draws (which class, which rows) are compared by their frequencies.

Seeds are fixed, so every test is deterministic. Planted bugs (a wrong scale, a wrong radius
law, an off-by-one row skip, ignored family weights, a wrong Student-t shape) were each caught
by the tests below before they were removed (see the report of issue 55).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from skflow.tasks import (  # noqa: E402
    ClassTasks,
    FewShotClassTasks,
    GaussianMixtureTasks,
    HierarchicalTasks,
    MixedTasks,
    MoonsTasks,
    RecentredTasks,
    RingTasks,
    RotatedTasks,
    SingleDatasetTasks,
    SphericalShellTasks,
    SpiralTasks,
    recentre_tasks,
    rotate_tasks,
)
from skflow.tasks._device import (  # noqa: E402
    PrefetchedDraws,
    supports_device_draws,
    t_standard_gamma,
    torch_generator,
)
from skflow.tasks.labelled import _skip_rows  # noqa: E402

N_TASKS = 600  # tasks per side: the per-task statistics are iid across tasks
Z_MAX = 5.0  # standard errors


def _both(source, n_support=6, n_query=10, n_tasks=N_TASKS, **kwargs):
    """NumPy and Torch (CPU) draws of the same source, as float64 arrays (B, n, d)."""
    S, Q = source.sample_tasks(n_tasks, n_support, n_query, random_state=1, **kwargs)
    St, Qt = source.sample_tasks(
        n_tasks, n_support, n_query, random_state=2, device="cpu", **kwargs
    )
    assert isinstance(St, torch.Tensor) and St.dtype == torch.float32
    numpy_draw = np.concatenate([S, Q], axis=1)
    torch_draw = torch.cat([St, Qt], dim=1).double().numpy()
    return numpy_draw, torch_draw


def task_statistics(X: np.ndarray) -> np.ndarray:
    """Per-task statistics (B, d + 4) of tasks X (B, n, d): mean, log spread, kurtosis of
    the squared radii, log share of the top eigenvalue, orientation of the covariance."""
    B, n, d = X.shape
    centre = X.mean(axis=1)
    R = X - centre[:, None]
    r2 = (R**2).sum(-1)
    spread = r2.mean(axis=1)
    cov = np.einsum("bni,bnj->bij", R, R) / n
    eig = np.linalg.eigvalsh(cov)
    orient = cov[:, 0, 1] / np.trace(cov, axis1=1, axis2=2) if d > 1 else np.zeros(B)
    return np.column_stack(
        [
            centre,
            np.log(spread),
            (r2**2).mean(axis=1) / spread**2,
            np.log(eig[:, -1] / eig.sum(-1)),
            orient,
        ]
    )


def assert_same_means(a: np.ndarray, b: np.ndarray, what: str = "statistic") -> None:
    """Two-sample z-test of every column's mean (rows iid), at ``Z_MAX`` standard errors."""
    a, b = np.atleast_2d(a.T).T, np.atleast_2d(b.T).T
    se = np.sqrt(a.var(axis=0, ddof=1) / len(a) + b.var(axis=0, ddof=1) / len(b)) + 1e-12
    z = np.abs(a.mean(axis=0) - b.mean(axis=0)) / se
    assert np.all(z < Z_MAX), f"{what}: z = {np.round(z, 2)} (columns over {Z_MAX} SE)"


def mmd_permutation_p(a: np.ndarray, b: np.ndarray, n_perm: int = 999, seed: int = 0) -> float:
    """p-value of a two-sample MMD² permutation test (Gaussian kernel, median bandwidth) on
    standardized rows."""
    Z = np.concatenate([a, b])
    Z = (Z - Z.mean(axis=0)) / (Z.std(axis=0) + 1e-12)
    D = ((Z[:, None] - Z[None]) ** 2).sum(-1)
    K = np.exp(-D / np.median(D[D > 0]))
    n = len(a)
    signs = np.where(np.arange(len(Z)) < n, 1.0 / n, -1.0 / len(b))
    rng = np.random.default_rng(seed)
    perms = np.stack([signs] + [rng.permutation(signs) for _ in range(n_perm)])
    mmd = np.einsum("pi,pi->p", perms @ K, perms)
    return float((1 + np.sum(mmd[1:] >= mmd[0])) / (1 + n_perm))


def assert_same_law(numpy_draw, torch_draw, extra=None):
    a, b = task_statistics(numpy_draw), task_statistics(torch_draw)
    if extra is not None:
        a = np.column_stack([a, extra(numpy_draw)])
        b = np.column_stack([b, extra(torch_draw)])
    assert_same_means(a, b)
    p = mmd_permutation_p(a, b)
    assert p > 1e-3, f"MMD² permutation test: p = {p:.4f}"


def n_clusters(X: np.ndarray, gap: float = 0.01) -> np.ndarray:
    """Number of tight clusters (B,) of each task: gaps over ``gap`` in the sorted first
    coordinate (clusters of width ~1e-4 whose centres are uniform in a box)."""
    x = np.sort(X[..., 0], axis=1)
    return 1 + (np.diff(x, axis=1) > gap).sum(axis=1)


# -- the laws, family by family --------------------------------------------------------------
@pytest.mark.parametrize("anisotropic", [True, False])
def test_gaussian_mixture_law(anisotropic):
    assert_same_law(*_both(GaussianMixtureTasks(3, anisotropic=anisotropic)))


def test_gaussian_mixture_number_of_components():
    """Tight components: the clusters of a task are its visited components (2..6)."""
    tasks = GaussianMixtureTasks(2, n_components=(2, 6), scale=1e-4, box=50.0)
    a, b = (n_clusters(X) for X in _both(tasks, n_support=40, n_query=40))
    assert_same_means(a[:, None], b[:, None], "number of components")
    freq_a, freq_b = np.bincount(a, minlength=7) / a.size, np.bincount(b, minlength=7) / b.size
    se = np.sqrt(freq_a * (1 - freq_a) / a.size + freq_b * (1 - freq_b) / b.size) + 1e-12
    assert np.all(np.abs(freq_a - freq_b) < Z_MAX * se), (freq_a, freq_b)
    assert b.max() <= 6


def _norm_stats(X):
    r = np.linalg.norm(X, axis=-1)
    return np.column_stack([r.min(axis=1), r.max(axis=1), n_clusters(r[..., None], 0.02)])


def test_shell_law_and_radii():
    """Radii without noise: the norms of a task's points are its shell radii, in (0.5, 5]."""
    tasks = SphericalShellTasks(3, radial_noise=0.0)
    numpy_draw, torch_draw = _both(tasks, n_support=20, n_query=20)
    r = np.linalg.norm(torch_draw, axis=-1)
    assert r.min() > 0.5 - 1e-5 and r.max() <= 5.0 + 1e-5
    assert_same_law(numpy_draw, torch_draw, extra=_norm_stats)


def test_shell_law_with_noise_and_centre():
    assert_same_law(*_both(SphericalShellTasks(4, radial_noise=0.3, center_box=2.0)))


@pytest.mark.parametrize(
    "source",
    [RingTasks(3), MoonsTasks(3), SpiralTasks(3), RingTasks(2, box=0.0, noise=1e-3)],
    ids=["rings", "moons", "spirals", "rings-2d"],
)
def test_planar_laws(source):
    assert_same_law(*_both(source))


@pytest.mark.parametrize("within", ["gaussian", "student_t"])
def test_hierarchical_law(within):
    tasks = HierarchicalTasks(2, prior_cov=[4.0, 1.0], within_cov=[1.0, 0.3], within=within, df=3.0)
    numpy_draw, torch_draw = _both(tasks)
    assert_same_law(numpy_draw, torch_draw)
    # the class means' covariance (prior) and the within-class spread, pooled
    for X in (numpy_draw, torch_draw):
        resid = X - X.mean(axis=1, keepdims=True)
        assert np.allclose(np.cov(X.mean(axis=1).T), np.diag([4.0, 1.0]), atol=0.8)
        assert np.all(np.abs(np.log(resid.var(axis=(0, 1)) * 16 / 15)) < 0.3 + 1.2 * np.log(3))


def test_hierarchical_means_returned_on_device():
    S, Q, means = HierarchicalTasks(3).sample_tasks(
        5, 4, 2, random_state=0, device="cpu", return_means=True
    )
    assert tuple(means.shape) == (5, 3) and means.dtype == torch.float32


def test_standard_gamma_moments():
    gen = torch_generator(0, "cpu")
    for alpha in (0.4, 1.5, 5.0):
        g = t_standard_gamma(gen, alpha, (40000,), "cpu", torch.float64).numpy()
        ref = np.random.default_rng(0).standard_gamma(alpha, 40000)
        assert_same_means(np.column_stack([g, np.log(g)]), np.column_stack([ref, np.log(ref)]))


def test_mixed_law_and_family_weights():
    """Families told apart by their scale: GMM tasks have spreads of a few units, moons of
    tens; the share of each must follow the weights."""
    mixed = MixedTasks(
        [GaussianMixtureTasks(2, box=1.0), MoonsTasks(2, scale=40.0, box=0.0)], weights=[3, 1]
    )
    numpy_draw, torch_draw = _both(mixed)
    assert_same_law(numpy_draw, torch_draw)
    share = [np.mean(task_statistics(X)[:, 2] > np.log(100.0)) for X in (numpy_draw, torch_draw)]
    assert abs(share[1] - 0.25) < Z_MAX * np.sqrt(0.25 * 0.75 / N_TASKS), share


@pytest.mark.exactness
def test_mixed_family_without_device_draws_is_seeded_from_the_generator():
    class NumpyOnly:
        n_features = 2

        def sample_tasks(self, n_tasks, n_support, n_query, random_state=None):
            rng = np.random.default_rng(random_state)
            X = rng.normal(size=(n_tasks, n_support + n_query, 2))
            return X[:, :n_support], X[:, n_support:]

    mixed = MixedTasks([NumpyOnly(), GaussianMixtureTasks(2)])
    assert not mixed.device_draws and not supports_device_draws(NumpyOnly())
    a = mixed.sample_tasks(8, 3, 2, random_state=5, device="cpu")
    b = mixed.sample_tasks(8, 3, 2, random_state=5, device="cpu")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_rotated_and_recentred_laws():
    source = GaussianMixtureTasks(2, n_components=1, box=3.0, scale=(0.2, 2.0))
    for wrapper in (RotatedTasks(source), RotatedTasks(source, center="origin")):
        assert_same_law(*_both(wrapper))
    assert_same_law(*_both(RecentredTasks(source), n_tasks=N_TASKS))


def test_rotate_and_recentre_tensors_keep_the_shapes_of_the_tasks():
    S = torch.randn(6, 4, 3, dtype=torch.float64)
    Q = torch.randn(6, 5, 3, dtype=torch.float64)
    S2, Q2 = rotate_tasks(S, Q, random_state=0)
    dist = torch.cdist(torch.cat([S, Q], 1), torch.cat([S, Q], 1))
    assert torch.allclose(torch.cdist(torch.cat([S2, Q2], 1), torch.cat([S2, Q2], 1)), dist)
    assert torch.allclose(S2.mean(1), S.mean(1))
    S3, Q3 = recentre_tasks(S, Q, random_state=0)
    assert torch.allclose(S3 - S3.mean(1, keepdim=True), S - S.mean(1, keepdim=True))
    assert torch.allclose(Q3 - S3.mean(1, keepdim=True), Q - S.mean(1, keepdim=True))


# -- labelled data: which classes and rows are drawn ----------------------------------------
def _indexed(n_per_class=(12, 17, 30, 19)):
    """Rows that carry their own index (column 0) and their class (column 1)."""
    y = np.repeat(np.arange(len(n_per_class)), n_per_class)
    X = np.column_stack([np.arange(y.size), y]).astype(np.float64)
    return X, y


def _frequencies(index, n_rows):
    return np.bincount(index.ravel().astype(int), minlength=n_rows) / index.size


def _assert_same_frequencies(a, b, n):
    se = np.sqrt(a * (1 - a) / n + b * (1 - b) / n) + 1e-12
    assert np.all(np.abs(a - b) < Z_MAX * se), np.round((a - b) / se, 1)


def test_class_tasks_rows_and_classes():
    X, y = _indexed()
    tasks = ClassTasks(X, y, validation_fraction=0.25, random_state=0)
    for split, m, q in (("train", 3, 3), ("validation", 1, 1)):
        S, Q = tasks.sample_tasks(3000, m, q, random_state=1, split=split)
        St, Qt = tasks.sample_tasks(3000, m, q, random_state=2, split=split, device="cpu")
        St, Qt = St.double().numpy(), Qt.double().numpy()
        rows = np.concatenate([St, Qt], axis=1)[..., 0]
        assert all(len(set(r)) == r.size for r in rows)  # distinct rows within a task
        assert np.all(np.concatenate([St, Qt], axis=1)[..., 1] == St[:, :1, 1])  # one class
        for j in range(m + q):  # every position: the same law of rows
            ref = np.concatenate([S, Q], axis=1)[:, j, 0]
            _assert_same_frequencies(
                _frequencies(ref, len(X)), _frequencies(rows[:, j], len(X)), 3000
            )


def test_few_shot_class_tasks_rows_and_targets():
    X, y = _indexed()
    tasks = FewShotClassTasks(X, y, min_targets=2)
    S, Q = tasks.sample_tasks(3000, 5, 6, random_state=1)
    St, Qt = (
        a.double().numpy() for a in tasks.sample_tasks(3000, 5, 6, random_state=2, device="cpu")
    )
    for a, b in ((S, St), (Q, Qt)):
        _assert_same_frequencies(
            _frequencies(a[..., 0], len(X)), _frequencies(b[..., 0], len(X)), a[..., 0].size
        )
    assert all(len(set(r)) == r.size for r in St[..., 0])  # distinct support rows
    assert not np.any(St[:, :, None, 0] == Qt[:, None, :, 0])  # targets avoid the support
    assert np.all(Qt[..., 1] == St[:, :1, 1])  # targets of the task's class


def test_skip_rows_is_the_numpy_loop():
    rng = np.random.default_rng(0)
    for _ in range(50):
        size, m = int(rng.integers(3, 30)), 0
        m = int(rng.integers(1, size - 1))
        taken = np.sort(rng.choice(size, m, replace=False))[None]
        rank = rng.integers(0, size - m, size=(1, 8))
        expected = rank.copy()
        for j in range(m):
            expected += expected >= taken[:, j : j + 1]
        got = _skip_rows(torch.as_tensor(rank), torch.as_tensor(taken)).numpy()
        assert np.array_equal(got, expected)


def test_single_dataset_tasks():
    X = np.column_stack([np.arange(40.0), np.zeros(40)])
    S, Q = SingleDatasetTasks(X).sample_tasks(3000, 4, 5, random_state=1)
    St, Qt = (
        a.double().numpy()
        for a in SingleDatasetTasks(X).sample_tasks(3000, 4, 5, random_state=2, device="cpu")
    )
    for a, b in ((S, St), (Q, Qt)):
        _assert_same_frequencies(
            _frequencies(a[..., 0], 40), _frequencies(b[..., 0], 40), a[..., 0].size
        )
    assert not np.any(St[:, :, None, 0] == Qt[:, None, :, 0])


# -- seeds, shapes, dtypes, devices ---------------------------------------------------------
X_LAB, Y_LAB = _indexed()
SOURCES = {
    "gmm": GaussianMixtureTasks(3),
    "shells": SphericalShellTasks(3, center_box=1.0),
    "rings": RingTasks(3),
    "moons": MoonsTasks(3),
    "spirals": SpiralTasks(3),
    "hierarchical": HierarchicalTasks(3, within="student_t"),
    "mixed": MixedTasks([GaussianMixtureTasks(3), RingTasks(3), SpiralTasks(3)]),
    "rotated": RotatedTasks(FewShotClassTasks(X_LAB, Y_LAB)),
    "recentred": RecentredTasks(ClassTasks(X_LAB, Y_LAB, random_state=0)),
    "classes": ClassTasks(X_LAB, Y_LAB, random_state=0),
    "few-shot": FewShotClassTasks(X_LAB, Y_LAB),
    "single": SingleDatasetTasks(X_LAB),
}


@pytest.mark.exactness
@pytest.mark.parametrize("name", list(SOURCES))
def test_seeds_shapes_dtypes_and_devices(name):
    source = SOURCES[name]
    d = source.n_features
    assert supports_device_draws(source)
    S, Q = source.sample_tasks(5, 4, 6, random_state=3, device="cpu")
    assert tuple(S.shape) == (5, 4, d) and tuple(Q.shape) == (5, 6, d)
    assert S.dtype == Q.dtype == torch.float32 and S.device.type == Q.device.type == "cpu"
    S2, Q2 = source.sample_tasks(5, 4, 6, random_state=3, device=torch.device("cpu"))
    assert torch.equal(S, S2) and torch.equal(Q, Q2)  # same seed: identical draws
    S3, _ = source.sample_tasks(5, 4, 6, random_state=4, device="cpu")
    assert not torch.equal(S, S3)  # another seed: other draws
    S64, _ = source.sample_tasks(5, 4, 6, random_state=3, device="cpu", dtype=torch.float64)
    assert S64.dtype == torch.float64
    gen = torch.Generator().manual_seed(3)  # a generator is used (and advanced) as it is
    a = source.sample_tasks(5, 4, 6, random_state=gen, device="cpu")[0]
    assert not torch.equal(a, source.sample_tasks(5, 4, 6, random_state=gen, device="cpu")[0])
    Sn, Qn = source.sample_tasks(5, 4, 6, random_state=3)  # the NumPy path is untouched
    assert isinstance(Sn, np.ndarray) and Sn.dtype == np.float64 and Qn.shape == (5, 6, d)


@pytest.mark.exactness
def test_global_torch_seed_is_not_used():
    torch.manual_seed(0)
    a = GaussianMixtureTasks(2).sample_tasks(3, 4, 5, random_state=7, device="cpu")[0]
    torch.manual_seed(1)
    b = GaussianMixtureTasks(2).sample_tasks(3, 4, 5, random_state=7, device="cpu")[0]
    state = torch.get_rng_state()
    GaussianMixtureTasks(2).sample_tasks(3, 4, 5, random_state=7, device="cpu")
    assert torch.equal(a, b) and torch.equal(state, torch.get_rng_state())


def test_device_draw_errors():
    with pytest.raises(ValueError, match="return_params"):
        GaussianMixtureTasks(2).sample_tasks(2, 3, 4, device="cpu", return_params=True)
    with pytest.raises(ValueError, match="cannot draw"):
        torch_generator(torch.Generator(), "meta")


# -- the prefetching producer ----------------------------------------------------------------
@pytest.mark.exactness
def test_prefetched_draws_keep_the_order_and_raise_the_workers_errors():
    rng = np.random.default_rng(0)
    with PrefetchedDraws(lambda: (rng.random(3), "extra")) as batches:
        got = [batches() for _ in range(4)]
    ref = np.random.default_rng(0)
    for batch in got:
        assert np.array_equal(batch[0], ref.random(3)) and batch[1] == "extra"

    def fail():
        raise RuntimeError("boom")

    batches = PrefetchedDraws(fail)
    with pytest.raises(RuntimeError, match="boom"):
        batches()
    batches.close()
    with pytest.raises(RuntimeError, match="closed"):
        batches()


# -- the training loop's device path ---------------------------------------------------------
def _run(source, mode, seed=0, **params):
    from skflow import LearnedFlowSampler, NetworkOptions, TrainingOptions
    from skflow.samplers._meta_training import TrainingParams, TrainingRun, training_tasks

    est = LearnedFlowSampler(
        NetworkOptions(d_model=8, n_layers=1),
        training=TrainingOptions(max_iter=3, batch_tasks=4, support_size=(3, 6), n_targets=5),
    ).set_params(**params)
    p = TrainingParams.of(est)
    rng = np.random.RandomState(seed)
    run = TrainingRun(p, training_tasks(p, source, None, rng), source.n_features, "cpu", rng)
    run.task_draws = mode
    return run


@pytest.mark.exactness
@pytest.mark.parametrize(
    "params", [{}, {"network__frame_context": True}, {"training__target": "marginal"}]
)
def test_training_steps_with_device_draws_are_deterministic(params):
    source = MixedTasks([GaussianMixtureTasks(2), RingTasks(2)])
    curves = [_run(source, "device", **params).train().loss_curve for _ in range(2)]
    assert len(curves[0]) == 3 and np.all(np.isfinite(curves[0]))
    assert curves[0] == curves[1]
    other = _run(source, "device", seed=1, **params).train().loss_curve
    assert other != curves[0]


def test_prefetched_training_is_the_numpy_training():
    source = GaussianMixtureTasks(2)
    numpy_run, prefetch_run = _run(source, "numpy"), _run(source, "prefetch")
    assert numpy_run.train().loss_curve == prefetch_run.train().loss_curve


def test_draw_mode_choice():
    source = GaussianMixtureTasks(2)
    run = _run(source, "auto")
    assert run.draw_mode() == "numpy"  # the CPU keeps today's path
    run.device = "cuda"  # only the choice is asked, nothing runs there
    assert run.draw_mode() == "device"
    assert _run(source, "auto", training__target="exact").draw_mode() == "numpy"
    exact = _run(source, "auto", training__target="exact")
    exact.device = "cuda"
    assert exact.draw_mode() == "prefetch"
    exact.task_draws = "device"
    with pytest.raises(ValueError, match="device draws need"):
        exact.draw_mode()
