"""Leave-one-family-out: does a learned sampler generalize to a task family it never saw?

The paper's code meta-trains on a "mixed" distribution of task families (anisotropic
Gaussian mixtures, rings, moons, spirals) and tests generalization by leaving one family out.
For every family ``f`` and every training seed this module trains two
:class:`~skflow.LearnedFlowSampler` models with the same budget:

* ``left_out``: trained on :class:`~skflow.tasks.MixedTasks` of the *other* families (equal
  weights), i.e. it has never seen a task of ``f``;
* ``in_family``: trained on tasks of ``f`` alone (what a model that knew the family reaches),

and scores them, with the plug-in :class:`~skflow.NWFlowSampler` (same ``sigma_min``, solver
and steps), on held-out tasks of ``f``. Every number follows
:mod:`skflow_experiments.protocol`: seeds x held-out tasks, both median-heuristic conventions,
the noise floor, 95 % bootstrap intervals paired over tasks. The comparisons are plug-in vs
``left_out`` (does the learned model still beat kernel smoothing on an unseen family?),
plug-in vs ``in_family``, and ``left_out`` vs ``in_family`` (the cost of not having seen it).

Run it with ``python -m skflow_experiments families --quick`` (add ``--write-docs`` to update
``docs/results.md``), or call :func:`run`; it writes ``results.json`` and ``families.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from skflow import LearnedFlowSampler
from skflow.tasks import GaussianMixtureTasks, MixedTasks, MoonsTasks, RingTasks, SpiralTasks

from ._experiment import Experiment, Run
from ._io import derive_seed, save_figure
from ._jobs import learned_samples, plugin_samples
from ._report import convention_tables, section_head, value_ci
from .collapse import PRESETS as COLLAPSE_PRESETS
from .protocol import (
    CONVENTIONS,
    compare_to_baseline,
    paired_comparison,
    per_task_scores,
    training_budget,
)

__all__ = ["FAMILIES", "MODELS", "PRESETS", "SPEC", "docs_section", "run", "write_docs"]

#: Task families, in the order of the paper's mixed meta-distribution.
FAMILIES = ("gmm", "rings", "moons", "spirals")
#: Learned models trained per family and seed.
MODELS = ("left_out", "in_family")

_FAMILY_CLASSES = {
    "gmm": GaussianMixtureTasks,
    "rings": RingTasks,
    "moons": MoonsTasks,
    "spirals": SpiralTasks,
}

#: The models of the collapse experiment's presets (same architecture, batches and
#: iterations: the library's default architecture, 16 tasks x 64 targets, 1500 iterations
#: in the quick preset, under a CPU minute per training at d = 2; 24 trainings here).
_MODELS_OF = {name: COLLAPSE_PRESETS[name]["learned"] for name in ("tiny", "quick")}

#: Presets of :func:`run` (``learned``: :class:`~skflow.LearnedFlowSampler` parameters;
#: ``max_time``: wall-clock guard per training; ``torch_threads``: Torch threads per job).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "n_features": 2,
        "n_support": 50,
        "sigma_min": 0.01,
        "n_seeds": 2,
        "n_eval_tasks": 3,
        "n_points": 64,
        "learned": _MODELS_OF["tiny"],
        "max_time": None,
        "torch_threads": 1,
    },
    # tries the pipeline in about a minute on two cores: not a result (never in the docs)
    "smoke": {
        "n_features": 2,
        "n_support": 50,
        "sigma_min": 0.01,
        "n_seeds": 2,
        "n_eval_tasks": 6,
        "n_points": 64,
        "learned": {**_MODELS_OF["quick"], "max_iter": 40, "warmup": 5, "n_steps": 20},
        "max_time": None,
        "torch_threads": 1,
    },
    "quick": {
        "n_features": 2,
        "n_support": 50,
        "sigma_min": 0.01,
        "n_seeds": 3,
        "n_eval_tasks": 100,
        "n_points": 256,
        "learned": _MODELS_OF["quick"],
        "max_time": 75.0,
        "torch_threads": 1,
    },
    "full": {
        "n_features": 2,
        "n_support": 50,
        "sigma_min": 0.01,
        "n_seeds": 3,
        "n_eval_tasks": 200,
        "n_points": 256,
        "learned": {**LearnedFlowSampler.paper_config(), "device": "auto"},
        "max_time": None,
        "torch_threads": None,
    },
}


def _family(name: str, d: int):
    return _FAMILY_CLASSES[name](n_features=d)


def _training_source(model: str, family: str, d: int):
    """The task source a model trains on: the other families mixed, or the family alone."""
    if model == "in_family":
        return _family(family, d)
    return MixedTasks([_family(f, d) for f in FAMILIES if f != family])


def _eval_tasks(family: str, cfg: dict, seed: int):
    """Held-out supports, true points and a second true sample (the noise floor)."""
    n, k = cfg["n_points"], FAMILIES.index(family)
    S, Q = _family(family, cfg["n_features"]).sample_tasks(
        cfg["n_eval_tasks"], cfg["n_support"], 2 * n, random_state=derive_seed(seed, 1, k)
    )
    return S, Q[:, :n], Q[:, n:]


def _plugin_job(family: str, seed: int, cfg: dict) -> dict:
    """The plug-in's per-task MMD² on the held-out tasks of ``family``, and the noise floor."""
    supports, truths, floors = _eval_tasks(family, cfg, seed)
    k = FAMILIES.index(family)
    generated = plugin_samples(supports, truths.shape[1], cfg, seed, noise_keys=(4, k))
    return {
        "family": family,
        "seed": seed,
        "plugin": per_task_scores(generated, truths),
        "floor": per_task_scores(floors, truths),
        "_figure": {"support": supports[0], "true": truths[0], "plugin": generated[0]},
    }


