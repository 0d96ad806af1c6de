"""The pieces the experiments share (``_io.RunLog``, ``_report``, ``_jobs``) on small inputs
with known answers: every experiment's docs text and results go through them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from skflow_experiments import _jobs, _report
from skflow_experiments._io import RunLog
from skflow_experiments.protocol import CONVENTIONS

_INFO = {"cpu_count": 2, "platform": "p", "torch": "t", "load_average": [1.0, 2.0, 3.0]}


def test_convention_tables_put_true_first_and_the_note_under_every_table():
    lines = _report.convention_tables(lambda c: f"table {c}", ("T", "P"), "from {label}:", "N")
    assert lines == [
        *["", "from T:", "", "table true", "", "N"],
        *["", "from P:", "", "table pooled", "", "N"],
    ]
    assert "N" not in _report.convention_tables(str, ("T", "P"), "{label}")


def test_section_head_is_command_label_preset_machine():
    results = {"machine": {"start": _INFO, "end": {**_INFO, "load_average": None}}}
    lines = _report.section_head(results, "cmd", "Preset `x`.", label="Run A")
    command = "Command (from the repository root): `cmd`"
    assert lines[:6] == [command, "", "**Run A.**", "", "Preset `x`.", ""]
    assert lines[6] == _report.machine_line(_INFO, {**_INFO, "load_average": None})
    assert "1.00 / 2.00 / 3.00 at the start, n/a at the end" in lines[6]
    assert len(_report.section_head(results, "cmd", "Preset `x`.")) == 5


def test_run_log_writes_plain_results_with_figure_and_folder(tmp_path):
    log = RunLog(tmp_path / "run", random_state=7, n_seeds=3)
    assert log.seeds == [7, 8, 9] and log.out.is_dir()
    assert set(log.machine()) == {"start", "end"} and log.wall() >= 0.0

    def plot(results, folder):
        assert results["a"] == [0, 1]  # the figure is drawn from the plain results
        return folder / "fig.png"

    res = log.finish({"a": np.arange(2), "x": np.float64(1.5)}, plot)
    assert res == {"a": [0, 1], "x": 1.5, "figure": "fig.png", "output_dir": str(log.out)}
    assert json.loads((log.out / "results.json").read_text()) == res
    kept = log.finish({"a": np.arange(2)}, plain=False)
    assert isinstance(kept["a"], np.ndarray) and "figure" not in kept


def _per_seed(values: dict, sizes=(5, 10), n_seeds=2, n_tasks=4):
    """Per-seed tables where every task of ``method`` scores ``values[method]``."""
    row = {k: {c: np.full(n_tasks, v) for c in CONVENTIONS} for k, v in values.items()}
    return [{"table": {str(m): row for m in sizes}} for _ in range(n_seeds)]


def test_compare_per_support_size_runs_the_pairs_of_its_methods_with_the_paper_at_m10():
    per_seed = _per_seed({"plugin": 0.2, "plugin_tuned": 0.1, "learned": 0.05, "floor": 0.0})
    out = _jobs.compare_per_support_size(per_seed, (5, 10), ("plugin", "plugin_tuned", "learned"))
    assert list(out["5"]) == ["learned_vs_plugin", "learned_vs_plugin_tuned", "per_task"]
    assert out["5"]["learned_vs_plugin"]["true"]["ratio"] == pytest.approx(4.0)
    assert out["10"]["learned_vs_plugin_tuned"]["pooled"]["ratio"] == pytest.approx(2.0)
    assert out["5"]["per_task"]["learned"]["true"].shape == (2, 4)
    # the paper's 24 % belongs to learned vs plug-in at m = 10, nowhere else
    assert out["10"]["learned_vs_plugin"]["true"]["ratio_ci_contains_paper"] is False
    assert out["5"]["learned_vs_plugin"]["true"]["ratio_ci_contains_paper"] is None
    assert out["10"]["learned_vs_plugin_tuned"]["true"]["ratio_ci_contains_paper"] is None

    pcts = _jobs.lower_pcts(out, (5, 10), "true")
    assert pcts["learned_vs_plugin"]["10"]["pct"] == pytest.approx(75.0)
    assert pcts["learned_vs_plugin_tuned"]["5"]["pct"] == pytest.approx(50.0)


def test_support_size_cells_follow_the_methods_and_their_pairs():
    methods = ("plugin", "plugin_tuned", "learned", "learned_plain")
    values = {"plugin": 0.2, "plugin_tuned": 0.1, "learned": 0.05, "learned_plain": 0.4}
    comp = _jobs.compare_per_support_size(_per_seed({**values, "floor": 0.0}), (5, 10), methods)
    summary = {"support_sizes": [5, 10]}
    for conv in CONVENTIONS:
        mmd2 = {k: {m: v for m in ("5", "10")} for k, v in values.items()}
        summary[conv] = {**_jobs.lower_pcts(comp, (5, 10), conv), "mmd2": mmd2}
    cells = _jobs.support_size_cells({"summary": summary, "comparison": comp}, "true", methods)
    assert [c[0] for c in cells] == ["5", "10"]
    m, means, floor, gains = cells[1]
    assert means == "0.2 | 0.1 | 0.05 | 0.4"
    assert floor == "0 (0)"
    assert gains.split(" | ") == [
        "+75.0 % [+75.0 %, +75.0 %]",
        "+50.0 % [+50.0 %, +50.0 %]",
        "-100.0 % [-100.0 %, -100.0 %]",
    ]


@pytest.mark.exactness
def test_class_splits_partition_each_class_in_turn_from_one_stream():
    """Task j is class j mod k, its rows split into a pool of max_m and the rest; the tasks
    draw their shuffles from one generator in turn (the streams the results were made with)."""
    from skflow_experiments._splits import class_splits

    y = np.repeat([3, 5, 7], [6, 8, 7])
    splits = class_splits(y, (5, 3), 5, 4, seed=11)
    rng = np.random.default_rng(11)
    for j, (pool, ref) in enumerate(splits):
        rows = np.flatnonzero(y == (5, 3)[j % 2])
        order = rows[rng.permutation(len(rows))]
        assert pool.tolist() == order[:4].tolist() and ref.tolist() == order[4:].tolist()
    X = np.random.default_rng(0).normal(size=(len(y), 2))
    with_rows = class_splits(y, (5, 3), 5, 4, seed=11, X=X)
    for (pool, ref), (pool_x, ref_x) in zip(splits, with_rows, strict=True):
        assert np.array_equal(pool_x, X[pool]) and np.array_equal(ref_x, X[ref])


def test_experiment_runner_does_the_shared_steps(tmp_path, capsys):
    """An experiment spec's run: preset with overrides, seeds, options, Torch threads set
    and restored, a bar step per unit, wall time, figure name and folder in results.json,
    and the results page refusing a smoke run."""
    import torch

    from skflow_experiments._experiment import Experiment

    threads, seen = torch.get_num_threads(), {}

    def measure(run):
        seen["threads"] = torch.get_num_threads()
        run.bar.update(3)
        return [run.cfg["n_eval_tasks"] * s + run.options["extra"] for s in run.seeds]

    def assemble(run, outputs):
        return {"preset": run.preset, "values": np.asarray(outputs), "wall": run.wall}

    spec = Experiment(
        name="toy",
        presets={"smoke": {"n_seeds": 1, "n_eval_tasks": 2, "torch_threads": threads + 1}},
        measure=measure,
        assemble=assemble,
        units=lambda cfg, seeds: 3 * len(seeds),
        desc="toy: units",
        figure=lambda results, outputs, folder: folder / f"fig{len(outputs)}.png",
        docs=lambda results, command: command,
        options=("extra",),
    )
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        spec.run("smoke", output_dir=tmp_path, extra=1, typo=2)
    res = spec.run(
        "smoke", output_dir=tmp_path, random_state=5, seeds=2, n_tasks=4, extra=1, progress=True
    )
    assert seen["threads"] == threads + 1 and torch.get_num_threads() == threads
    assert res["values"] == [21, 25] and res["wall"] >= 0.0  # plain lists, seeds 5 and 6
    assert res["figure"] == "fig2.png" and res["output_dir"] == str(tmp_path)
    assert json.loads((tmp_path / "results.json").read_text()) == res
    assert "3/6" in capsys.readouterr().err  # units(cfg, seeds) steps, advanced by the work
    with pytest.raises(ValueError, match="not a result"):
        spec.write_docs(res, "cmd", tmp_path / "page.md")
