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
(b) per held-out task, the MMD² of the plug-in :class:`~skflow.NWFlowSampler` and of two
    :class:`~skflow.LearnedFlowSampler` trainings, with and without the exact head (same seed,
    same budget), under the protocol of :mod:`skflow_experiments.protocol`: ``n_seeds``
    training seeds with their own held-out tasks, both median-heuristic conventions, the noise
    floor, 95 % bootstrap intervals paired over tasks;
(c) the exact head's benefit ``1 - mean(MMD²_with) / mean(MMD²_without)`` with its interval.

Run it with ``python -m skflow_experiments collapse --quick`` (or ``--full``; add
``--write-docs`` to update ``docs/results.md``); the results go to
``output/experiments/collapse/results.json`` and ``collapse.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from skflow import LearnedFlowSampler
from skflow.diagnostics import neff_along_path
from skflow.tasks import GaussianMixtureTasks

from ._experiment import Experiment, Run
from ._io import derive_seed, save_figure
from ._jobs import learned_samples, plugin_samples
from ._report import convention_tables, section_head, value_ci
from .protocol import (
    CONVENTIONS,
    compare_to_baseline,
    per_task_scores,
    training_budget,
)

__all__ = ["PRESETS", "SPEC", "docs_section", "run", "write_docs"]

#: Learned-model settings of the quick preset: the library's default architecture
#: (d_model 64, 4 heads, 2 layers) with half-size batches (16 tasks x 64 targets), so that
#: each training of 1500 iterations takes under a CPU minute (24 trainings: 4 dims x 2 models
#: x 3 seeds). The budget is the iteration count (the same for the models with and without the
#: head); the preset's ``max_time`` is only a guard against a very slow machine.
_QUICK_MODEL = {
    "batch_tasks": 16,
    "n_targets": 64,
    "max_iter": 1500,
    "warmup": 100,
    "device": "cpu",
    "solver": "heun",
    "n_steps": 100,
}

_QUICK: dict[str, Any] = {
    "dims": (2, 4, 8, 16),
    "n_support": 50,
    "sigma_min": 0.01,
    "n_seeds": 3,
    "n_eval_tasks": 100,
    "n_points": 256,
    "n_neff_tasks": 20,
    "n_trajectories": 128,
    "neff_steps": 50,
    "learned": _QUICK_MODEL,
    "max_time": 75.0,
    "torch_threads": 1,
}

#: Experiment presets. ``learned`` holds :class:`~skflow.LearnedFlowSampler` parameters
#: (``max_time`` caps each training in seconds); ``torch_threads`` is the number of Torch
#: threads each job uses (``None``: leave Torch's setting).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "dims": (2, 8, 16),
        "n_support": 50,
        "sigma_min": 0.01,
        "n_seeds": 2,
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
    "quick": _QUICK,
    # tries the pipeline in about a minute on two cores: not a result (never in the docs)
    "smoke": {
        "dims": (2, 16),
        "n_support": 50,
        "sigma_min": 0.01,
        "n_seeds": 2,
        "n_eval_tasks": 8,
        "n_points": 128,
        "n_neff_tasks": 4,
        "n_trajectories": 64,
        "neff_steps": 20,
        "learned": {**_QUICK_MODEL, "max_iter": 80, "warmup": 10, "n_steps": 30},
        "max_time": None,
        "torch_threads": 1,
    },
    # not a paper preset: the quick models trained 4x longer (about 20 CPU minutes), to see
    # how the exact head's benefit moves with the training budget
    "long": {
        **_QUICK,
        "learned": {**_QUICK_MODEL, "max_iter": 6000, "warmup": 200},
        "max_time": 300.0,
    },
    "full": {
        "dims": (2, 4, 8, 16),
        "n_support": 50,
        "sigma_min": 0.01,
        "n_seeds": 3,
        "n_eval_tasks": 200,
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
#: Learned models (result key -> ``exact_head``).
MODELS = {"learned_head": True, "learned_nohead": False}
#: The paper's exact-head benefit per d, as the ratio MMD²(no head) / MMD²(head).
PAPER_HEAD_RATIO = {2: 1.0 / (1.0 - 0.28), 16: 1.0}


def _eval_tasks(d: int, cfg: dict, seed: int):
    """Held-out supports, true points and a second true sample (noise floor) of ``(d, seed)``."""
    n = cfg["n_points"]
    S, Q = GaussianMixtureTasks(n_features=d).sample_tasks(
        cfg["n_eval_tasks"], cfg["n_support"], 2 * n, random_state=derive_seed(seed, 1, d)
    )
    return S, Q[:, :n], Q[:, n:]


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
        "kind": "neff",
        "d": d,
        "times": np.asarray(times),
        "median": median,
        "q25": q25,
        "q75": q75,
        "median_at_0.5": float(median[mid]),
        "per_task_at_0.5": per_task[:, mid],
    }


