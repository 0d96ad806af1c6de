"""Tests of skflow.metrics against independent brute-force and scipy oracles."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist, pdist
from scipy.stats import pearsonr, spearmanr

from skflow.metrics import (
    MMDTestResult,
    WeightCorrelation,
    effective_sample_size,
    mmd2,
    mmd2_test,
    nw_weight_correlation,
)

# --------------------------------------------------------------------------------------------
# oracles
# --------------------------------------------------------------------------------------------


def oracle_median(X, Y):
    return float(np.median(pdist(np.vstack([X, Y]))))


def oracle_mmd2(X, Y, bandwidths, unbiased):
    """Direct O(n²) float64 MMD² from full kernel matrices (scipy cdist distances)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    hs = np.atleast_1d(np.asarray(bandwidths, dtype=np.float64))

    def gram(A, B):
        D2 = cdist(A, B, "sqeuclidean")
        return sum(np.exp(-D2 / (2.0 * h * h)) for h in hs)

    Kxx, Kyy, Kxy = gram(X, X), gram(Y, Y), gram(X, Y)
    n, m = len(X), len(Y)
    if unbiased:
        return (
            (Kxx.sum() - np.trace(Kxx)) / (n * (n - 1))
            + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1))
            - 2.0 * Kxy.mean()
        )
    return Kxx.mean() + Kyy.mean() - 2.0 * Kxy.mean()


@pytest.fixture
def xy():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(37, 3))
    Y = rng.normal(size=(29, 3)) * 1.3 + 0.4
    return X, Y


# --------------------------------------------------------------------------------------------
# mmd2
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("unbiased", [True, False])
@pytest.mark.parametrize("bandwidth", ["median", 0.7, [0.3, 1.0, 3.0]])
def test_mmd2_matches_bruteforce(xy, unbiased, bandwidth):
    X, Y = xy
    h = oracle_median(X, Y) if bandwidth == "median" else bandwidth
    expected = oracle_mmd2(X, Y, h, unbiased)
    got = mmd2(X, Y, bandwidth=bandwidth, unbiased=unbiased)
    assert isinstance(got, float)
    assert abs(got - expected) < 1e-12


@pytest.mark.parametrize("unbiased", [True, False])
@pytest.mark.parametrize("bandwidth", ["median", [0.5, 2.0]])
def test_mmd2_chunked_equals_unchunked(xy, unbiased, bandwidth):
    X, Y = xy
    full = mmd2(X, Y, bandwidth=bandwidth, unbiased=unbiased, chunk_size=10_000)
    for chunk in (1, 7, 16):
        got = mmd2(X, Y, bandwidth=bandwidth, unbiased=unbiased, chunk_size=chunk)
        assert abs(got - full) < 1e-12


def test_mmd2_row_permutation_invariant_and_symmetric(xy):
    X, Y = xy
    rng = np.random.default_rng(3)
    base = mmd2(X, Y)
    assert abs(mmd2(X[rng.permutation(len(X))], Y) - base) < 1e-12
    assert abs(mmd2(X, Y[rng.permutation(len(Y))]) - base) < 1e-12
    assert abs(mmd2(Y, X) - base) < 1e-12
    assert abs(mmd2(Y, X, unbiased=False) - mmd2(X, Y, unbiased=False)) < 1e-12


def test_mmd2_unbiased_is_centered_under_null():
    values = []
    for seed in range(50):
        rng = np.random.default_rng(seed)
        values.append(mmd2(rng.normal(size=(40, 2)), rng.normal(size=(30, 2)), bandwidth=1.0))
    values = np.asarray(values)
    sem = values.std(ddof=1) / np.sqrt(len(values))
    assert abs(values.mean()) < 3 * sem
    assert np.any(values < 0)  # the U-statistic is not clipped


