#!/usr/bin/env python3
"""The prepared GPU device check: one command that exercises every CUDA path of skflow.

Usage::

    python3 benchmarks/gpu_check.py OUTDIR [--budget-s 480] [--skip STEP ...] [--maxfail N]
    python3 benchmarks/gpu_check.py OUTDIR --self-test      # tiny shapes on the CPU (CI)
    python benchmarks/gpu_check.py --apply OUTDIR [--docs PATH] [--allow-self-test]

On a machine with a CUDA GPU it runs, each step in its own subprocess with a time cap (so one
crash or hang loses only that step), within ``--budget-s`` seconds in all:

1. ``tests_cuda``: the CUDA-marked tests (``pytest -m cuda``), stopping at the first failure
   (``--maxfail``); a CUDA test skipped although CUDA is visible counts as a failure;
2. ``bench_field``: ``benchmarks/bench_field.py --device cuda --write-docs`` (every shape,
   (65536, 65536, 64) included), the field/SDPA ratios;
3. ``sampling``: ``NWFlowSampler`` with n = m = 65536, d = 64, float32, Heun with 100 steps
   (target: under 10 s), then n = 10^5 and 10^6 queries against m = 10^4 (10 Heun steps) with
   the peak device memory of each (``torch.cuda.max_memory_allocated``; target: it does not
   grow with n);
4. ``train_plain``, ``train_mixed``, ``train_compile``, ``train_compile_mixed``: 200 training
   steps of ``LearnedFlowSampler(**LearnedFlowSampler.paper_config(), device="cuda")`` on
   ``GaussianMixtureTasks(n_features=16)``, without and with ``mixed_precision`` and
   ``compile``: steps/s and the projected time of 100k steps (the paper reports about 1 h per
   100k steps on an RTX 4090), with every batch of tasks drawn in Torch on the GPU (issue 55:
   ``SKFLOW_TASK_DRAWS=device``), and the time of one such draw (synchronised, the
   median of 10) as a share of a step (targets: at most 10 % of a step, at least 56 steps/s);
5. ``tests_rest``: the rest of the test suite (``-m "not slow and not cuda"``) with CUDA
   visible, in the time left;

then writes under OUTDIR: one ``STEP.log`` per step, ``summary.json`` (rewritten after every
step, so a run killed from outside keeps what it measured), ``gpu_section.md`` (the GPU
section of ``docs/performance.md``) and ``performance.md`` (a copy of the docs page with that
section replaced). ``--apply OUTDIR``, run later in the repository, copies the section into
``docs/performance.md`` (only between ``<!-- bench:cuda:start -->`` and
``<!-- bench:cuda:end -->``).

Every subprocess runs with ``PYTHONUNBUFFERED=1``: its output goes straight to its log file,
and a child killed at its time cap (or crashing in native code) would otherwise lose the
block-buffered tail of that log, the lines that say where it stopped. ``PYTHONFAULTHANDLER=1``
makes a crashing child print its Python traceback; at the time cap a child first gets
``SIGABRT`` (the fault handler then dumps every thread's stack into the log), then the whole
process group is killed.

Without CUDA it exits at once with status 2, unless ``--self-test``: every step then runs on
the CPU on tiny shapes and one thread (``tests_cuda`` only on
``tests/project/test_cuda_loud.py``, one training variant; ``SELF_TEST_SKIPS`` lists the steps
it leaves out), so that the script's
own code paths (subprocesses, JSON, the docs fragment, ``--apply``) are tested in CI.
A self-test fragment is refused by ``--apply`` unless ``--allow-self-test`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from skflow import SolverOptions

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "performance.md"
START, END = "<!-- bench:cuda:start -->", "<!-- bench:cuda:end -->"
EXIT_NO_CUDA = 2

#: (step, time cap in seconds), in the order they run: measurements before the long tail of
#: the test suite, which takes whatever budget is left.
STEPS = [
    ("tests_cuda", 90),
    ("bench_field", 150),
    ("sampling", 90),
    ("train_plain", 60),
    ("train_mixed", 60),
    ("train_compile", 100),
    ("train_compile_mixed", 100),
    ("tests_rest", 300),
]
TRAIN_VARIANTS = {  # step -> (mixed_precision, compile)
    "train_plain": (False, False),
    "train_mixed": (True, False),
    "train_compile": (False, True),
    "train_compile_mixed": (True, True),
}
# Steps the self-test leaves out: they share their code path with a step it runs (on the CPU
# the training flags are ignored anyway), and the self-test runs in CI on shared cores.
SELF_TEST_SKIPS = ("train_mixed", "train_compile", "train_compile_mixed", "tests_rest")
MIN_STEP_S = 15  # a step is not started with less time than this left
REPORT_RESERVE_S = 5  # kept back from the budget to write the report
ABORT_GRACE_S = 5  # between SIGABRT (stack dump) and SIGKILL of a step at its cap

TARGETS = {"rate": 0.5, "sampling_s": 10.0, "draw_share": 0.10, "steps_per_s": 56.0}
DRAW_REPEATS = 10  # synchronised device draws timed after the fit (their median)
PAPER_S_PER_100K = 3600.0  # the paper: about 1 h per 100k steps on an RTX 4090
RATE_SHAPES = {False: [(8192, 8192, 64), (65536, 65536, 64)], True: [(256, 256, 8)]}

#: Skip reasons that mean "no CUDA here": with CUDA visible, such a skip is a failure.
NO_CUDA_SKIP = re.compile(r"cuda (is )?not available|needs? a cuda|requires? cuda|no cuda", re.I)

# Real run and self-test sizes of the sampling and training steps.
SAMPLING = {
    False: {"n": 65536, "m": 65536, "d": 64, "steps": 100, "big_n": 10**6, "big_m": 10**4},
    True: {"n": 512, "m": 512, "d": 8, "steps": 10, "big_n": 8200, "big_m": 64},
}
BIG_STEPS = 10
TRAIN = {
    False: {"n_features": 16, "max_iter": 200},
    True: {
        "n_features": 2,
        "max_iter": 4,
        "d_model": 16,
        "n_layers": 1,
        "batch_tasks": 4,
        "support_size": 10,
        "n_targets": 16,
    },
}


# -- step selection and subprocesses ----------------------------------------------------------
def selected(name: str, skip: list[str]) -> bool:
    """Whether step ``name`` runs: ``--skip train`` skips every ``train_*`` step.

    Examples
    --------
    >>> selected("train_mixed", ["train"]), selected("tests_rest", ["train"])
    (False, True)
    """
    return not any(name == s or name.startswith(s + "_") for s in skip)


def child_env(self_test: bool = False) -> dict:
    """Environment of every step (see the module docstring for why). The self-test's tiny
    shapes run on one thread: more only oversubscribe a shared CI machine."""
    env = dict(os.environ)
    if self_test:
        env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _no_core_dumps():  # the SIGABRT at a time cap must not write a core file into the tree
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_command(argv: list[str], log: Path, timeout: float, self_test: bool = False) -> dict:
    """Run ``argv`` with its output in ``log``, at most ``timeout`` seconds.

    Returns ``{"status", "rc", "seconds"}``; status is ``"ok"``, ``"failed"``, ``"timeout"``
    or ``"crashed (SIGNAME)"``.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "wb") as fh:
        fh.write(("$ " + " ".join(argv) + "\n").encode())
        fh.flush()
        proc = subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=child_env(self_test),
            start_new_session=True,  # its own process group, killed as one at the cap
            preexec_fn=_no_core_dumps,
        )
        try:
            rc = proc.wait(timeout=max(timeout, 0.1))
            status = "ok" if rc == 0 else "failed"
            if rc < 0:
                status = f"crashed ({signal.Signals(-rc).name})"
        except subprocess.TimeoutExpired:
            rc, status = None, "timeout"
            _stop(proc)
    return {"status": status, "rc": rc, "seconds": round(time.perf_counter() - t0, 1)}


