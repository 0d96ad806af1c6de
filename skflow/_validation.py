"""One validation layer: the checks of parameters and times that every module shares.

One rule per mistake, one message style (``"{name} must be ..., got {value!r}."``) and one
exception type per kind of mistake:

* a parameter of the wrong type or value raises :class:`InvalidParameterError`, a subclass of
  both ``ValueError`` and ``TypeError`` (as scikit-learn's own parameter errors are), so
  ``n_steps=1.5`` and ``n_steps=0`` fail the same way in every module;
* data of the wrong shape or with non-finite values raise ``ValueError``; data of a
  non-numeric dtype raise ``TypeError``.

**Random states.** Everywhere in skflow a ``random_state`` may be what
:func:`sklearn.utils.check_random_state` accepts (None, an int, a ``RandomState``) or a NumPy
``Generator``. :func:`check_random_state` returns a ``RandomState`` for code written against
that API, :func:`as_generator` a ``Generator``; a ``Generator`` or ``RandomState`` passed in is
used (and advanced), never copied, like scikit-learn does.

This module knows only NumPy.

Examples
--------
>>> from skflow._validation import check_int, InvalidParameterError
>>> check_int(5, "n_steps")
5
>>> try:
...     check_int(1.5, "n_steps")
... except InvalidParameterError as exc:
...     print(exc)
n_steps must be an integer >= 1, got 1.5.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.utils import check_random_state as _sk_check_random_state

__all__ = [
    "TIME_TOLERANCE",
    "InvalidParameterError",
    "as_generator",
    "check_bandwidth",
    "check_bool",
    "check_data",
    "check_choice",
    "check_finite_output",
    "check_int",
    "check_random_state",
    "check_real",
    "check_real_array",
    "check_sigma_min",
    "check_time_tolerance",
    "check_times",
    "clamp_times",
    "ParameterCheck",
    "boolean",
    "choice",
    "either",
    "integer",
    "optional",
    "random_seed",
    "real",
    "satisfies",
    "validate_parameters",
]


class InvalidParameterError(ValueError, TypeError):
    """A parameter has the wrong type or value.

    Subclasses both ``ValueError`` and ``TypeError`` so that code catching either keeps working
    whatever the mistake was.
    """


def check_int(
    value: Any, name: str, *, minimum: int | None = 1, allow_none: bool = False
) -> int | None:
    """An integer ``>= minimum`` (bools refused), or None when ``allow_none``.

    Examples
    --------
    >>> check_int(0, "n_query", minimum=0)
    0
    """
    if value is None and allow_none:
        return None
    bound = "" if minimum is None else f" >= {minimum}"
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or (minimum is not None and value < minimum)
    ):
        extra = " or None" if allow_none else ""
        raise InvalidParameterError(f"{name} must be an integer{bound}{extra}, got {value!r}.")
    return int(value)


def check_real(
    value: Any,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_none: bool = False,
) -> float | None:
    """A finite real number in the given interval (bools refused), or None when ``allow_none``.

    Examples
    --------
    >>> check_real(0.5, "rtol", low=0.0, low_open=True)
    0.5
    """
    if value is None and allow_none:
        return None
    lo = "" if low is None else ("(" if low_open else "[") + f"{low:g}"
    hi = "" if high is None else f"{high:g}" + (")" if high_open else "]")
    where = f" in {lo or '(-inf'}, {hi or 'inf)'}" if (low is not None or high is not None) else ""
    message = f"{name} must be a finite real number{where}, got {value!r}."
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(message)
    v = float(value)
    if not math.isfinite(v):
        raise InvalidParameterError(message)
    if low is not None and (v <= low if low_open else v < low):
        raise InvalidParameterError(message)
    if high is not None and (v >= high if high_open else v > high):
        raise InvalidParameterError(message)
    return v


def check_sigma_min(value: Any) -> float:
    """The path's ``sigma_min``: a float in the open interval (0, 1).

    Examples
    --------
    >>> check_sigma_min(0.01)
    0.01
    """
    return check_real(value, "sigma_min", low=0.0, high=1.0, low_open=True, high_open=True)


def check_bool(value: Any, name: str) -> bool:
    """A bool (Python or NumPy); ints and strings are refused.

    Examples
    --------
    >>> check_bool(True, "exact_head")
    True
    """
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterError(f"{name} must be a bool, got {value!r}.")
    return bool(value)


def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    """One of the strings ``choices``.

    Examples
    --------
    >>> check_choice("heun", "solver", ("euler", "heun"))
    'heun'
    """
    if not isinstance(value, str) or value not in choices:
        raise InvalidParameterError(f"{name} must be one of {tuple(choices)}, got {value!r}.")
    return value


#: Times within this distance outside [0, 1] are clamped to the interval by the functions of
#: :mod:`skflow.field` and by :func:`check_times` (rounding: ``1 + eps``). Farther times raise
#: there; the estimators' and ``NWField``'s ``velocity`` take their own ``time_tolerance``
#: (default ``inf``: any finite time, the field frozen at the nearest end) for third-party
#: adaptive solvers, which probe stages up to a whole step past ``t = 1``.
TIME_TOLERANCE = 1e-6

#: What an out-of-range time error suggests by default.
TIME_HINT = (
    "a third-party adaptive solver (torchdiffeq, flow_matching) steps past t = 1: call the "
    "velocity of an estimator or of NWField, whose time_tolerance (default inf) holds the "
    "field at the nearest end"
)


def check_time_tolerance(value: Any, name: str = "time_tolerance") -> float:
    """A non-negative float, ``inf`` allowed (any finite time is then accepted).

    Examples
    --------
    >>> check_time_tolerance(float("inf"))
    inf
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise InvalidParameterError(f"{name} must be a non-negative float or inf, got {value!r}.")
    return float(value)


