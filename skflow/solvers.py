"""ODE solvers for flows on [0, 1], working on NumPy arrays and Torch tensors alike.

The vector field is any callable ``func(t, y) -> dy/dt`` with ``y`` of shape ``(n, d)`` and
``t`` either a Python float (fixed-step methods: one time for the whole batch) or a float64
vector of shape ``(n,)`` (the adaptive method: every sample keeps its own clock; a NumPy array
for NumPy states, a Torch tensor on the state's device for Torch states). Integration starts
at the first grid time exactly; the NW field is finite at ``t = 0``, so no clamping is needed.

Every method is an explicit Runge-Kutta method given by its :class:`ButcherTableau`
(:data:`TABLEAUS`), and all of them run through one stage routine.

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
    Dormand-Prince 5(4) with per-sample error control: each sample has its own clock and step
    size, accepted or rejected on its own error estimate, so a few stiff samples (those that end
    up between support points near ``t = 1``) do not force small steps on the whole batch, and
    the result of a sample does not depend on the other samples of its batch. Only the rows
    still running are evaluated. First-same-as-last: six new evaluations per step.

The adaptive state (clocks, step sizes, status of every row) lives on the state's device and
is updated in place, row by row. A step costs one host synchronisation: reading one integer
that says how many rows are still running and whether one has failed. A row whose step size
collapses below the floating-point resolution of its clock, or whose field is not finite,
stops the integration with an error naming the rows and the times they reached.

This module knows nothing else of skflow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._array import get_backend

__all__ = [
    "FIXED_STEP_METHODS",
    "METHODS",
    "TABLEAUS",
    "ButcherTableau",
    "ODESolution",
    "StepSizeError",
    "evaluations_per_flow",
    "integrate",
]

FIXED_STEP_METHODS = ("euler", "midpoint", "heun", "rk4")
METHODS = (*FIXED_STEP_METHODS, "dopri5")


@dataclass(frozen=True)
class ButcherTableau:
    """Coefficients of an explicit Runge-Kutta method, optionally with an embedded error estimate.

    Stage ``i`` of a step of size ``h`` from ``(t, y)`` is
    ``k_i = f(t + c_i h, y + h sum_{j<i} a_ij k_j)`` and the step returns
    ``y + h sum_i b_i k_i``.

    Attributes
    ----------
    name : str
    c : tuple of float, length s
        Nodes.
    a : tuple of s tuples
        Row ``i`` holds the ``i`` weights ``a_i0 .. a_i(i-1)`` (strictly lower triangular).
    b : tuple of float, length s
        Weights of the propagated solution.
    order : int
        Order of the propagated solution.
    error : tuple of float of length s, or None
        ``b - b_hat`` for an embedded solution of lower order: the local error estimate is
        ``h sum_i error_i k_i``. A tableau with an error estimate is integrated adaptively.
    fsal : bool
        First same as last: ``a[-1] == b``, so the last stage is the next step's first one.

    Examples
    --------
    >>> tab = TABLEAUS["heun"]
    >>> tab.c, tab.b, tab.order
    ((0.0, 1.0), (0.5, 0.5), 2)
    """

    name: str
    c: tuple
    a: tuple
    b: tuple
    order: int
    error: tuple | None = None
    fsal: bool = False

    def __post_init__(self) -> None:
        s = len(self.c)
        if (
            len(self.b) != s
            or len(self.a) != s
            or (self.error is not None and len(self.error) != s)
        ):
            raise ValueError(f"tableau {self.name!r}: c, a, b and error need {s} entries each.")
        if any(len(row) != i for i, row in enumerate(self.a)):
            raise ValueError(f"tableau {self.name!r}: row i of a must hold i weights.")


_DP_B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_DP_B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)

#: The tableau of every method of :func:`integrate`, by name.
TABLEAUS = {
    "euler": ButcherTableau("euler", (0.0,), ((),), (1.0,), 1),
    "midpoint": ButcherTableau("midpoint", (0.0, 0.5), ((), (0.5,)), (0.0, 1.0), 2),
    "heun": ButcherTableau("heun", (0.0, 1.0), ((), (1.0,)), (0.5, 0.5), 2),
    "rk4": ButcherTableau(
        "rk4",
        (0.0, 0.5, 0.5, 1.0),
        ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
        (1 / 6, 1 / 3, 1 / 3, 1 / 6),
        4,
    ),
    "dopri5": ButcherTableau(
        "dopri5",
        (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0),
        (
            (),
            (1 / 5,),
            (3 / 40, 9 / 40),
            (44 / 45, -56 / 15, 32 / 9),
            (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
            (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
            _DP_B5[:6],
        ),
        _DP_B5,
        5,
        error=tuple(p - q for p, q in zip(_DP_B5, _DP_B4, strict=True)),
        fsal=True,
    ),
}


class StepSizeError(RuntimeError):
    """The adaptive step size of some rows collapsed below the resolution of their clock."""


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
    n_accepted, n_rejected : int
        Adaptive method: accepted and rejected steps summed over the rows (0 otherwise).
    """

    t: np.ndarray
    y: Any
    n_evals: int
    n_accepted: int = 0
    n_rejected: int = 0


