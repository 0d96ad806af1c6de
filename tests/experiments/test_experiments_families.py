"""Tests of the leave-one-family-out experiment (``skflow_experiments.families``).

The CLI wiring and the presets are checked without running; the ``tiny`` preset runs end to
end (a few seconds) and its summary is recomputed from the stored per-task values. Learned
effects need real training (the quick preset, see docs/results.md).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from skflow.tasks import MixedTasks
from skflow_experiments import EXPERIMENTS, families
from skflow_experiments import __main__ as cli


def test_registered_and_cli(monkeypatch, capsys):
    assert "families" in EXPERIMENTS
    assert set(families.PRESETS) >= {"tiny", "quick", "full"}
    assert families.PRESETS["quick"]["max_time"] is not None
    assert families.PRESETS["full"]["learned"]["network"].d_model == 128  # the paper's scale
    calls = []

    def fake_run(preset="quick", *, output_dir, n_jobs=None, random_state=0):
        calls.append((preset, output_dir, n_jobs, random_state))
        return {"summary": {"ok": 1.0}}

    monkeypatch.setattr(families, "run", fake_run)
    assert cli.main(["families", "--quick", "--n-jobs", "2", "--json"]) == 0
    assert calls == [("quick", "output/experiments/families", 2, 0)]
    assert '"ok": 1.0' in capsys.readouterr().out


def test_unknown_preset_and_bad_sizes(tmp_path):
    with pytest.raises(ValueError, match="unknown preset"):
        families.run("huge", output_dir=tmp_path)
    with pytest.raises(ValueError, match="at least 1 seed and 2 tasks"):
        families.run("tiny", output_dir=tmp_path, n_tasks=1)


@pytest.mark.parametrize("family", families.FAMILIES)
def test_left_out_model_never_sees_its_family(family):
    source = families._training_source("left_out", family, 2)
    assert isinstance(source, MixedTasks)
    kinds = {type(f) for f in source.families}
    assert families._FAMILY_CLASSES[family] not in kinds
    assert len(kinds) == len(families.FAMILIES) - 1
    alone = families._training_source("in_family", family, 2)
    assert type(alone) is families._FAMILY_CLASSES[family]


@pytest.mark.exactness
def test_held_out_tasks_are_of_the_family_and_independent_of_the_floor():
    cfg = families.PRESETS["tiny"]
    S, true, floor = families._eval_tasks("rings", cfg, seed=0)
    S2, true2, _ = families._eval_tasks("rings", cfg, seed=0)
    np.testing.assert_array_equal(S, S2)  # every method scores the same tasks
    np.testing.assert_array_equal(true, true2)
    assert S.shape == (cfg["n_eval_tasks"], cfg["n_support"], cfg["n_features"])
    assert true.shape == floor.shape == (cfg["n_eval_tasks"], cfg["n_points"], 2)
    assert not np.array_equal(true, floor)
    other, _, _ = families._eval_tasks("moons", cfg, seed=0)
    assert not np.allclose(S, other)


def test_tiny_end_to_end(tmp_path):
    res = families.run("tiny", output_dir=tmp_path / "run", random_state=0)
    assert (tmp_path / "run" / "results.json").is_file()
    assert (tmp_path / "run" / "families.png").is_file()
    on_disk = json.loads((tmp_path / "run" / "results.json").read_text())
    assert on_disk["summary"] == json.loads(json.dumps(res["summary"]))
    cfg = families.PRESETS["tiny"]
    assert res["seeds"] == [0, 1]
    for family in families.FAMILIES:
        per = res["per_family"][family]
        table = {k: np.asarray(per["per_task"][k]["true"]) for k in ("plugin", "left_out")}
        assert table["plugin"].shape == (2, cfg["n_eval_tasks"])
        ratio = table["plugin"].mean() / table["left_out"].mean()
        got = res["summary"][family]["true"]["ratio_plugin_over_left_out"]
        assert got == pytest.approx(ratio, rel=1e-12)
        runs = per["training"]
        assert [len(runs[m]) for m in families.MODELS] == [2, 2]
        assert all(t["reached_max_iter"] for m in families.MODELS for t in runs[m])
    # writing the docs section replaces the block between the markers, nothing else
    page = tmp_path / "page.md"
    page.write_text("before\n<!-- families:begin -->\nold\n<!-- families:end -->\nafter\n")
    families.write_docs(res, "python -m skflow_experiments families --preset tiny", page)
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old" not in text
    assert "`python -m skflow_experiments families --preset tiny`" in text
    assert text.count("| spirals |") == 2  # one row per convention's table
    assert (tmp_path / "_static" / "results" / "families.png").is_file()


@pytest.mark.exactness
def test_tiny_run_is_reproducible(tmp_path):
    a = families.run("tiny", output_dir=tmp_path / "a", random_state=3, seeds=1, n_tasks=2)
    b = families.run("tiny", output_dir=tmp_path / "b", random_state=3, seeds=1, n_tasks=2)
    for family in families.FAMILIES:
        for key in ("plugin", "left_out", "in_family", "floor"):
            np.testing.assert_array_equal(
                a["per_family"][family]["per_task"][key]["true"],
                b["per_family"][family]["per_task"][key]["true"],
            )