def test_mmd2_biased_nonnegative_and_zero_on_identical():
    rng = np.random.default_rng(4)
    for _ in range(10):
        X = rng.normal(size=(15, 2))
        Y = rng.normal(size=(12, 2))
        assert mmd2(X, Y, unbiased=False) >= 0.0
    X = rng.normal(size=(20, 3))
    assert mmd2(X, X, unbiased=False) == pytest.approx(0.0, abs=1e-14)


def test_mmd2_detects_shift():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 2))
    assert mmd2(X, rng.normal(size=(200, 2)) + 1.0) > 10 * abs(mmd2(X, rng.normal(size=(200, 2))))


def test_median_heuristic_matches_pdist(xy):
    X, Y = xy
    _, h = mmd2(X, Y, return_bandwidth=True)
    assert h == pytest.approx(oracle_median(X, Y), rel=1e-14)
    _, h = mmd2(X, Y, reference=X, return_bandwidth=True)
    assert h == pytest.approx(float(np.median(pdist(X))), rel=1e-14)
    _, hs = mmd2(X, Y, bandwidth=[1, 2.5], return_bandwidth=True)
    assert hs == (1.0, 2.5)
    _, h1 = mmd2(X, Y, bandwidth=2, return_bandwidth=True)
    assert h1 == 2.0 and isinstance(h1, float)


def test_median_heuristic_subsample_rule():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(900, 2))
    Y = rng.normal(size=(700, 2))
    N = 1600
    idx = (np.arange(1000) * N) // 1000
    expected = float(np.median(pdist(np.vstack([X, Y])[idx])))
    _, h = mmd2(X, Y, bandwidth="median", return_bandwidth=True, chunk_size=512)
    assert h == pytest.approx(expected, rel=1e-14)


def test_reference_bandwidth_is_used(xy):
    X, Y = xy
    h = float(np.median(pdist(X)))
    assert abs(mmd2(X, Y, reference=X) - oracle_mmd2(X, Y, h, True)) < 1e-12


def test_mmd2_float32_computed_in_float64(xy):
    X, Y = (a.astype(np.float32) for a in xy)
    expected = oracle_mmd2(X.astype(np.float64), Y.astype(np.float64), 0.8, True)
    assert abs(mmd2(X, Y, bandwidth=0.8) - expected) < 1e-12


def test_mmd2_large_offset_is_accurate():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(30, 2))
    Y = rng.normal(size=(30, 2))
    base = mmd2(X, Y, bandwidth=1.0)
    assert abs(mmd2(X + 1e6, Y + 1e6, bandwidth=1.0) - base) < 1e-8


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mmd2_torch_matches_numpy(xy, dtype):
    X, Y = xy
    Xt, Yt = torch.as_tensor(X, dtype=dtype), torch.as_tensor(Y, dtype=dtype)
    Xn, Yn = Xt.double().numpy(), Yt.double().numpy()
    for bw in ("median", 0.9, [0.5, 2.0]):
        for unbiased in (True, False):
            got = mmd2(Xt, Yt, bandwidth=bw, unbiased=unbiased, chunk_size=11)
            assert isinstance(got, float)
            assert abs(got - mmd2(Xn, Yn, bandwidth=bw, unbiased=unbiased)) < 1e-12
    # mixed numpy / torch inputs are computed with torch
    assert abs(mmd2(Xt, Yn) - mmd2(Xn, Yn)) < 1e-12
    assert abs(mmd2(Xt, Yt, reference=Xt) - mmd2(Xn, Yn, reference=Xn)) < 1e-12


