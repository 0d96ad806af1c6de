"""Few-shot benchmark of the public LearnedFlowSampler().fit(X, y) on held-out classes.

The question a user with a labelled data set asks: trained with its defaults on my classes,
does :class:`skflow.LearnedFlowSampler` generate new classes from a few examples better than
the plug-in field? Unlike :mod:`skflow_experiments.scarcity` (which builds its own
rotation-augmented task source), this benchmark calls nothing but
``LearnedFlowSampler(random_state=seed).fit(X_train, y_train)``: support sizes, augmentation,
normalisation and validation are the estimator's defaults.

Data: scikit-learn's bundled handwritten digits (:func:`sklearn.datasets.load_digits`; 10
classes of about 180 rows, no download). scikit-learn ships no other offline labelled set with
more than 3 classes (iris and wine have 3, breast cancer 2; Olivetti faces, 20 newsgroups, LFW,
covertype ... are ``fetch_*`` downloads), so the data sets here are splits of digits: each
entry of the preset's ``datasets`` names its held-out classes; the 64 pixels are reduced by a
PCA fitted on the *training classes* only and standardized with their statistics.

Protocol (:mod:`skflow_experiments.protocol`): ``n_seeds`` seeds, each training its own model
and drawing ``n_eval_tasks`` held-out tasks; task ``j`` takes held-out class ``j mod k``,
shuffles its rows, keeps the first ``max(m)`` as the support pool (nested supports: the first
``m`` rows) and the others as the reference. Every sampler generates ``n_generated`` points per
task and ``m``, scored by MMD² against the reference under both median conventions, with paired
95 % intervals (bootstrap over tasks, stratified by seed) and the noise floor (the pool against
the reference: an upper estimate of the floor at ``n_generated`` points). The copy check,
:func:`skflow.metrics.memorization_ratio` (generated points' distance to the support over that
of the reference rows), is reported per method and ``m``.

Methods: ``plugin`` (:class:`skflow.NWFlowSampler`, ``sigma_min = 0.01``), ``plugin_tuned``
(``sigma_min`` per ``m`` from a grid, chosen by the same protocol on the *training* classes),
``learned`` (the default ``fit(X_train, y_train)``).

Run it with ``python -m skflow_experiments fewshot --quick --write-docs`` (``--preset smoke``:
a run of about two minutes that checks the pipeline and is not a result).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from skflow import LearnedFlowSampler, NWFlowSampler
from skflow.metrics import memorization_ratio
from skflow.samplers.options import learned_params_from_flat
from skflow.threads import parallel_map

from ._experiment import Experiment, Run
from ._io import derive_seed, save_figure
from ._jobs import compare_per_support_size, lower_pcts, support_size_cells
from ._report import ci_pct, convention_tables, section_head
from ._splits import class_splits
from .protocol import (
    CONVENTIONS,
    preset_config,
    scores_both_conventions,
    training_budget,
    training_record,
)

__all__ = ["PRESETS", "SPEC", "docs_section", "run", "write_docs"]

_DIGITS = {"name": "digits-pca16", "n_components": 16, "test_classes": (7, 8, 9)}
_DIGITS_LOW = {"name": "digits-pca16-012", "n_components": 16, "test_classes": (0, 1, 2)}
_GRID = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)

#: Presets of :func:`run`. ``learned`` holds the only :class:`~skflow.LearnedFlowSampler`
#: parameters that differ from its defaults (empty in ``quick`` and ``full``: the benchmark is
#: the default ``fit``); ``torch_threads`` is the Torch thread count during the run.
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": {
        "datasets": (_DIGITS,),
        "support_sizes": (2, 5, 10, 20, 50),
        "n_seeds": 1,
        "n_eval_tasks": 12,
        "n_generated": 100,
        "sigma_min_grid": (0.01, 0.1, 0.5),
        "n_tune_repeats": 1,
        "learned": {"max_iter": 150},
        "torch_threads": 1,
        "label": "smoke test, not a result: 150 training iterations, 12 tasks",
    },
    "tiny": {
        "datasets": (_DIGITS,),
        "support_sizes": (2, 10),
        "n_seeds": 2,
        "n_eval_tasks": 4,
        "n_generated": 40,
        "sigma_min_grid": (0.01, 0.3),
        "n_tune_repeats": 1,
        "learned": {"max_iter": 4, "d_model": 16, "n_layers": 1, "n_steps": 8},
        "torch_threads": 1,
        "label": "end-to-end test, not a result",
    },
    "quick": {
        "datasets": (_DIGITS,),
        "support_sizes": (2, 5, 10, 20, 50),
        "n_seeds": 3,
        "n_eval_tasks": 100,
        "n_generated": 200,
        "sigma_min_grid": _GRID,
        "n_tune_repeats": 3,
        "learned": {},
        "torch_threads": 1,
        "label": None,
    },
    "full": {
        "datasets": (_DIGITS, _DIGITS_LOW),
        "support_sizes": (2, 5, 10, 20, 50),
        "n_seeds": 3,
        "n_eval_tasks": 150,
        "n_generated": 500,
        "sigma_min_grid": _GRID,
        "n_tune_repeats": 10,
        "learned": {},
        "torch_threads": None,
        "label": None,
    },
}

METHODS = ("plugin", "plugin_tuned", "learned")
_SIGMA_MIN = 0.01


def _features(spec: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Digits, PCA and standardization fitted on the training classes; (Z, y, train mask)."""
    X, y = load_digits(return_X_y=True)
    train = ~np.isin(y, spec["test_classes"])
    pca = PCA(n_components=spec["n_components"], random_state=0).fit(X[train])
    Z = StandardScaler().fit(pca.transform(X[train])).transform(pca.transform(X))
    info = {
        "dataset": f"sklearn.datasets.load_digits, {spec['name']}",
        "train_classes": sorted(int(c) for c in np.unique(y[train])),
        "test_classes": list(spec["test_classes"]),
        "class_sizes": {int(c): int(np.sum(y == c)) for c in np.unique(y)},
        "pca_explained_variance_ratio": float(pca.explained_variance_ratio_.sum()),
    }
    return Z, y, train, info


