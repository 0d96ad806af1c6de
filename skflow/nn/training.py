"""Meta-training loop of support-conditioned velocity networks.

Each iteration draws a batch of tasks (supports ``S`` of shape (B, m, d) and targets ``X_1``
of shape (B, n, d)) from a task source, noise ``X_0 ~ N(0, I)`` and one time per target, and
takes an AdamW step on the flow-matching loss of :mod:`skflow.nn.objective` (the times, the
regression targets and the loss are there): linear warmup then a cosine (or constant)
learning rate over the iterations, gradient-norm clipping, an optional exponential moving
average of the weights, optional validation on a fixed set of tasks with early stopping.

All randomness comes from generators passed in (a ``torch.Generator`` for noise and times, a
``numpy.random.Generator`` for the tasks): nothing here touches a global seed.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .._validation import check_choice
from ..paths import GaussianPath, as_path

# The objective's names, importable from here as before the loop and the objective were split.
from .objective import (
    H_MAX,
    MARGINAL_REFERENCE_FACTOR,
    TARGETS,
    TIME_SAMPLINGS,
    exact_goal,
    flow_matching_loss,
    marginal_goal,
    sample_times,
)

__all__ = [
    "H_MAX",
    "LR_SCHEDULES",
    "MARGINAL_REFERENCE_FACTOR",
    "TARGETS",
    "TIME_SAMPLINGS",
    "TrainingResult",
    "flow_matching_loss",
    "lr_factor",
    "sample_times",
    "train_flow_model",
]

LR_SCHEDULES = ("cosine", "constant")

# EMA decay warm-up: the decay used after k updates is min(ema_decay, (1 + k) / (10 + k)), so
# the average forgets the initial weights quickly in short runs.
_EMA_WARMUP = 10.0


def lr_factor(iteration: int, progress: float, *, warmup: int, schedule: str) -> float:
    """Learning-rate multiplier: linear warmup over ``warmup`` iterations, then cosine decay
    to 0 over the training ``progress`` in [0, 1] (or constant).

    Examples
    --------
    >>> lr_factor(0, 0.0, warmup=4, schedule="cosine")
    0.25
    >>> lr_factor(9, 1.0, warmup=4, schedule="cosine")
    0.0
    """
    if warmup > 0 and iteration < warmup:
        return (iteration + 1) / warmup
    if schedule == "constant":
        return 1.0
    return 0.5 * (1.0 + math.cos(math.pi * min(max(progress, 0.0), 1.0)))


@dataclass
class TrainingResult:
    """What :func:`train_flow_model` did.

    Attributes
    ----------
    n_iter : int
        Optimizer steps taken.
    loss_curve : list of float
        Training loss of every step.
    validation_scores : list of float
        ``-validation loss`` at every check (empty without validation).
    best_iter : int or None
        Step of the best validation score (its weights are restored), else None.
    best_validation_score : float or None
        That score (a later score counts as better only when it exceeds it by ``tol``).
    stop_reason : str
        ``"max_iter"``, ``"max_time"`` or ``"no_improvement"``.
    elapsed : float
        Wall-clock seconds of the loop.
    state : dict
        What a warm start needs: ``"weights"`` (the last training weights, before any EMA or
        checkpoint is loaded), ``"optimizer"`` (the AdamW state) and ``"ema"`` (the EMA
        weights and update count, or None); pass it back as ``train_flow_model(state=...)``.
    """

    n_iter: int = 0
    loss_curve: list = field(default_factory=list)
    validation_scores: list = field(default_factory=list)
    best_iter: int | None = None
    best_validation_score: float | None = None
    stop_reason: str = "max_iter"
    elapsed: float = 0.0
    state: dict = field(default_factory=dict)


@dataclass
class _Settings:
    """Options of :func:`train_flow_model` (validated by the caller), with the run's one
    path (built by the caller from its ``path`` and ``sigma_min``)."""

    path: GaussianPath
    max_iter: int
    learning_rate: float
    weight_decay: float
    warmup: int
    lr_schedule: str
    clip_grad: float | None
    time_sampling: str
    validation_interval: int = 50
    n_iter_no_change: int | None = None
    tol: float = 1e-4
    max_time: float | None = None
    verbose: int = 0
    mixed_precision: bool = False
    target: str = "conditional"
    ema_decay: float | None = None
    score_initial: bool = False


class _EMA:
    """Exponential moving average of the trainable parameters (kept in their dtype)."""

    def __init__(self, params, decay: float, state: dict | None = None):
        self.params, self.decay = params, decay
        if state is None:
            self.shadow = [p.detach().clone() for p in params]
            self.count = 0
        else:
            self.shadow = [
                s.to(p.device, p.dtype).clone()
                for s, p in zip(state["shadow"], params, strict=True)
            ]
            self.count = int(state["count"])

    @torch.no_grad()
    def update(self) -> None:
        self.count += 1
        decay = min(self.decay, (1.0 + self.count) / (_EMA_WARMUP + self.count))
        for s, p in zip(self.shadow, self.params, strict=True):
            s.lerp_(p.detach(), 1.0 - decay)

    @torch.no_grad()
    def swap(self) -> None:
        """Exchange the live parameters and the averages (call twice to undo)."""
        for s, p in zip(self.shadow, self.params, strict=True):
            tmp = p.detach().clone()
            p.copy_(s)
            s.copy_(tmp)

    def state(self) -> dict:
        return {"shadow": [s.detach().clone() for s in self.shadow], "count": self.count}


class _Trainer:
    """One training run: the optimizer, EMA, the fixed validation set and the bookkeeping."""

    def __init__(self, model, draw_tasks, cfg: _Settings, generator, device, forward, state):
        self.model, self.draw_tasks, self.cfg = model, draw_tasks, cfg
        # the one path of the run: the times, the loss and the marginal target all use it
        self.path = cfg.path
        self.generator, self.device = generator, torch.device(device)
        self.forward = model if forward is None else forward
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay
        )
        self.warm = bool(state)
        if self.warm:
            model.load_state_dict(state["weights"])
            self.optimizer.load_state_dict(state["optimizer"])
        ema_state = state.get("ema") if self.warm else None
        self.ema = None if cfg.ema_decay is None else _EMA(self.params, cfg.ema_decay, ema_state)
        self.amp = bool(cfg.mixed_precision) and self.device.type == "cuda"
        self.val = None
        self.result = TrainingResult()
        self.best_score, self.best_state, self.n_bad = -math.inf, None, 0
        self.window: list[float] = []
        # seconds of the last validation run: a run stopped by max_time scores its final
        # weights once more, so the loop stops that much before the budget
        self.check_seconds = 0.0

    def _tensor(self, a) -> torch.Tensor:
        if isinstance(a, torch.Tensor):  # drawn on the device, or prefetched (pinned) on the host
            return a.to(device=self.device, dtype=torch.float32, non_blocking=True)
        return torch.as_tensor(np.asarray(a, dtype=np.float32), device=self.device)

    def _noise_and_times(self, targets: torch.Tensor):
        x0 = torch.randn(targets.shape, generator=self.generator, device=self.device)
        t = sample_times(
            targets.shape[:2],
            method=self.cfg.time_sampling,
            generator=self.generator,
            device=self.device,
            path=self.path,
        )
        return x0, t

    def set_validation(self, validation) -> None:
        """Fix the validation tasks (one batch, or a list of batches of different support
        sizes) and draw their noise and times once."""
        batches = validation if isinstance(validation, list) else [validation]
        self.val = []
        for batch in batches:
            vs, vq = (self._tensor(a) for a in batch[:2])
            self.val.append((vs, vq, *self._noise_and_times(vq)))

    def validation_loss(self) -> float:
        """Conditional flow-matching loss of the weights used for sampling (EMA if any),
        averaged over the validation batches (its duration kept in ``check_seconds``)."""
        began = time.perf_counter()
        self.model.eval()
        if self.ema is not None:
            self.ema.swap()
        with torch.no_grad(), self._autocast():
            losses = [
                flow_matching_loss(self.forward, *batch, path=self.path) for batch in self.val
            ]
            loss = sum(float(v) for v in losses) / len(losses)
        if self.ema is not None:
            self.ema.swap()
        self.model.train()
        self.check_seconds = time.perf_counter() - began
        return float(loss)

    def _autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp)

    def _set_lr(self, it: int) -> None:
        # the schedule follows iterations only, so a run that reaches max_iter before
        # max_time is identical to the same run without max_time; a warm start keeps the
        # optimizer's moments and skips the warmup
        cfg = self.cfg
        warmup = 0 if self.warm else cfg.warmup
        factor = lr_factor(it, it / cfg.max_iter, warmup=warmup, schedule=cfg.lr_schedule)
        for group in self.optimizer.param_groups:
            group["lr"] = cfg.learning_rate * factor

    def _batch(self):
        """Supports, data points and the regression target of one batch of tasks."""
        drawn = self.draw_tasks()
        supports, targets = self._tensor(drawn[0]), self._tensor(drawn[1])
        target = self.cfg.target
        if target == "conditional":
            return supports, targets, None
        if target == "marginal":
            reference = self._tensor(drawn[2])
            return supports, targets, marginal_goal(reference, path=self.path)
        return supports, targets, exact_goal(drawn[2], self.device)

    def step(self, it: int) -> float:
        """One optimizer step on a fresh batch of tasks; returns the loss."""
        self._set_lr(it)
        supports, targets, goal = self._batch()
        x0, t = self._noise_and_times(targets)
        with self._autocast():
            loss = flow_matching_loss(
                self.forward, supports, targets, x0, t, goal=goal, path=self.path
            )
        if not torch.isfinite(loss):
            raise ValueError(
                f"training loss is not finite at iteration {it + 1}; rescale the data, lower "
                "learning_rate or set clip_grad."
            )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.clip_grad is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.cfg.clip_grad)
        self.optimizer.step()
        if self.ema is not None:
            self.ema.update()
        return float(loss.detach())

    def _sampling_state(self) -> dict:
        """A copy of the weights used for sampling (the EMA weights when EMA is on)."""
        if self.ema is not None:
            self.ema.swap()
        state = copy.deepcopy(self.model.state_dict())
        if self.ema is not None:
            self.ema.swap()
        return state

    def check(self, it: int, elapsed: float, bar) -> bool:
        """Validation check after step ``it``; True when early stopping triggers."""
        val = self.val is not None
        score = -self.validation_loss() if val else -float(np.mean(self.window))
        if val:
            self.result.validation_scores.append(score)
        if self.cfg.verbose:
            msg = (
                f"iter {it + 1:6d}/{self.cfg.max_iter}  loss {np.mean(self.window):.4f}  "
                f"lr {self.optimizer.param_groups[0]['lr']:.2e}  {elapsed:6.1f}s"
            )
            bar.write(msg + (f"  val_loss {-score:.4f}" if val else ""))
        self.window = []
        if score > self.best_score + self.cfg.tol:
            self.best_score, self.n_bad = score, 0
            if val:
                self.result.best_iter, self.result.best_validation_score = it + 1, score
                self.best_state = self._sampling_state()
            return False
        self.n_bad += 1
        return self.cfg.n_iter_no_change is not None and self.n_bad >= self.cfg.n_iter_no_change

    def _final_check(self) -> None:
        """Stopped by the time budget between two checks: score the final weights too."""
        score = -self.validation_loss()
        self.result.validation_scores.append(score)
        if score > self.best_score + self.cfg.tol:
            self.best_state, self.result.best_iter = None, self.result.n_iter
            self.result.best_validation_score = score

    def _out_of_time(self, start: float) -> bool:
        """Whether the budget is spent, counting the final check a stop would run."""
        if self.cfg.max_time is None:
            return False
        final = self.check_seconds if self.val is not None else 0.0
        return time.perf_counter() - start + final >= self.cfg.max_time

    def _loop(self, bar, start: float) -> None:
        cfg, result = self.cfg, self.result
        for it in range(cfg.max_iter):
            if self._out_of_time(start):
                result.stop_reason = "max_time"
                break
            value = self.step(it)
            result.loss_curve.append(value)
            self.window.append(value)
            result.n_iter = it + 1
            bar.update(1)
            if (it + 1) % cfg.validation_interval and it + 1 != cfg.max_iter:
                continue
            bar.set_postfix(loss=f"{np.mean(self.window):.4f}", refresh=False)
            if self.check(it, time.perf_counter() - start, bar):
                result.stop_reason = "no_improvement"
                break
        if self.val is not None and result.stop_reason == "max_time":
            if result.n_iter % cfg.validation_interval:
                self._final_check()
        result.elapsed = time.perf_counter() - start

    def _close_bar(self, bar) -> None:
        """End the bar at the iterations run: an early stop says why and shrinks the total,
        so a bar never stays announced at ``max_iter`` when it stopped before."""
        result = self.result
        if result.stop_reason == "max_iter":
            return
        why = "no improvement" if result.stop_reason == "no_improvement" else "max_time reached"
        bar.total = result.n_iter
        bar.set_postfix_str(f"stopped at {result.n_iter}/{self.cfg.max_iter}: {why}")
        bar.refresh()
        if self.cfg.verbose:
            bar.write(
                f"training stopped at iteration {result.n_iter} of {self.cfg.max_iter}: {why}"
                + (f" (max_time={self.cfg.max_time:.3g} s)" if why.startswith("max_time") else "")
            )

    def _initial_check(self) -> None:
        """The weights before any step are a candidate too (iteration 0): kept when no
        trained weights validate better."""
        score = -self.validation_loss()
        self.result.validation_scores.append(score)
        self.best_score, self.best_state = score, self._sampling_state()
        self.result.best_iter, self.result.best_validation_score = 0, score

    def run(self, progress_bar) -> TrainingResult:
        start = time.perf_counter()  # max_time counts the initial check too
        if self.cfg.score_initial and self.val is not None:
            self._initial_check()
        self.model.train()
        with progress_bar(total=self.cfg.max_iter) as bar:
            self._loop(bar, start)
            self._close_bar(bar)
        result = self.result
        result.state = {
            "weights": copy.deepcopy(self.model.state_dict()),
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "ema": None if self.ema is None else self.ema.state(),
        }
        if self.ema is not None:
            self.ema.swap()  # sample with the averaged weights
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)
        self.model.eval()
        return result


class _Quiet:
    """Stand-in for a tqdm bar when ``verbose=0``: no output at all."""

    def __init__(self, total: int, print_fn: Callable[[str], None] = print):
        self.print_fn = print_fn

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int) -> None:
        pass

    def set_postfix(self, **kwargs) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def refresh(self) -> None:
        pass

    def write(self, msg: str) -> None:
        self.print_fn(msg)


def _progress_bar(
    verbose: int, print_fn: Callable[[str], None] | None, max_time: float | None = None
) -> Callable:
    """A ``tqdm`` progress bar factory when ``verbose`` (log lines through ``bar.write``); a
    wall-clock cap is named in the bar's description."""
    if not verbose or print_fn is not None:
        return lambda total: _Quiet(total, print if print_fn is None else print_fn)
    from tqdm.auto import tqdm

    def bar(total):
        desc = "training" if max_time is None else f"training (max_time {max_time:.3g} s)"
        return tqdm(total=total, desc=desc, unit="it", leave=False)

    return bar


