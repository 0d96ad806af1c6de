"""Tests of skflow.solvers: the tableaux, fixed-step and adaptive integration, their properties.

ODE solvers: orders of accuracy, per-sample adaptivity, trajectories, Torch support.

Properties of skflow.solvers on non-autonomous problems with known solutions.

Orders of convergence where the field depends on time (so every stage time is exercised),
per-row results independent of the batch, host synchronisations per adaptive step, and the
errors that name the failing rows.
"""

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch
from nw_reference import brute_force_field
from torch.overrides import TorchFunctionMode

from skflow.field import nw_velocity
from skflow.solvers import (
    FIXED_STEP_METHODS,
    METHODS,
    TABLEAUS,
    ButcherTableau,
    StepSizeError,
    evaluations_per_flow,
    integrate,
)


def decay(t, y):
    return -y


@pytest.mark.parametrize("method, order", [("euler", 1), ("midpoint", 2), ("heun", 2), ("rk4", 4)])
def test_fixed_step_convergence_order(method, order):
    y0 = np.ones((2, 3))
    errors = []
    for n in (20, 40):
        sol = integrate(decay, y0, np.linspace(0, 1, n + 1), method=method)
        errors.append(abs(sol.y[0, 0] - np.exp(-1.0)))
    observed = np.log2(errors[0] / errors[1])
    assert abs(observed - order) < 0.2


