"""Experiment 2: geometric mismatch on random spherical shells.

The paper reports that on spherical shells, where all the variation of a task is radial, the
isotropic plug-in field is 11x worse (MMD²) than a learned, meta-trained model, although its
effective sample size is healthy: an isotropic kernel spends its bandwidth on the angular
directions and, with ``sigma_min = 0.01``, its terminal law is a KDE that essentially
reproduces the support.

This module measures, on held-out tasks of :class:`skflow.tasks.SphericalShellTasks`
(``m`` support points, ``n`` generated vs ``n`` true points per task), the MMD² of

* ``plugin_isotropic``: :class:`skflow.NWFlowSampler` (isotropic kernel, ``sigma_min``),
* ``plugin_diagonal`` / ``plugin_mahalanobis``: the same field with the kernel shape estimated
  from each support (``kernel="diagonal"`` / ``"mahalanobis"``),
* ``plugin_pca``: the weights computed in a PCA projection of each support
  (``projection=PCA(n_components=d // 2)``); for shells centred at the origin the support
  covariance is nearly isotropic, so neither PCA nor a Mahalanobis shape can find the radial
  direction (they are reported anyway),
* ``plugin_tuned``: the isotropic field with ``sigma_min`` chosen on separate *training* tasks
  (a grid, the best mean MMD²),
* ``learned``: :class:`skflow.LearnedFlowSampler` trained on the shell meta-distribution.

Every number follows :mod:`skflow_experiments.protocol`: ``n_seeds`` training seeds (each
with its own held-out tasks), ``n_eval_tasks`` tasks per seed, both median-heuristic
conventions, the noise floor (two independent true samples of each task), and 95 % bootstrap
intervals of the ratio ``MMD²(plugin_isotropic) / MMD²(method)`` paired over tasks. All
samplers use the same ODE solver and number of steps.

Run it with ``python -m skflow_experiments geometry --quick`` (add ``--write-docs`` to update
``docs/results.md``), or call :func:`run`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.decomposition import PCA

from skflow import LearnedFlowSampler, NWFlowSampler, SolverOptions
from skflow.samplers.options import learned_params_from_flat, solver_options
from skflow.tasks import SphericalShellTasks
from skflow.threads import parallel_map

from ._experiment import Experiment, Run
from ._io import derive_seed, save_figure
from ._report import section_head, value_ci
from .protocol import (
    CONVENTIONS,
    claims,
    compare_to_baseline,
    markdown_table,
    paired_comparison,
    preset_config,
    scores_both_conventions,
)

__all__ = ["METHODS", "PAPER_RATIO", "PRESETS", "SPEC", "docs_section", "run", "write_docs"]

_TINY_MODEL = {
    "d_model": 32,
    "n_heads": 4,
    "n_layers": 1,
    "batch_tasks": 16,
    "n_targets": 64,
    "max_iter": 150,
    "warmup": 20,
}

#: Presets of :func:`run`. ``learned`` holds :class:`~skflow.LearnedFlowSampler` parameters
#: (``None``: the paper's configuration, ``LearnedFlowSampler.paper_config()``); ``max_time``
#: is a wall-clock guard on each training (a run that reaches ``max_iter`` first is
#: reproducible bit for bit); ``torch_threads`` is the number of Torch threads during the run.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "n_features": (4,),
        "n_support": 20,
        "n_seeds": 3,
        "n_eval_tasks": 5,
        "n_points": 100,
        "n_tune_tasks": 3,
        "sigma_min_grid": (0.01, 0.3),
        "n_steps": 10,
        "learned": _TINY_MODEL,
        "max_time": 60.0,
        "device": "cpu",
        "torch_threads": 1,
    },
    # tries the pipeline in about a minute on two cores: not a result (never in the docs)
    "smoke": {
        "n_features": (8,),
        "n_support": 50,
        "n_seeds": 2,
        "n_eval_tasks": 8,
        "n_points": 128,
        "n_tune_tasks": 3,
        "sigma_min_grid": (0.01, 0.1, 0.3),
        "n_steps": 30,
        "learned": {"max_iter": 100, "warmup": 10},
        "max_time": None,
        "device": "cpu",
        "torch_threads": 1,
    },
    # the headline: 3 seeds x 100 held-out tasks, default model, <= 5 CPU minutes per training
    "quick": {
        "n_features": (8,),
        "n_support": 50,
        "n_seeds": 3,
        "n_eval_tasks": 100,
        "n_points": 500,
        "n_tune_tasks": 8,
        "sigma_min_grid": (0.01, 0.03, 0.1, 0.2, 0.3, 0.5),
        "n_steps": 100,
        "learned": {},  # LearnedFlowSampler defaults: d_model 64, 2 layers, 2000 iterations
        "max_time": 300.0,
        "device": "cpu",
        "torch_threads": 1,
    },
    "full": {
        "n_features": (8, 16),
        "n_support": 50,
        "n_seeds": 3,
        "n_eval_tasks": 200,
        "n_points": 1000,
        "n_tune_tasks": 16,
        "sigma_min_grid": (0.01, 0.03, 0.1, 0.2, 0.3, 0.5),
        "n_steps": 100,
        "learned": None,  # LearnedFlowSampler.paper_config() (100k steps; a GPU job)
        "max_time": None,
        "device": "auto",
        "torch_threads": None,
    },
}

_PLUGINS = ("plugin_isotropic", "plugin_diagonal", "plugin_mahalanobis", "plugin_pca")
#: Methods compared; every ratio is relative to ``plugin_isotropic``.
METHODS = (*_PLUGINS, "plugin_tuned", "learned")
#: The paper's ratio MMD²(isotropic plug-in) / MMD²(learned) on shells.
PAPER_RATIO = 11.0
_SIGMA_MIN = 0.01


def _plugin(method: str, d: int, sigma_min: float, n_steps: int, solver: str) -> NWFlowSampler:
    """The NWFlowSampler of a plug-in method."""
    kw: dict[str, Any] = {"sigma_min": sigma_min, "solver": SolverOptions(solver, n_steps=n_steps)}
    if method == "plugin_diagonal":
        kw["kernel"] = "diagonal"
    elif method == "plugin_mahalanobis":
        kw["kernel"] = "mahalanobis"
    elif method == "plugin_pca":
        kw["projection"] = PCA(n_components=max(1, d // 2))
    return NWFlowSampler(**kw)


def _eval_plugins(support, true, methods, n_steps, solver, seed) -> dict[str, dict[str, float]]:
    """Both-convention MMD² of each plug-in method on one task (``methods``: name -> sigma)."""
    out = {}
    for name, sigma_min in methods.items():
        base = "plugin_isotropic" if name.startswith("plugin_tuned") else name
        sampler = _plugin(base, support.shape[1], sigma_min, n_steps, solver).fit(support)
        out[name] = scores_both_conventions(sampler.sample(len(true), random_state=seed), true)
    return out


def _tune_sigma_min(tasks, cfg, solver, n_jobs, seed) -> tuple[float, dict[str, float]]:
    """The isotropic plug-in's sigma_min: best mean MMD² (true-point bandwidth), training tasks."""
    grid = tuple(float(s) for s in cfg["sigma_min_grid"])
    supports, truths = tasks.sample_tasks(
        cfg["n_tune_tasks"], cfg["n_support"], cfg["n_points"], random_state=derive_seed(seed, 2)
    )
    methods = {f"plugin_tuned@{s:g}": s for s in grid}
    rows = parallel_map(
        _eval_plugins,
        [
            (supports[b], truths[b], methods, cfg["n_steps"], solver, b)
            for b in range(len(supports))
        ],
        n_jobs,
    )
    scores = {
        f"{s:g}": float(np.mean([r[f"plugin_tuned@{s:g}"]["true"] for r in rows])) for s in grid
    }
    return min(grid, key=lambda s: scores[f"{s:g}"]), scores


