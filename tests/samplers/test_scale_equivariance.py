"""Scale and offset equivariance of every public sampler (issue 63).

``sample(a S + b) == a sample(S) + b`` with the same seed, for ``a`` in 1e-12 .. 1e6 and offsets
``|b|`` up to 1e8, within :func:`tolerance` (relative to ``a * scale(S)``), or a ``ValueError``
that names the fix where float64 cannot hold the support (its spread below resolution at its
offset). A support without spread (one row, or identical rows) has no scale: the samplers that
take their scale from the support return copies of its row with a ``MemorizationWarning``.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from skflow import LearnedFlowSampler, NWFlowSampler, SigmaMinSearch
from skflow.exceptions import MemorizationWarning
from skflow.samplers import (
    BestClassicalSampler,
    BICGaussianMixtureSampler,
    EmpiricalBayesGaussianSampler,
    LedoitWolfSampler,
    PooledGaussianSampler,
)
from skflow.samplers._frame import MAX_OFFSET_RATIO, spread_mask

EPS, EPS32 = float(np.finfo(np.float64).eps), float(np.finfo(np.float32).eps)
#: How the rounding of the offset grows, in units of ``eps * r`` with ``r = |b| / (a scale)``:
#: ``a S + b`` is stored to ``eps |b|`` per entry (``eps r`` relative to ``a scale``); the frame
#: carries that relative error into the flow, whose sensitivity to its inputs is at most about
#: ``1 / sigma`` in the frame (``sigma >= 0.05`` here), and each of the 100 fixed solver steps
#: rounds the state at magnitude ``|b|`` once more: about ``(100 + 1 / sigma) eps r <= 120 eps
#: r``. 1000 leaves a margin of 5 over the largest measured (150 eps r, NWFlowSampler with
#: sigma_min=0.1 in the frame).
GROWTH = 1e3
#: The solver's own error cancels (same seed, same time grid, the same flow in the frame); what
#: is left at ``b = 0`` is rounding at unit scale, up to 180 eps measured (float64), 5 eps32 for
#: the learned network's float32 layers. 1000 eps and 100 eps32 leave margins of 5 and 20.
BASE, BASE32 = 1e3 * EPS, 1e2 * EPS32


def tolerance(r: float, base: float) -> float:
    """Largest ``max |sample(a S + b) - (a sample(S) + b)| / (a scale(S))`` accepted."""
    return base + GROWTH * EPS * r


def spread(S: np.ndarray) -> float:
    """Root-mean-square per-coordinate standard deviation (the frame's scale)."""
    return float(np.sqrt(np.mean(np.var(S, axis=0, ddof=1))))


@functools.lru_cache(maxsize=8)
def data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training rows of 6 classes (d = 3), their labels, and a support of a new class."""
    rng = np.random.default_rng(seed)
    means = 2.0 * rng.normal(size=(7, 3))
    X = means[np.repeat(np.arange(6), 8)] + rng.normal(size=(48, 3))
    return X, np.repeat(np.arange(6), 8), means[6] + rng.normal(size=(10, 3))


@functools.lru_cache(maxsize=1)
def prior() -> LearnedFlowSampler:
    return LearnedFlowSampler.from_pretrained("general-16", n_features=3)


def _nw(**params):
    return lambda X, y, S, seed: NWFlowSampler(**params).fit(S).sample(20, random_state=seed)


def _labelled(make):
    return lambda X, y, S, seed: make().fit(X, y).sample(20, support=S, random_state=seed)


#: name -> (draw(X, y, S, seed), base tolerance, whether only offsets are equivariant)
CASES = {
    "nw-auto": (_nw(), BASE, False),
    "nw-float-frame": (_nw(sigma_min=0.1, normalize=True), BASE, False),
    # an absolute bandwidth (data units, normalize=False): equivariant under offsets only
    "nw-float-absolute": (_nw(sigma_min=0.1), BASE, True),
    "nw-in-context": (
        lambda X, y, S, seed: NWFlowSampler().fit(X).sample(20, support=S, random_state=seed),
        BASE,
        False,
    ),
    "nw-fit-X-y": (
        _labelled(
            lambda: NWFlowSampler(
                normalize=True, sigma_min_search=SigmaMinSearch(grid=("auto", 0.1, 0.5), cv=2)
            )
        ),
        BASE,
        False,
    ),
    "learned-prior": (
        lambda X, y, S, seed: prior().sample(20, support=S, random_state=seed),
        BASE32,
        False,
    ),
    "ledoit-wolf": (_labelled(LedoitWolfSampler), BASE, False),
    "pooled": (_labelled(PooledGaussianSampler), BASE, False),
    "empirical-bayes": (_labelled(EmpiricalBayesGaussianSampler), BASE, False),
    "bic-mixture": (_labelled(BICGaussianMixtureSampler), BASE, False),
    "best-classical": (
        _labelled(
            lambda: BestClassicalSampler(
                [
                    LedoitWolfSampler(),
                    PooledGaussianSampler(),
                    BICGaussianMixtureSampler(),
                    NWFlowSampler(sigma_min_search=None),
                ],
                support_size=5,
                n_splits=2,
                n_repeats=1,
                random_state=0,
            )
        ),
        BASE,
        False,
    ),
    # the default candidates include absolute bandwidths (NWFlowSampler(sigma_min=0.05, ...))
    "best-classical-default": (
        _labelled(lambda: BestClassicalSampler(support_size=5, n_repeats=1, random_state=0)),
        BASE,
        True,
    ),
}
FAST = [k for k in CASES if k not in ("nw-fit-X-y", "learned-prior", "best-classical-default")]
SLOW = ["nw-fit-X-y", "learned-prior", "best-classical-default"]


@functools.lru_cache(maxsize=64)
def reference(name: str, data_seed: int, seed: int) -> np.ndarray:
    X, y, S = data(data_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MemorizationWarning)
        return CASES[name][0](X, y, S, seed)


def check_equivariant(name: str, a: float, b: float, data_seed: int, seed: int) -> None:
    """``draw(a X + b, y, a S + b) == a draw(X, y, S) + b`` to :func:`tolerance`, or (only
    where ``r = |b| / (a scale)`` exceeds float64's resolution) a ValueError naming the fix."""
    draw, base, offsets_only = CASES[name]
    a = 1.0 if offsets_only else a
    X, y, S = data(data_seed)
    r = abs(b) / (a * spread(S))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MemorizationWarning)  # plug-in copies, collapsed rows
            got = draw(a * X + b, y, a * S + b, seed)
    except ValueError as error:
        assert r > MAX_OFFSET_RATIO, f"{name} refused a={a:g}, b={b:g} (r={r:.3g}): {error}"
        # the rows collapse onto one (no spread left), or keep a few digits (centring helps)
        assert "centre the data first" in str(error) or "no spread" in str(error)
        return
    err = np.max(np.abs(got - (a * reference(name, data_seed, seed) + b))) / (a * spread(S))
    assert err <= tolerance(r, base), f"{name}: a={a:g}, b={b:g}, r={r:.3g}, error {err:.3g}"


scales = st.floats(-12.0, 6.0).map(lambda e: 10.0**e)
offsets = st.one_of(
    st.just(0.0),
    st.tuples(st.sampled_from([-1.0, 1.0]), st.floats(0.0, 8.0)).map(lambda p: p[0] * 10 ** p[1]),
)
edges = [(1e-12, 0.0), (1e6, 1e8), (1e-12, 1e8), (1e-3, 1e8), (1.0, -1e8)]


def _with_edges(test):
    for a, b in edges:
        test = example(a=a, b=b, data_seed=0, seed=0)(test)
    return test


@pytest.mark.parametrize("name", FAST)
@settings(max_examples=12, deadline=None)
@_with_edges
@given(a=scales, b=offsets, data_seed=st.integers(0, 2), seed=st.integers(0, 2**16))
def test_samplers_are_scale_and_offset_equivariant(name, a, b, data_seed, seed):
    check_equivariant(name, a, b, data_seed, seed)


@pytest.mark.parametrize("name", SLOW)
@settings(max_examples=2, deadline=None)
@example(a=1e-12, b=0.0, data_seed=0, seed=0)
@example(a=1e6, b=-1e8, data_seed=0, seed=0)
@given(a=scales, b=offsets, data_seed=st.just(0), seed=st.integers(0, 2**16))
def test_slow_samplers_are_scale_and_offset_equivariant(name, a, b, data_seed, seed):
    check_equivariant(name, a, b, data_seed, seed)


# -- regressions: the cases of issue 63 -------------------------------------------------------
S0 = np.random.default_rng(0).normal(size=(20, 4))


def test_nw_at_scale_1e_12_samples_at_the_supports_scale():
    """An absolute ``1e-12`` in the frame's "no spread" test made ``S * 1e-12`` sample
    3.7e11 times wider than the support."""
    got = NWFlowSampler().fit(S0 * 1e-12).sample(200, random_state=0)
    want = NWFlowSampler().fit(S0).sample(200, random_state=0) * 1e-12
    assert np.max(np.abs(got - want)) <= tolerance(0.0, BASE) * 1e-12 * spread(S0)


@pytest.mark.exactness
@pytest.mark.parametrize("value", [1000.0, 0.001])
def test_nw_one_row_support_gives_copies_whatever_its_units(value):
    """A fallback bandwidth of 1 in data units gave a spread of 1.3 at 1000 and at 0.001 alike:
    with one row there is no scale, so the samples are copies of it, with a warning naming the
    fix (in context, and per task of a batch, too)."""
    row = np.full((1, 3), value)
    with pytest.warns(MemorizationWarning, match="no spread") as info:
        X = NWFlowSampler().fit(row).sample(50, random_state=0)
    np.testing.assert_array_equal(X, np.repeat(row, 50, axis=0))
    message = str(info[0].message)
    assert "more distinct rows" in message and "sigma_min=0.01, normalize=False" in message
    batch = np.stack([np.repeat(row, 4, axis=0), S0[:4, :3]])
    with pytest.warns(MemorizationWarning, match="task 0 of the batch"):
        out = NWFlowSampler().fit(S0[:, :3]).sample(5, support=batch, random_state=0)
    np.testing.assert_array_equal(out[0], np.repeat(row, 5, axis=0))
    assert np.ptp(out[1], axis=0).min() > 0
    # the absolute bandwidth named by the warning: the row plus sigma_min-sized noise
    x0 = np.random.default_rng(1).normal(size=(5, 3))
    plug_in = NWFlowSampler(sigma_min=0.01).fit(row).sample(5, noise=x0)
    np.testing.assert_allclose(plug_in, row + 0.01 * x0, atol=1e-9 * value)


def test_nw_one_row_support_has_no_density():
    with pytest.raises(ValueError, match="no spread.*no density"):
        NWFlowSampler().fit(np.ones((3, 2))).score_samples(np.zeros((2, 2)))


def test_learned_prior_takes_distinct_rows_at_an_offset():
    """``S * 10 + 1e14`` was refused as "at least 2 distinct rows" (an absolute threshold on
    the spread). Offsets float64 resolves are served, equivariantly; beyond it the error
    names the fix (centring), not distinctness."""
    lf = LearnedFlowSampler.from_pretrained("general-16", n_features=4)
    base = lf.sample(30, support=S0, random_state=0)
    got = lf.sample(30, support=S0 * 10 + 1e9, random_state=0)
    r = 1e9 / (10 * spread(S0))
    assert np.max(np.abs(got - (10 * base + 1e9))) / (10 * spread(S0)) <= tolerance(r, BASE32)
    with pytest.raises(ValueError, match="centre the data first") as info:
        lf.sample(30, support=S0 * 10 + 1e14, random_state=0)
    assert "distinct" not in str(info.value)


def test_bic_mixture_at_scale_1e_9_and_offset_1e8():
    """An absolute ``+ 1e-12`` on ``reg_covar`` made ``S * 1e-9`` sample ~1000x too wide, and
    ``S + 1e8`` (not centred) failed in scikit-learn; the mixture is now fitted in the
    support's frame, and ``select`` maps it back to data units."""
    est = BICGaussianMixtureSampler(random_state=0).fit(S0)
    base = est.sample(200, support=S0, random_state=0)
    for a, b in ((1e-9, 0.0), (1.0, 1e8)):
        got = est.sample(200, support=a * S0 + b, random_state=0)
        r = abs(b) / (a * spread(S0))
        assert np.max(np.abs(got - (a * base + b))) / (a * spread(S0)) <= tolerance(r, BASE)
    gm, gm_scaled = est.select(S0), est.select(1e-9 * S0 + 0.1)
    np.testing.assert_allclose(gm_scaled.means_, 1e-9 * gm.means_ + 0.1, rtol=1e-15)
    np.testing.assert_allclose(gm_scaled.covariances_, 1e-18 * gm.covariances_, rtol=1e-5)
    np.testing.assert_allclose(
        gm_scaled.precisions_cholesky_, 1e9 * gm.precisions_cholesky_, rtol=1e-5
    )


@pytest.mark.exactness
@pytest.mark.parametrize(
    "make",
    [
        lambda: NWFlowSampler(),
        lambda: NWFlowSampler(sigma_min=0.1, normalize=True),
        lambda: LedoitWolfSampler(),
        lambda: BICGaussianMixtureSampler(),
        lambda: LearnedFlowSampler.from_pretrained("general-16", n_features=3),
    ],
    ids=["nw-auto", "nw-frame", "ledoit-wolf", "bic", "learned-prior"],
)
@pytest.mark.parametrize("rows", [1, 5])
def test_a_support_without_spread_gives_copies_in_every_sampler(make, rows):
    """One documented behaviour: every sampler whose scale is the support's own returns
    copies of the row of a support without spread, with the same warning."""
    X, _, _ = data(0)
    est = make()
    if not hasattr(est, "n_features_in_"):
        est.fit(X)
    S = np.repeat([[3.0, -1.0, 1e5]], rows, axis=0)
    with pytest.warns(MemorizationWarning, match="no spread.*copies"):
        got = est.sample(7, support=S, random_state=0)
    np.testing.assert_array_equal(got, np.repeat(S[:1], 7, axis=0))


def test_a_spread_below_resolution_is_refused_naming_the_fix():
    """``1e8 + 1e-3 S``: nonzero spread, 1e11 times below the offset (a few digits left)."""
    S = 1e8 + 1e-3 * S0
    assert spread_mask((S0 + 1e8)[None], "X").tolist() == [True]
    for call in (
        lambda: NWFlowSampler().fit(S),
        lambda: NWFlowSampler().fit(S0).sample(3, support=S),
        lambda: LedoitWolfSampler().fit(S0).sample(3, support=S),
        lambda: PooledGaussianSampler().fit(S, np.repeat([0, 1], 10)),
    ):
        with pytest.raises(ValueError, match="below float64 resolution.*centre the data first"):
            call()