def _stop(proc: subprocess.Popen) -> None:
    """SIGABRT first (the fault handler dumps the stacks), then SIGKILL to the group."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGABRT)
    try:
        proc.wait(timeout=ABORT_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# -- the test steps -----------------------------------------------------------------------------
def pytest_argv(name: str, out: Path, self_test: bool, maxfail: int) -> list[str]:
    marker = "cuda" if name == "tests_cuda" else "not slow and not cuda"
    # the script's own CPU self-test is not what a GPU run is for
    paths = ["tests/project/test_cuda_loud.py"] if self_test else ["tests"]
    paths += [] if self_test else ["--ignore=tests/project/test_gpu_check.py"]
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rfEs",
        "-p",
        "no:cacheprovider",
        f"--maxfail={maxfail}",
        "--continue-on-collection-errors",
        "-o",
        "faulthandler_timeout=60",
        "-m",
        marker,
        f"--junitxml={out / (name + '.xml')}",
        *paths,
    ]


def parse_junit(path: Path) -> dict:
    """Counts of a pytest JUnit XML report, the failed test ids and the skip reasons."""
    counts = {"tests": 0, "passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failed, skips = [], {}
    for case in ET.parse(path).getroot().iter("testcase"):
        counts["tests"] += 1
        tags = {child.tag: child for child in case}
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        if "failure" in tags or "error" in tags:
            counts["failed" if "failure" in tags else "errors"] += 1
            failed.append(test_id)
        elif "skipped" in tags:
            counts["skipped"] += 1
            reason = tags["skipped"].get("message", "")
            skips[reason] = skips.get(reason, 0) + 1
        else:
            counts["passed"] += 1
    return {**counts, "failed_tests": failed[:20], "skip_reasons": skips}


def judge_tests(record: dict, results: dict | None, cuda_visible: bool) -> None:
    """Turn a pytest run into a step status: exit code 5 (nothing collected) and, with CUDA
    visible, any skip for lack of CUDA are failures, not passes."""
    if record["rc"] == 5:
        record["status"] = "failed"
        record["note"] = "no tests collected"
    if results is None:
        return
    no_cuda = sum(k for r, k in results["skip_reasons"].items() if NO_CUDA_SKIP.search(r))
    if cuda_visible and no_cuda:
        record["status"] = "failed"
        record["note"] = f"{no_cuda} tests skipped for lack of CUDA although CUDA is visible"


# -- the sampling and training steps (run as `gpu_check.py --_step NAME OUTDIR`) --------------
def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed_sample(sampler, n: int, device: str) -> tuple[float, int | None]:
    """Seconds of ``sampler.sample(n)`` and its peak extra device memory (CUDA only)."""
    import numpy as np
    import torch

    cuda = device.startswith("cuda")
    _sync(device)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    out = sampler.sample(n)
    _sync(device)
    seconds = time.perf_counter() - t0
    if out.shape[0] != n or out.dtype != np.float32 or not np.isfinite(out).all():
        raise RuntimeError(f"bad sample: shape {out.shape}, dtype {out.dtype}")
    peak = int(torch.cuda.max_memory_allocated() - base) if cuda else None
    return seconds, peak


def step_sampling(self_test: bool, save=lambda res: None) -> dict:
    """Time n = m sampling, then peak memory at 10x more queries against a smaller support.

    ``save(results)`` is called after each part, so a time cap hit in the second part keeps
    the first one's numbers.
    """
    import numpy as np

    from skflow import NWFlowSampler

    cfg, device = SAMPLING[self_test], "cpu" if self_test else "cuda"
    rng = np.random.default_rng(0)

    def sampler(m, steps):
        support = rng.standard_normal((m, cfg["d"])).astype(np.float32)
        est = NWFlowSampler(
            sigma_min=0.01,
            solver=SolverOptions("heun", n_steps=steps),
            backend="torch",
            device=device,
        )
        est.set_params(random_state=0).fit(support)
        est.sample(8)  # warm-up: kernels, support geometry
        return est

    seconds, _ = _timed_sample(sampler(cfg["m"], cfg["steps"]), cfg["n"], device)
    res = {"device": device, "config": cfg, "big_steps": BIG_STEPS, "seconds": seconds}
    save(res)
    big = sampler(cfg["big_m"], BIG_STEPS)
    res["big_small_n"] = cfg["big_n"] // 10
    res["big_small_seconds"], res["big_small_peak"] = _timed_sample(big, res["big_small_n"], device)
    res["big_seconds"], res["big_peak"] = _timed_sample(big, cfg["big_n"], device)
    res["dense_nm_float32_bytes"] = 4 * cfg["big_n"] * cfg["big_m"]
    save(res)
    print(json.dumps(res))
    return res


class TimedTasks:
    """A task source that notes when each batch is drawn: ``fit`` draws one batch to estimate
    the coordinate scale, then one at the start of every training step."""

    def __init__(self, source):
        self.source = source
        self.n_features = source.n_features
        self.stamps: list[float] = []
        self.draw_seconds: list[float] = []

    @property
    def device_draws(self) -> bool:
        """The source's: the training loop then draws on the device through this wrapper."""
        return bool(getattr(self.source, "device_draws", False))

    def sample_tasks(self, *args, **kwargs):
        self.stamps.append(time.perf_counter())
        batch = self.source.sample_tasks(*args, **kwargs)
        # host time of the draw: a NumPy draw's whole cost (the device waits), a device
        # draw's kernel launches only (its device time: device_draw_seconds)
        self.draw_seconds.append(time.perf_counter() - self.stamps[-1])
        return batch


