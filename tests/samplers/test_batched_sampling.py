"""Batched supports, given noise and the time tolerance of the samplers and the field."""

import numpy as np
import pytest

from skflow import (
    EngineOptions,
    LearnedFlowSampler,
    NetworkOptions,
    NWFlowSampler,
    SolverOptions,
    TrainingOptions,
)
from skflow.tasks import GaussianMixtureTasks

B, M, N, D = 4, 9, 6, 3
TOL = {np.float64: 1e-10, np.float32: 1e-5}


def _supports(dtype=np.float64):
    return np.random.default_rng(0).normal(size=(B, M, D)).astype(dtype)


def _noise(dtype, seed=3, shape=(B, N, D)):
    return np.random.RandomState(seed).standard_normal(shape).astype(dtype)


@pytest.fixture(scope="module")
def learned():
    tasks = GaussianMixtureTasks(n_features=D)
    lf = LearnedFlowSampler(
        NetworkOptions(d_model=16, n_heads=2, n_layers=1),
        training=TrainingOptions(max_iter=5, batch_tasks=4, support_size=M, n_targets=16),
        solver=SolverOptions(n_steps=8),
        random_state=0,
    )
    return lf.fit(tasks)


def _loop(sampler, S, X0, **kw):
    return np.stack(
        [sampler.sample(X0.shape[1], support=S[b], noise=X0[b], **kw) for b in range(len(S))]
    )


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nw_batched_equals_per_task_loop(backend, dtype):
    S = _supports(dtype)
    s = NWFlowSampler(backend=backend, solver=SolverOptions(n_steps=12)).fit(S[0])
    X = s.sample(N, support=S, random_state=3)
    assert X.shape == (B, N, D) and X.dtype == dtype
    np.testing.assert_allclose(X, _loop(s, S, _noise(dtype)), rtol=0, atol=TOL[dtype])
    # task 0 of the batch is the single-task call with the same seed
    np.testing.assert_allclose(X[0], s.sample(N, support=S[0], random_state=3), atol=TOL[dtype])
    t, traj = s.sample_trajectories(N, support=S, random_state=3)
    assert traj.shape == (13, B, N, D) and t.shape == (13,)
    np.testing.assert_allclose(traj[-1], X, rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_nw_ragged_list_groups_by_size(backend):
    S = _supports()
    ragged = [S[0], S[1, :4], S[2], S[3, :1]]
    s = NWFlowSampler(backend=backend, solver=SolverOptions(n_steps=10)).fit(S[0])
    X = s.sample(N, support=ragged, random_state=5)
    expected = _loop(s, ragged, _noise(np.float64, seed=5))
    np.testing.assert_allclose(X, expected, rtol=0, atol=1e-10)
    # the order of the tasks (hence of the groups) does not change any task's samples
    flipped = s.sample(N, support=ragged[::-1], noise=_noise(np.float64, seed=5)[::-1])
    np.testing.assert_allclose(flipped[::-1], X, rtol=0, atol=1e-10)


def test_nw_batched_field_methods_equal_loop():
    S, X0 = _supports(), _noise(np.float64)
    s = NWFlowSampler().fit(S[0])
    t = np.linspace(0.0, 1.0, N)
    for method in ("velocity", "weights", "divergence", "effective_sample_size"):
        got = getattr(s, method)(X0, t, support=S)
        ref = np.stack([getattr(s, method)(X0[b], t, support=S[b]) for b in range(B)])
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg=method)
    per_task_t = np.tile(t, (B, 1))
    per_task_t[1] = 0.3
    got = s.velocity(X0, per_task_t, support=S)
    np.testing.assert_allclose(got[1], s.velocity(X0[1], 0.3, support=S[1]), atol=1e-12)


def test_nw_dopri5_and_pruned_batches_run_task_by_task():
    S = _supports()
    for params in ({"solver": "dopri5"}, {"engine": "pruned"}):
        s = NWFlowSampler(**params).fit(S[0])
        X = s.sample(N, support=S, random_state=1)
        np.testing.assert_allclose(X, _loop(s, S, _noise(np.float64, seed=1)), atol=1e-10)
    assert s.sampling_error_bound_ >= 0.0


@pytest.mark.exactness
def test_nw_batched_parallel_equals_serial():
    S = np.random.default_rng(1).normal(size=(3, 5, 2))
    s = NWFlowSampler(solver=SolverOptions(n_steps=5)).fit(S[0])
    serial = s.sample(4100, support=S, random_state=0)  # two row batches per task
    parallel = s.set_params(engine=EngineOptions(n_jobs=2)).sample(4100, support=S, random_state=0)
    np.testing.assert_array_equal(parallel, serial)


