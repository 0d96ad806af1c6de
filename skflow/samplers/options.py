"""Option groups of the estimators, each one validated frozen dataclass passed as one
parameter. :class:`~skflow.NWFlowSampler`: the sampling solver, the density solve, the
velocity engine, the kernel shape and the search of ``sigma_min`` by ``fit(X, y)``.
:class:`~skflow.LearnedFlowSampler`: the same sampling solver (:class:`SolverOptions`), the
network (:class:`NetworkOptions`) and its training (:class:`TrainingOptions`).

Each group gathers settings that act in one place only (the solve of :meth:`sample`, the
change of variables of :meth:`score_samples`, the field's engine and block sizes, the
kernel estimated at ``fit``, the class-grouped search of ``fit(X, y)``), so the estimator
keeps the parameters that say *what* is computed. The parameter also accepts the
group's usual name alone (``solver="rk4"``, ``engine="pruned"``), which means the group with
that name and default settings. Values compare by value, so ``clone``, ``get_params`` and
``GridSearchCV`` handle them like any other parameter.

The former separate keywords (``n_steps``, ``density_rtol``, ``chunk_size``, ``d_model``,
``max_iter``, ...) are folded into their group for one release, with a :class:`FutureWarning`
(:func:`fold_deprecated`). A model card of a prior stores the learned sampler's parameters in
the flat form (:func:`flat_learned_params`), which :func:`learned_params_from_flat` groups
again without a warning.
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
    ParameterCheck,
    boolean,
    check_choice,
    check_int,
    check_real,
    check_time_tolerance,
    choice,
    either,
    integer,
    real,
    satisfies,
)
from ..solvers import METHODS
from ._frame import support_bounds
from ._kernel_geometry import KERNELS
from ._selection import check_sigma_min_grid

__all__ = [
    "DEPRECATED_KEYWORDS",
    "GROUPS",
    "LEARNED_DEPRECATED_KEYWORDS",
    "LEARNED_GROUPS",
    "DensityOptions",
    "EngineOptions",
    "KernelOptions",
    "NetworkOptions",
    "SAMPLER_ENGINES",
    "SigmaMinSearch",
    "SolverOptions",
    "TrainingOptions",
    "density_options",
    "engine_options",
    "flat_learned_params",
    "fold_deprecated",
    "fold_nested",
    "hide_deprecated_keywords",
    "kernel_options",
    "learned_params_from_flat",
    "nested_learned_params",
    "network_options",
    "sigma_min_search_options",
    "solver_options",
    "training_options",
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


def _training_choices(name: str) -> Any:
    """The choices of a training setting, defined in :mod:`skflow.nn.training` (imported
    when first checked: it imports Torch)."""

    def choices() -> Any:
        from ..nn import training

        return getattr(training, name)

    return choice(choices)


def _check_fields(options: Any, checks: dict[str, ParameterCheck]) -> None:
    """Run each field's check (messages name the field, as a flat parameter's did)."""
    for field, check in checks.items():
        check(getattr(options, field), field)


#: Checks of the fields of :class:`NetworkOptions`.
NETWORK_CHECKS: dict[str, ParameterCheck] = {
    **dict.fromkeys(("d_model", "n_heads", "n_layers", "mlp_ratio"), integer()),
    **dict.fromkeys(("exact_head", "frame_context"), boolean()),
    "size_embedding": either("auto", boolean()),
}
#: Checks of the fields of :class:`TrainingOptions`.
TRAINING_CHECKS: dict[str, ParameterCheck] = {
    "max_iter": integer(minimum=0),
    "max_time": real(low=0.0, low_open=True, allow_none=True),
    "batch_tasks": integer(),
    "support_size": satisfies(support_bounds),
    "n_targets": integer(),
    "learning_rate": real(low=0.0, low_open=True),
    "weight_decay": real(low=0.0),
    "warmup": integer(minimum=0),
    "lr_schedule": _training_choices("LR_SCHEDULES"),
    "clip_grad": real(low=0.0, low_open=True, allow_none=True),
    "time_sampling": _training_choices("TIME_SAMPLINGS"),
    "target": _training_choices("TARGETS"),
    "ema_decay": real(low=0.0, high=1.0, low_open=True, high_open=True, allow_none=True),
    "validation_fraction": either("auto", real(low=0.0, high=1.0, high_open=True)),
    "n_iter_no_change": either("auto", integer(allow_none=True)),
    "tol": real(low=0.0),
    "validation_interval": integer(),
    **dict.fromkeys(("mixed_precision", "compile"), boolean()),
}


@dataclass(frozen=True)
class NetworkOptions:
    """The architecture of :class:`~skflow.LearnedFlowSampler`'s velocity network
    (:class:`~skflow.nn.transformer.CrossAttentionVelocity`; the ``network`` parameter).

    A warm start keeps the fitted network's architecture and ignores these.

    Parameters
    ----------
    d_model : int, default=64
        Token width of the transformer.
    n_heads : int, default=4
        Attention heads per layer (``d_model`` must be divisible by it).
    n_layers : int, default=2
        Cross-attention blocks.
    mlp_ratio : int, default=2
        Hidden width of the block MLPs in units of ``d_model``.
    exact_head : bool, default=True
        Add the frozen exact NW head (input and gated residual of the output): the
        untrained model is the plug-in NW field.
    frame_context : bool, default=False
        Let the network see the frame it works in (the support's centre and scale in the
        training data's standardised frame, the global mean seen from the support and
        ``log m``, as a context token); see :class:`~skflow.LearnedFlowSampler`.
    size_embedding : bool or "auto", default="auto"
        Let the network see the support size ``m`` (an embedding of ``log m`` and
        ``m^(-1/2)`` added to every query token), so that one network learns how much to
        trust a support of ``m`` rows. ``"auto"``: on for ``fit(X, y)`` when the training
        supports vary in size, off for ``fit(X)`` and task sources.

    Examples
    --------
    >>> from skflow import LearnedFlowSampler, NetworkOptions
    >>> LearnedFlowSampler(network=NetworkOptions(d_model=16, n_heads=2)).network.n_layers
    2
    """

    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    mlp_ratio: int = 2
    exact_head: bool = True
    frame_context: bool = False
    size_embedding: Any = "auto"

    def __post_init__(self) -> None:
        _check_fields(self, NETWORK_CHECKS)


@dataclass(frozen=True)
class TrainingOptions:
    """The meta-training of :class:`~skflow.LearnedFlowSampler` (the ``training``
    parameter): its budget, tasks, optimiser, loss, early stopping and execution.

    Parameters
    ----------
    max_iter : int, default=2000
        Training iterations (one batch of tasks each); ``0`` leaves the network untrained.
    max_time : float, optional
        Wall-clock budget of the whole fit in seconds (see the estimator).
    batch_tasks : int, default=32
        Tasks per training batch.
    support_size : int, (low, high) or "auto", default="auto"
        Support points per training task (and per task of the few-shot ``score``).
    n_targets : int, default=128
        Target points per training task.
    learning_rate : float, default=1e-3
        Peak AdamW learning rate.
    weight_decay : float, default=1e-4
        AdamW weight decay.
    warmup : int, default=100
        Linear warmup iterations.
    lr_schedule : {"cosine", "constant"}, default="cosine"
        Learning rate after warmup.
    clip_grad : float or None, default=1.0
        Maximal gradient norm (None: no clipping).
    time_sampling : {"uniform", "log-bandwidth"}, default="uniform"
        Law of the training times.
    target : {"conditional", "exact", "marginal"}, default="conditional"
        Regression target of the training loss.
    ema_decay : float in (0, 1) or None, default=None
        Exponential moving average of the weights (None: none).
    validation_fraction : float in [0, 1) or "auto", default="auto"
        Held-out validation (rows, tasks or classes) of early stopping.
    n_iter_no_change : int, "auto" or None, default="auto"
        Patience of early stopping in validation checks (``"auto"``: 10 with validation).
    tol : float, default=1e-4
        Improvement threshold of early stopping.
    validation_interval : int, default=50
        Iterations between validation checks and log lines.
    mixed_precision : bool, default=False
        bfloat16 autocast of the learned branch (CUDA only).
    compile : bool, default=False
        Train through ``torch.compile`` (CUDA only).

    Each is described in full under :class:`~skflow.LearnedFlowSampler`.

    Examples
    --------
    >>> from skflow import LearnedFlowSampler, TrainingOptions
    >>> LearnedFlowSampler(training=TrainingOptions(max_iter=10)).training.warmup
    100
    """

    max_iter: int = 2000
    max_time: float | None = None
    batch_tasks: int = 32
    support_size: Any = "auto"
    n_targets: int = 128
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    warmup: int = 100
    lr_schedule: str = "cosine"
    clip_grad: float | None = 1.0
    time_sampling: str = "uniform"
    target: str = "conditional"
    ema_decay: float | None = None
    validation_fraction: Any = "auto"
    n_iter_no_change: Any = "auto"
    tol: float = 1e-4
    validation_interval: int = 50
    mixed_precision: bool = False
    compile: bool = False

    def __post_init__(self) -> None:
        _check_fields(self, TRAINING_CHECKS)


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


def network_options(value: Any, name: str = "network") -> NetworkOptions:
    """The :class:`NetworkOptions` of a ``network`` parameter (None: the defaults).

    Examples
    --------
    >>> network_options(None).d_model
    64
    """
    return _group(value, name, NetworkOptions, None)


def training_options(value: Any, name: str = "training") -> TrainingOptions:
    """The :class:`TrainingOptions` of a ``training`` parameter (None: the defaults).

    Examples
    --------
    >>> training_options(None).max_iter
    2000
    """
    return _group(value, name, TrainingOptions, None)


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
#: Former keywords of :class:`~skflow.LearnedFlowSampler`: ``old: (parameter, field)``.
LEARNED_DEPRECATED_KEYWORDS = {
    **{f.name: ("network", f.name) for f in dataclasses.fields(NetworkOptions)},
    **{f.name: ("training", f.name) for f in dataclasses.fields(TrainingOptions)},
    **{k: ("solver", k) for k in ("n_steps", "rtol", "atol", "time_tolerance")},
}
_AS_OPTIONS = {
    "solver": solver_options,
    "density": density_options,
    "engine": engine_options,
    "kernel": kernel_options,
    "sigma_min_search": sigma_min_search_options,
    "network": network_options,
    "training": training_options,
}
#: The parameters of :class:`~skflow.NWFlowSampler` that hold option groups.
GROUPS = ("solver", "density", "engine", "kernel", "sigma_min_search")
#: The parameters of :class:`~skflow.LearnedFlowSampler` that hold option groups.
LEARNED_GROUPS = ("network", "training", "solver")


def fold_deprecated(
    current: dict[str, Any],
    old: dict[str, Any],
    owner: str,
    *,
    warn: bool = True,
    keywords: dict[str, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The new parameters with the former keywords ``old`` folded in.

    ``current`` holds the groups' parameters as set (``solver``, ``density``, ``engine``);
    each former keyword replaces its field in its group, with a :class:`FutureWarning`
    naming the new spelling (unless ``warn`` is False, for pickles of former versions and
    model cards). ``keywords``: the former keywords of the estimator (default
    :data:`DEPRECATED_KEYWORDS`, :class:`~skflow.NWFlowSampler`'s;
    :data:`LEARNED_DEPRECATED_KEYWORDS` for :class:`~skflow.LearnedFlowSampler`).
    Unknown keywords raise ``TypeError``, as Python does. Only the groups that change are
    returned.

    Examples
    --------
    >>> fold_deprecated({"solver": "rk4"}, {"n_steps": 5}, "NWFlowSampler", warn=False)
    {'solver': SolverOptions(method='rk4', n_steps=5, rtol=1e-05, atol=1e-05, time_tolerance=inf)}
    """
    keywords = DEPRECATED_KEYWORDS if keywords is None else keywords
    updates: dict[str, Any] = {}
    for key, value in old.items():
        if key not in keywords:
            raise TypeError(f"{owner}.__init__() got an unexpected keyword argument {key!r}")
        param, field = keywords[key]
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


