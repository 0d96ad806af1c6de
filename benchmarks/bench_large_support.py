#!/usr/bin/env python
"""Sampling on large supports: the certified pruned engine against the dense exact field.

Heun, 100 steps (200 field evaluations) on the uniform grid of [0, 1], ``n`` queries, Torch
float64 on the CPU. The pruned field is ``NWField(S, engine="pruned", pruned_rtol=rtol)``
(what ``NWFlowSampler(engine="pruned")`` runs: a probe of 64 queries sends the evaluations
that would evaluate more than half of the pairs to the dense engine); its velocity error bound
is ``last_velocity_error_``, reported relative to ``||u_t(x)||`` (the largest over all rows
and all 200 evaluations). ``--bare`` times the engine alone instead:
``(mean + mu - (1 - sigma_min) x) / sigma_t`` with ``mean`` from
:func:`skflow.field.pruned.pruned_local_mean` at every evaluation. The index
(:class:`~skflow.field.pruned.ClusteredSupport`) is built once, its time reported apart. The
dense reference is :func:`skflow.field.nw_velocity`.

A full dense run at ``m = 10^6`` takes hours on a small CPU, so the dense field is timed at
every ``--dense-every``-th evaluation of the pruned run (same states and times) and its total
is that sum scaled by ``200 / measured``; the table says so. At those evaluations the actual
error of the pruned velocity against the dense one is also recorded (it must stay below the
bound).

``--per-t`` times single evaluations instead, at fixed times: ``n`` queries on the path
(``x_t = t s + sigma_t z`` for random support points ``s``), the bare engine, the field (with
its probe) and the dense field, each the best of ``--repeats`` calls: the cost of the engine
where nothing can be pruned (small t) and where most can (t near 1).

Supports: ``gmm`` (100 Gaussian components, means N(0, I), standard deviation 0.25) and
``digits`` (``sklearn.datasets.load_digits``, bundled with scikit-learn: standardised, for
``d < 64`` projected on its top principal axes, rows replicated with N(0, 0.1^2) jitter).

Usage::

    python benchmarks/bench_large_support.py --quick [--write-docs]
    python benchmarks/bench_large_support.py [--bare] [--write-docs]  # the m = 1e5 configurations
    python benchmarks/bench_large_support.py --configs gmm:1000000:16 [--write-docs]
    python benchmarks/bench_large_support.py --per-t --configs gmm:100000:16 [--write-docs]

``--write-docs`` writes the table into ``docs/large_support.md`` between the
``bench:pruned`` markers (``bench:pruned-quick`` for ``--quick``, ``bench:pruned-bare`` for
``--bare``, ``bench:pruned-per-t`` for ``--per-t``, or ``--docs-key``), after every
configuration (the rest of the file is kept).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skflow.field import NWField, kernel_coefficients, nw_velocity  # noqa: E402
from skflow.field.pruned import (  # noqa: E402
    ClusteredSupport,
    default_n_clusters,
    pruned_local_mean,
)
from skflow.solvers import integrate  # noqa: E402

DOCS = ROOT / "docs" / "large_support.md"
MARKER = "<!-- bench:{}:start -->", "<!-- bench:{}:end -->"
SIGMA_MIN = 0.01
DEFAULT_CONFIGS = ["gmm:100000:16", "digits:100000:16", "gmm:100000:64", "digits:100000:64"]


def make_support(kind: str, m: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``gmm`` or ``digits`` support of shape (m, d), float64."""
    if kind == "gmm":
        means = rng.normal(size=(100, d))
        return means[rng.integers(100, size=m)] + 0.25 * rng.normal(size=(m, d))
    from sklearn.datasets import load_digits

    X = load_digits().data.astype(np.float64)
    X = (X - X.mean(0)) / X.std()
    if d < X.shape[1]:
        _, _, vt = np.linalg.svd(X, full_matrices=False)
        X = X @ vt[:d].T
    return X[rng.integers(len(X), size=m)] + 0.1 * rng.normal(size=(m, d))