def _learned_params(cfg: dict, seed: int) -> dict[str, Any]:
    params = dict(LearnedFlowSampler.paper_config() if cfg["learned"] is None else cfg["learned"])
    params.setdefault("sigma_min", _SIGMA_MIN)
    params.update(
        support_size=cfg["n_support"],
        n_steps=cfg["n_steps"],
        max_time=cfg["max_time"],
        device=cfg["device"],
        random_state=seed,
    )
    return params


def _train(tasks, cfg: dict, seed: int) -> tuple[LearnedFlowSampler, dict[str, Any]]:
    """One learned model and its training record (iterations, seconds, reproducibility)."""
    model = LearnedFlowSampler(**learned_params_from_flat(_learned_params(cfg, seed)))
    t0 = time.perf_counter()
    model.fit(tasks)
    seconds = time.perf_counter() - t0
    return model, {
        "seed": seed,
        "n_iter": int(model.n_iter_),
        "max_iter": int(model.max_iter),
        "reached_max_iter": bool(model.n_iter_ == model.max_iter),
        "train_seconds": round(seconds, 1),
        "final_loss_mean_last_100": float(np.mean(model.loss_curve_[-100:])),
    }


def _held_out(tasks, cfg: dict, seed: int):
    """Held-out supports, true points and an independent true sample (the noise floor)."""
    n = cfg["n_points"]
    S, Q = tasks.sample_tasks(cfg["n_eval_tasks"], cfg["n_support"], 2 * n, random_state=seed)
    return S, Q[:, :n], Q[:, n:]


