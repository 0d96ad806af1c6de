"""Tests of skflow.diagnostics: the failure regimes of the plug-in flow, and memorisation."""

import json
import math

import numpy as np
import pytest

from skflow import SolverOptions
from skflow.diagnostics import diagnose, neff_along_path
from skflow.field import nw_effective_sample_size, nw_velocity
from skflow.solvers import integrate
from skflow.tasks import GaussianMixtureTasks, SphericalShellTasks

FAST = {"n_trajectories": 32, "n_steps": 20}


# --------------------------------------------------------------------------------------------
# regime 1: collapse
# --------------------------------------------------------------------------------------------


def test_neff_along_path_matches_direct_computation():
    S = np.random.default_rng(1).standard_normal((15, 3))
    times, neff = neff_along_path(S, n_trajectories=8, n_steps=10, random_state=3)
    # oracle: same noise, same grid, integrate and evaluate directly
    x0 = np.random.default_rng(3).standard_normal((8, 3))
    grid = np.linspace(0.0, 1.0, 11)
    traj = integrate(
        lambda t, x: nw_velocity(x, S, t), x0, grid, method="heun", return_trajectory=True
    ).y
    expected = np.stack([nw_effective_sample_size(traj[k], S, t) for k, t in enumerate(grid)])
    np.testing.assert_allclose(times, grid)
    np.testing.assert_allclose(neff, expected, rtol=1e-12)
    np.testing.assert_allclose(neff[0], 15.0)  # uniform weights at t = 0
    assert np.all(neff >= 1.0 - 1e-9) and np.all(neff <= 15.0 + 1e-9)


def _oracle_neff(S, times, n_trajectories, n_steps, seed, sigma_min=0.01):
    """n_eff with the flow integrated on the uniform grid and, for a time between two grid
    times, one Heun step (written out) from the grid time below it to that time."""
    x0 = np.random.default_rng(seed).standard_normal((n_trajectories, S.shape[1]))
    grid = np.linspace(0.0, 1.0, n_steps + 1)

    def v(t, x):
        return nw_velocity(x, S, t, sigma_min=sigma_min)

    out = []
    for tau in times:
        k = int(np.flatnonzero(grid <= tau)[-1])
        x = integrate(v, x0, grid[: k + 1], method="heun").y if k > 0 else x0
        if tau > grid[k]:
            h = tau - grid[k]
            k1 = v(grid[k], x)
            x = x + 0.5 * h * (k1 + v(tau, x + h * k1))
        out.append(nw_effective_sample_size(x, S, tau, sigma_min=sigma_min))
    return np.stack(out)


@pytest.mark.exactness
def test_neff_along_path_requested_times_and_determinism():
    S = np.random.default_rng(0).standard_normal((10, 2))
    t1, n1 = neff_along_path(S, times=[0.75, 0.25, 0.25], n_trajectories=5, random_state=7)
    t2, n2 = neff_along_path(S, times=[0.25, 0.75], n_trajectories=5, random_state=7)
    assert t1.tolist() == [0.25, 0.75]
    np.testing.assert_array_equal(n1, n2)
    # 0.25 and 0.75 lie between grid times of the default 50 steps
    np.testing.assert_allclose(n1, _oracle_neff(S, [0.25, 0.75], 5, 50, 7), rtol=1e-12)
    # default times: uniform steps plus t = 0.5 even when n_steps is odd
    t3, n3 = neff_along_path(S, n_steps=3, n_trajectories=2, random_state=0)
    np.testing.assert_allclose(t3, [0.0, 1 / 3, 0.5, 2 / 3, 1.0])
    np.testing.assert_allclose(n3, _oracle_neff(S, t3, 2, 3, 0), rtol=1e-12)


