"""Tests for the paper's task families (rings, moons, spirals, mixtures of families) and for
the exact population velocity of Gaussian-mixture tasks."""

import doctest
import warnings

import numpy as np
import pytest

import skflow.tasks as tasks_module
from skflow.field import nw_velocity
from skflow.paths import OTPath
from skflow.tasks import (
    ClassTasks,
    GaussianMixtureTasks,
    MixedTasks,
    MoonsTasks,
    RingTasks,
    SingleDatasetTasks,
    SphericalShellTasks,
    SpiralTasks,
)

FAMILIES = [RingTasks, MoonsTasks, SpiralTasks]


# --------------------------------------------------------------------------------------------
# shared interface of the new families
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [*FAMILIES, lambda d: MixedTasks([RingTasks(d), MoonsTasks(d)])])
@pytest.mark.parametrize("d", [2, 5])
def test_shapes_determinism_and_sample_task(cls, d):
    tasks = cls(d)
    assert tasks.n_features == d
    Ss, Qs = tasks.sample_tasks(7, 11, 3, random_state=0)
    assert Ss.shape == (7, 11, d) and Qs.shape == (7, 3, d)
    assert Ss.dtype == np.float64 and np.all(np.isfinite(Ss))
    Ss2, Qs2 = tasks.sample_tasks(7, 11, 3, random_state=0)
    np.testing.assert_array_equal(Ss, Ss2)
    np.testing.assert_array_equal(Qs, Qs2)
    assert not np.array_equal(Ss, tasks.sample_tasks(7, 11, 3, random_state=1)[0])
    S, Q = tasks.sample_task(11, 3, random_state=4)
    S1, Q1 = tasks.sample_tasks(1, 11, 3, random_state=4)
    np.testing.assert_array_equal(S, S1[0])
    np.testing.assert_array_equal(Q, Q1[0])


@pytest.mark.parametrize("cls", FAMILIES)
def test_embedded_tasks_lie_in_a_plane(cls):
    """In d = 6 with tiny noise a task spans 2 dimensions (its random plane) plus its shift."""
    tasks = cls(6, noise=1e-9)
    Ss, _ = tasks.sample_tasks(4, 200, 0, random_state=0)
    for S in Ss:
        sv = np.linalg.svd(S - S.mean(axis=0), compute_uv=False)
        assert sv[1] > 1e-2 * sv[0] and sv[2] < 1e-6 * sv[0]
    planes = [np.linalg.svd(S - S.mean(axis=0))[2][:2] for S in Ss]
    # the planes differ between tasks: some principal angle between two of them is not 0
    assert np.linalg.svd(planes[0] @ planes[1].T, compute_uv=False).min() < 0.99


def test_ring_points_lie_on_their_circles():
    tasks = RingTasks(2, n_rings=1, radius=(1.5, 1.5), box=0.0, noise=1e-9)
    Ss, _ = tasks.sample_tasks(3, 100, 0, random_state=0)
    for S in Ss:  # one ring per task: equidistant from its centre, the mean of the points
        centre = (S.max(axis=0) + S.min(axis=0)) / 2
        np.testing.assert_allclose(np.linalg.norm(S - centre, axis=1), 1.5, atol=0.05)


def test_moons_are_two_half_circles():
    tasks = MoonsTasks(2, scale=(1.0, 1.0), box=0.0, noise=1e-9)
    S, _ = tasks.sample_task(2000, 0, random_state=0)
    # undo the random rotation: the moons' points are at distance 1 from one of two centres
    # (+-(1/2, -1/4) before the rotation), 1.118 apart; the rotation keeps distances
    # centred on (1/2, 1/4): the shape's mean is 0 (exactly, in expectation)
    assert np.linalg.norm(S.mean(axis=0)) < 0.05
    d_origin = np.linalg.norm(S, axis=1)
    assert d_origin.max() < np.hypot(1.5, 0.75) + 1e-6
    pair = np.linalg.norm(S[:, None] - S[None], axis=-1).max()
    assert pair == pytest.approx(np.hypot(3.0, 0.5), abs=0.05)  # extreme tips of the two moons


def test_spiral_arm_radius_grows_with_angle():
    tasks = SpiralTasks(2, n_arms=1, turns=(1.0, 1.0), scale=(3.0, 3.0), box=0.0, noise=1e-9)
    S, _ = tasks.sample_task(500, 0, random_state=0)
    r = np.linalg.norm(S, axis=1)
    assert r.max() <= 3.0 + 1e-6 and r.min() < 0.3
    # one turn: the radius is 3 * s with s = turn fraction, so the angle unwraps to 2 pi r / 3
    theta = np.arctan2(S[:, 1], S[:, 0])
    order = np.argsort(r)
    unwrapped = np.unwrap(theta[order])
    slope = np.polyfit(r[order], unwrapped, 1)[0]
    assert abs(abs(slope) - 2 * np.pi / 3) < 0.05


