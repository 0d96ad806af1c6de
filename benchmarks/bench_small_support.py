#!/usr/bin/env python
"""Benchmark of the paper's regime: small supports (m = 50, d = 16), many tasks, one call.

Every comparison is a ratio of two contenders timed in the same run, in interleaved rounds
(median of the per-round ratios), float32, Heun with 100 steps, sigma_min = 0.01:

* **(a) one support**: the default ``NWFlowSampler().sample(8192)`` at m = 50, d = 16 (the
  backend that ``backend="auto"`` picks) against a bare Torch loop: per Heun stage one
  ``scaled_dot_product_attention`` call with query ``x - t mu``, keys the centred support,
  values the support, the per-key bias ``-b ||s_i - mu||^2`` as an additive mask and
  ``scale = a``, then the affine map ``(mean - (1 - sigma_min) x) / sigma_t`` (the same
  formula, none of skflow's checks, planning or float32 precision fallback);
* **(b) many supports**: 256 tasks x 256 samples through one batched call
  ``sample(256, support=S)`` with ``S`` of shape (256, 50, 16), against the same bare loop
  batched over all 256 supports (one SDPA call per stage on (256, 1, 256, 16) queries);
* **(c) learned**: ``LearnedFlowSampler`` (default architecture, untrained: ``max_iter=0``,
  exact head on) through the same batched call against a bare Heun loop over its network's
  batched forward pass (``model_(x, S, t)`` under ``torch.no_grad``);
* **(d) prepared field**: :class:`skflow.field.NWField` at (n, m, d) = (2048, 50, 16)
  averaged over 25 times in [0.01, 0.99] against as many bare SDPA calls
  (``benchmarks/bench_field.py``'s comparison);
* **calibration of backend="auto"** (CPU): ``NWFlowSampler(backend="numpy")`` against
  ``backend="torch"``, ``sample(n)``, m in {10, 50, 200, 1000, 4000}, n in {256, 8192},
  d = 16. The sizes where NumPy wins at every n by ``AUTO_NUMPY_MARGIN`` give the ranges of
  ``AUTO_NUMPY_SUPPORT_CPU`` in ``skflow/_array.py`` (through :func:`numpy_support_ranges`);
  the run prints the literal and says whether the code's table (read from that file) matches it.

Usage::

    python benchmarks/bench_small_support.py [--quick] [--threads N] [--device cpu|cuda]
                                             [--write-docs] [--docs-path PATH]

``--quick`` shrinks every size (1024 samples, 32 tasks, 10 steps, a smaller calibration grid)
to check that the script works; its numbers are not the measurement. ``--write-docs`` writes
the results into the marked block of ``docs/performance.md`` (one block per device and
``--threads``; the rest of the file is kept).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as tnf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_field  # noqa: E402

from skflow import (  # noqa: E402
    LearnedFlowSampler,
    NWFlowSampler,
    SolverOptions,
)
from skflow.samplers.options import learned_params_from_flat  # noqa: E402

DOCS = ROOT / "docs" / "performance.md"
#: The file whose table ``AUTO_NUMPY_SUPPORT_CPU`` the calibration produces (read, not imported).
ARRAY_MODULE = ROOT / "skflow" / "_array.py"
#: A calibration size goes to NumPy only if NumPy was faster than Torch by this factor at
#: every n of the grid (a tie goes to Torch, the engine that scales).
AUTO_NUMPY_MARGIN = 1.1
SIGMA_MIN = 0.01
D, M = 16, 50
TARGETS = {"one support": 1.25, "many supports": 1.3, "learned": 1.2, "prepared": 1.3}
# The learned comparison and the calibration grid integrate fewer steps than the NW
# comparisons (a ratio of per-step costs; every call costs the same per step): 100 Heun steps
# of the learned network over 256 x 256 queries take about 100 s on one core.
FULL = {
    "n": 8192, "tasks": 256, "per_task": 256, "steps": 100, "rounds": 5,
    "learned_steps": 10, "learned_rounds": 3, "grid_steps": 20,
    "grid_m": (10, 50, 200, 1000, 4000), "grid_n": (256, 8192), "grid_rounds": 3,
}  # fmt: skip
QUICK = {
    "n": 1024, "tasks": 32, "per_task": 64, "steps": 10, "rounds": 3,
    "learned_steps": 5, "learned_rounds": 2, "grid_steps": 10,
    "grid_m": (10, 50, 200), "grid_n": (256, 1024), "grid_rounds": 2,
}  # fmt: skip


# -- the calibration's table --------------------------------------------------------------
def code_table(path: Path = ARRAY_MODULE) -> tuple[tuple[int, int], ...]:
    """The literal ``AUTO_NUMPY_SUPPORT_CPU`` of ``skflow/_array.py`` (its source, parsed)."""
    for node in ast.parse(path.read_text()).body:
        target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
        if getattr(target, "id", None) == "AUTO_NUMPY_SUPPORT_CPU":
            return tuple(tuple(r) for r in ast.literal_eval(node.value))
    raise ValueError(f"no AUTO_NUMPY_SUPPORT_CPU in {path}")


def auto_backend(device: str, m: int) -> str:
    """The backend ``NWFlowSampler(backend="auto")`` computes with for a support of ``m`` rows
    (fixed-step sampling): NumPy on the CPU inside a range of the code's table, else Torch."""
    on_cpu = device == "cpu"
    return "numpy" if on_cpu and any(lo <= m < hi for lo, hi in code_table()) else "torch"