class Fields:
    """The two fields, with the per-evaluation records of the pruned one."""

    def __init__(self, S: torch.Tensor, rtol: float, dense_every: int, bare: bool) -> None:
        self.S, self.mu, self.bare = S, S.mean(0), bare
        start = time.perf_counter()
        if bare:
            self.index = ClusteredSupport(S - self.mu, random_state=0)
            self.n_clusters = self.index.n_clusters_
        else:
            self.field = NWField(S, sigma_min=SIGMA_MIN, engine="pruned", pruned_rtol=rtol)
            self.field.velocity(S[:1], 0.5)  # one query: builds the index (no probe)
            self.n_clusters = default_n_clusters(S.shape[0])
        self.build_s = time.perf_counter() - start
        self.rtol, self.dense_every = rtol, dense_every
        self.calls, self.pruned_s, self.dense_s, self.dense_n = 0, 0.0, 0.0, 0
        self.max_bound, self.max_err, self.fractions, self.times = 0.0, 0.0, [], []

    def _pruned(self, t: float, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Velocity, its bound per row and the evaluated share of pairs."""
        if not self.bare:
            v = self.field.velocity(x, t)
            bound = torch.from_numpy(self.field.last_velocity_error_)
            return v, bound, self.field.last_evaluated_fraction_
        a, b, sigma = (float(c) for c in kernel_coefficients(t, sigma_min=SIGMA_MIN))
        res = pruned_local_mean(self.index, x - t * self.mu, a, b, rtol=self.rtol)
        v = (res.mean + self.mu - (1.0 - SIGMA_MIN) * x) / sigma
        return v, res.mean_error / sigma, res.evaluated_fraction

    def velocity(self, t: float, x: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        v, bound, fraction = self._pruned(t, x)
        self.pruned_s += time.perf_counter() - start
        norm = torch.linalg.norm(v, dim=1)
        self.max_bound = max(self.max_bound, float((bound / norm).max()))
        self.fractions.append(fraction)
        self.times.append(t)
        if self.calls % self.dense_every == 0:
            start = time.perf_counter()
            ref = nw_velocity(x, self.S, t, sigma_min=SIGMA_MIN)
            self.dense_s += time.perf_counter() - start
            self.dense_n += 1
            err = torch.linalg.norm(v - ref, dim=1) / torch.linalg.norm(ref, dim=1)
            self.max_err = max(self.max_err, float(err.max()))
        self.calls += 1
        return v


def run_config(kind: str, m: int, d: int, n: int, steps: int, args) -> dict:
    rng = np.random.default_rng(0)
    S = torch.from_numpy(make_support(kind, m, d, rng))
    fields = Fields(S, args.rtol, args.dense_every, args.bare)
    x0 = torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    grid = np.linspace(0.0, 1.0, steps + 1)
    integrate(fields.velocity, x0, grid, method="heun")
    dense_total = fields.dense_s * fields.calls / fields.dense_n
    fractions, times = np.asarray(fields.fractions), np.asarray(fields.times)
    return {
        "data": kind, "m": m, "d": d, "n": n, "evals": fields.calls,
        "build": fields.build_s, "clusters": fields.n_clusters,
        "pruned": fields.pruned_s, "dense": dense_total, "dense_n": fields.dense_n,
        "speedup": dense_total / fields.pruned_s,
        "speedup_build": dense_total / (fields.pruned_s + fields.build_s),
        "fraction": float(np.mean(fields.fractions)),
        "fraction_early": float(np.mean(fractions[times < 0.5])),
        "fraction_late": float(np.mean(fractions[times >= 0.5])),
        "bound": fields.max_bound, "err": fields.max_err,
    }  # fmt: skip


PER_T_TIMES = (0.05, 0.25, 0.5, 0.75, 0.9, 0.99)


def _best(fn, repeats: int) -> tuple[float, object]:
    """Best wall time of ``repeats`` calls of ``fn`` and its last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def per_t_rows(kind: str, m: int, d: int, n: int, args) -> list[dict]:
    """Single evaluations at fixed times: bare engine, field with probe, dense field."""
    rng = np.random.default_rng(0)
    S = torch.from_numpy(make_support(kind, m, d, rng))
    mu, index = S.mean(0), ClusteredSupport(S - S.mean(0), random_state=0)
    field = NWField(S, sigma_min=SIGMA_MIN, engine="pruned", pruned_rtol=args.rtol)
    rows = []
    for t in PER_T_TIMES:
        a, b, sigma = (float(c) for c in kernel_coefficients(t, sigma_min=SIGMA_MIN))
        pick = torch.from_numpy(rng.integers(m, size=n))
        x = t * S[pick] + sigma * torch.randn(n, d, dtype=torch.float64)
        bare_s, res = _best(
            lambda x=x, t=t, a=a, b=b: pruned_local_mean(index, x - t * mu, a, b, rtol=args.rtol),
            args.repeats,
        )
        field_s, _ = _best(lambda x=x, t=t: field.velocity(x, t), args.repeats)
        dense_s, _ = _best(lambda x=x, t=t: nw_velocity(x, S, t, sigma_min=SIGMA_MIN), args.repeats)
        rows.append({
            "data": kind, "m": m, "d": d, "n": n, "t": t, "share": res.evaluated_fraction,
            "field_share": field.last_evaluated_fraction_,
            "bare": bare_s, "field": field_s, "dense": dense_s,
        })  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def per_t_table(rows: list[dict], command: str, threads: int, loads: list) -> str:
    lines = [
        "| data | m | d | n | t | evaluated pairs: bare (field) | bare engine (s) "
        '| `NWField(engine="pruned")` (s) | dense (s) | bare / dense | field / dense |',
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['data']} | {r['m']:.0e} | {r['d']} | {r['n']} | {r['t']:g} "
            f"| {100 * r['share']:.1f} % ({100 * r['field_share']:.0f} %) | {r['bare']:.3g} "
            f"| {r['field']:.3g} | {r['dense']:.3g} | {r['bare'] / r['dense']:.2f} "
            f"| {r['field'] / r['dense']:.2f} |"
        )
    load = ", ".join(f"{v:.2f}" for v in loads)
    lines += [
        "",
        f"Command: `{command}`. Best of {rows[0].get('repeats', 2)} calls each. Machine: "
        f"{os.cpu_count()} cores, Torch float64 with {threads} thread(s), load average (1 min) "
        f"{load} (before each configuration and at the end). *Evaluated pairs*: share of "
        "(query, support point) pairs the bare engine computed; the field runs dense where "
        'its probe estimates more than `pruned_max_share` ("auto": 20 % in float64).',
    ]
    return "\n".join(lines)


