"""``benchmarks/gpu_check.py``, the prepared GPU device check, tested on the CPU.

Without CUDA the script must exit at once; its ``--self-test`` runs every step on tiny CPU
shapes, so the subprocess, time cap, JSON, docs-fragment and ``--apply`` code paths are known
to work before a GPU run. The GPU numbers themselves only come from a GPU.

The three tests of the ``--self-test`` run are marked ``slow`` (the run starts a Python per
step: about 45 s on a loaded 2-core machine); run them with ``python -m pytest -m slow
tests/project/test_gpu_check.py`` before a GPU check. The rest (exit without CUDA, time cap, crash
isolation, ``--apply`` markers, the reported rates and targets) run by default.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _load()


def _run(*args, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        cwd=ROOT,
    )


DOC = "# Page\n\nbefore\n\n" + check.START + "\nold GPU text\n" + check.END + "\n\nafter\n"


@pytest.fixture(scope="module")
def self_test(tmp_path_factory):
    """One ``--self-test`` run shared by the tests below: (output folder, completed process)."""
    out = tmp_path_factory.mktemp("gpu_check") / "out"
    return out, _run(out, "--self-test", "--budget-s", 400, timeout=450)


def test_exits_at_once_without_cuda(tmp_path):
    """``CUDA_VISIBLE_DEVICES=""`` hides any GPU, so this runs on GPU machines too."""
    out = tmp_path / "out"
    t0 = time.perf_counter()
    res = _run(out, env={"CUDA_VISIBLE_DEVICES": ""}, timeout=120)
    assert res.returncode == check.EXIT_NO_CUDA == 2
    assert "CUDA is not available" in res.stderr and "--self-test" in res.stderr
    assert not out.exists()
    assert time.perf_counter() - t0 < 60  # the time of importing torch, nothing run


@pytest.mark.slow
def test_self_test_runs_every_step(self_test):
    out, res = self_test
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["self_test"] is True
    assert [r["name"] for r in summary["steps"]] == [name for name, _ in check.STEPS]
    for rec in summary["steps"]:
        if rec["name"] in check.SELF_TEST_SKIPS:
            assert rec["status"] == "skipped (self-test)"
            continue
        assert rec["status"] == "ok", rec
        assert (out / rec["log"]).read_text().startswith("$ ")
        assert 0 < rec["seconds"] <= rec["timeout_s"]
    results = {r["name"]: r.get("results") for r in summary["steps"]}
    assert results["tests_cuda"]["tests"] >= 1 and results["tests_cuda"]["failed"] == 0
    assert results["bench_field"]["rows"][0]["shape"] == [256, 256, 8]
    assert results["sampling"]["seconds"] > 0 and results["sampling"]["big_seconds"] > 0
    train = results["train_plain"]
    assert train["n_iter"] == check.TRAIN[True]["max_iter"] and train["steps_per_s_steady"] > 0
    assert train["projected_100k_s"] == pytest.approx(1e5 / train["steps_per_s_steady"])
    # issue 55: the batches were drawn on the (CPU) device, and one draw was timed
    assert train["task_draws"] == "device" and train["device_draw_s"] > 0
    share = train["device_draw_s"] * train["steps_per_s_steady"]
    assert train["draw_share"] == pytest.approx(share)


@pytest.mark.slow
def test_self_test_writes_the_docs_fragment(self_test):
    out, _ = self_test
    section = (out / "gpu_section.md").read_text()
    assert section.startswith("**CPU self-test of the check (tiny shapes): not a GPU")
    assert "| target | measured | met |" in section and "| train_plain | False | False |" in section
    assert "| n, m, d | field |" in section  # the bench_field tables are embedded
    assert "| train_plain | device |" in section  # the task-draw table
    page = (out / "performance.md").read_text()
    assert check.extract_section(page) == section.strip()
    assert "<!-- bench:cpu:start -->" in page  # the rest of the page is kept


@pytest.mark.slow
def test_apply_refuses_a_self_test_then_writes_only_between_the_markers(self_test, tmp_path):
    out, _ = self_test
    docs = tmp_path / "performance.md"
    docs.write_text(DOC)
    res = _run("--apply", out, "--docs", docs)
    assert res.returncode == 2 and "self-test" in res.stderr
    assert docs.read_text() == DOC
    res = _run("--apply", out, "--docs", docs, "--allow-self-test")
    assert res.returncode == 0, res.stderr
    section = (out / "gpu_section.md").read_text().strip()
    assert docs.read_text() == DOC.replace("old GPU text", section)


def test_apply_needs_the_markers(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"self_test": False}))
    (out / "gpu_section.md").write_text("new\n")
    docs = tmp_path / "performance.md"
    docs.write_text("no markers here\n")
    res = _run("--apply", out, "--docs", docs)
    assert res.returncode == 2 and "bench:cuda:start" in res.stderr
    assert docs.read_text() == "no markers here\n"
    res = _run("--apply", tmp_path / "missing", "--docs", docs)
    assert res.returncode == 2 and "cannot read" in res.stderr


def test_time_cap_dumps_the_stack_and_kills(tmp_path, monkeypatch):
    # the script must set these itself, whatever the calling environment has
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    monkeypatch.delenv("PYTHONFAULTHANDLER", raising=False)
    log = tmp_path / "hang.log"
    code = "print('up', 6 * 7); import time; time.sleep(60)"  # prints what argv does not hold
    t0 = time.perf_counter()
    rec = check.run_command([sys.executable, "-c", code], log, timeout=8)  # startup under load
    assert rec["status"] == "timeout" and rec["rc"] is None
    assert time.perf_counter() - t0 < 8 + check.ABORT_GRACE_S + 10
    text = log.read_text()
    # unbuffered output survives the kill, and the fault handler says where it hung
    assert "up 42" in text and 'File "<string>", line 1' in text


def test_a_crash_loses_only_its_step(tmp_path, capsys):
    argv = {
        "crash": [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"],
        "fine": [sys.executable, "-c", "print('fine')"],
    }
    (tmp_path / "fine.json").write_text('{"stale": "numbers of an earlier run"}')
    summary = {"steps": [], "skipped": {}, "self_test": True}
    deadline = time.perf_counter() + 120
    check.run_steps([("crash", 60), ("fine", 60)], tmp_path, summary, deadline, argv.get, False)
    status = {r["name"]: r["status"] for r in summary["steps"]}
    assert status == {"crash": "crashed (SIGSEGV)", "fine": "ok"}
    assert "Segmentation fault" in (tmp_path / "crash.log").read_text()
    assert summary["steps"][1]["results"] is None  # never an earlier run's numbers
    assert json.loads((tmp_path / "summary.json").read_text())["steps"][1]["name"] == "fine"
    # no budget left: the step is recorded as skipped, not started
    summary = {"steps": [], "skipped": {"crash": "--skip"}, "self_test": True}
    check.run_steps(
        [("crash", 60), ("fine", 60)], tmp_path, summary, time.perf_counter(), argv.get, False
    )
    assert [r["status"] for r in summary["steps"]] == [
        "skipped (--skip)",
        "skipped (budget: 0 s left)",
    ]


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.test_a" name="test_gpu"><skipped type="pytest.skip"
 message="CUDA is not available">skip</skipped></testcase>
<testcase classname="tests.test_a" name="test_other"><skipped type="pytest.skip"
 message="needs matplotlib">skip</skipped></testcase>
<testcase classname="tests.test_b" name="test_bad"><failure message="boom">x</failure></testcase>
</testsuite></testsuites>"""


