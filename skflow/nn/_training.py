"""Meta-training loop of support-conditioned velocity networks (flow-matching loss, OT path).

Each iteration draws a batch of tasks (supports ``S`` of shape (B, m, d) and targets ``X_1``
of shape (B, n, d)) from a task source, noise ``X_0 ~ N(0, I)`` and one time per target, forms
``x_t = t x_1 + sigma_t x_0`` and regresses the network's ``v(x_t, t; S)`` on the conditional
target ``x_1 - (1 - sigma_min) x_0`` (mean squared norm over targets). AdamW, linear warmup
then a cosine (or constant) learning rate, gradient-norm clipping, optional validation on a
fixed set of tasks with early stopping.

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

__all__ = ["TIME_SAMPLINGS", "TrainingResult", "sample_times", "lr_factor", "train_flow_model"]

TIME_SAMPLINGS = ("uniform", "log-bandwidth")
LR_SCHEDULES = ("cosine", "constant")

# Largest OT bandwidth h(t) = sigma_t / t drawn by the "log-bandwidth" time sampling; the
# corresponding smallest time is 1 / (H_MAX + 1 - sigma_min), about 0.0099.
H_MAX = 100.0


def sample_times(
    shape: tuple[int, ...],
    *,
    sigma_min: float,
    method: str,
    generator: torch.Generator | None,
    device: Any = "cpu",
) -> torch.Tensor:
    """Training times of the flow-matching loss.

    ``"uniform"``: ``t ~ U(0, 1)``. ``"log-bandwidth"``: the OT bandwidth
    ``h(t) = sigma_t / t`` is drawn log-uniformly on ``[sigma_min, H_MAX]`` and inverted,
    ``t = 1 / (h + 1 - sigma_min)``: every octave of kernel width gets the same share of the
    samples, which puts more of them at late times (small bandwidths) than uniform sampling.
    """
    u = torch.rand(shape, generator=generator, device=device)
    if method == "uniform":
        return u
    if method == "log-bandwidth":
        lo, hi = math.log(sigma_min), math.log(H_MAX)
        h = torch.exp(lo + (hi - lo) * u)
        return (1.0 / (h + 1.0 - sigma_min)).clamp(0.0, 1.0)
    raise ValueError(f"time_sampling must be one of {TIME_SAMPLINGS}, got {method!r}.")


def lr_factor(iteration: int, progress: float, *, warmup: int, schedule: str) -> float:
    """Learning-rate multiplier: linear warmup over ``warmup`` iterations, then cosine decay
    to 0 over the training ``progress`` in [0, 1] (or constant)."""
    if warmup > 0 and iteration < warmup:
        return (iteration + 1) / warmup
    if schedule == "constant":
        return 1.0
    return 0.5 * (1.0 + math.cos(math.pi * min(max(progress, 0.0), 1.0)))


def flow_matching_loss(
    model: Callable,
    supports: torch.Tensor,
    targets: torch.Tensor,
    x0: torch.Tensor,
    t: torch.Tensor,
    sigma_min: float,
) -> torch.Tensor:
    """Mean over targets of ``||v(x_t, t; S) - (x_1 - (1 - sigma_min) x_0)||^2``."""
    tc = t[..., None]
    xt = tc * targets + (1.0 - (1.0 - sigma_min) * tc) * x0
    goal = targets - (1.0 - sigma_min) * x0
    v = model(xt, supports, t)
    return ((v - goal) ** 2).sum(dim=-1).mean()


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
    """

    n_iter: int = 0
    loss_curve: list = field(default_factory=list)
    validation_scores: list = field(default_factory=list)
    best_iter: int | None = None
    best_validation_score: float | None = None
    stop_reason: str = "max_iter"
    elapsed: float = 0.0


