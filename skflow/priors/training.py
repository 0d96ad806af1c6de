"""The training run of a shipped prior: chunks of warm-started fits, checkpoints, a model card.

:func:`train_prior` trains recipe ``NAME`` of :data:`~skflow.priors.RECIPES` on
:class:`~skflow.priors.PriorTasks` in chunks of ``chunk`` iterations (a warm start each,
with the task, noise and time streams continuing, so an uninterrupted run is one
deterministic stream), pickles a checkpoint after every chunk, prints the progress with a time
estimate, and finally writes the weights and the model card (command, iterations, wall time,
CPU time, machine, loss and validation curves). Everything runs on one Torch thread and one
BLAS thread, so the same command gives the same weights on any machine's thread count.
"""

from __future__ import annotations

import os
import pickle
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..samplers import LearnedFlowSampler
from ..samplers.options import learned_params_from_flat, training_options
from ..samplers.prior_store import PRIORS_DIR
from ..threads import limit_threads
from .meta_distribution import PriorTasks
from .recipes import RECIPES

__all__ = ["train_prior"]


def _machine() -> dict[str, Any]:
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15": [round(v, 2) for v in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def _curve(values: list[float], every: int) -> list[list[float]]:
    """``[iteration, mean of the last `every` values]`` pairs of a per-iteration curve."""
    out = []
    for stop in range(every, len(values) + 1, every):
        out.append([stop, float(np.mean(values[stop - every : stop]))])
    return out


def _resume(checkpoint: Path) -> tuple[LearnedFlowSampler, dict]:
    with open(checkpoint, "rb") as f:
        saved = pickle.load(f)
    print(f"resuming from {checkpoint} at iteration {saved['sampler'].n_iter_}", flush=True)
    return saved["sampler"], saved["log"]


def _chunk(sampler, tasks, log: dict, total: int, started: float) -> None:
    """One warm-started chunk of training, its curves appended to ``log``, a progress line."""
    before = len(sampler.loss_curve_) if hasattr(sampler, "loss_curve_") else 0
    sampler.fit(tasks)
    log["loss"] += sampler.loss_curve_[before:]
    if sampler.validation_scores_ is not None:
        log["validation"].append([sampler.n_iter_, -float(sampler.validation_scores_[-1])])
    log["wall_s"] = log.get("wall_s_before", 0.0) + time.perf_counter() - started
    log["cpu_s"] = log.get("cpu_s_before", 0.0) + time.process_time()
    done, rate = sampler.n_iter_, sampler.n_iter_ / max(sampler.training_time_, 1e-9)
    eta = (total - done) / max(rate, 1e-9)
    last = np.mean(log["loss"][-training_options(sampler.training).max_iter :])
    val = log["validation"][-1][1] if log["validation"] else float("nan")
    print(
        f"[{done}/{total}] loss {last:.4f}  validation loss {val:.4f}  "
        f"{rate:.1f} it/s  elapsed {log['wall_s'] / 60:.1f} min  ETA {eta / 60:.1f} min",
        flush=True,
    )


def train_prior(
    name: str,
    *,
    max_iter: int | None = None,
    folder: str | Path | None = None,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
) -> Path:
    """Train recipe ``name`` and write its weights and model card.

    Parameters
    ----------
    name : str
        A key of :data:`~skflow.priors.RECIPES`.
    max_iter : int, optional
        Total iterations (default: the recipe's).
    folder : str or Path, optional
        Where the weights and card go (default: the package's ``skflow/priors/data``).
    checkpoint : str or Path, optional
        Checkpoint file (default ``<folder>/NAME.checkpoint.pkl``; removed at the end).
    resume : bool, default=False
        Continue from the checkpoint (its weights, with a fresh optimizer state: a resumed
        run is close to, not bit-identical with, an uninterrupted one).
    progress : bool, default=True
        A progress bar per chunk (``tqdm``) besides the progress lines.

    Returns
    -------
    card : Path
        The model card written.

    Examples
    --------
    >>> import json, tempfile
    >>> from skflow.priors import train_prior
    >>> with tempfile.TemporaryDirectory() as folder:  # two iterations, elsewhere
    ...     card = train_prior("general-16", max_iter=2, folder=folder, progress=False)
    ...     json.loads(card.read_text())["training"]["iterations"]
    [2/2] ...
    2
    """
    recipe = RECIPES[name]
    total = int(recipe["max_iter"] if max_iter is None else max_iter)
    folder = PRIORS_DIR if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = Path(checkpoint or folder / f"{name}.checkpoint.pkl")
    tasks = PriorTasks(**recipe["tasks"])
    with limit_threads(1):
        start = _machine()
        started = time.perf_counter()
        if resume and checkpoint.exists():
            sampler, log = _resume(checkpoint)
            log["wall_s_before"], log["cpu_s_before"] = log["wall_s"], log["cpu_s"]
        else:
            # a recipe holds the parameters in the flat form of a model card
            params = learned_params_from_flat({**recipe["sampler"], "verbose": int(progress)})
            sampler, log = LearnedFlowSampler(**params), {"loss": [], "validation": []}
        while getattr(sampler, "n_iter_", 0) < total:
            done = getattr(sampler, "n_iter_", 0)
            chunk = min(recipe["chunk"], total - done)
            sampler.set_params(training__max_iter=chunk, warm_start=done > 0)
            _chunk(sampler, tasks, log, total, started)
            with open(checkpoint, "wb") as f:
                pickle.dump({"sampler": sampler, "log": log}, f)
        training = {
            "command": "python -m skflow.priors " + " ".join(sys.argv[1:] or [name]),
            "recipe": {k: v for k, v in recipe.items() if k != "description"},
            "description": recipe["description"],
            "iterations": int(sampler.n_iter_),
            "wall_time_s": round(log["wall_s"], 1),
            "cpu_time_s": round(log["cpu_s"], 1),
            "machine_start": start,
            "machine_end": _machine(),
            "loss_curve": _curve(log["loss"], recipe["sampler"]["validation_interval"]),
            "validation_curve": log["validation"],
            "resumed": bool(resume),
        }
        # the curves are in training, not in the card's fitted attributes
        card = sampler.save_pretrained(
            name, folder, training=training, finetune_params=recipe["finetune"]
        )
    checkpoint.unlink(missing_ok=True)
    return card