def train_flow_model(
    model: torch.nn.Module,
    draw_tasks: Callable[[], tuple[np.ndarray, np.ndarray]],
    *,
    sigma_min: float = 0.01,
    max_iter: int,
    learning_rate: float,
    weight_decay: float,
    warmup: int,
    lr_schedule: str,
    clip_grad: float | None,
    time_sampling: str,
    generator: torch.Generator,
    device: Any = "cpu",
    validation: tuple[np.ndarray, np.ndarray] | None = None,
    validation_interval: int = 50,
    n_iter_no_change: int | None = None,
    tol: float = 1e-4,
    max_time: float | None = None,
    verbose: int = 0,
    mixed_precision: bool = False,
    forward: Callable | None = None,
    print_fn: Callable[[str], None] | None = None,
    target: str = "conditional",
    ema_decay: float | None = None,
    state: dict | None = None,
    path: GaussianPath | None = None,
    score_initial: bool = False,
) -> TrainingResult:
    """Meta-train ``model`` with the flow-matching loss; returns a :class:`TrainingResult`.

    Parameters
    ----------
    model : torch.nn.Module
        ``model(x (B, n, d), support (B, m, d), t (B, n)) -> (B, n, d)``; trained in place.
    draw_tasks : callable
        ``draw_tasks() -> (supports (B, m, d), targets (B, n, d))`` NumPy arrays; it owns its
        random generator. With ``target="marginal"`` it returns a third array, the reference
        set (B, n_ref, d) of each task; with ``target="exact"`` a third item
        ``velocity(x_t (B, n, d), t (B, n)) -> (B, n, d)``, the tasks' population velocity.
    sigma_min, max_iter, learning_rate, weight_decay, warmup, lr_schedule, clip_grad, \
time_sampling
        As in :class:`~skflow.samplers.learned.LearnedFlowSampler`.
    generator : torch.Generator
        Source of the noise and times.
    device : torch device, default="cpu"
    validation : (supports, targets) or list of them, optional
        Fixed validation tasks (a list: batches of different support sizes, scored by their
        mean loss); their noise and times are drawn once from ``generator``.
    validation_interval : int
        Steps between validation checks (and log lines). Early stopping counts checks.
    n_iter_no_change : int, optional
        Stop after this many checks without an improvement by more than ``tol`` of the
        validation score (or, without validation, of minus the mean training loss since the
        previous check).
    tol : float, default=1e-4
    max_time : float, optional
        Wall-clock budget in seconds. The learning-rate schedule follows the iterations
        only, so a run that reaches ``max_iter`` first is identical, bit for bit, to the
        same run without ``max_time``; a run stopped by the budget stops before the cosine
        has decayed to 0.
    verbose : int, default=0
    mixed_precision : bool, default=False
        bfloat16 autocast (CUDA only).
    forward : callable, optional
        Replaces ``model`` in the forward pass (e.g. a ``torch.compile``-d model).
    print_fn : callable, optional
        Receives the log lines; when None and ``verbose``, a ``tqdm`` progress bar runs and
        the lines go through ``tqdm.write``.
    target : {"conditional", "exact", "marginal"}, default="conditional"
        Regression target of the training loss: the conditional target
        ``x_1 - (1 - sigma_min) x_0``; the tasks' exact population velocity at ``x_t``; or the
        self-normalized marginal (NW) field of each task's reference set at ``x_t``. The
        validation loss always uses the conditional target, so scores compare across
        targets (in expectation they differ from the other losses by a constant).
    ema_decay : float in (0, 1), optional
        Keep an exponential moving average of the weights (decay
        ``min(ema_decay, (1 + k) / (10 + k))`` after ``k`` updates); validation scores and the
        returned model use the averaged weights.
    state : dict, optional
        ``TrainingResult.state`` of a previous run: continue from its last training weights,
        optimizer moments and EMA (warm start; the warmup is skipped).
    path : GaussianPath, optional
        The probability path of the loss, the training times and the marginal target
        (the model's own path, e.g. ``model.path``); default ``OTPath(sigma_min)``.
    score_initial : bool, default=False
        With ``validation``: score the weights before the first step as well (iteration 0 of
        ``validation_scores``); they are returned when no later check beats them, so training
        can only improve on the initial model's validation loss.

    Returns
    -------
    result : TrainingResult
    """
    check_choice(target, "target", TARGETS)
    cfg = _Settings(
        path=as_path(path, sigma_min),
        max_iter=max_iter,
        learning_rate=learning_rate,
        weight_decay=weight_decay,
        warmup=warmup,
        lr_schedule=lr_schedule,
        clip_grad=clip_grad,
        time_sampling=time_sampling,
        validation_interval=validation_interval,
        n_iter_no_change=n_iter_no_change,
        tol=tol,
        max_time=max_time,
        verbose=verbose,
        mixed_precision=mixed_precision,
        target=target,
        ema_decay=ema_decay,
        score_initial=score_initial,
    )
    trainer = _Trainer(model, draw_tasks, cfg, generator, device, forward, state or {})
    if validation is not None:
        trainer.set_validation(validation)
    return trainer.run(_progress_bar(verbose, print_fn, max_time))