@pytest.mark.exactness
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_learned_batched_equals_per_task_loop(learned, dtype):
    S = _supports(dtype)
    X = learned.sample(N, support=S, random_state=3)
    assert X.shape == (B, N, D) and X.dtype == dtype
    # float64 supports run the network's learned branch in its float32 parameters
    tol = 1e-5 if dtype == np.float32 else 1e-6
    np.testing.assert_allclose(X, _loop(learned, S, _noise(dtype)), rtol=0, atol=tol)
    np.testing.assert_array_equal(learned.sample_batch(N, S, random_state=3), X)
    ragged = [S[0], S[1, :4], S[2, :4], S[3]]
    Xr = learned.sample(N, support=ragged, random_state=3)
    np.testing.assert_allclose(Xr, _loop(learned, ragged, _noise(dtype)), rtol=0, atol=tol)
    V = learned.velocity(_noise(dtype), 0.4, support=S)
    ref = np.stack([learned.velocity(_noise(dtype)[b], 0.4, support=S[b]) for b in range(B)])
    np.testing.assert_allclose(V, ref, rtol=0, atol=tol)


def test_learned_batched_equals_loop_in_float64_network(learned):
    import copy

    lf = copy.deepcopy(learned)
    lf.model_.double()
    S = _supports()
    X = lf.sample(N, support=S, random_state=3)
    np.testing.assert_allclose(X, _loop(lf, S, _noise(np.float64)), rtol=0, atol=1e-10)


@pytest.mark.exactness
@pytest.mark.parametrize("solver", ["heun", "dopri5"])
def test_noise_equals_seeded_path(solver):
    S = _supports()[0]
    # the plug-in: no frame, so the trajectory starts exactly at the given noise
    s = NWFlowSampler(sigma_min=0.01, solver=SolverOptions(solver, n_steps=10)).fit(S)
    seeded = s.sample(N, random_state=7)
    X0 = np.random.RandomState(7).standard_normal((N, D))
    np.testing.assert_array_equal(s.sample(N, noise=X0), seeded)
    t, traj = s.sample_trajectories(N, noise=X0)
    np.testing.assert_array_equal(traj, s.sample_trajectories(N, random_state=7)[1])
    np.testing.assert_array_equal(traj[0], X0)  # integration starts at the given points


@pytest.mark.exactness
def test_noise_shared_by_a_batch_and_learned(learned):
    S = _supports()
    X0 = _noise(np.float64)[0]
    s = NWFlowSampler(solver=SolverOptions(n_steps=6)).fit(S[0])
    shared = s.sample(N, support=S, noise=X0)
    for b in range(B):
        np.testing.assert_allclose(shared[b], s.sample(N, support=S[b], noise=X0), atol=1e-12)
    seeded = learned.sample(N, support=S[1], random_state=4)
    given = learned.sample(N, support=S[1], noise=np.random.RandomState(4).standard_normal((N, D)))
    np.testing.assert_array_equal(given, seeded)


def test_bad_batches_and_noise():
    S = _supports()
    s = NWFlowSampler().fit(S[0])
    with pytest.raises(ValueError, match="features"):
        s.sample(2, support=np.ones((2, 5, D + 1)))
    with pytest.raises(ValueError, match="empty"):
        s.sample(2, support=np.ones((2, 0, D)))
    bad = S.copy()
    bad[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        s.sample(2, support=bad)
    with pytest.raises(ValueError, match="NaN"):
        s.sample(2, support=[S[0], bad[1]])
    with pytest.raises(ValueError, match="rows"):
        s.sample(5, noise=np.zeros((4, D)))
    with pytest.raises(ValueError, match="shape"):
        s.sample(4, noise=np.zeros((4, D + 1)))
    with pytest.raises(ValueError, match="shape"):
        s.sample(4, support=S, noise=np.zeros((B + 1, 4, D)))
    with pytest.raises(ValueError, match="NaN"):
        s.sample(1, noise=np.full((1, D), np.inf))
    with pytest.raises(ValueError, match="either"):
        s.sample(4, noise=np.zeros((4, D)), random_state=0)
    with pytest.raises(ValueError, match="shape"):
        s.velocity(np.zeros((B, N, D)), 0.5, support=S[:2])
    with pytest.raises(ValueError, match="shape"):
        s.velocity(np.zeros((B, N, D)), np.zeros((B, N + 1)), support=S)


# -- times just outside [0, 1] ----------------------------------------------------------------
@pytest.mark.exactness
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_times_within_tolerance_are_clamped(backend):
    import torch

    from skflow.field import NWField

    S, X = _supports()[0], _noise(np.float64)[0]
    conv = torch.as_tensor if backend == "torch" else np.asarray
    field = NWField(conv(S), time_tolerance=1e-6)  # the default (inf) accepts any finite t
    for t_out, t_in in ((1.0 + 1e-9, 1.0), (-1e-9, 0.0), (1.0 + 9e-7, 1.0)):
        for method in ("velocity", "divergence", "weights"):
            got = getattr(field, method)(conv(X), t_out)
            ref = getattr(field, method)(conv(X), t_in)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(ref), err_msg=method)
        rows = np.full(N, t_out)
        # two code paths (per-row times vs a scalar time): rtol 1e-12
        np.testing.assert_allclose(
            np.asarray(field.velocity(conv(X), conv(rows))),
            np.asarray(field.velocity(conv(X), t_in)),
            rtol=1e-12,
            atol=1e-12,
        )
    for bad in (1.0 + 2e-6, -2e-6):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            field.velocity(conv(X), bad)
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            field.velocity(conv(X), conv(np.full(N, bad)))


