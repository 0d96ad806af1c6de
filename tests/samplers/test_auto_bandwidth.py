"""NWFlowSampler's per-support frame and automatic bandwidth (``sigma_min="auto"``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.neighbors import KernelDensity

from skflow import NWFlowSampler, SigmaMinSearch, SolverOptions
from skflow.exceptions import MemorizationWarning
from skflow.metrics import memorization_ratio
from skflow.samplers._bandwidth import (
    COPY_FLOOR,
    RULE_EXPONENT,
    RULE_SCALE,
    auto_bandwidth,
    rule_sigma,
    support_frames,
)


def _support(seed=0, m=20, d=3, scale=7.0, shift=100.0):
    return np.random.default_rng(seed).normal(size=(m, d)) * scale + shift


def test_auto_terminal_law_is_the_kde_of_the_chosen_bandwidth():
    S = _support()
    s = NWFlowSampler(sigma_min="auto").fit(S)
    h = s.kde_bandwidth_
    assert h == pytest.approx(auto_bandwidth(S))
    q = _support(seed=1)
    ref = KernelDensity(bandwidth=h).fit(S).score_samples(q)
    np.testing.assert_allclose(s.score_samples(q), ref, rtol=1e-10, atol=1e-9)


def test_auto_rule_has_its_documented_constants():
    """The numbers of the rule as the docs state them (``h = max(1.27 m^-0.37 spread,
    0.67 nn / sqrt(d))``, fitted by ``benchmarks/bench_auto_bandwidth.py --fit``), written
    here as literals: a test that recomputes the value from the constants would pass any
    edit of them."""
    assert (RULE_SCALE, RULE_EXPONENT, COPY_FLOOR) == (1.27, 0.37, 0.67)
    assert rule_sigma(10) == pytest.approx(0.541756, rel=1e-5)  # 1.27 * 10 ** -0.37
    # 40 rows in 2-D: the MMD term binds
    S = np.random.default_rng(0).normal(size=(40, 2))
    spread = float(np.sqrt(((S - S.mean(0)) ** 2).sum() / (39 * 2)))
    assert auto_bandwidth(S) == pytest.approx(1.27 * 40**-0.37 * spread, rel=1e-12)
    # ten rows in 2-D spread wide but with a close pair: the nearest-neighbour floor binds
    S = np.array([[-3, 0], [3, 0], [0, -3], [0, 3], [-1, -1], [1, 1], [2, -2], [-2, 2],
                  [0.5, 0], [-0.5, 0]], dtype=float)  # fmt: skip
    D = np.linalg.norm(S[:, None] - S[None], axis=-1)
    np.fill_diagonal(D, np.inf)
    nn = float(np.median(D.min(axis=1)))
    assert auto_bandwidth(S) == pytest.approx(0.67 * nn / np.sqrt(2), rel=1e-12)


def test_auto_rule_is_the_larger_of_its_two_terms():
    S = _support(m=30, d=4)
    spread = np.sqrt(((S - S.mean(0)) ** 2).sum() / (29 * 4))
    D = np.linalg.norm(S[:, None] - S[None], axis=-1)
    np.fill_diagonal(D, np.inf)
    nn = np.median(D.min(axis=1))
    expected = max(rule_sigma(30) * spread, COPY_FLOOR * nn / 2.0)
    assert auto_bandwidth(S) == pytest.approx(expected)
    assert rule_sigma(30) == pytest.approx(RULE_SCALE * 30**-RULE_EXPONENT)
    # 200 points in 16-D: the nearest-neighbour floor binds (samples stay off the support)
    S = np.random.default_rng(1).normal(size=(200, 16))
    D = np.linalg.norm(S[:, None] - S[None], axis=-1)
    np.fill_diagonal(D, np.inf)
    floor = COPY_FLOOR * np.median(D.min(axis=1)) / 4.0
    assert floor > rule_sigma(200) * np.sqrt(S.var(axis=0, ddof=1).mean())
    assert auto_bandwidth(S) == pytest.approx(floor)


def test_auto_is_equivariant_to_shifts_and_scales():
    """The frame makes the sampler affine-equivariant (isotropic scale): same noise, same
    samples up to the map."""
    S = _support(scale=1.0, shift=0.0)
    s = NWFlowSampler(sigma_min="auto", solver=SolverOptions(n_steps=20))
    x0 = np.random.default_rng(3).standard_normal((50, 3))
    a = s.fit(S).sample(50, noise=x0)
    b = s.fit(S * 1000.0 + 5.0).sample(50, noise=x0)
    np.testing.assert_allclose(b, a * 1000.0 + 5.0, rtol=1e-8, atol=1e-6)


def test_batched_supports_get_their_own_bandwidth_and_match_one_by_one():
    rng = np.random.default_rng(0)
    SB = rng.normal(size=(4, 15, 3)) * np.array([0.1, 1.0, 10.0, 100.0])[:, None, None]
    s = NWFlowSampler(sigma_min="auto", solver=SolverOptions(n_steps=20)).fit(SB[0])
    X = s.sample(6, support=SB, random_state=1)
    X0 = np.random.RandomState(1).standard_normal((4, 6, 3))
    for b in range(4):
        np.testing.assert_allclose(X[b], s.sample(6, support=SB[b], noise=X0[b]), atol=1e-10)
    _, scale, sigma = support_frames(SB, "auto", True)
    np.testing.assert_allclose(scale[:, 0, 0] * sigma, auto_bandwidth(SB))
    # a list of supports of different sizes, too
    out = s.sample(3, support=[SB[0], SB[1, :7]], random_state=0)
    assert out.shape == (2, 3, 3)


def test_velocity_and_trajectories_are_in_data_units():
    S = _support()
    s = NWFlowSampler(sigma_min="auto", solver=SolverOptions("rk4", n_steps=200)).fit(S)
    t, T = s.sample_trajectories(4, random_state=0)
    assert T.shape == (201, 4, 3)
    k = 100
    finite = (T[k + 1] - T[k - 1]) / (t[k + 1] - t[k - 1])
    v = s.velocity(T[k], t[k])
    np.testing.assert_allclose(finite, v, atol=1e-3 * np.abs(v).max())
    # the start is the noise mapped into the support's frame
    centre, scale, _ = support_frames(S, "auto", True)
    x0 = np.random.RandomState(0).standard_normal((4, 3))
    np.testing.assert_allclose(T[0], centre + scale * x0)
    np.testing.assert_allclose(s.weights(T[k], t[k]).sum(axis=1), 1.0)


def test_normalize_true_makes_a_float_sigma_min_relative_to_the_spread():
    S = _support()
    spread = np.sqrt(((S - S.mean(0)) ** 2).sum() / (19 * 3))
    s = NWFlowSampler(sigma_min=0.3, normalize=True).fit(S)
    assert s.kde_bandwidth_ == pytest.approx(0.3 * spread)
    assert NWFlowSampler(sigma_min=0.3).fit(S).kde_bandwidth_ == 0.3  # "auto": no frame
    q = _support(seed=2)
    ref = KernelDensity(bandwidth=0.3 * spread).fit(S).score_samples(q)
    np.testing.assert_allclose(s.score_samples(q), ref, rtol=1e-10)


def test_auto_does_not_copy_raw_digit_pixels():
    """Raw 0-16 pixels (nearest neighbours ~17 apart), one support of 20 rows per class in
    one batched call: no warning, and a median memorisation ratio over the classes >= 0.5."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    # random rows: the file is ordered by writer, and rows of one writer are closer to each
    # other than to fresh rows (a failure case of the rule, see docs/auto_bandwidth.md)
    rows = [np.random.default_rng(c).permutation(X[y == c]) for c in range(10)]
    S = np.stack([r[:20] for r in rows])
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemorizationWarning)
        s = NWFlowSampler(sigma_min="auto", random_state=0, solver=SolverOptions(n_steps=30)).fit(
            S[0]
        )
    gen = s.sample(100, support=S)
    ratios = [memorization_ratio(gen[c], S[c], rows[c][20:]) for c in range(10)]
    assert np.median(ratios) >= 0.5


