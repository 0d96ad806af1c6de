"""Option groups of :class:`~skflow.NWFlowSampler`: the sampling solver, the density solve,
the velocity engine, the kernel shape and the search of ``sigma_min`` by ``fit(X, y)``, each
one validated frozen dataclass passed as one parameter.

Each group gathers settings that act in one place only (the solve of :meth:`sample`, the
change of variables of :meth:`score_samples`, the field's engine and block sizes, the
kernel estimated at ``fit``, the class-grouped search of ``fit(X, y)``), so the estimator
keeps the parameters that say *what* is computed. The parameter also accepts the
group's usual name alone (``solver="rk4"``, ``engine="pruned"``), which means the group with
that name and default settings. Values compare by value, so ``clone``, ``get_params`` and
``GridSearchCV`` handle them like any other parameter.

The former separate keywords (``n_steps``, ``density_rtol``, ``chunk_size``, ...) are
folded into their group for one release, with a :class:`FutureWarning`
(:func:`fold_deprecated`).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._validation import (
    InvalidParameterError,
    check_choice,
    check_int,
    check_real,
    check_time_tolerance,
)
from ..solvers import METHODS
from ._kernel_geometry import KERNELS
from ._selection import check_sigma_min_grid

__all__ = [
    "DEPRECATED_KEYWORDS",
    "GROUPS",
    "DensityOptions",
    "EngineOptions",
    "KernelOptions",
    "SAMPLER_ENGINES",
    "SigmaMinSearch",
    "SolverOptions",
    "density_options",
    "engine_options",
    "fold_deprecated",
    "hide_deprecated_keywords",
    "kernel_options",
    "sigma_min_search_options",
    "solver_options",
]

#: Velocity engines of :class:`~skflow.NWFlowSampler` (its ``engine`` parameter).
SAMPLER_ENGINES = ("auto", "dense", "pruned")


@dataclass(frozen=True)
class SolverOptions:
    """The ODE solve of ``sample`` and ``sample_trajectories`` (the ``solver`` parameter).

    Parameters
    ----------
    method : {"euler", "midpoint", "heun", "rk4", "dopri5"}, default="heun"
        ODE solver (see :mod:`skflow.solvers`).
    n_steps : int, default=100
        Steps of the fixed-step methods.
    rtol, atol : float, default=1e-5
        Tolerances of ``"dopri5"``.
    time_tolerance : float, default=inf
        How :meth:`~skflow.NWFlowSampler.velocity` (and the other field methods) treat times
        outside [0, 1]: within this distance they are evaluated at the nearest end, the field
        frozen (continuous, so the flow on [0, 1] is unchanged). The default accepts every
        finite time, so third-party adaptive solvers that probe stages past ``t = 1``
        (torchdiffeq's ``dopri5``, ``flow_matching``'s ``ODESolver``) need no wrapper; a
        finite value (e.g. ``1e-6``) refuses farther times with a ``ValueError``. Sampling
        itself only uses [0, 1].

    Examples
    --------
    >>> from skflow import NWFlowSampler, SolverOptions
    >>> NWFlowSampler(solver=SolverOptions("rk4", n_steps=20)).solver.n_steps
    20
    """

    method: str = "heun"
    n_steps: int = 100
    rtol: float = 1e-5
    atol: float = 1e-5
    time_tolerance: float = math.inf

    def __post_init__(self) -> None:
        check_choice(self.method, "method of SolverOptions", METHODS)
        check_int(self.n_steps, "n_steps of SolverOptions")
        check_real(self.rtol, "rtol of SolverOptions", low=0.0, low_open=True)
        check_real(self.atol, "atol of SolverOptions", low=0.0, low_open=True)
        check_time_tolerance(self.time_tolerance, "time_tolerance of SolverOptions")


@dataclass(frozen=True)
class DensityOptions:
    """The adaptive change-of-variables solve of ``score_samples`` where there is no closed
    form (the ``density`` parameter); independent of the sampling solver.

    Parameters
    ----------
    rtol, atol : float, default=1e-8
        Relative and absolute tolerances of the solve (on the state ``x e^(-s)`` and the
        log-determinant, see :meth:`~skflow.NWFlowSampler.log_density_with_error`). The
        defaults keep the log-density within about ``1e-3`` nats of the exact value at
        ``sigma_min = 0.01`` (measured in ``docs/user_guide.rst``); the error scales about
        linearly with them.
    max_error : float, default=0.1
        ``score_samples`` issues an :class:`~skflow.exceptions.AccuracyWarning` when the
        error estimate of a row exceeds this many nats.

    Examples
    --------
    >>> from skflow import DensityOptions
    >>> DensityOptions(rtol=1e-6).atol
    1e-08
    """

    rtol: float = 1e-8
    atol: float = 1e-8
    max_error: float = 0.1

    def __post_init__(self) -> None:
        for name in ("rtol", "atol", "max_error"):
            check_real(getattr(self, name), f"{name} of DensityOptions", low=0.0, low_open=True)


@dataclass(frozen=True)
class EngineOptions:
    """How the velocity is computed and the samples are integrated (the ``engine``
    parameter); none of these change the result beyond rounding, and the certified tolerance
    of the pruned engine.

    Parameters
    ----------
    engine : {"auto", "dense", "pruned"}, default="auto"
        ``"dense"``: every support point at every evaluation (:class:`skflow.field.NWField`'s
        dense and attention engines). ``"pruned"``: the certified pruned engine
        (:mod:`skflow.field.pruned`): the support is clustered once and, per block of
        queries, clusters whose total weight is provably below ``pruned_rtol`` are skipped;
        the proven bound on the velocity error is kept (``sampling_error_bound_``).
        ``"auto"``: dense, for now: over a whole sampling run the pruned engine has not
        measured faster than dense on any support tried (``benchmarks/bench_large_support.py``,
        docs/large_support.md). Weights, ``n_eff``, divergences and densities are always dense.
    pruned_rtol : float, default=1e-10
        Target of the neglected weight per query for ``engine="pruned"``.
    chunk_size : int, optional
        Queries per block of the ``(chunk, m)`` kernel matrix; by default the field plans it
        (near 64 MiB).
    support_chunk_size : int, optional
        Support rows per chunk when the support is streamed (online log-sum-exp over
        support chunks, memory independent of ``m``). By default the field streams supports
        too large for a dense block (``m * max(d, 64) > 2**23``) by itself; see
        :func:`skflow.field.nw_logits`.
    n_jobs : int, optional
        Workers for sampling: rows are split into batches of 4096 that are integrated
        independently with joblib (``None`` or 1: serially; -1: every core). Results do not
        depend on it; under ``joblib.parallel_config(backend="dask")`` the batches run on a
        Dask cluster.

    Examples
    --------
    >>> from skflow import EngineOptions
    >>> EngineOptions("pruned", pruned_rtol=1e-8).chunk_size is None
    True
    """

    engine: str = "auto"
    pruned_rtol: float = 1e-10
    chunk_size: int | None = None
    support_chunk_size: int | None = None
    n_jobs: int | None = None

    def __post_init__(self) -> None:
        check_choice(self.engine, "engine of EngineOptions", SAMPLER_ENGINES)
        check_real(
            self.pruned_rtol, "pruned_rtol of EngineOptions", low=0.0, high=1.0, low_open=True
        )
        check_int(self.chunk_size, "chunk_size of EngineOptions", allow_none=True)
        check_int(self.support_chunk_size, "support_chunk_size of EngineOptions", allow_none=True)
        check_int(self.n_jobs, "n_jobs of EngineOptions", minimum=None, allow_none=True)


@dataclass(frozen=True)
class KernelOptions:
    """The shape of the kernel of the weights, estimated from the (projected) support at
    ``fit`` (the ``kernel`` parameter).

    Parameters
    ----------
    kernel : {"isotropic", "diagonal", "mahalanobis"}, default="isotropic"
        Shape of the kernel (see :class:`~skflow.NWFlowSampler`, "Kernel geometry").
    reg : float, default=0.1
        Relative ridge of the ``"diagonal"`` and ``"mahalanobis"`` kernels:
        ``reg * mean variance`` is added to the diagonal of the (projected) support
        covariance, which keeps few-shot supports (``m`` close to or below ``d``) from
        amplifying directions they barely sample. Unused by the isotropic kernel.

    Examples
    --------
    >>> from skflow import KernelOptions
    >>> KernelOptions("mahalanobis", reg=1e-3).reg
    0.001
    """

    kernel: str = "isotropic"
    reg: float = 0.1

    def __post_init__(self) -> None:
        check_choice(self.kernel, "kernel of KernelOptions", KERNELS)
        check_real(self.reg, "reg of KernelOptions", low=0.0, low_open=True)


@dataclass(frozen=True)
class SigmaMinSearch:
    """How ``fit(X, y)`` chooses ``sigma_min`` from task labels (the ``sigma_min_search``
    parameter): by the few-shot :meth:`~skflow.NWFlowSampler.score` on ``GroupKFold(cv)``
    splits of the classes, exactly as ``GridSearchCV(NWFlowSampler(sigma_min_search=None),
    {"sigma_min": grid}, cv=GroupKFold(cv)).fit(X, y, groups=y)``.

    Parameters
    ----------
    grid : "default" or sequence of (float or "auto"), default="default"
        The candidates. ``"default"``: ``("auto", 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)``.
    cv : int, default=5
        Folds of the class-grouped split (at most the number of classes).

    Examples
    --------
    >>> from skflow import SigmaMinSearch
    >>> SigmaMinSearch(grid=(0.05, "auto"), cv=3).cv
    3
    """

    grid: Any = "default"
    cv: int = 5

    def __post_init__(self) -> None:
        if self.grid is None:
            raise InvalidParameterError(
                "grid of SigmaMinSearch must be 'default' or a non-empty sequence, got None; "
                "sigma_min_search=None makes fit ignore y."
            )
        check_sigma_min_grid(self.grid, "grid of SigmaMinSearch")
        check_int(self.cv, "cv of SigmaMinSearch", minimum=2)


def _group(value: Any, name: str, cls: type, by_name: str | None) -> Any:
    """``value`` as an instance of ``cls``: itself, ``cls()`` for None (when there is no
    name), or ``cls(**{by_name: value})`` for a name."""
    if isinstance(value, cls):
        return value
    if by_name is None and value is None:
        return cls()
    if by_name is not None and isinstance(value, str):
        return cls(**{by_name: value})
    accepted = "a name or " if by_name else "None or "
    raise InvalidParameterError(f"{name} must be {accepted}{cls.__name__}, got {value!r}.")


def solver_options(value: Any, name: str = "solver") -> SolverOptions:
    """The :class:`SolverOptions` of a ``solver`` parameter (a method name or the object).

    Examples
    --------
    >>> solver_options("rk4").n_steps
    100
    """
    if isinstance(value, str):
        check_choice(value, name, METHODS)
    return _group(value, name, SolverOptions, "method")


def density_options(value: Any, name: str = "density") -> DensityOptions:
    """The :class:`DensityOptions` of a ``density`` parameter (None: the defaults).

    Examples
    --------
    >>> density_options(None).max_error
    0.1
    """
    return _group(value, name, DensityOptions, None)


def engine_options(value: Any, name: str = "engine") -> EngineOptions:
    """The :class:`EngineOptions` of an ``engine`` parameter (an engine name or the object).

    Examples
    --------
    >>> engine_options("pruned").pruned_rtol
    1e-10
    """
    if isinstance(value, str):
        check_choice(value, name, SAMPLER_ENGINES)
    return _group(value, name, EngineOptions, "engine")


def kernel_options(value: Any, name: str = "kernel") -> KernelOptions:
    """The :class:`KernelOptions` of a ``kernel`` parameter (a kernel name or the object).

    Examples
    --------
    >>> kernel_options("diagonal").reg
    0.1
    """
    if isinstance(value, str):
        check_choice(value, name, KERNELS)
    return _group(value, name, KernelOptions, "kernel")


def sigma_min_search_options(value: Any, name: str = "sigma_min_search") -> SigmaMinSearch | None:
    """The :class:`SigmaMinSearch` of a ``sigma_min_search`` parameter (``"default"``: the
    default search), or None (``fit`` ignores ``y``).

    Examples
    --------
    >>> sigma_min_search_options("default").cv
    5
    """
    if value is None or isinstance(value, SigmaMinSearch):
        return value
    if isinstance(value, str) and value == "default":
        return SigmaMinSearch()
    raise InvalidParameterError(
        f"{name} must be 'default', None or a SigmaMinSearch, got {value!r}."
    )


#: Former keywords of :class:`~skflow.NWFlowSampler`: ``old: (parameter, field)``.
DEPRECATED_KEYWORDS = {
    "n_steps": ("solver", "n_steps"),
    "rtol": ("solver", "rtol"),
    "atol": ("solver", "atol"),
    "time_tolerance": ("solver", "time_tolerance"),
    "density_rtol": ("density", "rtol"),
    "density_atol": ("density", "atol"),
    "density_max_error": ("density", "max_error"),
    "chunk_size": ("engine", "chunk_size"),
    "support_chunk_size": ("engine", "support_chunk_size"),
    "pruned_rtol": ("engine", "pruned_rtol"),
    "n_jobs": ("engine", "n_jobs"),
    "kernel_reg": ("kernel", "reg"),
    "sigma_min_grid": ("sigma_min_search", "grid"),
    "cv": ("sigma_min_search", "cv"),
}
_AS_OPTIONS = {
    "solver": solver_options,
    "density": density_options,
    "engine": engine_options,
    "kernel": kernel_options,
    "sigma_min_search": sigma_min_search_options,
}
#: The parameters that hold option groups.
GROUPS = tuple(_AS_OPTIONS)


def fold_deprecated(
    current: dict[str, Any], old: dict[str, Any], owner: str, *, warn: bool = True
) -> dict[str, Any]:
    """The new parameters with the former keywords ``old`` folded in.

    ``current`` holds the groups' parameters as set (``solver``, ``density``, ``engine``);
    each former keyword replaces its field in its group, with a :class:`FutureWarning`
    naming the new spelling (unless ``warn`` is False, for pickles of former versions).
    Unknown keywords raise ``TypeError``, as Python does. Only the groups that change are
    returned.

    Examples
    --------
    >>> fold_deprecated({"solver": "rk4"}, {"n_steps": 5}, "NWFlowSampler", warn=False)
    {'solver': SolverOptions(method='rk4', n_steps=5, rtol=1e-05, atol=1e-05, time_tolerance=inf)}
    """
    updates: dict[str, Any] = {}
    for key, value in old.items():
        if key not in DEPRECATED_KEYWORDS:
            raise TypeError(f"{owner}.__init__() got an unexpected keyword argument {key!r}")
        param, field = DEPRECATED_KEYWORDS[key]
        group = _AS_OPTIONS[param](updates.get(param, current.get(param)), param)
        if key == "sigma_min_grid" and group is None:  # a grid turns the search on
            group = SigmaMinSearch()
        if key == "sigma_min_grid" and value is None:  # "fit ignores y" has its own spelling
            updates[param], new = None, f"{param}=None"
        elif group is None:  # cv of a disabled search: nothing to fold into
            updates[param], new = None, f"{param}=SigmaMinSearch(..., {field}={value!r})"
        else:
            updates[param] = dataclasses.replace(group, **{field: value})
            new = f"{param}={type(group).__name__}(..., {field}={value!r})"
        if warn:
            warnings.warn(
                f"{owner}({key}=...) is deprecated and will be removed in the next release; "
                f"use {owner}({new}).",
                FutureWarning,
                stacklevel=3,
            )
    return updates


def hide_deprecated_keywords(init: Callable) -> Callable:
    """Decorate an ``__init__`` that takes the former keywords as ``**deprecated``: its
    signature, as :func:`inspect.signature` (hence scikit-learn's ``get_params`` and its
    estimator checks, and ``help``) reports it, lists the parameters only.

    Examples
    --------
    >>> import inspect
    >>> def f(self, a=1, **deprecated): ...
    >>> list(inspect.signature(hide_deprecated_keywords(f)).parameters)
    ['self', 'a']
    """
    signature = inspect.signature(init)
    kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    init.__signature__ = signature.replace(parameters=kept)
    return init