def test_neff_does_not_depend_on_the_other_reported_times():
    """n_eff at the times of A is the same whether B is reported too (issue 12)."""
    S = np.random.default_rng(3).standard_normal((40, 4))
    A = [0.13, 0.5, 0.9, 0.977]
    B = [0.07, 0.33, 0.61, 0.88, 0.93, 0.96]  # each splits a grid step before a time of A
    kw = {"n_trajectories": 64, "n_steps": 20, "random_state": 1}
    ta, na = neff_along_path(S, times=A, **kw)
    tab, nab = neff_along_path(S, times=A + B, **kw)
    np.testing.assert_allclose(nab[np.searchsorted(tab, ta)], na, rtol=0, atol=1e-10)
    ra, rab = diagnose(S, times=A, **kw), diagnose(S, times=A + B, **kw)
    assert (ra.neff_mid, ra.collapse_time, ra.flags) == (rab.neff_mid, rab.collapse_time, rab.flags)
    np.testing.assert_allclose(
        rab.neff_median[np.searchsorted(tab, ta)], ra.neff_median, atol=1e-10
    )


def test_neff_is_continuous_at_grid_times():
    """Just before a grid time, the shortened step ends next to the grid state."""
    S = np.random.default_rng(4).standard_normal((30, 3))
    kw = {"n_trajectories": 16, "n_steps": 10, "random_state": 2}
    times, neff = neff_along_path(S, times=[0.6 - 1e-9, 0.6, 0.6 + 1e-9], **kw)
    np.testing.assert_allclose(neff[0], neff[1], rtol=1e-6)
    np.testing.assert_allclose(neff[2], neff[1], rtol=1e-6)


def _median_neff_mid(d, n_tasks=6, m=50, seed=0):
    supports, _ = GaussianMixtureTasks(n_features=d).sample_tasks(n_tasks, m, 0, random_state=seed)
    meds = []
    for i, S in enumerate(supports):
        times, neff = neff_along_path(
            S, times=[0.5], n_trajectories=64, n_steps=20, random_state=100 + i
        )
        meds.append(np.median(neff[0]))
    return float(np.mean(meds))


def test_neff_falls_with_dimension_on_gaussian_mixtures():
    """The paper's kernel collapse: n_eff at t = 0.5 falls from d = 2 to d = 16 (m = 50)."""
    values = [_median_neff_mid(d) for d in (2, 4, 8, 16)]
    assert all(a > b for a, b in zip(values, values[1:], strict=False)), values
    assert values[-1] < 3.0, values
    assert values[0] > 5.0, values


def test_collapse_flagged_on_high_dimensional_gaussian():
    S = np.random.default_rng(0).standard_normal((20, 64))
    report = diagnose(S, random_state=0, **FAST)
    assert report.flags["collapse"]
    assert report.neff_mid < 2.0
    assert report.collapse_time is not None and report.collapse_time <= 0.5
    assert report.flags["scarcity"]  # m = 20 < 2 d = 128
    assert not report.flags["mismatch"]  # isotropic: small sample, not anisotropy
    assert report.anisotropy == pytest.approx(1.0, abs=0.2)


# --------------------------------------------------------------------------------------------
# regime 2: geometric mismatch
# --------------------------------------------------------------------------------------------


def test_mismatch_flagged_on_spherical_shell():
    S, _ = SphericalShellTasks(n_features=8).sample_task(200, 0, random_state=1)
    report = diagnose(S, random_state=0, **FAST)
    assert report.flags["mismatch"]
    assert report.details["radial"] and not report.details["anisotropic"]
    assert report.radial_metric == "mahalanobis"
    # an exactly thin shell (no radial noise): radial spread far below a Gaussian's
    thin, _ = SphericalShellTasks(n_features=8, n_shells=1, radial_noise=0.0).sample_task(
        100, 0, random_state=0
    )
    report = diagnose(thin, random_state=0, **FAST)
    assert report.flags["mismatch"] and report.details["shell_like"]
    assert report.radial_ratio < 0.2


def test_mismatch_rate_shells_vs_gaussians():
    """Most shell supports are flagged, isotropic Gaussian supports of the same size never."""
    shells, _ = SphericalShellTasks(n_features=8).sample_tasks(20, 200, 0, random_state=0)
    gauss = np.random.default_rng(0).standard_normal((20, 200, 8))
    kw = {"n_trajectories": 4, "n_steps": 4, "random_state": 0}
    shell_rate = np.mean([diagnose(S, **kw).flags["mismatch"] for S in shells])
    gauss_rate = np.mean([diagnose(G, **kw).flags["mismatch"] for G in gauss])
    assert shell_rate >= 0.4
    assert gauss_rate == 0.0