def _check_grid(t_grid: Any) -> np.ndarray:
    grid = np.asarray(t_grid, dtype=np.float64)
    if grid.ndim != 1 or grid.size < 2:
        raise ValueError("t_grid must be a 1-D sequence of at least two times.")
    if not np.all(np.isfinite(grid)) or np.any(np.diff(grid) <= 0):
        raise ValueError("t_grid must be finite and strictly increasing.")
    return grid


# --------------------------------------------------------------------------------------------
# the Runge-Kutta stages, shared by every method
# --------------------------------------------------------------------------------------------


def _combine(xp: Any, coeffs: tuple, ks: list) -> Any:
    """``sum_j coeffs[j] ks[j]`` over the non-zero coefficients (0.0 if there is none), on
    the backend ``xp`` of the solve.

    The coefficients stay Python floats, so nothing is copied to the device.
    """
    acc = 0.0
    for c, k in zip(coeffs, ks, strict=False):
        if c == 0.0:
            continue
        acc = k * c if isinstance(acc, float) else xp.add_scaled_(acc, c, k)
    return acc


def _stages(xp, tab: ButcherTableau, func: Callable, t: Any, h: Any, h_y: Any, y: Any, k1: Any):
    """The stages ``k_1 .. k_s`` of one step of ``tab`` from ``(t, y)``.

    ``t`` and ``h`` are the time and step (floats, or float64 vectors of shape (n,)); ``h_y``
    is the step broadcastable against ``y`` in its dtype; ``k1 = func(t, y)`` if already known
    (first same as last), else None. Returns the stages and the state of the last stage.
    """
    ks = [func(t, y) if k1 is None else k1]
    y_i = y
    for i in range(1, len(tab.c)):
        y_i = y + h_y * _combine(xp, tab.a[i], ks)
        ks.append(func(t + tab.c[i] * h, y_i))
    return ks, y_i


def _fixed_step(xp, tab: ButcherTableau, func: Callable, t: float, h: float, y: Any):
    """One step of size ``h`` from ``(t, y)`` on the whole batch; returns (y_new, n_evals)."""
    ks, _ = _stages(xp, tab, func, t, h, h, y, None)
    return y + h * _combine(xp, tab.b, ks), len(ks)


# --------------------------------------------------------------------------------------------
# row-wise array helpers (on the solve's backend ``xp``, on the state's device)
# --------------------------------------------------------------------------------------------


def _where(xp: Any, cond: Any, a: Any, b: Any) -> Any:
    """Row-wise select: ``cond`` of shape (n,) against ``a``, ``b`` of shape (n,) or (n, d)."""
    if cond.ndim < max(getattr(a, "ndim", 0), getattr(b, "ndim", 0)):
        cond = cond[:, None]
    return xp.where(cond, a, b)


def _row_rms(xp: Any, a: Any) -> Any:
    """Root mean square of every row, in float64."""
    return xp.to_float64(xp.sqrt(xp.mean(a * a, axis=1)))


def _gather(a: Any, idx: Any) -> Any:
    return a if idx is None else a[idx]


def _scatter(xp: Any, target: Any, idx: Any, values: Any) -> None:
    """``target[idx] = values`` in place (all rows when ``idx`` is None)."""
    if idx is None:
        target[...] = values
    else:
        xp.put_rows(target, idx, values)


# --------------------------------------------------------------------------------------------
# the adaptive method: per-row clocks and step sizes
# --------------------------------------------------------------------------------------------

