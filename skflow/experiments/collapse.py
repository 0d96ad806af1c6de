"""Experiment 1: nearest-neighbour collapse on Gaussian-mixture tasks, d = 2 ... 16.

The paper's claim: on random Gaussian mixtures with ``m = 50`` support points, the isotropic
plug-in field (the exact Nadaraya-Watson field of the support) averages fewer and fewer
support points as the dimension grows -- the median effective sample size ``n_eff`` at
mid-path falls from about 9 at ``d = 2`` to about 1 at ``d = 16`` -- and with it the value of
the exact NW head inside a learned model: adding the head lowers MMD² by 28 % at ``d = 2``
and by 0 % at ``d = 16``.

For every dimension ``d`` of the preset this module measures, on
:class:`skflow.tasks.GaussianMixtureTasks`:

(a) ``n_eff(t)`` of the plug-in field along its own trajectories
    (:func:`skflow.diagnostics.neff_along_path`): per task the median over trajectories,
    then the median over tasks; the key number is the value at ``t = 0.5``;
(b) the mean over held-out tasks of ``mmd2(generated, true, reference=true)`` (Gaussian
    kernel, median heuristic from the true points, as many generated as true points) of the
    plug-in :class:`~skflow.NWFlowSampler` and of two :class:`~skflow.LearnedFlowSampler`
    trainings, with and without the exact head (same seed, same budget);
(c) the exact head's benefit ``(MMD²_without - MMD²_with) / MMD²_without``.

Run it with ``python -m skflow.experiments collapse --quick`` (or ``--full``); the results
go to ``output/experiments/collapse/results.json`` and ``collapse.png``.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from skflow import LearnedFlowSampler, NWFlowSampler
from skflow.diagnostics import neff_along_path
from skflow.metrics import mmd2
from skflow.tasks import GaussianMixtureTasks

from ._io import TorchThreads, derive_seed, prepare_output, save_figure, to_plain, write_json

__all__ = ["PRESETS", "run"]

#: Learned-model settings of the quick preset: the library's default architecture
#: (d_model 64, 4 heads, 2 layers) with half-size batches (16 tasks x 64 targets) so that 8
#: trainings of 1500 iterations fit in a few CPU minutes. The budget is the iteration count
#: (the same for the models with and without the head); the preset's ``max_time`` is only a
#: guard against a very slow machine.
_QUICK_MODEL = {
    "batch_tasks": 16,
    "n_targets": 64,
    "max_iter": 1500,
    "warmup": 100,
    "device": "cpu",
    "solver": "heun",
    "n_steps": 100,
}

#: Experiment presets. ``learned`` holds :class:`~skflow.LearnedFlowSampler` parameters
#: (``max_time`` caps each training in seconds); ``torch_threads`` is the number of Torch
#: threads each job uses (``None``: leave Torch's setting).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "dims": (2, 8, 16),
        "n_support": 50,
        "sigma_min": 0.01,
        "n_eval_tasks": 3,
        "n_points": 64,
        "n_neff_tasks": 4,
        "n_trajectories": 32,
        "neff_steps": 20,
        "learned": {
            "d_model": 16,
            "n_heads": 2,
            "n_layers": 1,
            "max_iter": 5,
            "warmup": 1,
            "batch_tasks": 4,
            "n_targets": 16,
            "solver": "heun",
            "n_steps": 10,
            "device": "cpu",
        },
        "max_time": None,
        "torch_threads": 1,
    },
    "quick": {
        "dims": (2, 4, 8, 16),
        "n_support": 50,
        "sigma_min": 0.01,
        "n_eval_tasks": 30,
        "n_points": 256,
        "n_neff_tasks": 20,
        "n_trajectories": 128,
        "neff_steps": 50,
        "learned": _QUICK_MODEL,
        "max_time": 75.0,
        "torch_threads": 1,
    },
    # not a paper preset: the quick models trained 4x longer (about 20 CPU minutes), to see
    # how the exact head's benefit moves with the training budget
    "long": {
        "dims": (2, 4, 8, 16),
        "n_support": 50,
        "sigma_min": 0.01,
        "n_eval_tasks": 30,
        "n_points": 256,
        "n_neff_tasks": 20,
        "n_trajectories": 128,
        "neff_steps": 50,
        "learned": {**_QUICK_MODEL, "max_iter": 6000, "warmup": 200},
        "max_time": 300.0,
        "torch_threads": 1,
    },
    "full": {
        "dims": (2, 4, 8, 16),
        "n_support": 50,
        "sigma_min": 0.01,
        "n_eval_tasks": 100,
        "n_points": 256,
        "n_neff_tasks": 100,
        "n_trajectories": 256,
        "neff_steps": 100,
        "learned": {**LearnedFlowSampler.paper_config(), "device": "auto"},
        "max_time": None,
        "torch_threads": None,
    },
}

#: Times at which ``n_eff`` is reported (``t = 0.5`` is the key one).
NEFF_TIMES = tuple(np.round(np.linspace(0.0, 1.0, 21), 10).tolist())
MID_TIME = 0.5


def _eval_tasks(d: int, cfg: dict, random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """Held-out supports and true points of dimension ``d`` (a seed stream training never uses)."""
    tasks = GaussianMixtureTasks(n_features=d)
    return tasks.sample_tasks(
        cfg["n_eval_tasks"],
        cfg["n_support"],
        cfg["n_points"],
        random_state=derive_seed(random_state, 1, d),
    )


def _neff_job(d: int, cfg: dict, random_state: int) -> dict:
    """(a): median n_eff(t) of the plug-in field along its trajectories, median over tasks."""
    tasks = GaussianMixtureTasks(n_features=d)
    supports, _ = tasks.sample_tasks(
        cfg["n_neff_tasks"], cfg["n_support"], 0, random_state=derive_seed(random_state, 2, d)
    )
    per_task = []
    for b, S in enumerate(supports):
        times, neff = neff_along_path(
            S,
            sigma_min=cfg["sigma_min"],
            times=NEFF_TIMES,
            n_trajectories=cfg["n_trajectories"],
            n_steps=cfg["neff_steps"],
            random_state=derive_seed(random_state, 3, d, b),
        )
        per_task.append(np.median(neff, axis=1))
    per_task = np.asarray(per_task)  # (tasks, T)
    median = np.median(per_task, axis=0)
    q25, q75 = np.percentile(per_task, [25.0, 75.0], axis=0)
    mid = int(np.argmin(np.abs(np.asarray(times) - MID_TIME)))
    return {
        "d": d,
        "times": np.asarray(times),
        "median": median,
        "q25": q25,
        "q75": q75,
        "median_at_0.5": float(median[mid]),
        "per_task_at_0.5": per_task[:, mid],
    }


def _plugin_job(d: int, cfg: dict, random_state: int) -> dict:
    """(b), plug-in: MMD² of the exact NW flow on the held-out tasks."""
    supports, truths = _eval_tasks(d, cfg, random_state)
    model = cfg["learned"]
    sampler = NWFlowSampler(
        sigma_min=cfg["sigma_min"], solver=model["solver"], n_steps=model["n_steps"]
    )
    t0 = time.perf_counter()
    values = []
    for b, (S, true) in enumerate(zip(supports, truths, strict=True)):
        gen = sampler.fit(S).sample(len(true), random_state=derive_seed(random_state, 4, d, b))
        values.append(mmd2(gen, true, reference=true))
    return {
        "d": d,
        "method": "plugin",
        "mmd2": np.asarray(values),
        "eval_seconds": time.perf_counter() - t0,
    }


def _learned_job(d: int, exact_head: bool, cfg: dict, random_state: int) -> dict:
    """(b), learned: train one model on GMM tasks of dimension ``d``, MMD² on held-out tasks."""
    params = {
        **cfg["learned"],
        "exact_head": exact_head,
        "sigma_min": cfg["sigma_min"],
        "support_size": cfg["n_support"],
        "max_time": cfg["max_time"],
        "random_state": derive_seed(random_state, 5, d),  # same seed with and without the head
    }
    with TorchThreads(cfg["torch_threads"]):
        model = LearnedFlowSampler(**params)
        t0 = time.perf_counter()
        model.fit(GaussianMixtureTasks(n_features=d))
        train_seconds = time.perf_counter() - t0
        supports, truths = _eval_tasks(d, cfg, random_state)
        t0 = time.perf_counter()
        generated = model.sample_batch(
            truths.shape[1], supports, random_state=derive_seed(random_state, 6, d)
        )
        values = [
            mmd2(gen, true, reference=true) for gen, true in zip(generated, truths, strict=True)
        ]
        eval_seconds = time.perf_counter() - t0
    tail = max(1, min(100, len(model.loss_curve_) // 5))
    return {
        "d": d,
        "method": "learned_head" if exact_head else "learned_nohead",
        "mmd2": np.asarray(values),
        "train_iterations": int(model.n_iter_),
        "train_seconds": train_seconds,
        "final_loss": float(np.mean(model.loss_curve_[-tail:])),
        "eval_seconds": eval_seconds,
    }


def _dispatch(job: tuple, cfg: dict, random_state: int) -> dict:
    kind, *args = job
    if kind == "neff":
        return _neff_job(*args, cfg, random_state)
    if kind == "plugin":
        return _plugin_job(*args, cfg, random_state)
    return _learned_job(*args, cfg, random_state)


def _summarize(values: np.ndarray) -> dict:
    values = np.asarray(values, dtype=float)
    sem = float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else float("nan")
    return {"mean": float(values.mean()), "sem": sem, "per_task": values}


def _plot(results: dict, output_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims = results["dims"]
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.cm.viridis(np.linspace(0.0, 0.85, len(dims)))
    for color, d in zip(colors, dims, strict=True):
        row = results["neff"][str(d)]
        t = np.asarray(row["times"])
        ax0.plot(t, row["median"], "-o", ms=3, color=color, label=f"d = {d}")
        ax0.fill_between(t, row["q25"], row["q75"], color=color, alpha=0.15)
    ax0.axvline(MID_TIME, color="grey", lw=0.8, ls="--")
    ax0.set_yscale("log")
    ax0.set_xlabel("t")
    ax0.set_ylabel("median n_eff along plug-in trajectories")
    ax0.set_title(f"(a) n_eff(t), m = {results['config']['n_support']}")
    ax0.legend(fontsize=8)

    methods = [
        ("plugin", "plug-in NW"),
        ("learned_head", "learned + exact head"),
        ("learned_nohead", "learned, no head"),
    ]
    x = np.arange(len(dims))
    width = 0.27
    for k, (key, label) in enumerate(methods):
        means = [results["mmd2"][str(d)][key]["mean"] for d in dims]
        sems = [results["mmd2"][str(d)][key]["sem"] for d in dims]
        ax1.bar(x + (k - 1) * width, means, width, yerr=sems, capsize=2, label=label)
    for i, d in enumerate(dims):
        benefit = results["benefit"][str(d)]
        top = max(
            results["mmd2"][str(d)][key]["mean"]
            + np.nan_to_num(results["mmd2"][str(d)][key]["sem"])
            for key, _ in methods
        )
        ax1.annotate(f"{100 * benefit:+.0f}%", (x[i], top), ha="center", va="bottom", fontsize=8)
    ax1.set_ylim(0.0, 1.25 * ax1.get_ylim()[1])  # headroom for the labels
    ax1.set_xticks(x, [f"d = {d}" for d in dims])
    ax1.set_ylabel("mean MMD² on held-out tasks")
    ax1.set_title("(b) MMD² per method (label: exact-head benefit)")
    ax1.legend(fontsize=7, loc="upper left", ncol=3)
    fig.suptitle(f"Dimension collapse on Gaussian-mixture tasks ({results['preset']} preset)")
    fig.tight_layout()
    return save_figure(fig, output_dir, "collapse.png")


def run(
    preset: str = "quick",
    *,
    output_dir: str | Path = "output/experiments/collapse",
    n_jobs: int | None = None,
    random_state: int = 0,
) -> dict:
    """Run the dimension-collapse experiment and write ``results.json`` and ``collapse.png``.

    Parameters
    ----------
    preset : {"tiny", "quick", "long", "full"}, default="quick"
        ``"tiny"``: seconds (the end-to-end test; tiny models, few tasks). ``"quick"``: a few
        minutes on a CPU: :class:`~skflow.LearnedFlowSampler` with the default architecture
        and 16 tasks x 64 targets per batch, 1500 iterations per model (8 models; 75 s
        wall-clock guard each), 30 held-out tasks x 256 points, one Torch thread per job.
        ``"long"`` (not a paper preset): the same with 6000 iterations (about 20 CPU
        minutes). ``"full"``: the paper's scale
        (:meth:`LearnedFlowSampler.paper_config`, ``device="auto"``, 100 held-out tasks), a
        GPU job.
    output_dir : str or Path, default="output/experiments/collapse"
        Folder of ``results.json`` and ``collapse.png`` (created).
    n_jobs : int, optional
        joblib workers over the independent jobs (n_eff per ``d``, plug-in per ``d``, one
        training per ``d`` and head); ``None`` runs them in this process. Under
        ``joblib.parallel_config(backend="dask")`` they run on a Dask cluster.
    random_state : int, default=0
        Seed of every task draw, training and noise (training under ``max_time`` also
        depends on the machine's speed).

    Returns
    -------
    results : dict
        ``config``, per-``d`` ``neff`` curves, ``mmd2`` per method (mean, sem, per task),
        ``benefit`` per ``d``, ``training`` logs, timings and ``summary`` with the key numbers:
        ``median_neff_at_0.5`` and ``exact_head_benefit`` per ``d``, the MMD² means, and the
        booleans ``neff_decreasing_in_d`` and ``benefit_d_min_gt_d_max``.

    Examples
    --------
    >>> from skflow.experiments import collapse
    >>> sorted(collapse.PRESETS), collapse.PRESETS["quick"]["dims"]
    (['full', 'long', 'quick', 'tiny'], (2, 4, 8, 16))
    >>> res = collapse.run("tiny", output_dir="out/collapse")  # doctest: +SKIP
    >>> res["summary"]["median_neff_at_0.5"]  # doctest: +SKIP
    {'2': 13.9..., '8': 2.86..., '16': 1.69...}
    """
    from joblib import Parallel, delayed

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}.")
    cfg = PRESETS[preset]
    out = prepare_output(output_dir)
    dims = [int(d) for d in cfg["dims"]]
    seed = int(random_state)

    # Trainings first (the long jobs), then the cheap ones, so that workers stay busy.
    jobs: list[tuple] = [("learned", d, head) for d in dims for head in (True, False)]
    jobs += [("plugin", d) for d in dims] + [("neff", d) for d in dims]
    t_start = time.perf_counter()
    with TorchThreads(cfg["torch_threads"]):
        outputs = Parallel(n_jobs=n_jobs)(delayed(_dispatch)(job, cfg, seed) for job in jobs)
    wall = time.perf_counter() - t_start

    neff = {str(o["d"]): o for o in outputs if "method" not in o}
    by_method = {(o["d"], o["method"]): o for o in outputs if "method" in o}
    mmd = {
        str(d): {
            key: _summarize(by_method[(d, key)]["mmd2"])
            for key in ("plugin", "learned_head", "learned_nohead")
        }
        for d in dims
    }
    benefit, paired = {}, {}
    for d in dims:
        with_head = by_method[(d, "learned_head")]["mmd2"]
        without = by_method[(d, "learned_nohead")]["mmd2"]
        base = float(without.mean())
        benefit[str(d)] = float((base - with_head.mean()) / base) if base != 0 else float("nan")
        diff = without - with_head  # same held-out tasks and true points: paired
        sem = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("nan")
        paired[str(d)] = {
            "mean_difference": float(diff.mean()),
            "sem_difference": sem,
            # delta-method standard error of the benefit (denominator taken as fixed)
            "benefit_sem": sem / abs(base) if base != 0 else float("nan"),
            "tasks_where_head_wins": int(np.sum(diff > 0)),
            "n_tasks": int(diff.size),
        }
    training = {
        f"{key}_d{d}": {
            k: by_method[(d, key)][k]
            for k in ("train_iterations", "train_seconds", "final_loss", "eval_seconds")
        }
        for d in dims
        for key in ("learned_head", "learned_nohead")
    }
    neff_mid = [neff[str(d)]["median_at_0.5"] for d in dims]
    summary = {
        "dims": dims,
        "median_neff_at_0.5": dict(zip(map(str, dims), neff_mid, strict=True)),
        "neff_decreasing_in_d": bool(np.all(np.diff(neff_mid) < 0)),
        "mmd2_plugin": {str(d): mmd[str(d)]["plugin"]["mean"] for d in dims},
        "mmd2_learned_head": {str(d): mmd[str(d)]["learned_head"]["mean"] for d in dims},
        "mmd2_learned_nohead": {str(d): mmd[str(d)]["learned_nohead"]["mean"] for d in dims},
        "exact_head_benefit": benefit,
        "exact_head_benefit_sem": {k: v["benefit_sem"] for k, v in paired.items()},
        "tasks_where_head_wins": {k: v["tasks_where_head_wins"] for k, v in paired.items()},
        "benefit_d_min_gt_d_max": bool(benefit[str(dims[0])] > benefit[str(dims[-1])]),
        "train_iterations": {k: v["train_iterations"] for k, v in training.items()},
        "wall_seconds": wall,
        "paper": {"exact_head_benefit": {"2": 0.28, "16": 0.0}, "neff": {"2": 9, "16": 1}},
    }
    config = {k: v for k, v in cfg.items() if k != "learned"}
    config["learned"] = {k: v for k, v in cfg["learned"].items()}
    results = {
        "experiment": "collapse",
        "preset": preset,
        "random_state": seed,
        "config": config,
        "dims": dims,
        "neff": neff,
        "mmd2": mmd,
        "benefit": benefit,
        "benefit_paired": paired,
        "training": training,
        "plugin_eval_seconds": {str(d): by_method[(d, "plugin")]["eval_seconds"] for d in dims},
        "machine": _machine(),
        "summary": to_plain(summary),  # plain Python: printable as JSON
    }
    _plot(results, out)
    write_json(results, out)
    return results


def _machine() -> dict:
    import torch

    return {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "torch": torch.__version__,
        "cuda": bool(torch.cuda.is_available()),
    }