def _plugin_job(d: int, seed: int, cfg: dict) -> dict:
    """(b), plug-in: MMD² of the exact NW flow on the held-out tasks, and the noise floor."""
    supports, truths, floors = _eval_tasks(d, cfg, seed)
    generated = plugin_samples(supports, truths.shape[1], cfg, seed, noise_keys=(4, d))
    return {
        "kind": "plugin",
        "d": d,
        "seed": seed,
        "plugin": per_task_scores(generated, truths),
        "floor": per_task_scores(floors, truths),
    }


def _learned_job(d: int, method: str, seed: int, cfg: dict) -> dict:
    """(b), learned: train one model on GMM tasks of dimension ``d``, MMD² on held-out tasks."""
    params = {
        **cfg["learned"],
        "exact_head": MODELS[method],
        "sigma_min": cfg["sigma_min"],
        "support_size": cfg["n_support"],
        "max_time": cfg["max_time"],
        "random_state": derive_seed(seed, 5, d),  # the same seed with and without the head
    }
    supports, truths, _ = _eval_tasks(d, cfg, seed)
    generated, record = learned_samples(
        params,
        GaussianMixtureTasks(n_features=d),
        supports,
        truths.shape[1],
        sample_seed=derive_seed(seed, 6, d),
        seed=seed,
        torch_threads=cfg["torch_threads"],
    )
    return {
        "kind": "learned",
        "d": d,
        "seed": seed,
        "method": method,
        method: per_task_scores(generated, truths),
        "training": record,
    }


def _dispatch(job: tuple, cfg: dict, random_state: int) -> dict:
    kind, *args = job
    if kind == "neff":
        return _neff_job(*args, cfg, random_state)
    if kind == "plugin":
        return _plugin_job(*args, cfg)
    return _learned_job(*args, cfg)


def _stack(outputs: list[dict], d: int, key: str, seeds: list[int]) -> dict[str, np.ndarray]:
    """Convention -> (seeds, tasks) table of ``key`` for dimension ``d``."""
    by_seed = {o["seed"]: o[key] for o in outputs if o.get("d") == d and key in o}
    return {c: np.stack([by_seed[s][c] for s in seeds]) for c in CONVENTIONS}


def _compare_dimension(d: int, outputs: list[dict], seeds: list[int]) -> dict:
    """The protocol's comparisons of one dimension: head vs no head, each learned vs plug-in."""
    table = {k: _stack(outputs, d, k, seeds) for k in ("plugin", "floor", *MODELS)}
    return {
        "head_vs_nohead": compare_to_baseline(
            table["learned_nohead"],
            table["learned_head"],
            table["floor"],
            paper_ratio=PAPER_HEAD_RATIO.get(d),
        ),
        **{
            f"{m}_vs_plugin": compare_to_baseline(table["plugin"], table[m], table["floor"])
            for m in MODELS
        },
        "per_task": table,
        "training": {
            m: [o["training"] for o in outputs if o.get("method") == m and o["d"] == d]
            for m in MODELS
        },
    }


def _benefit(comparison: dict) -> dict:
    """The head's benefit ``1 - mean(head) / mean(no head)`` and its interval."""
    with np.errstate(divide="ignore"):
        ratios = 1.0 / np.asarray([comparison["ratio"], *comparison["ratio_ci"]], dtype=float)
    return {
        "benefit": float(1.0 - ratios[0]),
        "ci": [float(1.0 - ratios[1]), float(1.0 - ratios[2])],
        "ci_contains_zero": comparison["difference_ci_contains_zero"],
    }