# Step-size control, per row. After an accepted step, the PI controller of Gustafsson
# (Hairer and Wanner, Solving ODEs II, sec. IV.2): h *= SAFETY * err^(-ALPHA/q) *
# err_prev^(BETA/q), q = 5; it damps the accept/reject oscillation of the elementary rule in
# the region where the NW weights collapse (t about 0.4 to 0.8), which on NW fields gives
# about 20 % fewer evaluations at equal or smaller error (benchmarks/bench_solvers.py).
# After a rejection: h *= SAFETY * err^(-1/q), and the next accepted step does not grow.
_SAFETY, _MIN_FACTOR, _MAX_FACTOR = 0.9, 0.2, 10.0
_ALPHA, _BETA = 0.7, 0.4
# A rejected step below this many float64 resolutions of t means the step size collapsed.
_COLLAPSE_ULPS = 10.0


@dataclass
class _RowState:
    """Per-row state of the adaptive solver; every array lives on the device of ``y``.

    ``y`` and ``k1`` (the field at ``(t, y)``) have shape (n, d); ``t``, ``h`` (the next
    proposed step) and ``err_prev`` (the last accepted error) are float64 vectors (n,);
    ``retry`` marks rows whose last step was rejected, ``nonfinite`` and ``collapsed`` failed
    rows.
    """

    y: Any
    k1: Any
    t: Any
    h: Any
    err_prev: Any
    retry: Any
    nonfinite: Any
    collapsed: Any
    n_accepted: Any
    n_rejected: Any
    n_evals: int
    xp: Any  # the backend of the solve (skflow._array.get_backend)


def _initial_step(xp, func, t, y, k1, span, order, rtol, atol):
    """Per-row first step (Hairer, Norsett and Wanner, Solving ODEs I, sec. II.4).

    One extra evaluation of the field on the whole batch; each row's step depends on that row
    only. Non-finite rows get a small step and fail on their first attempt.
    """
    scale = atol + rtol * abs(y)
    d0, d1 = _row_rms(xp, y / scale), _row_rms(xp, k1 / scale)
    h0 = _where(xp, (d0 >= 1e-5) & (d1 >= 1e-5), 0.01 * d0 / xp.clip(d1, 1e-5), 1e-6)
    h0 = xp.clip(h0, 0.0, span)
    k2 = func(t + h0, y + xp.astype_like(h0, y)[:, None] * k1)
    dmax = xp.maximum(d1, _row_rms(xp, (k2 - k1) / scale) / h0)
    h1 = _where(
        xp,
        dmax > 1e-15,
        (0.01 / xp.clip(dmax, 1e-15)) ** (1.0 / (order + 1)),
        xp.clip(h0 * 1e-3, 1e-6),
    )
    return xp.clip(xp.minimum(100.0 * h0, h1), 0.0, span)


def _start(xp, tab, func, y0, grid, rtol, atol) -> _RowState:
    """Copy of ``y0`` (in a floating dtype), its field and every row's first step."""
    y = xp.as_floating(xp.copy(y0))
    t = xp.full((y.shape[0],), float(grid[0]), y, dtype="float64")
    # the field may keep its arguments; the state changes in place
    k1 = func(xp.copy(t), xp.copy(y))
    h = _initial_step(xp, func, t, y, k1, float(grid[-1] - grid[0]), tab.order, rtol, atol)
    flags = t != t  # all False, on the device
    zero = flags.sum()
    return _RowState(
        y=y,
        k1=k1,
        t=t,
        h=h,
        err_prev=xp.full((y.shape[0],), 1.0, y, dtype="float64"),
        retry=xp.copy(flags),
        nonfinite=xp.copy(flags),
        collapsed=xp.copy(flags),
        n_accepted=zero,
        n_rejected=xp.copy(zero),
        n_evals=2,
        xp=xp,
    )


def _running_rows(st: _RowState, t1: float, method: str, max_steps: int):
    """Indices of the rows still short of ``t1`` (None: all rows) and their number.

    This is the one host synchronisation of a step: a single integer that holds both the
    number of running rows and whether any row has failed.
    """
    n = st.t.shape[0]
    code = int((st.t < t1).sum() + (n + 1) * (st.nonfinite | st.collapsed).any())
    if code > n:
        _raise_failure(st, method, max_steps)
    if code in (0, n):
        return None, code
    return st.xp.nonzero(st.t < t1, size=code), code