def device_draw_seconds(source, shape: tuple, device: str, repeats: int = DRAW_REPEATS) -> float:
    """Median seconds of one batch ``shape`` (tasks, support, targets) drawn in Torch on
    ``device``, synchronised before and after (after one warm-up draw)."""
    import numpy as np

    rng = np.random.default_rng(0)
    source.sample_tasks(*shape, random_state=rng, device=device)
    seconds = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        source.sample_tasks(*shape, random_state=rng, device=device)
        _sync(device)
        seconds.append(time.perf_counter() - t0)
    return float(np.median(seconds))


def steady_rate(step_starts: list[float], skip: int) -> float | None:
    """Steps/s between the starts of step ``skip`` and of the last step (the first ``skip``
    steps hold the warm-up and, with ``compile``, the compilation).

    Examples
    --------
    >>> steady_rate([0.0, 30.0, 31.0, 32.0, 33.0], skip=1)  # step 0 compiled for 30 s
    1.0
    """
    if len(step_starts) < skip + 2 or step_starts[-1] <= step_starts[skip]:
        return None
    return (len(step_starts) - 1 - skip) / (step_starts[-1] - step_starts[skip])


def step_train(name: str, self_test: bool) -> dict:
    """Fit the paper configuration for a few hundred steps; rates and projected 100k time."""
    import torch

    from skflow import LearnedFlowSampler
    from skflow.samplers.options import learned_params_from_flat
    from skflow.tasks import GaussianMixtureTasks

    # every batch drawn where the model trains (the self-test: the same path on the CPU)
    os.environ["SKFLOW_TASK_DRAWS"] = "device"
    mixed, compiled = TRAIN_VARIANTS[name]
    cfg = dict(TRAIN[self_test])
    tasks = TimedTasks(GaussianMixtureTasks(n_features=cfg.pop("n_features")))
    device = "cpu" if self_test else "cuda"
    params = {**LearnedFlowSampler.paper_config(), **cfg, "random_state": 0}
    flat = {**params, "device": device, "mixed_precision": mixed, "compile": compiled}
    est = LearnedFlowSampler(**learned_params_from_flat(flat))
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    est.fit(tasks)
    starts = tasks.stamps[1:]  # the first draw is the scale estimate, before training
    if len(starts) != est.n_iter_:
        raise RuntimeError(f"{len(starts)} batch draws for {est.n_iter_} training steps")
    steady = steady_rate(starts, skip=est.n_iter_ // 4)
    overall = est.n_iter_ / est.training_time_
    shape = (est.training.batch_tasks, est.training.support_size, est.training.n_targets)
    draw_s = device_draw_seconds(tasks.source, shape, device)
    res = {
        "device": device,
        "mixed_precision": mixed,
        "compile": compiled,
        "n_features": tasks.n_features,
        "n_iter": est.n_iter_,
        "training_time_s": est.training_time_,
        "steps_per_s_overall": overall,
        "steps_per_s_steady": steady,
        "projected_from": "steady" if steady else "whole fit",
        "projected_100k_s": 1e5 / (steady or overall),
        "draw_s_per_step": sum(tasks.draw_seconds[1:]) / max(len(starts), 1),
        "task_draws": os.environ["SKFLOW_TASK_DRAWS"],
        "device_draw_s": draw_s,
        "draw_share": draw_s * (steady or overall),
        "final_loss": est.loss_curve_[-1],
        "peak_bytes": int(torch.cuda.max_memory_allocated()) if device == "cuda" else None,
    }
    print(json.dumps(res))
    return res


def run_child_step(name: str, out: Path, self_test: bool) -> None:
    def save(res):
        (out / f"{name}.json").write_text(json.dumps(res, indent=1))

    save(step_sampling(self_test, save) if name == "sampling" else step_train(name, self_test))


# -- orchestration ------------------------------------------------------------------------------
def step_argv(name: str, out: Path, self_test: bool, maxfail: int) -> list[str]:
    if name.startswith("tests_"):
        return pytest_argv(name, out, self_test, maxfail)
    if name == "bench_field":
        argv = [sys.executable, str(ROOT / "benchmarks" / "bench_field.py"), "--write-docs"]
        argv += ["--docs-path", str(out / "bench_field_docs.md")]
        argv += ["--json", str(out / "bench_field.json")]
        if self_test:
            return (
                argv
                + ["--device", "cpu", "--quick", "--shapes", "256,256,8"]
                + [
                    "--sampling-n",
                    "256",
                ]
            )
        return argv + ["--device", "cuda"]
    argv = [sys.executable, str(Path(__file__).resolve()), str(out), "--_step", name]
    return argv + (["--self-test"] if self_test else [])


def step_results(name: str, out: Path) -> dict | None:
    path = out / (f"{name}.xml" if name.startswith("tests_") else f"{name}.json")
    if not path.exists():
        return None
    try:
        return parse_junit(path) if name.startswith("tests_") else json.loads(path.read_text())
    except (ET.ParseError, json.JSONDecodeError) as exc:
        return {"unreadable": str(exc)}


def run_steps(steps, out: Path, summary: dict, deadline: float, argv_of, cuda_visible: bool):
    """Run ``steps`` (``(name, cap)`` pairs) in turn within ``deadline`` (perf_counter);
    each step's record is added to ``summary["steps"]`` and the summary is rewritten."""
    for name, cap in steps:
        left = deadline - time.perf_counter() - REPORT_RESERVE_S
        record = {"name": name, "log": f"{name}.log", "cap_s": cap}
        if name in summary["skipped"]:
            record["status"] = f"skipped ({summary['skipped'][name]})"
        elif left < MIN_STEP_S:
            record["status"] = f"skipped (budget: {max(left, 0):.0f} s left)"
        else:
            _clear_outputs(name, out)
            record["timeout_s"] = round(min(cap, left), 1)
            print(f"== {name} (cap {record['timeout_s']} s)", flush=True)
            log, cap_s = out / record["log"], record["timeout_s"]
            record.update(run_command(argv_of(name), log, cap_s, summary["self_test"]))
            record["results"] = step_results(name, out)
            if name.startswith("tests_"):
                judge_tests(record, record["results"], cuda_visible)
            _print_tail(out / record["log"])
            _echo(name, record["results"])
        print(f"== {name}: {record['status']}", flush=True)
        summary["steps"].append(record)
        write_json(out / "summary.json", summary)
    return summary


def _clear_outputs(name: str, out: Path) -> None:
    """Remove a step's result files of an earlier run in the same folder, so that a step
    that fails now is never reported with old numbers."""
    stale = [f"{name}.json", f"{name}.xml"]
    stale += ["bench_field_docs.md"] if name == "bench_field" else []
    for file in stale:
        (out / file).unlink(missing_ok=True)


def _echo(name: str, results: dict | None) -> None:
    """Print a step's headline numbers (the field/SDPA ratios, times, rates)."""
    if not results:
        return
    if name == "bench_field":
        for r in results.get("rows", []):
            print(f"   {tuple(r['shape'])}: field/SDPA {r['field/sdpa']:.2f}", flush=True)
    elif name == "sampling" or name.startswith("train_"):
        keep = ("seconds", "big_seconds", "big_peak", "steps_per_s_steady", "projected_100k_s")
        print("   " + json.dumps({k: results[k] for k in keep if k in results}), flush=True)


def _print_tail(log: Path, lines: int = 8) -> None:
    text = log.read_text(errors="replace").rstrip().splitlines()
    for line in text[-lines:]:
        print("   " + line[:200])


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1, default=str))


