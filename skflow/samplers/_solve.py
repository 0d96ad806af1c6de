"""The samplers' ODE solves: the sampling flow with any method, and adaptive solves on a budget.

:func:`solve_flow` runs the sampling flow with the sampler's ``solver``: a fixed-step method
directly, ``"dopri5"`` through :func:`solve_adaptive`. :func:`solve_adaptive` is the one
adaptive (Dormand-Prince) solve of the samplers, shared by sampling and by the density's
change of variables; it caps the steps of each output interval and turns the solver's own
failures (told from the field's by type and identity, never by message) into one typed
error, :class:`FlowSolveError`, that callers catch by type to add their own advice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..solvers import FIXED_STEP_METHODS, ODESolution, integrate

__all__ = [
    "ADAPTIVE_MAX_STEPS",
    "SAMPLING_ADVICE",
    "FlowSolveError",
    "solve_adaptive",
    "solve_flow",
]

#: Step budget of the adaptive solver (dopri5) per output interval. Well-posed problems take a
#: few hundred steps even at tight tolerances; far more means the field is too stiff to resolve
#: (e.g. supports of magnitude ~1e30, where the kernel switches between support points across
#: distances below the floating-point resolution), and the estimator then raises instead of
#: running for minutes.
ADAPTIVE_MAX_STEPS = 10_000


class FlowSolveError(ValueError):
    """An adaptive solve could not be completed: the field was not finite, or too stiff for
    the step budget (:data:`ADAPTIVE_MAX_STEPS`) or for the floating-point resolution of
    ``t``. A ``ValueError``: the inputs (their scale) or the tolerances are at fault."""


def _tracing(func: Callable[[Any, Any], Any], raised: list) -> Callable[[Any, Any], Any]:
    """``func`` that records the exceptions it raises, so that the solver's own errors can be
    told from the field's by identity."""

    def traced(t: Any, y: Any) -> Any:
        try:
            return func(t, y)
        except Exception as exc:
            raised.append(exc)
            raise

    return traced


def solve_adaptive(
    func: Callable[[Any, Any], Any],
    y0: Any,
    grid: Any,
    *,
    rtol: float,
    atol: float,
    advice: str,
    return_trajectory: bool = False,
) -> ODESolution:
    """Dormand-Prince (``"dopri5"``) solve of ``dy/dt = func(t, y)`` with a step budget.

    Parameters
    ----------
    func : callable
        ``func(t, y)`` as for :func:`skflow.solvers.integrate` (per-row times).
    y0 : array of shape (n, k)
        Initial state (NumPy or Torch).
    grid : array-like of shape (T,)
        Output times, strictly increasing.
    rtol, atol : float
        Tolerances of the solve.
    advice : str
        Appended to the message of a stiff solve (what the caller's user can change).
    return_trajectory : bool, default=False
        Return the states at every grid time, shape (T, n, k).

    Returns
    -------
    solution : ODESolution

    Raises
    ------
    FlowSolveError
        If the field is not finite on some rows, or the solve is too stiff: the step size
        collapsed (the solver's ``StepSizeError``), or an output interval took more than
        :data:`ADAPTIVE_MAX_STEPS` steps (the solver's own ``RuntimeError``). Errors raised
        by ``func`` itself pass through unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> sol = solve_adaptive(lambda t, y: -y, np.ones((2, 1)), (0.0, 1.0), rtol=1e-8,
    ...                      atol=1e-8, advice="")
    >>> bool(np.allclose(sol.y, np.exp(-1.0)))
    True
    """
    raised: list = []
    try:
        return integrate(
            _tracing(func, raised),
            y0,
            grid,
            method="dopri5",
            rtol=rtol,
            atol=atol,
            max_steps=ADAPTIVE_MAX_STEPS,
            return_trajectory=return_trajectory,
        )
    except FloatingPointError as exc:  # the adaptive solver met a non-finite velocity
        raise FlowSolveError(
            f"{exc} The inputs' magnitude is too large for floating-point arithmetic "
            "(squared distances overflow); rescale them, e.g. with StandardScaler."
        ) from exc
    except RuntimeError as exc:  # StepSizeError, or the step budget of an output interval
        if any(exc is own for own in raised):
            raise  # the field's own error (e.g. Torch's), not the solver's
        raise FlowSolveError(
            f"{exc} The velocity field is too stiff at this data scale; {advice}"
        ) from exc


#: Advice of a stiff sampling solve.
SAMPLING_ADVICE = (
    "rescale the data (e.g. StandardScaler), raise rtol/atol or use a fixed-step solver."
)


def solve_flow(
    func: Callable[[Any, Any], Any],
    y0: Any,
    grid: np.ndarray,
    *,
    method: str,
    rtol: float,
    atol: float,
    return_trajectory: bool = False,
) -> ODESolution:
    """The sampling flow with ``method``: fixed-step methods take one step per interval of
    ``grid``; ``"dopri5"`` is :func:`solve_adaptive` (``FlowSolveError`` when stiff).

    Examples
    --------
    >>> import numpy as np
    >>> sol = solve_flow(lambda t, y: -y, np.ones((1, 1)), np.linspace(0, 1, 101),
    ...                  method="rk4", rtol=1e-5, atol=1e-5)
    >>> round(float(sol.y[0, 0]), 8) == round(float(np.exp(-1.0)), 8)
    True
    """
    if method in FIXED_STEP_METHODS:
        return integrate(func, y0, grid, method=method, return_trajectory=return_trajectory)
    return solve_adaptive(
        func,
        y0,
        grid,
        rtol=rtol,
        atol=atol,
        advice=SAMPLING_ADVICE,
        return_trajectory=return_trajectory,
    )