def test_mmd2_accepts_lists():
    X = [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    Y = [[2.0, 2.0], [3.0, 2.0]]
    assert abs(mmd2(X, Y, bandwidth=1.0) - oracle_mmd2(X, Y, 1.0, True)) < 1e-12


@pytest.mark.parametrize(
    "X, Y, kwargs, match",
    [
        (np.zeros((5, 3)), np.zeros((5, 4)), {}, "X has 3 features but Y has 4"),
        (np.zeros(5), np.zeros((5, 1)), {}, "X must be a 2-D array"),
        (np.zeros((5, 2)), np.zeros((2, 5, 2)), {}, "Y must be a 2-D array"),
        (np.zeros((0, 2)), np.ones((3, 2)), {}, "X is empty"),
        (np.ones((3, 2)), np.zeros((3, 0)), {}, "Y is empty"),
        (np.array([[np.nan, 0.0], [1.0, 2.0]]), np.ones((3, 2)), {}, "X contains NaN"),
        (np.ones((3, 2)), np.array([[np.inf, 0.0], [1.0, 2.0]]), {}, "Y contains NaN or inf"),
        (np.ones((3, 2)), np.ones((3, 2)), {"bandwidth": 0.0}, "bandwidth must be positive"),
        (np.ones((3, 2)), np.ones((3, 2)), {"bandwidth": -1.0}, "bandwidth must be positive"),
        (np.ones((3, 2)), np.ones((3, 2)), {"bandwidth": [1.0, 0.0]}, "bandwidth must be pos"),
        (np.ones((3, 2)), np.ones((3, 2)), {"bandwidth": float("nan")}, "bandwidth must be pos"),
        (np.ones((3, 2)), np.ones((3, 2)), {"bandwidth": []}, "bandwidth sequence is empty"),
        (np.ones((3, 2)), np.ones((3, 2)), {"bandwidth": "silverman"}, "bandwidth must be 'med"),
        (np.ones((1, 2)), np.ones((3, 2)), {"bandwidth": 1.0}, "X must have at least 2 rows"),
        (np.ones((3, 2)), np.ones((1, 2)), {"bandwidth": 1.0}, "Y must have at least 2 rows"),
        (np.ones((3, 2)), np.ones((3, 2)), {"chunk_size": 0}, "chunk_size must be a positive"),
        (np.ones((3, 2)), np.ones((3, 2)), {}, "median heuristic gave bandwidth 0"),
        (
            np.ones((3, 2)),
            np.zeros((3, 2)),
            {"bandwidth": 1.0, "reference": np.ones((4, 2))},
            "reference is only used by the median heuristic",
        ),
        (
            np.ones((3, 2)),
            np.zeros((3, 2)),
            {"reference": np.ones((4, 3))},
            "reference has 3 features but X has 2",
        ),
    ],
)
def test_mmd2_errors(X, Y, kwargs, match):
    with pytest.raises(ValueError, match=match):
        mmd2(X, Y, **kwargs)


def test_mmd2_biased_allows_single_rows():
    X, Y = np.zeros((1, 2)), np.ones((1, 2))
    assert mmd2(X, Y, bandwidth=1.0, unbiased=False) == pytest.approx(
        oracle_mmd2(X, Y, 1.0, False), abs=1e-14
    )


def test_mmd2_type_errors():
    with pytest.raises(TypeError, match="X must be numeric"):
        mmd2(np.array([["a", "b"], ["c", "d"]]), np.ones((2, 2)))
    with pytest.raises(TypeError, match="real-valued"):
        mmd2(np.ones((2, 2)) * 1j, np.ones((2, 2)))


def test_mmd2_torch_errors():
    with pytest.raises(ValueError, match="X contains NaN"):
        mmd2(torch.tensor([[float("nan")], [1.0]]), torch.ones(3, 1))
    with pytest.raises(ValueError, match="X has 2 features but Y has 1"):
        mmd2(torch.ones(3, 2), torch.ones(3, 1))
    with pytest.raises(ValueError, match="Y must be a 2-D array"):
        mmd2(torch.ones(3, 2), torch.ones(3))
    # inputs on two devices are refused, not copied (the "meta" device stands in for a GPU)
    with pytest.raises(ValueError, match="Y is on device meta but the other inputs are on cpu"):
        mmd2(torch.ones(3, 2), torch.ones(3, 2, device="meta"))


# --------------------------------------------------------------------------------------------
# mmd2_test
# --------------------------------------------------------------------------------------------


def test_mmd2_test_null_and_alternative():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(100, 2))
    same = mmd2_test(X, rng.normal(size=(100, 2)), random_state=0)
    assert isinstance(same, MMDTestResult)
    assert same.pvalue > 0.01
    shifted = mmd2_test(X, rng.normal(size=(100, 2)) + 1.0, random_state=0)
    assert shifted.pvalue < 0.01
    assert shifted.pvalue == pytest.approx(1.0 / 201)
    assert shifted.null_distribution.shape == (200,)


