"""``benchmarks/bench_field.py --default-path`` (issue 65), on a tiny shape: it times the
estimator's default ``velocity`` call against SDPA and two matmuls and prints the three ratios,
which are the per-round ratios of the times it measured (not a timing test)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_field.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_field_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load()


def test_default_path_ratios_are_those_of_its_rounds(monkeypatch):
    rounds = {}
    timeit = bench.timeit_interleaved

    def recorded(fns, device, repeats, warmup=1):
        med, times = timeit(fns, device, repeats, warmup)
        rounds.update(times)
        return med, times

    monkeypatch.setattr(bench, "timeit_interleaved", recorded)
    row = bench.bench_default_path(64, 32, 4, "cpu", repeats=3)
    assert row["shape"] == (64, 32, 4) and row["repeats"] == 3
    for a, b in (("velocity", "sdpa"), ("velocity", "matmul"), ("sdpa", "matmul")):
        expected = np.median(np.asarray(rounds[a]) / np.asarray(rounds[b]))
        assert row[f"{a}/{b}"] == expected
        assert row[a] == np.median(rounds[a])


def test_default_path_prints_the_three_ratios(capsys):
    bench.main(["--default-path", "--shapes", "64,32,4"])
    out = capsys.readouterr().out
    line = next(li for li in out.splitlines() if li.startswith("default path (64, 32, 4)"))
    for name in ("velocity/sdpa", "velocity/matmul", "sdpa/matmul"):
        assert re.search(re.escape(name) + r" \d+\.\d\d", line), (name, line)
    assert "load average at start" in out and "load average at end" in out


def test_back_to_back_ratio_is_that_of_consecutive_calls(monkeypatch):
    """The back-to-back column: each contender timed in consecutive calls of its own."""
    runs = {}
    back = bench._back_to_back

    def recorded(fn, device, repeats):
        runs.setdefault("order", []).append(fn)
        runs[len(runs["order"])] = back(fn, device, repeats)
        return runs[len(runs["order"])]

    monkeypatch.setattr(bench, "_back_to_back", recorded)
    row = bench.bench_default_path(64, 32, 4, "cpu", repeats=3)
    assert row["loop velocity/sdpa"] == runs[1] / runs[2]


def test_targets_line_reads_the_row_and_the_broadcast_run():
    row = {"velocity/sdpa": 1.25, "loop velocity/sdpa": 1.0, "velocity/matmul": 0.5}
    line = bench._targets(row, {"speedup": 61.2})
    assert "0.80x interleaved, 1.00x back to back (**not met**, met)" in line
    assert "2.00x (met)" in line and "61x (met)" in line
