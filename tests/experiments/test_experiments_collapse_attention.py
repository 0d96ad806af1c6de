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

from skflow_experiments import __main__ as cli
from skflow_experiments import attention, collapse

REQUIRED_PRESETS = {"tiny", "quick", "full"}


@pytest.mark.parametrize("module", [collapse, attention], ids=["collapse", "attention"])
def test_presets_and_cli_parse(module, monkeypatch, tmp_path, capsys):
    assert set(module.PRESETS) >= REQUIRED_PRESETS
    for cfg in module.PRESETS.values():
        assert {"n_support", "sigma_min", "learned", "max_time", "torch_threads"} <= set(cfg)
        assert cfg["n_support"] == 50 and cfg["sigma_min"] == 0.01
    assert module.PRESETS["quick"]["max_time"] is not None  # the quick preset is time-capped
    assert module.PRESETS["full"]["learned"]["network"].d_model == 128  # paper scale
    name = module.__name__.rsplit(".", 1)[-1]

    calls = []

    def fake_run(preset="quick", *, output_dir, n_jobs=None, random_state=0):
        calls.append((preset, output_dir, n_jobs, random_state))
        return {"summary": {"ok": 1.0}}

    monkeypatch.setattr(module, "run", fake_run)
    assert cli.main([name, "--quick", "--json"]) == 0
    out = tmp_path / "x"
    argv = [name, "--preset", "tiny", "--output-dir", str(out), "--n-jobs", "2", "--json"]
    assert cli.main(argv) == 0
    assert cli.main([name, "--full", "--seed", "3", "--json"]) == 0
    assert calls == [
        ("quick", f"output/experiments/{name}", None, 0),
        ("tiny", str(out), 2, 0),
        ("full", f"output/experiments/{name}", None, 3),
    ]
    assert capsys.readouterr().out.count('"ok": 1.0') == 3  # --json: the summary as JSON
    with pytest.raises(SystemExit):
        cli.main([name, "--quick", "--full"])


@pytest.mark.parametrize("module", [collapse, attention], ids=["collapse", "attention"])
def test_unknown_preset(module, tmp_path):
    with pytest.raises(ValueError, match="unknown preset"):
        module.run("huge", output_dir=tmp_path)