def _summary(dims: list[int], neff: dict, per_d: dict) -> dict:
    """Key numbers: n_eff at t = 0.5 per d; per d and convention the head's benefit and the
    ratio plug-in / learned (with the head) with their intervals."""
    neff_mid = [neff[str(d)]["median_at_0.5"] for d in dims]
    out: dict = {
        "dims": dims,
        "median_neff_at_0.5": dict(zip(map(str, dims), neff_mid, strict=True)),
        "neff_decreasing_in_d": bool(np.all(np.diff(neff_mid) < 0)),
    }
    for d in dims:
        res = per_d[str(d)]
        out[f"d={d}"] = {
            conv: {
                "exact_head_benefit": _benefit(res["head_vs_nohead"][conv]),
                "ratio_plugin_over_learned_head": res["learned_head_vs_plugin"][conv]["ratio"],
                "ratio_plugin_over_learned_head_ci": res["learned_head_vs_plugin"][conv][
                    "ratio_ci"
                ],
                "ratio_plugin_over_learned_nohead": res["learned_nohead_vs_plugin"][conv]["ratio"],
                "ratio_plugin_over_learned_nohead_ci": res["learned_nohead_vs_plugin"][conv][
                    "ratio_ci"
                ],
                "noise_floor": res["head_vs_nohead"][conv]["noise_floor"],
            }
            for conv in CONVENTIONS
        }
    out["paper"] = {"exact_head_benefit": {"2": 0.28, "16": 0.0}, "neff": {"2": 9, "16": 1}}
    return out


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
    ax0.legend(fontsize=10)
    x, width = np.arange(len(dims)), 0.27
    for k, key in enumerate(("plugin", *MODELS)):
        values = [
            np.asarray(results["per_dimension"][str(d)]["per_task"][key]["true"]) for d in dims
        ]
        means = [v.mean() for v in values]
        sems = [v.std(ddof=1) / np.sqrt(v.size) for v in values]
        ax1.bar(x + (k - 1) * width, means, width, yerr=sems, capsize=2, label=key)
    ax1.set_xticks(x, [f"d = {d}" for d in dims])
    ax1.set_ylabel("MMD², true-point bandwidth (mean ± sem)")
    ax1.set_title("(b) MMD² per method, all seeds and tasks")
    ax1.legend(fontsize=10, loc="upper left")
    fig.suptitle(f"Dimension collapse on Gaussian-mixture tasks ({results['preset']} preset)")
    fig.tight_layout()
    return save_figure(fig, output_dir, "collapse.png")


def _jobs(dims: list[int], seeds: list[int]) -> list[tuple]:
    """Trainings first (the long jobs), then the cheap ones, so that workers stay busy."""
    jobs: list[tuple] = [("learned", d, m, s) for d in dims for s in seeds for m in MODELS]
    jobs += [("plugin", d, s) for d in dims for s in seeds]
    return jobs + [("neff", d) for d in dims]


def _measure(run: Run) -> list[dict]:
    """Every training, plug-in and n_eff job (the run's work)."""
    dims = [int(d) for d in run.cfg["dims"]]
    return run.jobs(_dispatch, [(job, run.cfg, run.random_state) for job in _jobs(dims, run.seeds)])


def _assemble(run: Run, outputs: list[dict]) -> dict[str, Any]:
    """``results.json``: the n_eff curves and comparisons per dimension, config, records."""
    dims = [int(d) for d in run.cfg["dims"]]
    neff = {str(o["d"]): o for o in outputs if o["kind"] == "neff"}
    per_d = {str(d): _compare_dimension(d, outputs, run.seeds) for d in dims}
    return {
        "experiment": "collapse",
        "preset": run.preset,
        "seeds": run.seeds,
        "config": run.cfg,
        "dims": dims,
        "neff": neff,
        "per_dimension": per_d,
        "summary": _summary(dims, neff, per_d) | {"wall_seconds": round(run.wall, 1)},
        "machine": run.machine(),
    }