def test_dopri5_meets_tolerance_with_few_evaluations():
    sol = integrate(decay, np.ones((4, 2)), (0.0, 1.0), method="dopri5", rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(sol.y, np.exp(-1.0), rtol=1e-7)
    assert sol.n_evals < 200


def test_dopri5_steps_each_sample_on_its_own_error():
    """Rows with different stiffness are integrated to tolerance, each on its own clock."""

    def field(t, y):  # column 1 carries each row's constant rate
        return np.stack([-y[:, 1] * y[:, 0], np.zeros(len(y))], axis=1)

    y0 = np.array([[1.0, 1.0], [1.0, 50.0]])
    sol = integrate(field, y0, (0.0, 1.0), method="dopri5", rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(sol.y[:, 0], np.exp(-y0[:, 1]), rtol=1e-5, atol=1e-10)
    slow_alone = integrate(field, y0[:1], (0.0, 1.0), method="dopri5", rtol=1e-7, atol=1e-12)
    # the slow row's result does not depend on being batched with a stiff row
    np.testing.assert_allclose(sol.y[0], slow_alone.y[0], rtol=1e-12)


@pytest.mark.exactness
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_per_sample_times_are_passed_to_the_field(library):
    """dopri5 passes one float64 time per running row, of the state's kind, inside [0, 1]."""
    seen = []

    def field(t, y):
        seen.append((t, y.shape[0]))
        v = 0.0 * y
        v[:, 0] = y[:, 1]  # constant speed per row: y0 + speed * t
        return v

    y0 = np.array([[0.0, 1.0], [0.0, 40.0], [0.0, 0.5]])
    y0 = torch.as_tensor(y0) if library == "torch" else y0
    sol = integrate(field, y0, (0.0, 1.0), method="dopri5")
    kind = torch.Tensor if library == "torch" else np.ndarray
    assert all(isinstance(t, kind) and t.dtype == y0.dtype and t.shape == (n,) for t, n in seen)
    np.testing.assert_array_equal(np.asarray(seen[0][0]), 0.0)  # starts at t = 0 exactly
    times = np.concatenate([np.asarray(t) for t, _ in seen])
    assert times.min() == 0.0 and times.max() == 1.0
    np.testing.assert_allclose(np.asarray(sol.y[:, 0]), [1.0, 40.0, 0.5], rtol=1e-12)


TRAJECTORY_RTOL = {"euler": 0.06, "midpoint": 5e-3, "heun": 5e-3, "rk4": 1e-5, "dopri5": 1e-4}


@pytest.mark.exactness
@pytest.mark.parametrize("method", METHODS)
def test_trajectory_values_and_endpoints(method):
    grid = np.linspace(0, 1, 11)
    sol = integrate(decay, np.ones((5, 2)), grid, method=method, return_trajectory=True)
    np.testing.assert_array_equal(sol.y[0], np.ones((5, 2)))
    exact = np.exp(-grid)[:, None, None] * np.ones((11, 5, 2))
    np.testing.assert_allclose(sol.y, exact, rtol=TRAJECTORY_RTOL[method])
    final = integrate(decay, np.ones((5, 2)), grid, method=method).y
    np.testing.assert_allclose(sol.y[-1], final)


@pytest.mark.parametrize("method", METHODS)
def test_torch_tensors_stay_torch(method):
    y0 = torch.ones(3, 2, dtype=torch.float64)
    sol = integrate(decay, y0, np.linspace(0, 1, 21), method=method)
    assert isinstance(sol.y, torch.Tensor) and sol.y.dtype == torch.float64
    np.testing.assert_allclose(sol.y.numpy(), np.exp(-1.0), rtol=TRAJECTORY_RTOL[method])


def test_errors():
    with pytest.raises(ValueError, match="Unknown solver"):
        integrate(decay, np.ones((1, 1)), method="leapfrog")
    with pytest.raises(ValueError, match="increasing"):
        integrate(decay, np.ones((1, 1)), (1.0, 0.0))
    with pytest.raises(ValueError, match="at least two"):
        integrate(decay, np.ones((1, 1)), (0.0,))
    with pytest.raises(FloatingPointError, match="non-finite"):
        integrate(lambda t, y: y * np.nan, np.ones((1, 1)), method="dopri5")


# Order conditions of Runge-Kutta methods (Butcher): sum over trees up to order 4.
ORDER_CONDITIONS = {
    1: [lambda b, A, c: b.sum() - 1.0],
    2: [lambda b, A, c: b @ c - 1 / 2],
    3: [lambda b, A, c: b @ c**2 - 1 / 3, lambda b, A, c: b @ A @ c - 1 / 6],
    4: [
        lambda b, A, c: b @ c**3 - 1 / 4,
        lambda b, A, c: (b * c) @ A @ c - 1 / 8,
        lambda b, A, c: b @ A @ c**2 - 1 / 12,
        lambda b, A, c: b @ A @ A @ c - 1 / 24,
    ],
}


def _matrices(tab):
    s = len(tab.c)
    A = np.zeros((s, s))
    for i, row in enumerate(tab.a):
        A[i, : len(row)] = row
    return np.array(tab.b), A, np.array(tab.c)


@pytest.mark.parametrize("name", list(TABLEAUS))
def test_tableaus_satisfy_their_order_conditions(name):
    tab = TABLEAUS[name]
    b, A, c = _matrices(tab)
    np.testing.assert_allclose(A.sum(axis=1), c, atol=1e-15)  # stage times are consistent
    for order, conditions in ORDER_CONDITIONS.items():
        residuals = [abs(cond(b, A, c)) for cond in conditions]
        if order <= tab.order:
            assert max(residuals) < 1e-14, (order, residuals)
        else:  # the order is exactly the one claimed
            assert max(residuals) > 1e-3, (order, residuals)
    if tab.error is not None:  # the embedded solution is of order 4
        b_hat = b - np.array(tab.error)
        assert (
            max(abs(cond(b_hat, A, c)) for k in (1, 2, 3, 4) for cond in ORDER_CONDITIONS[k])
            < 1e-14
        )
        assert tab.fsal and np.allclose(A[-1], b)


def test_methods_are_the_tableaus():
    assert METHODS == tuple(TABLEAUS)
    assert FIXED_STEP_METHODS == tuple(k for k, tab in TABLEAUS.items() if tab.error is None)


def test_bad_tableaus():
    with pytest.raises(ValueError, match="row i of a must hold i weights"):
        ButcherTableau("bad", (0.0, 1.0), ((), (0.5, 0.5)), (0.5, 0.5), 2)
    with pytest.raises(ValueError, match="need 2 entries each"):
        ButcherTableau("bad", (0.0, 1.0), ((), (1.0,)), (1.0,), 2)
    no_fsal = ButcherTableau("nofsal", (0.0, 1.0), ((), (1.0,)), (0.5, 0.5), 2, error=(0.5, -0.5))
    with pytest.raises(ValueError, match="first-same-as-last"):
        integrate(decay, np.ones((1, 1)), method=no_fsal)


Y0 = np.array([[1.0, 2.0], [0.5, -1.0], [-2.0, 0.25]])
RATES = np.array([1.0, -0.5])


def _cos(t):
    if isinstance(t, float):
        return math.cos(t)
    return torch.cos(t) if torch.is_tensor(t) else np.cos(t)


def _column(t):
    """Per-row clocks (dopri5) as a column; a scalar time stays a scalar."""
    return t if isinstance(t, float) else t[:, None]


def oscillating(t, y):
    """``dy/dt = 3 cos(3 t) r y`` with ``r = (1, -0.5)`` per column: ``y0 exp(r sin 3t)``."""
    v = 3.0 * _cos(3.0 * _column(t)) * y
    v[:, 1] = -0.5 * v[:, 1]
    return v


def oscillating_exact(t):
    return Y0 * np.exp(RATES * math.sin(3.0 * t))


def _as(library, a):
    return torch.as_tensor(a, dtype=torch.float64) if library == "torch" else np.asarray(a)


def _np(a):
    return a.numpy() if torch.is_tensor(a) else np.asarray(a)


# --------------------------------------------------------------------------------------------
# orders of convergence on a time-dependent ODE
# --------------------------------------------------------------------------------------------

FIXED_ORDERS = [("euler", 1), ("midpoint", 2), ("heun", 2), ("rk4", 4)]


def _observed_order(method, library, steps=(32, 64, 128)):
    errors = []
    for n in steps:
        y = integrate(oscillating, _as(library, Y0), np.linspace(0, 1, n + 1), method=method).y
        errors.append(np.abs(_np(y) - oscillating_exact(1.0)).max())
    return math.log2(errors[-2] / errors[-1]), errors


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("method, order", FIXED_ORDERS)
def test_fixed_step_order_on_time_dependent_ode(method, order, library):
    observed, errors = _observed_order(method, library)
    assert abs(observed - order) < 0.25, (observed, errors)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_dopri5_tableau_is_fifth_order_on_time_dependent_ode(library):
    """The propagated solution of the dopri5 pair, taken with fixed steps, is of order 5."""
    fixed = replace(TABLEAUS["dopri5"], error=None)
    observed, errors = _observed_order(fixed, library, steps=(8, 16, 32))
    assert abs(observed - 5) < 0.25, (observed, errors)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_dopri5_error_follows_the_tolerance_on_time_dependent_ode(library):
    tols = [1e-4, 1e-6, 1e-8, 1e-10]
    errors, evals = [], []
    for tol in tols:
        sol = integrate(
            oscillating, _as(library, Y0), (0.0, 1.0), method="dopri5", rtol=tol, atol=tol
        )
        errors.append(np.abs(_np(sol.y) - oscillating_exact(1.0)).max())
        evals.append(sol.n_evals)
    assert all(e <= 3 * tol for e, tol in zip(errors, tols, strict=True)), errors
    slope = math.log(errors[0] / errors[-1]) / math.log(tols[0] / tols[-1])
    assert 0.6 < slope < 1.2, errors  # error proportional to the tolerance, not saturated
    assert evals == sorted(evals) and evals[-1] < 600, evals


# --------------------------------------------------------------------------------------------
# per-row results do not depend on the batch
# --------------------------------------------------------------------------------------------


def _stiffness_rows(t, y):
    """Row-wise stiffness from the constant column 1: rows need different step sizes."""
    tc = _column(t)
    v = -y[:, 1:2] * (1.0 + 0.5 * _cos(5.0 * tc)) * y[:, :1] + _cos(7.0 * tc)
    return (torch.cat if torch.is_tensor(y) else np.concatenate)([v, 0.0 * v], 1)


def _batched(func, y0, size, grid):
    parts = [
        integrate(func, y0[i : i + size], grid, method="dopri5", return_trajectory=True).y
        for i in range(0, y0.shape[0], size)
    ]
    return np.concatenate([_np(p) for p in parts], axis=1)


def _nw_brute_force(support, sigma_min=0.01):
    """The shared float64 brute force (tests/nw_reference.py) as a Torch field."""
    S = support.numpy()

    def field(t, x):
        return torch.from_numpy(brute_force_field(x.numpy(), S, t.numpy(), sigma_min)[1])

    return field


# The NumPy NW field is row-wise exact to the last bits whatever the batch. The Torch one
# is not (at t = 0.95 a row's velocity moves by up to 4e-13 with the batch size, from the
# field's own kernels), so for Torch the solve uses the float64 brute force, whose rows do not
# depend on the batch: the test is about the solver.
@pytest.mark.parametrize(
    "library, problem",
    [
        ("numpy", "nw_velocity"),
        ("torch", "nw written out"),
        ("numpy", "time-dependent"),
        ("torch", "time-dependent"),
    ],
)
def test_dopri5_rows_do_not_depend_on_the_batch(library, problem):
    rng = np.random.default_rng(7)
    grid = np.linspace(0.0, 1.0, 5)  # several output intervals: the step carries across them
    S = _as(library, rng.standard_normal((40, 3)))
    if problem == "nw_velocity":
        y0 = _as(library, rng.standard_normal((200, 3)))

        def func(t, x):
            return nw_velocity(x, S, t, sigma_min=0.01)

    elif problem == "nw written out":
        y0, func = _as(library, rng.standard_normal((200, 3))), _nw_brute_force(S)
    else:
        y0 = _as(library, np.column_stack([rng.standard_normal(200), rng.uniform(0, 30, 200)]))
        func = _stiffness_rows
    whole = _batched(func, y0, 200, grid)
    fives = _batched(func, y0, 5, grid)
    ones = _batched(func, y0[:20], 1, grid)
    np.testing.assert_allclose(fives, whole, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ones, whole[:, :20], rtol=0, atol=1e-12)
    sol = integrate(func, y0, grid, method="dopri5")
    assert sol.n_rejected > 0 and np.ptp(_np(sol.y)) > 1.0  # a non-trivial solve


# --------------------------------------------------------------------------------------------
# host synchronisations per adaptive step (Torch)
# --------------------------------------------------------------------------------------------


class _HostSyncCounter(TorchFunctionMode):
    """Counts the Torch calls that copy device data to the host or wait for it."""

    NAMES = {"item", "tolist", "cpu", "numpy", "nonzero", "__bool__", "__int__", "__float__"}
    NAMES |= {"__index__", "masked_select", "unique"}

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        masked = name == "__getitem__" and any(
            torch.is_tensor(a) and a.dtype == torch.bool for a in _flatten(args[1:])
        )
        self.count += name in self.NAMES or masked
        return func(*args, **(kwargs or {}))


def _flatten(items):
    for item in items:
        if isinstance(item, tuple | list):
            yield from _flatten(item)
        else:
            yield item


def _counting_field(calls):
    def field(t, y):
        calls.append(y.shape[0])
        return oscillating(t, y)

    return field


def test_dopri5_one_host_sync_per_step_torch():
    scales = np.linspace(0.5, 2, 90)[:, None]
    y0 = torch.as_tensor(np.tile(Y0, (30, 1)) * scales)
    grid = np.linspace(0.0, 1.0, 4)
    calls = []
    with _HostSyncCounter() as counter:
        sol = integrate(_counting_field(calls), y0, grid, method="dopri5", rtol=1e-8, atol=1e-8)
    steps = (len(calls) - 2) // 6  # first field value and initial step, then 6 per step
    assert len(calls) == 2 + 6 * steps == sol.n_evals
    # one read per step, one per output interval (the read that finds no row left), one for
    # the step counters at the end
    assert steps <= counter.count <= steps + (len(grid) - 1) + 1, (counter.count, steps)
    assert steps >= 10
    exact = np.tile(oscillating_exact(1.0), (30, 1)) * scales
    np.testing.assert_allclose(sol.y.numpy(), exact, rtol=1e-6)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_dopri5_one_host_sync_per_step_cuda():
    y0 = torch.as_tensor(np.tile(Y0, (30, 1)), device="cuda")
    grid = np.linspace(0.0, 1.0, 4)
    calls = []
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sol = integrate(_counting_field(calls), y0, grid, method="dopri5", rtol=1e-8, atol=1e-8)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message) for w in caught)
    steps = (len(calls) - 2) // 6
    assert sol.y.device.type == "cuda"
    assert steps <= syncs <= steps + (len(grid) - 1) + 1, (syncs, steps)
    np.testing.assert_allclose(sol.y[:3].cpu().numpy(), oscillating_exact(1.0), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# failures name the rows and the time reached
# --------------------------------------------------------------------------------------------


def _singular_row(t, y):
    """Row 1 (flag in column 1) follows dy/dt = 1 / (0.5 - t), which is unbounded at t = 0.5."""
    tc = _column(t)
    gap = 0.5 - tc
    safe = gap + (gap == 0) * 1.0
    v = y[:, 1:2] / safe - (1.0 - y[:, 1:2]) * y[:, :1]
    return (torch.cat if torch.is_tensor(y) else np.concatenate)([v, 0.0 * v], 1)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_collapsing_step_size_names_rows_and_time(library):
    y0 = _as(library, [[1.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    calls = []

    def field(t, y):
        calls.append(1)
        return _singular_row(t, y)

    with pytest.raises(StepSizeError, match=r"collapsed for 1 row\(s\) \[1\] at t = \[0\.5\]") as e:
        integrate(field, y0, (0.0, 1.0), method="dopri5", max_steps=100_000)
    assert isinstance(e.value, RuntimeError) and "max_steps=100000" in str(e.value)
    assert len(calls) < 3000  # stopped at the collapse, not at the step cap


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_non_finite_field_names_rows_and_time(library):
    def field(t, y):
        v = -y + 0.0 * _column(t)
        bad = (_column(t) > 0.3) & (y[:, 1:2] > 0.5)
        where = np.where if library == "numpy" else torch.where
        return v + where(bad, math.nan, 0.0)

    y0 = _as(library, [[1.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    with pytest.raises(
        FloatingPointError, match=r"non-finite values for 1 row\(s\) \[2\] at t = \[0\."
    ) as e:
        integrate(field, y0, (0.0, 1.0), method="dopri5")
    reached = float(str(e.value).split("t = [")[1].split("]")[0])
    assert 0.0 < reached <= 0.3


@pytest.mark.exactness
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_dopri5_leaves_the_initial_state_unchanged(library):
    y0 = _as(library, Y0)
    before = _np(y0).copy()
    sol = integrate(oscillating, y0, (0.0, 0.5, 1.0), method="dopri5", return_trajectory=True)
    np.testing.assert_array_equal(_np(y0), before)
    np.testing.assert_array_equal(_np(sol.y[0]), before)
    np.testing.assert_allclose(_np(sol.y[1]), oscillating_exact(0.5), rtol=1e-5)


def test_dopri5_step_counts_add_up_per_row():
    """Every field evaluation of a step is over the running rows: the counts agree."""
    y0 = np.column_stack([np.ones(6), np.linspace(0, 30, 6)])
    rows = []

    def field(t, y):
        rows.append(y.shape[0])
        return _stiffness_rows(t, y)

    sol = integrate(field, y0, (0.0, 1.0), method="dopri5")
    assert rows[:2] == [6, 6]
    row_steps = sum(rows[2:]) // 6
    assert sol.n_accepted + sol.n_rejected == row_steps
    assert sum(rows[2:]) == 6 * row_steps
    # the stiffest row needs more steps than the non-stiff one, which finishes early
    assert rows[-1] < 6 and sol.n_accepted > 6 * 5


@pytest.mark.parametrize("method", FIXED_STEP_METHODS)
def test_evaluations_per_flow_counts_a_fixed_step_flow(method):
    """The count is what a flow of ``n_steps`` steps evaluates (``ODESolution.n_evals``)."""
    sol = integrate(decay, np.ones((3, 2)), np.linspace(0.0, 1.0, 8), method=method)
    assert evaluations_per_flow(method, 7) == sol.n_evals
    assert evaluations_per_flow(TABLEAUS[method], 7) == sol.n_evals


def test_evaluations_per_flow_of_dopri5_counts_accepted_steps():
    """Six evaluations per step (the seventh stage is the next step's first)."""
    assert evaluations_per_flow("dopri5", 10) == 60
    with pytest.raises(ValueError, match="Unknown solver"):
        evaluations_per_flow("rk45", 10)
