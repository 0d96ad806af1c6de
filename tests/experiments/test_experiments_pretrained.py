"""The pretrained-prior benchmark: presets, a tiny end-to-end run with a stand-in prior, docs.

The shipped prior is not needed: ``run(load_prior=...)`` takes a stand-in, an untrained
``LearnedFlowSampler`` with per-task normalisation (its field is the plug-in's, in each
support's frame), fitted on random labelled rows of the requested width.
"""

import numpy as np
import pytest

from skflow import LearnedFlowSampler, NetworkOptions, SolverOptions, TrainingOptions
from skflow_experiments import EXPERIMENTS, pretrained
from skflow_experiments import __main__ as cli


def _stand_in(n_features: int) -> LearnedFlowSampler:
    rng = np.random.default_rng(n_features)
    X, y = rng.normal(size=(60, n_features)), np.repeat(np.arange(3), 20)
    model = LearnedFlowSampler(
        NetworkOptions(d_model=16, n_layers=1),
        training=TrainingOptions(max_iter=0, support_size=(2, 50)),
        normalize=True,
        solver=SolverOptions(n_steps=8),
        random_state=0,
    )
    return model.fit(X, y)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    calls = []

    def load(n_features):
        calls.append(n_features)
        return _stand_in(n_features)

    out = tmp_path_factory.mktemp("pretrained") / "out"
    return pretrained.run("tiny", output_dir=out, load_prior=load), calls


def test_presets():
    assert "pretrained" in EXPERIMENTS
    assert {"tiny", "smoke", "quick", "full"} <= set(pretrained.PRESETS)
    quick = pretrained.PRESETS["quick"]
    assert quick["support_sizes"] == (5, 10, 20, 50) and quick["budget_s"] == 120.0
    assert quick["prior"] == "general-16-sized" and quick["n_seeds"] >= 3
    assert quick["base_prior"] == "general-16"
    assert set(quick["datasets"]) == set(pretrained.DATASETS)
    assert "not a result" in pretrained.PRESETS["smoke"]["label"]
    with pytest.raises(ValueError, match="unknown preset"):
        pretrained.run("bogus")


def test_datasets_are_standardized_without_labels():
    for name, width in (("digits-pca16", 16), ("iris", 4), ("wine", 13)):
        Z, y, info = pretrained.load_dataset(name)
        assert Z.shape == (len(y), width) and info["n_features"] == width
        np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-9)
        np.testing.assert_allclose(Z.std(axis=0), 1, atol=1e-9)


def test_tiny_end_to_end_shapes_and_skipped_sizes(tiny):
    res, calls = tiny
    assert set(res["datasets"]) == {"iris", "wine"}
    assert sorted(set(calls)) == [4, 13, 16]  # each data set's width, digits for fine-tuning
    for data in res["datasets"].values():
        assert data["support_sizes"] == [5, 10]
        assert "m + 10 = 60" in data["skipped_support_sizes"]["50"]
        for m in ("5", "10"):
            per_task = data["comparison"][m]["per_task"]
            for method in (*pretrained.METHODS, "floor"):
                assert np.asarray(per_task[method]["true"]).shape == (1, 4)
            for key in ("pretrained_vs_plugin", "pretrained_vs_plugin_tuned"):
                assert len(data["summary"]["pooled"][key][m]["ci"]) == 2
            assert len(data["summary"]["pooled"]["pretrained_vs_plugin_auto"][m]["ci"]) == 2
    ft = res["finetune"]
    assert ft["summary"]["support_sizes"] == [5, 10, 50]
    for method in pretrained.FT_METHODS:
        assert np.asarray(ft["comparison"]["10"]["per_task"][method]["true"]).shape == (1, 4)
    for arm in ("fine_tuned", "scratch"):
        record = ft["per_seed"][0]["training"][arm]
        assert record["n_iter"] == 3 and record["train_seconds"] >= 0


def test_memorisation_ratio_is_reported_for_every_method(tiny):
    res, _ = tiny
    for data in res["datasets"].values():
        copy = data["summary"]["memorization_ratio_median"]
        assert set(copy) == set(pretrained.METHODS)
        # the plug-in at sigma_min = 0.01 copies its support: far below fresh rows; the
        # automatic bandwidth keeps its samples about 0.65 of the support's spacing away
        assert all(copy["plugin"][m] < 0.3 for m in ("5", "10"))
        assert all(copy["plugin_auto"][m] > 0.45 for m in ("5", "10"))
    copy = res["finetune"]["summary"]["memorization_ratio_median"]
    assert set(copy) == set(pretrained.FT_METHODS)


