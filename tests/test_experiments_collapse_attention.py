"""Tests of the experiments ``collapse`` (dimension collapse) and ``attention`` (attention vs NW).

The first tests check the CLI wiring and the presets; the end-to-end ones run the ``tiny``
presets (1-5 s each on 2 cores, so they run by default) and check the outputs and the effects
a tiny run can show: the plug-in's mid-path ``n_eff`` falls with the dimension. Learned-model
effects need real training (the quick preset, see docs/results.md); here their summaries are
recomputed from the stored per-task and per-head values.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from skflow.experiments import __main__ as cli
from skflow.experiments import attention, collapse

REQUIRED_PRESETS = {"tiny", "quick", "full"}


@pytest.mark.parametrize("module", [collapse, attention], ids=["collapse", "attention"])
def test_presets_and_cli_parse(module, monkeypatch, tmp_path, capsys):
    assert set(module.PRESETS) >= REQUIRED_PRESETS
    for cfg in module.PRESETS.values():
        assert {"n_support", "sigma_min", "learned", "max_time", "torch_threads"} <= set(cfg)
        assert cfg["n_support"] == 50 and cfg["sigma_min"] == 0.01
    assert module.PRESETS["quick"]["max_time"] is not None  # the quick preset is time-capped
    assert module.PRESETS["full"]["learned"]["d_model"] == 128  # paper scale
    name = module.__name__.rsplit(".", 1)[-1]

    calls = []

    def fake_run(preset="quick", *, output_dir, n_jobs=None, random_state=0):
        calls.append((preset, output_dir, n_jobs, random_state))
        return {"summary": {"ok": 1.0}}

    monkeypatch.setattr(module, "run", fake_run)
    assert cli.main([name, "--quick"]) == 0
    out = tmp_path / "x"
    assert cli.main([name, "--preset", "tiny", "--output-dir", str(out), "--n-jobs", "2"]) == 0
    assert cli.main([name, "--full", "--seed", "3"]) == 0
    assert calls == [
        ("quick", f"output/experiments/{name}", None, 0),
        ("tiny", str(out), 2, 0),
        ("full", f"output/experiments/{name}", None, 3),
    ]
    assert capsys.readouterr().out.count('"ok": 1.0') == 3  # the summary is printed as JSON
    with pytest.raises(SystemExit):
        cli.main([name, "--quick", "--full"])


@pytest.mark.parametrize("module", [collapse, attention], ids=["collapse", "attention"])
def test_unknown_preset(module, tmp_path):
    with pytest.raises(ValueError, match="unknown preset"):
        module.run("huge", output_dir=tmp_path)


def test_collapse_tiny_end_to_end(tmp_path):
    import torch

    threads = torch.get_num_threads()
    res = collapse.run("tiny", output_dir=tmp_path, random_state=0)
    assert torch.get_num_threads() == threads  # restored
    assert (tmp_path / "results.json").is_file() and (tmp_path / "collapse.png").is_file()
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["summary"] == json.loads(json.dumps(res["summary"]))

    s = res["summary"]
    dims = s["dims"]
    assert dims == list(collapse.PRESETS["tiny"]["dims"])
    neff = [s["median_neff_at_0.5"][str(d)] for d in dims]
    # the plug-in's mid-path n_eff falls with the dimension (robust, even at tiny scale)
    assert all(a > b for a, b in zip(neff, neff[1:], strict=False)), neff
    assert s["neff_decreasing_in_d"] is True
    assert 1.0 <= neff[-1] < neff[0] <= 50.0
    for d in dims:
        row = res["neff"][str(d)]
        assert np.asarray(row["median"]).shape == np.asarray(row["times"]).shape
        assert row["median"][0] == pytest.approx(50.0)  # uniform weights at t = 0
        for key in ("mmd2_plugin", "mmd2_learned_head", "mmd2_learned_nohead"):
            assert np.isfinite(s[key][str(d)])
        assert np.isfinite(s["exact_head_benefit"][str(d)])
        per_task = res["mmd2"][str(d)]["learned_head"]["per_task"]
        assert len(per_task) == collapse.PRESETS["tiny"]["n_eval_tasks"]
        # the benefit is the relative MMD^2 reduction of the exact head
        base, head = s["mmd2_learned_nohead"][str(d)], s["mmd2_learned_head"][str(d)]
        assert s["exact_head_benefit"][str(d)] == pytest.approx((base - head) / base, rel=1e-9)
    benefit = s["exact_head_benefit"]
    assert s["benefit_d_min_gt_d_max"] is (benefit[str(dims[0])] > benefit[str(dims[-1])])


def test_attention_tiny_end_to_end(tmp_path):
    res = attention.run("tiny", output_dir=tmp_path, random_state=0)
    assert (tmp_path / "results.json").is_file() and (tmp_path / "attention.png").is_file()
    json.loads((tmp_path / "results.json").read_text())

    cfg = attention.PRESETS["tiny"]
    T = len(cfg["times"])
    L, H = cfg["learned"]["n_layers"], cfg["learned"]["n_heads"]
    assert set(res["models"]) == {"no_head", "exact_head"}
    for name, model in res["models"].items():
        for key in ("trajectory", "conditional", "trajectory_weights", "conditional_weights"):
            med = np.asarray(model[key]["median_spearman"])
            assert med.shape == (T, L, H)
            assert np.all(np.isfinite(med)) and np.all(np.abs(med) <= 1.0)
        # the summary recomputed from the per-head medians on the model's own trajectories
        s = res["summary"][name]
        flat = np.asarray(model["trajectory"]["median_spearman"]).reshape(T, L * H)
        np.testing.assert_allclose(s["best_median_per_t"], flat.max(axis=1), rtol=0, atol=0)
        best_last = int(np.argmax(flat[-1]))
        assert list(s["last_t_best_head"]) == [best_last // H, best_last % H]
        times = np.asarray(cfg["times"], dtype=float)
        rising = [
            bool(flat[-1, j] > flat[0, j] and spearmanr(times, flat[:, j]).statistic > 0)
            for j in range(L * H)
        ]
        assert s["any_head_rising"] is any(rising)


def test_nw_log_weights_rank_like_weights():
    """The log-weights used for the ranks are monotone in NWFlowSampler.weights."""
    from skflow import NWFlowSampler

    rng = np.random.default_rng(0)
    S, X = rng.standard_normal((20, 3)), rng.standard_normal((7, 3))
    for t in (0.0, 0.3, 0.8):
        w = NWFlowSampler(sigma_min=0.01).fit(S).weights(X, t)
        logw = attention._nw_log_weights(X, S, t, 0.01)
        ref = np.log(w)
        np.testing.assert_allclose(
            logw - logw.max(axis=1, keepdims=True), ref - ref.max(axis=1, keepdims=True), atol=1e-8
        )