def train_flow_model(
    model: torch.nn.Module,
    draw_tasks: Callable[[], tuple[np.ndarray, np.ndarray]],
    *,
    sigma_min: float,
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
    print_fn: Callable[[str], None] = print,
) -> TrainingResult:
    """Meta-train ``model`` with the flow-matching loss; returns a :class:`TrainingResult`.

    Parameters
    ----------
    model : torch.nn.Module
        ``model(x (B, n, d), support (B, m, d), t (B, n)) -> (B, n, d)``; trained in place.
    draw_tasks : callable
        ``draw_tasks() -> (supports (B, m, d), targets (B, n, d))`` NumPy arrays; it owns its
        random generator.
    validation : (supports, targets), optional
        Fixed validation tasks; their noise and times are drawn once from ``generator``.
    validation_interval : int
        Steps between validation checks (and log lines). Early stopping counts checks.
    n_iter_no_change : int, optional
        Stop after this many checks without an improvement by more than ``tol`` of the
        validation score (or, without validation, of minus the mean training loss since the
        previous check).
    max_time : float, optional
        Wall-clock budget in seconds; the cosine schedule then follows
        ``max(iteration / max_iter, elapsed / max_time)``.
    forward : callable, optional
        Replaces ``model`` in the forward pass (e.g. a ``torch.compile``-d model).
    """
    forward = model if forward is None else forward
    device = torch.device(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=learning_rate, weight_decay=weight_decay)
    amp = bool(mixed_precision) and device.type == "cuda"

    def to_tensor(a):
        return torch.as_tensor(np.asarray(a, dtype=np.float32), device=device)

    val = None
    if validation is not None:
        vs, vq = (to_tensor(a) for a in validation)
        vx0 = torch.randn(vq.shape, generator=generator, device=device)
        vt = sample_times(
            vq.shape[:2],
            sigma_min=sigma_min,
            method=time_sampling,
            generator=generator,
            device=device,
        )
        val = (vs, vq, vx0, vt)

    def validation_loss() -> float:
        model.eval()
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = flow_matching_loss(forward, *val, sigma_min=sigma_min)
        model.train()
        return float(loss)

    result = TrainingResult()
    best_score, best_state, n_bad = -math.inf, None, 0
    window: list[float] = []
    start = time.perf_counter()
    model.train()
    for it in range(max_iter):
        elapsed = time.perf_counter() - start
        if max_time is not None and elapsed >= max_time:
            result.stop_reason = "max_time"
            break
        progress = it / max_iter
        if max_time is not None:
            progress = max(progress, elapsed / max_time)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate * lr_factor(
                it, progress, warmup=warmup, schedule=lr_schedule
            )

        supports, targets = draw_tasks()
        supports, targets = to_tensor(supports), to_tensor(targets)
        x0 = torch.randn(targets.shape, generator=generator, device=device)
        t = sample_times(
            targets.shape[:2],
            sigma_min=sigma_min,
            method=time_sampling,
            generator=generator,
            device=device,
        )
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = flow_matching_loss(forward, supports, targets, x0, t, sigma_min)
        if not torch.isfinite(loss):
            raise ValueError(
                f"training loss is not finite at iteration {it + 1}; rescale the data, lower "
                "learning_rate or set clip_grad."
            )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip_grad is not None:
            torch.nn.utils.clip_grad_norm_(params, clip_grad)
        optimizer.step()
        value = float(loss.detach())
        result.loss_curve.append(value)
        window.append(value)
        result.n_iter = it + 1

        last = it + 1 == max_iter
        if (it + 1) % validation_interval and not last:
            continue
        score = -validation_loss() if val is not None else -float(np.mean(window))
        if val is not None:
            result.validation_scores.append(score)
        if verbose:
            msg = (
                f"iter {it + 1:6d}/{max_iter}  loss {np.mean(window):.4f}  "
                f"lr {optimizer.param_groups[0]['lr']:.2e}  {time.perf_counter() - start:6.1f}s"
            )
            if val is not None:
                msg += f"  val_loss {-score:.4f}"
            print_fn(msg)
        window = []
        if score > best_score + tol:
            best_score, n_bad = score, 0
            if val is not None:
                result.best_iter, result.best_validation_score = it + 1, score
                best_state = copy.deepcopy(model.state_dict())
        else:
            n_bad += 1
            if n_iter_no_change is not None and n_bad >= n_iter_no_change:
                result.stop_reason = "no_improvement"
                break
    if val is not None and result.stop_reason == "max_time" and result.n_iter % validation_interval:
        # stopped by the time budget between two checks: score the final weights too
        score = -validation_loss()
        result.validation_scores.append(score)
        if score > best_score + tol:
            best_state, result.best_iter = None, result.n_iter
            result.best_validation_score = score
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    result.elapsed = time.perf_counter() - start
    return result
