"""Speed of ``FlowOverSampler.fit_resample`` against SMOTE on a 10,000-row, 30-feature set (1:20).

The data: ``make_classification(n_samples=10_000, n_features=30, weights=[20/21, 1/21])``
(with 1 % of the labels flipped: 520 minority rows; the over-samplers add about 9,000 new
minority rows), standardised.
Each sampler's ``fit_resample`` is timed ``--repeats`` times (median; the first call of each
generator, which loads Torch kernels and the prior's weights, is a warm-up and not counted), in
one process with ``--threads`` Torch threads. The target of issue 37 is under 5 s on 2 cores.

The wall time depends on what else runs on the machine, so the CPU time of the process (all
its threads) is reported beside it, with the load average. A second table checks the default
``n_steps=20``: the MMD² between 2,000 new rows of 20 steps and 2,000 of 100 steps (another
seed), against that between two 100-step draws.

Usage: ``python benchmarks/bench_oversampling_speed.py [--threads 2] [--repeats 3]
[--write-docs]``; prints markdown tables with the load average next to them and, with
``--write-docs``, writes them into ``docs/oversampling.md``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch
from imblearn.over_sampling import SMOTE
from sklearn.datasets import make_classification
from sklearn.preprocessing import StandardScaler

from skflow.metrics import mmd2
from skflow.oversampling import FlowOverSampler

PAGE = Path(__file__).resolve().parents[1] / "docs" / "oversampling.md"
BEGIN, END = "<!-- oversampling-speed:begin -->", "<!-- oversampling-speed:end -->"

SAMPLERS = {
    "SMOTE": lambda: SMOTE(random_state=0),
    "FlowOverSampler(generator='nw')": lambda: FlowOverSampler(generator="nw", random_state=0),
    "FlowOverSampler(generator='pretrained')": lambda: FlowOverSampler(
        generator="pretrained", random_state=0
    ),
}


def data() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=10_000, n_features=30, n_informative=10, weights=[20 / 21, 1 / 21], random_state=0
    )
    return StandardScaler().fit_transform(X), y


def timings(X: np.ndarray, y: np.ndarray, repeats: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each sampler's ``fit_resample`` after a warm-up call."""
    out = {}
    for name, make in SAMPLERS.items():
        make().fit_resample(X, y)  # warm-up
        times = []
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            make().fit_resample(X, y)
            times.append((time.perf_counter() - wall, time.process_time() - cpu))
        out[name] = tuple(float(v) for v in np.median(times, axis=0))
    return out


def steps_check(X: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """MMD² of new rows: 20 against 100 steps, and 100 against 100 steps (other seeds)."""
    n = len(y)

    def new_rows(steps: int, seed: int) -> np.ndarray:
        over = FlowOverSampler(n_steps=steps, random_state=seed)
        return over.fit_resample(X, y)[0][n : n + 2000]

    ref = new_rows(100, 0)
    return {
        "20 vs 100 steps": mmd2(new_rows(20, 1), ref),
        "100 vs 100 steps": mmd2(new_rows(100, 2), ref),
    }


def report(X, y, threads: int, result: dict, check: dict, loads: tuple) -> str:
    smote = result["SMOTE"][0]
    lines = [
        f"{len(y)} rows, {X.shape[1]} features, {int(y.sum())} minority rows; {threads} Torch "
        f"threads, {os.cpu_count()} cores, load average {loads[0]:.2f} (start) / {loads[1]:.2f} "
        "(end).",
        "",
        "| sampler | fit_resample wall (s, median) | CPU (s) | wall ratio to SMOTE |",
        "|---|---|---|---|",
    ]
    for name, (wall, cpu) in result.items():
        lines.append(f"| {name} | {wall:.3f} | {cpu:.2f} | {wall / smote:.0f} |")
    lines += ["", "| MMD² of 2,000 new rows (default generator) | value |", "|---|---|"]
    lines += [f"| {name} | {value:.2e} |" for name, value in check.items()]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    X, y = data()
    start_load = os.getloadavg()[0]
    result = timings(X, y, args.repeats)
    check = steps_check(X, y)
    text = report(X, y, args.threads, result, check, (start_load, os.getloadavg()[0]))
    print(text)
    if args.write_docs:
        command = "python benchmarks/bench_oversampling_speed.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "write_docs"
        )
        page = PAGE.read_text(encoding="utf-8")
        head, tail = page.split(BEGIN)[0], page.split(END)[1]
        block = f"{BEGIN}\nWritten by `{command} --write-docs`:\n\n{text}\n{END}"
        PAGE.write_text(head + block + tail, encoding="utf-8")


if __name__ == "__main__":
    main()
