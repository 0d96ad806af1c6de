"""Zero-shot benchmark of the pretrained prior on real data sets it never saw, and fine-tuning.

The question a user without a training set asks: loaded with
``LearnedFlowSampler.from_pretrained(name, n_features=d)`` and given nothing but ``m``
examples of a class, does the shipped prior generate that class better than the plug-in field,
including the plug-in whose ``sigma_min`` was tuned on the data (issue 26)? And the question of
a user who has training classes: does a short ``warm_start`` fine-tuning of the prior on them
help, and does it beat a model trained from scratch for the same time?

Data (offline, bundled with scikit-learn, no download): digits (64 pixels, PCA to 16
components), iris (4 features), wine (13), breast cancer (30 features standardized, PCA to 16).
Every data set is standardized with :class:`~sklearn.preprocessing.StandardScaler` on all of
its rows, as a user would, and the PCA is fitted on all rows too: both are unsupervised, no
label is used, and the prior is trained on none of it (zero-shot). Every class is a task.

Tasks (as in :mod:`skflow_experiments.fewshot`): task ``j`` takes class ``j mod k``, shuffles
its rows, keeps the first ``max(m)`` as the support pool (nested supports: the first ``m``
rows) and the others as the reference. A support size ``m`` is used on a data set only when
its smallest class has at least ``m + 10`` rows (iris' classes have 50 rows and wine's
smallest 48: no ``m = 50`` there; the results list every skipped size).

Methods: ``plugin`` (:class:`skflow.NWFlowSampler`, ``sigma_min = 0.01``), ``plugin_tuned``
(``sigma_min`` per data set and ``m`` from a grid, the best mean MMD² with the true-point
bandwidth on *independent* task draws of the same data set's classes: an oracle that has seen
the evaluation classes, favourable to the plug-in; the draws share no support pool with the
evaluation tasks, which the results check), ``plugin_other`` (per class, the ``sigma_min`` of
lowest mean MMD² on the tuning draws of the data set's *other* classes: the plug-in tuned on
training classes that a user handed a new class can fit, issue 32's baseline), ``plugin_auto``
(``sigma_min="auto"``, each support's own bandwidth), ``pretrained_base`` (the base prior),
``pretrained`` (the prior,
``sample_batch(n_generated, pools[:, :m])``), and the noise floor (the pool against the
reference: an upper estimate of the floor at ``n_generated`` points). Scores: unbiased MMD²
against the reference under both median conventions and the copy check
:func:`skflow.metrics.memorization_ratio` of every method. The protocol of
:mod:`skflow_experiments.protocol`: paired 95 % intervals from a bootstrap over tasks of the
pretrained prior against each plug-in, the percent by which its mean MMD² is lower, and the
average of that percent over the data sets at ``m = 10`` (each data set's tasks resampled on
their own).

Fine-tuning (digits only, split as in :mod:`skflow_experiments.fewshot`: classes 0-6 for
training, 7-9 held out; PCA and scaler fitted on the training classes): ``zero_shot`` (the
prior), ``fine_tuned`` (the prior with ``warm_start=True``, ``max_time=budget_s`` and a large
``max_iter``, fitted on the training classes) and ``scratch`` (``LearnedFlowSampler`` with its
defaults, the same ``max_time``), ``n_seeds`` seeds for the two trained arms, each seed with its
own held-out tasks; the plug-ins as above, with ``sigma_min`` tuned on the *training* classes
(what such a user can do). Every training's wall time and iterations are recorded.

Run it with ``python -m skflow_experiments pretrained --quick --write-docs`` (``--smoke``: a
run of about two minutes that checks the pipeline and is not a result).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import sklearn.datasets
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from skflow import LearnedFlowSampler, NWFlowSampler
from skflow.exceptions import MemorizationWarning
from skflow.metrics import memorization_ratio
from skflow.samplers.options import learned_params_from_flat, nested_learned_params
from skflow.threads import parallel_map

from ._experiment import Experiment, Run
from ._io import (
    derive_seed,
    save_figure,
)
from ._report import ci_pct, machine_line
from ._splits import class_splits
from .protocol import (
    BOOT_SEED,
    CONVENTIONS,
    N_BOOT,
    bootstrap_indices,
    compare_to_baseline,
    preset_config,
    scores_both_conventions,
    training_budget,
    training_record,
)

__all__ = [
    "DATASETS",
    "PRESETS",
    "SPEC",
    "average_lower",
    "best_on_other_classes",
    "docs_section",
    "load_dataset",
    "run",
    "shared_pools",
    "write_docs",
]

#: Zero-shot data sets: scikit-learn loader, whether to standardize before the PCA (features
#: in different units), PCA components (None: none).
DATASETS: dict[str, dict[str, Any]] = {
    "digits-pca16": {"loader": "load_digits", "pre_scale": False, "n_components": 16},
    "iris": {"loader": "load_iris", "pre_scale": False, "n_components": None},
    "wine": {"loader": "load_wine", "pre_scale": False, "n_components": None},
    "breast-cancer-pca16": {
        "loader": "load_breast_cancer",
        "pre_scale": True,
        "n_components": 16,
    },
}
_FINETUNE = {"name": "digits-pca16", "n_components": 16, "test_classes": (7, 8, 9)}
_GRID = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
_ALL = tuple(DATASETS)
#: A class must keep this many reference rows beside a support of m rows.
MIN_REFERENCE = 10

#: Presets of :func:`run`. ``budget_s`` is the ``max_time`` of every training (None: only
#: ``train_max_iter`` bounds it); ``fine_tune`` holds parameters set on the prior for its
#: fine-tuning besides the budget (e.g. a lower ``learning_rate``; empty: the prior's own);
#: ``scratch`` the from-scratch model's parameters that differ from the defaults; ``prior``
#: the name given to ``from_pretrained``; ``base_prior`` the prior it is compared with
#: zero-shot (method ``pretrained_base``: ``general-16``, the same recipe without the
#: support size as an input).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "datasets": ("iris", "wine"),
        "support_sizes": (5, 10, 50),
        "n_eval_tasks": 4,
        "n_tune_tasks": 4,
        "n_generated": 30,
        "sigma_min_grid": (0.01, 0.3),
        "finetune": True,
        "n_seeds": 1,
        # room for the fit's preparation (the predictive frame and its check against the
        # kernel plug-in: about 2 s on a loaded 2-core machine) before 3 iterations
        "budget_s": 30.0,
        "train_max_iter": 3,
        "fine_tune": {},
        "scratch": {"d_model": 16, "n_layers": 1, "n_steps": 8},
        "prior": "general-16-sized",
        "base_prior": "general-16",
        "torch_threads": 1,
        "label": "end-to-end test, not a result",
    },
    "smoke": {
        "datasets": _ALL,
        "support_sizes": (5, 10, 50),
        "n_eval_tasks": 12,
        "n_tune_tasks": 8,
        "n_generated": 60,
        "sigma_min_grid": (0.01, 0.5),
        "finetune": True,
        "n_seeds": 1,
        "budget_s": None,
        "train_max_iter": 20,
        "fine_tune": {},
        "scratch": {},
        "prior": "general-16-sized",
        "base_prior": "general-16",
        "torch_threads": 1,
        "label": "smoke test, not a result: 12 tasks, 20 training iterations",
    },
    "quick": {
        "datasets": _ALL,
        "support_sizes": (5, 10, 20, 50),
        "n_eval_tasks": 60,
        "n_tune_tasks": 60,
        "n_generated": 200,
        "sigma_min_grid": _GRID,
        "finetune": True,
        "n_seeds": 3,
        "budget_s": 120.0,
        "train_max_iter": 100_000,
        "fine_tune": {},
        "scratch": {},
        "prior": "general-16-sized",
        "base_prior": "general-16",
        "torch_threads": 1,
        "label": None,
    },
    "full": {
        "datasets": _ALL,
        "support_sizes": (5, 10, 20, 50),
        "n_eval_tasks": 150,
        "n_tune_tasks": 150,
        "n_generated": 500,
        "sigma_min_grid": _GRID,
        "finetune": True,
        "n_seeds": 5,
        "budget_s": 120.0,
        "train_max_iter": 100_000,
        "fine_tune": {},
        "scratch": {},
        "prior": "general-16-sized",
        "base_prior": "general-16",
        "torch_threads": None,
        "label": None,
    },
}

#: Methods of the zero-shot tables and of the fine-tuning table.
METHODS = (
    "plugin",
    "plugin_tuned",
    "plugin_other",
    "plugin_auto",
    "pretrained_base",
    "pretrained",
)
FT_METHODS = ("plugin", "plugin_tuned", "plugin_auto", "zero_shot", "fine_tuned", "scratch")
#: (challenger, baseline) pairs compared with intervals.
PAIRS = (
    ("pretrained", "plugin"),
    ("pretrained", "plugin_tuned"),
    ("pretrained", "plugin_other"),
    ("pretrained", "plugin_auto"),
    ("pretrained", "pretrained_base"),
)
FT_PAIRS = (
    ("fine_tuned", "zero_shot"),
    ("fine_tuned", "scratch"),
    ("zero_shot", "scratch"),
    ("zero_shot", "plugin_tuned"),
    ("fine_tuned", "plugin_tuned"),
    ("scratch", "plugin_tuned"),
)
_SIGMA_MIN = 0.01


def load_dataset(name: str) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """One zero-shot data set: standardized (and PCA-reduced) features, labels, description.

    The scaler and the PCA are fitted on all rows without the labels, as a user would.

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS`.

    Returns
    -------
    Z : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    info : dict
        Loader, feature counts, class sizes and the PCA's explained variance ratio.

    Examples
    --------
    >>> Z, y, info = load_dataset("iris")
    >>> Z.shape, info["class_sizes"]
    ((150, 4), {0: 50, 1: 50, 2: 50})
    """
    spec = DATASETS[name]
    X, y = getattr(sklearn.datasets, spec["loader"])(return_X_y=True)
    X = np.asarray(X, dtype=float)
    if spec["pre_scale"]:
        X = StandardScaler().fit_transform(X)
    explained = None
    if spec["n_components"] is not None:
        pca = PCA(n_components=spec["n_components"], random_state=0).fit(X)
        X, explained = pca.transform(X), float(pca.explained_variance_ratio_.sum())
    Z = StandardScaler().fit_transform(X)
    info = {
        "dataset": f"sklearn.datasets.{spec['loader']}",
        "n_features_raw": int(getattr(sklearn.datasets, spec["loader"])().data.shape[1]),
        "n_features": int(Z.shape[1]),
        "class_sizes": {int(c): int(np.sum(y == c)) for c in np.unique(y)},
        "pca_explained_variance_ratio": explained,
    }
    return Z, y, info


def _finetune_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Digits with PCA and scaler fitted on the training classes; (Z, y, train mask, info)."""
    X, y = sklearn.datasets.load_digits(return_X_y=True)
    train = ~np.isin(y, _FINETUNE["test_classes"])
    pca = PCA(n_components=_FINETUNE["n_components"], random_state=0).fit(X[train])
    Z = StandardScaler().fit(pca.transform(X[train])).transform(pca.transform(X))
    info = {
        "dataset": f"sklearn.datasets.load_digits, {_FINETUNE['name']}",
        "train_classes": sorted(int(c) for c in np.unique(y[train])),
        "test_classes": list(_FINETUNE["test_classes"]),
        "pca_explained_variance_ratio": float(pca.explained_variance_ratio_.sum()),
    }
    return Z, y, train, info


def _usable_sizes(y: np.ndarray, classes, sizes: tuple) -> tuple[tuple, dict]:
    """The support sizes every class allows (``m + MIN_REFERENCE`` rows) and the skipped ones."""
    smallest = min(int(np.sum(y == c)) for c in classes)
    usable = tuple(m for m in sizes if smallest >= m + MIN_REFERENCE)
    skipped = {
        str(m): f"smallest class has {smallest} rows < m + {MIN_REFERENCE} = {m + MIN_REFERENCE}"
        for m in sizes
        if m not in usable
    }
    return usable, skipped


def shared_pools(a: list, b: list) -> int:
    """How many support pools of task draws ``b`` (as row sets) also occur in draws ``a``.

    Parameters
    ----------
    a, b : list of (pool rows, reference rows)
        Task draws: index arrays into one data set.

    Returns
    -------
    count : int
        Tasks of ``b`` whose support pool is, as a set of rows, a pool of ``a``.

    Examples
    --------
    >>> import numpy as np
    >>> p = (np.array([1, 2]), np.array([3]))
    >>> shared_pools([p], [p, (np.array([2, 4]), np.array([1]))])
    1
    """
    seen = {frozenset(int(i) for i in pool) for pool, _ in a}
    return sum(frozenset(int(i) for i in pool) in seen for pool, _ in b)


def _plugin_batch(
    pools: np.ndarray, m: int, sigma_min: float | str, n: int, seed: int
) -> np.ndarray:
    """The plug-in's samples for every task at once: (n_tasks, n, d) (``sigma_min="auto"``:
    each support's own bandwidth, chosen from it alone)."""
    with warnings.catch_warnings():
        # sigma_min = 0.01 copies the support on purpose (the default); the copy ratio of
        # every method is measured and reported instead of warned about
        warnings.simplefilter("ignore", MemorizationWarning)
        sampler = NWFlowSampler(sigma_min=sigma_min).fit(pools[0, :m])
        return sampler.sample(n, support=pools[:, :m], random_state=seed)


def _score_all(gen: np.ndarray, Z: np.ndarray, splits: list, m: int) -> dict:
    """Convention (and ``copy``) -> per-task values of one method's generated sets."""
    rows = [
        scores_both_conventions(g, Z[ref]) | {"copy": memorization_ratio(g, Z[pool[:m]], Z[ref])}
        for g, (pool, ref) in zip(gen, splits, strict=True)
    ]
    return {k: np.array([r[k] for r in rows]) for k in (*CONVENTIONS, "copy")}


def _plugin_tables(Z, splits, ms, sigmas, cfg: dict, n_jobs, seed: int) -> dict:
    """(m, sigma_min) -> per-task scores of the plug-in (same noise for every sigma_min)."""
    pools = np.stack([Z[pool] for pool, _ in splits])
    jobs = [(m, s) for m in ms for s in sigmas]
    gens = parallel_map(
        _plugin_batch,
        [(pools, m, s, cfg["n_generated"], derive_seed(seed, 4, m)) for m, s in jobs],
        n_jobs,
    )
    return {job: _score_all(g, Z, splits, job[0]) for job, g in zip(jobs, gens, strict=True)}


def _tune(Z, y, classes, ms, cfg: dict, n_jobs, seed: int) -> tuple[dict, dict, list, dict]:
    """sigma_min per m: the best mean MMD² (true-point bandwidth) on the given task draws.

    Also, per class ``c``, the best on the draws of the *other* classes only
    (:func:`best_on_other_classes`): the tuned plug-in a user who has not seen ``c`` can fit.
    """
    grid = tuple(float(s) for s in cfg["sigma_min_grid"])
    splits = class_splits(y, classes, cfg["n_tune_tasks"], max(ms), seed)
    tables = _plugin_tables(Z, splits, ms, grid, cfg, n_jobs, seed)
    tuning = {str(m): {f"{s:g}": float(np.mean(tables[(m, s)]["true"])) for s in grid} for m in ms}
    best = {m: min(grid, key=lambda s, m=m: tuning[str(m)][f"{s:g}"]) for m in ms}
    per_task = {(m, s): tables[(m, s)]["true"] for m in ms for s in grid}
    task_class = np.array([y[pool[0]] for pool, _ in splits])
    other = best_on_other_classes(per_task, task_class, classes)
    return best, tuning, splits, other


def _lowest_mean(scores: dict[tuple[int, float], np.ndarray], tasks: np.ndarray) -> dict:
    """``{m: sigma_min}`` of lowest mean score over the selected ``tasks`` (a boolean mask;
    ties: the smaller ``sigma_min``)."""
    means: dict[int, dict[float, float]] = {}
    for (m, s), v in scores.items():
        means.setdefault(m, {})[s] = float(np.mean(np.asarray(v)[tasks]))
    return {m: min(sorted(by_s), key=by_s.get) for m, by_s in means.items()}


def best_on_other_classes(
    scores: dict[tuple[int, float], np.ndarray], task_class: np.ndarray, classes: Any
) -> dict[Any, dict[int, float]]:
    """Per class: the ``sigma_min`` of lowest mean score on the tasks of the other classes.

    With a data set's classes as the tasks, tuning on draws of every class (``_tune``'s
    ``best``) has seen the class it is scored on: an oracle. Leaving the class out is what a
    user who is handed a new class can do (the tuned plug-in of issue 32, chosen on the
    training classes).

    Parameters
    ----------
    scores : dict
        ``(m, sigma_min)`` -> per-task scores of shape (n_tasks,) (lower is better).
    task_class : ndarray of shape (n_tasks,)
        The class of every task.
    classes : sequence
        The classes to choose for; each needs tasks of some other class.

    Returns
    -------
    best : dict
        ``class -> {m: sigma_min}`` (ties: the smaller ``sigma_min``).

    Examples
    --------
    >>> s = {(5, 0.1): np.array([1.0, 3.0]), (5, 0.5): np.array([2.0, 2.0])}
    >>> best_on_other_classes(s, np.array([0, 1]), [0, 1])
    {0: {5: 0.5}, 1: {5: 0.1}}
    """
    out: dict[Any, dict[int, float]] = {}
    for c in classes:
        others = task_class != c
        if not others.any():
            raise ValueError(f"class {c!r} has no other class to be tuned on")
        out[c] = _lowest_mean(scores, others)
    return out


def _evaluate(
    Z, splits, ms, best: dict, models: dict, cfg: dict, n_jobs, seed: int, per_task=None
) -> dict:
    """Per m: method (and ``floor``) -> convention (and ``copy``) -> per-task values.

    Every learned model samples with the same noise per ``m`` (paired comparisons). With
    ``per_task`` (one ``{m: sigma_min}`` per task), ``plugin_other`` takes, task by task, the
    plug-in at that task's ``sigma_min`` (the same noise as the other plug-ins)."""
    sigmas = {_SIGMA_MIN, *best.values()}
    sigmas |= {s for per_m in (per_task or ()) for s in per_m.values()}
    plug = _plugin_tables(Z, splits, ms, sorted(sigmas), cfg, n_jobs, seed)
    # the zero-shot plug-in: a bandwidth from each support alone (what a user without
    # training classes could fit instead of the prior), with the same noise
    plug |= _plugin_tables(Z, splits, ms, ("auto",), cfg, n_jobs, seed)
    floor = [scores_both_conventions(Z[pool], Z[ref]) for pool, ref in splits]
    pools = np.stack([Z[pool] for pool, _ in splits])
    out = {}
    for m in ms:
        table = {
            "plugin": plug[(m, _SIGMA_MIN)],
            "plugin_tuned": plug[(m, best[m])],
            "plugin_auto": plug[(m, "auto")],
        }
        if per_task is not None:
            rows = [plug[(m, per_m[m])] for per_m in per_task]
            table["plugin_other"] = {k: np.array([r[k][i] for i, r in enumerate(rows)])
                                     for k in rows[0]}  # fmt: skip
        for name, model in models.items():
            gen = model.sample_batch(
                cfg["n_generated"], pools[:, :m], random_state=derive_seed(seed, 5, m)
            )
            table[name] = _score_all(gen, Z, splits, m)
        table["floor"] = {c: np.array([f[c] for f in floor]) for c in CONVENTIONS}
        out[str(m)] = table
    return out


def _lower_pct(table: dict, challenger: str, baseline: str, conv: str) -> dict:
    """``100 (1 - mean(challenger) / mean(baseline))`` with its bootstrap interval.

    The percent of every bootstrap replicate (the protocol's replicates: the same indices as
    :func:`~skflow_experiments.protocol.compare_to_baseline`), not the inverted interval of
    the ratio, which flips where a replicate's mean MMD² is not positive.
    """
    res = average_lower([(table[baseline][conv], table[challenger][conv])])
    return {"pct": res["pct"], "ci": res["ci"]}


def _compare(tables: list[dict], ms: tuple, pairs: tuple) -> dict:
    """Per m: ``A_vs_B`` (the protocol's comparison of challenger A to baseline B), per task.

    ``tables`` holds one :func:`_evaluate` output per seed (rows of the (seeds, tasks) tables).
    """
    out = {}
    for m in map(str, ms):
        t = {
            k: {c: np.stack([tab[m][k][c] for tab in tables]) for c in v}
            for k, v in tables[0][m].items()
        }
        out[m] = {f"{a}_vs_{b}": compare_to_baseline(t[b], t[a], t["floor"]) for a, b in pairs}
        out[m]["per_task"] = t
    return out


def _summary(comp: dict, ms: tuple, methods: tuple, pairs: tuple) -> dict:
    """Per convention and m: percent lower of every pair, mean MMD²; median copy ratios."""
    out: dict[str, Any] = {"support_sizes": list(ms)}
    for conv in CONVENTIONS:
        out[conv] = {
            f"{a}_vs_{b}": {str(m): _lower_pct(comp[str(m)]["per_task"], a, b, conv) for m in ms}
            for a, b in pairs
        }
        out[conv]["mmd2"] = {
            k: {str(m): float(np.mean(comp[str(m)]["per_task"][k][conv])) for m in ms}
            for k in methods
        }
    out["memorization_ratio_median"] = {
        k: {str(m): float(np.median(comp[str(m)]["per_task"][k]["copy"])) for m in ms}
        for k in methods
    }
    return out


def average_lower(pairs: list[tuple[Any, Any]], confidence: float = 0.95) -> dict[str, Any]:
    """Mean over data sets of the percent by which a challenger's mean MMD² is lower.

    Each data set's percent is ``100 (1 - mean(challenger) / mean(baseline))``; the interval
    is the percentile interval of the average over a bootstrap that resamples every data set's
    tasks on its own (stratified by seed; the data sets are independent).

    Parameters
    ----------
    pairs : list of (baseline, challenger)
        Per data set, per-task MMD² of shape (n_seeds, n_tasks) or (n_tasks,).
    confidence : float, default=0.95

    Returns
    -------
    result : dict
        ``pct`` (the average), ``ci`` and ``per_dataset`` (the percents averaged).

    Examples
    --------
    >>> import numpy as np
    >>> base = np.linspace(1.0, 2.0, 20)
    >>> res = average_lower([(base, 0.8 * base), (base, 0.6 * base)])
    >>> round(res["pct"], 6), [round(v, 6) for v in res["per_dataset"]]
    (30.0, [20.0, 40.0])
    """
    point, reps = [], []
    for k, (base, chal) in enumerate(pairs):
        base, chal = np.atleast_2d(np.asarray(base, float)), np.atleast_2d(np.asarray(chal, float))
        idx = bootstrap_indices(*base.shape, N_BOOT, BOOT_SEED + k)
        rows = np.arange(base.shape[0])[None, :, None]
        mean_b, mean_c = base[rows, idx].mean(axis=(1, 2)), chal[rows, idx].mean(axis=(1, 2))
        point.append(float(100 * (1 - chal.mean() / base.mean())))
        reps.append(100 * (1 - mean_c / mean_b))
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(np.mean(reps, axis=0), [alpha, 1 - alpha])
    return {"pct": float(np.mean(point)), "ci": [float(lo), float(hi)], "per_dataset": point}


def _zero_shot(name: str, cfg: dict, loaders: dict, n_jobs, seed: int) -> dict:
    """Tune the plug-in on independent draws, evaluate every method on one data set
    (``loaders``: ``pretrained`` and ``pretrained_base`` -> ``load(n_features)``)."""
    Z, y, info = load_dataset(name)
    classes = np.unique(y)
    ms, skipped = _usable_sizes(y, classes, cfg["support_sizes"])
    key = list(DATASETS).index(name)
    tuned = _tune(Z, y, classes, ms, cfg, n_jobs, derive_seed(seed, 1, key))
    best, tuning, tune_splits, other = tuned
    splits = class_splits(y, classes, cfg["n_eval_tasks"], max(ms), derive_seed(seed, 2, key))
    priors = {k: load(Z.shape[1]) for k, load in loaders.items()}
    own_class = [other[y[pool[0]]] for pool, _ in splits]  # each task's class's bandwidths
    table = _evaluate(Z, splits, ms, best, priors, cfg, n_jobs, seed, per_task=own_class)
    comparison = _compare([table], ms, PAIRS)
    return {
        "data": info,
        "support_sizes": list(ms),
        "skipped_support_sizes": skipped,
        "tuned_sigma_min": {str(m): s for m, s in best.items()},
        "other_classes_sigma_min": {
            str(c): {str(m): s for m, s in per_m.items()} for c, per_m in other.items()
        },
        "tuning_mmd2": tuning,
        "tuning_pools_shared_with_evaluation": shared_pools(tune_splits, splits),
        "summary": _summary(comparison, ms, METHODS, PAIRS),
        "comparison": comparison,
    }


def _train_arms(Z, y, cfg: dict, load_prior: Callable, seed: int) -> tuple[dict, dict]:
    """Fine-tune the prior and train a model from scratch on (Z, y) with the same budget."""
    budget = {"max_time": cfg["budget_s"], "max_iter": int(cfg["train_max_iter"])}
    fine = load_prior(Z.shape[1])
    before = int(getattr(fine, "n_iter_", 0))
    fine.set_params(
        **nested_learned_params({**cfg["fine_tune"], **budget}), warm_start=True, random_state=seed
    )
    scratch_params = {**cfg["scratch"], "random_state": seed, **budget}
    scratch = LearnedFlowSampler(**learned_params_from_flat(scratch_params))
    models, records = {"fine_tuned": fine, "scratch": scratch}, {}
    for name, model in models.items():
        t0 = time.perf_counter()
        model.fit(Z, y)
        rec = training_record(model, time.perf_counter() - t0, seed)
        new = int(model.n_iter_) - (before if name == "fine_tuned" else 0)
        # a warm start accumulates n_iter_: report this training's iterations only
        rec.update(n_iter=new, reached_max_iter=bool(new == model.max_iter))
        rec["stop"] = "max_iter" if rec["reached_max_iter"] else "max_time or early stopping"
        records[name] = rec
    return models, records


def _finetune_seed(data: dict, cfg: dict, load_prior: Callable, n_jobs, seed: int, bar) -> dict:
    """Train both arms on digits' training classes, evaluate every method on held-out ones."""
    Z, y, train, ms = data["Z"], data["y"], data["train"], data["ms"]
    models, records = _train_arms(Z[train], y[train], cfg, load_prior, seed)
    bar.update(1)
    splits = class_splits(
        y, _FINETUNE["test_classes"], cfg["n_eval_tasks"], max(ms), derive_seed(seed, 3)
    )
    models = {"zero_shot": data["zero_shot"], **models}
    table = _evaluate(Z, splits, ms, data["best"], models, cfg, n_jobs, derive_seed(seed, 7))
    bar.update(1)
    return {"seed": seed, "table": table, "training": records}


def _finetune(cfg: dict, load_prior: Callable, n_jobs, seeds: list, bar) -> dict:
    """The fine-tuning arm over seeds: comparisons with intervals, training records.

    The plug-in is tuned once, on the training classes: it has no seed to vary."""
    Z, y, train, info = _finetune_data()
    ms, skipped = _usable_sizes(y, _FINETUNE["test_classes"], cfg["support_sizes"])
    classes = np.unique(y[train])
    best, tuning, _, _ = _tune(Z, y, classes, ms, cfg, n_jobs, derive_seed(seeds[0], 6))
    data = {"Z": Z, "y": y, "train": train, "ms": ms, "best": best}
    data["zero_shot"] = load_prior(Z.shape[1])
    per_seed = [_finetune_seed(data, cfg, load_prior, n_jobs, s, bar) for s in seeds]
    comparison = _compare([s["table"] for s in per_seed], ms, FT_PAIRS)
    return {
        "data": info,
        "budget_s": cfg["budget_s"],
        "skipped_support_sizes": skipped,
        "tuned_sigma_min": {str(m): s for m, s in best.items()},
        "tuning_mmd2_train_classes": tuning,
        "summary": _summary(comparison, ms, FT_METHODS, FT_PAIRS),
        "comparison": comparison,
        "per_seed": [{k: v for k, v in s.items() if k != "table"} for s in per_seed],
    }


def _averages(datasets: dict, m: str = "10") -> dict:
    """Per convention: the average over data sets of the percent lower at ``m``, with interval."""
    names = [n for n, d in datasets.items() if m in d["comparison"]]
    tables = [datasets[n]["comparison"][m]["per_task"] for n in names]
    out: dict[str, Any] = {"m": int(m), "datasets": names}
    for conv in CONVENTIONS:
        out[conv] = {
            f"pretrained_vs_{b}": average_lower(
                [(t[b][conv], t["pretrained"][conv]) for t in tables]
            )
            for _, b in PAIRS
        }
    return out


def _targets(datasets: dict, averages: dict) -> dict:
    """Issue 26's targets, read from the true-point tables: met or not (intervals)."""
    wins: dict[str, dict[str, bool]] = {
        name: {
            m: d["summary"]["true"]["pretrained_vs_plugin_tuned"][m]["ci"][0] > 0
            for m in ("5", "10")
            if m in d["summary"]["true"]["pretrained_vs_plugin_tuned"]
        }
        for name, d in datasets.items()
    }
    avg = averages["true"]["pretrained_vs_plugin_tuned"]
    # issue 32: not worse (no interval below 0) than the plug-in tuned on the other classes
    # at m = 5, 10, 20, with either bandwidth
    level = {
        name: {
            f"{conv} m = {m}": r["ci"][1] >= 0
            for conv in CONVENTIONS
            for m, r in d["summary"][conv]["pretrained_vs_plugin_other"].items()
            if m in ("5", "10", "20")
        }
        for name, d in datasets.items()
    }
    return {
        "lower_than_tuned_at_5_and_10_everywhere": all(all(w.values()) for w in wins.values()),
        "lower_than_tuned_by_interval": wins,
        "average_m10_at_least_20pct": bool(avg["pct"] >= 20.0),
        "not_worse_than_other_classes_tuned_everywhere": all(
            all(v.values()) for v in level.values()
        ),
        "not_worse_than_other_classes_tuned": level,
    }


def _plot(results: dict, output_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    panels = [(n, d["summary"], METHODS) for n, d in results["datasets"].items()]
    if results.get("finetune"):
        panels.append(("digits fine-tuning", results["finetune"]["summary"], FT_METHODS))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4))
    for ax, (name, summary, methods) in zip(np.atleast_1d(axes), panels, strict=True):
        ms = np.asarray(summary["support_sizes"])
        for k in methods:
            ax.plot(ms, [summary["true"]["mmd2"][k][str(m)] for m in ms], "o-", label=k)
        ax.set(xscale="log", yscale="log", xlabel="support size m", title=name)
        ax.xaxis.set_minor_locator(NullLocator())  # only the support sizes as ticks
        ax.set_xticks(ms, [str(m) for m in ms])
        ax.set_ylabel("mean MMD² (true-point bandwidth)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, output_dir, "pretrained.png")


def _prior_info(cfg: dict, options: dict) -> dict:
    """The prior's and the base prior's names and model cards (None for a caller's own)."""
    cards = LearnedFlowSampler.pretrained_models()
    own = options.get("load_prior") is not None
    out = {"name": "load_prior given to run()", "card": None} if own else None
    out = out or {"name": cfg["prior"], "card": cards.get(cfg["prior"])}
    if options.get("load_base_prior") is not None:
        base = {"name": "load_base_prior given to run()", "card": None}
    elif own:  # a caller's own prior stands in for the base too (see _measure)
        base = {"name": "load_prior given to run() (itself)", "card": None}
    else:
        base = {"name": cfg["base_prior"], "card": cards.get(cfg["base_prior"])}
    return out | {"base": base}


def _headline(datasets: dict, averages: dict, finetune: dict | None) -> dict:
    """The summary the command line prints: per data set, averages, fine-tuning, targets."""
    out: dict[str, Any] = {
        "datasets": {n: d["summary"] for n, d in datasets.items()},
        "average_m10": averages,
        "targets": _targets(datasets, averages),
    }
    if finetune is not None:
        out["finetune"] = finetune["summary"]
    return out


def _pretrained_loader(name: str) -> Callable[[int], LearnedFlowSampler]:
    """``d -> LearnedFlowSampler.from_pretrained(name, n_features=d)`` (a fresh copy per call)."""

    def load(n_features: int) -> LearnedFlowSampler:
        return LearnedFlowSampler.from_pretrained(name, n_features=n_features)

    return load


def _config(preset: str, seeds: int | None, n_tasks: int | None) -> dict[str, Any]:
    """The preset with the command line's overrides, support sizes as ints."""
    cfg = preset_config(PRESETS, preset, seeds=seeds, n_tasks=n_tasks)
    cfg["support_sizes"] = tuple(int(m) for m in cfg["support_sizes"])
    return cfg


def _measure(run: Run) -> tuple[dict, dict, dict | None]:
    """Zero-shot on every data set, then the fine-tuning arm over the seeds (if any)."""
    cfg, load_prior = run.cfg, run.options.get("load_prior")
    loader = load_prior if load_prior is not None else _pretrained_loader(cfg["prior"])
    base = run.options.get("load_base_prior")
    if base is None:  # a caller's own prior stands in for the base too
        base = load_prior if load_prior is not None else _pretrained_loader(cfg["base_prior"])
    loaders = {"pretrained_base": base, "pretrained": loader}
    datasets, finetune = {}, None
    for name in cfg["datasets"]:
        datasets[name] = _zero_shot(name, cfg, loaders, run.n_jobs, run.random_state)
        run.bar.update(1)
    if cfg["finetune"]:
        finetune = _finetune(cfg, loader, run.n_jobs, run.seeds, run.bar)
    return datasets, _averages(datasets), finetune


def _assemble(run: Run, outputs: tuple[dict, dict, dict | None]) -> dict[str, Any]:
    """``results.json``: the prior, the summary, per data set and fine-tuning details."""
    datasets, averages, finetune = outputs
    summary = _headline(datasets, averages, finetune) | {"wall_seconds": round(run.wall, 1)}
    return {
        "experiment": "pretrained",
        "preset": run.preset,
        "seeds": run.seeds,
        "prior": _prior_info(run.cfg, run.options),
        "summary": summary,
        "datasets": datasets,
        "average_m10": averages,
        "finetune": finetune,
        "config": run.cfg,
        "seconds": {"total": round(run.wall, 1)},
        "machine": run.machine(),
    }


def run(preset: str = "quick", *, progress: bool = False, **options: Any) -> dict[str, Any]:
    """Run the zero-shot and fine-tuning benchmark; write ``results.json`` and ``pretrained.png``.

    Parameters
    ----------
    preset : {"tiny", "smoke", "quick", "full"}, default="quick"
        Size of the run (:data:`PRESETS`); ``"smoke"`` and ``"tiny"`` are not results.
    load_prior : callable, optional
        ``load_prior(n_features)`` returns a *new* fitted sampler with ``sample_batch`` (and,
        for the fine-tuning arm, ``set_params`` and ``fit``) for that many features. None:
        ``LearnedFlowSampler.from_pretrained(PRESETS[preset]["prior"], n_features=d)``.
    load_base_prior : callable, optional
        The same for the prior compared with it zero-shot (method ``pretrained_base``).
        None: ``load_prior`` when given (the prior against itself), else the preset's
        ``base_prior`` by name.
    progress : bool, default=False
        Show a progress bar (stderr) over the work, with an ETA.
    **options
        Options of the shared runner (:meth:`~skflow_experiments._experiment.Experiment.run`):
        ``output_dir`` (default ``output/experiments/pretrained``, created: ``results.json`` and the
        figure), ``n_jobs`` (joblib workers for the plug-in evaluations; None runs them in this
        process, and under ``joblib.parallel_config(backend="dask")`` on a Dask cluster),
        ``random_state`` (the first seed; the seeds are ``random_state, random_state + 1, ...``),
        ``seeds`` and ``n_tasks`` (overrides of the preset's ``n_seeds`` and ``n_eval_tasks``).
        ``random_state`` seeds the task draws; the fine-tuning seeds follow it.

    Returns
    -------
    results : dict
        ``datasets`` (per data set: ``summary`` with how much lower the pretrained MMD² is than
        each plug-in, with 95 % intervals, per convention and ``m``, mean MMD² and median
        memorisation ratios of every method; ``comparison`` with the per-task values;
        ``tuned_sigma_min``; ``skipped_support_sizes``), ``average_m10``, ``finetune`` (or
        None), ``prior``, ``summary``, ``config``, ``seconds``, ``machine``; also written to
        ``output_dir/results.json``.

    Examples
    --------
    >>> from skflow_experiments import pretrained
    >>> pretrained.PRESETS["quick"]["budget_s"]
    120.0
    >>> res = pretrained.run("quick", output_dir="out/pretrained")  # doctest: +SKIP
    """
    return SPEC.run(preset, progress=progress, **options)


_LABELS = {
    "plugin": "plug-in",
    "plugin_tuned": "tuned plug-in",
    "plugin_other": "plug-in tuned on the other classes",
    "plugin_auto": "auto plug-in",
    "pretrained": "pretrained",
    "pretrained_base": "base prior",
    "zero_shot": "zero-shot",
    "fine_tuned": "fine-tuned",
    "scratch": "scratch",
}


def _table(res: dict, conv: str, methods: tuple, pairs: tuple) -> str:
    """m | mean MMD² per method, floor | percent lower per pair [CI] | median copy ratios.

    With no ``methods``: the pairs only; with no ``pairs``: the means and ratios only."""
    s, copy = res["summary"][conv], res["summary"]["memorization_ratio_median"]
    head = ["m", *(f"MMD² {_LABELS[k]}" for k in methods)]
    head += ["noise floor mean (q95)"] if methods else []
    head += [f"{_LABELS[a]} lower than {_LABELS[b]} [95 % CI]" for a, b in pairs]
    head += ["memorisation ratio " + " / ".join(_LABELS[k] for k in methods)] if methods else []
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in map(str, res["summary"]["support_sizes"]):
        floor = next(v for k, v in res["comparison"][m].items() if k != "per_task")
        fl = floor[conv]["noise_floor"]
        cells = [m, *(f"{s['mmd2'][k][m]:.3g}" for k in methods)]
        cells += [f"{fl['mean']:.3g} ({fl['q95']:.3g})"] if methods else []
        cells += [ci_pct(s[f"{a}_vs_{b}"][m]) for a, b in pairs]
        cells += [" / ".join(f"{copy[k][m]:.2f}" for k in methods)] if methods else []
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _verdict(r: dict) -> str:
    if r["ci"][0] > 0:
        return "wins"
    return "loses" if r["ci"][1] < 0 else "level"


def _loss_table(results: dict, conv: str, baseline: str = "plugin_tuned") -> str:
    """Data set x m: the pretrained prior against a plug-in (win, level, loss)."""
    ms = results["config"]["support_sizes"]
    rows = [
        "| data set | " + " | ".join(f"m = {m}" for m in ms) + " |",
        "|---|" + "---|" * len(ms),
    ]
    for name, d in results["datasets"].items():
        cmp = d["summary"][conv][f"pretrained_vs_{baseline}"]
        cells = [
            f"{ci_pct(cmp[str(m)])} {_verdict(cmp[str(m)])}" if str(m) in cmp else "skipped"
            for m in ms
        ]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _losses(results: dict, conv: str) -> str:
    """One sentence: where the prior's MMD² is higher than a baseline's (interval below 0)."""
    found = []
    for name, d in results["datasets"].items():
        for a, b in PAIRS:  # the prior against each plug-in and the base prior
            for m, r in d["summary"][conv][f"{a}_vs_{b}"].items():
                if _verdict(r) == "loses":
                    found.append(f"{name} m = {m} vs {_LABELS[b]} ({ci_pct(r)})")
    return "Losses (interval entirely below 0): " + ("; ".join(found) or "none") + "."


def _zero_shot_docs(results: dict) -> list[str]:
    """Per data set: description, tuned sigma_min, skipped sizes and both tables."""
    parts = []
    for name, res in results["datasets"].items():
        info = res["data"]
        pca = info["pca_explained_variance_ratio"]
        parts += [
            "",
            f"**{name}** ({info['dataset']}, {info['n_features_raw']} -> {info['n_features']} "
            f"features{'' if pca is None else f', PCA keeps {100 * pca:.1f} % of the variance'}"
            f"; class sizes {info['class_sizes']}). Tuned sigma_min per m: "
            f"{res['tuned_sigma_min']}; tuned on the other classes, per class and m: "
            f"{res['other_classes_sigma_min']}; support pools shared by tuning and evaluation "
            f"draws: {res['tuning_pools_shared_with_evaluation']}. Skipped support sizes: "
            f"{res['skipped_support_sizes'] or 'none'}.",
        ]
        for conv, label in (("true", "reference (true) rows"), ("pooled", "pooled rows")):
            parts += [
                "",
                f"MMD², median heuristic from the {label}:",
                "",
                _table(res, conv, METHODS, PAIRS),
            ]
    return parts


def _summary_docs(results: dict) -> list[str]:
    """Averages at m = 10, the issue's targets and the per-data-set win/loss tables."""
    avg, parts = results["average_m10"], []
    for conv in CONVENTIONS:
        a = avg[conv]
        parts.append(
            f"Average over {avg['datasets']} at m = {avg['m']} ({conv} bandwidth): pretrained "
            f"lower than the plug-in by {ci_pct(a['pretrained_vs_plugin'])}, than the tuned "
            f"plug-in by {ci_pct(a['pretrained_vs_plugin_tuned'])}, than the automatic-bandwidth "
            f"plug-in by {ci_pct(a['pretrained_vs_plugin_auto'])}, than the base prior by "
            f"{ci_pct(a['pretrained_vs_pretrained_base'])}."
        )
    t = results["summary"]["targets"]
    parts += [
        "",
        "Targets of the prior (true-point bandwidth): lower than the tuned plug-in at m = 5 and "
        f"10 on every data set (interval above 0): {t['lower_than_tuned_at_5_and_10_everywhere']}"
        f"; average at m = 10 at least 20 % lower: {t['average_m10_at_least_20pct']}.",
        "",
        "Target of the prior against the tuned plug-in (both bandwidths): not worse than the "
        "plug-in tuned on the other classes at m = 5, 10, 20 on every data set (no interval "
        f"below 0): {t['not_worse_than_other_classes_tuned_everywhere']}.",
    ]
    for conv in ("true", "pooled"):
        parts += [
            "",
            f"Where the prior wins or loses against the tuned plug-in ({conv} bandwidth; percent "
            "lower [95 % CI]; wins / loses: interval above / below 0):",
            "",
            _loss_table(results, conv),
            "",
            _losses(results, conv),
        ]
    for conv in ("true", "pooled"):
        parts += [
            "",
            "Where the prior wins or loses against the plug-in tuned on the other classes "
            f"({conv} bandwidth):",
            "",
            _loss_table(results, conv, "plugin_other"),
        ]
    return parts


def _finetune_docs(results: dict) -> list[str]:
    """The fine-tuning arm: data, training records, tuned sigma_min and both tables."""
    ft = results["finetune"]
    if ft is None:
        return []
    info, runs = ft["data"], ft["per_seed"]
    parts = [
        "",
        f"**Fine-tuning** on {info['dataset']} (train classes {info['train_classes']}, "
        f"held-out classes {info['test_classes']}, PCA keeps "
        f"{100 * info['pca_explained_variance_ratio']:.1f} % of the training classes' "
        f"variance). Budget per training: {ft['budget_s']} s wall clock, max_iter "
        f"{results['config']['train_max_iter']}, other parameters set on the prior: "
        f"{results['config']['fine_tune'] or 'none'}.",
    ]
    for arm in ("fine_tuned", "scratch"):
        recs = [r["training"][arm] for r in runs]
        parts.append(f"{_LABELS[arm]}: {training_budget(recs, ft['budget_s'])}")
    parts.append(f"Tuned sigma_min (on the training classes) per m: {ft['tuned_sigma_min']}.")
    for conv, label in (("true", "reference (true) rows"), ("pooled", "pooled rows")):
        parts += ["", f"MMD², median heuristic from the {label}:", ""]
        parts += [_table(ft, conv, FT_METHODS, ()), "", _table(ft, conv, (), FT_PAIRS)]
    return parts


def _card_fields(prior: dict) -> dict:
    """The scalar fields of a prior's card (name, weights file and hash, size)."""
    return {k: v for k, v in (prior["card"] or {}).items() if isinstance(v, str | int | float)}


def docs_section(results: dict, command: str) -> str:
    """The Markdown of this benchmark's section of ``docs/results.md``.

    Parameters
    ----------
    results : dict
        The output of :func:`run`.
    command : str
        The exact command line that produced ``results``.

    Returns
    -------
    text : str
    """
    cfg, prior = results["config"], results["prior"]
    card, base = _card_fields(prior), prior.get("base", {"name": None, "card": None})
    parts = [f"Command (from the repository root): `{command}`", ""]
    if cfg.get("label"):
        parts += [f"**{cfg['label']}.**", ""]
    parts += [
        f"Preset `{results['preset']}`: prior `{prior['name']}` (card: {card or 'none'}), "
        f"base prior `{base['name']}` (card: {_card_fields(base) or 'none'}), "
        f"{cfg['n_eval_tasks']} evaluation tasks and {cfg['n_tune_tasks']} independent tuning "
        f"tasks per data set, {cfg['n_generated']} generated points per task, fine-tuning seeds "
        f"{results['seeds']}. Wall time {results['seconds']['total']:.0f} s.",
        "",
        machine_line(results["machine"]["start"], results["machine"]["end"]),
        "",
        "Intervals: 95 % bootstrap over tasks (stratified by seed). The tuned plug-in's "
        "sigma_min is chosen on independent task draws of the same classes: an oracle "
        "favourable to the plug-in. The plug-in tuned on the other classes chooses, for each "
        "class, the sigma_min of lowest mean MMD² on the tuning draws of the data set's other "
        "classes: what a user handed a new class can fit (the tuned plug-in a user could fit). "
        'The auto plug-in is `NWFlowSampler(sigma_min="auto")`: '
        "each support's bandwidth from that support alone, the zero-shot generator a user "
        "without training classes could fit instead of the prior. The base prior is the prior "
        "compared with it (the same recipe without the support size as an input). "
        "Memorisation ratio: median "
        "over tasks of "
        "`memorization_ratio(generated, support, reference)` (near 1: new points; near 0: "
        "copies of the support). Noise floor: the support pool against the reference.",
        "",
        *_summary_docs(results),
        *_zero_shot_docs(results),
        *_finetune_docs(results),
    ]
    return "\n".join(parts)


def _cli_rows(s: dict) -> list[tuple[str, str]]:
    """The headline numbers the command line prints after a run: ``(quantity, value)`` rows."""
    rows = []
    for name, d in s["datasets"].items():
        for m in ("5", "10"):
            if m in d["true"]["pretrained_vs_plugin_tuned"]:
                value = ci_pct(d["true"]["pretrained_vs_plugin_tuned"][m])
                rows.append((f"{name}, m = {m}: pretrained MMD² below tuned plug-in", value))
            if m in d["pooled"]["pretrained_vs_plugin_other"]:
                value = ci_pct(d["pooled"]["pretrained_vs_plugin_other"][m])
                label = f"{name}, m = {m}: pretrained MMD² below the other-class plug-in (pooled)"
                rows.append((label, value))
    avg = s["average_m10"]["true"]["pretrained_vs_plugin_tuned"]
    rows.append(("average over data sets, m = 10: below tuned plug-in", ci_pct(avg)))
    for key in ("fine_tuned_vs_zero_shot", "fine_tuned_vs_scratch"):
        if "finetune" in s and "10" in s["finetune"]["true"][key]:
            value = ci_pct(s["finetune"]["true"][key]["10"])
            label = key.replace("_vs_", " below ").replace("_", "-")
            rows.append((f"digits, m = 10: {label}", value))
    return rows


#: The experiment as a specification: presets, work, results, figure, docs, headline rows.
SPEC = Experiment(
    name="pretrained",
    presets=PRESETS,
    measure=_measure,
    assemble=_assemble,
    configure=_config,
    units=lambda cfg, seeds: len(cfg["datasets"]) + (2 * len(seeds) if cfg["finetune"] else 0),
    desc="pretrained",
    figure=lambda results, outputs, folder: _plot(results, folder),
    docs=docs_section,
    headline=_cli_rows,
    options=("load_prior", "load_base_prior"),
)


def write_docs(results: dict, command: str, path: str | Path | None = None) -> Path:
    """Write :func:`docs_section` between the ``pretrained`` markers of the results page.

    Parameters
    ----------
    results : dict
        The output of :func:`run` (not a smoke run).
    command : str
        The exact command line that produced ``results``.
    path : str or Path, optional
        The page (default: ``docs/results.md``).

    Returns
    -------
    path : Path
    """
    return SPEC.write_docs(results, command, path)