def _few_shot_panel(est, X, y):
    """An independent oracle of the selection's scorers: per class, the first half the
    support and the rest the reference, multi-scale MMD² and memorisation ratio."""
    from skflow.metrics import memorization_ratio, multiscale_mmd2

    d, memo = [], []
    for label in np.unique(y):
        rows = X[y == label]
        k = rows.shape[0] // 2
        gen = est.sample(rows.shape[0] - k, support=rows[:k], random_state=0)
        d.append(multiscale_mmd2(gen, rows[k:], scales=(0.25, 1.0, 4.0), reference=rows[k:]))
        memo.append(memorization_ratio(gen, rows[:k], rows[k:]))
    return float(np.mean(d)), float(np.mean(memo))


def _copy_aware_refit(cv_results):
    """GridSearchCV's ``refit`` rule: lowest MMD² among candidates not below 0.5 memo."""
    mmd = -np.asarray(cv_results["mean_test_mmd"])
    memo = np.asarray(cv_results["mean_test_memo"])
    ok = memo >= 0.5
    return int(np.flatnonzero(ok)[np.argmin(mmd[ok])])


def test_fit_with_labels_equals_grid_search_over_class_groups():
    from sklearn.datasets import load_iris
    from sklearn.model_selection import GridSearchCV, GroupKFold
    from sklearn.preprocessing import StandardScaler

    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    grid = ["auto", 0.01, 0.05, 0.3]
    search = SigmaMinSearch(grid=grid, cv=3)
    s = NWFlowSampler(sigma_min_search=search, solver=SolverOptions(n_steps=10)).fit(X, y)
    scoring = {
        "mmd": lambda est, X, y: -_few_shot_panel(est, X, y)[0],
        "memo": lambda est, X, y: _few_shot_panel(est, X, y)[1],
    }
    gs = GridSearchCV(
        NWFlowSampler(sigma_min_search=None, solver=SolverOptions(n_steps=10)),
        {"sigma_min": grid},
        cv=GroupKFold(3),
        scoring=scoring,
        refit=_copy_aware_refit,
    ).fit(X, y, groups=y)
    assert s.sigma_min_ == gs.best_params_["sigma_min"]
    # the same kernels on the same arrays in another order of summation: 1e-12
    np.testing.assert_allclose(
        s.cv_scores_.mean(axis=1), gs.cv_results_["mean_test_mmd"], rtol=1e-12
    )
    for k in range(3):
        np.testing.assert_allclose(
            s.cv_scores_[:, k], gs.cv_results_[f"split{k}_test_mmd"], rtol=1e-12
        )
        np.testing.assert_allclose(
            s.cv_memorization_[:, k], gs.cv_results_[f"split{k}_test_memo"], rtol=1e-12
        )
    assert len(s.selection_reasons_) == len(grid)
    assert s.selection_reasons_[grid.index(s.sigma_min_)].startswith("chosen")
    # the choice is what the sampler then uses
    chosen = NWFlowSampler(sigma_min=s.sigma_min_).fit(X)
    assert s.kde_bandwidth_ == pytest.approx(chosen.kde_bandwidth_)


