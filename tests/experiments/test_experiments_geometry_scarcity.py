"""Experiments 2 (geometric mismatch) and 3 (support scarcity): presets, outputs, effects."""

import json

import numpy as np
import pytest

from skflow_experiments import geometry, scarcity
from skflow_experiments._report import RESULTS_PAGE

MODULES = [geometry, scarcity]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_presets_and_unknown_preset(module, tmp_path):
    assert {"tiny", "quick", "full"} <= set(module.PRESETS)
    for cfg in module.PRESETS.values():
        assert {"n_steps", "learned", "max_time", "device", "torch_threads"} <= set(cfg)
    assert module.PRESETS["quick"]["torch_threads"] == 1
    with pytest.raises(ValueError, match="unknown preset"):
        module.run("bogus", output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()  # validated before any work


@pytest.mark.exactness
def test_rotated_class_tasks_are_orthogonal_maps_of_classes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5))
    y = np.repeat([0, 1, 2], 20)
    tasks = scarcity.RotatedClassTasks(X, y)
    S, Q = tasks.sample_tasks(4, 6, 7, random_state=1)
    assert S.shape == (4, 6, 5) and Q.shape == (4, 7, 5)
    assert tasks.n_features == 5
    S2, Q2 = tasks.sample_tasks(4, 6, 7, random_state=1)
    np.testing.assert_array_equal(S, S2)
    np.testing.assert_array_equal(Q, Q2)
    # a rotation keeps norms: every row's norm is the norm of some row of X
    norms = np.sort(np.linalg.norm(X, axis=1))
    for row in np.concatenate([S.reshape(-1, 5), Q.reshape(-1, 5)]):
        assert np.min(np.abs(norms - np.linalg.norm(row))) < 1e-10
    s, q = tasks.sample_task(3, 2, random_state=0)
    assert s.shape == (3, 5) and q.shape == (2, 5)