def test_mmd2_test_statistic_and_pvalue_definition(xy):
    X, Y = xy
    res = mmd2_test(X, Y, n_permutations=50, bandwidth=[0.5, 1.5], random_state=1)
    assert abs(res.statistic - mmd2(X, Y, bandwidth=[0.5, 1.5])) < 1e-12
    assert res.bandwidth == (0.5, 1.5)
    expected_p = (1 + np.sum(res.null_distribution >= res.statistic)) / 51
    assert res.pvalue == pytest.approx(expected_p)
    # the null statistics are the unbiased MMD² of relabelled pooled samples
    res_m = mmd2_test(X, Y, n_permutations=5, random_state=np.random.RandomState(2))
    Z = np.vstack([X, Y])
    rs = np.random.RandomState(2)
    for k in range(5):
        p = rs.permutation(len(Z))
        inx = np.zeros(len(Z), bool)
        inx[p[: len(X)]] = True
        ref = mmd2(Z[inx], Z[~inx], bandwidth=res_m.bandwidth)
        assert abs(res_m.null_distribution[k] - ref) < 1e-12
    assert res_m.bandwidth == pytest.approx(oracle_median(X, Y), rel=1e-14)


@pytest.mark.exactness
def test_mmd2_test_ties_count_as_extreme():
    """Identical samples: every relabelling gives exactly the observed statistic (0), so by the
    definition p = (1 + #{null >= observed}) / (1 + P) the p-value is exactly 1."""
    X = np.full((5, 2), 3.0)
    res = mmd2_test(X, X.copy(), n_permutations=19, bandwidth=1.0, random_state=0)
    assert res.statistic == 0.0
    np.testing.assert_array_equal(res.null_distribution, np.zeros(19))
    assert res.pvalue == 1.0


def test_mmd2_test_reproducible_and_torch(xy):
    X, Y = xy
    a = mmd2_test(X, Y, n_permutations=30, random_state=3)
    b = mmd2_test(torch.as_tensor(X), torch.as_tensor(Y), n_permutations=30, random_state=3)
    np.testing.assert_allclose(a.null_distribution, b.null_distribution, rtol=0, atol=1e-12)
    assert a.pvalue == b.pvalue


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_permutations": 0}, "n_permutations must be a positive integer"),
        ({"n_permutations": 2.5}, "n_permutations must be a positive integer"),
        ({"random_state": "seed"}, "random_state must be"),
        ({"bandwidth": -2.0}, "bandwidth must be positive"),
    ],
)
def test_mmd2_test_errors(xy, kwargs, match):
    X, Y = xy
    with pytest.raises(ValueError, match=match):
        mmd2_test(X, Y, **kwargs)


def test_mmd2_test_needs_two_rows():
    with pytest.raises(ValueError, match="Y must have at least 2 rows"):
        mmd2_test(np.ones((3, 2)), np.ones((1, 2)), bandwidth=1.0)


# --------------------------------------------------------------------------------------------
# effective_sample_size
# --------------------------------------------------------------------------------------------


def test_ess_uniform_and_one_hot():
    for m in (1, 2, 7, 100):
        out = effective_sample_size(np.full(m, 1.0 / m))
        assert isinstance(out, np.ndarray) and out.shape == ()
        assert out == pytest.approx(m)
    W = np.eye(5)
    np.testing.assert_allclose(effective_sample_size(W), np.ones(5))
    np.testing.assert_allclose(effective_sample_size(np.eye(4, dtype=int)), np.ones(4))