def _run_seed(d: int, cfg: dict, n_jobs, seed: int) -> dict[str, Any]:
    """Train, tune and evaluate every method for one dimension and one seed."""
    tasks = SphericalShellTasks(n_features=d)
    learned, train = _train(tasks, cfg, derive_seed(seed, 1, d))
    t0 = time.perf_counter()
    solver = solver_options(learned.solver).method  # the learned model's, for the plug-ins
    best_sigma, tune_scores = _tune_sigma_min(tasks, cfg, solver, n_jobs, seed)
    supports, truths, floors = _held_out(tasks, cfg, derive_seed(seed, 3, d))
    methods = {name: _SIGMA_MIN for name in _PLUGINS} | {"plugin_tuned": best_sigma}
    rows = parallel_map(
        _eval_plugins,
        [
            (
                supports[b],
                truths[b],
                methods,
                cfg["n_steps"],
                solver,
                derive_seed(seed, 4, b),
            )
            for b in range(len(supports))
        ],
        n_jobs,
    )
    generated = learned.sample_batch(cfg["n_points"], supports, random_state=derive_seed(seed, 5))
    for b, row in enumerate(rows):
        row["learned"] = scores_both_conventions(generated[b], truths[b])
        row["floor"] = scores_both_conventions(floors[b], truths[b])
    table = {
        name: {c: np.array([r[name][c] for r in rows]) for c in CONVENTIONS}
        for name in (*METHODS, "floor")
    }
    return {
        "seed": seed,
        "table": table,
        "tuned_sigma_min": best_sigma,
        "tuning_mmd2": tune_scores,
        "training": train,
        "eval_seconds": round(time.perf_counter() - t0, 1),
        "_figure": {"support": supports[0], "true": truths[0], "learned": generated[0]},
    }


def _neff_on_path(support: np.ndarray, true: np.ndarray, seed: int) -> dict[str, float]:
    """Mean n_eff of the isotropic plug-in at noised true points (the paper: "healthy")."""
    iso = NWFlowSampler(sigma_min=_SIGMA_MIN).fit(support)
    path, rng = iso.path_, np.random.default_rng(seed)
    out = {}
    for t in (0.5, 0.9, 0.99):
        x_t = path.sample_xt(rng.standard_normal(true.shape), true, t)
        out[f"{t:g}"] = float(np.mean(iso.effective_sample_size(x_t, t)))
    return out


