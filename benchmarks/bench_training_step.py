#!/usr/bin/env python
"""Where a training step of LearnedFlowSampler spends its time, at the paper's architecture.

One training step at the paper's architecture (d_model 128, 4 heads, 3 layers, MLP ratio 4)
with the batch the issue that asked for it names (32 tasks x 50 support x 256 targets), on
Gaussian-mixture tasks, CPU float32: milliseconds per iteration (the wall time of a ``fit``
of ``--iterations`` iterations, after one warm-up ``fit``) for each ``d``, then a Torch
profile of one more ``fit`` at the last ``d`` with the self CPU time grouped by kind of
operator (matrix products, GELU, attention, copies, the rest). The profile shows what a
faster step could still remove without changing the model's arithmetic.

Usage::

    python benchmarks/bench_training_step.py [--threads 1] [--iterations 20] [--write-docs]

``--write-docs`` writes the table between the ``bench:training-step`` markers of
``docs/learned.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skflow import LearnedFlowSampler  # noqa: E402
from skflow.samplers.options import learned_params_from_flat  # noqa: E402
from skflow.tasks import GaussianMixtureTasks  # noqa: E402

DOCS = ROOT / "docs" / "learned.md"
MARKERS = "<!-- bench:training-step:start -->", "<!-- bench:training-step:end -->"
#: Operator groups of the profile (first match wins), by substring of the aten name.
GROUPS = (
    ("matrix products (mm, addmm, bmm)", ("aten::mm", "aten::addmm", "aten::bmm")),
    ("GELU (forward + backward)", ("aten::gelu",)),
    ("attention (SDPA, forward + backward)", ("scaled_dot_product",)),
    ("copies (copy_, contiguous)", ("aten::copy_", "aten::clone")),
)


def _model(iterations: int) -> LearnedFlowSampler:
    flat = dict(
        d_model=128,
        n_heads=4,
        n_layers=3,
        mlp_ratio=4,
        batch_tasks=32,
        support_size=50,
        n_targets=256,
        max_iter=iterations,
        warmup=1,
        device="cpu",
        random_state=0,
    )
    return LearnedFlowSampler(**learned_params_from_flat(flat))


def ms_per_iteration(d: int, iterations: int) -> float:
    """Wall milliseconds per iteration of a ``fit`` (after one warm-up ``fit``)."""
    tasks = GaussianMixtureTasks(n_features=d)
    _model(2).fit(tasks)
    start = time.perf_counter()
    _model(iterations).fit(tasks)
    return 1000.0 * (time.perf_counter() - start) / iterations


def profile_groups(d: int, iterations: int) -> list[tuple[str, float]]:
    """Share of self CPU time per operator group in one ``fit``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _model(iterations).fit(GaussianMixtureTasks(n_features=d))
    totals = {name: 0.0 for name, _ in GROUPS} | {"everything else": 0.0}
    for event in prof.key_averages():
        group = next(
            (name for name, keys in GROUPS if any(k in event.key for k in keys)),
            "everything else",
        )
        totals[group] += event.self_cpu_time_total
    whole = sum(totals.values())
    return [(name, value / whole) for name, value in totals.items()]


def table(times: dict[int, float], shares, args, loads) -> str:
    lines = ["| d | ms per iteration |", "|---|---|"]
    lines += [f"| {d} | {ms:.0f} |" for d, ms in times.items()]
    lines += ["", f"Profile (d = {args.dims[-1]}, self CPU time):", ""]
    lines += ["| operators | share |", "|---|---|"]
    lines += [f"| {name} | {100 * share:.1f} % |" for name, share in shares]
    load = ", ".join(f"{v:.2f}" for v in loads)
    lines += [
        "",
        f"Command: `python benchmarks/bench_training_step.py {' '.join(sys.argv[1:])}`. "
        f"{args.iterations} iterations per measurement; machine: {os.cpu_count()} cores, "
        f"Torch {torch.__version__} with {args.threads} thread(s), load average (1 min) {load} "
        "(at the start and the end).",
    ]
    return "\n".join(lines)


def write_docs(text: str) -> None:
    start, end = MARKERS
    page = DOCS.read_text()
    if page.count(start) != 1 or page.count(end) != 1:
        raise SystemExit(f"{DOCS} must contain the markers {start} ... {end} once.")
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    DOCS.write_text(pattern.sub(lambda _: f"{start}\n{text}\n{end}", page))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--dims", type=int, nargs="+", default=[2, 16])
    p.add_argument("--write-docs", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    loads = [os.getloadavg()[0]]
    times = {d: ms_per_iteration(d, args.iterations) for d in args.dims}
    shares = profile_groups(args.dims[-1], max(5, args.iterations // 2))
    loads.append(os.getloadavg()[0])
    text = table(times, shares, args, loads)
    print(text)
    if args.write_docs:
        write_docs(text)


if __name__ == "__main__":
    main()