def test_ess_batch_dims_and_dtype():
    rng = np.random.default_rng(0)
    W = rng.random((2, 3, 6))
    W /= W.sum(-1, keepdims=True)
    out = effective_sample_size(W)
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, 1.0 / np.sum(W**2, axis=-1), rtol=1e-14)
    assert effective_sample_size(W.astype(np.float32)).dtype == np.float32


def test_ess_torch():
    W = torch.softmax(torch.randn(4, 9, generator=torch.Generator().manual_seed(0)), dim=-1)
    out = effective_sample_size(W)
    assert isinstance(out, torch.Tensor) and out.shape == (4,)
    np.testing.assert_allclose(out.numpy(), effective_sample_size(W.numpy()), rtol=1e-6)
    with pytest.raises(ValueError, match="probability vectors"):
        effective_sample_size(W * 2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1e3), min_size=1, max_size=40))
def test_ess_bounds_property(raw):
    w = np.asarray(raw)
    if w.sum() <= 0:
        w = np.ones_like(w)
    w = w / w.sum()
    n_eff = float(effective_sample_size(w))
    assert 1.0 - 1e-9 <= n_eff <= len(w) * (1.0 + 1e-9)


@pytest.mark.parametrize(
    "weights, match",
    [
        (np.array([0.5, 0.6]), "weights must be probability vectors"),
        (np.array([[0.5, 0.5], [0.2, 0.2]]), "weights must be probability vectors"),
        (np.array([1.5, -0.5]), "weights must be probability vectors: found negative"),
        (np.array([np.nan, 1.0]), "weights contains NaN"),
        (np.array(1.0), "at least 1 dimension"),
        (np.zeros((3, 0)), "empty last axis"),
        (np.array(["a", "b"]), "real numeric"),
    ],
)
def test_ess_errors(weights, match):
    with pytest.raises(ValueError, match=match):
        effective_sample_size(weights)


# --------------------------------------------------------------------------------------------
# nw_weight_correlation
# --------------------------------------------------------------------------------------------


def _random_weights(rng, shape):
    w = rng.random(shape) ** 3
    return w / w.sum(-1, keepdims=True)


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_correlation_matches_scipy_rowwise(method):
    rng = np.random.default_rng(0)
    nw = _random_weights(rng, (12, 8))
    att = 0.5 * nw + 0.5 * _random_weights(rng, (12, 8))
    # ties: a row with repeated values (e.g. underflowed NW weights)
    nw[3, :4] = 0.0
    att[5, 2:5] = att[5, 1]
    res = nw_weight_correlation(att, nw, method=method, threshold=0.3)
    assert isinstance(res, WeightCorrelation)
    assert res.per_row.shape == (12,)
    oracle = spearmanr if method == "spearman" else pearsonr
    expected = np.array([oracle(att[i], nw[i])[0] for i in range(12)])
    np.testing.assert_allclose(res.per_row, expected, rtol=0, atol=1e-10)
    assert res.mean == pytest.approx(expected.mean(), abs=1e-12)
    assert res.median == pytest.approx(np.median(expected), abs=1e-12)
    assert res.fraction_above == pytest.approx(np.mean(expected > 0.3))
    assert res.per_head_median is None
    assert res.pooled_pearson == pytest.approx(pearsonr(att.ravel(), nw.ravel())[0], abs=1e-12)