def _score(gen, pool, m, ref) -> dict:
    """Both-convention MMD² and the memorisation ratio of one generated set."""
    return scores_both_conventions(gen, ref) | {"copy": memorization_ratio(gen, pool[:m], ref)}


def _plugin_scores(pool, ref, ms, sigmas, n_generated: int, seed: int) -> dict:
    """(m, sigma_min) -> scores of the plug-in on one split."""
    out = {}
    for m in ms:
        for s in sigmas:
            gen = NWFlowSampler(sigma_min=s).fit(pool[:m]).sample(n_generated, random_state=seed)
            out[(m, s)] = _score(gen, pool, m, ref)
    return out


def _tune(Z, y, train, cfg: dict, n_jobs, seed: int) -> tuple[dict, dict]:
    """sigma_min per m: the best mean MMD² (true-point bandwidth) on the training classes."""
    ms, grid = cfg["support_sizes"], tuple(float(s) for s in cfg["sigma_min_grid"])
    classes = np.unique(y[train])
    n = len(classes) * cfg["n_tune_repeats"]
    splits = class_splits(y, classes, n, max(ms), derive_seed(seed, 2), X=Z)
    rows = parallel_map(
        _plugin_scores,
        [(pool, ref, ms, grid, cfg["n_generated"], i) for i, (pool, ref) in enumerate(splits)],
        n_jobs,
    )
    tuning = {
        str(m): {f"{s:g}": float(np.mean([r[(m, s)]["true"] for r in rows])) for s in grid}
        for m in ms
    }
    return {m: min(grid, key=lambda s, m=m: tuning[str(m)][f"{s:g}"]) for m in ms}, tuning