def clamp_times(
    arr: np.ndarray,
    name: str = "t",
    tolerance: float = TIME_TOLERANCE,
    hint: str = TIME_HINT,
) -> np.ndarray:
    """float64 times checked to be finite and within ``tolerance`` (default
    :data:`TIME_TOLERANCE`) of [0, 1], clamped to [0, 1] (``ValueError`` otherwise, naming
    the value farthest outside and ``hint``, the fix).

    With ``tolerance=inf`` every finite time is accepted: the field is frozen at the nearest
    end (``u_t = u_1`` for ``t > 1``, ``u_0`` for ``t < 0``), a continuous extension under
    which an adaptive solver's stages past the end leave the solution on [0, 1] unchanged.

    Examples
    --------
    >>> clamp_times(np.array([-1e-9, 0.5, 1.0 + 1e-9])).tolist()
    [0.0, 0.5, 1.0]
    >>> clamp_times(np.array([1.3]), tolerance=float("inf")).tolist()
    [1.0]
    """
    finite = np.isfinite(arr)
    if not np.all(finite):
        bad = arr[~finite].ravel()[0]
        raise ValueError(f"{name} must lie in [0, 1] and be finite; got {float(bad)!r}.")
    if np.any(arr < -tolerance) or np.any(arr > 1 + tolerance):
        outside = np.maximum(-arr, arr - 1.0)
        bad = float(arr.ravel()[np.argmax(outside.ravel())])
        raise ValueError(
            f"{name} must lie in [0, 1] (finite; values within {tolerance:g} of it are "
            f"clamped); got {bad!r}. If {hint}."
        )
    if np.any(arr < 0.0) or np.any(arr > 1.0):
        arr = np.clip(arr, 0.0, 1.0)
    return arr