def test_correlation_heads_broadcast_and_torch():
    rng = np.random.default_rng(1)
    nw = _random_weights(rng, (10, 6))
    att = _random_weights(rng, (3, 10, 6))
    res = nw_weight_correlation(att, nw)
    assert res.per_row.shape == (3, 10)
    assert res.per_head_median.shape == (3,)
    for h in range(3):
        expected = [spearmanr(att[h, i], nw[i])[0] for i in range(10)]
        np.testing.assert_allclose(res.per_row[h], expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.per_head_median, np.median(res.per_row, axis=1))
    full = nw_weight_correlation(att, np.broadcast_to(nw, att.shape).copy())
    # two memory layouts (a broadcast view vs a copy) may sum in another order: atol 1e-12
    # (correlations lie in [-1, 1])
    np.testing.assert_allclose(full.per_row, res.per_row, rtol=0, atol=1e-12)
    att_t = torch.tensor(att, requires_grad=True)
    res_t = nw_weight_correlation(att_t, torch.as_tensor(nw))
    # two backends (Torch vs NumPy kernels): atol 1e-12
    np.testing.assert_allclose(res_t.per_row, res.per_row, rtol=0, atol=1e-12)
    assert res.pooled_pearson == pytest.approx(
        pearsonr(att.ravel(), np.broadcast_to(nw, att.shape).ravel())[0], abs=1e-12
    )


