"""ODE solvers for flows on [0, 1], working on NumPy arrays and Torch tensors alike.

The vector field is any callable ``func(t, y) -> dy/dt`` with ``y`` of shape ``(n, d)`` and
``t`` either a Python float (fixed-step methods: one time for the whole batch) or an array of
shape ``(n,)`` (the adaptive method: every sample keeps its own clock). Integration starts at
the first grid time exactly; the NW field is finite at ``t = 0``, so no clamping is needed.

Methods
-------
``"euler"``
    First order, one evaluation per step.
``"midpoint"``
    Explicit midpoint, second order, two evaluations.
``"heun"``
    Heun's trapezoidal method, second order, two evaluations.
``"rk4"``
    Classical Runge-Kutta, fourth order, four evaluations.
``"dopri5"``
    Dormand-Prince 5(4) with per-sample error control: each sample has its own step size,
    accepted or rejected on its own error estimate, so a few stiff samples (those that end up
    between support points near ``t = 1``) do not force small steps on the whole batch.
    First-same-as-last: six new evaluations per accepted step.

This module knows nothing else of skflow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._backend import get_namespace

__all__ = ["FIXED_STEP_METHODS", "METHODS", "ODESolution", "integrate"]

FIXED_STEP_METHODS = ("euler", "midpoint", "heun", "rk4")
METHODS = (*FIXED_STEP_METHODS, "dopri5")


@dataclass
class ODESolution:
    """Result of :func:`integrate`.

    Attributes
    ----------
    t : ndarray of shape (T,)
        Output times.
    y : array of shape (n, d) or (T, n, d)
        Final state, or the states at every output time when a trajectory was requested.
    n_evals : int
        Number of calls of the vector field (each over the active batch).
    """

    t: np.ndarray
    y: Any
    n_evals: int


def _check_grid(t_grid: Any) -> np.ndarray:
    grid = np.asarray(t_grid, dtype=np.float64)
    if grid.ndim != 1 or grid.size < 2:
        raise ValueError("t_grid must be a 1-D sequence of at least two times.")
    if not np.all(np.isfinite(grid)) or np.any(np.diff(grid) <= 0):
        raise ValueError("t_grid must be finite and strictly increasing.")
    return grid


def _fixed_step(method: str, func: Callable, t: float, h: float, y: Any) -> tuple[Any, int]:
    if method == "euler":
        return y + h * func(t, y), 1
    if method == "midpoint":
        k1 = func(t, y)
        return y + h * func(t + 0.5 * h, y + 0.5 * h * k1), 2
    if method == "heun":
        k1 = func(t, y)
        k2 = func(t + h, y + h * k1)
        return y + 0.5 * h * (k1 + k2), 2
    k1 = func(t, y)
    k2 = func(t + 0.5 * h, y + 0.5 * h * k1)
    k3 = func(t + 0.5 * h, y + 0.5 * h * k2)
    k4 = func(t + h, y + h * k3)
    return y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4), 4


# Dormand-Prince 5(4) tableau.
_DP_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0])
_DP_A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
_DP_B5 = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0])
_DP_B4 = np.array([5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40])
_DP_E = _DP_B5 - _DP_B4


def _col(v: np.ndarray, xp: Any, like: Any) -> Any:
    return xp.asarray(v.reshape(-1, 1), like)


def _dopri5_segment(func, y, t0, t1, *, rtol, atol, max_steps, h_init, xp):
    """Integrate every row of ``y`` from ``t0`` to ``t1`` with its own step size."""
    n = y.shape[0]
    t = np.full(n, t0)
    h = np.full(n, min(h_init, t1 - t0))
    k1 = func(t.copy(), y)
    n_evals = 1
    for _ in range(max_steps):
        active = np.flatnonzero(t < t1 - 1e-14 * max(1.0, abs(t1)))
        if active.size == 0:
            return y, n_evals, h
        ha = np.minimum(h[active], t1 - t[active])
        ta = t[active]
        ya = y[active] if active.size < n else y
        hc = _col(ha, xp, y)
        ks = [k1[active] if active.size < n else k1]
        for i in range(1, 7):
            incr = sum(_DP_A[i][j] * ks[j] for j in range(i) if _DP_A[i][j] != 0.0)
            ks.append(func(ta + _DP_C[i] * ha, ya + hc * incr))
        n_evals += 6
        y5 = ya + hc * sum(float(_DP_B5[j]) * ks[j] for j in range(6) if _DP_B5[j] != 0.0)
        err_vec = hc * sum(float(_DP_E[j]) * ks[j] for j in range(7))
        scale = atol + rtol * xp.maximum(abs(ya), abs(y5))
        ratio = err_vec / scale
        err = _to_numpy(xp.sqrt(xp.mean(ratio * ratio, axis=1)))
        if not np.all(np.isfinite(err)):
            raise FloatingPointError("dopri5: the vector field returned non-finite values.")
        accept = err <= 1.0
        factor = np.clip(0.9 * np.power(np.maximum(err, 1e-10), -0.2), 0.2, 10.0)
        h[active] = ha * factor
        if accept.any():
            idx = active[accept]
            acc = xp.asarray(accept, y) > 0.5 if xp.name == "torch" else accept
            y = _assign_rows(xp, y, idx, y5[acc])
            k1 = _assign_rows(xp, k1, idx, ks[6][acc])
            t[idx] = ta[accept] + ha[accept]
    raise RuntimeError(
        f"dopri5 did not reach t = {t1} within max_steps={max_steps}; raise max_steps or rtol."
    )


def _assign_rows(xp, target, idx, values):
    if xp.name == "torch":
        target = target.clone()
        target[xp.torch.as_tensor(idx, device=target.device)] = values
        return target
    target = target.copy()
    target[idx] = values
    return target


def _to_numpy(a: Any) -> np.ndarray:
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def integrate(
    func: Callable[[Any, Any], Any],
    y0: Any,
    t_grid: Any = (0.0, 1.0),
    *,
    method: str = "heun",
    return_trajectory: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    max_steps: int = 100_000,
) -> ODESolution:
    """Integrate ``dy/dt = func(t, y)`` over ``t_grid``.

    Parameters
    ----------
    func : callable
        ``func(t, y)`` returning an array shaped like ``y``. ``t`` is a Python float for the
        fixed-step methods and a float64 ndarray of shape (n,) for ``"dopri5"``.
    y0 : array of shape (n, d)
        Initial state (NumPy or Torch; the solver keeps the kind and device).
    t_grid : array-like of shape (T,), default=(0.0, 1.0)
        Strictly increasing times. Fixed-step methods take one step per interval; dopri5 uses
        them as output times only.
    method : {"euler", "midpoint", "heun", "rk4", "dopri5"}, default="heun"
    return_trajectory : bool, default=False
        Return the states at every grid time, shape (T, n, d), instead of the final state.
    rtol, atol : float, default=1e-5
        Tolerances of dopri5 (ignored by fixed-step methods).
    max_steps : int, default=100000
        Cap on dopri5 iterations per output interval.

    Returns
    -------
    solution : ODESolution

    Examples
    --------
    >>> import numpy as np
    >>> sol = integrate(lambda t, y: -y, np.ones((1, 1)), np.linspace(0, 1, 101), method="rk4")
    >>> round(float(sol.y[0, 0]), 8) == round(float(np.exp(-1.0)), 8)
    True
    """
    if method not in METHODS:
        raise ValueError(f"Unknown solver {method!r}; choose one of {METHODS}.")
    grid = _check_grid(t_grid)
    xp = get_namespace(y0)
    y = y0
    states = [y] if return_trajectory else None
    n_evals = 0
    h_prev = 0.01
    for t0, t1 in zip(grid[:-1], grid[1:], strict=True):
        if method == "dopri5":
            y, evals, h_last = _dopri5_segment(
                func,
                y,
                float(t0),
                float(t1),
                rtol=rtol,
                atol=atol,
                max_steps=max_steps,
                h_init=h_prev,
                xp=xp,
            )
            h_prev = float(np.median(h_last))
        else:
            y, evals = _fixed_step(method, func, float(t0), float(t1 - t0), y)
        n_evals += evals
        if return_trajectory:
            states.append(y)
    if return_trajectory:
        y = xp.concat([s[None] for s in states], axis=0)
    return ODESolution(t=grid, y=y, n_evals=n_evals)