def test_anisotropy_flagged_on_elongated_data():
    rng = np.random.default_rng(0)
    S = rng.standard_normal((200, 4)) * np.array([10.0, 0.5, 0.5, 0.5])
    report = diagnose(S, random_state=0, **FAST)
    assert report.flags["mismatch"] and report.details["anisotropic"]
    assert report.effective_dimension < 1.5
    assert report.condition_number > 100


def test_geometry_numbers():
    rng = np.random.default_rng(0)
    S = rng.standard_normal((400, 3)) * np.array([3.0, 2.0, 1.0])
    report = diagnose(S, random_state=0, **FAST)
    lam = np.linalg.eigvalsh(np.cov(S.T))[::-1]
    np.testing.assert_allclose(report.eigenvalues, lam, rtol=1e-10)
    assert report.condition_number == pytest.approx(lam[0] / lam[-1])
    assert report.effective_dimension == pytest.approx(lam.sum() ** 2 / (lam**2).sum())
    n, d = 399, 3
    assert report.isotropic_effective_dimension == pytest.approx((n * d + 2) / (n + d + 1))
    assert 0.4 < report.radial_ratio < 2.5
    assert report.support_ratio == pytest.approx(400 / 3)


# --------------------------------------------------------------------------------------------
# healthy support, scarcity
# --------------------------------------------------------------------------------------------


def test_nothing_flagged_on_low_dimensional_gaussian():
    S = np.random.default_rng(0).standard_normal((500, 2))
    report = diagnose(S, random_state=0, **FAST)
    # the KDE of bandwidth 0.01 copies 500 points in 2-D (samples 0.01 * sqrt(2) from a support
    # point, support points about 0.08 apart): memorisation is the only flag
    assert report.flags == {
        "collapse": False,
        "mismatch": False,
        "scarcity": False,
        "memorization": True,
    }
    assert report.neff_mid > 50
    assert report.collapse_time is not None and report.collapse_time > 0.8


def test_scarcity_rule():
    rng = np.random.default_rng(0)
    assert diagnose(rng.standard_normal((9, 1)), **FAST).flags["scarcity"]  # m < 10
    assert diagnose(rng.standard_normal((15, 8)), **FAST).flags["scarcity"]  # m < 2d
    assert not diagnose(rng.standard_normal((16, 8)), **FAST).flags["scarcity"]


def test_tiny_support_whose_variance_squared_underflows():
    """Regression (issue 12): the variance 3.3e-318 of this support squares to 0."""
    report = diagnose(np.array([[0.0], [2.557e-159]]), **FAST)
    assert report.effective_dimension == 1.0 and report.anisotropy == 1.0
    assert report.eigenvalues[0] == pytest.approx(2.557e-159**2 / 2, rel=1e-4)
    assert report.radial_cv2 == 0.0  # two points at the same distance from their mean
    assert report.flags == {
        "collapse": False,
        "mismatch": False,
        "scarcity": True,
        "memorization": False,  # samples 0.01 away, the two support points 2.6e-159 apart
    }


@pytest.mark.parametrize("scale", [1e-160, 1e-80, 1e80, 1e150])
def test_geometry_is_scale_free(scale):
    S = np.random.default_rng(0).standard_normal((60, 3)) * np.array([3.0, 1.0, 0.2])
    ref = diagnose(S, **FAST)
    report = diagnose(S * scale, **FAST)
    if scale**2 > 1e-300:  # eigenvalues in the support's units are representable
        np.testing.assert_allclose(report.eigenvalues / scale**2, ref.eigenvalues, rtol=1e-10)
    else:
        assert np.all(report.eigenvalues < 1e-300)
    for name in ("condition_number", "effective_dimension", "anisotropy", "radial_ratio"):
        assert getattr(report, name) == pytest.approx(getattr(ref, name), rel=1e-10), name
    assert report.details == ref.details


