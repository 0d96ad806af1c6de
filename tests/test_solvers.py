"""ODE solvers: orders of accuracy, per-sample adaptivity, trajectories, Torch support."""

import numpy as np
import pytest
import torch

from skflow.solvers import FIXED_STEP_METHODS, METHODS, integrate


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


def test_per_sample_times_are_passed_to_the_field():
    seen = []

    def field(t, y):
        seen.append(np.asarray(t))
        return np.ones_like(y)

    integrate(field, np.zeros((3, 1)), (0.0, 1.0), method="dopri5")
    assert all(s.shape == (3,) or s.ndim == 1 for s in seen)
    assert seen[0].min() == 0.0  # integration starts at t = 0 exactly


@pytest.mark.parametrize("method", METHODS)
def test_trajectory_shape_and_endpoints(method):
    grid = np.linspace(0, 1, 11)
    sol = integrate(decay, np.ones((5, 2)), grid, method=method, return_trajectory=True)
    assert sol.y.shape == (11, 5, 2)
    np.testing.assert_array_equal(sol.y[0], np.ones((5, 2)))
    final = integrate(decay, np.ones((5, 2)), grid, method=method).y
    np.testing.assert_allclose(sol.y[-1], final)


@pytest.mark.parametrize("method", METHODS)
def test_torch_tensors_stay_torch(method):
    y0 = torch.ones(3, 2, dtype=torch.float64)
    sol = integrate(decay, y0, np.linspace(0, 1, 21), method=method)
    assert isinstance(sol.y, torch.Tensor)
    np.testing.assert_allclose(sol.y.numpy(), np.exp(-1.0), rtol=5e-2)


def test_errors():
    with pytest.raises(ValueError, match="Unknown solver"):
        integrate(decay, np.ones((1, 1)), method="leapfrog")
    with pytest.raises(ValueError, match="increasing"):
        integrate(decay, np.ones((1, 1)), (1.0, 0.0))
    with pytest.raises(ValueError, match="at least two"):
        integrate(decay, np.ones((1, 1)), (0.0,))
    with pytest.raises(FloatingPointError, match="non-finite"):
        integrate(lambda t, y: y * np.nan, np.ones((1, 1)), method="dopri5")


def test_fixed_methods_listed():
    assert set(FIXED_STEP_METHODS) < set(METHODS)