def fold_nested(current: dict[str, Any], nested: dict[str, Any], owner: str) -> dict[str, Any]:
    """The groups with the nested settings ``nested`` (``{"training__max_iter": 5}``) folded
    in: what ``set_params`` (hence ``GridSearchCV``) does with a ``group__field`` name.

    ``current`` holds the groups' parameters as set; an unknown group or field raises
    ``ValueError``, as scikit-learn's ``set_params`` does. Only the groups that change are
    returned.

    Examples
    --------
    >>> fold_nested({"solver": "rk4"}, {"solver__n_steps": 5}, "LearnedFlowSampler")["solver"]
    SolverOptions(method='rk4', n_steps=5, rtol=1e-05, atol=1e-05, time_tolerance=inf)
    """
    updates: dict[str, Any] = {}
    for key, value in nested.items():
        param, _, field = key.partition("__")
        group = _AS_OPTIONS[param](updates.get(param, current[param]), param)
        if field not in {f.name for f in dataclasses.fields(group)}:
            raise ValueError(
                f"Invalid parameter {key!r} for estimator {owner}: {type(group).__name__} "
                f"has no field {field!r}."
            )
        updates[param] = dataclasses.replace(group, **{field: value})
    return updates


def flat_learned_params(params: dict[str, Any]) -> dict[str, Any]:
    """:class:`~skflow.LearnedFlowSampler` parameters in the flat form of a model card: each
    group (``network``, ``training``, ``solver``) present in ``params`` replaced by its fields
    (``solver`` by its method and ``n_steps``, ``rtol``, ``atol``, ``time_tolerance``).

    Examples
    --------
    >>> flat = flat_learned_params({"training": TrainingOptions(max_iter=5), "verbose": 0})
    >>> flat["max_iter"], flat["warmup"], flat["verbose"]
    (5, 100, 0)
    """
    flat = {k: v for k, v in params.items() if k not in LEARNED_GROUPS}
    for param in LEARNED_GROUPS:
        if param in params:
            fields = dataclasses.asdict(_AS_OPTIONS[param](params[param], param))
            flat.update(fields)
    if "method" in flat:
        flat["solver"] = flat.pop("method")
    return flat


