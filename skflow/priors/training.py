"""The training run of a shipped prior: chunks of warm-started fits, checkpoints, a model card.

:func:`train_prior` trains recipe ``NAME`` of :data:`~skflow.priors.RECIPES` on
:class:`~skflow.priors.PriorTasks` in chunks of ``chunk`` iterations (a warm start each,
with the task, noise and time streams continuing, so an uninterrupted run is one
deterministic stream), writes a checkpoint after every chunk into a folder the user names
(:func:`write_checkpoint`), prints the progress with a time estimate, and finally writes the
weights and the model card (command, iterations, wall time, CPU time, machine, loss and
validation curves). Everything runs on one Torch thread and one BLAS thread, so the same
command gives the same weights on any machine's thread count.

A checkpoint holds no pickle: the network's tensors (``torch.save``, read back with
``torch.load(weights_only=True)``) and JSON metadata (estimator parameters, fitted
attributes, the run's log, the SHA-256 of the tensors file), so resuming from a checkpoint
of unknown origin cannot run code.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import InvalidParameterError
from ..samplers import LearnedFlowSampler
from ..samplers._fitted import fitted_config, restore
from ..samplers.options import flat_learned_params, learned_params_from_flat, training_options
from ..samplers.prior_store import PRIORS_DIR, check_prior_name, file_sha256
from ..threads import limit_threads
from .meta_distribution import PriorTasks
from .recipes import RECIPES

__all__ = ["checkpoint_files", "read_checkpoint", "train_prior", "write_checkpoint"]

#: Marks a checkpoint's metadata (it has no ``weights_sha256`` field: never listed as a prior).
CHECKPOINT_FORMAT = "skflow-prior-checkpoint/1"


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


def checkpoint_files(folder: str | Path, name: str) -> tuple[Path, Path]:
    """``(metadata, tensors)``: the two files of recipe ``name``'s checkpoint in ``folder``.

    Examples
    --------
    >>> [p.name for p in checkpoint_files("/tmp/ckpt", "general-16")]
    ['general-16.checkpoint.json', 'general-16.checkpoint.pt']
    """
    stem = Path(folder) / f"{check_prior_name(name)}.checkpoint"
    return stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".pt")


def _json_value(value: Any) -> Any:
    if isinstance(value, np.generic):  # NumPy scalars of the log and the fitted attributes
        return value.item()
    raise TypeError(f"a checkpoint stores JSON values only, got {type(value).__name__}.")


def _replace(path: Path, write: Any) -> None:
    """``write(tmp)`` then rename: an interrupted write never leaves half a file at ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def write_checkpoint(folder: str | Path, name: str, sampler: LearnedFlowSampler, log: dict) -> Path:
    """Write the checkpoint of a training run, without pickle: the network's tensors and JSON.

    Parameters
    ----------
    folder : str or Path
        The checkpoint folder (created if needed); the files are
        :func:`checkpoint_files` ``(folder, name)``.
    name : str
        The recipe.
    sampler : LearnedFlowSampler
        Fitted (its parameters, fitted attributes and weights are written).
    log : dict
        The run's log (curves, times): JSON values only.

    Returns
    -------
    metadata : Path

    Examples
    --------
    >>> import tempfile
    >>> prior = LearnedFlowSampler.from_pretrained("general-16", n_features=2)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = write_checkpoint(folder, "general-16", prior, {"loss": [1.0]})
    ...     sampler, log = read_checkpoint(folder, "general-16")
    >>> sampler.n_iter_ == prior.n_iter_, log
    (True, {'loss': [1.0]})
    """
    import torch

    meta_path, tensors_path = checkpoint_files(folder, name)
    meta_path.parent.mkdir(parents=True, exist_ok=True)
    config, state = fitted_config(sampler)
    _replace(tensors_path, lambda tmp: torch.save(state, tmp))
    meta = {
        "format": CHECKPOINT_FORMAT,
        "name": name,
        "params": flat_learned_params(sampler.get_params(deep=False)),
        "config": config,
        "log": log,
        "tensors_sha256": file_sha256(tensors_path),
    }
    text = json.dumps(meta, default=_json_value, indent=1)
    _replace(meta_path, lambda tmp: tmp.write_text(text + "\n"))
    return meta_path


