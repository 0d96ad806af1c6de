"""One answer for labelled rows: the few-shot sampler chosen among every arm, the learned one
included, validated the way it will be used.

:class:`FewShotSampler` is :class:`~skflow.BestClassicalSampler` over
:func:`~skflow.samplers.classical.default_candidates` and a
:class:`~skflow.LearnedFlowSampler` whose training is bounded by a stated budget, scored on
validation folds that match the supports of use (supports of classes never seen, or new rows
of the training classes: ``new``), chosen per support size by the copy-aware rule of the
selection module (lowest multi-scale MMD² among candidates whose validation memorisation
ratio is at least 0.5).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
from sklearn.base import clone

from .._validation import (
    ParameterCheck,
    check_random_state,
    choice,
    integer,
    random_seed,
    real,
    satisfies,
)
from .classical import BestClassicalSampler, check_support_sizes, default_candidates
from .learned import LearnedFlowSampler
from .options import TrainingOptions

__all__ = ["FewShotSampler"]


class FewShotSampler(BestClassicalSampler):
    """The few-shot sampler for labelled rows: every arm a user could fit, the learned one
    included, chosen on validation supports like the ones of use; one line.

    ``fit(X, y)`` scores :func:`~skflow.samplers.classical.default_candidates` (four Gaussian
    and mixture arms, the plug-in field at seven bandwidths) and a default
    :class:`~skflow.LearnedFlowSampler` on validation folds, at each support size of
    ``support_size``, and keeps per size the candidate of lowest multi-scale MMD² among those
    whose mean validation memorisation ratio is at least 0.5 (a copier is never chosen; see
    :class:`~skflow.BestClassicalSampler`). The validation matches the use:

    - ``new="classes"``: the supports will come from classes not in ``y``. Class-grouped
      folds: candidates are fitted on some classes and scored on the others.
    - ``new="rows"``: the supports will be new rows of the classes in ``y``. Each class's rows
      are split in ``n_splits`` parts: candidates are fitted on the other parts of every class
      and scored on supports and references drawn from the held part.

    The learned candidate is trained once per fold, the folds sharing half of ``budget_s``
    (``budget_s / (2 n_folds)`` seconds of wall time each), and, where it is chosen at some
    size, once more on all the rows within the other half: the model a user gets trains
    longest, while its validation (a shorter training) errs against choosing it. Its
    training takes at most about ``budget_s`` in all; ``training_cpu_seconds_`` records the
    CPU seconds of the whole fit, scoring included (on 2 cores the scoring of the eleven
    classical candidates takes tens of seconds for tens of classes; ``new="rows"`` scores
    every class in every fold). A run stopped by the budget depends on the machine's speed;
    ``budget_s=0`` leaves the learned candidate out.

    Parameters
    ----------
    new : {"classes", "rows"}, default="classes"
        What the supports of use are: rows of new classes, or new rows of the training classes.
    budget_s : float >= 0, default=360.0
        Wall-clock seconds for the learned candidate's training, all its fits together.
    support_size : int or sequence of int, default=(5, 10, 20)
        The support sizes to choose for; a support of ``m`` rows is served by the choice for
        the size nearest to ``m`` on a log scale.
    n_splits : int >= 2, default=3
        Validation folds (class-grouped: at most the number of classes).
    n_repeats : int >= 1, default=2
        Random supports per validation class and fold.
    random_state : int, RandomState instance or None, default=None
        Folds, supports, sampling seeds and the learned candidate's training.

    Attributes
    ----------
    best_estimators_ : list of estimators
        The fitted choice per size of ``support_sizes_``.
    support_sizes_ : ndarray of shape (n_sizes,)
    chosen_ : dict of int to str
        The chosen candidate's class name per support size.
    validation_mmd2_, validation_memorization_, selection_reasons_, best_index_
        As in :class:`~skflow.BestClassicalSampler` (the learned candidate last).
    learned_max_time_ : dict or None
        The wall-time cap of each fit of the learned candidate, ``{"fold": s, "refit": s}``
        (None: left out).
    training_cpu_seconds_ : float
        CPU seconds of the whole ``fit`` (every thread of the process).
    fit_seconds_ : float
        Wall seconds of the whole ``fit``.
    n_features_in_ : int

    See Also
    --------
    BestClassicalSampler : the selection, with any candidates.
    LearnedFlowSampler : the learned candidate alone.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import FewShotSampler
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(6), 20)
    >>> X = 3.0 * rng.normal(size=(6, 2))[y] + rng.normal(size=(120, 2))
    >>> few = FewShotSampler(budget_s=0, support_size=[3, 8], random_state=0).fit(X, y)
    >>> sorted(few.chosen_), few.sample(4, support=X[:3]).shape
    ([3, 8], (4, 2))
    """

    _parameter_constraints: ClassVar[dict[str, ParameterCheck]] = {
        "new": choice(("classes", "rows")),
        "budget_s": real(low=0.0),
        "support_size": satisfies(check_support_sizes),
        "n_splits": integer(minimum=2),
        "n_repeats": integer(),
        "random_state": random_seed(),
    }
    #: Fixed settings of the selection (not parameters: the one answer keeps them).
    candidates = None
    criterion = "copy-aware"
    n_generated = 100

    def __init__(
        self,
        new: str = "classes",
        *,
        budget_s: float = 360.0,
        support_size: int | Sequence[int] = (5, 10, 20),
        n_splits: int = 3,
        n_repeats: int = 2,
        random_state: Any = None,
    ):
        self.new = new
        self.budget_s = budget_s
        self.support_size = support_size
        self.n_splits = n_splits
        self.n_repeats = n_repeats
        self.random_state = random_state

    @property
    def validation(self) -> str:
        """The validation of the selection, ``new``'s value."""
        return self.new

    def _learned_max_time(self, y: np.ndarray) -> dict[str, float] | None:
        """The learned fits' shares of ``budget_s``: half for the folds, half for the refit."""
        if self.budget_s == 0:
            return None
        n_classes = len(np.unique(y))
        n_folds = min(self.n_splits, n_classes) if self.new == "classes" else self.n_splits
        half = float(self.budget_s) / 2
        return {"fold": half / n_folds, "refit": half}

    def _fit_classes(self, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
        wall, cpu = time.perf_counter(), time.process_time()
        fitted = super()._fit_classes(X, y)
        names = [type(e).__name__ for e in fitted["best_estimators_"]]
        sizes = fitted["support_sizes_"].tolist()
        return {
            **fitted,
            "chosen_": dict(zip(sizes, names, strict=True)),
            "learned_max_time_": self._learned_max_time(y),
            "training_cpu_seconds_": time.process_time() - cpu,
            "fit_seconds_": time.perf_counter() - wall,
        }

    def _candidates(self, y: np.ndarray) -> list:
        arms = default_candidates()
        max_time = self._learned_max_time(y)
        if max_time is None:
            return arms
        seed = check_random_state(self.random_state).randint(2**31 - 1)
        training = TrainingOptions(max_time=max_time["fold"])
        return [*arms, LearnedFlowSampler(training=training, random_state=seed)]

    def _refit(self, cand: Any, X: np.ndarray, y: np.ndarray) -> Any:
        if isinstance(cand, LearnedFlowSampler):  # the model of use: the refit's share
            refit = replace(cand.training, max_time=self._learned_max_time(y)["refit"])
            cand = clone(cand).set_params(training=refit)
        return super()._refit(cand, X, y)