def _finite_tree(obj):
    if isinstance(obj, dict):
        return all(_finite_tree(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_finite_tree(v) for v in obj)
    if isinstance(obj, float):
        return np.isfinite(obj)
    return True


def test_geometry_tiny_end_to_end(tmp_path):
    import torch

    from skflow_experiments import protocol

    threads = torch.get_num_threads()
    res = geometry.run("tiny", output_dir=tmp_path, seeds=2, n_tasks=4, random_state=3)
    assert torch.get_num_threads() == threads  # restored
    assert (tmp_path / "geometry.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["summary"] == json.loads(json.dumps(res["summary"]))
    assert res["seeds"] == [3, 4] and res["config"]["n_eval_tasks"] == 4
    (d,) = geometry.PRESETS["tiny"]["n_features"]
    (per_dim,) = res["per_dimension"]
    assert set(per_dim["per_task"]) == {*geometry.METHODS, "floor"}
    assert all(t["reached_max_iter"] for t in per_dim["training"])
    for conv in protocol.CONVENTIONS:
        iso = np.asarray(per_dim["per_task"]["plugin_isotropic"][conv])
        learned = np.asarray(per_dim["per_task"]["learned"][conv])
        floor = np.asarray(per_dim["per_task"]["floor"][conv])
        assert iso.shape == learned.shape == floor.shape == (2, 4)
        summary = res["summary"][f"d={d}"][conv]
        assert _finite_tree(summary)
        # the headline recomputed from the stored per-task values
        assert summary["ratio_isotropic_over_learned"] == pytest.approx(
            iso.mean() / learned.mean(), rel=1e-12
        )
        lo, hi = summary["ratio_ci"]
        assert lo <= summary["ratio_isotropic_over_learned"] <= hi
        assert summary["noise_floor"] == protocol.noise_floor(floor)
        # the floor is two samples of the same task: far below the plug-in's MMD²
        assert abs(floor.mean()) < iso.mean()
    # the conventions differ: the pooled bandwidth also sees the generated points
    assert per_dim["per_task"]["learned"]["pooled"] != per_dim["per_task"]["learned"]["true"]
    tuning = per_dim["tuning_mmd2"][0]
    grid = geometry.PRESETS["tiny"]["sigma_min_grid"]
    assert per_dim["tuned_sigma_min"][0] == min(grid, key=lambda v: tuning[f"{v:g}"])
    n_eff = per_dim["isotropic_n_eff_task0"]
    assert all(
        1.0 - 1e-9 <= v <= geometry.PRESETS["tiny"]["n_support"] + 1e-9 for v in n_eff.values()
    )
    assert n_eff["0.5"] >= n_eff["0.99"]

    page = tmp_path / "docs" / "results.md"
    page.parent.mkdir()
    before = RESULTS_PAGE.read_text(encoding="utf-8")
    page.write_text(before, encoding="utf-8")
    geometry.write_docs(res, "python -m skflow_experiments geometry --preset tiny", path=page)
    text = page.read_text(encoding="utf-8")
    head, rest = text.split("<!-- geometry:begin -->")
    section, tail = rest.split("<!-- geometry:end -->")
    assert "`python -m skflow_experiments geometry --preset tiny`" in section
    assert "seeds [3, 4], 4 held-out tasks per seed" in section and "cores" in section
    assert f"{res['summary'][f'd={d}']['true']['ratio_isotropic_over_learned']:.3g} [" in section
    assert "Not yet run" not in section
    # the rest of the page is untouched
    assert before.startswith(head) and before.endswith(tail)
    assert (page.parent / "_static" / "results" / "geometry.png").is_file()


def test_geometry_rejects_bad_overrides(tmp_path):
    with pytest.raises(ValueError, match="at least 1 seed and 2 tasks"):
        geometry.run("tiny", output_dir=tmp_path / "out", n_tasks=1)
    assert not (tmp_path / "out").exists()


def test_write_docs_section_needs_its_markers(tmp_path):
    from skflow_experiments._report import write_docs_section

    page = tmp_path / "page.md"
    page.write_text("# page\n<!-- geometry:begin -->\nold\n<!-- geometry:end -->\ntail\n")
    write_docs_section("geometry", "new text", path=page)
    assert (
        page.read_text()
        == "# page\n<!-- geometry:begin -->\nnew text\n<!-- geometry:end -->\ntail\n"
    )
    with pytest.raises(ValueError, match="exactly one <!-- scarcity:begin -->"):
        write_docs_section("scarcity", "x", path=page)


def test_scarcity_tiny_end_to_end(tmp_path):
    import torch

    from skflow_experiments import protocol

    threads = torch.get_num_threads()
    res = scarcity.run("tiny", output_dir=tmp_path)
    assert torch.get_num_threads() == threads
    assert (tmp_path / "results.json").is_file()
    assert (tmp_path / "scarcity.png").stat().st_size > 10_000
    cfg = scarcity.PRESETS["tiny"]
    ms = [str(m) for m in cfg["support_sizes"]]
    summary = res["summary"]
    assert _finite_tree(summary["true"]["mmd2"]) and res["seeds"] == [0, 1]
    for conv in protocol.CONVENTIONS:
        assert set(summary[conv]["mmd2"]) == set(scarcity.METHODS)
        for m in ms:
            table = res["comparison"][m]["per_task"]
            plugin, learned = np.asarray(table["plugin"][conv]), np.asarray(table["learned"][conv])
            assert plugin.shape == learned.shape == (2, cfg["n_eval_tasks"])
            lower = summary[conv]["learned_vs_plugin"][m]
            assert lower["pct"] == pytest.approx(100 * (1 - learned.mean() / plugin.mean()))
            assert lower["ci"][0] <= lower["pct"] <= lower["ci"][1]
            assert summary[conv]["mmd2"]["plugin"][m] == pytest.approx(plugin.mean())
    for s in res["per_seed"]:
        assert all(v in cfg["sigma_min_grid"] for v in s["tuned_sigma_min"].values())
        assert all(t["reached_max_iter"] for t in s["training"].values())
    # robust effect: the plug-in gets much closer to the class as the support grows
    plug = summary["true"]["mmd2"]["plugin"]
    assert plug[ms[0]] > 2 * plug[ms[-1]]
    # the noise floor (pool vs reference rows of the same class) is far below the plug-in at m=5
    floor = np.asarray(res["comparison"][ms[0]]["per_task"]["floor"]["true"])
    assert abs(floor.mean()) < 0.5 * plug[ms[0]]
    # recomputed for seed 1, task 2: the whole pool of the task against its reference rows
    from skflow_experiments._io import derive_seed
    from skflow_experiments._splits import class_splits

    Z, y, _ = scarcity._features(cfg)
    max_m = max(cfg["support_sizes"])
    splits = class_splits(y, cfg["test_classes"], 4, max_m, derive_seed(1, 3), X=Z)
    pool, ref = splits[2]
    assert len(pool) == max_m and floor[1, 2] == protocol.scores_both_conventions(pool, ref)["true"]
    # the split is by class: the held-out classes are never training classes
    assert not set(cfg["test_classes"]) & set(cfg["train_classes"])

    page = tmp_path / "docs" / "results.md"
    page.parent.mkdir()
    page.write_text(RESULTS_PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    scarcity.write_docs(res, "python -m skflow_experiments scarcity --preset tiny", path=page)
    section = page.read_text(encoding="utf-8").split("<!-- scarcity:begin -->")[1]
    section = section.split("<!-- scarcity:end -->")[0]
    assert "`python -m skflow_experiments scarcity --preset tiny`" in section
    assert "seeds [0, 1], 4 held-out tasks per seed" in section and "cores" in section
    pct = summary["true"]["learned_vs_plugin"]["10"]["pct"]
    assert f"| {pct:+.1f} % [" in section
