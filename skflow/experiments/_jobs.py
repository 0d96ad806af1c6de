"""Work that several experiments share: the plug-in's samples of every held-out task in one
batched call and one learned model's training and samples (collapse, families), and the
protocol's comparisons per support size (scarcity, fewshot)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from skflow import LearnedFlowSampler, NWFlowSampler

from ._io import TorchThreads, derive_seed
from .protocol import compare_to_baseline, training_record


def plugin_samples(
    supports: np.ndarray, n_samples: int, cfg: dict, seed: int, noise_keys: tuple[int, ...]
) -> np.ndarray:
    """Samples of the exact NW flow on every task, from one batched call.

    Parameters
    ----------
    supports : ndarray of shape (B, m, d)
        One support per task.
    n_samples : int
        Samples per task.
    cfg : dict
        The preset: ``sigma_min``, and ``learned``'s ``solver`` and ``n_steps`` (the plug-in
        integrates like the learned model).
    seed : int
        The training seed of the job.
    noise_keys : tuple of int
        Task ``b`` starts from the noise of ``derive_seed(seed, *noise_keys, b)``: its own
        stream, whatever the number of tasks.

    Returns
    -------
    generated : ndarray of shape (B, n_samples, d)

    Examples
    --------
    >>> S = np.random.RandomState(0).normal(size=(2, 5, 3))
    >>> cfg = {"sigma_min": 0.01, "learned": {"solver": "heun", "n_steps": 4}}
    >>> plugin_samples(S, 6, cfg, seed=0, noise_keys=(4, 3)).shape
    (2, 6, 3)
    """
    model = cfg["learned"]
    sampler = NWFlowSampler(
        sigma_min=cfg["sigma_min"], solver=model["solver"], n_steps=model["n_steps"]
    )
    width = supports.shape[2]
    noise = np.stack(
        [
            np.random.RandomState(derive_seed(seed, *noise_keys, b)).standard_normal(
                (n_samples, width)
            )
            for b in range(len(supports))
        ]
    )
    return sampler.fit(supports[0]).sample(n_samples, support=supports, noise=noise)


def learned_samples(
    params: dict[str, Any],
    source: Any,
    supports: np.ndarray,
    n_samples: int,
    *,
    sample_seed: int,
    seed: int,
    torch_threads: int | None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Train one :class:`~skflow.LearnedFlowSampler` and sample every task in one batch.

    Parameters
    ----------
    params : dict
        The model's parameters.
    source : task source
        What it meta-trains on.
    supports : ndarray of shape (B, m, d)
        The held-out supports.
    n_samples : int
        Samples per task.
    sample_seed : int
        ``random_state`` of the batched sampling.
    seed : int
        The training seed of the job (recorded).
    torch_threads : int or None
        Torch threads while it trains and samples (None: leave Torch's setting).

    Returns
    -------
    generated : ndarray of shape (B, n_samples, d)
    record : dict
        :func:`~skflow.experiments.protocol.training_record` of the training.
    """
    with TorchThreads(torch_threads):
        model = LearnedFlowSampler(**params)
        t0 = time.perf_counter()
        model.fit(source)
        seconds = time.perf_counter() - t0
        generated = model.sample_batch(n_samples, supports, random_state=sample_seed)
    return generated, training_record(model, seconds, seed)


def compare_per_support_size(
    per_seed: list[dict],
    support_sizes: tuple,
    tables: dict[str, tuple[str, ...]],
    pairs: dict[str, tuple[str, str]],
    paper_ratios: dict[tuple[str, str], float],
) -> dict[str, dict[str, Any]]:
    """Per support size m: the protocol's comparisons of pairs of methods over the seeds.

    Parameters
    ----------
    per_seed : list of dict
        One per seed; ``s["table"][m][method][column]`` holds per-task scores of shape
        ``(n_tasks,)`` (``m`` a string).
    support_sizes : tuple of int
    tables : dict
        Method (``"floor"`` among them) -> the columns to stack over the seeds.
    pairs : dict
        Name -> (baseline, challenger), compared by
        :func:`~skflow.experiments.protocol.compare_to_baseline` against ``"floor"``.
    paper_ratios : dict
        (pair name, m) -> the paper's ratio at that support size.

    Returns
    -------
    comparison : dict
        ``comparison[m]``: each pair's comparison, and ``"per_task"``, the stacked tables of
        shape ``(n_seeds, n_tasks)``.

    Examples
    --------
    >>> from skflow.experiments.protocol import CONVENTIONS
    >>> row = {c: np.ones(4) for c in CONVENTIONS}
    >>> per_seed = [{"table": {"5": {"a": row, "b": row, "floor": row}}}] * 2
    >>> tables = dict.fromkeys(("a", "b", "floor"), CONVENTIONS)
    >>> out = compare_per_support_size(per_seed, (5,), tables, {"b_vs_a": ("a", "b")}, {})
    >>> out["5"]["b_vs_a"]["true"]["ratio"], out["5"]["per_task"]["a"]["true"].shape
    (1.0, (2, 4))
    """
    out = {}
    for m in map(str, support_sizes):
        t = {
            k: {c: np.stack([s["table"][m][k][c] for s in per_seed]) for c in columns}
            for k, columns in tables.items()
        }
        out[m] = {
            name: compare_to_baseline(
                t[a], t[b], t["floor"], paper_ratio=paper_ratios.get((name, m))
            )
            for name, (a, b) in pairs.items()
        }
        out[m]["per_task"] = t
    return out