def test_fit_with_labels_never_chooses_a_copier():
    """Where the paper's plug-in (sigma_min=0.01) wins median-bandwidth MMD² by copying, the
    copy-aware selection does not choose it (the former rule did)."""
    from skflow.metrics import memorization_ratio, mmd2

    X, y = _two_blob_classes()
    grid = [0.01, 0.3]
    s = NWFlowSampler(sigma_min_search=SigmaMinSearch(grid=grid, cv=3), random_state=0)
    s.fit(X, y)
    assert s.sigma_min_ == 0.3
    assert s.cv_memorization_[0].mean() < 0.5 <= s.cv_memorization_[1].mean()
    assert "copies" in s.selection_reasons_[0]
    # the premise: 0.01 wins median-bandwidth MMD² on held-out classes and copies
    copier = NWFlowSampler(sigma_min=0.01, random_state=0)
    wide = NWFlowSampler(sigma_min=0.3, random_state=0)
    d = {0.01: [], 0.3: []}
    for c in range(10, 12):
        rows = X[y == c]
        for est, key in ((copier, 0.01), (wide, 0.3)):
            gen = est.fit(rows[:20]).sample(20)
            d[key].append(mmd2(gen, rows[20:], reference=rows[20:]))
    assert np.mean(d[0.01]) < np.mean(d[0.3])
    assert memorization_ratio(copier.sample(20), rows[:20], rows[20:]) < 0.5