def test_junit_counts_and_skips_for_lack_of_cuda_fail_when_cuda_is_visible(tmp_path):
    path = tmp_path / "r.xml"
    path.write_text(JUNIT)
    res = check.parse_junit(path)
    assert (res["tests"], res["passed"], res["failed"], res["skipped"]) == (4, 1, 1, 2)
    assert res["failed_tests"] == ["tests.test_b::test_bad"]
    record = {"status": "ok", "rc": 0}
    check.judge_tests(record, res, cuda_visible=False)
    assert record == {"status": "ok", "rc": 0}
    check.judge_tests(record, res, cuda_visible=True)
    assert record["status"] == "failed" and record["note"].startswith("1 tests skipped")
    record = {"status": "failed", "rc": 5}
    check.judge_tests(record, None, cuda_visible=False)
    assert record["note"] == "no tests collected"


def test_steady_rate_excludes_the_warm_up():
    starts = [0.0, 40.0] + [40.0 + 0.1 * k for k in range(1, 9)]  # step 0 compiles for 40 s
    assert check.steady_rate(starts, skip=2) == pytest.approx(10.0)
    assert check.steady_rate(starts, skip=0) == pytest.approx(9 / 40.8)
    assert check.steady_rate(starts[:3], skip=2) is None


def test_timed_tasks_stamps_every_draw():
    from skflow.tasks import GaussianMixtureTasks

    tasks = check.TimedTasks(GaussianMixtureTasks(n_features=3))
    supports, queries = tasks.sample_tasks(2, 5, 4, random_state=0)
    tasks.sample_tasks(2, 5, 4, random_state=1)
    assert supports.shape == (2, 5, 3) and queries.shape == (2, 4, 3)
    assert tasks.n_features == 3 and len(tasks.stamps) == 2
    assert tasks.stamps[0] <= tasks.stamps[1]
    assert tasks.device_draws  # the training loop draws on the device through the wrapper
    S, _ = tasks.sample_tasks(2, 5, 4, random_state=0, device="cpu")
    assert tuple(S.shape) == (2, 5, 3) and len(tasks.stamps) == 3
    assert check.device_draw_seconds(tasks.source, (2, 5, 4), "cpu", repeats=2) > 0