def sampler_row(kind: str, m: int, d: int, n: int, args) -> dict:
    """The user's call, ``NWFlowSampler(sigma_min, engine, random_state=0).fit(S).sample(n)``,
    pruned and dense (``engine="auto"``) on the same support (``--dtype``), each timed once,
    index build and probes included; the threads in force."""
    from skflow import NWFlowSampler

    # A NumPy array, as scikit-learn users pass it (the sampler keeps float32 input, NumPy or
    # Torch, in float32).
    S = make_support(kind, m, d, np.random.default_rng(0)).astype(args.dtype)
    out, samples = {"data": kind, "m": m, "d": d, "n": n}, {}
    for engine in ("pruned", "auto"):
        start = time.perf_counter()
        est = NWFlowSampler(sigma_min=SIGMA_MIN, engine=engine, random_state=0).fit(S)
        samples[engine] = est.sample(n)
        out[engine] = time.perf_counter() - start
        if engine == "pruned":
            out["bound"] = float(est.sampling_error_bound_)
    pruned, dense = (np.asarray(samples[e], dtype=np.float64) for e in ("pruned", "auto"))
    return out | {"diff": float(np.abs(pruned - dense).max()), "scale": float(np.abs(dense).max())}


def sampler_table(rows: list[dict], command: str, threads: int, loads: list) -> str:
    head = (
        "| data | m | d | n | pruned: fit + sample (s) | dense: fit + sample (s) | speedup |"
        " certified max velocity error | max abs sample difference (largest abs sample) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    body = "".join(
        f"| {r['data']} | {r['m']:.0e} | {r['d']} | {r['n']} | {r['pruned']:.1f} |"
        f" {r['auto']:.1f} | {r['auto'] / r['pruned']:.2f}x | {r['bound']:.1e} |"
        f" {r['diff']:.1e} ({r['scale']:.1f}) |\n"
        for r in rows
    )
    load = ", ".join(f"{x:.2f}" for x in loads)
    return (
        head
        + body
        + (
            f"\nCommand: `{command}`. Machine: {os.cpu_count()} cores, Torch {threads} thread(s),"
            f" load average (1 min) {load} (before each configuration and at the end)."
            " Heun, 100 steps; `sigma_min = 0.01`; one run each."
        )
    )


def compare_build(kind: str, m: int, d: int, key: str, write: bool) -> None:
    """Index build time against scikit-learn's MiniBatchKMeans with the same clusters."""
    from sklearn.cluster import MiniBatchKMeans

    S = make_support(kind, m, d, np.random.default_rng(0))
    keys = torch.from_numpy(S - S.mean(0))
    start = time.perf_counter()
    index = ClusteredSupport(keys, random_state=0)
    own = time.perf_counter() - start
    start = time.perf_counter()
    MiniBatchKMeans(index.n_clusters_, random_state=0, n_init=1).fit(S - S.mean(0))
    sk = time.perf_counter() - start
    text = (
        f"Index build, {kind} m = {m:.0e}, d = {d}, {index.n_clusters_} clusters: "
        f"`ClusteredSupport` {own:.1f} s (Lloyd on a subsample of 32 rows per cluster, one "
        f"assignment pass, exact radii), scikit-learn `MiniBatchKMeans(n_init=1)` fit alone "
        f"{sk:.1f} s. Command: `python benchmarks/bench_large_support.py --compare-build {key}`."
    )
    print(text)
    if write:
        write_docs(text, "pruned-build")