def _two_blob_classes(n_classes=12, n=40, seed=0):
    """Classes of two tight blobs far apart: Gaussians fit them badly, copies well."""
    rng = np.random.default_rng(seed)
    centres = 6 * rng.normal(size=(n_classes, 2, 2))
    pick = rng.integers(0, 2, size=(n_classes, n))
    X = np.take_along_axis(centres, pick[..., None].repeat(2, -1), 1)
    X = X + 0.3 * rng.normal(size=(n_classes, n, 2))
    return X.reshape(-1, 2), np.repeat(np.arange(n_classes), n)


def test_fit_without_labels_or_grid_is_unchanged():
    X = _support(m=30)
    y = np.repeat([0, 1, 2], 10)
    plain = NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=5)).fit(X)
    assert not hasattr(plain, "sigma_min_")
    ignored = NWFlowSampler(
        random_state=0, sigma_min_search=None, solver=SolverOptions(n_steps=5)
    ).fit(X, y)
    np.testing.assert_array_equal(plain.sample(4), ignored.sample(4))
    search = SigmaMinSearch(grid=[0.5], cv=2)
    tuned = NWFlowSampler(sigma_min_search=search, solver=SolverOptions(n_steps=5)).fit(X, y)
    assert tuned.sigma_min_ == 0.5
    assert not hasattr(tuned.fit(X), "sigma_min_")  # a refit without labels forgets it
    with pytest.raises(ValueError, match="2 classes"):
        NWFlowSampler().fit(X, np.zeros(30))


def test_one_row_support_and_constant_support_sample():
    s = NWFlowSampler(sigma_min="auto", random_state=0, solver=SolverOptions(n_steps=5)).fit(
        np.ones((1, 2))
    )
    assert np.isfinite(s.sample(3)).all()
    assert np.isfinite(s.sample(3, support=np.ones((4, 2)))).all()


@pytest.mark.parametrize(
    ("params", "match"),
    [({"sigma_min": "scott"}, "sigma_min"), ({"normalize": "yes"}, "normalize")],
)
def test_invalid_rule_or_frame(params, match):
    with pytest.raises(ValueError, match=match):
        NWFlowSampler(**params).fit(np.zeros((3, 2)))


@pytest.mark.parametrize("params", [{"backend": "torch"}, {"engine": "pruned"}])
def test_auto_frame_on_every_backend_and_engine(params):
    """The frame is applied the same way on Torch (float32 tensors) and by the pruned
    engine, whose proven bound is then in data units."""
    S = _support(m=40).astype(np.float32)
    ref = NWFlowSampler(sigma_min="auto", backend="numpy", solver=SolverOptions(n_steps=20)).fit(S)
    other = NWFlowSampler(sigma_min="auto", **params, solver=SolverOptions(n_steps=20)).fit(S)
    a, b = ref.sample(30, random_state=0), other.sample(30, random_state=0)
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3 * np.abs(S).max())
    if "engine" in params:
        assert 0.0 <= other.sampling_error_bound_ < 1e-4 * np.abs(S).max()