def check_times(
    t: Any, name: str = "t", tolerance: float = TIME_TOLERANCE, hint: str = TIME_HINT
) -> np.ndarray:
    """Times as a float64 array (a scalar or shape ``(n,)``) with values in [0, 1].

    Values within ``tolerance`` (default :data:`TIME_TOLERANCE`) outside the interval are
    clamped to it (third-party adaptive solvers step past ``t = 1``; the estimators pass
    their ``time_tolerance``). Non-numeric and complex input raises ``TypeError``; other
    shapes and values farther outside (or non-finite) raise ``ValueError``.

    Examples
    --------
    >>> check_times([0.0, 0.5]).tolist()
    [0.0, 0.5]
    >>> float(check_times(1.0 + 1e-9))
    1.0
    """
    if hasattr(t, "detach") and hasattr(t, "cpu"):  # a Torch tensor
        t = t.detach().cpu().numpy()
    try:
        arr = np.asarray(t)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a float or a 1-D array of floats, got {t!r}.") from exc
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be real-valued (float or 1-D float array), got {arr.dtype}.")
    arr = arr.astype(np.float64, copy=False)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array of times, got {arr.shape}.")
    return clamp_times(arr, name, tolerance, hint)


def check_finite_output(a: np.ndarray, what: str) -> np.ndarray:
    """Raise a clear ValueError instead of returning NaN/inf computed from finite inputs."""
    if not np.all(np.isfinite(a)):
        raise ValueError(
            f"{what} is not finite (NaN or inf) although the inputs are finite: their "
            "magnitude is too large for floating-point arithmetic (squared distances "
            "overflow). Rescale the data, e.g. with sklearn.preprocessing.StandardScaler."
        )
    return a


def _refuse(random_state: Any) -> InvalidParameterError:
    return InvalidParameterError(
        "random_state must be None, a non-negative int, a numpy RandomState or a numpy "
        f"Generator, got {random_state!r}."
    )


def check_random_state(random_state: Any) -> np.random.RandomState:
    """A ``RandomState`` from None, an int, a ``RandomState`` or a ``Generator``.

    None, ints and ``RandomState`` instances are handled by
    :func:`sklearn.utils.check_random_state` (None: NumPy's global ``RandomState``); a
    ``Generator`` seeds a new ``RandomState`` from one draw (so it is advanced, and the same
    Generator state always gives the same stream).

    Examples
    --------
    >>> check_random_state(0).randint(10)
    5
    """
    if isinstance(random_state, np.random.Generator):
        return np.random.RandomState(int(random_state.integers(2**32, dtype=np.int64)))
    if isinstance(random_state, bool):
        raise _refuse(random_state)
    try:
        return _sk_check_random_state(random_state)
    except ValueError:
        raise _refuse(random_state) from None


