"""The oversampler's ``generator="pretrained"`` with each shipped prior, on the benchmark's tasks.

``FlowOverSampler(generator="pretrained")`` conditions the prior named by
:data:`skflow.oversampling.PRIOR` on each class's projected rows. This script runs the
``skflow pretrained`` arm of ``benchmarks/bench_oversampling.py`` (its tasks, folds, seeds and
classifiers) once per shipped prior, setting that name, and compares them paired by fold:
the minority F1 and balanced accuracy of both classifiers, and the memorisation ratio of the
new rows. With ``--write-docs`` the table goes into ``docs/oversampling.md``.

Usage: ``python benchmarks/oversampling_priors.py [--repeats 3] [--write-docs]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_oversampling as bench  # noqa: E402

import skflow.oversampling as oversampling  # noqa: E402

PRIORS = ("general-16", "general-16-sized")
KEYS = ("logistic f1", "hgb f1", "logistic bacc", "hgb bacc")
BEGIN, END = "<!-- oversampling-priors:begin -->", "<!-- oversampling-priors:end -->"


def run(repeats: int) -> dict:
    """Per prior: ``bench_oversampling.run`` of the ``skflow pretrained`` arm alone."""
    default, results = oversampling.PRIOR, {}
    try:
        for prior in PRIORS:
            oversampling.PRIOR = prior  # the name generator="pretrained" loads
            results[prior] = bench.run(
                bench.TASKS, ["skflow pretrained"], bench.CLASSIFIERS, repeats, progress=False
            )
    finally:
        oversampling.PRIOR = default
    return results


def table(results: dict) -> str:
    """Markdown: per task, each score under both priors and their paired difference (the
    second prior minus the first, mean [95 % t-interval over folds]); the median memorisation
    ratio under each."""
    first, second = PRIORS
    head = "| task | " + " | ".join(KEYS) + " | memorisation ratio |"
    lines = [head, "|" + "---|" * (len(KEYS) + 2)]
    for task in bench.TASKS:
        a = results[first][task]["arms"]["skflow pretrained"]
        b = results[second][task]["arms"]["skflow pretrained"]
        cells = []
        for key in KEYS:
            diff = bench.interval(np.subtract(b[key], a[key]))
            cells.append(
                f"{np.mean(a[key]):.3f} → {np.mean(b[key]):.3f} "
                f"({diff[0]:+.3f} [{diff[1]:+.3f}, {diff[2]:+.3f}])"
            )
        memo = f"{np.median(a['memorization']):.2f} → {np.median(b['memorization']):.2f}"
        lines.append(f"| {task} | " + " | ".join(cells) + f" | {memo} |")
    return "\n".join(lines)


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # as bench_oversampling: one thread, the same seeds
    load, start = os.getloadavg()[0], time.perf_counter()
    results = run(args.repeats)
    text = table(results)
    task = next(iter(results[PRIORS[0]].values()))
    n_folds = len(task["arms"]["skflow pretrained"][KEYS[0]])  # the benchmark's folds, counted
    command = "python benchmarks/oversampling_priors.py " + " ".join(argv or sys.argv[1:])
    block = (
        f"{BEGIN}\nWritten by `{command.strip()}` on {os.cpu_count()} cores, load average "
        f"{load:.2f} at the start, wall time {time.perf_counter() - start:.0f} s; "
        f"`{PRIORS[0]}` → `{PRIORS[1]}` (paired difference, mean [95 % t-interval over the "
        f"{n_folds} folds]):\n\n{text}\n{END}"
    )
    print(block)
    if args.write_docs:
        page = bench.PAGE.read_text(encoding="utf-8")
        head, tail = page.split(BEGIN)[0], page.split(END)[1]
        bench.PAGE.write_text(head + block + tail, encoding="utf-8")
    return block


if __name__ == "__main__":
    main()