def test_correlation_constant_rows_are_nan():
    att = np.array([[0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    nw = np.array([[0.1, 0.2, 0.3, 0.4], [0.1, 0.1, 0.1, 0.7], [0.1, 0.2, 0.3, 0.4]])
    for method in ("spearman", "pearson"):
        res = nw_weight_correlation(att, nw, method=method)
        assert np.isnan(res.per_row[0])
        assert res.per_row[2] == pytest.approx(-1.0)
        assert res.mean == pytest.approx(np.nanmean(res.per_row))
        assert res.fraction_above == pytest.approx(0.5)  # over the non-NaN rows
    all_nan = nw_weight_correlation(np.full((2, 3), 1 / 3), nw[:2, :3] / nw[:2, :3].sum(1)[:, None])
    assert np.isnan(all_nan.mean) and np.isnan(all_nan.fraction_above)


@pytest.mark.exactness
def test_fraction_above_is_strict_at_ties():
    """Spearman over 3 columns: ranks (1, 3, 2) against (1, 2, 3) correlate exactly 0.5, which
    does not *exceed* the threshold 0.5."""
    nw = np.tile([0.1, 0.3, 0.6], (4, 1))
    att = np.array([[0.1, 0.3, 0.6], [0.1, 0.6, 0.3], [0.3, 0.1, 0.6], [0.6, 0.3, 0.1]])
    res = nw_weight_correlation(att, nw, threshold=0.5)
    np.testing.assert_array_equal(res.per_row, [1.0, 0.5, 0.5, -1.0])
    assert res.fraction_above == 0.25
    assert nw_weight_correlation(att, nw, threshold=0.4999).fraction_above == 0.75


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_correlation_mask_compares_the_kept_entries_only(method):
    rng = np.random.default_rng(7)
    att, nw = rng.random((2, 5, 8)), rng.random((2, 5, 8))
    keep = rng.random((2, 5, 8)) < 0.6
    keep[..., :2] = True  # every row keeps at least 2 keys ...
    keep[1, 4] = [True] + [False] * 7  # ... but this one
    # masked entries hold anything: garbage that would rank and correlate if it were compared
    garbage = np.where(rng.random((2, 5, 8)) < 0.3, -np.inf, rng.random((2, 5, 8)))
    res = nw_weight_correlation(
        np.where(keep, att, garbage), np.where(keep, nw, garbage), method=method, mask=keep
    )
    scipy_corr = spearmanr if method == "spearman" else pearsonr
    for h in range(2):
        for j in range(5):
            if keep[h, j].sum() < 2:
                assert np.isnan(res.per_row[h, j])
                continue
            expected = scipy_corr(att[h, j, keep[h, j]], nw[h, j, keep[h, j]]).statistic
            assert res.per_row[h, j] == pytest.approx(expected, abs=1e-12)
    assert res.pooled_pearson == pytest.approx(pearsonr(att[keep], nw[keep]).statistic)
    # a mask of the heads' shared (n, m) shape is broadcast, and all-True is no mask
    shared = nw_weight_correlation(att, nw, method=method, mask=np.ones((5, 8), bool))
    plain = nw_weight_correlation(att, nw, method=method)
    # two code paths (the masked statistics vs the plain ones): atol 1e-12
    np.testing.assert_allclose(shared.per_row, plain.per_row, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "att, nw, kwargs, match",
    [
        (np.ones((4, 5)), np.ones((4, 6)), {}, "nw_weights has shape"),
        (np.ones((2, 4, 5)), np.ones((3, 4, 5)), {}, "nw_weights has shape"),
        (np.ones((4, 5)), np.ones((2, 4, 5)), {}, "nw_weights has shape"),
        (np.ones(5), np.ones(5), {}, "attention must have shape"),
        (np.ones((4, 1)), np.ones((4, 1)), {}, "at least 2 columns"),
        (np.full((2, 3), np.nan), np.ones((2, 3)), {}, "attention contains NaN"),
        (np.ones((2, 3)), np.full((2, 3), np.inf), {}, "nw_weights contains NaN"),
        (np.ones((2, 3)), np.ones((2, 3)), {"method": "kendall"}, "method must be"),
        (np.ones((2, 3)), np.ones((2, 3)), {"mask": np.ones((2, 3))}, "mask must be a boolean"),
        (np.ones((2, 3)), np.ones((2, 3)), {"mask": np.ones((3, 3), bool)}, "mask has shape"),
        (
            np.full((2, 3), np.nan),
            np.ones((2, 3)),
            {"mask": np.eye(2, 3, dtype=bool)},
            "attention contains NaN or infinity at an entry that mask keeps",
        ),
    ],
)
def test_correlation_errors(att, nw, kwargs, match):
    with pytest.raises(ValueError, match=match):
        nw_weight_correlation(att, nw, **kwargs)


# --- memorisation --------------------------------------------------------------------------


def test_distance_to_closest_record_matches_bruteforce():
    from skflow.metrics import distance_to_closest_record

    rng = np.random.default_rng(3)
    X, S = rng.normal(size=(40, 5)), rng.normal(size=(17, 5))
    brute = np.sqrt(((X[:, None, :] - S[None, :, :]) ** 2).sum(-1)).min(axis=1)
    np.testing.assert_allclose(distance_to_closest_record(X, S), brute, rtol=1e-12)


def test_memorization_ratio_flags_copies_and_not_fresh_draws():
    from skflow.metrics import memorization_ratio

    rng = np.random.default_rng(4)
    support, held_out = rng.normal(size=(30, 3)), rng.normal(size=(300, 3))
    fresh = rng.normal(size=(300, 3))
    copies = support[rng.integers(0, 30, 300)] + 1e-3 * rng.normal(size=(300, 3))
    assert 0.7 < memorization_ratio(fresh, support, held_out) < 1.4
    assert memorization_ratio(copies, support, held_out) < 0.01
    # the ratio is a ratio: invariant to a common rescaling of all three sets
    r = memorization_ratio(fresh, support, held_out)
    assert memorization_ratio(5 * fresh, 5 * support, 5 * held_out) == pytest.approx(r)


def test_memorization_ratio_rejects_support_as_reference():
    from skflow.metrics import memorization_ratio

    S = np.random.default_rng(5).normal(size=(10, 2))
    with pytest.raises(ValueError, match="held-out"):
        memorization_ratio(S, S, S)
    with pytest.raises(ValueError, match="features"):
        memorization_ratio(S, S[:, :1], S)


def test_memorization_ratio_is_a_ratio_of_medians():
    """Hand-computed DCRs with one far outlier on each side: medians, not means (a mean
    would let one stray sample hide a generator that copies the rest)."""
    from skflow.metrics import memorization_ratio

    support = np.zeros((1, 2))
    generated = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [100.0, 0.0]])  # DCR 1 2 3 100
    reference = np.array([[0.0, 4.0], [0.0, 5.0], [0.0, 6.0], [0.0, 1000.0]])  # 4 5 6 1000
    assert memorization_ratio(generated, support, reference) == pytest.approx(2.5 / 5.5)