def test_degenerate_supports():
    one = diagnose(np.ones((1, 3)), **FAST)
    assert one.flags["collapse"] and one.flags["scarcity"] and not one.flags["mismatch"]
    assert one.neff_mid == pytest.approx(1.0)
    same = diagnose(np.ones((20, 2)), **FAST)  # all points coincide: no geometry
    assert not same.flags["mismatch"]
    assert math.isnan(same.effective_dimension)
    small = diagnose(np.random.default_rng(0).standard_normal((5, 2)), **FAST)
    assert not small.details["geometry_assessed"] and not small.flags["mismatch"]


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("func", [diagnose, neff_along_path])
@pytest.mark.parametrize(
    "support, match",
    [
        (np.array([[0.0, np.nan], [1.0, 2.0]]), "NaN"),
        (np.array([[0.0, np.inf], [1.0, 2.0]]), "NaN or infinity"),
        (np.arange(5.0), "2-D"),
        (np.zeros((0, 3)), "empty"),
        (np.zeros((3, 0)), "0 features"),
    ],
)
def test_bad_support(func, support, match):
    with pytest.raises(ValueError, match=match):
        func(support)


def test_non_numeric_support():
    with pytest.raises(TypeError, match="numeric"):
        diagnose(np.array([["a", "b"]]))


@pytest.mark.parametrize("sigma_min", [0.0, 1.0, -0.1, 1.5, float("nan"), "0.1", True])
def test_bad_sigma_min(sigma_min):
    with pytest.raises(ValueError, match="sigma_min"):
        diagnose(np.zeros((3, 2)), sigma_min=sigma_min)


def test_sigma_min_none_is_the_default():
    # None: the sampler's sigma_min for a sampler, 0.01 for an array
    assert diagnose(np.eye(3), sigma_min=None, **FAST).sigma_min == 0.01


@pytest.mark.parametrize("times", [[-0.1, 0.5], [0.5, 1.2], [float("nan")], [], [[0.1, 0.2]]])
def test_bad_times(times):
    with pytest.raises(ValueError, match="times"):
        diagnose(np.zeros((3, 2)), times=times)


@pytest.mark.parametrize("name", ["n_trajectories", "n_steps"])
@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_bad_counts(name, value):
    with pytest.raises(ValueError, match=name):
        diagnose(np.zeros((3, 2)), **{name: value})


def test_bad_random_state():
    with pytest.raises(ValueError, match="random_state"):
        diagnose(np.zeros((3, 2)), random_state="seed")


# --------------------------------------------------------------------------------------------
# report: summary, to_dict, plot, reproducibility
# --------------------------------------------------------------------------------------------


def test_report_summary_and_dict():
    S = np.random.default_rng(0).standard_normal((20, 64))
    report = diagnose(S, times=[0.25, 0.5, 0.75], random_state=0, **FAST)
    assert report.times.tolist() == [0.25, 0.5, 0.75]
    _, neff = neff_along_path(S, times=[0.25, 0.5, 0.75], random_state=0, **FAST)
    q25, med, q75 = np.percentile(neff, [25, 50, 75], axis=1)
    np.testing.assert_allclose(report.neff_median, med, rtol=1e-12)
    np.testing.assert_allclose(report.neff_q25, q25, rtol=1e-12)
    np.testing.assert_allclose(report.neff_q75, q75, rtol=1e-12)
    assert report.neff_mid == pytest.approx(med[1], rel=1e-12)
    text = report.summary()
    assert str(report) == text and len(text.splitlines()) >= 5
    for number in (
        f"{report.neff_mid:.3g}",
        f"{report.effective_dimension:.3g}",
        f"{report.anisotropy:.3g}",
        f"{report.radial_ratio:.3g}",
        f"{report.collapse_time:.3g}",
        "m=20",
        "d=64",
    ):
        assert number in text, number
    assert "collapse=True" in text and "scarcity=True" in text and "mismatch=False" in text
    data = report.to_dict()
    json.dumps(data)  # plain Python values only
    assert data["flags"] == report.flags
    assert data["eigenvalues"] == report.eigenvalues.tolist()
    assert data["n_support"] == 20 and data["n_features"] == 64