def as_generator(random_state: Any) -> np.random.Generator:
    """A ``Generator`` from None, an int, a ``RandomState`` or a ``Generator``.

    An int seeds ``np.random.default_rng`` (negative ints are refused); a ``Generator`` is
    returned as is; a ``RandomState`` seeds a new Generator from one draw; None seeds one from
    a draw of NumPy's global ``RandomState`` (as :func:`check_random_state` uses it, so
    ``np.random.seed`` governs both).

    Examples
    --------
    >>> float(as_generator(0).random()) == float(np.random.default_rng(0).random())
    True
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise _refuse(random_state)
        return np.random.default_rng(int(random_state))
    if random_state is None or isinstance(random_state, np.random.RandomState):
        rs = check_random_state(random_state)
        return np.random.default_rng(int(rs.randint(2**32, dtype=np.int64)))
    raise _refuse(random_state)


def check_bandwidth(bandwidth: Any) -> None:
    """A field bandwidth: ``"ot"``, a positive finite float, or a callable ``t -> h(t)``.

    Examples
    --------
    >>> check_bandwidth(0.5)
    >>> check_bandwidth("ot")
    """
    if callable(bandwidth) or (isinstance(bandwidth, str) and bandwidth == "ot"):
        return
    message = (
        f"bandwidth must be 'ot', a positive float or a callable t -> h(t), got {bandwidth!r}."
    )
    if isinstance(bandwidth, str | bool):
        raise InvalidParameterError(message)
    try:
        value = float(bandwidth)
    except (TypeError, ValueError):
        raise InvalidParameterError(message) from None
    if not np.isfinite(value) or value <= 0:
        raise InvalidParameterError(
            f"bandwidth must be a positive finite float, got {bandwidth!r}."
        )


def check_real_array(a: Any, name: str) -> np.ndarray:
    """``a`` as a NumPy array of a real numeric dtype (bool/int/float), else ``TypeError``.

    Complex input is refused rather than cast (a cast would silently drop the imaginary
    part); object arrays are converted to float64 when every entry is a real number.

    Examples
    --------
    >>> check_real_array([1, 2], "x").dtype.kind
    'i'
    """
    arr = np.asarray(a)
    kind = arr.dtype.kind
    if kind in "biuf":
        return arr
    if kind == "c":
        raise TypeError(
            f"{name} must be real-valued, got complex dtype {arr.dtype}; pass np.real({name}) "
            "explicitly if the imaginary part is to be dropped."
        )
    if kind == "O":
        try:
            return arr.astype(np.float64)
        except (TypeError, ValueError):
            pass
    raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}.")


def check_data(check: Callable, *args: Any, **kwargs: Any) -> Any:
    """``check(*args, **kwargs)`` (scikit-learn's ``check_array`` or ``validate_data``), with
    its wordiest messages restated in skflow's words.

    The array is the last positional argument. A 1-D array is reported by its shape (not its
    values), and NaN keeps scikit-learn's first line (``"Input X contains NaN."``) without the
    advice about other estimators; infinite values get the same style of message, and complex
    input is named by its dtype (scikit-learn prints the whole array). All three stay
    ``ValueError`` (scikit-learn's convention). Other errors pass through unchanged.

    A Torch tensor is first copied to a NumPy array of its own dtype, so that a float32 tensor
    stays float32 where the check keeps float32 (scikit-learn does not read a Torch dtype and
    would make it float64), as a float32 NumPy array does.

    Examples
    --------
    >>> from sklearn.utils import check_array
    >>> try:
    ...     check_data(check_array, np.zeros(3), input_name="support")
    ... except ValueError as exc:
    ...     print(str(exc)[:62])
    support must be a 2-D array of shape (n_samples, n_features),
    """
    from ._array import is_torch, to_numpy  # _array imports this module

    if args and is_torch(args[-1]):
        args = (*args[:-1], to_numpy(args[-1]))
    try:
        return check(*args, **kwargs)
    except ValueError as exc:
        message = str(exc)
        name = kwargs.get("input_name", "X")
        if message.startswith("Expected 2D array"):
            shape = np.shape(np.asarray(args[-1], dtype=object))
            raise ValueError(
                f"{name} must be a 2-D array of shape (n_samples, n_features), got shape "
                f"{shape}. Reshape your data with .reshape(-1, 1) for a single feature or "
                ".reshape(1, -1) for a single sample."
            ) from None
        first = message.split("\n", 1)[0]
        if "contains NaN" in first:
            raise ValueError(
                first + " skflow needs finite values: impute the missing "
                "values or drop those rows first."
            ) from None
        if "contains infinity" in first:
            # scikit-learn's line names the dtype too; ours says what to do about it
            raise ValueError(
                f"Input {name} contains infinity (or a value too large for its dtype). skflow "
                "needs finite values: drop those rows or clip them first."
            ) from None
        if first.startswith("Complex data not supported"):
            # scikit-learn prints the whole array after this line; the dtype is enough
            raise ValueError(  # scikit-learn's first words kept (check_complex_data)
                f"Complex data not supported: input {name} has dtype "
                f"{np.asarray(args[-1]).dtype}; skflow needs real values: pass "
                f"np.real({name}) or np.abs({name}) as appropriate."
            ) from None
        raise


# --------------------------------------------------------------------------------------------
# declarative parameter constraints
# --------------------------------------------------------------------------------------------

#: A parameter constraint: ``check(value, name)`` returns nothing useful and raises
#: :class:`InvalidParameterError` (named after ``name``) when ``value`` is not allowed. An
#: estimator declares one per constructor parameter in its ``_parameter_constraints`` dict
#: (scikit-learn's style) and :func:`validate_parameters` runs them; the constraints below are
#: the check functions of this module with their bounds bound, so messages are the same
#: whether a parameter is checked by an estimator or by a function.
ParameterCheck = Callable[[Any, str], Any]


def integer(*, minimum: int | None = 1, allow_none: bool = False) -> ParameterCheck:
    """An integer ``>= minimum`` (see :func:`check_int`).

    Examples
    --------
    >>> integer(minimum=0)(3, "warmup")
    3
    """
    return lambda value, name: check_int(value, name, minimum=minimum, allow_none=allow_none)


def real(**bounds: Any) -> ParameterCheck:
    """A finite real number within ``bounds`` (the keywords of :func:`check_real`).

    Examples
    --------
    >>> real(low=0.0, low_open=True)(0.5, "rtol")
    0.5
    """
    return lambda value, name: check_real(value, name, **bounds)


def choice(choices: Sequence[str] | Callable[[], Sequence[str]]) -> ParameterCheck:
    """One of the strings ``choices`` (see :func:`check_choice`); a callable ``choices`` is
    called at check time, for choices defined in a module that is slow to import.

    Examples
    --------
    >>> choice(("euler", "heun"))("heun", "solver")
    'heun'
    """
    return lambda value, name: check_choice(
        value, name, choices() if callable(choices) else choices
    )


def boolean() -> ParameterCheck:
    """A bool (see :func:`check_bool`).

    Examples
    --------
    >>> boolean()(False, "compile")
    False
    """
    return check_bool


def optional(check: ParameterCheck) -> ParameterCheck:
    """None, or a value ``check`` accepts (with ``check``'s message for other values).

    Examples
    --------
    >>> optional(integer())(None, "chunk_size") is None
    True
    """
    return lambda value, name: None if value is None else check(value, name)


def either(literal: str, check: ParameterCheck) -> ParameterCheck:
    """The string ``literal`` (e.g. ``"auto"``), or a value ``check`` accepts.

    Examples
    --------
    >>> either("auto", real(low=0.0))("auto", "tol")
    'auto'
    """

    def check_either(value: Any, name: str) -> Any:
        if isinstance(value, str) and value == literal:
            return value
        return check(value, name)

    return check_either


def satisfies(check: Callable[[Any], Any]) -> ParameterCheck:
    """A constraint from a one-argument check that names the parameter itself (e.g.
    :func:`check_bandwidth`, :func:`check_sigma_min`).

    Examples
    --------
    >>> satisfies(check_sigma_min)(0.1, "sigma_min")
    0.1
    """
    return lambda value, name: check(value)


def random_seed() -> ParameterCheck:
    """What :func:`check_random_state` accepts, checked without drawing from a Generator:
    None, an int in ``[0, 2**32)``, a ``RandomState`` or a ``Generator``.

    Examples
    --------
    >>> random_seed()(0, "random_state")
    """

    def check_random_state_param(value: Any, name: str) -> None:
        if value is None or isinstance(value, np.random.RandomState | np.random.Generator):
            return
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise _refuse(value)
        if not 0 <= value < 2**32:
            raise _refuse(value)

    return check_random_state_param


def validate_parameters(
    params: Mapping[str, Any], constraints: Mapping[str, ParameterCheck]
) -> None:
    """Check every parameter of ``params`` against its constraint, in declaration order.

    Parameters
    ----------
    params : mapping of str to object
        Parameter values, e.g. ``estimator.get_params(deep=False)``.
    constraints : mapping of str to ParameterCheck
        One constraint per parameter (an estimator's ``_parameter_constraints``); a parameter
        without one is a programming error (``KeyError``), so none is left unchecked.

    Raises
    ------
    InvalidParameterError
        From the first parameter whose value its constraint refuses.

    Examples
    --------
    >>> constraints = {"n_steps": integer(), "solver": choice(("euler", "heun"))}
    >>> validate_parameters({"n_steps": 10, "solver": "heun"}, constraints)
    >>> try:
    ...     validate_parameters({"n_steps": 0, "solver": "heun"}, constraints)
    ... except InvalidParameterError as exc:
    ...     print(exc)
    n_steps must be an integer >= 1, got 0.
    """
    for name in params:
        if name not in constraints:
            raise KeyError(f"parameter {name!r} has no declared constraint.")
    for name, check in constraints.items():
        check(params[name], name)
