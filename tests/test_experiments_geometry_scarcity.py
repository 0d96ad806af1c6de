"""Experiments 2 (geometric mismatch) and 3 (support scarcity): presets, outputs, effects."""

import json

import numpy as np
import pytest

from skflow.experiments import geometry, scarcity

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

    threads = torch.get_num_threads()
    res = geometry.run("tiny", output_dir=tmp_path)
    assert torch.get_num_threads() == threads  # restored
    assert (tmp_path / "results.json").is_file()
    assert (tmp_path / "geometry.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["summary"] == json.loads(json.dumps(res["summary"]))
    cfg = geometry.PRESETS["tiny"]
    (d,) = cfg["n_features"]
    summary = res["summary"][f"d={d}"]
    assert set(summary["mmd2"]) == set(geometry.METHODS)
    assert _finite_tree(summary)
    assert summary["learned_iterations"] >= 1
    (per_dim,) = res["per_dimension"]
    assert len(per_dim["per_task"]) == cfg["n_eval_tasks"]
    # summaries recomputed from the per-task MMD^2 values and the tuning scores
    for name in geometry.METHODS:
        per_task = [row[name] for row in per_dim["per_task"]]
        assert summary["mmd2"][name] == pytest.approx(np.mean(per_task), rel=1e-12)
    mmd = summary["mmd2"]
    ratio = mmd["plugin_isotropic"] / mmd["learned"]
    assert summary["ratio_isotropic_over_learned"] == pytest.approx(ratio, rel=1e-12)
    tuning = per_dim["tuning_mmd2"]
    assert summary["tuned_sigma_min"] == min(cfg["sigma_min_grid"], key=lambda v: tuning[f"{v:g}"])
    # n_eff of the isotropic plug-in lies in [1, m] and falls along the path
    n_eff = per_dim["isotropic_n_eff_task0"]
    assert all(1.0 - 1e-9 <= v <= cfg["n_support"] + 1e-9 for v in n_eff.values())
    assert n_eff["0.5"] >= n_eff["0.99"]


def test_scarcity_tiny_end_to_end(tmp_path):
    import torch

    threads = torch.get_num_threads()
    res = scarcity.run("tiny", output_dir=tmp_path)
    assert torch.get_num_threads() == threads
    assert (tmp_path / "results.json").is_file()
    assert (tmp_path / "scarcity.png").stat().st_size > 10_000
    cfg = scarcity.PRESETS["tiny"]
    ms = [str(m) for m in cfg["support_sizes"]]
    summary = res["summary"]
    assert _finite_tree(summary)
    assert set(summary["mmd2"]) == set(scarcity.METHODS)
    for name in scarcity.METHODS:
        assert list(summary["mmd2"][name]) == ms
    assert res["n_splits"] == len(cfg["test_classes"]) * cfg["n_repeats"]
    assert all(s in cfg["sigma_min_grid"] for s in summary["tuned_sigma_min"].values())
    # robust effect: the plug-in gets much closer to the class as the support grows
    plug = summary["mmd2"]["plugin"]
    assert plug[ms[0]] > 2 * plug[ms[-1]]
    # the split is by class: the held-out classes are never training classes
    assert not set(cfg["test_classes"]) & set(cfg["train_classes"])