def numpy_support_ranges(
    timings: dict[int, list[tuple[float, float]]], margin: float = AUTO_NUMPY_MARGIN
) -> tuple[tuple[int, int], ...]:
    """Support-size ranges where NumPy wins, from a calibration grid.

    A grid size ``m`` is NumPy's when ``numpy_time * margin <= torch_time`` for every pair of
    its timings (one per number of samples). Each such size owns the range from the geometric
    midpoint with the grid size below it to the one with the size above it (from 1 for the
    smallest size, without end for the largest); adjacent ranges are merged.

    Parameters
    ----------
    timings : dict of int to list of (float, float)
        Support size -> ``(numpy seconds, torch seconds)`` per measured ``n``.
    margin : float, default=AUTO_NUMPY_MARGIN

    Returns
    -------
    ranges : tuple of (int, int)
        Half-open ``[lo, hi)`` ranges (``hi = 2**62`` for no end), as
        ``AUTO_NUMPY_SUPPORT_CPU`` of ``skflow/_array.py``.

    Examples
    --------
    >>> numpy_support_ranges({10: [(1.0, 2.0)], 50: [(1.0, 1.05)], 1000: [(3.0, 1.0)]})
    ((1, 22),)
    >>> numpy_support_ranges({50: [(2.0, 1.0), (1.0, 1.0)]})
    ()
    """
    sizes = sorted(timings)
    wins = [all(tn * margin <= tt for tn, tt in timings[m]) for m in sizes]
    ranges: list[list[int]] = []
    for i, m in enumerate(sizes):
        if not wins[i]:
            continue
        lo = 1 if i == 0 else int(round((sizes[i - 1] * m) ** 0.5))
        hi = 2**62 if i == len(sizes) - 1 else int(round((m * sizes[i + 1]) ** 0.5))
        if ranges and ranges[-1][1] == lo:
            ranges[-1][1] = hi
        else:
            ranges.append([lo, hi])
    return tuple((lo, hi) for lo, hi in ranges)


# -- the bare contenders ----------------------------------------------------------------------
def bare_heun(support, x0, n_steps, sigma_min=SIGMA_MIN):
    """Heun from ``x0`` (n, d) or (B, n, d) with one SDPA call per stage on ``support``
    (m, d) or (B, m, d): 4-D inputs and a broadcast (B, 1, 1, m) bias mask, the fastest
    form of the call on the CPU (an expanded (n, m) mask or 3-D inputs measured about 2x
    slower at m = 50)."""
    single = support.ndim == 2
    if single:
        support, x0 = support[None], x0[None]
    mu = support.mean(dim=-2, keepdim=True)  # (B, 1, d)
    keys = (support - mu).unsqueeze(1)  # (B, 1, m, d)
    values = support.unsqueeze(1)
    neg_sq = -(keys * keys).sum(-1).unsqueeze(-2)  # (B, 1, 1, m)
    decay = 1.0 - sigma_min

    def velocity(t, x):
        sigma = 1.0 - decay * t
        a, b = t / sigma**2, 0.5 * t * t / sigma**2
        q = (x - t * mu).unsqueeze(1)  # (B, 1, n, d)
        mean = tnf.scaled_dot_product_attention(q, keys, values, neg_sq * b, scale=a)
        return (mean.squeeze(1) - decay * x) / sigma

    out = _heun(velocity, x0, n_steps)
    return out[0] if single else out


def bare_learned(model, support, x0, n_steps):
    """Heun from ``x0`` (B, n, d) over the network's batched forward pass."""
    with torch.no_grad():
        return _heun(lambda t, x: model(x, support, t), x0, n_steps)