def _evaluate(Z, y, model, spec, best: dict, cfg: dict, n_jobs, seed: int) -> dict:
    """Per m: method (and ``floor``) -> convention (and ``copy``) -> per-task values."""
    ms = cfg["support_sizes"]
    seed3 = derive_seed(seed, 3)
    splits = class_splits(y, spec["test_classes"], cfg["n_eval_tasks"], max(ms), seed3, X=Z)
    sigmas = sorted({_SIGMA_MIN, *best.values()})
    plug = parallel_map(
        _plugin_scores,
        [
            (pool, ref, ms, sigmas, cfg["n_generated"], derive_seed(seed, 4, i))
            for i, (pool, ref) in enumerate(splits)
        ],
        n_jobs,
    )
    pools = np.stack([pool for pool, _ in splits])
    floor = [scores_both_conventions(pool, ref) for pool, ref in splits]
    out = {}
    for m in ms:
        gen = model.sample_batch(
            cfg["n_generated"], pools[:, :m], random_state=derive_seed(seed, 5, m)
        )
        rows = [
            {
                "plugin": p[(m, _SIGMA_MIN)],
                "plugin_tuned": p[(m, best[m])],
                "learned": _score(gen[i], pool, m, ref),
                "floor": f,
            }
            for i, (p, f, (pool, ref)) in enumerate(zip(plug, floor, splits, strict=True))
        ]
        keys = {k: (*CONVENTIONS, "copy") for k in METHODS} | {"floor": CONVENTIONS}
        out[str(m)] = {
            k: {c: np.array([r[k][c] for r in rows]) for c in cs} for k, cs in keys.items()
        }
    return out


def _run_seed(spec: dict, cfg: dict, n_jobs, seed: int) -> dict:
    """Train the default model on the training classes, tune the plug-in, evaluate."""
    Z, y, train, _ = _features(spec)
    t0 = time.perf_counter()
    params = learned_params_from_flat({**cfg["learned"], "random_state": seed})
    model = LearnedFlowSampler(**params).fit(Z[train], y[train])
    record = training_record(model, time.perf_counter() - t0, seed) | {
        "support_range": list(model.support_range_),
        "stop": "max_iter" if model.n_iter_ == model.max_iter else "early stopping",
        "validation_classes": None
        if model.validation_classes_ is None
        else [int(c) for c in model.validation_classes_],
    }
    best, tuning = _tune(Z, y, train, cfg, n_jobs, seed)
    table = _evaluate(Z, y, model, spec, best, cfg, n_jobs, seed)
    return {
        "seed": seed,
        "table": table,
        "tuned_sigma_min": {str(m): s for m, s in best.items()},
        "tuning_mmd2_train_classes": tuning,
        "training": record,
    }


def _summary(comp: dict, ms: tuple) -> dict:
    """Per convention and m: how much lower the learned MMD² is; means; copy ratios."""
    out: dict[str, Any] = {"support_sizes": list(ms)}
    for conv in CONVENTIONS:
        out[conv] = lower_pcts(comp, ms, conv)
        out[conv]["mmd2"] = {
            k: {str(m): float(np.mean(comp[str(m)]["per_task"][k][conv])) for m in ms}
            for k in METHODS
        }
    out["memorization_ratio_median"] = {
        k: {str(m): float(np.median(comp[str(m)]["per_task"][k]["copy"])) for m in ms}
        for k in METHODS
    }
    return out


