"""Experiment 3: support scarcity on real features, classes as tasks.

The paper conditions on DINOv2 ImageNet features (PCA to 16 dimensions), every class a task:
with few support points the learned, meta-trained model beats the plug-in Nadaraya-Watson
field (24 % lower MMD² at ``m = 10``), and the plug-in catches up once ``m`` exceeds about 25.

No network access is assumed here, so the real data are scikit-learn's bundled handwritten
digits (:func:`sklearn.datasets.load_digits`: 1797 images of 8x8 pixels, 10 classes of about
180 rows). scikit-learn bundles no other offline data set with more than 3 classes (iris and
wine have 3, breast cancer 2; Olivetti faces, 20 newsgroups, LFW, ... need a download), so
digits is the only one used. The 64 pixels are reduced to 16 dimensions by a PCA fitted on the
*training classes* only and then standardized (also with training-class statistics).

Protocol (split by class, and :mod:`skflow_experiments.protocol`):

* training classes ``0..6`` (the learned models and the plug-in's ``sigma_min`` choice see only
  these), held-out classes ``7, 8, 9``;
* ``n_seeds`` seeds; each trains its own models and draws its own ``n_eval_tasks`` held-out
  tasks: task ``j`` takes held-out class ``j mod 3``, shuffles its rows, and keeps the first
  ``max(m)`` rows as the support pool and the others as the reference. For every ``m`` the
  support is the first ``m`` rows of the pool (nested supports, the same reference for every
  ``m``), and each sampler generates ``n_generated`` points conditioned on it, scored against
  the reference under both median-heuristic conventions;
* the noise floor of a task is the MMD² between its pool (``max(m)`` true rows, disjoint from
  the reference) and its reference: a class has only about 180 rows, so no independent true
  sample of ``n_generated`` rows exists, and this smaller sample's floor is an upper estimate
  of the floor at ``n_generated`` points (the estimator's spread falls with the sample size);
* no sampler is refitted per task: the learned models are conditioned in context
  (``sample_batch``), the plug-in is the exact field of the support.

Methods:

``plugin``
    :class:`skflow.NWFlowSampler` with ``sigma_min = 0.01`` (the paper's setting).
``plugin_tuned``
    the same field with ``sigma_min`` chosen, separately for every ``m``, from a grid by the
    same few-shot protocol on the *training* classes (the best mean MMD², true-point
    bandwidth): a plug-in whose only parameter is tuned as fairly as the learned model is
    trained.
``learned``
    :class:`skflow.LearnedFlowSampler` meta-trained on rotation-augmented class tasks: every
    training task is a training class mapped by a fresh uniformly random orthogonal matrix of
    the standardized feature space. Seven classes are far too few tasks for a meta-learner
    (the paper had ImageNet's ~1000); the random rotations remove the class identity, which
    cannot transfer to new classes, and keep the within-class structure (spectrum, tails,
    clusters), which can.
``learned_plain``
    :class:`skflow.LearnedFlowSampler` fitted as ``fit(X_train, y_train)`` with
    ``augment=None, normalize=False`` (every training class a task as it is), with the same
    budget: the negative control. (The default ``fit(X, y)`` is measured by
    :mod:`skflow_experiments.fewshot`.)

Run it with ``python -m skflow_experiments scarcity --quick`` (or ``--full``; add
``--write-docs`` to update ``docs/results.md``), or call :func:`run`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from skflow import LearnedFlowSampler, NWFlowSampler, SolverOptions
from skflow.samplers.options import learned_params_from_flat
from skflow.tasks import ClassTasks, RotatedTasks
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
)

__all__ = ["PRESETS", "RotatedClassTasks", "SPEC", "docs_section", "run", "write_docs"]

_SPLIT = {"n_components": 16, "train_classes": (0, 1, 2, 3, 4, 5, 6), "test_classes": (7, 8, 9)}

#: Presets of :func:`run`. ``learned`` holds :class:`~skflow.LearnedFlowSampler` parameters
#: shared by both learned models; ``max_time`` is a wall-clock guard on each training (one
#: that reaches ``max_iter`` first is reproducible bit for bit); ``torch_threads`` is the
#: number of Torch threads during the run (``None``: Torch's choice).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        **_SPLIT,
        "support_sizes": (5, 10, 25),
        "n_seeds": 2,
        "n_eval_tasks": 4,
        "n_generated": 80,
        "sigma_min_grid": (0.01, 0.3),
        "n_tune_repeats": 1,
        "n_steps": 10,
        "learned": {
            "d_model": 32,
            "n_heads": 4,
            "n_layers": 1,
            "batch_tasks": 16,
            "n_targets": 64,
            "support_size": 25,
            "max_iter": 100,
            "warmup": 20,
        },
        "max_time": 60.0,
        "device": "cpu",
        "torch_threads": 1,
    },
    # tries the pipeline in about a minute on two cores: not a result (never in the docs)
    "smoke": {
        **_SPLIT,
        "support_sizes": (5, 25),
        "n_seeds": 2,
        "n_eval_tasks": 8,
        "n_generated": 64,
        "sigma_min_grid": (0.01, 0.1, 0.3),
        "n_tune_repeats": 1,
        "n_steps": 30,
        "learned": {"support_size": 25, "n_targets": 64, "max_iter": 80, "warmup": 10},
        "max_time": None,
        "device": "cpu",
        "torch_threads": 1,
    },
    "quick": {
        **_SPLIT,
        "support_sizes": (5, 10, 25, 50),
        "n_seeds": 3,
        "n_eval_tasks": 100,
        "n_generated": 200,
        "sigma_min_grid": (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9),
        "n_tune_repeats": 3,
        "n_steps": 100,
        "learned": {"support_size": 50, "n_targets": 100, "max_iter": 1500},
        "max_time": 300.0,
        "device": "cpu",
        "torch_threads": 1,
    },
    "full": {
        **_SPLIT,
        "support_sizes": (2, 5, 10, 15, 25, 35, 50, 75),
        "n_seeds": 3,
        "n_eval_tasks": 150,
        "n_generated": 500,
        "sigma_min_grid": (0.01, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9),
        "n_tune_repeats": 10,
        "n_steps": 100,
        # the paper's model (LearnedFlowSampler.paper_config()); classes have ~180 rows
        "learned": {"paper_config": True, "support_size": 50, "n_targets": 100},
        "max_time": None,
        "device": "auto",
        "torch_threads": None,
    },
}

METHODS = ("plugin", "plugin_tuned", "learned", "learned_plain")
_SIGMA_MIN = 0.01


class RotatedClassTasks(RotatedTasks):
    """Class tasks under random orthogonal maps about the origin: the scarcity recipe.

    :class:`skflow.tasks.RotatedTasks` (``center="origin"``) over
    :class:`skflow.tasks.ClassTasks`: every task is one class's rows mapped by a fresh
    Haar-random orthogonal matrix ``Q`` (``x -> x Q``), support and queries alike. The
    augmentation itself lives in the library (``LearnedFlowSampler().fit(X, y)`` uses it by
    default, about each support's mean); this wrapper keeps this experiment's recipe.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Rows (ideally centred, e.g. standardized, so that rotations about the origin keep
        them in the data's range).
    y : array-like of shape (n_samples,)
        Class labels; each class is a base task.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow_experiments.scarcity import RotatedClassTasks
    >>> X = np.random.default_rng(0).normal(size=(40, 3))
    >>> tasks = RotatedClassTasks(X, np.repeat([0, 1], 20))
    >>> S, Q = tasks.sample_tasks(5, 4, 6, random_state=0)
    >>> S.shape, Q.shape
    ((5, 4, 3), (5, 6, 3))
    """

    def __init__(self, X: Any, y: Any):
        super().__init__(ClassTasks(X, y, random_state=0), center="origin")


def _features(cfg: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """Digits reduced by PCA and standardized, both fitted on the training classes."""
    X, y = load_digits(return_X_y=True)
    train = np.isin(y, cfg["train_classes"])
    pca = PCA(n_components=cfg["n_components"], random_state=0).fit(X[train])
    Z = pca.transform(X)
    scaler = StandardScaler().fit(Z[train])
    Z = scaler.transform(Z)
    info = {
        "dataset": "sklearn.datasets.load_digits",
        "n_samples": int(len(y)),
        "n_pixels": int(X.shape[1]),
        "class_sizes": {int(c): int(np.sum(y == c)) for c in np.unique(y)},
        "pca_explained_variance_ratio": float(pca.explained_variance_ratio_.sum()),
    }
    return Z, y, info


def _plugin_scores(pool, reference, support_sizes, sigmas, n_generated, n_steps, seed):
    """Both-convention MMD² of the plug-in for every (m, sigma_min) on one split."""
    out = {}
    for m in support_sizes:
        for s in sigmas:
            sampler = NWFlowSampler(sigma_min=s, solver=SolverOptions(n_steps=n_steps)).fit(
                pool[:m]
            )
            gen = sampler.sample(n_generated, random_state=seed)
            out[(m, s)] = scores_both_conventions(gen, reference)
    return out


def _learned_params(cfg: dict, seed: int) -> dict[str, Any]:
    spec = dict(cfg["learned"])
    params = LearnedFlowSampler.paper_config() if spec.pop("paper_config", False) else {}
    params.update(spec)
    params.setdefault("sigma_min", _SIGMA_MIN)
    params.update(
        n_steps=cfg["n_steps"],
        solver="heun",
        max_time=cfg["max_time"],
        device=cfg["device"],
        random_state=seed,
    )
    return params


def _train_models(Z, y, cfg: dict, seed: int) -> tuple[dict, dict]:
    """Both learned models of one seed and their training records."""
    train = np.isin(y, cfg["train_classes"])
    models, records = {}, {}
    for name, source, extra in (
        ("learned", (RotatedClassTasks(Z[train], y[train]),), {}),
        # the negative control: classes as they are, no augmentation, no normalisation
        ("learned_plain", (Z[train], y[train]), {"augment": None, "normalize": False}),
    ):
        t0 = time.perf_counter()
        params = _learned_params(cfg, derive_seed(seed, 1)) | extra
        model = LearnedFlowSampler(**learned_params_from_flat(params)).fit(*source)
        models[name] = model
        records[name] = {
            "seed": seed,
            "n_iter": int(model.n_iter_),
            "max_iter": int(model.max_iter),
            "reached_max_iter": bool(model.n_iter_ == model.max_iter),
            "train_seconds": round(time.perf_counter() - t0, 1),
            "final_loss_mean_last_100": float(np.mean(model.loss_curve_[-100:])),
        }
    return models, records


def _tune(Z, y, cfg: dict, n_jobs, seed: int) -> tuple[dict, dict]:
    """sigma_min per m: the best mean MMD² (true-point bandwidth) on the training classes."""
    ms, grid = cfg["support_sizes"], tuple(float(s) for s in cfg["sigma_min_grid"])
    classes = cfg["train_classes"]
    n = len(classes) * cfg["n_tune_repeats"]
    splits = class_splits(y, classes, n, max(ms), derive_seed(seed, 2), X=Z)
    rows = parallel_map(
        _plugin_scores,
        [
            (pool, ref, ms, grid, cfg["n_generated"], cfg["n_steps"], i)
            for i, (pool, ref) in enumerate(splits)
        ],
        n_jobs,
    )
    tuning = {
        str(m): {f"{s:g}": float(np.mean([r[(m, s)]["true"] for r in rows])) for s in grid}
        for m in ms
    }
    best = {m: min(grid, key=lambda s, m=m: tuning[str(m)][f"{s:g}"]) for m in ms}
    return best, tuning


def _evaluate(Z, y, models: dict, best_sigma: dict, cfg: dict, n_jobs, seed: int) -> dict:
    """Per m: method (and ``floor``) -> convention -> per-task MMD² of this seed's tasks."""
    ms = cfg["support_sizes"]
    seed3 = derive_seed(seed, 3)
    splits = class_splits(y, cfg["test_classes"], cfg["n_eval_tasks"], max(ms), seed3, X=Z)
    sigmas = sorted({_SIGMA_MIN, *best_sigma.values()})
    plug = parallel_map(
        _plugin_scores,
        [
            (pool, ref, ms, sigmas, cfg["n_generated"], cfg["n_steps"], derive_seed(seed, 4, i))
            for i, (pool, ref) in enumerate(splits)
        ],
        n_jobs,
    )
    pools = np.stack([pool for pool, _ in splits])
    floor = [scores_both_conventions(pool, ref) for pool, ref in splits]
    out = {}
    for m in ms:
        rows = [
            {"plugin": p[(m, _SIGMA_MIN)], "plugin_tuned": p[(m, best_sigma[m])], "floor": f}
            for p, f in zip(plug, floor, strict=True)
        ]
        for name, model in models.items():
            gen = model.sample_batch(
                cfg["n_generated"], pools[:, :m], random_state=derive_seed(seed, 5, m)
            )
            for i, (_, ref) in enumerate(splits):
                rows[i][name] = scores_both_conventions(gen[i], ref)
        out[str(m)] = {
            k: {c: np.array([r[k][c] for r in rows]) for c in CONVENTIONS}
            for k in (*METHODS, "floor")
        }
    return out


def _run_seed(Z, y, cfg: dict, n_jobs, seed: int, bar) -> dict:
    """Train, tune and evaluate one seed; ``bar`` advances by 2 (the trainings), 1 and 1."""
    t0 = time.perf_counter()
    models, training = _train_models(Z, y, cfg, seed)
    bar.update(2)
    best_sigma, tuning = _tune(Z, y, cfg, n_jobs, seed)
    bar.update(1)
    table = _evaluate(Z, y, models, best_sigma, cfg, n_jobs, seed)
    bar.update(1)
    return {
        "seed": seed,
        "table": table,
        "tuned_sigma_min": {str(m): s for m, s in best_sigma.items()},
        "tuning_mmd2_train_classes": tuning,
        "training": training,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _summary(comp: dict, ms: tuple) -> dict:
    """Per m and convention: how much lower the learned models are, with intervals."""
    out: dict[str, Any] = {"support_sizes": list(ms)}
    for conv in CONVENTIONS:
        out[conv] = lower_pcts(comp, ms, conv)
        mean = {k: [float(np.mean(comp[str(m)]["per_task"][k][conv])) for m in ms] for k in METHODS}
        out[conv]["mmd2"] = {k: dict(zip(map(str, ms), v, strict=True)) for k, v in mean.items()}
        out[conv]["crossing_m_learned_vs_plugin"] = _crossing(ms, mean["learned"], mean["plugin"])
    out["paper"] = "learned 24 % lower MMD² than plug-in at m = 10; plug-in catches up for m > ~25"
    return out


def _crossing(support_sizes, ours, theirs) -> float | None:
    """First ``m`` (log-linear interpolation) where ``ours - theirs`` turns from < 0 to >= 0."""
    gap = np.asarray(ours) - np.asarray(theirs)
    logm = np.log(np.asarray(support_sizes, dtype=float))
    for i in range(1, len(gap)):
        if gap[i - 1] < 0 <= gap[i]:
            frac = -gap[i - 1] / (gap[i] - gap[i - 1])
            return float(np.exp(logm[i - 1] + frac * (logm[i] - logm[i - 1])))
    return None


def _plot(results: dict, output_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    ms = np.asarray(results["summary"]["support_sizes"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {
        "plugin": ("tab:red", "o", "plug-in NW (σ_min = 0.01)"),
        "plugin_tuned": ("tab:orange", "s", "plug-in NW, σ_min tuned on train classes"),
        "learned": ("tab:blue", "D", "learned (rotation-augmented tasks)"),
        "learned_plain": ("tab:gray", "v", "learned, plain fit(X_train, y_train)"),
    }
    for name, (color, marker, label) in styles.items():
        values = [np.asarray(results["comparison"][str(m)]["per_task"][name]["true"]) for m in ms]
        mean = [v.mean() for v in values]
        sem = [v.std(ddof=1) / np.sqrt(v.size) for v in values]
        axes[0].errorbar(ms, mean, yerr=sem, color=color, marker=marker, capsize=3, label=label)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("MMD² to held-out rows, true-point bandwidth")
    axes[0].set_title("digits (PCA 16), held-out classes 7-9")
    axes[0].legend(fontsize=10)
    for key, name in (
        ("learned_vs_plugin", "learned"),
        ("learned_vs_plugin_tuned", "plugin_tuned"),
    ):
        rows = [results["summary"]["true"][key][str(m)] for m in ms]
        pct = np.array([r["pct"] for r in rows])
        err = np.abs(np.array([r["ci"] for r in rows]).T - pct)
        color, marker, _ = styles[name]
        label = "learned vs plug-in" if name == "learned" else "learned vs tuned plug-in"
        axes[1].errorbar(ms, pct, yerr=err, color=color, marker=marker, capsize=3, label=label)
    axes[1].axhline(0, color="k", lw=0.8)
    axes[1].plot([10], [24], "k*", ms=12, label="paper: learned 24 % lower at m = 10")
    axes[1].set_ylabel("learned MMD² lower by, % [95 % CI]")
    axes[1].set_title("relative gain of the learned model")
    axes[1].legend(fontsize=10, loc="lower left", numpoints=1)
    for ax in axes:
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())  # only the support sizes as ticks
        ax.set_xticks(ms, [str(m) for m in ms])
        ax.set_xlabel("support size m")
    fig.tight_layout()
    return save_figure(fig, output_dir, "scarcity.png")


def _config(preset: str, seeds: int | None, n_tasks: int | None) -> dict:
    cfg = preset_config(PRESETS, preset, seeds=seeds, n_tasks=n_tasks)
    if not all(0.0 < s < 1.0 for s in cfg["sigma_min_grid"]):
        raise ValueError(f"sigma_min_grid values must lie in (0, 1), got {cfg['sigma_min_grid']}.")
    cfg["support_sizes"] = tuple(int(m) for m in cfg["support_sizes"])
    return cfg


def _measure(run: Run) -> tuple[list[dict], dict, dict]:
    """Every seed's trainings, tuning and evaluation, and the comparisons over the seeds."""
    Z, y, data_info = _features(run.cfg)
    per_seed = [_run_seed(Z, y, run.cfg, run.n_jobs, s, run.bar) for s in run.seeds]
    comparison = compare_per_support_size(per_seed, run.cfg["support_sizes"], METHODS)
    return per_seed, comparison, data_info


def _assemble(run: Run, outputs: tuple[list[dict], dict, dict]) -> dict[str, Any]:
    """``results.json``: the summary, the comparisons, per-seed records, data, config."""
    per_seed, comparison, data_info = outputs
    summary = _summary(comparison, run.cfg["support_sizes"])
    return {
        "experiment": "scarcity",
        "preset": run.preset,
        "seeds": run.seeds,
        "summary": summary | {"wall_seconds": round(run.wall, 1)},
        "comparison": comparison,
        "per_seed": [{k: v for k, v in s.items() if k != "table"} for s in per_seed],
        "data": data_info,
        "config": run.cfg,
        "seconds": {"total": round(run.wall, 1)},
        "machine": run.machine(),
    }


def run(preset: str = "quick", *, progress: bool = False, **options: Any) -> dict[str, Any]:
    """Run the support-scarcity experiment and write ``results.json`` and ``scarcity.png``.

    Per seed: trains the two learned models on the training classes, tunes the plug-in's
    ``sigma_min`` per support size on the training classes, then scores every method on that
    seed's held-out tasks with the few-shot protocol of the module docstring.

    Parameters
    ----------
    preset : {"tiny", "smoke", "quick", "full"}, default="quick"
        Size of the run (see :data:`PRESETS`). ``"smoke"`` only tries the pipeline (not a
        result). ``"quick"`` (3 seeds x 100 tasks) runs on a
        CPU; ``"full"`` uses the paper's model configuration and is meant for a GPU.
    progress : bool, default=False
        Show a progress bar (stderr) over the work, with an ETA.
    **options
        Options of the shared runner (:meth:`~skflow_experiments._experiment.Experiment.run`):
        ``output_dir`` (default ``output/experiments/scarcity``, created: ``results.json`` and the
        figure), ``n_jobs`` (joblib workers for the plug-in evaluations, one split per job; None
        runs them in this process, and under ``joblib.parallel_config(backend="dask")`` on a Dask
        cluster), ``random_state`` (the first seed; the seeds are ``random_state, random_state + 1,
        ...``), ``seeds`` and ``n_tasks`` (overrides of the preset's ``n_seeds`` and
        ``n_eval_tasks``).

    Returns
    -------
    results : dict
        ``summary`` (per convention and ``m``: how much lower the learned models' MMD² is than
        the plug-in's, with 95 % intervals, the mean MMD² per method, the crossing ``m``),
        ``comparison`` (the protocol's full output per ``m``, per-task values), ``per_seed``
        (tuning and training records), ``config``, ``seconds`` and ``machine``; also written to
        ``output_dir/results.json``.

    Examples
    --------
    >>> from skflow_experiments import scarcity
    >>> scarcity.PRESETS["quick"]["n_eval_tasks"]
    100
    >>> res = scarcity.run("tiny", output_dir="out/scarcity")  # doctest: +SKIP
    >>> res["summary"]["true"]["learned_vs_plugin"]["10"]  # doctest: +SKIP
    """
    return SPEC.run(preset, progress=progress, **options)


#: The sentence under each table of the results page: what it shows, in words.
_TABLE_NOTE = (
    "In words: one row per support size m. The MMD² columns are means over all held-out tasks"
    " and seeds (lower is closer to the held-out class; the noise floor is the MMD² of a "
    "second real sample of the class). A reduction of +20 % means the model's MMD² is 20 % "
    "below the baseline's (positive: the learned model is better); -100 % means twice the "
    "baseline's."
)


def _table(results: dict, conv: str) -> str:
    rows = [
        "| m | MMD² plug-in | MMD² tuned plug-in | MMD² learned | MMD² learned, plain fit | "
        f"noise floor: mean (95th percentile), {max(results['summary']['support_sizes'])}-row "
        "pool | learned: MMD² reduction vs plug-in [95 % CI] | learned: MMD² reduction vs "
        "tuned plug-in [95 % CI] | learned, plain fit: MMD² reduction vs plug-in [95 % CI] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cells in support_size_cells(results, conv, METHODS):
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _budget(results: dict) -> str:
    runs = [t for s in results["per_seed"] for t in s["training"].values()]
    return training_budget(runs, results["config"]["max_time"])


def docs_section(results: dict, command: str) -> str:
    """The Markdown of the scarcity section of ``docs/results.md``.

    The command, the preset, the trainings and the machine, then one table per MMD²
    bandwidth convention: per support size m, the MMD² of every method, the noise floor and
    the learned models' reductions with intervals.

    Parameters
    ----------
    results : dict
        The output of :func:`run`: ``summary``, ``comparison`` and ``per_seed`` feed the
        tables.
    command : str
        The exact command line that produced ``results``.

    Returns
    -------
    text : str
        Markdown with both conventions' tables, one row per m.
    """
    cfg = results["config"]
    tuned = {s["seed"]: s["tuned_sigma_min"] for s in results["per_seed"]}
    preset = (
        f"Preset `{results['preset']}`: seeds {results['seeds']}, {cfg['n_eval_tasks']} "
        f"held-out tasks per seed (classes {list(cfg['test_classes'])} in turn), "
        f"{cfg['n_generated']} generated points per task against the class's reference rows, "
        f"{cfg['n_steps']} Heun steps. PCA({cfg['n_components']}) keeps "
        f"{100 * results['data']['pca_explained_variance_ratio']:.1f} % of the training "
        f"classes' variance. Wall time {results['seconds']['total']:.0f} s. "
        + _budget(results)
        + f" Tuned sigma_min per seed and m: {tuned}."
    )
    parts = section_head(results, command, preset) + convention_tables(
        lambda conv: _table(results, conv),
        ("reference (true) rows", "pooled rows"),
        "MMD², median heuristic from the {label}; paper: learned 24 % lower at m = 10. "
        "Intervals: 95 % bootstrap over tasks, stratified by seed.",
        _TABLE_NOTE,
    )
    return "\n".join(parts)


def _cli_rows(s: dict) -> list[tuple[str, str]]:
    """The headline numbers the command line prints after a run: ``(quantity, value)`` rows."""
    t = s["true"]
    rows = []
    for m in s["support_sizes"]:
        rows.append(
            (f"m = {m}: learned MMD² below plug-in", ci_pct(t["learned_vs_plugin"][str(m)]))
        )
        rows.append(
            (
                f"m = {m}: learned MMD² below tuned plug-in",
                ci_pct(t["learned_vs_plugin_tuned"][str(m)]),
            )
        )
    return rows


#: The experiment as a specification: presets, work, results, figure, docs, headline rows.
SPEC = Experiment(
    name="scarcity",
    presets=PRESETS,
    measure=_measure,
    assemble=_assemble,
    configure=_config,
    units=lambda cfg, seeds: 4 * len(seeds),
    desc="scarcity: 2 trainings, tuning, evaluation per seed",
    figure=lambda results, outputs, folder: _plot(results, folder),
    docs=docs_section,
    headline=_cli_rows,
)


def write_docs(results: dict, command: str, path: str | Path | None = None) -> Path:
    """Write :func:`docs_section` between the ``scarcity`` markers of the results page."""
    return SPEC.write_docs(results, command, path)
