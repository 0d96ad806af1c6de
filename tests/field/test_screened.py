"""The float32-screened float64 local mean (``NWField(float32_fallback="screened")``).

Where float32 logits lose precision, the screened field keeps float32 logits only to find the
(query, key) pairs that carry weight and recomputes those in float64: its local mean must
equal the float64 field's to float64 rounding, for NumPy and Torch, shared and per-row times,
projected keys, and supports with near-duplicates (whose blocks fall back to dense float64).
"""

import numpy as np
import pytest
import torch

from skflow.field import FALLBACKS, NWField
from skflow.field._screened import screened_local_mean

SIGMA_MIN = 0.01


def _case(m=600, d=16, n=300, t=0.99, seed=0, duplicates=1):
    """float32 support and adversarial queries: on the path, and midway between two points
    (two keys compete for the weight, where float32 logits go wrong)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(m // duplicates, d))
    S = np.repeat(base, duplicates, axis=0) + 1e-4 * rng.normal(size=(m, d)) * (duplicates > 1)
    sigma = 1.0 - (1.0 - SIGMA_MIN) * np.max(t)
    i = rng.integers(len(S), size=n)
    j = rng.integers(len(S), size=n)
    tt = np.broadcast_to(np.asarray(t, dtype=np.float64), (n,))[:, None]
    x = tt * S[i] + sigma * rng.normal(size=(n, d))
    x[: n // 2] = tt[: n // 2] * 0.5 * (S[i[: n // 2]] + S[j[: n // 2]])
    return S.astype(np.float32), x.astype(np.float32)


def _convert(backend, *arrays):
    return [torch.from_numpy(a) if backend == "torch" else a for a in arrays]


def _float64_mean(S32, x32, t, projection=None):
    field = NWField(S32.astype(np.float64), sigma_min=SIGMA_MIN, projection=projection)
    return field.local_mean(x32.astype(np.float64), t)


def test_fallback_choices_are_validated():
    assert FALLBACKS == ("screened", "float64")
    with pytest.raises(ValueError, match="float32_fallback"):
        NWField(np.zeros((3, 2)), float32_fallback="half")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("t", [0.97, 0.999, "rows"])
def test_screened_mean_equals_the_float64_mean(backend, t):
    """Before the cast back to float32 the screened mean is the float64 one (to 1e-9: the
    float64 logits themselves round at about 1e-16 a(t) R^2, up to 1e-11 here)."""
    # per-row times of float32 queries are float32 (the reference must see the same times)
    rows = np.linspace(0.93, 1.0, 300).astype(np.float32).astype(np.float64)
    times = rows if t == "rows" else t
    S32, x32 = _case(t=times)
    S, x = _convert(backend, S32, x32)
    tt = torch.from_numpy(times) if backend == "torch" and t == "rows" else times
    field = NWField(S, sigma_min=SIGMA_MIN)
    call, _ = field._call(x, tt, screen=True)
    assert call.screen is not None  # the case does go through the screen
    got = np.asarray(screened_local_mean(call, *call.screen))
    ref = _float64_mean(S32, x32, times)
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_public_float32_results_match_the_float64_fallback(backend):
    """Through the public API: float32 results of both fallbacks agree to float32 rounding,
    and both are far more precise than pure float32 on these queries."""
    S32, x32 = _case(m=800, d=32, t=0.99, seed=1)
    S, x = _convert(backend, S32, x32)
    ref = _float64_mean(S32, x32, 0.99)
    errors = {}
    for fallback in FALLBACKS:
        field = NWField(S, sigma_min=SIGMA_MIN, float32_fallback=fallback)
        out = field.local_mean(x, 0.99)
        assert out.dtype == S.dtype
        errors[fallback] = np.abs(np.asarray(out, dtype=np.float64) - ref).max()
    pure = NWField(S, sigma_min=SIGMA_MIN, float32_logit_limit=np.inf).local_mean(x, 0.99)
    pure_error = np.abs(np.asarray(pure, dtype=np.float64) - ref).max()
    scale = np.abs(ref).max()
    assert errors["screened"] <= 2e-7 * scale
    assert errors["float64"] <= 2e-7 * scale
    assert pure_error > 100 * errors["screened"]  # the case needs the fallback


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_velocity_with_projection_and_near_duplicates(backend):
    """Projected keys, and a support of near-duplicate points (many candidates per query:
    those blocks are computed densely in float64)."""
    S32, x32 = _case(m=1200, d=12, t=0.995, seed=2, duplicates=40)
    P = np.random.default_rng(3).normal(size=(10, 12)).astype(np.float32)
    S, x, proj = _convert(backend, S32, x32, P)
    field = NWField(S, sigma_min=SIGMA_MIN, projection=proj)
    call, _ = field._call(x, 0.995, screen=True)
    assert call.screen is not None
    got = np.asarray(screened_local_mean(call, *call.screen))
    ref = _float64_mean(S32, x32, 0.995, projection=P.astype(np.float64))
    assert np.abs(got - ref).max() <= 1e-9 * np.abs(ref).max()
    v = field.velocity(x, 0.995)
    v64 = NWField(S32.astype(np.float64), sigma_min=SIGMA_MIN, projection=P.astype(np.float64))
    v_ref = v64.velocity(x32.astype(np.float64), 0.995)
    assert np.abs(np.asarray(v, dtype=np.float64) - v_ref).max() <= 2e-7 * np.abs(v_ref).max()


def test_small_or_narrow_supports_and_other_methods_are_not_screened():
    """Below the size and width where screening pays, and for weights, divergences and
    n_eff, the promoted call is the plain float64 one."""
    S32, x32 = _case(m=100, d=16)
    call, _ = NWField(S32, sigma_min=SIGMA_MIN)._call(x32, 0.99, screen=True)
    assert call.screen is None
    S32, x32 = _case(m=600, d=4)
    call, _ = NWField(S32, sigma_min=SIGMA_MIN)._call(x32, 0.999, screen=True)
    assert call.screen is None
    S32, x32 = _case()
    field = NWField(S32, sigma_min=SIGMA_MIN)
    assert field._call(x32, 0.99)[0].screen is None
    assert NWField(S32, float32_fallback="float64")._call(x32, 0.99, screen=True)[0].screen is None


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("scale", [100.0, 300.0])
def test_large_logits_keep_the_float32_error_allowance_and_stay_finite(backend, scale):
    """At a(t) R^2 ~ 1e9-1e10 the float32 logits are off by tens of nats: the screen must
    widen its window by that error (2 Delta), and the float64 weights must be shifted by their
    own row maximum (shifting by the float32 maximum overflowed to NaN at scale 100). The
    float64 reference rounds at about 1e-16 a(t) R^2 (1e-7 relative here)."""
    S32, x32 = _case(t=0.999)
    S32, x32 = (S32 * scale).astype(np.float32), (x32 * scale).astype(np.float32)
    S, x = _convert(backend, S32, x32)
    call, _ = NWField(S, sigma_min=SIGMA_MIN)._call(x, 0.999, screen=True)
    assert call.screen is not None
    got = np.asarray(screened_local_mean(call, *call.screen))
    ref = _float64_mean(S32, x32, 0.999)
    assert np.all(np.isfinite(got))
    assert np.abs(got - ref).max() <= 1e-6 * np.abs(ref).max()