def _raise_failure(st: _RowState, method: str, max_steps: int):
    """Raise the error of the failed rows, naming them and the times they reached."""
    bad = st.xp.nonzero(st.nonfinite).tolist()
    rows = bad or st.xp.nonzero(st.collapsed).tolist()
    times = [round(v, 6) for v in _gather(st.t, rows).tolist()]
    where = f"{len(rows)} row(s) {rows[:8]}{'...' if len(rows) > 8 else ''} at t = {times[:8]}"
    if bad:
        raise FloatingPointError(
            f"{method}: the vector field returned non-finite values for {where}."
        )
    raise StepSizeError(
        f"{method}: the step size collapsed for {where}: the step the tolerance needs there is "
        f"below the floating-point resolution of t (the field is singular or too stiff there, "
        f"or rtol/atol are below the precision of {st.y.dtype}). Raise rtol/atol, rescale the "
        f"data or use a fixed-step solver; the integration stopped instead of running to "
        f"max_steps={max_steps}."
    )


def _step_factor(xp, err, accept, err_prev, retry, order: int) -> Any:
    """Per-row factor of the next step size (see the controller constants above)."""
    err = xp.clip(err, 1e-10)
    pi = _SAFETY * err ** (-_ALPHA / order) * err_prev ** (_BETA / order)
    factor = _where(xp, accept, pi, _SAFETY * err ** (-1.0 / order))
    factor = _where(xp, accept & retry, xp.clip(factor, 0.0, 1.0), factor)
    return xp.clip(factor, _MIN_FACTOR, _MAX_FACTOR)


def _attempt(tab, func, st: _RowState, idx, t1: float, rtol: float, atol: float) -> None:
    """One step of every running row (``idx``), accepted or rejected row by row, in place."""
    xp = st.xp
    ta, hp, err_prev = _gather(st.t, idx), _gather(st.h, idx), _gather(st.err_prev, idx)
    last = hp >= t1 - ta  # the step lands on t1 exactly
    ha = _where(xp, last, t1 - ta, hp)
    ya, ka = _gather(st.y, idx), _gather(st.k1, idx)
    h_y = xp.astype_like(ha, ya)[:, None]
    ks, y_new = _stages(xp, tab, func, ta, ha, h_y, ya, ka)
    st.n_evals += len(ks) - 1
    scale = atol + rtol * xp.maximum(abs(ya), abs(y_new))
    err = _row_rms(xp, h_y * _combine(xp, tab.error, ks) / scale)
    bad = ~(xp.all(xp.isfinite(y_new), axis=1) & (err == err) & (err < math.inf))
    accept = (err <= 1.0) & ~bad
    h_new = ha * _step_factor(xp, err, accept, err_prev, _gather(st.retry, idx), tab.order)
    resolution = _COLLAPSE_ULPS * np.finfo(np.float64).eps * xp.clip(abs(ta), abs(t1))
    _scatter(xp, st.collapsed, idx, ~accept & ~bad & (h_new < resolution))
    _scatter(xp, st.nonfinite, idx, bad)
    _scatter(xp, st.retry, idx, ~accept)
    _scatter(xp, st.err_prev, idx, _where(xp, accept, xp.clip(err, 1e-4), err_prev))
    _scatter(xp, st.y, idx, _where(xp, accept, y_new, ya))
    _scatter(xp, st.k1, idx, _where(xp, accept, ks[-1], ka))
    _scatter(xp, st.t, idx, _where(xp, accept, _where(xp, last, t1, ta + ha), ta))
    _scatter(xp, st.h, idx, h_new)
    st.n_accepted += accept.sum()
    st.n_rejected += (~accept).sum()


def _integrate_adaptive(xp, tab, func, y0, grid, *, trajectory, rtol, atol, max_steps):
    st = _start(xp, tab, func, y0, grid, rtol, atol)
    states = [xp.copy(st.y)] if trajectory else None
    for t1 in grid[1:]:
        t1 = float(t1)
        for _ in range(max_steps):
            idx, count = _running_rows(st, t1, tab.name, max_steps)
            if count == 0:
                break
            _attempt(tab, func, st, idx, t1, rtol, atol)
        else:
            if _running_rows(st, t1, tab.name, max_steps)[1]:
                raise RuntimeError(
                    f"{tab.name} did not reach t = {t1} within max_steps={max_steps}; "
                    "raise max_steps or rtol."
                )
        if trajectory:
            states.append(xp.copy(st.y))
    y = xp.stack(states) if trajectory else st.y
    counts = xp.stack((st.n_accepted, st.n_rejected)).tolist()  # one read of both counters
    return ODESolution(grid, y, st.n_evals, int(counts[0]), int(counts[1]))