def machine_info() -> dict:
    """GPU name, memory and driver, torch/CUDA/cuDNN versions, Python, CPU cores, load."""
    import torch

    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu_cores": os.cpu_count(),
        "load_start": "{:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg()),
        "cuda_available": torch.cuda.is_available(),
    }
    if info["cuda_available"]:
        try:
            props = torch.cuda.get_device_properties(0)
            info["gpu"] = torch.cuda.get_device_name(0)
            info["gpu_memory_bytes"] = int(props.total_memory)
            info["cudnn"] = torch.backends.cudnn.version()
        except RuntimeError as exc:  # visible but broken: the steps will say more
            info["gpu_error"] = str(exc)
    smi = shutil.which("nvidia-smi")
    if smi and info["cuda_available"]:
        query = [smi, "--query-gpu=driver_version", "--format=csv,noheader"]
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            res = subprocess.run(query, capture_output=True, text=True, timeout=20)
            info["driver"] = res.stdout.strip().splitlines()[0] if res.stdout.strip() else None
    return info


# -- the docs fragment --------------------------------------------------------------------------
def _fmt_s(sec) -> str:
    return "-" if sec is None else (f"{sec * 1e3:.1f} ms" if sec < 1 else f"{sec:.2f} s")


def _fmt_b(b) -> str:
    return "-" if b is None else f"{b / 2**20:.1f} MiB"


