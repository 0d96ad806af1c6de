"""The experiments' command line: --help, --smoke, the end-of-run table, --json, progress.

Every experiment's ``--smoke`` run is tested end to end, marked ``slow`` (each takes about a
minute on 2 cores; CI runs them after the default suite); in the default suite the collapse
experiment's ``tiny`` preset stands for them (the same command line around a shorter run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skflow_experiments import EXPERIMENTS, _report, attention, collapse
from skflow_experiments import __main__ as cli

ROOT = Path(__file__).resolve().parents[2]


def _module(name):
    import importlib

    return importlib.import_module(f"skflow_experiments.{name}")


def test_help_lists_every_experiment_with_its_times():
    text = subprocess.run(
        [sys.executable, "-m", "skflow_experiments", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    recorded = _report.recorded_wall_times()
    for name in EXPERIMENTS:
        line = next(row for row in text.splitlines() if row.strip().startswith(name + " "))
        assert len(line.split(None, 1)[1]) > 20, f"{name} has no one-line description"
        if "quick" in recorded.get(name, {}):
            assert f"quick: {recorded[name]['quick']:.0f} s (recorded run)" in text
    for option in ("--smoke", "--quick", "--full", "--json", "--write-docs"):
        assert option in text
    assert "smoke, full: not recorded" in text and "``" not in text


def test_recorded_wall_times_are_read_from_the_page(tmp_path):
    page = tmp_path / "results.md"
    page.write_text(
        "<!-- a:begin -->\nPreset `quick`: seeds [0]. Wall time 249 s.\n<!-- a:end -->\n"
        "<!-- b:begin -->\nnothing recorded\n<!-- b:end -->\n"
    )
    assert _report.recorded_wall_times(page) == {"a": {"quick": 249.0}}
    assert _report.recorded_wall_times(tmp_path / "missing.md") == {}


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_has_a_smaller_smoke_preset(name):
    presets = _module(name).PRESETS
    smoke, quick = presets["smoke"], presets["quick"]
    # a fixed amount of work (no wall-clock cap), smaller than the quick preset's
    assert smoke.get("max_time") is None
    if "n_eval_tasks" in quick:
        assert smoke["n_eval_tasks"] < quick["n_eval_tasks"]
    if isinstance(quick.get("learned"), dict):
        assert smoke["learned"]["max_iter"] < quick["learned"].get("max_iter", 2000)


def _fake_run(output_dir: str, summary: dict):
    def run(preset="quick", *, output_dir=output_dir, n_jobs=None, random_state=0, **kw):
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text("{}")
        (out / "figure.png").write_bytes(b"png")
        return {"preset": preset, "summary": summary, "output_dir": str(out)}

    return run


SCARCITY_SUMMARY = {
    "support_sizes": [10],
    "true": {
        "learned_vs_plugin": {"10": {"pct": 17.4, "ci": [15.4, 19.4]}},
        "learned_vs_plugin_tuned": {"10": {"pct": 13.3, "ci": [11.3, 15.3]}},
    },
    "wall_seconds": 12.0,
}


def test_table_and_file_paths_are_printed(monkeypatch, tmp_path, capsys):
    from skflow_experiments import scarcity

    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("an earlier run's file")
    os.utime(out / "old.txt", (0, 0))
    monkeypatch.setattr(scarcity, "run", _fake_run(str(out), SCARCITY_SUMMARY))
    assert cli.main(["scarcity", "--output-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert "m = 10: learned MMD² below plug-in" in text
    assert "+17.4 % [+15.4 %, +19.4 %]" in text and "wall time" in text
    assert str(out / "results.json") in text and str(out / "figure.png") in text
    assert "old.txt" not in text  # only this run's files
    assert "{" not in text  # no raw JSON without --json


def test_each_distinct_warning_is_printed_once_with_a_count(monkeypatch, tmp_path, capsys):
    """20 fits that warn alike (numbers differ) are one line with their count, not 20 blocks;
    another warning is its own line."""
    import warnings

    from skflow.exceptions import MemorizationWarning
    from skflow_experiments import scarcity

    fake = _fake_run(str(tmp_path), SCARCITY_SUMMARY)

    def run(*args, **kwargs):
        for i in range(20):
            warnings.warn(f"sigma_min is tiny: {i / 7:.3g}", MemorizationWarning, stacklevel=1)
        warnings.warn("something else", RuntimeWarning, stacklevel=1)
        return fake(*args, **kwargs)

    monkeypatch.setattr(scarcity, "run", run)
    assert cli.main(["scarcity", "--output-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.count("sigma_min is tiny") == 1 and err.count("something else") == 1
    assert "20 x MemorizationWarning at test_experiments_cli.py:" in err
    assert "1 x RuntimeWarning" in err and "warnings of the run (21," in err


def test_json_flag_prints_the_summary(monkeypatch, tmp_path, capsys):
    from skflow_experiments import scarcity

    monkeypatch.setattr(scarcity, "run", _fake_run(str(tmp_path), SCARCITY_SUMMARY))
    assert cli.main(["scarcity", "--json", "--output-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) == SCARCITY_SUMMARY


def test_smoke_is_labelled_and_never_written_to_the_docs(monkeypatch, tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["attention", "--smoke", "--write-docs"])
    page = tmp_path / "results.md"
    page.write_text("<!-- attention:begin -->\n<!-- attention:end -->\n")
    fig = tmp_path / "attention.png"
    fig.write_bytes(b"png")
    results = {"preset": "smoke", "output_dir": str(tmp_path), "figure": fig.name}
    with pytest.raises(ValueError, match="not a result"):
        _report.write_run_section("attention", "text", results, page)
    assert "smoke" not in page.read_text()
    monkeypatch.setattr(attention, "run", _fake_run(str(tmp_path), {"times": [1.0]}))
    assert cli.main(["attention", "--smoke", "--output-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "smoke: not a result" in captured.out and "smoke: not a result" in captured.err


def test_progress_bar_counts_every_job_with_an_eta(tmp_path, capsys):
    results = collapse.run("tiny", output_dir=tmp_path, progress=True)
    err = capsys.readouterr().err
    n_jobs = len(collapse._jobs(results["dims"], results["seeds"]))
    assert f"{n_jobs}/{n_jobs}" in err and "collapse:" in err
    assert "<" in err  # tqdm's elapsed<remaining (the ETA)
    collapse.run("tiny", output_dir=tmp_path)
    assert capsys.readouterr().err == ""  # progress is off by default


def _smoke(name: str, tmp_path, capsys) -> None:
    out = tmp_path / name
    assert cli.main([name, "--smoke", "--no-progress", "--output-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("[smoke: not a result")
    assert "headline numbers" in text and "wall time" in text
    assert str(out / "results.json") in text
    assert json.loads((out / "results.json").read_text())["preset"] == "smoke"


def test_cli_run_end_to_end(tmp_path, capsys):
    """The command line around a real run (the collapse experiment's ``tiny`` preset, a few
    seconds): headline table, wall time, the files it wrote."""
    out = tmp_path / "collapse"
    assert (
        cli.main(["collapse", "--preset", "tiny", "--no-progress", "--output-dir", str(out)]) == 0
    )
    text = capsys.readouterr().out
    assert "headline numbers" in text and "wall time" in text
    assert str(out / "results.json") in text
    assert json.loads((out / "results.json").read_text())["preset"] == "tiny"


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_smoke_runs_of_every_experiment(name, tmp_path, capsys):
    _smoke(name, tmp_path, capsys)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_is_a_spec_named_after_its_module(name):
    """The runner, the results page's markers and the command line's table all go through
    the module's ``SPEC``: its name, presets, docs section and headline rows."""
    module = _module(name)
    assert module.SPEC.name == name and module.SPEC.presets is module.PRESETS
    assert module.SPEC.docs is module.docs_section and module.SPEC.headline is not None
