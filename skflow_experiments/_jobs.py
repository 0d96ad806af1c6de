"""Work that several experiments share: the plug-in's samples of every held-out task in one
batched call and one learned model's training and samples (collapse, families); the
protocol's comparisons per support size and how much lower the learned models are
(scarcity, fewshot)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from skflow import LearnedFlowSampler, NWFlowSampler, SolverOptions
from skflow.samplers.options import learned_params_from_flat

from ._io import TorchThreads, derive_seed
from ._report import ci_pct, lower_pct
from .protocol import CONVENTIONS, compare_to_baseline, training_record


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
        sigma_min=cfg["sigma_min"], solver=SolverOptions(model["solver"], n_steps=model["n_steps"])
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
        :func:`~skflow_experiments.protocol.training_record` of the training.
    """
    with TorchThreads(torch_threads):
        model = LearnedFlowSampler(**learned_params_from_flat(params))
        t0 = time.perf_counter()
        model.fit(source)
        seconds = time.perf_counter() - t0
        generated = model.sample_batch(n_samples, supports, random_state=sample_seed)
    return generated, training_record(model, seconds, seed)


#: The paper's ratio MMD²(plug-in) / MMD²(learned) at m = 10 (24 % lower).
PAPER_RATIO_M10 = 1.0 / (1.0 - 0.24)

#: The comparisons of scarcity and fewshot, name -> (baseline, challenger); each runs those
#: whose challenger it has.
PAIRS = {
    "learned_vs_plugin": ("plugin", "learned"),
    "learned_vs_plugin_tuned": ("plugin_tuned", "learned"),
    "learned_plain_vs_plugin": ("plugin", "learned_plain"),
}


def _pairs_of(methods: tuple[str, ...]) -> list[str]:
    """The names of the pairs of :data:`PAIRS` whose two methods are among ``methods``."""
    return [k for k, (a, b) in PAIRS.items() if a in methods and b in methods]


def compare_per_support_size(
    per_seed: list[dict],
    support_sizes: tuple,
    methods: tuple[str, ...],
    extra_columns: tuple[str, ...] = (),
) -> dict[str, dict[str, Any]]:
    """Per support size m: the protocol's comparisons of :data:`PAIRS` over the seeds.

    The paper's ratio :data:`PAPER_RATIO_M10` goes with ``learned_vs_plugin`` at m = 10.

    Parameters
    ----------
    per_seed : list of dict
        One per seed; ``s["table"][m][method][column]`` holds per-task scores of shape
        ``(n_tasks,)`` (``m`` a string), ``method`` in ``methods`` or ``"floor"``.
    support_sizes : tuple of int
    methods : tuple of str
        The methods of the tables; a pair runs when both its methods are among them.
    extra_columns : tuple of str, default=()
        Columns of the methods' tables besides the conventions (the floor has none).

    Returns
    -------
    comparison : dict
        ``comparison[m]``: each pair's :func:`~skflow_experiments.protocol.compare_to_baseline`
        output, and ``"per_task"``, the stacked tables of shape ``(n_seeds, n_tasks)``.

    Examples
    --------
    >>> row = {c: np.ones(4) for c in CONVENTIONS}
    >>> per_seed = [{"table": {"5": dict.fromkeys(("plugin", "learned", "floor"), row)}}] * 2
    >>> out = compare_per_support_size(per_seed, (5,), ("plugin", "learned"))
    >>> sorted(out["5"]), out["5"]["learned_vs_plugin"]["true"]["ratio"]
    (['learned_vs_plugin', 'per_task'], 1.0)
    """
    tables = {**{k: (*CONVENTIONS, *extra_columns) for k in methods}, "floor": CONVENTIONS}
    pairs = {k: PAIRS[k] for k in _pairs_of(methods)}
    out = {}
    for m in map(str, support_sizes):
        t = {
            k: {c: np.stack([s["table"][m][k][c] for s in per_seed]) for c in columns}
            for k, columns in tables.items()
        }
        out[m] = {
            name: compare_to_baseline(
                t[a],
                t[b],
                t["floor"],
                paper_ratio=PAPER_RATIO_M10 if (name, m) == ("learned_vs_plugin", "10") else None,
            )
            for name, (a, b) in pairs.items()
        }
        out[m]["per_task"] = t
    return out


def lower_pcts(comparison: dict, support_sizes: tuple, convention: str) -> dict[str, dict]:
    """Pair -> m -> how much lower the challenger is (:func:`~._report.lower_pct`).

    Parameters
    ----------
    comparison : dict
        The output of :func:`compare_per_support_size`.
    support_sizes : tuple of int
    convention : {"pooled", "true"}

    Returns
    -------
    pcts : dict
        ``pcts[pair][str(m)]``: ``{"pct": ..., "ci": [lo, hi]}``.

    Examples
    --------
    >>> comp = {"5": {"a_vs_b": {"true": {"ratio": 2.0, "ratio_ci": [1.0, 4.0]}}, "per_task": {}}}
    >>> lower_pcts(comp, (5,), "true")
    {'a_vs_b': {'5': {'pct': 50.0, 'ci': [0.0, 75.0]}}}
    """
    pairs = [k for k in comparison[str(support_sizes[0])] if k != "per_task"]
    return {
        key: {str(m): lower_pct(comparison[str(m)][key][convention]) for m in support_sizes}
        for key in pairs
    }


def support_size_cells(
    results: dict, convention: str, methods: tuple[str, ...]
) -> list[tuple[str, str, str, str]]:
    """The cells every support-size table row starts with: m, the mean MMD² of each method,
    the noise floor and how much lower the learned models are.

    Parameters
    ----------
    results : dict
        ``summary`` (:func:`lower_pcts` per convention with ``mmd2`` means, and
        ``support_sizes``) and ``comparison`` (:func:`compare_per_support_size`).
    convention : {"pooled", "true"}
    methods : tuple of str

    Returns
    -------
    cells : list of tuple of str
        Per m: ``(m, means, floor, reductions)``, the inner cells joined by ``" | "``.

    Examples
    --------
    >>> gain, floor = {"pct": 50.0, "ci": [0.0, 75.0]}, {"mean": 0.0, "q95": 0.01}
    >>> summary = {"support_sizes": [5], "true": {"learned_vs_plugin": {"5": gain},
    ...            "mmd2": {"plugin": {"5": 0.2}, "learned": {"5": 0.1}}}}
    >>> comparison = {"5": {"learned_vs_plugin": {"true": {"noise_floor": floor}}}}
    >>> res = {"summary": summary, "comparison": comparison}
    >>> support_size_cells(res, "true", ("plugin", "learned"))
    [('5', '0.2 | 0.1', '0 (0.01)', '+50.0 % [+0.0 %, +75.0 %]')]
    """
    s, cells = results["summary"][convention], []
    for m in map(str, results["summary"]["support_sizes"]):
        fl = results["comparison"][m]["learned_vs_plugin"][convention]["noise_floor"]
        means = " | ".join(f"{s['mmd2'][k][m]:.3g}" for k in methods)
        gains = " | ".join(ci_pct(s[k][m]) for k in _pairs_of(methods))
        cells.append((m, means, f"{fl['mean']:.3g} ({fl['q95']:.3g})", gains))
    return cells