def run(preset: str = "quick", *, progress: bool = False, **options: Any) -> dict:
    """Run the dimension-collapse experiment and write ``results.json`` and ``collapse.png``.

    Parameters
    ----------
    preset : {"tiny", "smoke", "quick", "long", "full"}, default="quick"
        ``"tiny"``: seconds (the end-to-end test; tiny models, few tasks). ``"smoke"``: tries
        the pipeline (2 dimensions, 2 seeds x 8 tasks, 80 iterations per model): not a
        result. ``"quick"``: :class:`~skflow.LearnedFlowSampler` with the default
        architecture and 16 tasks x 64 targets per batch, 1500 iterations per model (75 s
        wall-clock guard each), 3 seeds x 100 held-out tasks x 256 points, one Torch thread
        per job. ``"long"`` (not a
        paper preset): the same with 6000 iterations. ``"full"``: the paper's scale
        (:meth:`LearnedFlowSampler.paper_config`, ``device="auto"``), a GPU job.
    progress : bool, default=False
        Show a progress bar (stderr) over the work, with an ETA.
    **options
        Options of the shared runner (:meth:`~skflow_experiments._experiment.Experiment.run`):
        ``output_dir`` (default ``output/experiments/collapse``, created: ``results.json`` and the
        figure), ``n_jobs`` (joblib workers over the independent jobs: n_eff per ``d``, plug-in per
        ``d`` and seed, one training per ``d``, head and seed; None runs them in this process, and
        under ``joblib.parallel_config(backend="dask")`` on a Dask cluster), ``random_state`` (the
        first seed; the seeds are ``random_state, random_state + 1, ...``), ``seeds`` and
        ``n_tasks`` (overrides of the preset's ``n_seeds`` and ``n_eval_tasks``).

    Returns
    -------
    results : dict
        ``config``, ``seeds``, per-``d`` ``neff`` curves, ``per_dimension`` (the protocol's
        comparisons: head vs no head, each learned model vs the plug-in, per-task tables,
        training records), ``machine`` and ``summary`` with the key numbers:
        ``median_neff_at_0.5`` per ``d``, ``neff_decreasing_in_d``, and per ``d`` and
        convention the exact head's benefit and the plug-in / learned ratios with intervals.

    Examples
    --------
    >>> from skflow_experiments import collapse
    >>> sorted(collapse.PRESETS), collapse.PRESETS["quick"]["dims"]
    (['full', 'long', 'quick', 'smoke', 'tiny'], (2, 4, 8, 16))
    >>> res = collapse.run("tiny", output_dir="out/collapse")  # doctest: +SKIP
    >>> res["summary"]["median_neff_at_0.5"]  # doctest: +SKIP
    """
    return SPEC.run(preset, progress=progress, **options)


def _f(x: float) -> str:
    return "inf" if x == np.inf else f"{x:.3g}"


#: The sentences under the tables of the results page: what each table shows, in words.
_NEFF_NOTE = (
    "In words: the number of support points the plug-in field effectively averages at mid-"
    "path (median n_eff at t = 0.5), per dimension d; 1 means every sample follows a single "
    "support point (nearest-neighbour collapse)."
)
_TABLE_NOTE = (
    "In words: one row per dimension d. The MMD² columns are means over all held-out tasks "
    "and seeds (lower is closer to the true distribution; the noise floor is the MMD² between"
    " two true samples). The exact head's reduction is how much lower the MMD² of the model "
    "with the head is than that of the same model without it (positive: the head helps); an "
    "MMD² ratio plug-in / learned above 1 means the learned model is closer than the plug-in."
)


