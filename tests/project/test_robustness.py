"""Numerical robustness of the exact field against a float64 brute force, and support streaming.

The brute force below is written independently of :mod:`skflow.field`: a direct softmax over
``-||x - t s_i||^2 / (2 sigma_t^2)`` with explicit differences in float64. Velocities are
compared *normwise relative to the velocity scale*, ``max |v - v_ref| / max |v_ref|``, which
is the error that matters to an ODE solver (a componentwise relative error would be
meaningless for components that cancel). Tolerances: ``1e-10`` for float64 (the SPEC's
exactness target) and ``1e-4`` for float32 (the documented float32 bound). Weights are
probabilities, compared in absolute terms with the same tolerances.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from nw_reference import brute_force_field

from skflow import EngineOptions, NWFlowSampler, SolverOptions
from skflow import field as F
from skflow.field import (
    nw_divergence,
    nw_effective_sample_size,
    nw_local_mean,
    nw_log_density,
    nw_logits,
    nw_velocity,
    nw_velocity_and_divergence,
    nw_weights,
)


def _np(a):
    return a.detach().cpu().numpy() if torch.is_tensor(a) else np.asarray(a)


def _normwise(got, ref):
    scale = np.max(np.abs(ref))
    return np.max(np.abs(_np(got) - ref)) / (scale if scale > 0 else 1.0)


TOL = {np.float64: 1e-10, np.float32: 1e-4}


def _states(support, t, n, rng, *, noise=1.0):
    """Query states on the path: ``x = t s_j + sigma_t z`` (``z`` of scale ``noise``)."""
    j = rng.integers(0, support.shape[0], n)
    return t * support[j] + (1.0 - 0.99 * t) * noise * rng.normal(size=(n, support.shape[1]))


def _case(name, rng):
    """(support, queries, sigma_min) of a named robustness case."""
    S = rng.normal(size=(40, 3))
    X = rng.normal(size=(12, 3))
    if name == "standard":
        return S, X, 0.01
    if name == "scaled 1e-6":
        return S * 1e-6, X * 1e-6, 0.01
    if name == "scaled 1e6":  # queries on the path at that scale, unit noise
        return S * 1e6, _states(S * 1e6, 0.5, 12, rng), 0.01
    if name == "duplicates":
        return np.repeat(S[:4], 10, axis=0), X, 0.01
    if name == "m = 1":
        return S[:1], X, 0.01
    if name == "d = 1":
        return S[:, :1], X[:, :1], 0.01
    if name == "one query":
        return S, X[:1], 0.01
    if name == "sigma_min 1e-6":
        return S, X, 1e-6
    if name == "sigma_min 0.999":
        return S, X, 0.999
    raise AssertionError(name)


CASES = [
    "standard",
    "scaled 1e-6",
    "scaled 1e6",
    "duplicates",
    "m = 1",
    "d = 1",
    "one query",
    "sigma_min 1e-6",
    "sigma_min 0.999",
]
TIMES = [0.0, 1e-9, 0.5, 0.9, 0.999, 1.0]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("engine", ["numpy", "torch", "numpy-streamed", "torch-streamed"])
def test_field_matches_float64_brute_force(case, dtype, engine):
    rng = np.random.default_rng(CASES.index(case))
    S, X, sigma_min = _case(case, rng)
    S, X = S.astype(dtype), X.astype(dtype)
    kw = {"sigma_min": sigma_min}
    if engine.endswith("streamed"):
        kw["support_chunk_size"] = 7
    xs, ss = (torch.from_numpy(X), torch.from_numpy(S)) if engine.startswith("torch") else (X, S)
    tol = TOL[dtype]
    for t in TIMES:
        w_ref, v_ref = brute_force_field(X, S, t, sigma_min)
        v = nw_velocity(xs, ss, t, **kw)
        w = nw_weights(xs, ss, t, **kw)
        assert _np(v).dtype == dtype and _np(w).dtype == dtype
        assert np.all(np.isfinite(_np(v))) and np.all(np.isfinite(_np(w)))
        assert _normwise(v, v_ref) < tol, (t, _normwise(v, v_ref))
        assert np.max(np.abs(_np(w) - w_ref)) < tol, t
        n_eff = _np(nw_effective_sample_size(xs, ss, t, **kw))
        np.testing.assert_allclose(n_eff, 1.0 / np.sum(w_ref**2, axis=1), rtol=tol * 10)
        div = _np(nw_divergence(xs, ss, t, **kw))
        assert div.dtype == dtype and np.all(np.isfinite(div))
        # div u = [(t / sigma_t^2) tr Cov_w(S) - (1 - sigma_min) d] / sigma_t with the
        # brute-force weights; compared relative to the larger of the two terms
        s64 = S.astype(np.float64)
        centred = s64[None, :, :] - (w_ref @ s64)[:, None, :]
        trace = np.einsum("nm,nmd->n", w_ref, centred**2)
        sigma_t = 1.0 - (1.0 - sigma_min) * t
        spread, contraction = t / sigma_t**3 * trace, (1.0 - sigma_min) * S.shape[1] / sigma_t
        err = np.abs(div - (spread - contraction)) / np.maximum(spread, contraction)
        assert np.max(err) < 10 * tol, (t, np.max(err))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_per_row_times_including_both_ends(dtype):
    rng = np.random.default_rng(1)
    S, X = rng.normal(size=(30, 2)).astype(dtype), rng.normal(size=(6, 2)).astype(dtype)
    t = np.array([0.0, 1e-12, 0.3, 0.97, 1.0 - 1e-12, 1.0])
    _, v_ref = brute_force_field(X, S, t, 0.01)
    for kw in ({}, {"support_chunk_size": 4}):
        assert _normwise(nw_velocity(X, S, t, **kw), v_ref) < TOL[dtype]
        got = nw_velocity(torch.from_numpy(X), torch.from_numpy(S), torch.from_numpy(t), **kw)
        assert _normwise(got, v_ref) < TOL[dtype]


def test_t_zero_is_the_support_mean_and_t_one_the_nearest_neighbour(gaussian_support):
    S, X = gaussian_support(25, 8, 3, seed=2)
    np.testing.assert_allclose(nw_local_mean(X, S, 0.0), np.tile(S.mean(0), (8, 1)), atol=1e-14)
    w = nw_weights(S[:5] + 1e-4, S, 1.0, sigma_min=1e-3)  # next to support points
    np.testing.assert_allclose(w[np.arange(5), np.arange(5)], 1.0, atol=1e-12)


def test_float32_with_norms_that_overflow_float32_is_computed_in_float64():
    # ||s||^2 ~ 1e62 overflows float32: even at t = 0 (where 0 * inf would be NaN)
    rng = np.random.default_rng(3)
    S = (rng.normal(size=(20, 2)) * 1e31).astype(np.float32)
    X = rng.normal(size=(5, 2)).astype(np.float32)
    for t in (0.0, 0.5, 1.0):
        w_ref, v_ref = brute_force_field(X, S, t, 0.01)
        for engine in (lambda a: a, torch.from_numpy):
            with np.errstate(over="raise", invalid="raise"):
                v = _np(nw_velocity(engine(X), engine(S), t))
            assert v.dtype == np.float32 and np.all(np.isfinite(v))
            assert _normwise(v, v_ref) < 1e-4


# -- clear errors -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, t, error, match",
    [
        ({"sigma_min": 0.0}, 0.5, ValueError, "sigma_min"),
        ({"sigma_min": 1.0}, 0.5, ValueError, "sigma_min"),
        ({"sigma_min": -0.1}, 0.5, ValueError, "sigma_min"),
        ({}, -1e-5, ValueError, r"\[0, 1\]"),  # within 1e-6 of [0, 1]: clamped
        ({}, 1.0 + 1e-5, ValueError, r"\[0, 1\]"),
        ({}, np.nan, ValueError, r"\[0, 1\]"),
        ({}, 0.5 + 0.1j, TypeError, "real"),
        ({}, "0.5", TypeError, "numeric"),
        ({"bandwidth": -1.0}, 0.5, ValueError, "bandwidth"),
        ({"chunk_size": 0}, 0.5, ValueError, "chunk_size"),
        ({"support_chunk_size": 0}, 0.5, ValueError, "support_chunk_size"),
        ({"support_chunk_size": 2.5}, 0.5, ValueError, "support_chunk_size"),
    ],
)
def test_invalid_parameters_raise_clear_errors(kwargs, t, error, match):
    S, X = np.ones((3, 2)), np.zeros((2, 2))
    with pytest.raises(error, match=match):
        nw_velocity(X, S, t, **kwargs)


COMPLEX = np.array([[1.0 + 1j, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize(
    "fn",
    [
        nw_logits,
        nw_weights,
        nw_local_mean,
        nw_velocity,
        nw_divergence,
        nw_velocity_and_divergence,
        nw_effective_sample_size,
        nw_log_density,
    ],
)
def test_complex_and_non_numeric_inputs_are_refused(fn):
    real = np.ones((2, 2))
    for x, s in ((COMPLEX, real), (real, COMPLEX), (real.astype(str), real)):
        with pytest.raises(TypeError, match="real|numeric"):
            fn(x, s, 0.5)
    with pytest.raises(TypeError, match="real"):
        fn(torch.from_numpy(COMPLEX), torch.from_numpy(real), 0.5)
    if fn is not nw_log_density:
        with pytest.raises(TypeError, match="real"):
            fn(real, real, 0.5, projection=COMPLEX)
    # object arrays of real numbers are fine
    got, ref = fn(real.astype(object), real, 0.5), fn(real, real, 0.5)
    for g, r in zip(*((z if isinstance(z, tuple) else (z,)) for z in (got, ref)), strict=True):
        np.testing.assert_allclose(g, r)


def test_empty_and_mismatched_inputs():
    S = np.ones((3, 2))
    with pytest.raises(ValueError, match="empty"):
        nw_velocity(np.zeros((1, 2)), np.zeros((0, 2)), 0.5)
    with pytest.raises(ValueError, match="features"):
        nw_velocity(np.zeros((1, 3)), S, 0.5)
    with pytest.raises(ValueError, match="2-D"):
        nw_velocity(np.zeros(2), S, 0.5)
    # no queries: empty results of the right shapes, dense and streamed
    for kw in ({}, {"support_chunk_size": 2}):
        assert nw_velocity(np.zeros((0, 2)), S, 0.5, **kw).shape == (0, 2)
        assert nw_weights(np.zeros((0, 2)), S, 0.5, **kw).shape == (0, 3)
        assert nw_effective_sample_size(np.zeros((0, 2)), S, 0.5, **kw).shape == (0,)
        assert nw_divergence(np.zeros((0, 2)), S, 0.5, **kw).shape == (0,)
        assert nw_log_density(np.zeros((0, 2)), S, 0.5, **kw).shape == (0,)


# -- the estimator on the same inputs -----------------------------------------------------------
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_sampler_on_robustness_cases_is_finite(case, backend):
    rng = np.random.default_rng(10 + CASES.index(case))
    S, X, sigma_min = _case(case, rng)
    for dtype in (np.float64, np.float32):
        est = NWFlowSampler(
            sigma_min=sigma_min, backend=backend, random_state=0, solver=SolverOptions(n_steps=8)
        )
        est.fit(S.astype(dtype))
        samples = est.sample(16)
        assert samples.dtype == dtype and samples.shape == (16, S.shape[1])
        assert np.all(np.isfinite(samples))
        _, v_ref = brute_force_field(X.astype(dtype), S.astype(dtype), 0.7, sigma_min)
        assert _normwise(est.velocity(X.astype(dtype), 0.7), v_ref) < TOL[dtype]
        assert np.all(np.isfinite(est.score_samples(X.astype(dtype))))
    if case == "m = 1":  # straight lines onto the single point (up to sigma_min noise)
        np.testing.assert_allclose(samples, np.tile(S, (16, 1)), atol=10 * sigma_min)


def test_sampler_raises_a_clear_error_when_magnitudes_overflow():
    S = np.array([[1e200, 0.0], [-1e200, 1.0], [0.0, 1e200]])
    est = NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=4)).fit(S)
    with pytest.raises(ValueError, match="too large"):
        est.sample(3)
    with pytest.raises(ValueError, match="too large"):
        est.velocity(np.zeros((2, 2)), 0.5)
    with pytest.raises(ValueError, match="too large"):
        NWFlowSampler(solver="dopri5", random_state=0).fit(S).sample(2)


# -- streaming over support chunks --------------------------------------------------------------
FUNCS = [
    nw_local_mean,
    nw_velocity,
    nw_weights,
    nw_effective_sample_size,
    nw_divergence,
]


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("projected", [False, True])
@pytest.mark.parametrize("t", [0.0, 0.3, 0.7, "per-row"])
def test_streaming_equals_dense(library, projected, t):
    rng = np.random.default_rng(4)
    S = rng.normal(size=(61, 5)) * 2.0 + 3.0
    X = rng.normal(size=(37, 5)) * 2.0
    P = rng.normal(size=(3, 5)) if projected else None
    t = rng.uniform(size=37) if t == "per-row" else t
    if library == "torch":
        S, X = torch.from_numpy(S), torch.from_numpy(X)
        P = None if P is None else torch.from_numpy(P)
        t = torch.from_numpy(t) if isinstance(t, np.ndarray) else t
    for fn in FUNCS:
        dense = _np(fn(X, S, t, projection=P))
        for rows, chunk in ((1, None), (13, 5), (60, None)):
            streamed = fn(X, S, t, projection=P, support_chunk_size=rows, chunk_size=chunk)
            assert type(streamed) is type(fn(X, S, t, projection=P))
            err = np.max(np.abs(_np(streamed) - dense)) / np.max(np.abs(dense))
            assert err < 1e-12, (fn.__name__, rows, err)
    logits = _np(nw_logits(X, S, t, projection=P))
    streamed = _np(nw_logits(X, S, t, projection=P, support_chunk_size=13))
    np.testing.assert_allclose(streamed, logits, rtol=1e-12, atol=1e-12 * np.abs(logits).max())


def test_streaming_log_density_equals_dense(gaussian_support):
    S, X = gaussian_support(150, 20, 4, seed=5)
    for t in (0.0, 0.5, 1.0):
        dense = nw_log_density(X, S, t)
        np.testing.assert_allclose(nw_log_density(X, S, t, support_chunk_size=7), dense, rtol=1e-13)
        got = nw_log_density(torch.from_numpy(X), torch.from_numpy(S), t, support_chunk_size=7)
        np.testing.assert_allclose(_np(got), dense, rtol=1e-13)


def test_streaming_is_chosen_automatically_and_copies_no_support():
    """m * max(d, 64) above the 2**23-element block budget: the support is streamed, read
    as given (float32 here, float64 queries: cast chunk by chunk), never copied whole."""
    rng = np.random.default_rng(6)
    S = rng.normal(size=(2**17 + 1, 4)).astype(np.float32)
    X = rng.normal(size=(20, 4))
    streamed = F.NWField(S)
    assert streamed.streaming and streamed.support is S
    dense = F.NWField(S, support_chunk_size=S.shape[0])  # one chunk of m rows: dense path
    assert not dense.streaming
    ref = dense.velocity(X, 0.6)
    np.testing.assert_allclose(streamed.velocity(X, 0.6), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(nw_velocity(X, S, 0.6), ref, rtol=1e-12, atol=1e-12)
    t_s = torch.from_numpy(S)
    np.testing.assert_allclose(_np(nw_velocity(torch.from_numpy(X), t_s, 0.6)), ref, atol=1e-12)
    # small supports stay on the dense path
    assert not F.NWField(S[:20]).streaming


def test_streaming_float32_fallback_and_gradients():
    rng = np.random.default_rng(7)
    S = rng.normal(size=(120, 3))
    X = _states(S, 0.995, 30, rng)
    _, v_ref = brute_force_field(X, S, 0.995, 0.01)
    v32 = nw_velocity(X.astype(np.float32), S.astype(np.float32), 0.995, support_chunk_size=16)
    assert v32.dtype == np.float32 and _normwise(v32, v_ref) < 1e-4
    s = torch.tensor(S, requires_grad=True)
    nw_velocity(torch.from_numpy(X), s, 0.6, support_chunk_size=16).sum().backward()
    g_stream = s.grad.clone()
    s.grad = None
    nw_velocity(torch.from_numpy(X), s, 0.6).sum().backward()
    torch.testing.assert_close(g_stream, s.grad, rtol=1e-10, atol=1e-12)


def test_sampler_support_chunk_size_parameter():
    rng = np.random.default_rng(8)
    S = rng.normal(size=(64, 2))
    ref = NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=10)).fit(S)
    streamed = pickle.loads(
        pickle.dumps(ref.set_params(engine=EngineOptions(support_chunk_size=9)))
    )
    base = NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=10)).fit(S)
    np.testing.assert_allclose(streamed.sample(20), base.sample(20), rtol=1e-10, atol=1e-10)
    X = rng.normal(size=(5, 2))
    np.testing.assert_allclose(streamed.score_samples(X), base.score_samples(X), rtol=1e-12)
    np.testing.assert_allclose(streamed.weights(X, 0.5), base.weights(X, 0.5), atol=1e-13)
    with pytest.raises(ValueError, match="support_chunk_size"):
        NWFlowSampler(engine=EngineOptions(support_chunk_size=0)).fit(S)


# -- n_jobs: trajectories and pipelines ---------------------------------------------------------
@pytest.mark.exactness
def test_n_jobs_trajectories_and_pipeline_equal_serial():
    from sklearn.decomposition import PCA

    from skflow.pipeline import make_sampling_pipeline
    from skflow.samplers._base import SAMPLING_BATCH_SIZE

    rng = np.random.default_rng(9)
    X = rng.normal(size=(40, 3))
    n = SAMPLING_BATCH_SIZE + 7  # two batches
    est = NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=3)).fit(X)
    t1, serial = est.set_params(engine=EngineOptions(n_jobs=1)).sample_trajectories(
        n, random_state=2
    )
    t2, parallel = est.set_params(engine=EngineOptions(n_jobs=2)).sample_trajectories(
        n, random_state=2
    )
    np.testing.assert_array_equal(t1, t2)
    np.testing.assert_array_equal(serial, parallel)
    pipe = make_sampling_pipeline(
        PCA(n_components=2), NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=3))
    )
    pipe.fit(X)
    one = pipe.set_params(nwflowsampler__engine=EngineOptions(n_jobs=1)).sample(n, random_state=4)
    two = pipe.set_params(nwflowsampler__engine=EngineOptions(n_jobs=2)).sample(n, random_state=4)
    np.testing.assert_array_equal(one, two)
    _, traj = pipe.sample_trajectories(n, random_state=4)
    np.testing.assert_array_equal(traj[-1], two)
