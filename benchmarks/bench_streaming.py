#!/usr/bin/env python
"""Benchmark of the exact field on a support too large for a dense kernel (support streaming).

``nw_velocity`` for ``n = 1000`` queries against ``m = 10**6`` support points in ``d = 64``
(float32 support: 256 MB), NumPy and Torch backends, at ``t = 0.5`` (computed in float32) and
``t = 0.99`` (float32 inputs whose logits need float64: the support is cast chunk by chunk).
The field streams the support in chunks with an online log-sum-exp (``skflow.field``,
chosen automatically for this size), so memory does not grow with ``m`` beyond the support
itself.

Each configuration runs in a fresh subprocess, which builds the inputs, makes one tiny warm-up
call (imports, thread pools), reads ``ru_maxrss`` (the baseline: the process's peak so far,
inputs included), times one field call and reads ``ru_maxrss`` again. Reported: time, peak
minus baseline (memory the call added) and the absolute peak of the process (Python, NumPy,
Torch if used, the 256 MB support, the queries and the call). Then, outside the measurement,
the first 8 velocities are checked against a float64 brute force (explicit differences,
support in chunks). The target is an absolute peak below 2 GiB.

Usage::

    python benchmarks/bench_streaming.py [--m 1000000] [--d 64] [--n 1000] [--write-docs]

``--write-docs`` writes the table into ``docs/robustness.md`` (between the
``bench:large-support`` markers; the rest of the file is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DOCS = ROOT / "docs" / "robustness.md"
SIGMA_MIN = 0.01
TARGET_BYTES = 2 * 2**30
# (backend, t, extra environment of the subprocess, note)
CONFIGS = [
    ("numpy", 0.5, {}, ""),
    ("numpy", 0.99, {}, ""),
    ("torch", 0.5, {}, ""),
    ("torch", 0.99, {}, ""),
    ("torch", 0.5, {"MALLOC_MMAP_THRESHOLD_": "1048576"}, "MALLOC_MMAP_THRESHOLD_=1048576"),
]


def _maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _inputs(m, d, n, t):
    rng = np.random.default_rng(0)
    support = rng.standard_normal((m, d), dtype=np.float32)  # 256 MB for m = 1e6, d = 64
    idx = rng.integers(0, m, n)
    noise = rng.standard_normal((n, d), dtype=np.float32)
    x = (t * support[idx] + (1.0 - (1.0 - SIGMA_MIN) * t) * noise).astype(np.float32)
    return support, x


def _reference(x, support, t, rows=65536):
    """float64 brute-force velocity of the queries ``x``: explicit differences, online lse."""
    x = x.astype(np.float64)
    sigma = 1.0 - (1.0 - SIGMA_MIN) * t
    top = np.full(x.shape[0], -np.inf)
    z = np.zeros(x.shape[0])
    acc = np.zeros_like(x)
    for j in range(0, support.shape[0], rows):
        s = support[j : j + rows].astype(np.float64)
        logits = -np.sum((x[:, None, :] - t * s[None]) ** 2, axis=2) / (2 * sigma**2)
        new = np.maximum(top, logits.max(axis=1))
        scale = np.exp(top - new)
        p = np.exp(logits - new[:, None])
        z = z * scale + p.sum(axis=1)
        acc = acc * scale[:, None] + p @ s
        top = new
    return (acc / z[:, None] - (1 - SIGMA_MIN) * x) / sigma


def _float64_fallback(support, t, limit, rows=65536):
    """Whether float32 inputs at time ``t`` are computed in float64: the field's rule
    ``a(t) R^2 > float32_logit_limit``, ``a = t / sigma_t^2``, ``R`` the largest distance of a
    support row to the support's mean (see :mod:`skflow.field`, *Precision*)."""
    mu = support.mean(axis=0, dtype=np.float64)
    r2 = max(
        float(np.max(np.sum((support[j : j + rows] - mu) ** 2, axis=1)))
        for j in range(0, support.shape[0], rows)
    )
    return t / (1.0 - (1.0 - SIGMA_MIN) * t) ** 2 * r2 > limit


