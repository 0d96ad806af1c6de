"""Thread policy benchmark: each sampling call with Torch's default threads against one thread,
on an idle machine and beside two busy Torch processes.

The calls are the paper's regime (the exact flow of 50 points), the pretrained prior's few-shot
sampling, the automatic bandwidth, and three calls large enough to be cut into several work
items (sampling, ``score_samples`` and ``velocity``), which the policy spreads over the cores
(``skflow.threads``). For each call the table gives the median wall time of ``--repeats`` runs
per setting, the ratio default / one thread, and whether the two settings gave identical
arrays (the same seed must give the same samples on any thread count).

The background load is two processes that multiply 512 x 512 matrices on Torch's default
threads in a loop; they stop by themselves after ``--load-seconds`` and are ended when the
measurement is done.

Run ``python benchmarks/bench_threads.py`` (about two minutes on two cores);
``--write-docs`` rewrites the block between ``<!-- bench-threads:start -->`` and
``<!-- bench-threads:end -->`` in docs/performance.md and the JSON in
benchmarks/results/threads/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from skflow import LearnedFlowSampler, NWFlowSampler, SolverOptions

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "performance.md"
OUT = ROOT / "benchmarks" / "results" / "threads"
MARKERS = ("<!-- bench-threads:start -->", "<!-- bench-threads:end -->")

#: a busy neighbour: Torch matrix products on its default threads, bounded in time
LOAD = """
import sys, time, torch
a = torch.randn(512, 512)
stop = time.time() + float(sys.argv[1])
while time.time() < stop:
    a = torch.tanh(a @ a)
"""


def _calls() -> dict:
    """``name -> (description, call)``; each call returns an array (the same seed each time)."""
    rng = np.random.default_rng(0)
    S16, S2, S8 = rng.normal(size=(10, 16)), rng.normal(size=(50, 2)), rng.normal(size=(50, 8))
    big_S, big_X = rng.normal(size=(2048, 16)), rng.normal(size=(20_000, 16))
    prior = LearnedFlowSampler.from_pretrained("general-16-sized", n_features=16)
    auto = NWFlowSampler(random_state=0).fit(S2)
    paper = NWFlowSampler(sigma_min=0.01, random_state=0).fit(S8)
    large = NWFlowSampler(solver=SolverOptions(n_steps=20), random_state=0).fit(big_S)
    return {
        "prior": (
            "prior few-shot: `general-16-sized`, sample(200), support 10 x 16",
            lambda: prior.sample(200, support=S16, random_state=0),
        ),
        "auto": (
            "`NWFlowSampler()` (auto), sample(2000), support 50 x 2",
            lambda: auto.sample(2000),
        ),
        "paper": (
            "paper regime: `sigma_min=0.01`, sample(1000), support 50 x 8",
            lambda: paper.sample(1000),
        ),
        "large-sample": (
            "large: sample(8192), support 2048 x 16, 20 Heun steps",
            lambda: large.sample(8192),
        ),
        "large-score": (
            "large: score_samples of 20,000 rows, support 2048 x 16",
            lambda: large.score_samples(big_X),
        ),
        "large-velocity": (
            "large: velocity at 20,000 rows, support 2048 x 16",
            lambda: large.velocity(big_X, 0.5),
        ),
    }


def _time(call, repeats: int) -> tuple[float, np.ndarray]:
    out, times = None, []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _measure(calls: dict, default_threads: int, repeats: int) -> dict:
    """Median seconds and outputs of every call on ``default_threads`` and on one thread."""
    rows = {}
    for name, (_, call) in calls.items():
        row = {}
        for label, n in (("default", default_threads), ("one", 1)):
            torch.set_num_threads(n)
            call()  # warm: caches, the first allocation
            row[label], row[f"{label}_out"] = _time(call, repeats)
        torch.set_num_threads(default_threads)
        row["identical"] = bool(np.array_equal(row.pop("default_out"), row.pop("one_out")))
        rows[name] = row
    return rows


def _with_load(n_procs: int, seconds: float):
    procs = [subprocess.Popen([sys.executable, "-c", LOAD, str(seconds)]) for _ in range(n_procs)]
    time.sleep(2.0)  # let them start their loops
    return procs


def _table(calls: dict, idle: dict, loaded: dict) -> str:
    lines = [
        "| call | idle: default threads (s) | idle: one thread (s) | ratio | loaded: default "
        "threads (s) | loaded: one thread (s) | ratio | same samples on both |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, (desc, _) in calls.items():
        a, b = idle[name], loaded[name]
        same = "yes" if a["identical"] and b["identical"] else "**no**"
        lines.append(
            f"| {desc} | {a['default']:.3f} | {a['one']:.3f} | {a['default'] / a['one']:.2f} | "
            f"{b['default']:.3f} | {b['one']:.3f} | {b['default'] / b['one']:.2f} | {same} |"
        )
    return "\n".join(lines)


def _load_avg() -> str:
    return "{:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg())


def write_docs(text: str, path: Path = DOCS) -> None:
    """Replace the block between the markers of ``path`` with ``text``."""
    page = path.read_text()
    start, end = page.index(MARKERS[0]), page.index(MARKERS[1])
    path.write_text(page[: start + len(MARKERS[0])] + "\n" + text + "\n" + page[end:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--load-processes", type=int, default=2)
    ap.add_argument("--load-seconds", type=float, default=600.0)
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args(argv)
    default_threads = torch.get_num_threads()
    calls = _calls()
    load_start = _load_avg()
    idle = _measure(calls, default_threads, args.repeats)
    procs = _with_load(args.load_processes, args.load_seconds)
    try:
        loaded = _measure(calls, default_threads, args.repeats)
        load_busy = _load_avg()  # the 1-minute average has caught up with the load by now
    finally:
        for p in procs:
            p.kill()
            p.wait()
    table = _table(calls, idle, loaded)
    header = (
        f"`python benchmarks/bench_threads.py{' --write-docs' if args.write_docs else ''}` on "
        f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), Torch "
        f"{torch.__version__}, default threads {default_threads}; median of {args.repeats} "
        f"runs. Load average (1/5/15 min) {load_start} before the idle runs, {load_busy} at "
        f"the end of the runs beside {args.load_processes} background Torch processes."
    )
    text = header + "\n\n" + table
    print(text)
    if args.write_docs:
        OUT.mkdir(parents=True, exist_ok=True)
        record = {"idle": idle, "loaded": loaded, "header": header}
        (OUT / "results.json").write_text(json.dumps(record, indent=2) + "\n")
        write_docs(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