def test_mixed_tasks_follow_the_weights():
    a = GaussianMixtureTasks(3, box=0.01, scale=0.01)  # points near the origin
    b = SphericalShellTasks(3, n_shells=1, max_radius=50.0, radial_noise=0.0)  # far away
    mixed = MixedTasks([a, b], weights=[3, 1])
    Ss, _ = mixed.sample_tasks(4000, 2, 0, random_state=0)
    far = np.linalg.norm(Ss[:, 0], axis=1) > 0.4
    assert abs(far.mean() - 0.25) < 0.03
    only_a = MixedTasks([a, b], weights=[1, 0]).sample_tasks(50, 2, 0, random_state=0)[0]
    assert np.linalg.norm(only_a, axis=-1).max() < 0.4


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"families": []}, "non-empty"),
        ({"families": [RingTasks(2), RingTasks(3)]}, "same n_features"),
        ({"families": [RingTasks(2)], "weights": [-1.0]}, "non-negative"),
        ({"families": [RingTasks(2), MoonsTasks(2)], "weights": [0, 0]}, "all be zero"),
        ({"families": [RingTasks(2)], "weights": [1, 1]}, "1 non-negative"),
    ],
)
def test_mixed_tasks_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MixedTasks(**kwargs).sample_tasks(2, 3, 1, random_state=0)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: RingTasks(1), "n_features"),
        (lambda: RingTasks(2, radius=(2.0, 1.0)), "low <= high"),
        (lambda: MoonsTasks(2, noise=0.0), "noise"),
        (lambda: SpiralTasks(2, n_arms=0), "n_arms"),
        (lambda: SpiralTasks(2, box=-1.0), "box"),
    ],
)
def test_family_parameter_validation(make, match):
    with pytest.raises(ValueError, match=match):
        make().sample_tasks(2, 3, 1, random_state=0)


# --------------------------------------------------------------------------------------------
# exact population velocity of Gaussian mixtures
# --------------------------------------------------------------------------------------------
def _mixture_sample(d, n, seed, **kwargs):
    tasks = GaussianMixtureTasks(d, **kwargs)
    S, _, params = tasks.sample_tasks(1, n, 0, random_state=seed, return_params=True)
    return tasks, S, params


def test_return_params_does_not_change_the_draws():
    tasks = GaussianMixtureTasks(3)
    S, Q = tasks.sample_tasks(4, 5, 6, random_state=0)
    S2, Q2, params = tasks.sample_tasks(4, 5, 6, random_state=0, return_params=True)
    np.testing.assert_array_equal(S, S2)
    np.testing.assert_array_equal(Q, Q2)
    np.testing.assert_allclose(params.weights.sum(axis=1), 1.0)
    R = params.rotations
    np.testing.assert_allclose(
        R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape), atol=1e-12
    )


@pytest.mark.parametrize("t", [0.2, 0.6, 0.9])
@pytest.mark.parametrize("anisotropic", [True, False])
def test_posterior_mean_is_the_conditional_expectation(t, anisotropic):
    """Monte Carlo over the joint law of (x_1, x_t): the residual x_1 - E[x_1 | x_t] has mean
    zero against every function of x_t (the defining property of E[. | x_t])."""
    sigma_min, n = 0.01, 200_000
    tasks, X1, params = _mixture_sample(2, n, 0, anisotropic=anisotropic, n_components=3, box=2.0)
    x0 = np.random.default_rng(1).standard_normal(X1.shape)
    xt = OTPath(sigma_min).sample_conditional(x0, X1, t)
    resid = X1 - tasks.posterior_mean(xt, t, params, sigma_min=sigma_min)
    tests = [np.ones(xt.shape[:2]), xt[..., 0], xt[..., 1], np.tanh(xt[..., 0] * xt[..., 1])]
    for h in tests:
        prod = resid[0] * h[0][:, None]  # (n, d)
        z = prod.mean(axis=0) / (prod.std(axis=0) / np.sqrt(n))
        assert np.all(np.abs(z) < 4.5), z
    # the velocity is the same statement: u_cond - u_exact is orthogonal to functions of x_t
    u = tasks.velocity(xt, t, params, sigma_min=sigma_min)
    gap = OTPath(sigma_min).conditional_velocity(x0, X1) - u
    z = gap[0].mean(axis=0) / (gap[0].std(axis=0) / np.sqrt(n))
    assert np.all(np.abs(z) < 4.5)


