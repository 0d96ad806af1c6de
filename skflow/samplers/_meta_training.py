"""Meta-training of :class:`~skflow.LearnedFlowSampler`: from validated data to a trained network.

``LearnedFlowSampler.fit`` validates its data, then

1. :func:`training_tasks` turns it into task sources (``fit(X, y)``: one task per label;
   ``fit(X)``: random splits of ``X``; ``fit(task_source)``: the source itself), with the
   ``"auto"`` options of this fit resolved (:class:`FitOptions`);
2. :class:`TrainingRun` draws this fit's seeds and builds the network (or continues the
   fitted one, :class:`WarmStart`), its generators and the fixed validation tasks;
3. :meth:`TrainingRun.train` runs :func:`skflow.nn.training.train_flow_model`.

Everything here reads the estimator's parameters from a :class:`TrainingParams` (its
``get_params()`` with the option groups flattened, :meth:`TrainingParams.of`) and returns
what ``fit`` stores; nothing touches the estimator itself.
Torch and the task sources are imported on first use, as in the estimator.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import numpy as np

from .._array import get_backend
from .._validation import check_int
from ._frame import (
    build_model,
    into_frame,
    is_task_source,
    log_spaced_sizes,
    predictive_frame,
    support_bounds,
    task_frame,
)
from .options import flat_learned_params

__all__ = [
    "FitOptions",
    "TrainingParams",
    "TrainingRun",
    "TrainingTasks",
    "WarmStart",
    "check_target",
    "resolve_options",
    "source_n_features",
    "training_tasks",
]

# fit(X, y), validation_fraction="auto": classes are held out for validation from this many
# classes on (fewer classes are all needed for training: a share of every class's rows is
# held out instead). normalize="auto" trains in the predictive frame from this many classes
# on only: with fewer, nothing validates on unseen classes what that frame borrows from the
# training classes' law, and held-out digits (9 training classes) measured it 15-19 % worse
# at m = 5 and 10 than each support's own frame (docs/transfer.md).
MIN_CLASSES_FOR_VALIDATION = 10
# fit(X, y), validation_fraction="auto": the share of the classes, or of every class's rows.
AUTO_VALIDATION_SHARE = 0.2
# Few-shot MMD² below this counts as this (about the estimator's noise with 128 rows): the
# ratios of gaussian_frame_pays stay finite.
_MMD2_FLOOR = 1e-4
# Rows of a validation task (2 support, 2 targets): "auto" holds out rows of a class only when
# its share gives that many.
_MIN_TASK_ROWS = 4
# n_iter_no_change="auto": validation checks without improvement before training stops.
AUTO_PATIENCE = 10
# Frames between a user's ``fit`` call and the functions below that warn: fit's atomic guard,
# training_tasks -> _labelled_tasks -> resolve_options, and TrainingRun.train -> _forward. The
# warnings point at the user's ``fit`` line.
_OPTIONS_STACKLEVEL = 6
_FORWARD_STACKLEVEL = 5


class TrainingParams(SimpleNamespace):
    """The parameters of :class:`~skflow.LearnedFlowSampler`, as meta-training reads them.

    ``TrainingParams.of(estimator)``: the validated public parameters as attributes, those of
    the groups ``network``, ``training`` and ``solver`` under their fields' names (see
    :class:`~skflow.NetworkOptions`, :class:`~skflow.TrainingOptions`; ``solver``: the
    method), never the estimator.
    Meta-training reads the architecture (``d_model``, ``n_heads``, ``n_layers``,
    ``mlp_ratio``, ``exact_head``, ``sigma_min``, ``size_embedding``), the tasks (``batch_tasks``,
    ``support_size``, ``n_targets``, ``augment``, ``normalize``, ``target``,
    ``validation_fraction``), the loop (``max_iter``, ``max_time``, ``learning_rate``,
    ``weight_decay``, ``warmup``, ``lr_schedule``, ``clip_grad``, ``time_sampling``,
    ``ema_decay``, ``n_iter_no_change``, ``tol``, ``validation_interval``) and its execution
    (``mixed_precision``, ``compile``, ``verbose``).

    Examples
    --------
    >>> from skflow import LearnedFlowSampler, TrainingOptions
    >>> est = LearnedFlowSampler(training=TrainingOptions(validation_fraction=0.2))
    >>> params = TrainingParams.of(est)
    >>> params.validation_share(), params.patience(validated=True)
    (0.2, 10)
    """

    @classmethod
    def of(cls, estimator: Any) -> TrainingParams:
        """The parameters of ``estimator`` (a :class:`~skflow.LearnedFlowSampler`), flat."""
        return cls(**flat_learned_params(estimator.get_params(deep=False)))

    def validation_share(self) -> float:
        """``validation_fraction`` as a float (``"auto"``: 0, no held-out rows)."""
        share = self.validation_fraction
        return 0.0 if isinstance(share, str) else float(share)

    def patience(self, validated: bool) -> int | None:
        """``n_iter_no_change``, with ``"auto"`` = 10 checks when there is validation."""
        if self.n_iter_no_change == "auto":
            return AUTO_PATIENCE if validated else None
        return self.n_iter_no_change


@dataclass(frozen=True)
class FitOptions:
    """The ``"auto"`` options of one fit, resolved (``support_range_``, ``augment_``,
    ``normalize_``, ``frame_context_`` of the estimator, and whether the network sees the
    support size)."""

    support_range: tuple[int, int]
    augment: str | None
    normalize: bool
    frame_context: bool = False
    predictive: bool = False  # normalize="predictive": the frame of a Gaussian predictive
    size_embedding: bool = False


@dataclass(frozen=True)
class TrainingTasks:
    """Where one fit's tasks come from.

    Attributes
    ----------
    source : task source
        Training tasks (augmentation applied).
    validation : task source or None
        Validation tasks, or None without validation.
    options : FitOptions
    default_support : ndarray of shape (k, n_features) or None
        The estimator's ``support_`` (``fit(X)`` only).
    labelled : bool
        Whether the data were labelled (``fit(X, y)``): only then is
        ``validation_classes`` the estimator's ``validation_classes_``.
    validation_classes : ndarray or None
        Classes held out for validation by ``validation_fraction="auto"``.
    predictive_frame : fitted classical Gaussian sampler or None
        With ``normalize="predictive"``: the Gaussian whose per-support frame
        (:func:`~skflow.samplers._frame.predictive_frame`) every task is mapped into, chosen
        and fitted on the training classes only.
    """

    source: Any
    validation: Any
    options: FitOptions
    default_support: np.ndarray | None = None
    labelled: bool = False
    validation_classes: np.ndarray | None = None
    predictive_frame: Any = None


@dataclass(frozen=True)
class WarmStart:
    """What a warm start continues from.

    Attributes
    ----------
    model : CrossAttentionVelocity
        The fitted network (``model_``).
    task_scale : float or None
        The fitted ``task_scale_`` (None: compute it again).
    state : dict or None
        :meth:`TrainingRun.warm_state` of the previous fit; None after unpickling (the
        weights continue with fresh generators and optimizer).
    frame : {"support", "predictive", "none"}, default="support"
        The frame the network was trained in (each support's own, a Gaussian predictive's,
        or none): ``normalize="auto"`` continues it in that frame.
    """

    model: Any
    task_scale: float | None = None
    state: dict | None = None
    frame: str = "support"


def source_n_features(source: Any) -> int:
    """Number of features of a task source: its ``n_features``, else that of a probe task.

    Parameters
    ----------
    source : task source
        An object with ``sample_tasks(n_tasks, n_support, n_query, random_state)``.

    Returns
    -------
    int

    Examples
    --------
    >>> from skflow.tasks import GaussianMixtureTasks
    >>> source_n_features(GaussianMixtureTasks(n_features=3))
    3
    """
    d = getattr(source, "n_features", None)
    if d is None:
        probe, _ = source.sample_tasks(1, 1, 0, random_state=np.random.default_rng(0))
        d = probe.shape[-1]
    return check_int(int(d), "n_features of the task source")


def training_tasks(
    params: TrainingParams,
    X: Any,
    y: np.ndarray | None,
    rng: np.random.RandomState,
    warm_frame: str | None = None,
) -> TrainingTasks:
    """The task sources of ``fit(X, y)``, ``fit(X)`` or ``fit(task_source)``.

    Parameters
    ----------
    params : TrainingParams
    X : ndarray of shape (n_samples, n_features) or task source
        Validated by the estimator.
    y : ndarray of shape (n_samples,) or None
        Validated task labels.
    rng : numpy.random.RandomState
        The fit's random state: ``fit(X)`` draws its default support from it, ``fit(X, y)``
        the seed of its held-out classes or rows.
    warm_frame : {"support", "predictive", "none"} or None, default=None
        The frame of the network a warm start continues (:attr:`WarmStart.frame`):
        ``normalize="auto"`` keeps it.

    Returns
    -------
    TrainingTasks

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import LearnedFlowSampler, TrainingOptions
    >>> params = TrainingParams.of(LearnedFlowSampler(training=TrainingOptions(support_size=5)))
    >>> X = np.random.default_rng(0).normal(size=(20, 2))
    >>> tasks = training_tasks(params, X, None, np.random.RandomState(0))
    >>> tasks.options.support_range, tasks.default_support.shape
    ((5, 5), (5, 2))
    """
    from ..tasks import SingleDatasetTasks

    if y is not None:
        seed = np.random.default_rng(rng.randint(2**31 - 1))
        return _labelled_tasks(params, X, y, seed, warm_frame)
    options = resolve_options(params, labelled=False, sizes=None, warm_frame=warm_frame)
    source, default = X, None
    if not is_task_source(X):  # fit(X): X is one task, split at random into support and targets
        source = SingleDatasetTasks(X)
        k = options.support_range[1]
        default = X.copy()
        if X.shape[0] > k:
            default = X[np.sort(rng.choice(X.shape[0], k, replace=False))].copy()
    source = _augmented(source, options)
    validation = source if params.validation_share() > 0 else None
    return TrainingTasks(source, validation, options, default)


def _augmented(source: Any, options: FitOptions) -> Any:
    from ..tasks import RecentredTasks, RotatedTasks

    if options.augment == "rotate" and not options.predictive:  # else rotated in the frame
        return RotatedTasks(source)
    return RecentredTasks(source) if options.augment == "recentre" else source


def _labelled_tasks(
    params: TrainingParams,
    X: np.ndarray,
    y: np.ndarray,
    rng: np.random.Generator,
    warm_frame: str | None = None,
) -> TrainingTasks:
    """Training and validation :class:`~skflow.tasks.FewShotClassTasks` of ``fit(X, y)``.

    ``validation_fraction="auto"`` holds out whole classes (a fifth, at least 2) when there
    are at least ``MIN_CLASSES_FOR_VALIDATION``: validation on classes never trained on is
    what a user's test on new classes is; with fewer classes, a fifth of the rows of every
    class whose fifth is at least 4 rows (one validation task), none if no class has 20 rows.
    A float holds out that fraction of the rows of every class, 0 nothing.
    """
    from ..tasks import FewShotClassTasks

    everything = FewShotClassTasks(X, y)
    labels = everything.classes_  # validated: NaN, classes too small (warned)
    share, held_classes = params.validation_fraction, None
    auto = isinstance(share, str)
    if auto:
        share = AUTO_VALIDATION_SHARE
        if labels.size >= MIN_CLASSES_FOR_VALIDATION:
            n_val = max(2, int(round(share * labels.size)))
            held_classes = np.sort(rng.choice(labels, n_val, replace=False))
    train, validation = everything, None
    held = np.zeros(len(y), dtype=bool)  # rows the training tasks never see
    if held_classes is not None:
        held = np.isin(y, held_classes)
        train = FewShotClassTasks(X, y, classes=np.setdiff1d(labels, held_classes))
        validation = FewShotClassTasks(X, y, classes=held_classes)
    elif share != 0:
        for c in labels:  # the same fraction of every class's rows
            rows = np.flatnonzero(y == c)
            n_held = int(round(share * rows.size))
            if auto and n_held < _MIN_TASK_ROWS:  # "auto": only classes that give a task
                continue
            held[rng.choice(rows, n_held, replace=False)] = True
        if held.any():
            train = FewShotClassTasks(X[~held], y[~held], classes=labels)
            validation = FewShotClassTasks(X[held], y[held])
    # the support range fits the rows the training tasks keep (held-out rows excepted)
    sizes = everything.class_sizes_ if held_classes is not None else train.class_sizes_
    options = resolve_options(params, labelled=True, sizes=sizes, warm_frame=warm_frame)
    frame = None
    if options.predictive:
        seed = int(rng.integers(2**31 - 1))
        frame = fit_predictive_frame(X[~held], y[~held], options.support_range, seed)
        choose = params.normalize == "auto" and warm_frame is None  # else as given or kept
        if choose and not gaussian_frame_pays(frame, X[~held], y[~held], seed):
            frame, options = None, replace(options, predictive=False)
    return TrainingTasks(
        _augmented(train, options),
        validation,
        options,
        labelled=True,
        validation_classes=held_classes,
        predictive_frame=frame,
    )


def fit_predictive_frame(
    X: np.ndarray, y: np.ndarray, support_range: tuple[int, int], random_state: int
) -> Any:
    """The Gaussian predictive of ``normalize="predictive"``, fitted on training rows.

    :class:`~skflow.BestClassicalSampler` chooses among the Gaussian arms
    (:func:`~skflow.samplers.classical.gaussian_candidates`) by few-shot MMD² on class-grouped
    folds of these classes, once per support size of :func:`frame_support_sizes` (which arm
    wins depends on ``m``: shrinkage toward the training classes pays at small ``m``, the
    support's own covariance at large ``m``); each chosen arm is refitted on all of them.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    support_range : (int, int)
    random_state : int
        The selector's (its folds and tasks).

    Returns
    -------
    fitted BestClassicalSampler
        Its ``predictive_moments(S)`` are those of the arm chosen for ``len(S)`` rows.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.random.default_rng(0).normal(size=(80, 2)), np.repeat(np.arange(8), 10)
    >>> est = fit_predictive_frame(X, y, (2, 8), random_state=0)
    >>> est.support_sizes_.tolist(), est.predictive_moments(X[:3])[1].shape
    ([2, 3, 4, 6, 8], (2, 2))
    """
    from .classical import BestClassicalSampler, gaussian_candidates

    best = BestClassicalSampler(
        gaussian_candidates(),
        support_size=frame_support_sizes(support_range),
        # Gaussian arms never copy: the frame keeps the median-bandwidth criterion that its
        # trained networks (and the shipped priors) were measured with
        criterion="mmd2",
        random_state=random_state,
    )
    return best.fit(X, y)


def gaussian_frame_pays(frame: Any, X: np.ndarray, y: np.ndarray, random_state: int) -> bool:
    """Whether ``normalize="auto"`` trains in the predictive frame ``frame``: its Gaussian
    predicts held-out training classes at least as well as the kernel plug-in does.

    The plug-in (``NWFlowSampler()``, its automatic bandwidth) is scored on the folds, tasks and
    support sizes of ``frame`` (``fit_predictive_frame`` with the same ``random_state``); the
    predictive frame is kept when the geometric mean over the sizes of the ratio of the best
    Gaussian arm's few-shot MMD² to the plug-in's is at most 1 (each floored at 1e-4, about the
    estimator's noise). Where the classes are each a law of their own (e.g. Gaussian mixtures),
    the support's own frame serves them better and the fit trains there.

    Parameters
    ----------
    frame : fitted BestClassicalSampler
        :func:`fit_predictive_frame` of ``X, y``.
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    random_state : int
        The one ``frame`` was fitted with.

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import HierarchicalTasks
    >>> fam = HierarchicalTasks(2, prior_cov=4.0, within_cov=0.25)
    >>> X, y = fam.make_classes(8, 20, random_state=0)
    >>> frame = fit_predictive_frame(X, y, (2, 10), random_state=0)
    >>> gaussian_frame_pays(frame, X, y, random_state=0)
    True
    """
    from .classical import BestClassicalSampler
    from .nw import NWFlowSampler

    sizes = [int(m) for m in frame.support_sizes_]
    plugin = BestClassicalSampler(
        [NWFlowSampler(sigma_min_search=None)],
        support_size=sizes,
        criterion="mmd2",  # the frame's own criterion: a ratio of like to like
        random_state=random_state,
    ).fit(X, y)
    gauss = np.maximum(np.min(frame.validation_mmd2_, axis=1), _MMD2_FLOOR)
    kernel = np.maximum(plugin.validation_mmd2_[:, 0], _MMD2_FLOOR)
    return bool(np.mean(np.log(gauss / kernel)) <= 0.0)


def validation_sizes(support_range: tuple[int, int], source: Any) -> np.ndarray:
    """Up to 3 support sizes spread over the range (log scale), at most what the largest
    class of ``source`` allows with 2 target rows (held-out classes may be smaller).

    Examples
    --------
    >>> validation_sizes((2, 50), None).tolist()
    [2, 10, 50]
    """
    lo, hi = support_range
    class_sizes = getattr(source, "class_sizes_", None)
    if class_sizes is not None:
        hi = max(1, min(hi, int(np.max(class_sizes)) - 2))
        lo = min(lo, hi)
    return log_spaced_sizes(lo, hi, 3)


def frame_support_sizes(support_range: tuple[int, int], n_sizes: int = 5) -> list[int]:
    """Support sizes at which the predictive frame is chosen: ``n_sizes`` geometrically
    spaced over the range (at least 2 rows: a Gaussian arm needs a spread).

    Parameters
    ----------
    support_range : (int, int)
    n_sizes : int, default=5

    Returns
    -------
    sizes : list of int
        Sorted, distinct.

    Examples
    --------
    >>> frame_support_sizes((2, 50)), frame_support_sizes((10, 10))
    ([2, 4, 10, 22, 50], [10])
    """
    lo, hi = max(support_range[0], 2), max(support_range[1], 2)
    return log_spaced_sizes(lo, hi, n_sizes).tolist()


def resolve_options(
    params: TrainingParams,
    labelled: bool,
    sizes: np.ndarray | None,
    warm_frame: str | None = None,
) -> FitOptions:
    """The ``"auto"`` options of a fit.

    On labelled data (``fit(X, y)``): support sizes from 2 to the size the classes allow (at
    most 50), rotation augmentation, the frame of the Gaussian predictive of the training
    classes (each support's own frame with ``frame_context`` or with fewer than
    ``MIN_CLASSES_FOR_VALIDATION`` classes) and a network that sees the support size when the
    sizes vary: one network learns how far to move from the training classes' law toward the
    support as ``m`` grows. On one data set or a task source: a fixed support of 50 rows, no
    augmentation, no normalisation, no size input.

    Parameters
    ----------
    params : TrainingParams
    labelled : bool
        Whether the fit is ``fit(X, y)``.
    sizes : ndarray of shape (n_classes,) or None
        Rows per class (labelled data only).
    warm_frame : {"support", "predictive", "none"} or None, default=None
        The frame of the network a warm start continues: ``normalize="auto"`` keeps it,
        whatever the data.

    Returns
    -------
    FitOptions

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import LearnedFlowSampler
    >>> params = TrainingParams.of(LearnedFlowSampler())
    >>> options = resolve_options(params, labelled=True, sizes=np.full(10, 25))
    >>> options.support_range, options.augment, options.predictive, options.size_embedding
    ((2, 23), 'rotate', True, True)
    """
    lo, hi = _support_range(params.support_size, labelled, sizes)
    n_classes = 0 if sizes is None else len(sizes)
    predictive = _is_predictive(params, labelled, warm_frame, n_classes)
    augment = ("rotate" if labelled else None) if params.augment == "auto" else params.augment
    auto_normalize = bool(labelled) if warm_frame is None else warm_frame != "none"
    normalize = auto_normalize if params.normalize == "auto" else bool(params.normalize)
    # a warm start keeps its network's architecture (TrainingRun reads it from the network)
    context = bool(params.frame_context) and warm_frame is None
    if predictive and context:
        raise ValueError(
            "normalize='predictive' and frame_context=True cannot be combined: the context "
            "token describes the support's own frame (mean and scale)."
        )
    if params.target == "exact" and (augment or normalize):
        raise ValueError(
            "target='exact' regresses on the task source's own velocity, which knows "
            "neither augmentation nor normalisation; set augment=None, normalize=False."
        )
    sized = params.size_embedding
    sized = bool(labelled and lo < hi) if sized == "auto" else bool(sized)
    return FitOptions((int(lo), int(hi)), augment, normalize, context, predictive, sized)


def _support_range(support_size: Any, labelled: bool, sizes: np.ndarray | None) -> tuple:
    """``(low, high)`` of the training supports: ``support_size``, ``"auto"`` resolved, and
    on labelled data ``high`` lowered to what the classes allow (a warning when a class
    cannot give a task)."""
    lo, hi = support_bounds(support_size)
    if support_size == "auto":
        lo, hi = (2, 50) if labelled else (50, 50)
    if labelled:
        top = int(np.percentile(sizes, 75)) - 2  # a task keeps >= 2 target rows
        hi = max(min(hi, top), 2)
        lo = min(lo, hi)
        if np.any(sizes < lo + 2):
            warnings.warn(
                f"{int(np.sum(sizes < lo + 2))} class(es) have fewer than support_size "
                f"low + 2 = {lo + 2} rows and cannot give a training task; lower "
                "support_size.",
                UserWarning,
                stacklevel=_OPTIONS_STACKLEVEL + 1,
            )
    return lo, hi


def _is_predictive(
    params: TrainingParams, labelled: bool, warm_frame: str | None, n_classes: int
) -> bool:
    """Whether the fit runs in the predictive frame: ``normalize="predictive"``, or
    ``"auto"`` on labelled data of ``MIN_CLASSES_FOR_VALIDATION`` classes or more without
    ``frame_context`` (a warm start: the frame of the network it continues)."""
    if params.normalize == "auto":
        if warm_frame is not None:
            return bool(labelled) and warm_frame == "predictive"
        enough = n_classes >= MIN_CLASSES_FOR_VALIDATION
        return bool(labelled) and enough and not params.frame_context
    if params.normalize == "predictive" and not labelled:
        raise ValueError(
            "normalize='predictive' fits a Gaussian predictive on the training classes: it "
            "needs fit(X, y) with class labels."
        )
    return params.normalize == "predictive"


def _with_frame(S: np.ndarray, centre: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Supports (B, m, d) with their frame (centre (B, 1, d), scale (B, 1, 1)) appended to
    every row: (B, m, 2 d + 1), what a ``frame_context`` network reads (tensors too)."""
    xp = get_backend(S)
    frame = xp.concat([centre, xp.log(scale)], axis=-1)
    return xp.concat([S, xp.broadcast_to(frame, (*S.shape[:2], frame.shape[-1]))], axis=-1)


def check_target(target: str, source: Any) -> None:
    """Refuse ``target="exact"`` for a task source without a population velocity.

    Parameters
    ----------
    target : {"conditional", "exact", "marginal"}
    source : task source

    Raises
    ------
    ValueError
        With ``target="exact"`` when ``source`` has no ``velocity`` method.

    Examples
    --------
    >>> from skflow.tasks import GaussianMixtureTasks
    >>> check_target("exact", GaussianMixtureTasks(n_features=2))
    """
    if target == "exact" and not callable(getattr(source, "velocity", None)):
        raise ValueError(
            f"target='exact' needs a task source that knows its population velocity (a "
            f"velocity method and sample_tasks(..., return_params=True), e.g. "
            f"GaussianMixtureTasks); {type(source).__name__} has none. Use "
            "target='conditional' or 'marginal'."
        )


class TrainingRun:
    """One fit's training: seeds, network, generators, validation tasks and the loop.

    Construction draws five seeds from ``rng`` (the task stream, the task and input scales,
    the validation tasks, the noise and times, the weights), computes the per-task
    normalisation scale, builds the network (or continues ``warm``) and draws the fixed
    validation tasks; :meth:`train` runs the loop.

    Parameters
    ----------
    params : TrainingParams
    tasks : TrainingTasks
    n_features : int
    device : str
        Torch device of training (available).
    rng : numpy.random.RandomState
        The fit's random state, after :func:`training_tasks`.
    warm : WarmStart, optional
        Continue the fitted network (``warm_start=True``).

    Attributes
    ----------
    model : CrossAttentionVelocity
        The network being trained (after :meth:`train`: the one to sample with, in eval mode).
    task_scale : float
        Median support spread of the training tasks (1.0 without normalisation).
    validation : list of tuple or None
        The fixed validation batches.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import LearnedFlowSampler, NetworkOptions, TrainingOptions
    >>> from skflow.tasks import GaussianMixtureTasks
    >>> est = LearnedFlowSampler(
    ...     NetworkOptions(d_model=8, n_layers=1),
    ...     training=TrainingOptions(max_iter=2, batch_tasks=2, support_size=4, n_targets=4),
    ... )
    >>> params = TrainingParams.of(est)
    >>> rng = np.random.RandomState(0)
    >>> tasks = training_tasks(params, GaussianMixtureTasks(n_features=2), None, rng)
    >>> run = TrainingRun(params, tasks, 2, "cpu", rng)
    >>> run.train().n_iter
    2
    """

    def __init__(
        self,
        params: TrainingParams,
        tasks: TrainingTasks,
        n_features: int,
        device: str,
        rng: np.random.RandomState,
        warm: WarmStart | None = None,
    ):
        if warm is not None:  # an architecture choice: the fitted network's
            context = bool(getattr(warm.model, "frame_context", False))
            tasks = replace(tasks, options=replace(tasks.options, frame_context=context))
        self.params, self.tasks, self.n_features, self.device = params, tasks, n_features, device
        check_target(params.target, tasks.source)
        seeds = [int(s) for s in rng.randint(0, 2**31 - 1, size=5)]
        self.task_scale = 1.0
        if warm is not None and warm.task_scale is not None:
            self.task_scale = warm.task_scale
        elif tasks.options.normalize:
            self.task_scale = self._task_scale(seeds[1])
        self.model, self.task_rng, self.generator, self.state = self._start(seeds, warm)
        self.validation = None
        if tasks.validation is not None:
            val_rng = np.random.default_rng(seeds[2])
            self.validation = self._validation_tasks(tasks.validation, val_rng)

    # -- tasks -----------------------------------------------------------------------------
    def _support_size(self, rng: np.random.Generator) -> int:
        """Support size of one training batch: log-uniform on the integers of the range."""
        lo, hi = self.tasks.options.support_range
        if lo == hi:
            return lo
        return int(min(hi, np.floor(np.exp(rng.uniform(np.log(lo), np.log(hi + 1))))))

    def _draw(
        self,
        source: Any,
        rng: np.random.Generator,
        target: str = "conditional",
        *,
        m: int | None = None,
        normalize: bool | None = None,
        context: bool | None = None,
        device: str | None = None,
    ):
        """``batch_tasks`` tasks of ``source`` as float arrays, checked for shape and finiteness.

        ``m`` support rows per task (default: drawn from the support range); with per-task
        normalisation every task is centred and scaled by its support (:func:`task_frame`);
        with ``frame_context`` every support row carries that frame (:func:`_with_frame`).
        Returns ``(supports, targets)``, plus the reference set (``target="marginal"``) or the
        tasks' velocity function (``target="exact"``). With a ``device`` (a source with device
        draws, target not ``"exact"``, no predictive frame) the tasks are drawn there in Torch
        (seeded by one draw of ``rng``) and returned as tensors; their finiteness is left to the
        loss's check (a check here would stall the device every step).
        """
        from ..nn.objective import MARGINAL_REFERENCE_FACTOR

        n_targets = self.params.n_targets
        n = n_targets * (MARGINAL_REFERENCE_FACTOR if target == "marginal" else 1)
        extra = {"return_params": True} if target == "exact" else {}
        extra = extra if device is None else {"device": device}
        m = self._support_size(rng) if m is None else m
        drawn = source.sample_tasks(self.params.batch_tasks, m, n, random_state=rng, **extra)
        S, Q = self._checked(source, drawn[0], drawn[1], on_device=device is not None)
        options = self.tasks.options
        centre, scale = task_frame(S, self.task_scale)
        if (options.normalize if normalize is None else normalize) and options.predictive:
            S, Q = self._predictive_frames(S, Q, rng)
        elif options.normalize if normalize is None else normalize:
            S, Q = (S - centre) / scale, (Q - centre) / scale
        if options.frame_context if context is None else context:
            S = _with_frame(S, centre, scale)
        if target == "marginal":
            return S, Q[:, :n_targets], Q
        if target == "exact":
            params, path = drawn[2], self.model.path  # the network's path, built once
            return S, Q, lambda x, t: source.velocity(x, t, params, path=path)
        return S, Q

    def _checked(self, source: Any, S: Any, Q: Any, on_device: bool = False) -> tuple:
        """A drawn batch's supports and targets, checked for shape (and finiteness, for
        NumPy draws: a device draw's are left to the training loss's check)."""
        if not on_device:
            S, Q = np.asarray(S), np.asarray(Q)
        d = self.n_features
        if getattr(source, "variable_n_features", False) and S.ndim == 3:
            d = min(d, S.shape[-1])  # a source of tasks of 1..d features (the priors')
        if S.ndim != 3 or S.shape[-1] != d or Q.ndim != 3 or Q.shape[-1] != d:
            raise ValueError(
                f"the task source returned supports {tuple(S.shape)} and targets "
                f"{tuple(Q.shape)}; expected (B, m, {d}) and (B, n, {d})."
            )
        if not on_device and not (np.all(np.isfinite(S)) and np.all(np.isfinite(Q))):
            raise ValueError("the task source returned NaN or infinite values.")
        return S, Q

    # -- where the training batches are drawn ----------------------------------------------
    #: How :meth:`train` draws its batches (internal, not an estimator parameter; tests set it
    #: on a run; None is ``"auto"``): ``"auto"`` draws in NumPy on the CPU and, on another
    #: device, on that device when :meth:`draw_mode` allows it, else in NumPy one batch ahead
    #: in a background thread; ``"numpy"``, ``"device"`` and ``"prefetch"`` force one of these.
    task_draws: str | None = None

    def draw_mode(self) -> str:
        """Where this run's training batches are drawn: ``"numpy"`` (in the loop, today's
        path, always on the CPU unless forced otherwise), ``"device"`` (Torch on the training
        device) or ``"prefetch"`` (NumPy, one batch ahead, :class:`PrefetchedDraws`)."""
        from ..tasks import supports_device_draws

        mode = self.task_draws or "auto"
        if mode not in ("auto", "numpy", "device", "prefetch"):
            raise ValueError(f"task_draws must be auto, numpy, device or prefetch, got {mode!r}.")
        native = (
            supports_device_draws(self.tasks.source)
            and self.params.target != "exact"
            and not self.tasks.options.predictive
        )
        if mode == "device" and not native:
            raise ValueError(
                "device draws need a task source with device draws, a target other than "
                "'exact' and no predictive frame."
            )
        if mode != "auto":
            return mode
        if str(self.device) == "cpu":
            return "numpy"
        return "device" if native else "prefetch"

    def task_batches(self, source: Any, rng: np.random.Generator, target: str):
        """The ``draw_tasks`` callable of the loop (see :meth:`draw_mode`); call its
        ``close()`` when there is one (the prefetching worker)."""
        from ..tasks import PrefetchedDraws

        mode = self.draw_mode()
        if mode == "device":
            return lambda: self._draw(source, rng, target, device=self.device)
        if mode == "prefetch":
            pin = str(self.device).startswith("cuda")
            return PrefetchedDraws(lambda: self._draw(source, rng, target), pin=pin)
        return lambda: self._draw(source, rng, target)

    def _predictive_frames(self, S: np.ndarray, Q: np.ndarray, rng: np.random.Generator):
        """Supports and targets in the frames of the predictive Gaussian of their supports;
        with ``augment="rotate"`` each task is then rotated about the frame's origin (the
        predictive ``N(0, I)`` is kept, a class's direction from it is not)."""
        from ..tasks import rotate_tasks

        centre, _, inverse = predictive_frame(self.tasks.predictive_frame, S)
        S, Q = into_frame(S, centre, inverse), into_frame(Q, centre, inverse)
        if self.tasks.options.augment == "rotate":
            S, Q = rotate_tasks(S, Q, random_state=rng, center="origin")
        return S, Q

    def _validation_tasks(self, source: Any, rng: np.random.Generator) -> list:
        """Fixed validation batches at up to 3 support sizes spread over the range."""
        sizes = validation_sizes(self.tasks.options.support_range, source)
        return [self._draw(source, rng, m=int(m)) for m in sizes]

    def _task_scale(self, seed: int) -> float:
        """Median support spread of the training tasks, in data units: the scale of a
        one-row support (whose own spread is undefined) under per-task normalisation."""
        hi = self.tasks.options.support_range[1]
        rng = np.random.default_rng(seed)
        S, _ = self._draw(self.tasks.source, rng, m=max(2, hi), normalize=False, context=False)
        _, scale = task_frame(S, 1.0)
        value = float(np.median(scale))
        return value if np.isfinite(value) and value > 1e-12 else 1.0

    def _input_scale(self, seed: int) -> float:
        """Global coordinate scale: RMS spread of targets around their support mean."""
        S, Q = self._draw(self.tasks.source, np.random.default_rng(seed), context=False)
        spread = float(np.sqrt(np.mean((Q - S.mean(axis=1, keepdims=True)) ** 2)))
        if not np.isfinite(spread) or spread > 1e30:
            raise ValueError(
                f"the training data's spread ({spread:.3g}) is too large for float32 training; "
                "rescale the data (e.g. StandardScaler) first."
            )
        return spread if spread > 1e-12 else 1.0

    def _global_frame(self, seed: int) -> tuple[np.ndarray, float]:
        """Mean (d,) and RMS spread of the training rows (support and targets of a batch of
        tasks in data units): the global frame of the network's context token."""
        rng = np.random.default_rng(seed)
        S, Q = self._draw(self.tasks.source, rng, normalize=False, context=False)
        rows = np.concatenate([S.reshape(-1, S.shape[-1]), Q.reshape(-1, Q.shape[-1])])
        mean = rows.mean(axis=0)
        spread = float(np.sqrt(np.mean((rows - mean) ** 2)))
        return mean, spread if np.isfinite(spread) and spread > 1e-12 else 1.0

    # -- network ---------------------------------------------------------------------------
    def _network(self, input_scale: float, seed: int):
        """A freshly initialized network (local generator) on the training device."""
        import torch

        from ..nn.transformer import CrossAttentionVelocity

        p = self.params
        config = {
            "n_features": self.n_features,
            "d_model": p.d_model,
            "n_heads": p.n_heads,
            "n_layers": p.n_layers,
            "mlp_ratio": p.mlp_ratio,
            "exact_head": bool(p.exact_head),
            "sigma_min": float(p.sigma_min),
            "frame_context": self.tasks.options.frame_context,
            "base": "gaussian" if self.tasks.options.predictive else "nw",
            "size_embedding": self.tasks.options.size_embedding,
        }
        if p.path is not None:  # the network's path (the OT default keeps older configs)
            config["path"] = p.path
        model = build_model(CrossAttentionVelocity, config)
        model.reset_parameters(torch.Generator().manual_seed(seed))
        model.input_scale.fill_(input_scale)
        model.output_scale.fill_(float(np.sqrt(input_scale**2 + 1.0)))
        if model.frame_context:
            mean, spread = self._global_frame(seed)
            model.frame_mean.copy_(torch.as_tensor(mean, dtype=model.frame_mean.dtype))
            model.frame_scale.fill_(spread)
        return model.to(self.device)

    def _start(self, seeds: list, warm: WarmStart | None) -> tuple:
        """Network, task generator, noise generator and optimizer state of this fit
        (continued on a warm start)."""
        import torch

        if warm is not None and warm.model.n_features != self.n_features:
            raise ValueError(
                f"warm_start=True but the data have {self.n_features} features and the "
                f"fitted network {warm.model.n_features}; fit with warm_start=False."
            )
        if warm is not None and warm.state is not None:
            state = warm.state
            return warm.model.to(self.device), state["task_rng"], state["generator"], state["state"]
        generator = torch.Generator(device=self.device).manual_seed(seeds[3])
        if warm is not None:  # unpickled: the weights only, with fresh generators and optimizer
            model = warm.model.to(self.device)
        else:
            model = self._network(self._input_scale(seeds[1]), seeds[4])
        return model, np.random.default_rng(seeds[0]), generator, None

    def _forward(self):
        """The callable of the training forward pass (``torch.compile`` on CUDA if asked)."""
        import torch

        p, cuda = self.params, self.device.startswith("cuda")
        if (p.compile or p.mixed_precision) and not cuda:
            warnings.warn(
                "compile and mixed_precision apply on CUDA devices only; ignored on the CPU.",
                UserWarning,
                stacklevel=_FORWARD_STACKLEVEL,
            )
        return torch.compile(self.model) if p.compile and cuda else self.model

    # -- training --------------------------------------------------------------------------
    def train(self):
        """Run the training loop on ``model`` (in place); returns its ``TrainingResult``.

        Returns
        -------
        TrainingResult
            See :func:`skflow.nn.training.train_flow_model`.
        """
        p, source, task_rng = self.params, self.tasks.source, self.task_rng
        predictive = self.tasks.options.predictive
        # a predictive-frame network trains only where held-out data can show that training
        # beats the Gaussian it starts from (on digits' 7 classes it did not: docs/transfer.md)
        max_iter = 0 if predictive and self.validation is None else p.max_iter
        forward = self._forward()  # here: its warning's stack level counts from train
        batches = self.task_batches(source, task_rng, p.target)
        try:
            return self._run_loop(batches, max_iter, forward)
        finally:
            if hasattr(batches, "close"):
                batches.close()

    def _run_loop(self, batches: Any, max_iter: int, forward: Any):
        """:func:`~skflow.nn.training.train_flow_model` on the batches of ``batches()``."""
        from ..nn.training import train_flow_model

        p, predictive = self.params, self.tasks.options.predictive
        result = train_flow_model(
            self.model,
            batches,
            path=self.model.path,  # the network's own path: the loss regresses its field
            max_iter=max_iter,
            learning_rate=float(p.learning_rate),
            weight_decay=float(p.weight_decay),
            warmup=p.warmup,
            lr_schedule=p.lr_schedule,
            clip_grad=p.clip_grad,
            time_sampling=p.time_sampling,
            generator=self.generator,
            device=self.device,
            validation=self.validation,
            validation_interval=p.validation_interval,
            n_iter_no_change=p.patience(self.validation is not None),
            tol=float(p.tol),
            max_time=p.max_time,
            verbose=p.verbose,
            mixed_precision=bool(p.mixed_precision),
            forward=forward,
            target=p.target,
            ema_decay=None if p.ema_decay is None else float(p.ema_decay),
            state=self.state,
            # the untrained predictive-frame model is the chosen Gaussian: a candidate too
            score_initial=predictive,
        )
        self.model.eval()
        return result

    def warm_state(self, result: Any) -> dict:
        """What a warm start of the next fit continues (:attr:`WarmStart.state`): the task
        and noise generators as they stand and the optimizer/EMA state of ``result``.

        Parameters
        ----------
        result : TrainingResult
            What :meth:`train` returned.

        Returns
        -------
        dict
        """
        return {"task_rng": self.task_rng, "generator": self.generator, "state": result.state}