def _learned_job(family: str, model_name: str, seed: int, cfg: dict) -> dict:
    """Train one model (``left_out`` or ``in_family``) and score it on ``family``'s tasks."""
    k, j = FAMILIES.index(family), MODELS.index(model_name)
    params = {
        **cfg["learned"],
        "sigma_min": cfg["sigma_min"],
        "support_size": cfg["n_support"],
        "max_time": cfg["max_time"],
        "random_state": derive_seed(seed, 5, k, j),
    }
    supports, truths, _ = _eval_tasks(family, cfg, seed)
    generated, record = learned_samples(
        params,
        _training_source(model_name, family, cfg["n_features"]),
        supports,
        truths.shape[1],
        sample_seed=derive_seed(seed, 6, k),
        seed=seed,
        torch_threads=cfg["torch_threads"],
    )
    return {
        "family": family,
        "seed": seed,
        "model": model_name,
        model_name: per_task_scores(generated, truths),
        "_figure": {model_name: generated[0]},
        "training": record,
    }


def _dispatch(job: tuple, cfg: dict) -> dict:
    kind, *args = job
    return _plugin_job(*args, cfg) if kind == "plugin" else _learned_job(*args, cfg)


def _jobs(seeds: list[int]) -> list[tuple]:
    """Trainings first (the long jobs), then the plug-in evaluations."""
    jobs: list[tuple] = [("learned", f, m, s) for f in FAMILIES for s in seeds for m in MODELS]
    return jobs + [("plugin", f, s) for f in FAMILIES for s in seeds]


def _stack(outputs: list[dict], family: str, key: str, seeds: list[int]) -> dict:
    """Convention -> (seeds, tasks) table of ``key`` for ``family``."""
    by_seed = {o["seed"]: o[key] for o in outputs if o["family"] == family and key in o}
    return {c: np.stack([by_seed[s][c] for s in seeds]) for c in CONVENTIONS}