def _verdict(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _results(summary: dict, name: str, partial: bool = False) -> dict | None:
    """A step's results if it succeeded (``partial``: whatever it saved before it stopped)."""
    for rec in summary["steps"]:
        if rec["name"] == name and (partial or rec.get("status") == "ok"):
            return rec.get("results")
    return None


def _status_of(summary: dict, name: str) -> str:
    for rec in summary["steps"]:
        if rec["name"] == name and "seconds" in rec:
            return f"not measured ({name}: {rec['status']}, see `{rec['log']}`)"
        if rec["name"] == name:
            return f"not measured ({name}: {rec['status']})"
    return f"not measured ({name} did not run)"


def target_rows(summary: dict) -> list[str]:
    """Rows of the targets table (field rate, sampling time, bounded memory)."""
    rows = []
    bench = _results(summary, "bench_field")
    by = {tuple(r["shape"]): r for r in bench["rows"]} if bench else {}
    for shape in RATE_SHAPES[summary["self_test"]]:
        what = f"field >= 50 % of the same-shape fused attention (SDPA) rate at {shape}"
        r = by.get(shape)
        if r is None:
            rows.append(f"| {what} | {_status_of(summary, 'bench_field')} | - |")
            continue
        rate = 1.0 / r["field/sdpa"]
        rows.append(
            f"| {what} | {rate:.0%} (field {_fmt_s(r['field'])}, SDPA {_fmt_s(r['sdpa'])}) "
            f"| {_verdict(rate >= TARGETS['rate'])} |"
        )
    samp = _results(summary, "sampling", partial=True) or {}
    cfg = SAMPLING[summary["self_test"]]
    what = (
        f"NWFlowSampler n = m = {cfg['n']}, d = {cfg['d']}, float32, Heun {cfg['steps']} steps "
        "under 10 s"
    )
    if "seconds" in samp:
        ok = samp["seconds"] < TARGETS["sampling_s"]
        rows.append(f"| {what} | {_fmt_s(samp['seconds'])} | {_verdict(ok)} |")
    else:
        rows.append(f"| {what} | {_status_of(summary, 'sampling')} | - |")
    rows.append(_memory_row(summary, samp, cfg))
    return rows


def _memory_row(summary: dict, samp: dict, cfg: dict) -> str:
    what = (
        f"n = {cfg['big_n']} queries, m = {cfg['big_m']} (Heun {BIG_STEPS} steps): peak device "
        f"memory does not grow with n (vs n = {cfg['big_n'] // 10})"
    )
    if "big_peak" not in samp:
        return f"| {what} | {_status_of(summary, 'sampling')} | - |"
    if samp["big_peak"] is None:
        return f"| {what} | {_fmt_s(samp['big_seconds'])}; memory n/a on the CPU | - |"
    ok = samp["big_peak"] <= 1.25 * samp["big_small_peak"] + 64 * 2**20
    dense = samp["dense_nm_float32_bytes"] / 2**30
    return (
        f"| {what} | {_fmt_b(samp['big_peak'])} vs {_fmt_b(samp['big_small_peak'])} (an n x m "
        f"float32 matrix: {dense:.0f} GiB); {_fmt_s(samp['big_seconds'])} | {_verdict(ok)} |"
    )


def training_rows(summary: dict) -> list[str]:
    rows = [
        "| variant | mixed_precision | compile | steps/s (steady) | steps/s (whole fit) "
        "| projected 100k steps | vs paper (~1 h per 100k on an RTX 4090) | peak memory |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, (mixed, compiled) in TRAIN_VARIANTS.items():
        r = _results(summary, name)
        if r is None:
            rows.append(f"| {name} | {mixed} | {compiled} | {_status_of(summary, name)} |||||")
            continue
        proj = r["projected_100k_s"]
        steady = "-" if r["steps_per_s_steady"] is None else f"{r['steps_per_s_steady']:.1f}"
        rows.append(
            f"| {name} | {mixed} | {compiled} | {steady} | {r['steps_per_s_overall']:.1f} "
            f"| {proj / 3600:.2f} h{' (whole-fit rate)' if steady == '-' else ''} "
            f"| {proj / PAPER_S_PER_100K:.2f}x "
            f"| {_fmt_b(r['peak_bytes'])} |"
        )
    return rows


def draw_rows(summary: dict) -> list[str]:
    """Rows of the task-draw table: where each variant drew its batches, one synchronised
    device draw, its share of a step and the two targets (share, rate)."""
    share_max, rate_min = TARGETS["draw_share"], TARGETS["steps_per_s"]
    rows = [
        f"| variant | batches drawn | one draw on the device | share of a step (<= "
        f"{share_max:.0%}) | steps/s >= {rate_min:.0f} |",
        "|---|---|---|---|---|",
    ]
    for name in TRAIN_VARIANTS:
        r = _results(summary, name)
        if r is None or "draw_share" not in r:
            rows.append(f"| {name} | {_status_of(summary, name)} ||||")
            continue
        rate = r["steps_per_s_steady"] or r["steps_per_s_overall"]
        rows.append(
            f"| {name} | {r['task_draws']} | {_fmt_s(r['device_draw_s'])} "
            f"| {r['draw_share']:.1%}: {_verdict(r['draw_share'] <= share_max)} "
            f"| {rate:.1f}: {_verdict(rate >= rate_min)} |"
        )
    return rows


def _machine_line(info: dict) -> str:
    if "gpu" in info:
        gpu = f"GPU {info['gpu']} ({info['gpu_memory_bytes'] / 2**30:.0f} GiB"
        gpu += f", driver {info['driver']})" if info.get("driver") else ")"
    else:
        gpu = "no GPU (CPU self-test)"
    return (
        f"Machine: {gpu}; torch {info['torch']}, CUDA {info['cuda']}, cuDNN "
        f"{info.get('cudnn', '-')}; Python {info['python']}; {info['cpu_cores']} CPU cores; load "
        f"average (1/5/15 min) {info['load_start']} at start."
    )


def render_section(summary: dict, bench_text: str | None) -> str:
    """The GPU section of docs/performance.md (without its markers)."""
    lines = []
    if summary["self_test"]:
        lines += ["**CPU self-test of the check (tiny shapes): not a GPU measurement.**", ""]
    lines += [
        f"Command: `{summary['command']}` (total {summary['elapsed_s']:.0f} s of a "
        f"{summary['budget_s']:.0f} s budget), copied here by `python benchmarks/gpu_check.py "
        "--apply OUT`; logs and `summary.json` in `OUT`.",
        "",
        _machine_line(summary["machine"]),
        "",
        "| step | status | seconds |",
        "|---|---|---|",
    ]
    for rec in summary["steps"]:
        res, status = rec.get("results") or {}, rec["status"]
        if "passed" in res:
            status += f" ({res['passed']} passed, {res['failed']} failed, {res['errors']} errors, "
            status += f"{res['skipped']} skipped)"
        status += f"; {rec['note']}" if rec.get("note") else ""
        lines.append(f"| {rec['name']} | {status} | {rec.get('seconds', '-')} |")
    lines += ["", "| target | measured | met |", "|---|---|---|", *target_rows(summary), ""]
    lines += training_rows(summary) + [""] + draw_rows(summary) + [""]
    train = TRAIN[summary["self_test"]]
    lines.append(
        "Training: `LearnedFlowSampler(**LearnedFlowSampler.paper_config())` for "
        f"{train['max_iter']} steps on `GaussianMixtureTasks(n_features={train['n_features']})`"
        f"; steady steps/s from the start of step {train['max_iter'] // 4} to the start of the "
        "last one (timed at each training batch draw, so warm-up and compilation are left "
        "out), whole-fit steps/s over `training_time_`; projected 100k steps: 100000 / steady "
        "steps/s."
    )
    draws = [
        f"{name} {r['draw_s_per_step'] * 1e3:.0f} ms"
        for name in TRAIN_VARIANTS
        if (r := _results(summary, name)) is not None and "draw_s_per_step" in r
    ]
    if draws:
        lines.append(
            "Host time of drawing each step's batch of tasks in the loop (device draws: the "
            "kernel launches), mean per step: " + ", ".join(draws) + ". One device draw: "
            f"the median of {DRAW_REPEATS} synchronised draws of the same batch after the fit; "
            "its share of a step: that time x steady steps/s."
        )
    if bench_text:
        lines += [
            "",
            "Field engine (`benchmarks/bench_field.py`, run by the check):",
            "",
            bench_text,
        ]
    return "\n".join(lines)


def replace_section(doc: str, section: str) -> str:
    """``doc`` with the text between the CUDA markers replaced by ``section``."""
    if doc.count(START) != 1 or doc.count(END) != 1 or doc.index(START) > doc.index(END):
        raise ValueError(f"the docs page must contain {START} ... {END} exactly once.")
    head, rest = doc.split(START, 1)
    tail = rest.split(END, 1)[1]
    return f"{head}{START}\n{section.strip()}\n{END}{tail}"


def extract_section(doc: str, kind: str = "cuda") -> str | None:
    """The text between ``<!-- bench:KIND:start -->`` and its end marker, or None."""
    start, end = f"<!-- bench:{kind}:start -->", f"<!-- bench:{kind}:end -->"
    if start not in doc or end not in doc:
        return None
    return doc.split(start, 1)[1].split(end, 1)[0].strip()


def write_report(out: Path, summary: dict) -> None:
    bench_docs = out / "bench_field_docs.md"
    kind = "cpu" if summary["self_test"] else "cuda"  # the device bench_field ran on
    bench_text = extract_section(bench_docs.read_text(), kind) if bench_docs.exists() else None
    section = render_section(summary, bench_text)
    (out / "gpu_section.md").write_text(section + "\n")
    if DOCS.exists():
        (out / "performance.md").write_text(replace_section(DOCS.read_text(), section))
    write_json(out / "summary.json", summary)
    print("\n" + section, flush=True)


# -- apply --------------------------------------------------------------------------------------
def apply(out: Path, docs: Path, allow_self_test: bool) -> int:
    """Copy ``OUT/gpu_section.md`` between the CUDA markers of ``docs``; 0 on success."""
    try:
        summary = json.loads((out / "summary.json").read_text())
        section = (out / "gpu_section.md").read_text()
    except (OSError, json.JSONDecodeError) as exc:
        print(f"gpu_check --apply: cannot read the check's output in {out}: {exc}", file=sys.stderr)
        return 2
    if summary.get("self_test") and not allow_self_test:
        print(
            f"gpu_check --apply: {out} holds a CPU self-test, not a GPU run; refusing to write "
            "it into the docs (pass --allow-self-test to do it anyway).",
            file=sys.stderr,
        )
        return 2
    try:
        docs.write_text(replace_section(docs.read_text(), section))
    except (OSError, ValueError) as exc:
        print(f"gpu_check --apply: {docs}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the GPU section of {docs}")
    return 0


# -- main ---------------------------------------------------------------------------------------
def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="output folder (logs, JSON, docs fragment)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="time budget of all steps")
    ap.add_argument("--skip", nargs="+", default=[], metavar="STEP", help="steps to skip")
    ap.add_argument("--maxfail", type=int, default=1, help="pytest --maxfail (1: stop at first)")
    ap.add_argument("--self-test", action="store_true", help="tiny shapes on the CPU")
    ap.add_argument("--apply", action="store_true", help="copy OUT's GPU section into the docs")
    ap.add_argument("--docs", type=Path, default=DOCS, help="docs page --apply writes")
    ap.add_argument("--allow-self-test", action="store_true", help="let --apply use a self-test")
    ap.add_argument("--_step", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    names = [name for name, _ in STEPS]
    unknown = [s for s in args.skip if not any(n == s or n.startswith(s + "_") for n in names)]
    if unknown:
        ap.error(f"unknown steps {unknown}; the steps are {names}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.apply:
        return apply(args.out, args.docs, args.allow_self_test)
    if args._step:
        run_child_step(args._step, args.out, args.self_test)
        return 0
    import torch

    if not args.self_test and not torch.cuda.is_available():
        print(
            "gpu_check: CUDA is not available on this machine (torch "
            f"{torch.__version__}); nothing was run. Run it on a machine with a CUDA GPU, or "
            "pass --self-test for the tiny CPU run.",
            file=sys.stderr,
        )
        return EXIT_NO_CUDA
    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    command = f"python3 benchmarks/gpu_check.py OUT --budget-s {args.budget_s:g}"
    command += (" --skip " + " ".join(args.skip)) if args.skip else ""
    command += f" --maxfail {args.maxfail}" if args.maxfail != 1 else ""
    command += " --self-test" if args.self_test else ""
    summary = {
        "command": command,
        "self_test": args.self_test,
        "budget_s": args.budget_s,
        "machine": machine_info(),
        "skipped": {n: "--skip" for n, _ in STEPS if not selected(n, args.skip)},
        "steps": [],
    }
    if args.self_test:
        summary["skipped"].update(dict.fromkeys(SELF_TEST_SKIPS, "self-test"))
    write_json(out / "summary.json", summary)
    cuda_visible = summary["machine"]["cuda_available"]
    run_steps(
        STEPS,
        out,
        summary,
        t0 + args.budget_s,
        lambda name: step_argv(name, out, args.self_test, args.maxfail),
        cuda_visible,
    )
    summary["elapsed_s"] = time.perf_counter() - t0
    write_report(out, summary)
    ok = [r["name"] for r in summary["steps"] if r["status"] == "ok"]
    bad = [r["name"] for r in summary["steps"] if r["status"] != "ok"]
    bad = [n for n in bad if n not in summary["skipped"]]
    print(f"\ngpu_check: ok: {ok}; not ok: {bad}; skipped: {sorted(summary['skipped'])}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