def _compare_dimension(d: int, per_seed: list[dict]) -> dict[str, Any]:
    """Stack the seeds' per-task tables to (seeds, tasks) and apply the protocol."""
    table = {
        name: {c: np.stack([s["table"][name][c] for s in per_seed]) for c in CONVENTIONS}
        for name in (*METHODS, "floor")
    }
    iso = table["plugin_isotropic"]
    headline = compare_to_baseline(iso, table["learned"], table["floor"], paper_ratio=PAPER_RATIO)
    variants = {
        name: {c: paired_comparison(iso[c], table[name][c]) for c in CONVENTIONS}
        for name in METHODS
        if name != "plugin_isotropic"
    }
    return {
        "n_features": d,
        "learned_vs_isotropic": headline,
        "vs_isotropic": variants,
        "mmd2_mean": {n: {c: float(table[n][c].mean()) for c in CONVENTIONS} for n in table},
        "per_task": {n: {c: table[n][c] for c in CONVENTIONS} for n in table},
        "tuned_sigma_min": [s["tuned_sigma_min"] for s in per_seed],
        "tuning_mmd2": [s["tuning_mmd2"] for s in per_seed],
        "training": [s["training"] for s in per_seed],
        "eval_seconds": [s["eval_seconds"] for s in per_seed],
    }


def _summary(per_dim: list[dict]) -> dict[str, Any]:
    """Key numbers per dimension: the headline ratio per convention with its interval."""
    out: dict[str, Any] = {}
    for res in per_dim:
        head = res["learned_vs_isotropic"]
        out[f"d={res['n_features']}"] = {
            conv: {
                "ratio_isotropic_over_learned": head[conv]["ratio"],
                "ratio_ci": head[conv]["ratio_ci"],
                "ratio_per_seed": [s["ratio"] for s in head[conv]["per_seed"]],
                "mmd2_isotropic": head[conv]["mean_a"],
                "mmd2_learned": head[conv]["mean_b"],
                "noise_floor": head[conv]["noise_floor"],
                "learned_minus_floor_ci": head[conv]["challenger_minus_floor"]["ci"],
                "ci_contains_paper": head[conv]["ratio_ci_contains_paper"],
                # the target: >= 10x, with the interval's lower end >= 5x
                "target_met": bool(
                    head[conv]["ratio"] >= 10.0 and head[conv]["ratio_ci"][0] >= 5.0
                ),
            }
            for conv in CONVENTIONS
        }
        out[f"d={res['n_features']}"]["learned_all_reached_max_iter"] = all(
            t["reached_max_iter"] for t in res["training"]
        )
    out["paper"] = f"isotropic plug-in {PAPER_RATIO:g}x worse (MMD²) than the learned model"
    return out


def _plot_bars(ax, per_dim: list[dict]) -> None:
    width = 0.8 / len(per_dim)
    x = np.arange(len(METHODS))
    for i, res in enumerate(per_dim):
        values = [res["per_task"][k]["true"].ravel() for k in METHODS]
        means = [v.mean() for v in values]
        sems = [v.std(ddof=1) / np.sqrt(v.size) for v in values]
        offset = (i - (len(per_dim) - 1) / 2) * width
        ax.bar(
            x + offset,
            np.maximum(means, 1e-6),
            width,
            yerr=sems,
            capsize=3,
            label=f"d = {res['n_features']}",
        )
    ax.set_xticks(x)
    ax.set_xticklabels([k.replace("plugin_", "plug-in\n") for k in METHODS], fontsize=10)
    ax.set_yscale("log")
    ax.set_ylabel("MMD², true-point bandwidth (mean ± sem)")
    ax.set_title("Spherical shells: MMD² per method")
    ax.legend()


