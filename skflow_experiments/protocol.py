"""The protocol of every learned-vs-plug-in number: tasks x seeds, paired, with intervals.

A headline "the learned sampler is k times better than the plug-in" is only as good as its
spread over evaluation tasks and training seeds, and it means little if the learned model's
MMD² is at the estimator's noise floor. This module fixes one protocol for all experiments:

* every comparison is measured on ``n_seeds`` training seeds x ``n_tasks`` held-out tasks; per
  task both samplers see the same support and are scored against the same true points;
* each per-task MMD² is computed under both median-heuristic conventions
  (:data:`CONVENTIONS`): ``"pooled"`` (bandwidth from the generated and the true points,
  ``mmd2(gen, true)``) and ``"true"`` (from the true points only,
  ``mmd2(gen, true, reference=true)``);
* the **noise floor** of a task is the MMD² between two independent samples of its true
  distribution of the same sizes (``mmd2(true_b, true)``, same convention): what a perfect
  sampler scores. The unbiased estimator is 0 on average there, so the floor is reported as
  the mean and the 95th percentile of those per-task values;
* the ratio of means ``mean(MMD²_a) / mean(MMD²_b)`` and the difference of means
  ``mean(MMD²_a - MMD²_b)`` get 95 % percentile intervals from a bootstrap over tasks,
  stratified by seed (every replicate redraws, within each seed, as many tasks as it has,
  with replacement), with a fixed RNG, so the interval is part of the reproducible output.
  Seeds are not resampled (three are too few): the per-seed numbers are reported beside the
  pooled ones so the spread over seeds is visible.

Examples
--------
>>> import numpy as np
>>> from skflow_experiments.protocol import paired_comparison
>>> a = np.full((3, 100), 0.010) + np.linspace(0, 1e-3, 100)  # plug-in, (seeds, tasks)
>>> b = a / 10                                                   # learned: 10x lower
>>> res = paired_comparison(a, b, n_boot=200)
>>> round(res["ratio"], 6), res["ratio_ci"][0] <= 10.0 <= res["ratio_ci"][1]
(10.0, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from skflow.metrics import mmd2

__all__ = [
    "CONVENTIONS",
    "bootstrap_indices",
    "claims",
    "compare_to_baseline",
    "markdown_table",
    "noise_floor",
    "paired_comparison",
    "per_task_scores",
    "preset_config",
    "scores_both_conventions",
    "training_budget",
    "training_record",
]

#: Median-heuristic conventions: bandwidth from generated + true points, or true points only.
CONVENTIONS = ("pooled", "true")
#: Bootstrap replicates of :func:`paired_comparison` unless told otherwise.
N_BOOT = 2000
#: Seed of the bootstrap RNG (fixed: the interval is part of the reproducible output).
BOOT_SEED = 12345


def scores_both_conventions(generated: Any, true: Any) -> dict[str, float]:
    """Unbiased MMD² of ``generated`` vs ``true`` under both median conventions.

    Parameters
    ----------
    generated : array-like of shape (n, d)
        Points of a sampler.
    true : array-like of shape (r, d)
        True points of the same task.

    Returns
    -------
    scores : dict
        ``{"pooled": mmd2(generated, true), "true": mmd2(generated, true, reference=true)}``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> s = scores_both_conventions(rng.normal(size=(50, 2)), rng.normal(size=(50, 2)))
    >>> sorted(s)
    ['pooled', 'true']
    """
    return {
        "pooled": float(mmd2(generated, true)),
        "true": float(mmd2(generated, true, reference=true)),
    }


def per_task_scores(generated: Any, truths: Any) -> dict[str, np.ndarray]:
    """Per-task MMD² under both conventions: convention -> array of shape (n_tasks,).

    Parameters
    ----------
    generated, truths : sequences of arrays of shape (n, d) and (r, d)
        Generated and true points of each task, in the same order.

    Returns
    -------
    scores : dict
        ``{"pooled": (n_tasks,), "true": (n_tasks,)}`` of :func:`scores_both_conventions`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> g, q = rng.normal(size=(3, 40, 2)), rng.normal(size=(3, 40, 2))
    >>> per_task_scores(g, q)["true"].shape
    (3,)
    """
    rows = [scores_both_conventions(g, q) for g, q in zip(generated, truths, strict=True)]
    return {c: np.array([r[c] for r in rows]) for c in CONVENTIONS}


def preset_config(
    presets: dict[str, dict], preset: str, *, seeds: int | None = None, n_tasks: int | None = None
) -> dict[str, Any]:
    """A copy of ``presets[preset]`` with the command line's seed and task counts, checked.

    Parameters
    ----------
    presets : dict
        An experiment's ``PRESETS``; each has ``n_seeds`` and ``n_eval_tasks``.
    preset : str
        Its name.
    seeds, n_tasks : int, optional
        Overrides of ``n_seeds`` and ``n_eval_tasks``.

    Returns
    -------
    cfg : dict

    Raises
    ------
    ValueError
        For an unknown preset, fewer than 1 seed or fewer than 2 tasks.

    Examples
    --------
    >>> preset_config({"quick": {"n_seeds": 3, "n_eval_tasks": 100}}, "quick", seeds=1)
    {'n_seeds': 1, 'n_eval_tasks': 100}
    """
    if preset not in presets:
        raise ValueError(f"unknown preset {preset!r}; expected one of {sorted(presets)}.")
    cfg = dict(presets[preset])
    if seeds is not None:
        cfg["n_seeds"] = int(seeds)
    if n_tasks is not None:
        cfg["n_eval_tasks"] = int(n_tasks)
    if cfg["n_seeds"] < 1 or cfg["n_eval_tasks"] < 2:
        raise ValueError(
            f"need at least 1 seed and 2 tasks, got {cfg['n_seeds']} and {cfg['n_eval_tasks']}."
        )
    return cfg


def training_record(model: Any, seconds: float, seed: int) -> dict[str, Any]:
    """What the docs say of one training: iterations, seconds, reproducibility, final loss.

    Parameters
    ----------
    model : LearnedFlowSampler
        A fitted model (``n_iter_``, ``max_iter``, ``loss_curve_``).
    seconds : float
        Its training wall time.
    seed : int
        The experiment seed it belongs to.

    Returns
    -------
    record : dict
        ``seed``, ``n_iter``, ``max_iter``, ``reached_max_iter`` (reproducible bit for bit),
        ``train_seconds`` and ``final_loss`` (mean of the last fifth of the loss curve, at
        most 100 iterations).
    """
    tail = max(1, min(100, len(model.loss_curve_) // 5))
    return {
        "seed": seed,
        "n_iter": int(model.n_iter_),
        "max_iter": int(model.max_iter),
        "reached_max_iter": bool(model.n_iter_ == model.max_iter),
        "train_seconds": round(seconds, 1),
        "final_loss": float(np.mean(model.loss_curve_[-tail:])),
    }


def bootstrap_indices(
    n_seeds: int, n_tasks: int, n_boot: int, random_state: int = BOOT_SEED
) -> np.ndarray:
    """Task indices of a bootstrap stratified by seed.

    Parameters
    ----------
    n_seeds, n_tasks : int
        Shape of the per-task table (seeds x tasks).
    n_boot : int
        Number of replicates.
    random_state : int, default=BOOT_SEED
        Seed of the NumPy generator.

    Returns
    -------
    idx : ndarray of shape (n_boot, n_seeds, n_tasks)
        ``idx[b, s]`` are ``n_tasks`` task indices of seed ``s`` drawn with replacement.

    Examples
    --------
    >>> bootstrap_indices(3, 5, 4).shape
    (4, 3, 5)
    """
    rng = np.random.default_rng(random_state)
    return rng.integers(0, n_tasks, size=(n_boot, n_seeds, n_tasks))


def _as_table(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError(
            f"{name} must have shape (n_seeds, n_tasks) with at least 2 tasks, got {arr.shape}."
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinity.")
    return arr


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den``, +inf where the denominator is not positive (MMD² can be <= 0)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, num / safe, np.inf)


def _interval(replicates: np.ndarray, confidence: float) -> list[float]:
    """Percentile interval; ``inverted_cdf`` never interpolates between +inf and a number."""
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(replicates, [alpha, 1.0 - alpha], method="inverted_cdf")
    return [float(lo), float(hi)]


def _contains(ci: list[float], value: float | None) -> bool | None:
    return None if value is None else bool(ci[0] <= value <= ci[1])


def _one_table(
    a: np.ndarray, b: np.ndarray, idx: np.ndarray, confidence: float, paper: float | None
) -> dict[str, Any]:
    """Means, ratio, difference and their bootstrap intervals for one (seeds, tasks) table."""
    rows = np.arange(a.shape[0])[None, :, None]
    boot_a = a[rows, idx].mean(axis=(1, 2))
    boot_b = b[rows, idx].mean(axis=(1, 2))
    diff_ci = _interval(boot_a - boot_b, confidence)
    ratio_ci = _interval(_ratio(boot_a, boot_b), confidence)
    return {
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "ratio": float(_ratio(a.mean(), b.mean())),
        "ratio_ci": ratio_ci,
        "difference": float((a - b).mean()),
        "difference_ci": diff_ci,
        "b_lower_fraction": float(np.mean(b < a)),
        "difference_ci_contains_zero": _contains(diff_ci, 0.0),
        "ratio_ci_contains_paper": _contains(ratio_ci, paper),
    }


def paired_comparison(
    a: Any,
    b: Any,
    *,
    paper_ratio: float | None = None,
    confidence: float = 0.95,
    n_boot: int = N_BOOT,
    random_state: int = BOOT_SEED,
) -> dict[str, Any]:
    """Compare per-task scores ``a`` (baseline) and ``b`` (challenger), paired over tasks.

    Parameters
    ----------
    a, b : array-like of shape (n_seeds, n_tasks) or (n_tasks,)
        Per-task MMD² of the two samplers (lower is better); ``a[s, j]`` and ``b[s, j]`` are
        scored on the same task and true points.
    paper_ratio : float, optional
        The paper's value of ``mean(a) / mean(b)``; the result says whether the interval
        contains it.
    confidence : float, default=0.95
        Level of the percentile intervals.
    n_boot : int, default=N_BOOT
        Bootstrap replicates (stratified by seed).
    random_state : int, default=BOOT_SEED
        Seed of the bootstrap.

    Returns
    -------
    result : dict
        Pooled over seeds: ``mean_a``, ``mean_b``, ``ratio`` (``mean_a / mean_b``; +inf when
        ``mean_b <= 0``) with ``ratio_ci``, ``difference`` (``mean(a - b)``) with
        ``difference_ci``, ``b_lower_fraction`` (tasks where ``b < a``),
        ``difference_ci_contains_zero`` and ``ratio_ci_contains_paper``; ``per_seed``: the
        same per seed (its own bootstrap over that seed's tasks); ``n_seeds``, ``n_tasks``,
        ``n_boot``, ``confidence``.

    Raises
    ------
    ValueError
        If the shapes differ, fewer than 2 tasks are given, or a value is not finite.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[1.0, 2.0, 3.0, 4.0]])
    >>> res = paired_comparison(a, a - 0.5, n_boot=100)
    >>> res["difference"], res["difference_ci"]
    (0.5, [0.5, 0.5])
    """
    a, b = _as_table(a, "a"), _as_table(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}.")
    n_seeds, n_tasks = a.shape
    idx = bootstrap_indices(n_seeds, n_tasks, n_boot, random_state)
    out = _one_table(a, b, idx, confidence, paper_ratio)
    out["per_seed"] = [
        _one_table(a[s : s + 1], b[s : s + 1], idx[:, s : s + 1], confidence, paper_ratio)
        for s in range(n_seeds)
    ]
    out.update(n_seeds=n_seeds, n_tasks=n_tasks, n_boot=n_boot, confidence=confidence)
    return out


def noise_floor(floor: Any, *, confidence: float = 0.95) -> dict[str, float]:
    """Summary of per-task noise-floor values (MMD² of two independent true samples).

    Parameters
    ----------
    floor : array-like of shape (n_seeds, n_tasks) or (n_tasks,)
        Per-task MMD² between two independent samples of the task's true distribution, of
        the sizes the samplers are scored with.
    confidence : float, default=0.95
        Upper quantile reported (``q95`` for the default).

    Returns
    -------
    summary : dict
        ``mean`` (near 0 for the unbiased estimator), ``sd`` (the per-task spread, the
        estimator's noise) and ``q95`` (the level below which a perfect sampler's per-task
        MMD² falls on 95 % of tasks).

    Examples
    --------
    >>> import numpy as np
    >>> noise_floor(np.arange(101.0))["q95"]
    95.0
    """
    values = np.asarray(floor, dtype=float).ravel()
    if values.size < 2 or not np.all(np.isfinite(values)):
        raise ValueError(
            f"floor must hold at least 2 finite values, got {values.size} "
            f"({int(np.sum(~np.isfinite(values)))} not finite)."
        )
    return {
        "mean": float(values.mean()),
        "sd": float(values.std(ddof=1)),
        "q95": float(np.quantile(values, confidence)),
    }


def compare_to_baseline(
    baseline: dict[str, Any],
    challenger: dict[str, Any],
    floor: dict[str, Any],
    *,
    paper_ratio: float | None = None,
    n_boot: int = N_BOOT,
    random_state: int = BOOT_SEED,
) -> dict[str, dict[str, Any]]:
    """The protocol's summary of one challenger vs one baseline, per median convention.

    Parameters
    ----------
    baseline, challenger, floor : dict
        Convention (``"pooled"``, ``"true"``) -> per-task MMD² of shape (n_seeds, n_tasks):
        the baseline sampler (e.g. the isotropic plug-in), the challenger (e.g. the learned
        model) and the noise floor, all on the same tasks.
    paper_ratio : float, optional
        The paper's ``baseline / challenger`` ratio.
    n_boot, random_state : int
        Bootstrap replicates and seed (the same draws for every convention).

    Returns
    -------
    summary : dict
        Per convention: the :func:`paired_comparison` of ``baseline`` vs ``challenger``, plus
        ``noise_floor`` (:func:`noise_floor`) and ``challenger_minus_floor`` (the paired
        difference ``challenger - floor`` with ``ci`` and ``ci_contains_zero``: whether the
        challenger is distinguishable from a perfect sampler).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> floor = {c: rng.normal(0, 1e-4, (3, 50)) for c in CONVENTIONS}
    >>> base = {c: 1e-2 + floor[c] for c in CONVENTIONS}
    >>> res = compare_to_baseline(base, floor, floor, n_boot=200)
    >>> res["true"]["challenger_minus_floor"]["ci"]
    [0.0, 0.0]
    """
    out = {}
    for conv in CONVENTIONS:
        res = paired_comparison(
            baseline[conv],
            challenger[conv],
            paper_ratio=paper_ratio,
            n_boot=n_boot,
            random_state=random_state,
        )
        res["noise_floor"] = noise_floor(floor[conv])
        vs_floor = paired_comparison(
            challenger[conv], floor[conv], n_boot=n_boot, random_state=random_state
        )
        res["challenger_minus_floor"] = {
            "difference": vs_floor["difference"],
            "ci": vs_floor["difference_ci"],
            "ci_contains_zero": vs_floor["difference_ci_contains_zero"],
        }
        out[conv] = res
    return out


def _fmt(x: float) -> str:
    return "inf" if x == np.inf else f"{x:.3g}"


def _ci(ci: list[float]) -> str:
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


def markdown_table(
    summary: dict[str, dict[str, Any]],
    *,
    baseline: str = "plug-in",
    challenger: str = "learned",
    paper_ratio: float | None = None,
) -> str:
    """A Markdown table of :func:`compare_to_baseline`'s summary, one row per convention.

    Parameters
    ----------
    summary : dict
        The output of :func:`compare_to_baseline`.
    baseline, challenger : str
        Column labels of the two samplers.
    paper_ratio : float, optional
        The paper's ratio, written next to ours.

    Returns
    -------
    table : str
        Markdown; intervals are 95 % bootstrap intervals over tasks, stratified by seed.

    Examples
    --------
    >>> import numpy as np
    >>> floor = {c: np.zeros((1, 4)) for c in CONVENTIONS}
    >>> base = {c: np.ones((1, 4)) for c in CONVENTIONS}
    >>> print(markdown_table(compare_to_baseline(base, base, floor, n_boot=10)).splitlines()[2])
    | pooled | 1 | 1 | 0 (0) | 1 [1, 1] | – | 0 [0, 0] | 1 [1, 1] | 1 | 0/4 |
    """
    paper = "–" if paper_ratio is None else f"{paper_ratio:g}"
    head = (
        f"| median heuristic from | MMD² {baseline} | MMD² {challenger} "
        "| noise floor: mean (95th percentile) "
        f"| ratio {baseline}/{challenger} [95 % CI] | paper | difference [95 % CI] "
        f"| {challenger} − floor [95 % CI] | ratio per seed | tasks {challenger} lower |"
    )
    rows = [head, "|" + "---|" * 10]
    label = {"pooled": "pooled", "true": "true points"}
    for conv in CONVENTIONS:
        r = summary[conv]
        fl, vf = r["noise_floor"], r["challenger_minus_floor"]
        per_seed = ", ".join(_fmt(s["ratio"]) for s in r["per_seed"])
        lower = round(r["b_lower_fraction"] * r["n_seeds"] * r["n_tasks"])
        rows.append(
            f"| {label[conv]} | {_fmt(r['mean_a'])} | {_fmt(r['mean_b'])} | "
            f"{_fmt(fl['mean'])} ({_fmt(fl['q95'])}) | {_fmt(r['ratio'])} {_ci(r['ratio_ci'])} | "
            f"{paper} | {_fmt(r['difference'])} {_ci(r['difference_ci'])} | "
            f"{_fmt(vf['difference'])} {_ci(vf['ci'])} | {per_seed} | "
            f"{lower}/{r['n_seeds'] * r['n_tasks']} |"
        )
    return "\n".join(rows)


def claims(
    summary: dict[str, dict[str, Any]],
    *,
    baseline: str = "plug-in",
    challenger: str = "learned",
    paper_ratio: float | None = None,
) -> list[str]:
    """One sentence per convention on what the intervals of the summary support.

    It says whether the ratio's interval contains the paper's number, whether the
    difference's interval contains zero (no resolved difference), and whether the
    challenger is distinguishable from the noise floor.

    Parameters
    ----------
    summary : dict
        The output of :func:`compare_to_baseline`.
    baseline, challenger : str
        Names of the two samplers in the sentences.
    paper_ratio : float, optional
        The paper's ratio.

    Returns
    -------
    sentences : list of str

    Examples
    --------
    >>> import numpy as np
    >>> floor = {c: np.zeros((1, 4)) for c in CONVENTIONS}
    >>> base = {c: np.ones((1, 4)) for c in CONVENTIONS}
    >>> claims(compare_to_baseline(base, base, floor, n_boot=10))[0][:60]
    'pooled: the difference plug-in − learned is not resolved (it'
    """
    out = []
    for conv in CONVENTIONS:
        r = summary[conv]
        parts = []
        if r["difference_ci_contains_zero"]:
            parts.append(
                f"the difference {baseline} − {challenger} is not resolved (its 95 % interval "
                "contains 0)"
            )
        else:
            sign = "lower" if r["difference"] > 0 else "higher"
            parts.append(f"{challenger} is {sign} than {baseline} (difference interval excludes 0)")
        if paper_ratio is not None:
            word = "contains" if r["ratio_ci_contains_paper"] else "excludes"
            parts.append(f"the ratio's interval {word} the paper's {paper_ratio:g}")
        if r["challenger_minus_floor"]["ci_contains_zero"]:
            parts.append(f"{challenger} is not distinguishable from the noise floor")
        else:
            parts.append(f"{challenger} is above the noise floor (interval excludes 0)")
        label = "pooled" if conv == "pooled" else "true points"
        out.append(f"{label}: " + "; ".join(parts) + ".")
    return out


def training_budget(runs: list[dict], max_time: float | None) -> str:
    """One sentence on the trainings of a run: models, iterations, seconds, reproducibility.

    Parameters
    ----------
    runs : list of dict
        One per training, with ``n_iter``, ``train_seconds`` and ``reached_max_iter``.
    max_time : float or None
        The wall-clock guard of each training (seconds).

    Returns
    -------
    sentence : str

    Examples
    --------
    >>> training_budget([{"n_iter": 10, "train_seconds": 2.0, "reached_max_iter": True}], 60)
    'Training: 1 models, 10 iterations, 2–2 s each (wall-clock guard 60 s); every training reached `max_iter` first: reproducible bit for bit.'
    """  # noqa: E501
    its = sorted({t["n_iter"] for t in runs})
    secs = [t["train_seconds"] for t in runs]
    guard = "no wall-clock guard" if max_time is None else f"wall-clock guard {max_time:g} s"
    reached = all(t["reached_max_iter"] for t in runs)
    tail = (
        "every training reached `max_iter` first: reproducible bit for bit."
        if reached
        else "**a training stopped at the guard: not reproducible bit for bit.**"
    )
    return (
        f"Training: {len(runs)} models, {', '.join(map(str, its))} iterations, "
        f"{min(secs):.0f}–{max(secs):.0f} s each ({guard}); " + tail
    )