def probe(backend, t, m, d, n):
    """Run in a fresh process: one measured field call; prints a JSON line."""
    support, x = _inputs(m, d, n, t)
    from skflow import field

    if backend == "torch":
        import torch

        S, X = torch.from_numpy(support), torch.from_numpy(x)
    else:
        S, X = support, x
    field.nw_velocity(X[:4], S[:100], t, sigma_min=SIGMA_MIN)  # warm-up: imports, pools
    base_rss, base_peak = _rss_bytes(), _maxrss_bytes()
    t0 = time.perf_counter()
    v = field.nw_velocity(X, S, t, sigma_min=SIGMA_MIN)
    elapsed = time.perf_counter() - t0
    peak = _maxrss_bytes()
    v = v.numpy() if backend == "torch" else v
    prepared = field.NWField(S, sigma_min=SIGMA_MIN)  # the plan the call above made
    ref = _reference(x[:8], support, t)
    err = float(np.max(np.abs(v[:8] - ref)) / np.max(np.abs(ref)))
    out = {
        "time": elapsed,
        "baseline": base_peak,
        "rss_before": base_rss,
        "peak": peak,
        "extra": peak - base_peak,
        "dtype": str(v.dtype),
        "finite": bool(np.all(np.isfinite(v))),
        "streaming": prepared.streaming,
        "support_rows": prepared.support_chunk_rows,
        "float64_fallback": _float64_fallback(support, t, prepared.float32_logit_limit),
        "error": err,
    }
    print(json.dumps(out))


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import torch

    return (
        f"{cpu}, {os.cpu_count()} cores ({torch.get_num_threads()} Torch threads), "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM; "
        f"NumPy {np.__version__}, torch {torch.__version__}, Python {platform.python_version()}"
    )


def _mib(b):
    return f"{b / 2**20:.0f} MiB"


def run(m, d, n):
    rows = []
    for backend, t, env, note in CONFIGS:
        cmd = [sys.executable, __file__, "--_probe", backend, str(t)]
        cmd += ["--m", str(m), "--d", str(d), "--n", str(n)]
        res = subprocess.run(
            cmd, capture_output=True, text=True, check=True, env={**os.environ, **env}
        )
        row = json.loads(res.stdout.strip().splitlines()[-1])
        row.update(backend=backend, t=t, note=note)
        rows.append(row)
        print(
            f"{backend:5s} t={t:<5} {note:32s} time {row['time']:7.2f} s  "
            f"extra {_mib(row['extra']):>9s}  peak {_mib(row['peak']):>9s}  "
            f"rel. error {row['error']:.1e}  streaming={row['streaming']} "
            f"rows={row['support_rows']} float64={row['float64_fallback']}",
            flush=True,
        )
    return rows


def table(rows, m, d, n, command, total, load0, load1):
    lines = [
        f"Command: `{command}` (total {total:.0f} s).",
        "",
        f"Machine: {machine()}; load average (1/5/15 min) {load0} at start, {load1} at end.",
        "",
        f"`nw_velocity` for n = {n} queries, m = {m:,} support points, d = {d} (float32 "
        f"support: {m * d * 4 / 2**20:.0f} MiB), sigma_min = {SIGMA_MIN}, queries on the path "
        "`x = t s_j + sigma_t z`.",
        "",
        "| backend | t | compute dtype | time | peak minus baseline | absolute peak "
        "| < 2 GiB | rel. error vs float64 | support chunk |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        dtype = "float64 (fallback)" if r["float64_fallback"] else "float32"
        name = r["backend"] + (f" ({r['note']})" if r["note"] else "")
        lines.append(
            f"| {name} | {r['t']} | {dtype} | {r['time']:.1f} s | {_mib(r['extra'])} | "
            f"{_mib(r['peak'])} | {'yes' if r['peak'] < TARGET_BYTES else '**no**'} | "
            f"{r['error']:.1e} | {r['support_rows'] if r['streaming'] else 'dense'} rows |"
        )
    lines += [
        "",
        "Baseline: `ru_maxrss` after building the inputs and one tiny warm-up call (so it "
        "includes the interpreter, the libraries, the support and the queries); peak: "
        "`ru_maxrss` after the call; one fresh subprocess per row. Relative error: "
        "`max |v - v_ref| / max |v_ref|` over the first 8 queries against a float64 brute "
        "force (explicit differences). The float32 result's error is float32 rounding.",
    ]
    return "\n".join(lines)


def write_docs(text, path=DOCS):
    start, end = "<!-- bench:large-support:start -->", "<!-- bench:large-support:end -->"
    block = f"{start}\n{text}\n{end}"
    doc = path.read_text() if path.exists() else ""
    if start in doc and end in doc:
        doc = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, doc, flags=re.S)
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    path.write_text(doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--write-docs", action="store_true", help="update docs/robustness.md")
    ap.add_argument("--_probe", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._probe:
        probe(args._probe[0], float(args._probe[1]), args.m, args.d, args.n)
        return
    load0 = "{:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg())
    t0 = time.perf_counter()
    rows = run(args.m, args.d, args.n)
    total = time.perf_counter() - t0
    load1 = "{:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg())
    command = "python benchmarks/bench_streaming.py" + (" --write-docs" if args.write_docs else "")
    if (args.m, args.d, args.n) != (1_000_000, 64, 1000):
        command += f" --m {args.m} --d {args.d} --n {args.n}"
    text = table(rows, args.m, args.d, args.n, command, total, load0, load1)
    print()
    print(text)
    if args.write_docs:
        write_docs(text)
        print(f"\nwritten to {DOCS}")


if __name__ == "__main__":
    main()