def _plot_task(ax_task, ax_radius, fig_data: dict, d: int) -> None:
    styles = {
        "true": ("0.6", "true"),
        "learned": ("tab:blue", "learned"),
        "plugin_isotropic": ("tab:red", "plug-in (iso)"),
    }
    for key, (color, label) in styles.items():
        ax_task.scatter(*fig_data[key][:, :2].T, s=4, c=color, label=label)
    ax_task.scatter(
        *fig_data["support"][:, :2].T, s=40, facecolors="none", edgecolors="k", label="support"
    )
    ax_task.set_title(f"one held-out task (d = {d}): coordinates 1-2")
    ax_task.set_aspect("equal")
    ax_task.legend(fontsize=10, markerscale=2)
    radius = {k: np.linalg.norm(v, axis=1) for k, v in fig_data.items()}
    bins = np.linspace(0, max(r.max() for r in radius.values()) * 1.05, 60)
    ax_radius.hist(radius["true"], bins=bins, color="0.6", alpha=0.8, label="true")
    for key in ("plugin_isotropic", "learned"):
        color, label = styles[key]
        ax_radius.hist(radius[key], bins=bins, histtype="step", color=color, lw=1.5, label=label)
    ax_radius.plot(radius["support"], np.zeros_like(radius["support"]), "k|", ms=12)
    ax_radius.set_xlabel("radius ‖x‖")
    ax_radius.set_title("same task: radii (the shells)")
    ax_radius.legend(fontsize=10)