def _compare_family(family: str, outputs: list[dict], seeds: list[int]) -> dict:
    """The protocol's three comparisons on the held-out tasks of one family."""
    table = {k: _stack(outputs, family, k, seeds) for k in ("plugin", "floor", *MODELS)}
    return {
        "plugin_vs_left_out": compare_to_baseline(
            table["plugin"], table["left_out"], table["floor"]
        ),
        "plugin_vs_in_family": compare_to_baseline(
            table["plugin"], table["in_family"], table["floor"]
        ),
        "left_out_vs_in_family": {
            c: paired_comparison(table["left_out"][c], table["in_family"][c]) for c in CONVENTIONS
        },
        "per_task": table,
        "training": {
            m: [o["training"] for o in outputs if o.get("model") == m and o["family"] == family]
            for m in MODELS
        },
    }


def _summary(per_family: dict) -> dict:
    """Per family and convention: the ratios with their intervals and what they resolve."""
    out: dict[str, Any] = {}
    for family, res in per_family.items():
        row = {}
        for conv in CONVENTIONS:
            lo, inf = res["plugin_vs_left_out"][conv], res["plugin_vs_in_family"][conv]
            gap = res["left_out_vs_in_family"][conv]
            row[conv] = {
                "ratio_plugin_over_left_out": lo["ratio"],
                "ratio_plugin_over_left_out_ci": lo["ratio_ci"],
                "left_out_beats_plugin": bool(lo["difference_ci"][0] > 0),
                "ratio_plugin_over_in_family": inf["ratio"],
                "ratio_plugin_over_in_family_ci": inf["ratio_ci"],
                "ratio_left_out_over_in_family": gap["ratio"],
                "ratio_left_out_over_in_family_ci": gap["ratio_ci"],
                "noise_floor": lo["noise_floor"],
            }
        out[family] = row
    return out


def _figure_data(outputs: list[dict], seed: int) -> dict[str, dict]:
    """Family -> the first held-out task of ``seed``: support, true and generated points."""
    data: dict[str, dict] = {f: {} for f in FAMILIES}
    for o in outputs:
        if o["seed"] == seed:
            data[o["family"]].update(o["_figure"])
    return data


def _plot(per_family: dict, fig_data: dict, output_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(FAMILIES) + 1, figsize=(4 * (len(FAMILIES) + 1), 4))
    styles = {"true": "0.6", "plugin": "tab:red", "left_out": "tab:blue"}
    for ax, family in zip(axes, FAMILIES, strict=False):
        pts = fig_data[family]
        for key, color in styles.items():
            ax.scatter(*pts[key][:, :2].T, s=3, c=color, label=key)
        ax.scatter(*pts["support"][:, :2].T, s=30, facecolors="none", edgecolors="k")
        ax.set_title(f"{family} (left out of training)")
        ax.set_aspect("equal")
    axes[0].legend(fontsize=10, markerscale=3)
    x, width = np.arange(len(FAMILIES)), 0.27
    for k, key in enumerate(("plugin", *MODELS)):
        values = [np.asarray(per_family[f]["per_task"][key]["true"]) for f in FAMILIES]
        means = [v.mean() for v in values]
        sems = [v.std(ddof=1) / np.sqrt(v.size) for v in values]
        axes[-1].bar(x + (k - 1) * width, means, width, yerr=sems, capsize=2, label=key)
    axes[-1].set_xticks(x, FAMILIES)
    axes[-1].set_ylabel("MMD², true-point bandwidth (mean ± sem)")
    axes[-1].legend(fontsize=10)
    fig.tight_layout()
    return save_figure(fig, output_dir, "families.png")


def _measure(run: Run) -> list[dict]:
    """Every training and plug-in job of every seed (the run's work)."""
    return run.jobs(_dispatch, [(job, run.cfg) for job in _jobs(run.seeds)])