def read_checkpoint(folder: str | Path, name: str) -> tuple[LearnedFlowSampler, dict] | None:
    """The fitted sampler and log of recipe ``name``'s checkpoint in ``folder``; None if none.

    The tensors are read with ``torch.load(weights_only=True)`` and checked against the
    metadata's SHA-256 (both files of one checkpoint); nothing is unpickled.

    Parameters
    ----------
    folder : str or Path
        The checkpoint folder of :func:`write_checkpoint`.
    name : str
        The recipe.

    Returns
    -------
    (sampler, log) or None

    Raises
    ------
    ValueError
        The metadata is not a checkpoint of ``name`` or the tensors do not match it.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     read_checkpoint(folder, "general-16") is None
    True
    """
    import torch

    meta_path, tensors_path = checkpoint_files(folder, name)
    if not meta_path.is_file():
        return None
    meta = json.loads(meta_path.read_text())
    if not isinstance(meta, dict) or (meta.get("format"), meta.get("name")) != (
        CHECKPOINT_FORMAT,
        name,
    ):
        raise ValueError(
            f"{meta_path} is not a training checkpoint of {name!r} ({CHECKPOINT_FORMAT}); "
            "remove it or pass another --checkpoint folder."
        )
    if not tensors_path.is_file() or file_sha256(tensors_path) != meta["tensors_sha256"]:
        raise ValueError(
            f"the tensors {tensors_path} are missing or are not those of {meta_path}; remove "
            "both files to start again, or pass another --checkpoint folder."
        )
    state = torch.load(tensors_path, map_location="cpu", weights_only=True)
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["params"].items()}
    sampler = restore(LearnedFlowSampler(**learned_params_from_flat(params)), meta["config"], state)
    return sampler, meta["log"]


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
        Checkpoint folder: after every chunk the run writes :func:`write_checkpoint` there
        (two files, removed at the end). Default: no checkpoint (never a default inside
        the package's data folder).
    resume : bool, default=False
        Continue from the checkpoint in ``checkpoint`` (required), or start at iteration 0
        when it holds none. It continues the weights with a fresh optimizer state: a
        resumed run is close to, not bit-identical with, an uninterrupted one.
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
    if resume and checkpoint is None:
        raise InvalidParameterError(
            "resume=True needs checkpoint=FOLDER, the folder the interrupted run wrote its "
            "checkpoint to (python -m skflow.priors NAME --resume --checkpoint DIR)."
        )
    folder = PRIORS_DIR if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tasks = PriorTasks(**recipe["tasks"])
    with limit_threads(1):
        start = _machine()
        started = time.perf_counter()
        sampler, log, resumed = _start(name, recipe, checkpoint if resume else None, progress)
        while getattr(sampler, "n_iter_", 0) < total:
            done = getattr(sampler, "n_iter_", 0)
            chunk = min(recipe["chunk"], total - done)
            sampler.set_params(training__max_iter=chunk, warm_start=done > 0)
            _chunk(sampler, tasks, log, total, started)
            if checkpoint is not None:
                write_checkpoint(checkpoint, name, sampler, log)
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
            "resumed": resumed,
        }
        # the curves are in training, not in the card's fitted attributes
        card = sampler.save_pretrained(
            name, folder, training=training, finetune_params=recipe["finetune"]
        )
    for path in checkpoint_files(checkpoint, name) if checkpoint is not None else ():
        path.unlink(missing_ok=True)
    return card


def _start(name: str, recipe: dict, checkpoint: Any, progress: bool) -> tuple:
    """``(sampler, log, resumed)``: the run of ``checkpoint`` (a folder) if it holds one,
    else a fresh sampler of the recipe."""
    saved = None if checkpoint is None else read_checkpoint(checkpoint, name)
    if saved is not None:
        sampler, log = saved
        print(f"resuming from {checkpoint} at iteration {sampler.n_iter_}", flush=True)
        log["wall_s_before"], log["cpu_s_before"] = log["wall_s"], log["cpu_s"]
        return sampler, log, True
    if checkpoint is not None:
        print(f"no checkpoint of {name!r} in {checkpoint}: starting at iteration 0", flush=True)
    # a recipe holds the parameters in the flat form of a model card
    params = learned_params_from_flat({**recipe["sampler"], "verbose": int(progress)})
    return LearnedFlowSampler(**params), {"loss": [], "validation": []}, False