def _plot(per_dim: list[dict], fig_data: dict, output_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    _plot_bars(axes[0], per_dim)
    _plot_task(axes[1], axes[2], fig_data, per_dim[0]["n_features"])
    fig.tight_layout()
    return save_figure(fig, output_dir, "geometry.png")


def _config(preset: str, seeds: int | None, n_tasks: int | None) -> dict[str, Any]:
    """The preset with the command line's overrides, validated."""
    cfg = preset_config(PRESETS, preset, seeds=seeds, n_tasks=n_tasks)
    if not all(0.0 < s < 1.0 for s in cfg["sigma_min_grid"]):
        raise ValueError(f"sigma_min_grid values must lie in (0, 1), got {cfg['sigma_min_grid']}.")
    return cfg


def _measure(run: Run) -> tuple[list[dict], dict]:
    """Every dimension and seed (the run's work; the runner holds Torch to the preset's
    threads); figure data. The bar advances once per (dimension, seed): one training and its
    tasks."""
    cfg, seeds = run.cfg, run.seeds
    per_dim, fig_data = [], None
    for d in cfg["n_features"]:
        per_seed = []
        for s in seeds:
            per_seed.append(_run_seed(d, cfg, run.n_jobs, s))
            run.bar.update(1)
        per_dim.append(_compare_dimension(d, per_seed))
        if fig_data is None:
            fig_data = per_seed[0]["_figure"]
            iso = _plugin("plugin_isotropic", d, _SIGMA_MIN, cfg["n_steps"], "heun")
            fig_data["plugin_isotropic"] = iso.fit(fig_data["support"]).sample(
                cfg["n_points"], random_state=0
            )
            per_dim[-1]["isotropic_n_eff_task0"] = _neff_on_path(
                fig_data["support"], fig_data["true"], seeds[0]
            )
    return per_dim, fig_data


def _assemble(run: Run, outputs: tuple[list[dict], dict]) -> dict[str, Any]:
    """``results.json``: per dimension the comparisons, the config and the records."""
    per_dim = outputs[0]
    return {
        "experiment": "geometry",
        "preset": run.preset,
        "seeds": run.seeds,
        "summary": _summary(per_dim) | {"wall_seconds": round(run.wall, 1)},
        "config": run.cfg,
        "per_dimension": per_dim,
        "seconds": {"total": round(run.wall, 1)},
        "machine": run.machine(),
    }


def _figure(results: dict, outputs: tuple[list[dict], dict], folder: Path) -> Path:
    """The figure, drawn from the work's own arrays (per dimension, one held-out task)."""
    return _plot(*outputs, folder)


def run(preset: str = "quick", *, progress: bool = False, **options: Any) -> dict[str, Any]:
    """Run the geometric-mismatch experiment and write ``results.json`` and ``geometry.png``.

    For every dimension of the preset and every seed: train a
    :class:`~skflow.LearnedFlowSampler` on :class:`~skflow.tasks.SphericalShellTasks`, choose
    the ``sigma_min`` of the tuned isotropic plug-in on separate training tasks, then score all
    methods on that seed's held-out tasks (same supports, solver and steps; ``n_points``
    generated vs ``n_points`` true points, and a second true sample for the noise floor).

    Parameters
    ----------
    preset : {"tiny", "smoke", "quick", "full"}, default="quick"
        Size of the run (see :data:`PRESETS`). ``"smoke"`` only tries the pipeline (not a
        result). ``"quick"`` is the headline (3 seeds x 100
        tasks, CPU); ``"full"`` uses the paper's model configuration and is meant for a GPU.
    progress : bool, default=False
        Show a progress bar (stderr) over the work, with an ETA.
    **options
        Options of the shared runner (:meth:`~skflow_experiments._experiment.Experiment.run`):
        ``output_dir`` (default ``output/experiments/geometry``, created: ``results.json`` and the
        figure), ``n_jobs`` (joblib workers for the plug-in evaluations, one task per job; None runs
        them in this process, and under ``joblib.parallel_config(backend="dask")`` on a Dask
        cluster), ``random_state`` (the first seed; the seeds are ``random_state, random_state + 1,
        ...``), ``seeds`` and ``n_tasks`` (overrides of the preset's ``n_seeds`` and
        ``n_eval_tasks``).

    Returns
    -------
    results : dict
        ``summary`` (per dimension and median convention: the ratio isotropic / learned with
        its 95 % interval, per-seed ratios, noise floor, whether the paper's 11x lies in the
        interval), ``per_dimension`` (the protocol's full output, per-task values, training
        records), ``config``, ``seconds``, ``machine`` and ``command``-independent settings;
        also written to ``output_dir/results.json``.

    Examples
    --------
    >>> from skflow_experiments import geometry
    >>> sorted(geometry.PRESETS), geometry.PRESETS["quick"]["n_eval_tasks"]
    (['full', 'quick', 'smoke', 'tiny'], 100)
    >>> res = geometry.run("tiny", output_dir="out/geometry")  # doctest: +SKIP
    >>> res["summary"]["d=4"]["true"]["ratio_ci"]  # doctest: +SKIP
    """
    return SPEC.run(preset, progress=progress, **options)


def _budget_line(res: dict, cfg: dict) -> str:
    runs = res["training"]
    its = ", ".join(str(t["n_iter"]) for t in runs)
    secs = ", ".join(f"{t['train_seconds']:.0f}" for t in runs)
    reached = all(t["reached_max_iter"] for t in runs)
    tail = (
        "every training reached `max_iter` before the guard: reproducible bit for bit"
        if reached
        else "**a training stopped at the wall-clock guard: not reproducible bit for bit**"
    )
    return (
        f"Training per model: {its} iterations in {secs} s (max_iter "
        f"{runs[0]['max_iter']}, guard {cfg['max_time']} s); {tail}."
    )


#: The sentences under the tables of the results page: what each table shows, in words.
_TABLE_NOTE = (
    "In words: one row per bandwidth convention of the MMD². The MMD² columns are means over "
    "all held-out tasks and seeds (lower is better); the ratio says how many times lower the "
    "learned model's MMD² is than the isotropic plug-in's; the difference is isotropic minus "
    "learned (positive: learned better); learned − floor is how far the learned model stays "
    "above the best achievable; the last columns give the ratio per training seed and the "
    "number of tasks on which the learned model is lower."
)
_VARIANTS_NOTE = (
    "In words: one row per plug-in variant (and the learned model) on the same tasks; an MMD²"
    " ratio isotropic / method above 1 means the method is closer to the true distribution "
    "than the isotropic plug-in, below 1 that it is further."
)


def _variants_table(res: dict) -> str:
    rows = [
        "| method | MMD² (true-point bandwidth) | MMD² ratio isotropic / method [95 % CI], "
        "true points | MMD² ratio isotropic / method [95 % CI], pooled |",
        "|---|---|---|---|",
    ]
    for name, comp in res["vs_isotropic"].items():
        cells = [
            f"{comp[c]['ratio']:.3g} [{comp[c]['ratio_ci'][0]:.3g}, {comp[c]['ratio_ci'][1]:.3g}]"
            for c in ("true", "pooled")
        ]
        rows.append(f"| `{name}` | {comp['true']['mean_b']:.3g} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def docs_section(results: dict, command: str) -> str:
    """The Markdown of the geometry section of ``docs/results.md``.

    The command, the preset and the machine; per d, the learned model against the isotropic
    plug-in (table, claims, trainings), then every plug-in variant against the isotropic
    one.

    Parameters
    ----------
    results : dict
        The output of :func:`run`; its ``per_dimension`` holds one entry per d.
    command : str
        The exact command line that produced ``results``.

    Returns
    -------
    text : str
        Markdown, two tables per dimension d.
    """
    cfg = results["config"]
    preset = (
        f"Preset `{results['preset']}`: seeds {results['seeds']}, {cfg['n_eval_tasks']} "
        f"held-out tasks per seed, m = {cfg['n_support']} support points, {cfg['n_points']} "
        f"generated vs {cfg['n_points']} true points per task (and {cfg['n_points']} more true "
        f"points for the noise floor), {cfg['n_steps']} Heun steps, sigma_min = {_SIGMA_MIN}. "
        f"Wall time {results['seconds']['total']:.0f} s."
    )
    parts = section_head(results, command, preset)
    for res in results["per_dimension"]:
        d = res["n_features"]
        head = res["learned_vs_isotropic"]
        parts += [
            "",
            f"**d = {d}: learned vs isotropic plug-in** (paper: {PAPER_RATIO:g}x). Intervals: "
            "95 % bootstrap over tasks, stratified by seed (2000 replicates, fixed seed).",
            "",
            markdown_table(head, baseline="isotropic", paper_ratio=PAPER_RATIO),
            "",
            _TABLE_NOTE,
            "",
            *[f"* {line}" for line in claims(head, baseline="isotropic", paper_ratio=PAPER_RATIO)],
            "",
            _budget_line(res, cfg),
            f" Tuned sigma_min per seed: {res['tuned_sigma_min']}.",
            "",
            f"Other plug-in variants (d = {d}):",
            "",
            _variants_table(res),
            "",
            _VARIANTS_NOTE,
        ]
    return "\n".join(parts)


def _cli_rows(s: dict) -> list[tuple[str, str]]:
    """The headline numbers the command line prints after a run: ``(quantity, value)`` rows."""
    return [
        (
            f"{key}: MMD² isotropic plug-in / learned",
            value_ci(v["true"]["ratio_isotropic_over_learned"], v["true"]["ratio_ci"]),
        )
        for key, v in s.items()
        if key.startswith("d=")
    ]


#: The experiment as a specification: presets, work, results, figure, docs, headline rows.
SPEC = Experiment(
    name="geometry",
    presets=PRESETS,
    measure=_measure,
    assemble=_assemble,
    configure=_config,
    units=lambda cfg, seeds: len(cfg["n_features"]) * len(seeds),
    desc="geometry: training + tasks per seed",
    figure=_figure,
    docs=docs_section,
    headline=_cli_rows,
)


def write_docs(results: dict, command: str, path: str | Path | None = None) -> Path:
    """Write :func:`docs_section` between the ``geometry`` markers of the results page."""
    return SPEC.write_docs(results, command, path)