def learned_params_from_flat(flat: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~skflow.LearnedFlowSampler` parameters of the flat form of a model card or
    a recipe (``{"d_model": 64, "max_iter": 300, ...}``), grouped without a warning: the
    stored form of the parameters is flat (JSON), the estimator's grouped.

    Examples
    --------
    >>> params = learned_params_from_flat({"max_iter": 5, "n_steps": 10, "warm_start": True})
    >>> params["training"].max_iter, params["solver"].n_steps, params["warm_start"]
    (5, 10, True)
    """
    old = {k: v for k, v in flat.items() if k in LEARNED_DEPRECATED_KEYWORDS}
    params = {k: v for k, v in flat.items() if k not in old}
    current = {name: params.get(name) for name in LEARNED_GROUPS}
    current["solver"] = params.get("solver", "heun")
    groups = fold_deprecated(
        current, old, "LearnedFlowSampler", warn=False, keywords=LEARNED_DEPRECATED_KEYWORDS
    )
    return {**params, **groups}


def nested_learned_params(flat: dict[str, Any]) -> dict[str, Any]:
    """The ``set_params`` names of flat :class:`~skflow.LearnedFlowSampler` parameters
    (``{"max_iter": 5}`` -> ``{"training__max_iter": 5}``): changes only those fields of a
    fitted or configured sampler's groups, where :func:`learned_params_from_flat` builds
    whole groups (for a new sampler).

    Examples
    --------
    >>> nested_learned_params({"max_iter": 5, "solver": "rk4", "n_steps": 10, "verbose": 1})
    {'training__max_iter': 5, 'solver__method': 'rk4', 'solver__n_steps': 10, 'verbose': 1}
    """
    nested = {}
    for key, value in flat.items():
        if key in LEARNED_DEPRECATED_KEYWORDS:
            group, field = LEARNED_DEPRECATED_KEYWORDS[key]
            nested[f"{group}__{field}"] = value
        else:
            nested["solver__method" if key == "solver" else key] = value
    return nested


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
