"""ODE solvers: orders of accuracy, per-sample adaptivity, trajectories, Torch support."""

import numpy as np
import pytest
import torch

from skflow.solvers import FIXED_STEP_METHODS, METHODS, TABLEAUS, ButcherTableau, integrate


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