def _convention_table(results: dict, conv: str) -> str:
    rows = [
        "| d | MMD² plug-in | MMD² learned, with exact head | MMD² learned, without head "
        "| noise floor: mean (95th percentile) | exact head's MMD² reduction [95 % CI] "
        "(paper) | MMD² ratio plug-in / learned with head [95 % CI] | MMD² ratio plug-in / "
        "learned without head [95 % CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    paper = {2: "+28 %", 16: "0 %"}
    for d in results["dims"]:
        res, s = results["per_dimension"][str(d)], results["summary"][f"d={d}"][conv]
        hv, b = res["head_vs_nohead"][conv], s["exact_head_benefit"]
        fl = s["noise_floor"]
        ratio = {
            m: f"{_f(res[f'{m}_vs_plugin'][conv]['ratio'])} "
            f"[{_f(res[f'{m}_vs_plugin'][conv]['ratio_ci'][0])}, "
            f"{_f(res[f'{m}_vs_plugin'][conv]['ratio_ci'][1])}]"
            for m in MODELS
        }
        rows.append(
            f"| {d} | {_f(res['learned_head_vs_plugin'][conv]['mean_a'])} | {_f(hv['mean_b'])} "
            f"| {_f(hv['mean_a'])} | {_f(fl['mean'])} ({_f(fl['q95'])}) | "
            f"{100 * b['benefit']:+.0f} % [{100 * b['ci'][0]:+.0f} %, {100 * b['ci'][1]:+.0f} %] "
            f"({paper.get(d, '–')}) | {ratio['learned_head']} | {ratio['learned_nohead']} |"
        )
    return "\n".join(rows)


def _budget(results: dict) -> str:
    runs = [
        t
        for d in results["dims"]
        for m in MODELS
        for t in results["per_dimension"][str(d)]["training"][m]
    ]
    return training_budget(runs, results["config"]["max_time"])


def docs_section(results: dict, command: str) -> str:
    """The Markdown of the collapse section of ``docs/results.md``.

    The command, the preset and the machine; the median n_eff at t = 0.5 per d; then one
    table per MMD² bandwidth convention: per d, the MMD² of the plug-in and of the learned
    models with and without the exact head, the noise floor and the head's benefit.

    Parameters
    ----------
    results : dict
        The output of :func:`run` (``config``, ``dims``, ``summary``, ``per_dimension``,
        ``machine``, ``preset``, ``seeds``).
    command : str
        The exact command line that produced ``results``.

    Returns
    -------
    text : str
        Markdown: a paragraph, the n_eff row and two tables.
    """
    cfg, s = results["config"], results["summary"]
    neff = " | ".join(f"{s['median_neff_at_0.5'][str(d)]:.2f}" for d in results["dims"])
    preset = (
        f"Preset `{results['preset']}`: seeds {results['seeds']}, {cfg['n_eval_tasks']} "
        f"held-out tasks per seed and d, m = {cfg['n_support']}, {cfg['n_points']} generated vs "
        f"{cfg['n_points']} true points per task (and {cfg['n_points']} more for the noise "
        f"floor). Wall time {s['wall_seconds']:.0f} s. " + _budget(results)
    )
    parts = [
        *section_head(results, command, preset),
        "",
        "| d | " + " | ".join(str(d) for d in results["dims"]) + " |",
        "|---|" + "---|" * len(results["dims"]),
        f"| median n_eff at t = 0.5 (plug-in trajectories; paper 9 → 1) | {neff} |",
        "",
        _NEFF_NOTE,
    ]
    parts += convention_tables(
        lambda conv: _convention_table(results, conv),
        ("true points", "pooled generated + true points"),
        "MMD², median heuristic from the {label}; intervals: 95 % bootstrap over tasks, "
        "stratified by seed. A benefit interval that contains 0 is no resolved benefit.",
        _TABLE_NOTE,
    )
    return "\n".join(parts)


def _cli_rows(s: dict) -> list[tuple[str, str]]:
    """The headline numbers the command line prints after a run: ``(quantity, value)`` rows."""
    rows = []
    for d in s["dims"]:
        t = s[f"d={d}"]["true"]
        benefit = t["exact_head_benefit"]
        rows += [
            (f"d = {d}: median n_eff at t = 0.5", f"{s['median_neff_at_0.5'][str(d)]:.2f}"),
            (
                f"d = {d}: exact head's MMD² reduction",
                value_ci(100 * benefit["benefit"], [100 * c for c in benefit["ci"]], "{:+.0f} %"),
            ),
            (
                f"d = {d}: MMD² plug-in / learned with head",
                value_ci(
                    t["ratio_plugin_over_learned_head"], t["ratio_plugin_over_learned_head_ci"]
                ),
            ),
        ]
    return rows


#: The experiment as a specification: presets, work, results, figure, docs, headline rows.
SPEC = Experiment(
    name="collapse",
    presets=PRESETS,
    measure=_measure,
    assemble=_assemble,
    units=lambda cfg, seeds: len(_jobs(list(cfg["dims"]), seeds)),
    desc="collapse: trainings, then plug-in and n_eff jobs",
    figure=lambda results, outputs, folder: _plot(results, folder),
    docs=docs_section,
    headline=_cli_rows,
)


def write_docs(results: dict, command: str, path: str | Path | None = None) -> Path:
    """Write :func:`docs_section` between the ``collapse`` markers of the results page."""
    return SPEC.write_docs(results, command, path)