@pytest.mark.exactness
def test_report_reproducible():
    S = np.random.default_rng(0).standard_normal((30, 4))
    a = diagnose(S, random_state=5, **FAST)
    b = diagnose(S, random_state=np.random.default_rng(5), **FAST)
    np.testing.assert_array_equal(a.neff_median, b.neff_median)
    assert a.to_dict() == b.to_dict()


def test_report_plot_agg():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = diagnose(np.random.default_rng(0).standard_normal((20, 16)), random_state=0, **FAST)
    fig, axes = report.plot()
    assert axes[0].get_yscale() == "log"
    median_line = axes[0].lines[0]
    np.testing.assert_allclose(median_line.get_xdata(), report.times)
    np.testing.assert_allclose(median_line.get_ydata(), report.neff_median)
    assert axes[0].lines[1].get_ydata()[0] == 2.0  # the collapse threshold
    positive = report.eigenvalues[report.eigenvalues > 0]
    np.testing.assert_allclose(axes[1].lines[0].get_ydata(), positive)
    plt.close(fig)
    fig2, given = plt.subplots(1, 2)
    fig_out, axes_out = report.plot(ax=given)
    assert fig_out is fig2 and axes_out[0] is given[0]
    with pytest.raises(ValueError, match="two"):
        report.plot(ax=given[:1])
    plt.close(fig2)


