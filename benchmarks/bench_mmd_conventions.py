"""How the two MMD² bandwidth conventions score a sampler that is too narrow or too wide.

On the hierarchical Gaussian family (:class:`skflow.tasks.HierarchicalTasks`) the exact
Bayes predictive of every support is known and samplable. It is the generator of lowest
expected MMD² for any kernel fixed before the generated points are seen, so every departure
from it should score worse. The script draws tasks, samples the exact predictive and dilates
the samples about the predictive mean by a factor ``c`` (``c < 1``: too narrow, the direction
of a sampler that copies its support; ``c > 1``: too wide), then scores every version against
the task's true points under the two conventions of :mod:`skflow_experiments.protocol`:

* ``true``: the median-heuristic bandwidth of the true points (the estimators' ``score``);
  the kernel does not depend on the generated points;
* ``pooled``: the median heuristic of the generated and true points pooled; a wider sampler
  widens its own kernel.

For each convention, support size and dimension the table gives the percent change of mean
MMD² against ``c = 1`` (negative: worse than the exact predictive), with a 95 % bootstrap
interval over tasks (paired: every version is the same draws, dilated). Whether a convention
scores a too-wide sampler better than the exact predictive, and how much harder it punishes
a too-narrow one than a too-wide one, is what a comparison between samplers of different
spread (a plug-in with a wide bandwidth against a learned sampler that copies part of its
support) inherits.

Usage::

    python benchmarks/bench_mmd_conventions.py                # print the table
    python benchmarks/bench_mmd_conventions.py --write-docs   # docs/results.md

``--write-docs`` rewrites the block between ``<!-- mmd-conventions:begin -->`` and
``<!-- mmd-conventions:end -->`` of ``docs/results.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from skflow.tasks import HierarchicalTasks
from skflow_experiments.protocol import CONVENTIONS, bootstrap_indices, scores_both_conventions

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- mmd-conventions:begin -->", "<!-- mmd-conventions:end -->"
DILATIONS = (0.7, 0.85, 1.0, 1.15, 1.3, 1.5)
SIZES = (5, 10, 20)
#: (label, HierarchicalTasks parameters): a 16-feature family with a decaying within-class
#: spectrum (as classes after a PCA) and an isotropic 4-feature one.
FAMILIES = (
    ("d = 16", {"n_features": 16, "prior_cov": 4.0, "within_cov": np.exp(-3 * np.arange(16) / 16)}),
    ("d = 4", {"n_features": 4, "prior_cov": 1.0, "within_cov": 1.0}),
)


def dilated_scores(
    tasks: HierarchicalTasks, m: int, n_tasks: int, n_points: int, seed: int
) -> dict[float, dict[str, np.ndarray]]:
    """Per-task MMD² of the exact predictive dilated by each factor, both conventions.

    Parameters
    ----------
    tasks : HierarchicalTasks
        A Gaussian family (its predictive has a closed form).
    m : int
        Support rows per task.
    n_tasks, n_points : int
        Tasks, and generated and true points per task.
    seed : int
        Seed of the task draws and of the predictive samples.

    Returns
    -------
    scores : dict
        Dilation -> convention -> array of shape (n_tasks,).

    Examples
    --------
    >>> s = dilated_scores(HierarchicalTasks(n_features=2), 5, 3, 20, 0)
    >>> sorted(s) == sorted(DILATIONS), s[1.0]["true"].shape
    (True, (3,))
    """
    rng = np.random.default_rng(seed)
    S, Q = tasks.sample_tasks(n_tasks, m, n_points, random_state=rng)
    mean, _ = tasks.predictive_moments(S)
    G = tasks.sample_predictive(n_points, S, random_state=rng)
    out = {}
    for c in DILATIONS:
        dilated = mean[:, None] + c * (G - mean[:, None])
        rows = [scores_both_conventions(g, q) for g, q in zip(dilated, Q, strict=True)]
        out[c] = {conv: np.array([r[conv] for r in rows]) for conv in CONVENTIONS}
    return out


def change_against_exact(
    scores: dict, conv: str, n_boot: int = 2000, seed: int = 0
) -> dict[float, tuple[float, float, float]]:
    """Percent change of mean MMD² against the exact predictive (``c = 1``), with an interval.

    Parameters
    ----------
    scores : dict
        The output of :func:`dilated_scores`.
    conv : {"pooled", "true"}
    n_boot : int, default=2000
        Bootstrap replicates over tasks (paired: the same tasks for both means).
    seed : int, default=0

    Returns
    -------
    change : dict
        Dilation -> (percent, low, high); negative: worse than the exact predictive.

    Examples
    --------
    >>> s = {c: {"true": np.full(4, c)} for c in DILATIONS}
    >>> change_against_exact(s, "true")[1.5][0]
    -50.0
    """
    base = scores[1.0][conv]
    idx = bootstrap_indices(1, len(base), n_boot, seed)[:, 0]  # (n_boot, n_tasks)
    out = {}
    for c, table in scores.items():
        values = table[conv]
        point = 100 * (1 - values.mean() / base.mean())
        reps = 100 * (1 - values[idx].mean(axis=1) / base[idx].mean(axis=1))
        lo, hi = np.quantile(reps, [0.025, 0.975])
        out[c] = (float(point), float(lo), float(hi))
    return out


def measure(n_tasks: int, n_points: int) -> list[dict]:
    """Every (family, m): the per-convention changes and the best dilation of each."""
    rows = []
    for k, (label, params) in enumerate(FAMILIES):
        tasks = HierarchicalTasks(**params)
        for m in SIZES:
            scores = dilated_scores(tasks, m, n_tasks, n_points, seed=1000 * k + m)
            change = {conv: change_against_exact(scores, conv) for conv in CONVENTIONS}
            best = {
                conv: max(change[conv], key=lambda c, v=change[conv]: v[c][0])
                for conv in CONVENTIONS
            }
            rows.append({"family": label, "m": m, "change": change, "best": best})
    return rows


def _cell(v: tuple[float, float, float]) -> str:
    return f"{v[0]:+.0f} % [{v[1]:+.0f}, {v[2]:+.0f}]"


def table(rows: list[dict], n_tasks: int, n_points: int, seconds: float) -> str:
    """The docs block: one row per (family, m, convention), one column per dilation."""
    head = "| family | m | convention | " + " | ".join(f"c = {c:g}" for c in DILATIONS)
    head += " | best c |\n|" + "---|" * (len(DILATIONS) + 4)
    lines = [head]
    for r in rows:
        for conv in CONVENTIONS:
            cells = " | ".join(_cell(r["change"][conv][c]) for c in DILATIONS)
            lines.append(f"| {r['family']} | {r['m']} | {conv} | {cells} | {r['best'][conv]:g} |")
    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    return (
        "Command (from the repository root): `python benchmarks/bench_mmd_conventions.py "
        f"--write-docs`. {n_tasks} tasks per row, {n_points} generated and {n_points} true "
        f"points per task; wall time {seconds:.0f} s; machine: {os.cpu_count()} cores "
        f"({platform.platform()}), load average (1 / 5 / 15 min) {load} at the end.\n\n"
        "Percent change of mean MMD² against the exact Bayes predictive (`c = 1`), 95 % "
        "bootstrap interval over tasks; negative: worse than the exact predictive. `c`: the "
        "predictive's samples dilated about its mean by `c`.\n\n" + "\n".join(lines) + "\n"
    )


def write_docs(text: str, path: Path = DOCS) -> None:
    """Replace the block between the markers of ``path`` with ``text``."""
    page = path.read_text()
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    path.write_text(page[:start] + "\n" + text + page[end:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks per (family, m)")
    parser.add_argument("--points", type=int, default=200, help="generated and true points")
    parser.add_argument("--write-docs", action="store_true", help="rewrite docs/results.md")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    rows = measure(args.tasks, args.points)
    text = table(rows, args.tasks, args.points, time.perf_counter() - t0)
    print(text)
    if args.write_docs:
        write_docs(text)


if __name__ == "__main__":
    main()