def _plot(results: dict, output_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    fig, axes = plt.subplots(
        1, len(results["datasets"]), figsize=(5.5 * len(results["datasets"]), 4)
    )
    axes = np.atleast_1d(axes)
    styles = {"plugin": "tab:red", "plugin_tuned": "tab:orange", "learned": "tab:blue"}
    for ax, (name, res) in zip(axes, results["datasets"].items(), strict=True):
        ms = np.asarray(res["summary"]["support_sizes"])
        for k, color in styles.items():
            ax.plot(
                ms,
                [res["summary"]["true"]["mmd2"][k][str(m)] for m in ms],
                "o-",
                color=color,
                label=k,
            )
        ax.set(xscale="log", yscale="log", xlabel="support size m", title=name)
        # only the support sizes as ticks: the minor labels of a log axis spanning less than a
        # decade (3x10^0, 4x10^0, ...) would overprint them
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(ms, [str(m) for m in ms])
        ax.set_ylabel("mean MMD² (true-point bandwidth)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, output_dir, "fewshot.png")


def _config(preset: str, seeds: int | None, n_tasks: int | None) -> dict[str, Any]:
    """The preset with the command line's overrides, support sizes as ints."""
    cfg = preset_config(PRESETS, preset, seeds=seeds, n_tasks=n_tasks)
    cfg["support_sizes"] = tuple(int(m) for m in cfg["support_sizes"])
    return cfg


def _measure(run: Run) -> dict[str, dict]:
    """Per data set: every seed's training, tuning and evaluation, and the comparisons."""
    cfg, datasets = run.cfg, {}
    for spec in cfg["datasets"]:
        per_seed = [_run_seed(spec, cfg, run.n_jobs, s) for s in run.seeds]
        comparison = compare_per_support_size(
            per_seed, cfg["support_sizes"], METHODS, extra_columns=("copy",)
        )
        datasets[spec["name"]] = {
            "summary": _summary(comparison, cfg["support_sizes"]),
            "comparison": comparison,
            "per_seed": [{k: v for k, v in s.items() if k != "table"} for s in per_seed],
            "data": _features(spec)[3],
        }
    return datasets


def _assemble(run: Run, datasets: dict[str, dict]) -> dict[str, Any]:
    """``results.json``: the summaries per data set, their details, config, records."""
    return {
        "experiment": "fewshot",
        "preset": run.preset,
        "seeds": run.seeds,
        "summary": {
            **{name: d["summary"] for name, d in datasets.items()},
            "wall_seconds": round(run.wall, 1),
        },
        "datasets": datasets,
        "config": run.cfg,
        "seconds": {"total": round(run.wall, 1)},
        "machine": run.machine(),
    }


def run(preset: str = "quick", *, progress: bool = False, **options: Any) -> dict[str, Any]:
    """Run the few-shot benchmark and write ``results.json`` and ``fewshot.png``.

    Parameters
    ----------
    preset : {"smoke", "tiny", "quick", "full"}, default="quick"
        Size of the run (:data:`PRESETS`); ``"smoke"`` and ``"tiny"`` are not results.
    progress : bool, default=False
        Show a progress bar (stderr) over the work, with an ETA.
    **options
        Options of the shared runner (:meth:`~skflow_experiments._experiment.Experiment.run`):
        ``output_dir`` (default ``output/experiments/fewshot``, created: ``results.json`` and the
        figure), ``n_jobs`` (joblib workers for the plug-in evaluations; None runs them in this
        process, and under ``joblib.parallel_config(backend="dask")`` on a Dask cluster),
        ``random_state`` (the first seed; the seeds are ``random_state, random_state + 1, ...``),
        ``seeds`` and ``n_tasks`` (overrides of the preset's ``n_seeds`` and ``n_eval_tasks``).

    Returns
    -------
    results : dict
        ``datasets`` (per data set: ``summary`` with how much lower the learned MMD² is than
        each plug-in, with 95 % intervals, per convention and ``m``, and the median
        memorisation ratios; ``comparison``; ``per_seed`` training and tuning records),
        ``config``, ``seconds``, ``machine``; also written to ``output_dir/results.json``.

    Examples
    --------
    >>> from skflow_experiments import fewshot
    >>> fewshot.PRESETS["quick"]["learned"]  # the default fit(X, y)
    {}
    >>> res = fewshot.run("tiny", output_dir="out/fewshot")  # doctest: +SKIP
    """
    return SPEC.run(preset, progress=progress, **options)


def _table(res: dict, conv: str) -> str:
    copy = res["summary"]["memorization_ratio_median"]
    rows = [
        "| m | MMD² plug-in | MMD² tuned plug-in | MMD² learned | noise floor mean (q95) | "
        "learned lower than plug-in [95 % CI] | learned lower than tuned plug-in [95 % CI] | "
        "memorisation ratio plug-in / tuned / learned |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, means, floor, gains in support_size_cells(res, conv, METHODS):
        ratios = " / ".join(f"{copy[k][m]:.2f}" for k in METHODS)
        rows.append(f"| {m} | {means} | {floor} | {gains} | {ratios} |")
    return "\n".join(rows)


def docs_section(results: dict, command: str) -> str:
    """The Markdown of the fewshot section of ``docs/results.md``.

    The command, the preset and the machine; per data set, its classes and trainings, then
    one table per MMD² bandwidth convention: per m, the MMD² of the plug-in, tuned plug-in
    and learned model, the noise floor, the reductions and the memorisation ratios.

    Parameters
    ----------
    results : dict
        The output of :func:`run`, one entry per data set in ``datasets``.
    command : str
        The exact command line that produced ``results``.

    Returns
    -------
    text : str
        Markdown; every data set gets its own paragraph and two tables.
    """
    cfg = results["config"]
    preset = (
        f"Preset `{results['preset']}`: seeds {results['seeds']}, {cfg['n_eval_tasks']} held-out "
        f"tasks per seed, {cfg['n_generated']} generated points per task, learned-model "
        f"parameters {cfg['learned'] or 'all defaults'}. Wall time "
        f"{results['seconds']['total']:.0f} s."
    )
    parts = section_head(results, command, preset, label=cfg.get("label"))
    for name, res in results["datasets"].items():
        runs = [s["training"] for s in res["per_seed"]]
        tuned = {s["seed"]: s["tuned_sigma_min"] for s in res["per_seed"]}
        parts += [
            "",
            f"**{name}** (train classes {res['data']['train_classes']}, held-out classes "
            f"{res['data']['test_classes']}, PCA keeps "
            f"{100 * res['data']['pca_explained_variance_ratio']:.1f} % of the training "
            f"classes' variance). {training_budget(runs, None)} Support range "
            f"{runs[0]['support_range']}, validation classes {runs[0]['validation_classes']}, "
            f"stop: {sorted({r['stop'] for r in runs})}. Tuned sigma_min per seed and m: {tuned}.",
        ]
        parts += convention_tables(
            lambda conv, res=res: _table(res, conv),
            ("reference (true) rows", "pooled rows"),
            "MMD², median heuristic from the {label}; intervals: 95 % bootstrap over tasks, "
            "stratified by seed. Memorisation ratio: median over tasks of "
            "`memorization_ratio(generated, support, reference)` (near 1: new points; "
            "near 0: copies of the support).",
        )
    return "\n".join(parts)


def _cli_rows(s: dict) -> list[tuple[str, str]]:
    """The headline numbers the command line prints after a run: ``(quantity, value)`` rows."""
    rows = []
    for name, d in s.items():
        if not isinstance(d, dict) or "true" not in d:
            continue
        copy = d["memorization_ratio_median"]
        for m in map(str, d["support_sizes"]):
            rows.append(
                (
                    f"{name}, m = {m}: learned MMD² below tuned plug-in",
                    ci_pct(d["true"]["learned_vs_plugin_tuned"][m]),
                )
            )
            ratios = " / ".join(f"{copy[k][m]:.2f}" for k in ("plugin", "plugin_tuned", "learned"))
            rows.append((f"{name}, m = {m}: memorisation ratio plug-in / tuned / learned", ratios))
    return rows


#: The experiment as a specification: presets, work, results, figure, docs, headline rows.
SPEC = Experiment(
    name="fewshot",
    presets=PRESETS,
    measure=_measure,
    assemble=_assemble,
    configure=_config,
    figure=lambda results, outputs, folder: _plot(results, folder),
    docs=docs_section,
    headline=_cli_rows,
)


def write_docs(results: dict, command: str, path: str | Path | None = None) -> Path:
    """Write :func:`docs_section` between the ``fewshot`` markers of the results page."""
    return SPEC.write_docs(results, command, path)