def table(rows: list[dict], command: str, threads: int, loads: list) -> str:
    lines = [
        "| data | m | d | n | clusters | build (s) | pruned, all evals (s) | dense (s) "
        "| speedup (with build) | evaluated pairs (t < 0.5, t >= 0.5) | max bound / ‖u‖ "
        "| max error / ‖u‖ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        dense = f"{r['dense']:.0f} (measured at {r['dense_n']} of {r['evals']}, scaled)"
        lines.append(
            f"| {r['data']} | {r['m']:.0e} | {r['d']} | {r['n']} | {r['clusters']} "
            f"| {r['build']:.1f} | {r['pruned']:.0f} | {dense} "
            f"| {r['speedup']:.1f}x ({r['speedup_build']:.1f}x) | {100 * r['fraction']:.1f} % "
            f"({100 * r['fraction_early']:.0f} %, {100 * r['fraction_late']:.0f} %) "
            f"| {r['bound']:.1e} | {r['err']:.1e} |"
        )
    load = ", ".join(f"{v:.2f}" for v in loads)
    lines += [
        "",
        f"Command: `{command}`. Machine: {os.cpu_count()} cores, Torch float64 with "
        f"{threads} thread(s), load average (1 min) {load} (before each configuration and "
        "at the end). *Evaluated pairs*: mean over the evaluations of the fraction of "
        "(query, support point) pairs computed exactly. *Max error*: pruned against dense "
        "velocity at the measured evaluations.",
    ]
    return "\n".join(lines)


def write_docs(text: str, key: str) -> None:
    start, end = (marker.format(key) for marker in MARKER)
    page = DOCS.read_text()
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    DOCS.write_text(pattern.sub(lambda _: f"{start}\n{text}\n{end}", page))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--configs", nargs="*", default=DEFAULT_CONFIGS)
    p.add_argument("--quick", action="store_true", help="gmm and digits, m = 2e4, d = 16")
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--dense-every", type=int, default=10)
    p.add_argument("--rtol", type=float, default=1e-10, help="as NWField(pruned_rtol)")
    p.add_argument(
        "--threads", type=int, default=None, help="Torch threads (default 1; --sampler: as found)"
    )
    p.add_argument("--sampler", action="store_true", help="the user's NWFlowSampler call")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"], help="--sampler")
    p.add_argument("--compare-build", metavar="KIND:M:D", help="time the index build only")
    p.add_argument("--bare", action="store_true", help="time pruned_local_mean, not NWField")
    p.add_argument("--per-t", action="store_true", help="single evaluations at fixed t")
    p.add_argument("--repeats", type=int, default=2, help="--per-t: best of this many calls")
    p.add_argument("--write-docs", action="store_true")
    p.add_argument(
        "--docs-key", default=None, help="marker name in docs/large_support.md (bench:KEY)"
    )
    args = p.parse_args(argv)
    if args.threads is None and not args.sampler:
        args.threads = 1
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    args.threads = torch.get_num_threads()
    if args.compare_build:
        kind, m, d = args.compare_build.split(":")
        return compare_build(kind, int(float(m)), int(d), args.compare_build, args.write_docs)
    configs = ["gmm:20000:16", "digits:20000:16"] if args.quick else args.configs
    n = 1024 if args.quick else args.n
    command = "python benchmarks/bench_large_support.py " + " ".join(argv or sys.argv[1:])
    key = docs_key(args)
    rows, loads = [], []
    for spec in configs:
        kind, m, d = spec.split(":")
        loads.append(os.getloadavg()[0])
        if args.sampler:
            rows.append(sampler_row(kind, int(float(m)), int(d), n, args))
            print(rows[-1], flush=True)
            make = sampler_table
        elif args.per_t:
            rows += [
                r | {"repeats": args.repeats}
                for r in per_t_rows(kind, int(float(m)), int(d), n, args)
            ]
            make = per_t_table
        else:
            rows.append(run_config(kind, int(float(m)), int(d), n, args.steps, args))
            print(rows[-1], flush=True)
            make = table
        text = make(rows, command.strip(), args.threads, loads + [os.getloadavg()[0]])
        if args.write_docs:
            write_docs(text, key)
    print(text)


def docs_key(args) -> str:
    """The docs block a run writes: ``--docs-key`` if given, else from the mode."""
    if args.docs_key is not None:
        return args.docs_key
    if args.sampler:
        return f"pruned-sampler-{args.dtype}"
    if args.per_t:
        return "pruned-per-t"
    if args.quick:
        return "pruned-quick" + ("-bare" if args.bare else "")
    return "pruned-bare" if args.bare else "pruned"


if __name__ == "__main__":
    main()