def _assemble(run: Run, outputs: list[dict]) -> dict[str, Any]:
    """``results.json``: the comparisons per family, the config and the records."""
    per_family = {f: _compare_family(f, outputs, run.seeds) for f in FAMILIES}
    return {
        "experiment": "families",
        "preset": run.preset,
        "seeds": run.seeds,
        "summary": _summary(per_family) | {"wall_seconds": round(run.wall, 1)},
        "config": run.cfg,
        "per_family": per_family,
        "seconds": {"total": round(run.wall, 1)},
        "machine": run.machine(),
    }


def _figure(results: dict, outputs: list[dict], folder: Path) -> Path:
    """The figure: the first seed's held-out task per family and the MMD² bars."""
    return _plot(results["per_family"], _figure_data(outputs, results["seeds"][0]), folder)


def run(preset: str = "quick", *, progress: bool = False, **options: Any) -> dict:
    """Run the leave-one-family-out experiment; write ``results.json`` and ``families.png``.

    Parameters
    ----------
    preset : {"tiny", "smoke", "quick", "full"}, default="quick"
        ``"tiny"``: seconds (the end-to-end test). ``"smoke"``: tries the pipeline (2 seeds x
        6 tasks, 40 iterations per model): not a result. ``"quick"``: d = 2, the library's default
        architecture with 16 tasks x 64 targets per batch, 1500 iterations per model (75 s
        guard), 3 seeds x 100 held-out tasks x 256 points per family, one Torch thread per
        job (24 trainings). ``"full"``: the paper's model configuration, a GPU job.
    progress : bool, default=False
        Show a progress bar (stderr) over the work, with an ETA.
    **options
        Options of the shared runner (:meth:`~skflow_experiments._experiment.Experiment.run`):
        ``output_dir`` (default ``output/experiments/families``, created: ``results.json`` and the
        figure), ``n_jobs`` (joblib workers over the independent jobs: one training per family,
        model and seed, one plug-in evaluation per family and seed; None runs them in this process,
        and under ``joblib.parallel_config(backend="dask")`` on a Dask cluster), ``random_state``
        (the first seed; the seeds are ``random_state, random_state + 1, ...``), ``seeds`` and
        ``n_tasks`` (overrides of the preset's ``n_seeds`` and ``n_eval_tasks``).

    Returns
    -------
    results : dict
        ``summary`` (per family and convention: plug-in / left-out, plug-in / in-family and
        left-out / in-family ratios with 95 % intervals), ``per_family`` (the protocol's full
        output, per-task tables, training records), ``config``, ``seeds``, ``machine``.

    Examples
    --------
    >>> from skflow_experiments import families
    >>> families.FAMILIES, families.PRESETS["quick"]["n_eval_tasks"]
    (('gmm', 'rings', 'moons', 'spirals'), 100)
    >>> res = families.run("tiny", output_dir="out/families")  # doctest: +SKIP
    >>> res["summary"]["rings"]["true"]["ratio_plugin_over_left_out"]  # doctest: +SKIP
    """
    return SPEC.run(preset, progress=progress, **options)


def _fmt(x: float) -> str:
    return "inf" if x == np.inf else f"{x:.3g}"


def _ratio_cell(comparison: dict) -> str:
    lo, hi = comparison["ratio_ci"]
    return f"{_fmt(comparison['ratio'])} [{_fmt(lo)}, {_fmt(hi)}]"


#: The sentence under each table of the results page: what it shows, in words.
_TABLE_NOTE = (
    "In words: one row per task family. The MMD² columns are means over all held-out tasks "
    "and seeds of that family (lower is better). An MMD² ratio above 1 means the second model"
    " named is closer to the true distribution: plug-in / left-out above 1, the model that "
    "never saw the family beats the plug-in; left-out / in-family above 1, not having seen "
    "the family costs accuracy."
)