def test_tuning_draws_are_independent_of_the_evaluation_draws(tiny):
    res, _ = tiny
    for data in res["datasets"].values():
        assert data["tuning_pools_shared_with_evaluation"] == 0
        for m, scores in data["tuning_mmd2"].items():
            best = min(scores, key=scores.get)
            assert float(best) == data["tuned_sigma_min"][m]


def test_percent_lower_and_average_follow_the_means(tiny):
    res, _ = tiny
    per_dataset = []
    for data in res["datasets"].values():
        t = data["summary"]["true"]
        for m in ("5", "10"):
            ratio = t["mmd2"]["pretrained"][m] / t["mmd2"]["plugin_tuned"][m]
            assert t["pretrained_vs_plugin_tuned"][m]["pct"] == pytest.approx(100 * (1 - ratio))
        per_dataset.append(t["pretrained_vs_plugin_tuned"]["10"]["pct"])
    avg = res["average_m10"]["true"]["pretrained_vs_plugin_tuned"]
    assert avg["pct"] == pytest.approx(np.mean(per_dataset))
    assert avg["ci"][0] <= avg["pct"] <= avg["ci"][1]


def test_headline_rows_and_docs(tiny, tmp_path):
    res, _ = tiny
    rows = dict(cli.headline_rows("pretrained", res["summary"]))
    assert "iris, m = 10: pretrained MMD² below tuned plug-in" in rows
    assert "average over data sets, m = 10: below tuned plug-in" in rows
    assert "digits, m = 10: fine-tuned below scratch" in rows
    page = tmp_path / "results.md"
    page.write_text("<!-- pretrained:begin -->\nold\n<!-- pretrained:end -->\n", encoding="utf-8")
    pretrained.write_docs(res, "python -m skflow_experiments pretrained --preset tiny", page)
    text = page.read_text(encoding="utf-8")
    assert "not a result" in text and "old" not in text
    assert "| data set | m = 5 | m = 10 | m = 50 |" in text and "skipped" in text
    assert "fine-tuned lower than zero-shot" in text and "memorisation ratio" in text
    assert "Losses (interval entirely below 0)" in text


def test_default_prior_is_loaded_by_name(monkeypatch):
    seen = []

    def from_pretrained(cls, name, *, n_features=None):
        seen.append((name, n_features))
        return _stand_in(n_features)

    monkeypatch.setattr(
        LearnedFlowSampler, "from_pretrained", classmethod(from_pretrained), raising=False
    )
    load = pretrained._pretrained_loader("general-16")
    assert load(13).n_features_in_ == 13 and seen == [("general-16", 13)]


def test_fine_tuning_continues_the_prior_with_the_budget_and_its_parameters():
    Z, y, _ = pretrained.load_dataset("iris")
    cfg = dict(pretrained.PRESETS["tiny"], train_max_iter=2, fine_tune={"learning_rate": 5e-4})
    cfg["scratch"] = {"n_layers": 1}
    models, records = pretrained._train_arms(Z, y, cfg, _stand_in, seed=3)
    fine, scratch = models["fine_tuned"], models["scratch"]
    assert fine.warm_start and fine.learning_rate == 5e-4 and fine.max_time == cfg["budget_s"]
    assert scratch.learning_rate == 1e-3 and scratch.max_time == cfg["budget_s"]
    assert fine.random_state == scratch.random_state == 3
    # the prior itself is trained further (its architecture), not a new default model
    assert fine.d_model == 16 and scratch.d_model == 64 and not scratch.warm_start
    assert fine.n_steps == 8 and fine.support_size == (2, 50)  # the stand-in's own
    assert records["fine_tuned"]["n_iter"] == records["scratch"]["n_iter"] == 2