def test_sampler_velocity_clamps_times(learned):
    S, X = _supports()[0], _noise(np.float64)[0]
    s = NWFlowSampler().fit(S)
    # per-row times against a scalar time are two code paths: MKL's default mode may change
    # the last bits with the path and the memory alignment, so equal to 1e-13 relative, not
    # bit for bit (a clamp to the wrong end differs at order 1)
    close = {"rtol": 1e-13, "atol": 1e-13}
    for est in (s, learned):
        np.testing.assert_allclose(
            est.velocity(X, 1.0 + 1e-9, support=S), est.velocity(X, 1.0, support=S), **close
        )
        np.testing.assert_allclose(
            est.velocity(X, [-1e-9] * N, support=S), est.velocity(X, 0.0, support=S), **close
        )
        np.testing.assert_allclose(  # the default time_tolerance=inf: frozen at 1
            est.velocity(X, 1.5, support=S), est.velocity(X, 1.0, support=S), **close
        )
        # the tolerance is a field of the solver options: NWFlowSampler's set_params takes the
        # group, LearnedFlowSampler's the nested name too (its solver keeps its n_steps)
        tight, loose = (
            ({"solver": SolverOptions(time_tolerance=1e-6)}, {"solver": SolverOptions()})
            if est is s
            else ({"solver__time_tolerance": 1e-6}, {"solver__time_tolerance": np.inf})
        )
        est.set_params(**tight)
        with pytest.raises(ValueError, match=r"\[0, 1\].*got 1\.00001"):
            est.velocity(X, 1.0 + 1e-5, support=S)
        est.set_params(**loose)


def test_torchdiffeq_dopri5_over_nwfield_completes():
    torchdiffeq = pytest.importorskip("torchdiffeq")
    import torch

    from skflow.field import NWField

    S = np.random.default_rng(2).normal(size=(30, 2))
    X0 = np.random.RandomState(0).standard_normal((64, 2))
    ours = NWFlowSampler(sigma_min=0.05, solver=SolverOptions("dopri5", rtol=1e-7, atol=1e-7)).fit(
        S
    )
    reference = ours.sample(64, noise=X0)
    grid = torch.tensor([0.0, 1.0], dtype=torch.float64)
    # jump_t lands the last step on 1 + rounding (the default tolerance); without it the
    # solver steps a whole step past 1 and interpolates back (a field with a larger one)
    for options, tolerance in (({"jump_t": grid[1:]}, 1e-6), (None, 0.5)):
        field = NWField(torch.as_tensor(S), sigma_min=0.05, time_tolerance=tolerance)
        seen = []

        def func(t, x, field=field, seen=seen):  # torchdiffeq passes a 0-d tensor
            seen.append(float(t))
            return field.velocity(x, t)

        path = torchdiffeq.odeint(
            func,
            torch.as_tensor(X0),
            grid,
            method="dopri5",
            rtol=1e-7,
            atol=1e-7,
            options=options,
        )
        assert max(seen) > 1.0  # the case of the issue: evaluated past the end
        np.testing.assert_allclose(path[-1].numpy(), reference, atol=1e-3)
    strict = NWField(torch.as_tensor(S), time_tolerance=1e-6)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):  # rounding only: refuses a whole step
        torchdiffeq.odeint(
            lambda t, x: strict.velocity(x, t),
            torch.as_tensor(X0),
            grid,
            method="dopri5",
        )


# -- the prepared field's per-call work ---------------------------------------------------
def test_batched_mask_engine_equals_lift_and_numpy():
    import torch

    from skflow.field import NWField

    S, X = _supports(), _noise(np.float64)
    ref = NWField(S).velocity(X, 0.7)
    for bias in ("mask", "lift"):
        field = NWField(torch.as_tensor(S), attention_bias=bias)
        got = field.velocity(torch.as_tensor(X), 0.7).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg=bias)


@pytest.mark.exactness
def test_cached_checks_and_coefficients_stay_correct():
    import torch

    from skflow.field import NWField

    S, X = _supports()[0], _noise(np.float64)[0]
    field = NWField(S)
    first = field.velocity(X, 0.25)
    np.testing.assert_array_equal(field.velocity(X, 0.25), first)  # cached coefficients
    x32 = X.astype(np.float32)  # another layout, the same time: float64 (the support's)
    np.testing.assert_array_equal(field.velocity(x32, 0.25), NWField(S).velocity(x32, 0.25))
    fresh = NWField(S).velocity(X, 0.5)
    np.testing.assert_array_equal(field.velocity(X, 0.5), fresh)
    with pytest.raises(ValueError, match="features"):  # a new layout is checked again
        field.velocity(X[:, :2], 0.25)
    with pytest.raises(TypeError, match="real"):
        field.velocity(X.astype(complex), 0.25)
    with pytest.raises(TypeError, match="mix"):
        field.velocity(torch.as_tensor(X), 0.25)