def _integrate_fixed(xp, tab, func, y0, grid, *, trajectory):
    y = y0
    states = [y] if trajectory else None
    n_evals = 0
    for t0, t1 in zip(grid[:-1], grid[1:], strict=True):
        y, evals = _fixed_step(xp, tab, func, float(t0), float(t1 - t0), y)
        n_evals += evals
        if trajectory:
            states.append(y)
    if trajectory:
        y = xp.stack(states)
    return ODESolution(grid, y, n_evals)


def _tableau(method: Any) -> ButcherTableau:
    if isinstance(method, ButcherTableau):
        tab = method
    elif isinstance(method, str) and method in TABLEAUS:
        tab = TABLEAUS[method]
    else:
        raise ValueError(f"Unknown solver {method!r}; choose one of {METHODS} or a ButcherTableau.")
    if tab.error is not None and not tab.fsal:
        raise ValueError(f"tableau {tab.name!r}: an adaptive tableau must be first-same-as-last.")
    return tab


def evaluations_per_flow(method: str | ButcherTableau, n_steps: int) -> int:
    """Evaluations of the field in a flow of ``n_steps`` steps of ``method``: ``n_steps``
    times its stages; an adaptive method chooses its own steps, so for it this is the count
    of ``n_steps`` accepted steps (its first-same-as-last stage shared).

    Parameters
    ----------
    method : str or ButcherTableau
        As in :func:`integrate`.
    n_steps : int

    Returns
    -------
    int

    Examples
    --------
    >>> evaluations_per_flow("heun", 100), evaluations_per_flow("rk4", 10)
    (200, 40)
    """
    tab = _tableau(method)
    stages = len(tab.c) - (1 if tab.fsal else 0)
    return int(n_steps) * stages


def integrate(
    func: Callable[[Any, Any], Any],
    y0: Any,
    t_grid: Any = (0.0, 1.0),
    *,
    method: str | ButcherTableau = "heun",
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
        fixed-step methods; for ``"dopri5"`` it is a float64 vector of shape (n_active,), one
        time per row of ``y`` (a NumPy array for NumPy states, a Torch tensor on the state's
        device for Torch states), and ``y`` holds only the rows still running.
    y0 : array of shape (n, d)
        Initial state (NumPy or Torch; the solver keeps the kind and device). Not modified.
    t_grid : array-like of shape (T,), default=(0.0, 1.0)
        Strictly increasing times. Fixed-step methods take one step per interval; dopri5 uses
        them as output times only.
    method : {"euler", "midpoint", "heun", "rk4", "dopri5"} or ButcherTableau, default="heun"
        A tableau with an error estimate is integrated adaptively (like ``"dopri5"``), one
        without it with one step per interval.
    return_trajectory : bool, default=False
        Return the states at every grid time, shape (T, n, d), instead of the final state.
    rtol, atol : float, default=1e-5
        Tolerances of dopri5 (ignored by fixed-step methods): a row's step is accepted when
        the root mean square of its error estimate over ``atol + rtol |y|`` is at most 1.
    max_steps : int, default=100000
        Cap on dopri5 steps per output interval.

    Returns
    -------
    solution : ODESolution

    Raises
    ------
    ValueError
        If ``method`` is unknown or ``t_grid`` is not strictly increasing.
    FloatingPointError
        If the field is not finite on some rows (dopri5; the rows and times are named).
    StepSizeError
        If the step size of some rows collapses (dopri5; the rows and times are named).
    RuntimeError
        If dopri5 does not reach an output time within ``max_steps`` steps.

    Examples
    --------
    >>> import numpy as np
    >>> sol = integrate(lambda t, y: -y, np.ones((1, 1)), np.linspace(0, 1, 101), method="rk4")
    >>> round(float(sol.y[0, 0]), 8) == round(float(np.exp(-1.0)), 8)
    True
    >>> sol = integrate(lambda t, y: -y, np.ones((3, 1)), method="dopri5", rtol=1e-8, atol=1e-8)
    >>> bool(np.allclose(sol.y, np.exp(-1.0), rtol=1e-7)), sol.n_rejected
    (True, 0)
    """
    tab = _tableau(method)
    grid = _check_grid(t_grid)
    xp = get_backend(y0)  # the one NumPy/Torch decision of a solve, passed down
    if tab.error is None:
        return _integrate_fixed(xp, tab, func, y0, grid, trajectory=return_trajectory)
    return _integrate_adaptive(
        xp,
        tab,
        func,
        y0,
        grid,
        trajectory=return_trajectory,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
    )