def test_the_prior_is_compared_with_the_base_prior_on_the_same_tasks(tiny, tmp_path):
    res, _ = tiny
    # a caller's own prior without a base: compared with itself, every difference is 0
    assert res["prior"]["base"]["name"] == "load_prior given to run() (itself)"
    for d in res["datasets"].values():
        for r in d["summary"]["true"]["pretrained_vs_pretrained_base"].values():
            assert r["pct"] == pytest.approx(0.0, abs=1e-9)

    def base(n_features):  # another sampler: the same field, a 2-step solver
        return _stand_in(n_features).set_params(solver__n_steps=2)

    out = tmp_path / "out"
    other = pretrained.run("tiny", output_dir=out, load_prior=_stand_in, load_base_prior=base)
    assert other["prior"]["base"]["name"] == "load_base_prior given to run()"
    iris = other["datasets"]["iris"]["summary"]
    assert all(abs(r["pct"]) > 0.1 for r in iris["true"]["pretrained_vs_pretrained_base"].values())
    mmd = iris["true"]["mmd2"]
    for m, r in iris["true"]["pretrained_vs_pretrained_base"].items():
        ratio = mmd["pretrained"][m] / mmd["pretrained_base"][m]
        assert r["pct"] == pytest.approx(100 * (1 - ratio))
    assert "than the base prior by" in pretrained.docs_section(other, "C")


def test_losses_sentence_names_every_pair_that_loses():
    """A loss against the base prior (the last pair) is listed beside one against a plug-in."""

    def r(lo, hi):
        return {"pct": (lo + hi) / 2, "ci": [lo, hi]}

    level = {"5": r(-1.0, 2.0)}
    summary = {f"{a}_vs_{b}": dict(level) for a, b in pretrained.PAIRS}
    summary["pretrained_vs_plugin"] = {"5": r(-9.0, -3.0)}
    summary["pretrained_vs_pretrained_base"] = {"5": r(-7.0, -2.0), "10": r(1.0, 4.0)}
    results = {"datasets": {"wine": {"summary": {"true": summary}}}}
    sentence = pretrained._losses(results, "true")
    assert sentence.count("wine m = 5") == 2
    assert "wine m = 5 vs plug-in (-6.0 %" in sentence
    assert "wine m = 5 vs base prior (-4.5 %" in sentence
    assert "m = 10" not in sentence
    assert pretrained._losses({"datasets": {}}, "true").endswith("none.")


def test_other_class_tuning_never_sees_the_class_it_serves():
    # class 0's tasks prefer 0.1 and class 1's 0.5 (and class 2's are indifferent): each
    # class gets the sigma_min its *other* classes prefer, never its own favourite
    scores = {
        (5, 0.1): np.array([1.0, 1.0, 5.0, 5.0, 3.0]),
        (5, 0.5): np.array([4.0, 4.0, 2.0, 2.0, 3.0]),
    }
    task_class = np.array([0, 0, 1, 1, 2])
    best = pretrained.best_on_other_classes(scores, task_class, [0, 1, 2])
    assert best == {0: {5: 0.5}, 1: {5: 0.1}, 2: {5: 0.1}}
    # class 2 sees classes 0 and 1: means 3.0 and 3.0, a tie broken toward the smaller sigma
    with pytest.raises(ValueError, match="no other class"):
        pretrained.best_on_other_classes(scores, np.zeros(5, int), [0])


def test_other_class_plugin_takes_each_tasks_class_bandwidth(tiny):
    res, _ = tiny
    for data in res["datasets"].values():
        other, oracle = data["other_classes_sigma_min"], data["tuned_sigma_min"]
        classes = sorted(other)
        assert len(classes) == 3  # iris and wine: every class has its own choice
        for m in ("5", "10"):
            per_task = data["comparison"][m]["per_task"]
            mine, tuned = per_task["plugin_other"], per_task["plugin_tuned"]
            for j in range(np.asarray(mine["true"]).shape[1]):
                same = other[classes[j % 3]][m] == oracle[m]  # task j draws class j mod k
                for key in ("true", "pooled", "copy"):
                    equal = np.asarray(mine[key])[0, j] == np.asarray(tuned[key])[0, j]
                    assert equal == same
    summary = res["summary"]["targets"]["not_worse_than_other_classes_tuned"]
    assert set(summary["iris"]) == {f"{c} m = {m}" for c in ("true", "pooled") for m in (5, 10)}