@pytest.mark.parametrize("t", [0.0, 0.3, 0.7])
def test_velocity_matches_the_nw_field_of_a_large_sample(t):
    sigma_min = 0.01
    tasks, S, params = _mixture_sample(2, 200_000, 3, n_components=2, box=2.0)
    x = tasks.sample_tasks(1, 1, 30, random_state=9)[1]  # query points (another task's)
    x0 = np.random.default_rng(2).standard_normal(x.shape)
    x = OTPath(sigma_min).sample_conditional(x0, S[:, :30], t)
    exact = tasks.velocity(x, t, params, sigma_min=sigma_min)[0]
    nw = nw_velocity(x[0], S[0], t, sigma_min=sigma_min)
    scale = np.abs(exact).max()
    np.testing.assert_allclose(nw, exact, atol=0.03 * scale)


def test_velocity_per_point_times_and_limits():
    tasks, _, params = _mixture_sample(3, 10, 0)
    x = np.random.default_rng(0).normal(size=(1, 5, 3))
    t = np.array([[0.0, 0.25, 0.5, 0.75, 1.0]])
    u = tasks.velocity(x, t, params)
    for j in range(5):
        np.testing.assert_allclose(u[:, j], tasks.velocity(x[:, j : j + 1], t[0, j], params)[:, 0])
    # t = 0: x_t = x_0 is independent of x_1, so E[x_1 | x_t] is the mixture mean
    mean = np.einsum("bk,bkd->bd", params.weights, params.means)
    np.testing.assert_allclose(u[0, 0], mean[0] - 0.99 * x[0, 0], atol=1e-12)


# --------------------------------------------------------------------------------------------
# no leakage: fit(X) splits
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_rows, m", [(2, 1), (30, 10), (30, 50), (5000, 50)])
def test_single_dataset_tasks_never_leak(n_rows, m):
    X = np.arange(float(n_rows))[:, None] * np.ones((1, 2))
    Ss, Qs = SingleDatasetTasks(X).sample_tasks(16, m, 40, random_state=0)
    k = min(m, n_rows - 1)
    assert Ss.shape == (16, k, 2) and Qs.shape == (16, 40, 2)
    for S, Q in zip(Ss, Qs, strict=True):
        assert len(np.unique(S[:, 0])) == k
        assert not np.isin(Q[:, 0], S[:, 0]).any()


def test_single_dataset_tasks_validation():
    with pytest.raises(ValueError, match="at least 2 rows"):
        SingleDatasetTasks(np.zeros((1, 2))).sample_tasks(1, 1, 1)
    with pytest.raises(ValueError, match="NaN"):
        SingleDatasetTasks(np.array([[0.0], [np.nan]])).sample_tasks(1, 1, 1)


def test_fit_xy_keeps_its_targets_and_never_leaks():
    """LearnedFlowSampler.fit(X, y) trains on FewShotClassTasks draws: a small class keeps its
    target count (targets drawn with replacement from its non-support rows), so no warning;
    ClassTasks, used directly, shrinks the targets with a warning and never leaks."""
    from skflow.samplers.learned import LearnedFlowSampler

    X = np.column_stack([np.arange(60.0), np.zeros(60)])
    y = np.repeat([0, 1], [20, 40])
    lf = LearnedFlowSampler(
        d_model=8,
        n_heads=2,
        n_layers=1,
        max_iter=1,
        batch_tasks=2,
        support_size=8,
        n_targets=30,
        n_steps=2,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        lf.fit(X, y)
    with pytest.warns(UserWarning, match=r"class 0 has 20 rows .*8 \+ 30.*n_query=12"):
        Ss, Qs = ClassTasks(X, y).sample_tasks(40, 8, 30, random_state=0)
    for S, Q in zip(Ss, Qs, strict=True):
        assert not np.isin(Q[:, 0], S[:, 0]).any()


def test_docstring_examples_run():
    result = doctest.testmod(tasks_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8 and result.failed == 0


def test_few_shot_class_tasks_never_use_support_rows_as_targets():
    """FewShotClassTasks (the tasks of ``fit(X, y)``): targets drawn with replacement among
    the class's non-support rows only (issue 34), and every non-support row can be drawn."""
    from skflow.tasks import FewShotClassTasks

    X = np.column_stack([np.arange(60.0), np.zeros(60)])  # row id in the first column
    y = np.repeat([0, 1, 2], [8, 12, 40])
    Ss, Qs = FewShotClassTasks(X, y).sample_tasks(200, 5, 30, random_state=0)
    seen = set()
    for S, Q in zip(Ss, Qs, strict=True):
        assert not np.isin(Q[:, 0], S[:, 0]).any()
        assert len(np.unique(y[S[:, 0].astype(int)])) == 1 == len(
            np.unique(y[np.r_[S[:, 0], Q[:, 0]].astype(int)])
        )  # one class per task
        seen.update(Q[:, 0].astype(int).tolist())
    assert seen == set(range(60))  # each row is a non-support row of some task