def _family_table(per_family: dict, conv: str) -> str:
    """One row per left-out family: mean MMD², floor and the three ratios with intervals."""
    rows = [
        "| left-out family | MMD² plug-in | MMD² left-out model | MMD² in-family model "
        "| noise floor: mean (95th percentile) | MMD² ratio plug-in / left-out [95 % CI] "
        "| MMD² ratio plug-in / in-family [95 % CI] | MMD² ratio left-out / in-family "
        "[95 % CI] |",
        "|" + "---|" * 8,
    ]
    for family, res in per_family.items():
        lo, inf = res["plugin_vs_left_out"][conv], res["plugin_vs_in_family"][conv]
        gap, floor = res["left_out_vs_in_family"][conv], lo["noise_floor"]
        rows.append(
            f"| {family} | {_fmt(lo['mean_a'])} | {_fmt(lo['mean_b'])} | {_fmt(inf['mean_b'])} "
            f"| {_fmt(floor['mean'])} ({_fmt(floor['q95'])}) | {_ratio_cell(lo)} "
            f"| {_ratio_cell(inf)} | {_ratio_cell(gap)} |"
        )
    return "\n".join(rows)


def docs_section(results: dict, command: str) -> str:
    """The Markdown of the families section of ``docs/results.md``.

    The command, the preset and the machine, then one table per MMD² bandwidth convention:
    per left-out family, the MMD² of the plug-in, of the model trained without the family
    and of the model trained on it, the noise floor and the three ratios with intervals.

    Parameters
    ----------
    results : dict
        The output of :func:`run` (``config``, ``per_family``, ``seconds``, ``machine``).
    command : str
        The exact command line that produced ``results``.

    Returns
    -------
    text : str
        Markdown: one paragraph, then a table per convention.
    """
    cfg, per_family = results["config"], results["per_family"]
    runs = [t for res in per_family.values() for m in MODELS for t in res["training"][m]]
    preset = (
        f"Preset `{results['preset']}`: d = {cfg['n_features']}, seeds {results['seeds']}, "
        f"{cfg['n_eval_tasks']} held-out tasks per seed and family, m = {cfg['n_support']}, "
        f"{cfg['n_points']} generated vs {cfg['n_points']} true points per task (and "
        f"{cfg['n_points']} more for the noise floor), sigma_min = {cfg['sigma_min']}. Wall "
        f"time {results['seconds']['total']:.0f} s. " + training_budget(runs, cfg["max_time"])
    )
    parts = section_head(results, command, preset) + convention_tables(
        lambda conv: _family_table(per_family, conv),
        ("the true points", "the pooled points"),
        "MMD², median heuristic from {label}; intervals: 95 % bootstrap over tasks, "
        "stratified by seed. A ratio interval that contains 1 is no resolved difference.",
        _TABLE_NOTE,
    )
    return "\n".join(parts)


def _cli_rows(s: dict) -> list[tuple[str, str]]:
    """The headline numbers the command line prints after a run: ``(quantity, value)`` rows."""
    rows = []
    for family, v in s.items():
        if not isinstance(v, dict) or "true" not in v:
            continue
        t = v["true"]
        rows.append(
            (
                f"{family}: MMD² plug-in / left-out model",
                value_ci(t["ratio_plugin_over_left_out"], t["ratio_plugin_over_left_out_ci"]),
            )
        )
        rows.append(
            (
                f"{family}: MMD² left-out / in-family model",
                value_ci(t["ratio_left_out_over_in_family"], t["ratio_left_out_over_in_family_ci"]),
            )
        )
    return rows


#: The experiment as a specification: presets, work, results, figure, docs, headline rows.
SPEC = Experiment(
    name="families",
    presets=PRESETS,
    measure=_measure,
    assemble=_assemble,
    units=lambda cfg, seeds: len(_jobs(seeds)),
    desc="families: trainings and plug-in jobs",
    figure=_figure,
    docs=docs_section,
    headline=_cli_rows,
)


def write_docs(results: dict, command: str, path: str | Path | None = None) -> Path:
    """Write :func:`docs_section` between the ``families`` markers of the results page."""
    return SPEC.write_docs(results, command, path)