def test_draw_rows():
    ok = {"steps_per_s_overall": 50.0, "steps_per_s_steady": 60.0, "task_draws": "device"}
    ok.update(device_draw_s=0.001, draw_share=0.06)
    slow = {**ok, "steps_per_s_steady": None, "device_draw_s": 0.004, "draw_share": 0.2}
    rows = check.draw_rows(
        _summary(
            train_plain={"status": "ok", "seconds": 30.0, "results": ok},
            train_mixed={"status": "ok", "seconds": 30.0, "results": slow},
        )
    )
    assert rows[0].startswith("| variant | batches drawn |") and "<= 10%" in rows[0]
    assert rows[2] == "| train_plain | device | 1.0 ms | 6.0%: yes | 60.0: yes |"
    assert rows[3] == "| train_mixed | device | 4.0 ms | 20.0%: **no** | 50.0: **no** |"
    assert "not measured (train_compile did not run)" in rows[4]


def _summary(**steps):
    base = {"self_test": False, "command": "c", "elapsed_s": 1.0, "budget_s": 480.0}
    return {**base, "steps": [{"name": n, "log": f"{n}.log", **r} for n, r in steps.items()]}


def test_targets_follow_the_measurements():
    cfg = check.SAMPLING[False]
    samp = {"seconds": 12.5, "big_seconds": 4.0, "big_small_n": cfg["big_n"] // 10}
    samp.update(big_small_peak=300 * 2**20, big_peak=310 * 2**20, dense_nm_float32_bytes=4e10)
    rows = check.target_rows(
        _summary(
            bench_field={"status": "failed", "seconds": 3.0},
            sampling={"status": "ok", "seconds": 20.0, "results": samp},
        )
    )
    assert all("not measured (bench_field: failed, see `bench_field.log`)" in r for r in rows[:2])
    assert rows[2].endswith("| 12.50 s | **no** |")
    assert rows[3].endswith("| yes |") and "310.0 MiB vs 300.0 MiB" in rows[3]
    samp.update(seconds=9.0, big_peak=2 * samp["big_small_peak"])
    bench = {"rows": [{"shape": [8192, 8192, 64], "field": 0.03, "sdpa": 0.01, "field/sdpa": 3.0}]}
    rows = check.target_rows(
        _summary(
            bench_field={"status": "ok", "seconds": 3.0, "results": bench},
            sampling={"status": "ok", "seconds": 20.0, "results": samp},
        )
    )
    assert "| 33% (field 30.0 ms, SDPA 10.0 ms) | **no** |" in rows[0]
    assert rows[2].endswith("| 9.00 s | yes |") and rows[3].endswith("| **no** |")
    # a step stopped at its cap keeps the part it measured before
    partial = {"status": "timeout", "seconds": 90.0, "results": {"seconds": 7.0}}
    rows = check.target_rows(_summary(sampling=partial))
    assert rows[2].endswith("| 7.00 s | yes |")
    assert rows[3].endswith("| not measured (sampling: timeout, see `sampling.log`) | - |")


def test_unknown_steps_are_refused():
    assert check.selected("train_mixed", ["train"]) is False
    assert check.selected("tests_rest", ["train", "tests_cuda"]) is True
    with pytest.raises(SystemExit):
        check.parse_args(["out", "--skip", "nonsense"])


def test_training_rows():
    steady = {"steps_per_s_overall": 8.0, "steps_per_s_steady": 20.0, "peak_bytes": 2**30}
    steady["projected_100k_s"] = 5000.0
    no_log = {**steady, "steps_per_s_steady": None, "projected_100k_s": 12500.0}
    rows = check.training_rows(
        _summary(
            train_plain={"status": "ok", "seconds": 30.0, "results": steady},
            train_mixed={"status": "ok", "seconds": 30.0, "results": no_log},
            train_compile={"status": "timeout", "seconds": 90.0},
        )
    )
    assert rows[2] == "| train_plain | False | False | 20.0 | 8.0 | 1.39 h | 1.39x | 1024.0 MiB |"
    assert "| - | 8.0 | 3.47 h (whole-fit rate) | 3.47x |" in rows[3]
    assert "not measured (train_compile: timeout, see `train_compile.log`)" in rows[4]
    assert "not measured (train_compile_mixed did not run)" in rows[5]
