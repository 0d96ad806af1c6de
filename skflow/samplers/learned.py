"""LearnedFlowSampler: a meta-trained cross-attention velocity field as a scikit-learn estimator."""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._array import as_time, host_to_like, resolve_device, to_numpy
from .._validation import (
    InvalidParameterError,
    boolean,
    check_data,
    check_finite_output,
    check_random_state,
    choice,
    integer,
    optional,
)
from ..threads import limit_threads, map_on_threads, thread_budget
from ._atomic import atomic_fit
from ._base import (
    SAMPLER_CONSTRAINTS,
    Backend,
    BaseFlowSampler,
    PreparedFlow,
    check_path,
    row_items,
)
from ._batch import check_support_batch, is_support_list
from ._fitted import FITTED, fitted_config, legacy_pickle, restore
from ._frame import FrameMap, is_task_source, spread_mask, warn_no_spread
from ._frame import predictive_frame as _predictive_frame
from ._frame import support_bounds as _support_bounds  # the inference half's former names
from ._frame import task_frame as _task_frame
from ._meta_training import (
    TrainingParams,
    TrainingRun,
    WarmStart,
    source_n_features,
    training_tasks,
)
from .options import (
    LEARNED_DEPRECATED_KEYWORDS,
    LEARNED_GROUPS,
    NetworkOptions,
    SolverOptions,
    TrainingOptions,
    flat_learned_params,
    fold_deprecated,
    fold_nested,
    hide_deprecated_keywords,
    learned_params_from_flat,
    network_options,
    solver_options,
    training_options,
)

__all__ = ["LearnedFlowSampler"]


# Queries per forward pass at inference, over all tasks of a batch (bounds the (n, width)
# blocks): 256 tasks x 256 samples is one pass per stage. The (n, m) attention of a head is
# also bounded: queries x support points x heads <= _INFERENCE_SCORES (64 MiB of float32).
_INFERENCE_CHUNK = 65536
_INFERENCE_SCORES = 2**24


def _with_budget(params: TrainingParams, spent: float) -> TrainingParams:
    """``params`` with what is left of its ``max_time`` after ``spent`` seconds of the fit as
    the budget of the training loop (unchanged without ``max_time``)."""
    if params.max_time is None:
        return params
    budget = max(float(params.max_time) - spent, 0.0)
    return TrainingParams(**{**vars(params), "max_time": budget})


def _check_normalize(value: Any, name: str) -> None:
    if not (value in ("auto", "predictive") or isinstance(value, bool | np.bool_)):
        raise InvalidParameterError(
            f"{name} must be 'auto', 'predictive', True or False, got {value!r}."
        )