def _heun(velocity, x, n_steps):
    h = 1.0 / n_steps
    for i in range(n_steps):
        t = i * h
        k1 = velocity(t, x)
        k2 = velocity(t + h, x + h * k1)
        x = x + (0.5 * h) * (k1 + k2)
    return x


# -- the comparisons --------------------------------------------------------------------------
def _data(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _ratio(fns, device, rounds):
    med, runs = bench_field.timeit_interleaved(fns, device, rounds, warmup=1)
    a, b = list(fns)
    return {
        a: med[a],
        b: med[b],
        "ratio": bench_field._paired_ratio(runs[a], runs[b]),
    }


def bench_one_support(cfg, device):
    S = _data((M, D), 0)
    sampler = NWFlowSampler(
        sigma_min=SIGMA_MIN,
        device=device,
        random_state=0,
        solver=SolverOptions(n_steps=cfg["steps"]),
    ).fit(S)
    x0 = torch.from_numpy(_data((cfg["n"], D), 1)).to(device)
    s = torch.from_numpy(S).to(device)
    fns = {
        "skflow": lambda: sampler.sample(cfg["n"]),
        "bare": lambda: bare_heun(s, x0, cfg["steps"]),
    }
    out = _ratio(fns, device, cfg["rounds"])
    out["backend"] = auto_backend(device, M)
    return out


def bench_many_supports(cfg, device):
    B, n = cfg["tasks"], cfg["per_task"]
    S = _data((B, M, D), 2)
    sampler = NWFlowSampler(
        sigma_min=SIGMA_MIN,
        device=device,
        random_state=0,
        solver=SolverOptions(n_steps=cfg["steps"]),
    ).fit(S[0])
    x0 = torch.from_numpy(_data((B, n, D), 3)).to(device)
    s = torch.from_numpy(S).to(device)
    fns = {
        "skflow": lambda: sampler.sample(n, support=S),
        "bare": lambda: bare_heun(s, x0, cfg["steps"]),
    }
    return _ratio(fns, device, cfg["rounds"])


def bench_learned(cfg, device):
    from skflow.tasks import GaussianMixtureTasks

    B, n = cfg["tasks"], cfg["per_task"]
    steps = cfg["learned_steps"]
    flat = dict(max_iter=0, support_size=M, n_steps=steps, device=device, random_state=0)
    lf = LearnedFlowSampler(**learned_params_from_flat(flat)).fit(GaussianMixtureTasks(D))
    S = _data((B, M, D), 4)
    x0 = torch.from_numpy(_data((B, n, D), 5)).to(device)
    s = torch.from_numpy(S).to(device)
    fns = {
        "skflow": lambda: lf.sample(n, support=S),
        "bare": lambda: bare_learned(lf.model_, s, x0, steps),
    }
    return _ratio(fns, device, cfg["learned_rounds"])


def bench_prepared(device):
    r = bench_field.bench_averaged(2048, M, D, device)
    return {"skflow": r["prepared"], "bare": r["sdpa"], "ratio": r["prepared/sdpa"]}


def calibrate(cfg):
    """NumPy vs Torch backend time of ``sample(n)`` on the grid; per m a list of pairs."""
    timings, rows = {}, []
    for m in cfg["grid_m"]:
        S = _data((m, D), 6)
        pair = {}
        for backend in ("numpy", "torch"):
            pair[backend] = NWFlowSampler(
                sigma_min=SIGMA_MIN,
                backend=backend,
                random_state=0,
                solver=SolverOptions(n_steps=cfg["grid_steps"]),
            ).fit(S)
        for n in cfg["grid_n"]:
            fns = {b: (lambda s=s, n=n: s.sample(n)) for b, s in pair.items()}
            r = _ratio(fns, "cpu", cfg["grid_rounds"])
            timings.setdefault(m, []).append((r["numpy"], r["torch"]))
            rows.append((m, n, r["numpy"], r["torch"], r["ratio"]))
            print(f"calibration m={m} n={n}: {r}", flush=True)
    return timings, rows


# -- reporting --------------------------------------------------------------------------------
def _ms(sec):
    return bench_field._ms(sec)


def render_ratios(results, cfg):
    n, B, k = cfg["n"], cfg["tasks"], cfg["per_task"]
    what = {
        "one support": f"(a) `NWFlowSampler().sample({n})`, m = {M}, d = {D} "
        f"(auto picked {results['one support'].get('backend')}) vs bare SDPA loop",
        "many supports": f"(b) {B} tasks x {k} samples, `sample({k}, support=S)` vs one "
        "batched bare SDPA loop",
        "learned": f"(c) `LearnedFlowSampler` ({B} x {k}, batched call, "
        f"{cfg['learned_steps']} Heun steps) vs bare batched forward loop",
        "prepared": f"(d) `NWField` at (2048, {M}, {D}), mean over 25 t, vs one SDPA call",
    }
    lines = [
        "| comparison | skflow | bare | ratio | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for key, r in results.items():
        ok = "yes" if r["ratio"] <= TARGETS[key] else "**no**"
        lines.append(
            f"| {what[key]} | {_ms(r['skflow'])} | {_ms(r['bare'])} | {r['ratio']:.2f} "
            f"| <= {TARGETS[key]} | {ok} |"
        )
    return lines


def render_calibration(rows, ranges, cfg):
    lines = [
        "Backend calibration (`NWFlowSampler(backend=..., "
        f"solver=SolverOptions(n_steps={cfg['grid_steps']}))"
        ".sample(n)`, d = 16, float32; "
        f"NumPy is kept for a support size only if it is {AUTO_NUMPY_MARGIN}x faster than "
        "Torch at every n):",
        "",
        "| m | n | NumPy | Torch | NumPy/Torch |",
        "|---|---|---|---|---|",
    ]
    for m, n, tn, tt, ratio in rows:
        lines.append(f"| {m} | {n} | {_ms(tn)} | {_ms(tt)} | {ratio:.2f} |")
    in_code = code_table()
    same = tuple(ranges) == in_code
    lines += [
        "",
        f"Result for `skflow/_array.py`: `AUTO_NUMPY_SUPPORT_CPU = {ranges!r}` "
        f"({'the table in the code' if same else '**differs from the code**, which has '}"
        f"{'' if same else repr(in_code)}).",
    ]
    return lines


def render(results, calibration, cfg, command, info, load, elapsed):
    gpu = f", {info['gpu']}" if "gpu" in info else ""
    lines = [
        f"Command: `{command}` (total {elapsed:.0f} s). Machine: {info['cpu']}, "
        f"{info['cores']} cores ({info['torch_threads']} Torch threads){gpu}; torch "
        f"{info['torch']}, Python {info['python']}; load average (1/5/15 min) {load[0]} "
        f"before and {load[1]} after the run. Heun, {cfg['steps']} steps, float32; medians "
        f"of per-round ratios over {cfg['rounds']} interleaved rounds.",
        "",
    ]
    lines += render_ratios(results, cfg)
    if calibration is not None:
        lines += [""] + render_calibration(*calibration, cfg)
    return "\n".join(lines)


def write_docs(device, text, threads=None, path=DOCS):
    """Replace this device's (and thread count's) block of the small-support section."""
    kind = ("cuda" if device.startswith("cuda") else "cpu") + (
        f"-threads{threads}" if threads else ""
    )
    start, end = f"<!-- bench-small:{kind}:start -->", f"<!-- bench-small:{kind}:end -->"
    block = f"{start}\n{text}\n{end}"
    doc = path.read_text() if path.exists() else ""
    if start in doc and end in doc:
        doc = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: block, doc, flags=re.S)
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    path.write_text(doc)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: checks the script")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    ap.add_argument("--write-docs", action="store_true", help="update docs/performance.md")
    ap.add_argument("--docs-path", type=Path, default=DOCS, help="file --write-docs updates")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("CUDA is not available")
    cfg = QUICK if args.quick else FULL
    t0, load0 = time.perf_counter(), "{:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg())
    results = {}
    for key, fn in (
        ("one support", lambda: bench_one_support(cfg, device)),
        ("many supports", lambda: bench_many_supports(cfg, device)),
        ("learned", lambda: bench_learned(cfg, device)),
        ("prepared", lambda: bench_prepared(device)),
    ):
        results[key] = fn()
        print(f"{key}: {results[key]}", flush=True)
    calibration = None
    if device == "cpu":  # on CUDA backend="auto" is always Torch
        timings, rows = calibrate(cfg)
        calibration = (rows, numpy_support_ranges(timings))
    load1 = "{:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg())
    command = "python benchmarks/bench_small_support.py" + (" --quick" if args.quick else "")
    command += (f" --threads {args.threads}" if args.threads else "") + f" --device {device}"
    command += " --write-docs" if args.write_docs else ""
    info = bench_field.machine(device)
    text = render(
        results, calibration, cfg, command, info, (load0, load1), time.perf_counter() - t0
    )
    print("\n" + text)
    if args.write_docs:
        write_docs(device, text, args.threads, path=args.docs_path)
        print(f"\nwrote {args.docs_path}")


if __name__ == "__main__":
    main()