def test_plot_without_matplotlib(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    report = diagnose(np.zeros((3, 2)) + np.arange(3.0)[:, None], **FAST)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        report.plot()


# --------------------------------------------------------------------------------------------
# memorisation, and fitted samplers
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_split():
    from sklearn.datasets import load_digits

    X = load_digits().data  # raw pixels, 0-16
    order = np.random.default_rng(0).permutation(X.shape[0])
    return X[order[:400]], X[order[400:800]]


@pytest.mark.filterwarnings("ignore::skflow.exceptions.MemorizationWarning")
def test_diagnose_accepts_a_fitted_sampler_and_flags_copies(digits_split):
    """Raw digit pixels with sigma_min = 0.01: samples are near-copies (issue 22)."""
    from sklearn.preprocessing import StandardScaler

    from skflow import NWFlowSampler

    S, held_out = digits_split
    raw = NWFlowSampler(sigma_min=0.01, solver=SolverOptions(n_steps=10)).fit(S)
    for reference in (held_out, None):
        report = diagnose(raw, reference=reference, random_state=0, **FAST)
        assert report.sigma_min == 0.01 and report.n_support == 400
        assert report.flags["memorization"] and report.memorization_ratio < 0.05
    assert report.memorization_reference == "leave-one-out"
    held = diagnose(raw, reference=held_out, random_state=0, **FAST)
    assert held.memorization_reference == "held-out"
    assert held.real_dcr_median == pytest.approx(
        np.median(np.min(np.linalg.norm(held_out[:, None] - S[None], axis=2), axis=1))
    )
    assert "memorization" in held.summary() and "memorization=True" in held.summary()
    # standardised, with a terminal bandwidth of half a unit: new points, nothing copied
    scaler = StandardScaler().fit(S)
    good = NWFlowSampler(sigma_min=0.5, solver=SolverOptions(n_steps=10)).fit(scaler.transform(S))
    for reference in (scaler.transform(held_out), None):
        report = diagnose(good, reference=reference, random_state=0, **FAST)
        assert not report.flags["memorization"] and report.memorization_ratio > 0.7


def test_memorization_of_arrays_uses_exact_kde_draws():
    """Without a sampler, the samples are the terminal KDE's: ratio ~ sigma_min sqrt(d) / NN."""
    S = np.random.default_rng(0).standard_normal((300, 2))
    copies = diagnose(S, sigma_min=0.001, random_state=0, **FAST)
    spread = diagnose(S, sigma_min=0.5, random_state=0, **FAST)
    assert copies.flags["memorization"] and copies.memorization_ratio < 0.05
    assert not spread.flags["memorization"]
    assert copies.memorization_reference == "leave-one-out"


def test_diagnose_refuses_a_sampler_without_support():
    from skflow import NWFlowSampler

    with pytest.raises(ValueError, match="fitted sampler"):
        diagnose(NWFlowSampler())


def test_diagnose_uses_the_samplers_own_samples():
    """An untrained learned sampler does not copy its support, whatever the KDE of the same
    support at sigma_min = 0.01 does: the samples diagnosed are the sampler's."""
    from skflow import LearnedFlowSampler, TrainingOptions

    S = np.random.default_rng(0).standard_normal((100, 2))
    untrained = LearnedFlowSampler(
        training=TrainingOptions(max_iter=0), solver=SolverOptions(n_steps=2), random_state=0
    ).fit(S)
    assert diagnose(S, sigma_min=0.01, random_state=0, **FAST).flags["memorization"]
    report = diagnose(untrained, random_state=0, **FAST)
    assert report.sigma_min == untrained.sigma_min
    assert not report.flags["memorization"]


def test_diagnose_a_framed_sampler_in_its_frame():
    """``sigma_min="auto"`` (a per-support frame) is diagnosed on the flow that runs: the
    framed support with the frame's sigma; equal to diagnosing that framed support directly."""
    from skflow import NWFlowSampler

    S = np.random.default_rng(0).normal(size=(40, 3)) * 7.0 + 50.0
    sampler = NWFlowSampler(sigma_min="auto", solver=SolverOptions(n_steps=10)).fit(S)
    report = diagnose(sampler, n_trajectories=32, n_steps=10, random_state=0)
    sigma = sampler.path_.sigma_min
    assert report.sigma_min == sigma
    framed = (S - S.mean(axis=0)) / (sampler.kde_bandwidth_ / sigma)
    direct = diagnose(framed, sigma_min=sigma, n_trajectories=32, n_steps=10, random_state=0)
    np.testing.assert_allclose(report.neff_median, direct.neff_median)
    assert report.memorization_ratio > 0.3  # the automatic bandwidth does not copy


def test_sampler_is_diagnosed_on_its_own_path():
    """A sampler on a cosine path is diagnosed along that path, not the OT path of the same
    sigma_min (the n_eff of the flow that runs)."""
    from skflow import NWFlowSampler
    from skflow.paths import CosinePath

    S = np.random.default_rng(5).standard_normal((40, 2))
    kw = {"times": [0.3, 0.5, 0.8], "n_trajectories": 32, "n_steps": 10, "random_state": 4}
    path = CosinePath(0.2)
    report = diagnose(NWFlowSampler(sigma_min=0.2, path=path).fit(S), **kw)
    _, on_path = neff_along_path(S, path=path, **kw)
    _, on_ot = neff_along_path(S, sigma_min=0.2, **kw)
    assert report.sigma_min == 0.2
    np.testing.assert_allclose(report.neff_median, np.median(on_path, axis=1), atol=1e-10)
    assert np.max(np.abs(np.median(on_ot, axis=1) - report.neff_median)) > 0.5


def test_sampler_is_diagnosed_with_its_own_kernel():
    """A sampler's own bandwidth and fitted projection shape the n_eff diagnose reports: it
    equals neff_along_path with that kernel and differs from the isotropic OT-bandwidth
    flow."""
    from skflow import NWFlowSampler

    S = np.random.default_rng(6).standard_normal((40, 3)) * [3.0, 1.0, 0.2]
    kw = {"times": [0.3, 0.5, 0.8], "n_trajectories": 32, "n_steps": 10, "random_state": 4}
    _, ot = neff_along_path(S, sigma_min=0.1, **kw)
    for params in ({"bandwidth": 0.3}, {"kernel": "mahalanobis"}):
        sampler = NWFlowSampler(sigma_min=0.1, **params).fit(S)
        kernel = {"bandwidth": sampler.bandwidth, "projection": sampler.projection_}
        report = diagnose(sampler, **kw)
        _, own = neff_along_path(S, sigma_min=0.1, **kernel, **kw)
        np.testing.assert_allclose(report.neff_median, np.median(own, axis=1), atol=1e-10)
        assert np.max(np.abs(np.median(ot, axis=1) - report.neff_median)) > 0.5, params