def test_collapse_tiny_end_to_end(tmp_path):
    import torch

    from skflow_experiments import protocol
    from skflow_experiments._report import RESULTS_PAGE

    threads = torch.get_num_threads()
    res = collapse.run("tiny", output_dir=tmp_path, random_state=0)
    assert torch.get_num_threads() == threads  # restored
    assert (tmp_path / "results.json").is_file() and (tmp_path / "collapse.png").is_file()
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["summary"] == json.loads(json.dumps(res["summary"]))

    s, cfg = res["summary"], collapse.PRESETS["tiny"]
    dims = s["dims"]
    assert dims == list(cfg["dims"]) and res["seeds"] == [0, 1]
    neff = [s["median_neff_at_0.5"][str(d)] for d in dims]
    # the plug-in's mid-path n_eff falls with the dimension (robust, even at tiny scale)
    assert all(a > b for a, b in zip(neff, neff[1:], strict=False)), neff
    assert s["neff_decreasing_in_d"] is True
    assert 1.0 <= neff[-1] < neff[0] <= 50.0
    for d in dims:
        row = res["neff"][str(d)]
        assert np.asarray(row["median"]).shape == np.asarray(row["times"]).shape
        assert row["median"][0] == pytest.approx(50.0)  # uniform weights at t = 0
        table = res["per_dimension"][str(d)]["per_task"]
        for conv in protocol.CONVENTIONS:
            head = np.asarray(table["learned_head"][conv])
            nohead = np.asarray(table["learned_nohead"][conv])
            plugin = np.asarray(table["plugin"][conv])
            assert head.shape == nohead.shape == plugin.shape == (2, cfg["n_eval_tasks"])
            # the benefit is the relative MMD^2 reduction of the exact head, over seeds x tasks
            benefit = s[f"d={d}"][conv]["exact_head_benefit"]
            assert benefit["benefit"] == pytest.approx(1 - head.mean() / nohead.mean(), rel=1e-9)
            ratio = s[f"d={d}"][conv]["ratio_plugin_over_learned_head"]
            assert ratio == pytest.approx(plugin.mean() / head.mean(), rel=1e-9)
            floor = np.asarray(table["floor"][conv])
            assert s[f"d={d}"][conv]["noise_floor"] == protocol.noise_floor(floor)
        # the floor is two independent true samples of the task (recomputed for seed 1, task 2)
        _, truths, second = collapse._eval_tasks(d, res["config"], 1)
        floor_12 = protocol.scores_both_conventions(second[2], truths[2])
        assert table["floor"]["true"][1][2] == floor_12["true"]

    page = tmp_path / "docs" / "results.md"
    page.parent.mkdir()
    page.write_text(RESULTS_PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    collapse.write_docs(res, "python -m skflow_experiments collapse --preset tiny", path=page)
    section = page.read_text(encoding="utf-8").split("<!-- collapse:begin -->")[1]
    section = section.split("<!-- collapse:end -->")[0]
    assert "`python -m skflow_experiments collapse --preset tiny`" in section
    assert "seeds [0, 1], 3 held-out tasks per seed" in section and "cores" in section
    assert " | ".join(f"{v:.2f}" for v in neff) in section
    assert "reproducible bit for bit" in section


@pytest.mark.exactness
def test_attention_tiny_end_to_end(tmp_path):
    from skflow_experiments._report import RESULTS_PAGE

    res = attention.run("tiny", output_dir=tmp_path, random_state=0, n_tasks=1)
    assert res["config"]["n_eval_tasks"] == 1
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
        # late in the flow float64 weights underflow to tied zeros; the logits do not
        logit_med = np.asarray(model["trajectory"]["median_spearman"])
        weight_med = np.asarray(model["trajectory_weights"]["median_spearman"])
        assert np.abs(logit_med[-1] - weight_med[-1]).max() > 0.05

    page = tmp_path / "docs" / "results.md"
    page.parent.mkdir()
    page.write_text(RESULTS_PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    attention.write_docs(res, "python -m skflow_experiments attention --preset tiny", path=page)
    section = page.read_text(encoding="utf-8").split("<!-- attention:begin -->")[1]
    section = section.split("<!-- attention:end -->")[0]
    assert (
        "`python -m skflow_experiments attention --preset tiny`" in section and "cores" in section
    )
    best = res["summary"]["no_head"]["best_median_per_t"]
    assert (
        "| no head: best head, own trajectories | " + " | ".join(f"{v:.2f}" for v in best)
        in section
    )
    assert (page.parent / "_static" / "results" / "attention.png").is_file()


def test_nw_logits_rank_like_weights():
    """The logits ranked by the attention experiment are monotone in NWFlowSampler.weights."""
    from skflow import NWFlowSampler
    from skflow.field import nw_logits

    rng = np.random.default_rng(0)
    S, X = rng.standard_normal((20, 3)), rng.standard_normal((7, 3))
    for t in (0.0, 0.3, 0.8):
        w = NWFlowSampler(sigma_min=0.01).fit(S).weights(X, t)
        logw = nw_logits(X, S, t, sigma_min=0.01)
        ref = np.log(w)
        np.testing.assert_allclose(
            logw - logw.max(axis=1, keepdims=True), ref - ref.max(axis=1, keepdims=True), atol=1e-8
        )


def test_cli_forwards_seeds_tasks_and_writes_docs(monkeypatch, tmp_path, capsys):
    from skflow_experiments import geometry

    calls, written = [], []

    def fake_run(preset="quick", *, output_dir, n_jobs=None, random_state=0, **kw):
        calls.append((preset, kw))
        return {"summary": {"ok": 1.0}}

    def fake_write(results, command, path=None):
        written.append((results["summary"], command, path))
        return tmp_path / "page.md"

    monkeypatch.setattr(geometry, "run", fake_run)
    monkeypatch.setattr(geometry, "write_docs", fake_write)
    argv = ["geometry", "--quick", "--seeds", "3", "--n-tasks", "100", "--write-docs"]
    assert cli.main(argv) == 0
    assert calls == [("quick", {"seeds": 3, "n_tasks": 100})]
    assert written == [({"ok": 1.0}, "python -m skflow_experiments " + " ".join(argv), None)]
    assert cli.main(["geometry", "--preset", "tiny", "--docs-path", "x.md"]) == 0
    assert calls[-1] == ("tiny", {}) and len(written) == 1  # no --write-docs: nothing written
    assert "wrote its section" in capsys.readouterr().out


def test_attention_runs_one_seed(tmp_path):
    with pytest.raises(ValueError, match="runs one seed"):
        attention.run("tiny", output_dir=tmp_path, seeds=3)