def _card_estimator(cls: type, params: dict, name: str, folder: Any) -> Any:
    """The unfitted estimator of a card's (flat) parameters, checked as ``fit`` checks them:
    a bad value names the card, not the user's call."""
    from ..exceptions import PriorCardError
    from .prior_store import folder_card

    try:  # a card stores the parameters flat (JSON): grouped here, without a warning
        estimator = cls(**learned_params_from_flat(params))
        estimator._validate_params()
    except (TypeError, ValueError) as exc:
        raise PriorCardError(
            f"model card {folder_card(name, folder)} has an invalid estimator parameter "
            f"(estimator_params or finetune_params): {exc} Fix: restore the card from the "
            "source of the prior, or write it again with LearnedFlowSampler.save_pretrained."
        ) from exc
    return estimator


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning issued by this function's caller at the first
    frame outside skflow (the user's line), whatever path of calls led there."""
    package = str(Path(__file__).resolve().parents[1])
    frame, level = inspect.currentframe().f_back, 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _training():
    """:mod:`skflow.nn.training`, imported when first needed (it imports Torch)."""
    from ..nn import training

    return training


class LearnedFlowSampler(BaseFlowSampler):
    """Meta-trained, support-conditioned flow: a cross-attention transformer velocity field.

    The network (:class:`skflow.nn.transformer.CrossAttentionVelocity`) takes noisy points
    ``x_t``, their times ``t`` and a support set ``S`` and returns a velocity. It is trained
    once, with the flow-matching loss of its path (the OT path by default), over many
    *tasks* (support set plus target points from one distribution), then conditioned on new
    supports in context:
    ``sample(n, support=S_new)`` needs no parameter update. With ``exact_head=True`` (default)
    the frozen exact Nadaraya-Watson field of the support is an input and a residual of the
    network, and the untrained model equals :class:`~skflow.NWFlowSampler`'s field exactly;
    training learns where and how to depart from the plug-in field.

    **Parameter groups.** What is learned: the network (``network``, a
    :class:`~skflow.NetworkOptions`) on the path (``path``, or the OT path of ``sigma_min``);
    its training (``training``, a :class:`~skflow.TrainingOptions`: budget, tasks, optimiser,
    loss, early stopping, mixed precision and compilation) on tasks augmented by ``augment``,
    in the frame of ``normalize``, continued by ``warm_start``; the sampling solver
    (``solver``, the :class:`~skflow.SolverOptions` that :class:`~skflow.NWFlowSampler` takes
    too). *Execution* settings come last: ``device``, ``random_state`` and ``verbose``. All
    but the first two are keyword-only.

    **Former keywords.** The separate keywords of former versions (``d_model=...``,
    ``max_iter=...``, ``n_steps=...``) still work for one release, with a
    :class:`FutureWarning`: they are folded into their group (``set_params`` takes them too,
    and the nested names ``network__d_model``, ``training__max_iter``, ``solver__n_steps``:
    one field of a group, what a ``GridSearchCV`` grid may name). Their current values are
    readable as attributes (``sampler.max_iter``).

    Parameters
    ----------
    network : NetworkOptions or None, default=None
        The architecture of the velocity network; None is ``NetworkOptions()``. Its fields:

        d_model : int, default=64
            Token width of the transformer.
        n_heads : int, default=4
            Attention heads per layer (``d_model`` must be divisible by it).
        n_layers : int, default=2
            Cross-attention blocks.
        mlp_ratio : int, default=2
            Hidden width of the block MLPs in units of ``d_model``.
        exact_head : bool, default=True
            Add the frozen exact NW head (input and gated residual of the output).
        frame_context : bool, default=False
            Let the network see the frame it works in: the support's centre and scale in the
            training data's global standardised frame, the global mean seen from the support
            and ``log m`` enter as a context token (``CrossAttentionVelocity(frame_context=True)``),
            so the model can learn how far to shrink a support toward the training classes and
            how much to trust it as ``m`` grows, which the per-task frame alone erases. Off by
            default: in ``docs/transfer.md`` it buys nothing with the rotation augmentation and
            trades small supports against large ones without it (see the ablation there). An
            architecture choice: a warm start keeps the fitted network's.
        size_embedding : bool or "auto", default="auto"
            Let the network see the support size ``m``: an embedding of ``log m`` and
            ``m^(-1/2)`` is added to every query token (``CrossAttentionVelocity(
            size_embedding=True)``). Attention averages over the support rows, so without it one
            network serves every ``m`` with about the same spread; with it, one network learns
            how far to move from the predictive frame's Gaussian toward the support as ``m``
            grows (the job the Bayes predictive does in closed form). ``"auto"``: on for
            ``fit(X, y)`` when the training supports vary in size, off for ``fit(X)`` and task
            sources (a fixed support size). The shipped prior ``general-16-sized`` is trained
            with it (``docs/pretrained.md``). An architecture choice: a warm start keeps the
            fitted network's.
    sigma_min : float, default=0.01
        Path noise at ``t = 1`` (of the default OT path; the path's own when ``path`` is
        given).
    path : GaussianPath or None, default=None
        The probability path of the network and its training (:mod:`skflow.paths`, e.g.
        ``CosinePath(0.05)``); None is ``OTPath(sigma_min)``. The fitted network keeps it in
        its configuration (a path other than the default cannot be written to a JSON model
        card).
    training : TrainingOptions or None, default=None
        The meta-training; None is ``TrainingOptions()``. Its fields:

        max_iter : int, default=2000
            Training iterations (one batch of tasks each). ``0`` leaves the network untrained:
            with ``exact_head=True`` that is exactly the plug-in NW field.
        max_time : float, optional
            Wall-clock budget of the whole fit in seconds; training stops at ``max_iter`` or
            when what the fit's preparation (the tasks, the network, a predictive frame's
            selection) left of ``max_time`` is spent, whichever comes first. The
            learning-rate schedule follows the iterations only: a run
            that reaches ``max_iter`` first is identical, bit for bit, to the same run without
            ``max_time``; a run stopped by the budget depends on the machine's speed and stops
            before the cosine has decayed to 0.
        batch_tasks : int, default=32
            Tasks per training batch.
        support_size : int, (low, high) or "auto", default="auto"
            Support points per training task. A pair: every training batch draws its support
            size log-uniformly from the integers ``low..high``, so one model serves every ``m``
            of the range (batches are grouped by size: no task is padded or dropped).
            ``"auto"``: ``(2, 50)`` on labelled data, with ``high`` lowered to what the classes
            allow (the 75th percentile of the class sizes minus 2 target rows); 50 for ``fit(X)``
            and task sources. Also the size of ``support_`` after ``fit(X)`` (``high``) and the
            support rows per task of the few-shot :meth:`score` (an int as given; else
            ``min(high, n_rows // 2)``).
        n_targets : int, default=128
            Target points per training task (each with its own noise and time).
        learning_rate : float, default=1e-3
            Peak AdamW learning rate.
        weight_decay : float, default=1e-4
            AdamW weight decay.
        warmup : int, default=100
            Linear warmup iterations.
        lr_schedule : {"cosine", "constant"}, default="cosine"
            Learning rate after warmup: cosine decay to 0 at the end of training, or constant.
        clip_grad : float or None, default=1.0
            Maximal gradient norm (None: no clipping).
        time_sampling : {"uniform", "log-bandwidth"}, default="uniform"
            Law of the training times: uniform on [0, 1], or log-uniform OT bandwidth
            ``h(t) = sigma_t / t`` on ``[sigma_min, 100]`` (more samples at late times).
        target : {"conditional", "exact", "marginal"}, default="conditional"
            Regression target of the training loss. ``"conditional"``: ``x_1 - (1 - sigma_min)
            x_0``, the flow-matching target. ``"exact"``: the population velocity of each task at
            ``x_t``, for task sources that know it (``velocity`` and
            ``sample_tasks(..., return_params=True)``, e.g. ``GaussianMixtureTasks``); a
            ``ValueError`` otherwise. ``"marginal"``: the self-normalized marginal (NW) field at
            ``x_t`` of a reference set of ``4 * n_targets`` target points of the task (its first
            ``n_targets`` are the regression points), as in empirical flow matching. Validation
            always scores the conditional loss.
        ema_decay : float in (0, 1) or None, default=None
            Exponential moving average of the weights, used for sampling and validation (decay
            ``min(ema_decay, (1 + k) / (10 + k))`` after ``k`` steps); None disables it.
        validation_fraction : float in [0, 1) or "auto", default="auto"
            If > 0, fixed validation tasks (``batch_tasks`` per support size, at up to 3 sizes
            of the range) are scored (minus the flow-matching loss, with fixed noise and times)
            every ``validation_interval`` iterations and the weights used for sampling at the
            best check are kept (the EMA weights when ``ema_decay`` is set). Labelled data
            (``fit(X, y)``) hold out this fraction of every class's rows for it; a task source
            draws separate validation tasks (new distributions); ``fit(X)`` uses fresh random
            splits of ``X`` (monitoring only). ``"auto"``: with labelled data of at least 10
            classes, a fifth of the classes (at least 2) is held out, never trained on
            (``validation_classes_``): new classes are what a user's test holds; with fewer
            classes, a fifth of every class's rows; ``fit(X)`` and task sources: no
            validation.
        n_iter_no_change : int, "auto" or None, default="auto"
            Stop when the validation score (or, without validation, minus the training loss
            averaged over an interval) has not improved by ``tol`` for this many checks.
            ``"auto"``: 10 with validation, None (no early stopping) without.
        tol : float, default=1e-4
            Improvement threshold of early stopping.
        validation_interval : int, default=50
            Iterations between validation checks and log lines.
        mixed_precision : bool, default=False
            bfloat16 autocast of the learned branch during training (CUDA only; the exact head
            always runs in float32 or better).
        compile : bool, default=False
            Train through ``torch.compile`` (CUDA only).
    augment : {"auto", "rotate", "recentre"} or None, default="auto"
        Task augmentation (:mod:`skflow.tasks`). ``"rotate"``: every training task is mapped
        by its own uniformly random orthogonal matrix about its support mean
        (:class:`~skflow.tasks.RotatedTasks`), support and targets alike, so a few classes
        give endless tasks with their shapes and without their orientation. ``"recentre"``:
        every batch's tasks are moved to new centres with the law of the batch's centres
        (:class:`~skflow.tasks.RecentredTasks`), shapes and orientation kept: the class
        locations cannot be memorised (made for ``frame_context=True``). ``"auto"``:
        ``"rotate"`` for ``fit(X, y)``, None otherwise.
    normalize : bool, "auto" or "predictive", default="auto"
        The frame the flow runs in. ``"predictive"`` (``fit(X, y)`` only): the frame of each
        support is the Gaussian predictive law of the best Gaussian arm of
        :mod:`skflow.samplers.classical` (Ledoit-Wolf, pooled or empirical Bayes, chosen on
        class-grouped folds of the training classes at five support sizes spread over
        ``support_range_``, a support using the choice for the nearest size;
        ``predictive_frame_``): centred on its mean and whitened by its covariance, so the
        frame keeps what the training classes say about where a class lies and how it is
        shaped. The untrained network is that Gaussian (``CrossAttentionVelocity(
        base="gaussian")``), its gated exact head the support's NW field in that frame, and
        training (with the support size as an input, ``size_embedding``) learns how far to
        move from the one toward the other as ``m`` grows. ``augment="rotate"`` (and
        ``"auto"``) rotates each task about the frame's origin, where the predictive law is
        ``N(0, I)``: the network cannot learn the training classes' directions from it, only
        what holds in every direction. The untrained model (that Gaussian) is an
        early-stopping candidate, kept when no trained weights have a lower validation loss;
        with ``validation_fraction=0`` the network is not trained at all (``n_iter_ == 0``):
        nothing could show that training beats it.
        True: each support's own frame (centred on its mean, divided by its per-coordinate
        standard deviation), from standard noise there, the samples mapped back, so a model is
        not tied to its training data's units. False: none (with ``exact_head=True`` the
        untrained model is exactly :class:`~skflow.NWFlowSampler`). ``velocity`` is always the
        velocity of the flow in data units.
        ``"auto"``: for ``fit(X, y)`` on 10 classes or more, ``"predictive"`` where its
        Gaussian predicts held-out training classes at least as well as the kernel plug-in
        (``NWFlowSampler()``) does,
        on the same class-grouped folds and support sizes (geometric mean of the few-shot MMD²
        ratio at most 1), else True: classes that are each a law of their own (e.g. Gaussian
        mixtures) are served better in each support's own frame (``docs/transfer.md``). True
        on fewer than 10 classes: no held-out classes validate what the predictive frame
        borrows from the training classes' law, and on digits with one digit held out (9
        training classes) it measured 15-19 % worse at ``m = 5`` and 10 than each support's
        own frame. True with ``frame_context=True``, whose context token describes the
        support's own frame.
        False for ``fit(X)`` and task sources. Either way one network, which sees the support
        size. A warm start keeps the frame its network was trained in (a shipped prior: each
        support's own).
    warm_start : bool, default=False
        If True and the estimator is fitted, ``fit`` continues training the fitted network
        for ``max_iter`` more iterations: from its last training weights, AdamW moments and
        EMA, with the task, noise and time streams continuing, without a second warmup;
        ``n_iter_``, ``loss_curve_`` and ``training_time_`` accumulate. The data must have the
        same number of features; the ``network`` options are ignored. A warm
        start after unpickling continues from ``model_``'s weights with a fresh optimizer.
    solver : {"euler", "midpoint", "heun", "rk4", "dopri5"} or SolverOptions, default="heun"
        The ODE solve of sampling: a method name (with the default settings) or a
        :class:`~skflow.SolverOptions` (``method``, ``n_steps`` of the fixed-step methods,
        ``rtol`` and ``atol`` of ``"dopri5"``, and ``time_tolerance``: how :meth:`velocity`
        and :meth:`attention_weights` treat times outside [0, 1]. Within this distance they
        are evaluated at the nearest end, the learned field frozen there (continuous, so the
        flow on [0, 1] is unchanged). The default ``inf`` accepts every finite time, so
        third-party adaptive solvers (torchdiffeq's ``dopri5``, ``flow_matching``'s
        ``ODESolver``), which probe stages a whole step past ``t = 1``, work with no wrapper;
        a finite value refuses farther times with a ``ValueError`` naming the value).
    device : {"cpu", "cuda", "auto"} or "cuda:N", default="cpu"
        Torch device of training and sampling. A model unpickled where the requested CUDA
        device is missing runs on the CPU (with a warning).
    random_state : int, RandomState instance or None, default=None
        Seeds the weights, the training tasks, noise and times (through local generators;
        no global seed is touched) and the sampling noise. Training on the CPU runs on one
        Torch and BLAS thread (:func:`skflow.threads.limit_threads`): a float32 reduction
        splits its work by the thread count, and hundreds of gradient steps amplify its last
        bits, so this is what makes a seed give the same model on any machine and thread
        count (a ``max_time`` stop excepted).
    verbose : int, default=0
        When > 0, show a ``tqdm`` progress bar of training and print the training loss (and
        validation loss) every ``validation_interval`` iterations.

    Attributes
    ----------
    model_ : CrossAttentionVelocity
        The network used for sampling (in eval mode): with validation, the weights of the
        best check; else the final ones; in both cases the EMA weights when ``ema_decay``
        is set.
    support_ : ndarray of shape (k, n_features) or None
        Default support of :meth:`sample`: after ``fit(X)``, ``X`` itself when it has at most
        ``support_size`` rows, else a random subset of ``support_size`` rows (seeded by
        ``random_state``). None after ``fit(X, y)`` or ``fit(task_source)``: pass ``support=``.
    n_features_in_ : int
        Number of features.
    n_iter_ : int
        Training iterations run.
    loss_curve_ : list of float
        Training loss of every iteration.
    validation_scores_ : list of float or None
        Minus the validation loss at every check (None without validation).
    training_time_ : float
        Wall-clock seconds of the training loop.
    best_validation_score_ : float or None
        Best validation score (improvements count only above ``tol``); its weights are kept.
    support_range_ : tuple of int
        ``(low, high)`` support sizes of the training tasks.
    augment_ : str or None
        The augmentation used.
    predictive_frame_ : BestClassicalSampler or None
        With ``normalize="predictive"``: the fitted choice among the Gaussian arms, per
        support size (``support_sizes_``, ``best_estimators_``), whose predictive law is each
        support's frame; None otherwise.
    normalize_ : bool
        Whether the flow runs in each support's frame (per-task normalisation). Then
        ``a S + b`` samples ``a`` times the samples of ``S`` plus ``b``, and a support
        without spread (one row, or identical rows) has no scale: its samples are copies of
        its row, with a :class:`~skflow.exceptions.MemorizationWarning` (docs/robustness.md).
    frame_context_ : bool
        Whether the network sees that frame (``frame_context``).
    task_scale_ : float
        Median support spread of the training tasks: the scale of a one-row training task
        under per-task normalisation (1.0 without it).
    validation_classes_ : ndarray or None
        Classes held out for validation by ``validation_fraction="auto"`` (labelled data).

    See Also
    --------
    NWFlowSampler : the exact, zero-parameter plug-in field.

    Notes
    -----
    ``fit`` accepts three kinds of training data. ``fit(X, y)``: every label of ``y`` is a
    task (:class:`skflow.tasks.FewShotClassTasks`: a class of ``k`` rows serves the support
    sizes up to ``k - 2``; its targets are drawn with replacement among its non-support
    rows, so a support row is never a target; only classes with fewer than 4 rows are left
    out, with a warning). Made for scarce data: classes of 10-100 rows.
    ``fit(X)``: ``X`` is one task; training tasks are random support/query splits of it.
    ``fit(task_source)``: any object with ``sample_tasks(n_tasks, n_support, n_query,
    random_state)`` (a meta-distribution of :mod:`skflow.tasks`) streams fresh tasks.

    Coordinates fed to the network are centred on each support's mean and divided by a
    global scale estimated from the training tasks (``model_.input_scale``); the flow itself
    runs in the original coordinates. See ``docs/learned.md`` for the design.

    Examples
    --------
    >>> from skflow import NetworkOptions, SolverOptions, TrainingOptions
    >>> from skflow.samplers.learned import LearnedFlowSampler
    >>> from skflow.tasks import GaussianMixtureTasks
    >>> tasks = GaussianMixtureTasks(n_features=2)
    >>> lf = LearnedFlowSampler(
    ...     NetworkOptions(d_model=16, n_layers=1),
    ...     training=TrainingOptions(max_iter=5, batch_tasks=4, support_size=10, n_targets=16),
    ...     solver=SolverOptions(n_steps=10),
    ...     random_state=0,
    ... )
    >>> lf = lf.fit(tasks)
    >>> S, _ = tasks.sample_task(10, 0, random_state=1)
    >>> lf.sample(3, support=S, random_state=0).shape
    (3, 2)
    >>> lf.attention_weights(S[:4], 0.5, support=S).shape  # (n_layers, n_heads, n, m)
    (1, 4, 4, 10)
    """

    @hide_deprecated_keywords
    def __init__(
        self,
        network: NetworkOptions | None = None,
        sigma_min: float = 0.01,
        *,
        path: Any = None,
        training: TrainingOptions | None = None,
        augment: str | None = "auto",
        normalize: Any = "auto",
        warm_start: bool = False,
        solver: str | SolverOptions = "heun",
        device: str = "cpu",
        random_state: Any = None,
        verbose: int = 0,
        **deprecated: Any,
    ):
        self.network = network
        self.sigma_min = sigma_min
        self.path = path
        self.training = training
        self.augment = augment
        self.normalize = normalize
        self.warm_start = warm_start
        self.solver = solver
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        # the former keywords, for one release: folded into their group, so that
        # get_params and clone keep the user's values under the new spelling
        groups = {name: getattr(self, name) for name in LEARNED_GROUPS}
        updates = fold_deprecated(
            groups, deprecated, type(self).__name__, keywords=LEARNED_DEPRECATED_KEYWORDS
        )
        for name, value in updates.items():
            setattr(self, name, value)

    def set_params(self, **params: Any) -> LearnedFlowSampler:
        """Set parameters (scikit-learn's ``set_params``).

        Besides the parameters, the nested names of the groups' fields
        (``network__d_model``, ``training__max_iter``, ``solver__n_steps``: what a
        ``GridSearchCV`` grid may name) set one field of a group, and the former keywords
        (``max_iter``, ``n_steps``, ...) are folded into their group with a ``FutureWarning``.

        Returns
        -------
        self : LearnedFlowSampler
        """
        old = {k: params.pop(k) for k in list(params) if k in LEARNED_DEPRECATED_KEYWORDS}
        nested = {
            k: params.pop(k)
            for k in list(params)
            if "__" in k and k.split("__")[0] in LEARNED_GROUPS
        }
        super().set_params(**params)
        owner = type(self).__name__
        groups = {name: getattr(self, name) for name in LEARNED_GROUPS}
        updates = fold_nested(groups, nested, owner)
        groups.update(updates)
        updates.update(fold_deprecated(groups, old, owner, keywords=LEARNED_DEPRECATED_KEYWORDS))
        for name, value in updates.items():
            setattr(self, name, value)
        return self

    # -- shipped priors --------------------------------------------------------------------
    @staticmethod
    def pretrained_models(folder: str | os.PathLike | None = None) -> dict[str, dict]:
        """The priors shipped with skflow: ``{name: model card}``.

        A card holds the network and estimator parameters, the SHA-256 of the weights, and
        the training command, budget, machine and curves (see ``docs/pretrained.md``).

        Parameters
        ----------
        folder : str or path-like, optional
            List the priors of this folder instead, e.g. the ``--out`` folder of
            ``python -m skflow.priors NAME --out DIR``.

        Examples
        --------
        >>> from skflow import LearnedFlowSampler
        >>> "general-16" in LearnedFlowSampler.pretrained_models()
        True
        """
        from .prior_store import pretrained_cards

        return pretrained_cards(folder)

    @classmethod
    def from_pretrained(
        cls, name: str, *, n_features: int | None = None, folder: str | os.PathLike | None = None
    ) -> LearnedFlowSampler:
        """A fitted sampler with the weights of a shipped prior: no training, no download.

        Parameters
        ----------
        name : str
            A key of :meth:`pretrained_models`, e.g. ``"general-16"``.
        n_features : int, optional
            Features of the data, at most the prior's width; default the width. A prior
            trained on tasks of 1 to ``width`` features serves ``d < width`` through the
            network restricted to the first ``d`` coordinates
            (:meth:`~skflow.nn.transformer.CrossAttentionVelocity.restrict_features`: exactly
            the zero-padded network). The width is fixed at load, as ``n_features_in_`` is
            for every fitted scikit-learn estimator: a support of another width is refused
            with an error that names ``from_pretrained(name, n_features=d)``, or, above the
            prior's width, the limit and how to reduce the data (PCA).
        folder : str or path-like, optional
            Load the prior from this folder instead of the shipped ones: a prior you trained
            with ``python -m skflow.priors NAME --out DIR`` (its ``NAME.json`` card and
            ``NAME.npz`` weights). The card is checked against its schema and the weights
            against the card's SHA-256: that detects a damaged file or weights that do not
            belong to the card, not who wrote them (whoever can replace the weights can
            rewrite the card), so load priors only from sources you trust. Other files in
            the folder are not read.

        Returns
        -------
        sampler : LearnedFlowSampler
            Fitted, with per-task normalisation: ``sample(n, support=S)``, ``velocity``,
            ``attention_weights``, ``score`` and pickling work at once. Its parameters are
            the card's fine-tuning parameters (``warm_start=True``, ``normalize="auto"``):
            ``fit(X, y)`` or ``fit(task_source)`` continues training the prior on your data,
            in its own frame (each support's). A support of more or fewer rows than the
            card's ``support_range_`` (the sizes it was trained on) issues a
            :class:`~skflow.exceptions.SupportSizeWarning`.

        Raises
        ------
        InvalidParameterError
            An unknown ``name`` (the message lists the known ones), a name with a folder in
            it (``"../x"``, ``"/x"``, ``""``), or ``n_features`` above the prior's width.
        PriorCardError
            ``NAME.json`` is not a model card, or a field is missing, mistyped, not finite
            or not an allowed value (the message names the file and the field).
        ValueError
            The weights' SHA-256 differs from the card's.

        Examples
        --------
        >>> import numpy as np
        >>> from skflow import LearnedFlowSampler
        >>> prior = LearnedFlowSampler.from_pretrained("general-16", n_features=3)
        >>> S = np.random.default_rng(0).normal(size=(10, 3))
        >>> prior.sample(5, support=S, random_state=0).shape
        (5, 3)
        """
        from .prior_store import load_prior

        params, config, state = load_prior(name, n_features, folder)
        return restore(_card_estimator(cls, params, name, folder), config, state)

    def save_pretrained(
        self,
        name: str,
        folder: str | os.PathLike,
        *,
        training: dict | None = None,
        finetune_params: dict | None = None,
    ) -> Path:
        """Write this fitted sampler as a prior that :meth:`from_pretrained` loads.

        Two files in ``folder``: the weights ``NAME.npz`` (float32) and the model card
        ``NAME.json`` (architecture, fitted attributes, estimator parameters, SHA-256 of the
        weights, the training record). The record of the training run (loss curves, default
        support, held-out classes) is left out of the card; ``training`` describes the run
        instead. ``python -m skflow.priors NAME`` writes the shipped priors this way.

        Parameters
        ----------
        name : str
            File stem of the prior: a plain name (a name with a path separator, ``..``,
            an absolute path or an empty name is refused, so nothing is written outside
            ``folder``).
        folder : str or path-like
            Destination folder (created if needed).
        training : dict, optional
            What the card says of the training run (command, wall time, machine, curves ...).
        finetune_params : dict, optional
            Parameters that :meth:`from_pretrained` sets over this sampler's, e.g.
            ``{"warm_start": True}`` so that ``fit`` fine-tunes the loaded prior. Groups
            (``training=TrainingOptions(...)``) are written in the card's flat form, field
            by field.

        Returns
        -------
        card_path : Path
            The model card.

        Examples
        --------
        >>> import tempfile
        >>> import numpy as np
        >>> from skflow import LearnedFlowSampler
        >>> prior = LearnedFlowSampler.from_pretrained("general-16", n_features=2)
        >>> S = np.random.default_rng(0).normal(size=(10, 2))
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     card = prior.save_pretrained("mine", folder, finetune_params={"warm_start": True})
        ...     same = LearnedFlowSampler.from_pretrained("mine", folder=folder)
        ...     equal = np.array_equal(same.sample(3, support=S, random_state=0),
        ...                            prior.sample(3, support=S, random_state=0))
        >>> card.name, equal
        ('mine.json', True)
        """
        from .prior_store import write_prior

        check_is_fitted(self, "model_")
        config, state = fitted_config(self, run_record=False)
        # the card's flat form (JSON), which from_pretrained groups again
        params = flat_learned_params(self.get_params(deep=False))
        finetune = flat_learned_params(dict(finetune_params or {}))
        return write_prior(name, folder, config, state, params, dict(training or {}), finetune)

    # -- presets ---------------------------------------------------------------------------
    @classmethod
    def paper_config(cls) -> dict:
        """Parameters of the paper's models (GPU scale): ``LearnedFlowSampler(**cfg)``.

        d_model 128, 4 heads, 3 layers, MLP ratio 4, 256 tasks x 256 targets per batch, m = 50,
        AdamW 1e-4 (weight decay 1e-5) with 1000 warmup steps then constant, 100k steps,
        gradient clipping 1.0, Euler with 100 steps. Add ``device="cuda"`` (and optionally
        ``training__mixed_precision=True`` through ``set_params``) to run it.

        Examples
        --------
        >>> cfg = LearnedFlowSampler.paper_config()
        >>> LearnedFlowSampler(**cfg).network.d_model
        128
        """
        return {
            "network": NetworkOptions(
                d_model=128, n_heads=4, n_layers=3, mlp_ratio=4, exact_head=True
            ),
            "sigma_min": 0.01,
            "training": TrainingOptions(
                max_iter=100_000,
                batch_tasks=256,
                support_size=50,
                n_targets=256,
                learning_rate=1e-4,
                weight_decay=1e-5,
                warmup=1000,
                lr_schedule="constant",
                clip_grad=1.0,
                time_sampling="uniform",
            ),
            "solver": SolverOptions("euler", n_steps=100),
        }

    # -- validation ------------------------------------------------------------------------
    _parameter_constraints = {
        "network": network_options,
        "sigma_min": SAMPLER_CONSTRAINTS["sigma_min"],
        "path": check_path,
        "training": training_options,
        "augment": optional(choice(("auto", "rotate", "recentre"))),
        "normalize": _check_normalize,
        "warm_start": boolean(),
        "solver": solver_options,
        "device": SAMPLER_CONSTRAINTS["device"],
        "random_state": SAMPLER_CONSTRAINTS["random_state"],
        "verbose": integer(minimum=None),
    }
    _time_tolerance_spelling = "solver=SolverOptions(time_tolerance=inf) (the default)"

    def _check_params(self) -> None:
        if self.d_model % self.n_heads:
            raise InvalidParameterError(
                f"d_model={self.d_model} must be divisible by n_heads={self.n_heads} "
                "(fields of network)."
            )

    # -- the groups, resolved: the one place their effective values are read ---------------
    def _options(self, group: str) -> Any:
        """The option object of ``group`` (``"network"``, ``"training"`` or ``"solver"``)."""
        return _RESOLVE[group](getattr(self, group), group)

    def _solver_options(self) -> SolverOptions:
        return self._options("solver")

    def _train_device(self) -> str:
        import torch

        device = resolve_device(self.device)
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} but CUDA is not available.")
        return device

    def _inference_device(self) -> str:
        import torch

        device = resolve_device(self.device)
        if device.startswith("cuda") and not torch.cuda.is_available():
            warnings.warn(
                f"device={self.device!r} is not available here; running on the CPU.",
                UserWarning,
                stacklevel=3,
            )
            return "cpu"
        return device

    # -- fitting ---------------------------------------------------------------------------
    def _check_training_data(self, X: Any, y: Any) -> tuple[Any, np.ndarray | None, int]:
        """``(X, y, n_features)`` of ``fit``, validated: a task source as given, or arrays
        (``validate_data`` sets ``n_features_in_`` and ``feature_names_in_``; the fit's guard
        puts them back if it fails)."""
        if is_task_source(X):
            if y is not None:
                raise ValueError("y must be None when fitting on a task source.")
            return X, None, source_n_features(X)
        X = check_data(validate_data, self, X, dtype=[np.float64, np.float32], ensure_min_samples=1)
        if y is None:
            if X.shape[0] < 2:
                raise ValueError(
                    f"fit(X) needs at least 2 samples (1 support and 1 target row), got "
                    f"{X.shape[0]} sample."
                )
            return X, None, X.shape[1]
        y = check_array(y, ensure_2d=False, dtype=None, input_name="y")
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D task labels, got shape {y.shape}.")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows.")
        if X.shape[0] < 4:
            n = X.shape[0]
            raise ValueError(
                f"fit(X, y) needs a class of at least 4 samples (2 support and 2 target rows), "
                f"got {n} sample{'s' if n > 1 else ''}."
            )
        classes = np.unique(y)
        if classes.size < 2:  # one task: nothing to transfer, no class to validate on
            raise ValueError(
                f"fit(X, y) got a single class ({classes[0]!r}): every label is one task, so "
                "there is nothing to meta-train across. Use fit(X) to train on one data set, "
                "or pass labels of at least 2 classes."
            )
        return X, y, X.shape[1]

    def _warm_start(self) -> WarmStart | None:
        """What ``fit`` continues with ``warm_start=True`` on a fitted estimator, else None.

        A copy: the fit trains a deep copy of the fitted network and of its generators and
        optimizer state, swapped in by :meth:`_store` on success, so that a fit that raises
        or is interrupted leaves the fitted ones untouched."""
        if not (self.warm_start and hasattr(self, "model_")):
            return None
        frame = "support" if getattr(self, "normalize_", True) else "none"
        if self._has_predictive_frame():
            frame = "predictive"
        model, state = copy.deepcopy((self.model_, getattr(self, "_warm", None)))
        return WarmStart(model, getattr(self, "task_scale_", None), state, frame)

    def _store(
        self,
        run: TrainingRun,
        result: Any,
        warm: bool,
        prior: tuple | None = None,
        n_features: int | None = None,
    ) -> None:
        """The fitted attributes of a training run (accumulated on a warm start), set by
        :func:`~skflow.samplers._fitted.restore` like those of a prior or a pickle;
        ``prior``: the ``(name, width)`` of the shipped prior the fit started from;
        ``n_features``: the width of the training data (default: ``n_features_in_``)."""
        tasks = run.tasks
        scores = result.validation_scores if run.validation is not None else None
        fitted = {
            "support_range_": tasks.options.support_range,
            "augment_": tasks.options.augment,
            "normalize_": tasks.options.normalize,
            "predictive_frame_": tasks.predictive_frame,
            "task_scale_": run.task_scale,
            "support_": tasks.default_support,
            "best_validation_score_": result.best_validation_score,
            "validation_classes_": tasks.validation_classes
            if tasks.labelled
            else getattr(self, "validation_classes_", None),
            "n_iter_": result.n_iter,
            "loss_curve_": result.loss_curve,
            "training_time_": result.elapsed,
            "validation_scores_": scores,
            "n_features_in_": self.n_features_in_ if n_features is None else n_features,
        }
        if warm:
            fitted["n_iter_"] += self.n_iter_
            fitted["loss_curve_"] = self.loss_curve_ + result.loss_curve
            fitted["training_time_"] += self.training_time_
            if scores is not None and self.validation_scores_ is not None:
                fitted["validation_scores_"] = self.validation_scores_ + scores
        config = {"network": dict(run.model.config), "fitted": fitted, "prior": prior}
        restore(self, config, run.model.state_dict())
        self._warm = run.warm_state(result)  # generators and optimizer: never pickled

    @atomic_fit
    def fit(self, X: Any, y: Any = None) -> LearnedFlowSampler:
        """Meta-train the velocity network.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or task source
            Training rows (with ``y``: rows of many tasks; without: one task), or an object
            with ``sample_tasks`` (a meta-distribution, e.g. ``GaussianMixtureTasks``).
        y : array-like of shape (n_samples,), optional
            Task labels: every label is one task (at least 2 classes; any hashable labels,
            e.g. strings). A single class raises ``ValueError``: use ``fit(X)`` for one
            data set.

        Returns
        -------
        self : LearnedFlowSampler

        Notes
        -----
        A fit that raises or is interrupted (``KeyboardInterrupt`` too) leaves the estimator
        as it was: fitted, the same weights, ``n_iter_`` and samples (a warm start trains a
        copy of the network and swaps it in at the end); unfitted, ``NotFittedError``.
        """
        start = time.perf_counter()  # max_time bounds the whole fit
        self._validate_params()
        device = self._train_device()
        rng = check_random_state(self.random_state)
        X, y, n_features = self._check_training_data(X, y)
        params = TrainingParams.of(self)  # the groups' effective values, flat
        # one thread on the CPU: the same seed gives the same model whatever the thread count
        with limit_threads(1) if device.split(":")[0] == "cpu" else contextlib.nullcontext():
            warm = self._warm_start()
            frame = None if warm is None else warm.frame
            tasks = training_tasks(params, X, y, rng, frame)  # the "auto" options resolved
            run = TrainingRun(params, tasks, n_features, device, rng, warm)
            run.params = _with_budget(params, time.perf_counter() - start)
            result = run.train()
            prior = getattr(self, "_prior", None) if warm is not None else None
            self._store(run, result, warm is not None, prior, n_features)
        if is_task_source(X):  # no column names: those of an earlier fit on a frame go
            self.__dict__.pop("feature_names_in_", None)
        return self

    # -- support and backend ---------------------------------------------------------------
    def _check_support(self, support: Any) -> np.ndarray:
        if support is None:
            if self.support_ is None:
                raise ValueError(
                    f"{type(self).__name__} was fitted on labelled tasks or a task source and "
                    "has no default support; pass support=array of shape (m, n_features)."
                )
            return self.support_
        shape = getattr(support, "shape", None)
        if shape is not None and len(shape) == 2 and shape[0] == 0:
            raise ValueError("support is empty: at least one support point is required.")
        self._check_prior_width(support)
        self._warn_support_size(support)
        return super()._check_support(support)

    def _warn_support_size(self, support: Any) -> None:
        """A :class:`~skflow.exceptions.SupportSizeWarning` when a prior loaded by
        :meth:`from_pretrained` gets a support (m, d) or batch (B, m, d) of a size outside
        its card's ``support_range_``: sizes it was never trained on."""
        from ..exceptions import SupportSizeWarning

        shape = getattr(support, "shape", None)
        if getattr(self, "_prior", None) is None or shape is None or len(shape) not in (2, 3):
            return
        low, high = self.support_range_
        m = int(shape[-2])
        if m == 0 or low <= m <= high:
            return
        warnings.warn(
            f"support has {m} rows, but the prior {self._prior[0]!r} was trained on supports "
            f"of {low} to {high} rows (support_range_ of its model card): its samples for "
            f"{m} rows are untested. Fine-tune it on your data (prior.fit(X, y)), or train a "
            "sampler for them: LearnedFlowSampler().fit(X, y).",
            SupportSizeWarning,
            stacklevel=_caller_level(),
        )

    def _check_prior_width(self, support: Any) -> None:
        """A support (m, d) or batch (B, m, d) whose width differs from that of a prior loaded
        by :meth:`from_pretrained`: an error that says how to load the prior for ``d``, or,
        above the prior's width, its limit and how to reduce the data."""
        prior = getattr(self, "_prior", None)
        shape = getattr(support, "shape", None)
        if prior is None or shape is None or len(shape) not in (2, 3):
            return
        name, width = prior
        d = int(shape[-1])
        if d == self.n_features_in_ or d == 0:
            return  # an empty support gets the usual message
        head = (
            f"support has {d} features, but this {type(self).__name__} (the prior {name!r} "
            f"loaded with n_features={self.n_features_in_}) is expecting "
            f"{self.n_features_in_} features as input"
        )
        if d > width:
            raise ValueError(
                f"{head}; the prior {name!r} serves at most {width} features: reduce the data "
                f"first, e.g. sklearn.decomposition.PCA(n_components={width})."
            )
        raise ValueError(
            f"{head}; it serves any 1 <= d <= {width}: load it for your data with "
            f"LearnedFlowSampler.from_pretrained({name!r}, n_features={d})."
        )

    def _supports(self, support: Any) -> tuple[Any, Any, int | None]:
        self._check_prior_width(support)  # a (B, m, d) batch skips _check_support
        if getattr(support, "ndim", None) == 3:
            self._warn_support_size(support)
        return super()._supports(support)

    def _backend(self) -> Backend:
        """Torch on the inference device (the CPU, with a warning, when CUDA is missing)."""
        return Backend(self._inference_device())

    def _model(self, device: str):
        """The network on ``device`` (moved there once)."""
        model = self.model_
        if next(model.parameters()).device.type != device.split(":")[0]:
            model.to(device)
        return model

    def _support_frame(self, support) -> FrameMap:
        """The frame of supports (B, m, d): predictive, the support's own, or none."""
        if self._has_predictive_frame():  # the frame of a Gaussian predictive
            centre, factor, inverse = self._predictive_frame(support)
            return FrameMap(centre, factor=factor, inverse=inverse)
        if getattr(self, "normalize_", False):  # the network works in each support's frame
            # scale 0 without spread: the frame collapses onto the row (copies, issue 63)
            centre, scale = _task_frame(support, 0.0)
            return FrameMap(centre, scale=scale)
        return FrameMap()

    def _prepare_support(self, model, support) -> tuple:
        """``(network support, frame)`` of supports (B, m, d): the support as the network reads
        it (in its frame, with the frame's columns under ``frame_context``) and the
        :class:`FrameMap`; computed once per flow, reused at every solver step."""
        frame = self._support_frame(support)
        inside = frame.into(support)
        if getattr(model, "frame_context", False):  # ... and the network sees that frame
            columns = None
            if frame.scale is not None:  # without spread: the training tasks' scale
                columns = (frame.centre, frame.scale + (frame.scale == 0) * self.task_scale_)
            inside = model.with_frame(inside, *(columns or _task_frame(support, self.task_scale_)))
        return inside, frame

    def _predict(self, model, x, support, t, *, prepared=None, return_attention=False):
        """``model``'s output for torch ``x`` (n, d) or (B, n, d), ``support`` (m, d) or
        (B, m, d) and ``t`` a float or per-query times of shape (n,) or (B, n); ``prepared``:
        :meth:`_prepare_support` of the (batched) support, computed here when None."""
        import torch

        batched = x.ndim == 3
        if not batched:
            x, support = x[None], support[None]
        inside, frame = self._prepare_support(model, support) if prepared is None else prepared
        x = frame.into(x)
        t = as_time(t, x)
        if not isinstance(t, float):
            t = t.to(x.dtype).reshape(x.shape[:2])
        heads = int(getattr(self, "n_heads", 1))
        rows = min(_INFERENCE_CHUNK, _INFERENCE_SCORES // max(1, inside.shape[-2] * heads))
        step = max(1, rows // x.shape[0])
        out, attn = [], []
        with torch.no_grad():
            for start in range(0, x.shape[1], step):
                stop = min(x.shape[1], start + step)
                tt = t if isinstance(t, float) else t[:, start:stop]
                res = model(x[:, start:stop], inside, tt, return_attention=return_attention)
                if return_attention:
                    out.append(res[0])
                    attn.append(res[1])
                else:
                    out.append(res)
        v = frame.velocity_out(torch.cat(out, dim=1))  # the frame's flow, back in data units
        v = v if batched else v[0]
        if not return_attention:
            return v
        a = torch.cat(attn, dim=-2)  # (n_layers, B, n_heads, n, m)
        return v, (a if batched else a[:, 0])

    def _has_predictive_frame(self) -> bool:
        return getattr(self, "predictive_frame_", None) is not None

    def _predictive_frame(self, support: Any) -> tuple:
        """Centre, factor and inverse factor of supports (B, m, d), on their device."""
        S = np.asarray(to_numpy(support), dtype=np.float64)
        return tuple(host_to_like(a, support) for a in _predictive_frame(self.predictive_frame_, S))

    def _start_points(self, x0: np.ndarray, support: np.ndarray) -> np.ndarray:
        """Starting points of the flow: the noise, or with a per-task frame the noise mapped
        into it (``centre + scale x0`` or ``centre + L x0``; support (m, d) or (B, m, d))."""
        if not getattr(self, "normalize_", False):
            return x0
        self._refuse_frameless(support)
        S = np.asarray(support, dtype=np.float64)
        frame = self._support_frame(S if S.ndim == 3 else S[None])
        if frame.scale is not None:  # without spread: copies of the row, said so (issue 63)
            for b in np.flatnonzero(np.reshape(frame.scale, -1) == 0):
                warn_no_spread(type(self).__name__, int(b) if S.ndim == 3 else None)
        start = frame.centre + frame.velocity_out(x0 if x0.ndim == 3 else x0[None])
        return start.reshape(x0.shape).astype(x0.dtype, copy=False)

    def _refuse_frameless(self, support: Any) -> None:
        """With per-task normalisation, refuse a support (m, d) or batch (B, m, d) whose
        spread float64 cannot resolve at its offset (:func:`._frame.spread_mask`). One
        without any spread (one row, or identical rows) is taken: its frame has the scale 0,
        so the flow stays on the row (copies; issue 34 saw samples 39 away for
        ``np.ones((10, 4))`` when it had a fallback scale) and the velocity is 0."""
        if not getattr(self, "normalize_", False) or self._has_predictive_frame():
            return
        S = np.asarray(support, dtype=np.float64)
        spread_mask(S if S.ndim == 3 else S[None], type(self).__name__)

    def _task_support_size(self, n_rows: int, label: Any) -> int:
        from ._base import few_shot_support_size

        if isinstance(self.support_size, int | np.integer):
            return few_shot_support_size(self.support_size, n_rows, label)
        hi = getattr(self, "support_range_", _support_bounds(self.support_size))[1]
        return few_shot_support_size(max(1, min(hi, n_rows // 2)), n_rows, label)

    def _prepare_flow(self, support: Any, backend: Backend) -> PreparedFlow:
        model = self._model(backend.device)
        # the support's frame and network input once per flow, not at every solver step
        prepared = self._prepare_support(model, support if support.ndim == 3 else support[None])
        return PreparedFlow(lambda t, x: self._predict(model, x, support, t, prepared=prepared))

    def _network_call(self, X: Any, t: Any, support: Any):
        """Checks of a public call on the network, then ``(model, backend, X, support, t)``
        with ``X`` and the support on the backend, in one dtype."""
        self._begin()
        X, support, t = self._field_inputs(X, t, support)
        if support.ndim == 3:  # a batch skips _check_support
            self._warn_support_size(support)
        self._refuse_frameless(support)
        if X.ndim == 2:  # a batch comes back checked and in one dtype
            if t.ndim == 1 and t.shape[0] != X.shape[0]:
                raise ValueError(
                    f"t must be a scalar or have shape ({X.shape[0]},), got shape {t.shape}."
                )
            dtype = np.result_type(X.dtype, support.dtype)
            X, support = X.astype(dtype, copy=False), support.astype(dtype, copy=False)
        backend = self._backend()
        model = self._model(backend.device)
        return model, backend, backend.asarray(X), backend.asarray(support), t

    # -- many supports at once -------------------------------------------------------------
    def sample_batch(
        self, n_samples: int, supports: Any, *, random_state: Any = None
    ) -> np.ndarray:
        """Generate ``n_samples`` points for each of many supports in one batched flow.

        The same as ``sample(n_samples, support=supports, random_state=random_state)``
        (kept for existing code): with the fixed-step solvers every network evaluation
        covers all tasks; ``"dopri5"`` integrates task by task.

        Parameters
        ----------
        n_samples : int
            Samples per support.
        supports : array-like of shape (B, m, n_features) or list of (m_b, n_features)
            One support set per task.
        random_state : int, RandomState instance or None, default=None
            Seed of the starting noise (drawn as one (B, n_samples, n_features) array);
            ``None`` uses the estimator's ``random_state``.

        Returns
        -------
        X : ndarray of shape (B, n_samples, n_features)
        """
        self._begin()
        if not is_support_list(supports):
            self._check_prior_width(supports)
            supports = check_support_batch(supports, self.n_features_in_, type(self).__name__)
        return self._sample(n_samples, support=supports, random_state=random_state)

    # -- the field -------------------------------------------------------------------------
    def velocity(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Learned velocity ``v(X, t; S)``.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
            States at time ``t``.
        t : float or array-like of shape (n,)
            Times in [0, 1].
        support : array-like of shape (m, n_features), optional
            In-context support; the fitted one when None.

        Returns
        -------
        V : ndarray of shape (n, n_features)
            float32 when ``X`` and the support are float32, float64 otherwise.
        """
        budget = thread_budget()  # one item only on an accelerator (row_items)
        with limit_threads(1):  # the thread policy of sample (skflow.threads)
            model, backend, X, support, t = self._network_call(X, t, support)
            prepared = self._prepare_support(model, support if support.ndim == 3 else support[None])

            def rows(X, t):  # one work item; the network and the prepared support are shared
                return backend.to_numpy(self._predict(model, X, support, t, prepared=prepared))

            parts = map_on_threads(rows, row_items(X, t, support.shape[-2], backend), budget)
        out = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        # huge inputs (e.g. 1e30) overflow inside the network: say so instead of NaN
        return check_finite_output(out, "velocity")

    def attention_weights(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Learned cross-attention weights ``softmax(Q K^T / sqrt(d_k))`` of every layer/head.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        t : float or array-like of shape (n,)
        support : array-like of shape (m, n_features), optional

        Returns
        -------
        W : ndarray of shape (n_layers, n_heads, n, m)
            Rows are probability vectors over the support; compare them with
            ``NWFlowSampler.weights`` (e.g. :func:`skflow.metrics.nw_weight_correlation`).
        """
        with limit_threads(1):  # one item, one thread: the thread policy of sample
            model, backend, X, support, t = self._network_call(X, t, support)
            _, attn = self._predict(model, X, support, t, return_attention=True)
        dtype = backend.to_numpy(X[:0]).dtype  # the weights in the inputs' dtype
        return backend.to_numpy(attn).astype(dtype, copy=False)

    # -- persistence -----------------------------------------------------------------------
    def __getstate__(self):
        state = super().__getstate__()
        # generators and optimizer moments: not part of the model
        state = {k: v for k, v in state.items() if k != "_warm"}
        if "model_" not in state:
            return state
        # fitted: the parameters plus the (config, state) that restore() rebuilds it from
        config, weights = fitted_config(self)
        fitted = {"model_", "n_features_in_", "_prior", *FITTED}
        state = {k: v for k, v in state.items() if k not in fitted}
        state["_fitted"] = {"config": config, "state": weights}
        return state

    def __setstate__(self, state):
        state = legacy_pickle(state)  # a pickle of an older skflow
        # a pickle of a former version holds the former keywords as attributes
        old = {k: state.pop(k) for k in list(state) if k in LEARNED_DEPRECATED_KEYWORDS}
        # parameters added since that pickle was written take their defaults
        for name, param in inspect.signature(type(self).__init__).parameters.items():
            if param.default is not inspect.Parameter.empty:
                state.setdefault(name, param.default)
        groups = {name: state[name] for name in LEARNED_GROUPS}
        state.update(
            fold_deprecated(
                groups, old, type(self).__name__, warn=False, keywords=LEARNED_DEPRECATED_KEYWORDS
            )
        )
        fitted = state.get("_fitted")
        super().__setstate__({k: v for k, v in state.items() if k != "_fitted"})
        if fitted is not None:
            restore(self, fitted["config"], fitted["state"])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


_RESOLVE = {"network": network_options, "training": training_options, "solver": solver_options}


def _former_keyword(name: str, group: str, field: str) -> property:
    """The read-only view ``sampler.NAME`` of a former keyword: the effective value of its
    field; assigning it sets the field, as ``set_params(NAME=...)`` does (with a
    ``FutureWarning``)."""

    def get(self: LearnedFlowSampler) -> Any:
        return getattr(self._options(group), field)

    def set_value(self: LearnedFlowSampler, value: Any) -> None:
        self.set_params(**{name: value})

    return property(get, set_value, doc=f"``{group}.{field}`` (the former ``{name}``).")


for _name, (_group, _field) in LEARNED_DEPRECATED_KEYWORDS.items():
    setattr(LearnedFlowSampler, _name, _former_keyword(_name, _group, _field))
