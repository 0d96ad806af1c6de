"""``benchmarks/bench_transfer.py``: merging two saved runs of the same setting and seeds.

The tables of ``docs/transfer.md`` are written from saved runs; a second command that trains
more learned arms adds them to a saved run with ``--merge``. The merge must keep every arm of
both, refuse runs whose shared arms differ (they did not see the same tasks), and refuse a run
with no counterpart.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_transfer")


def _run(seed: int, arms: dict, command: str) -> dict:
    table = {m: {a: {"mmd2_med": list(v)} for a, v in arms.items()} for m in ("5", "10")}
    return {
        "setting": "hier-t",
        "seed": seed,
        "table": table,
        "records": {a: {"n_iter": seed} for a in arms if a.startswith("learned")},
        "meta": {"command": command, "n_generated": 200},
    }


def test_merge_adds_the_arms_of_the_second_run(bench):
    first = [_run(s, {"plugin": [s, 1.0], "learned": [2.0, s]}, "A") for s in (0, 1)]
    second = [_run(s, {"plugin": [s, 1.0], "learned_big": [3.0, s]}, "B") for s in (1, 0)]
    merged = bench.merge_runs(first, second)
    assert [r["seed"] for r in merged] == [0, 1]
    for run in merged:
        s = run["seed"]
        assert set(run["table"]["10"]) == {"plugin", "learned", "learned_big"}
        assert run["table"]["5"]["learned_big"]["mmd2_med"] == [3.0, s]  # seed matched
        assert run["table"]["5"]["learned"]["mmd2_med"] == [2.0, s]
        assert set(run["records"]) == {"learned", "learned_big"}
        assert "A" in run["meta"]["command"] and "B" in run["meta"]["command"]
    assert "learned_big" not in first[0]["table"]["5"]  # inputs untouched


def test_merge_refuses_shared_arms_that_differ(bench):
    first = [_run(0, {"plugin": [0.0, 1.0]}, "A")]
    second = copy.deepcopy(first)
    second[0]["table"]["10"]["plugin"]["mmd2_med"][1] = 1.5
    with pytest.raises(ValueError, match="m=10: plugin differs"):
        bench.merge_runs(first, second)


def test_merge_refuses_a_run_without_counterpart(bench):
    first = [_run(0, {"plugin": [0.0]}, "A"), _run(2, {"plugin": [0.0]}, "A")]
    with pytest.raises(ValueError, match="seed 2"):
        bench.merge_runs(first, [_run(0, {"plugin": [0.0]}, "B")])


def test_merge_takes_several_runs_of_one_seed_and_one_file_per_seed(bench):
    first = [_run(s, {"plugin": [s, 1.0]}, "A") for s in (0, 1)]
    more = [_run(1, {"learned_b": [4.0, 1]}, "B1"), _run(0, {"learned_b": [4.0, 0]}, "B0")]
    more.append(_run(0, {"learned_c": [5.0, 0]}, "C0"))
    merged = bench.merge_runs(first, more)
    assert set(merged[0]["table"]["5"]) == {"plugin", "learned_b", "learned_c"}
    assert set(merged[1]["table"]["5"]) == {"plugin", "learned_b"}
    assert merged[0]["meta"]["command"].count("merged with") == 2


def test_merge_refuses_a_run_with_nothing_to_merge_into(bench):
    first = [_run(0, {"plugin": [0.0]}, "A")]
    more = [_run(0, {"learned_b": [1.0]}, "B"), _run(5, {"learned_b": [1.0]}, "B")]
    with pytest.raises(ValueError, match="no saved run"):
        bench.merge_runs(first, more)


def test_runs_merged_with_one_command_per_seed_stay_one_section(bench):
    first = [_run(s, {"plugin": [s]}, "A") for s in (0, 1)]
    more = [_run(s, {"learned_b": [1.0]}, f"B --seeds {s}") for s in (0, 1)]
    other = _run(0, {"plugin": [0.0]}, "C")  # the same setting by another command
    groups = bench.sections([*bench.merge_runs(first, more), other])
    assert list(groups) == ["hier-t (1)", "hier-t (2)"]
    assert [r["seed"] for r in groups["hier-t (1)"]] == [0, 1]
    assert bench._run_commands(groups["hier-t (1)"]) == ["A", "B --seeds 0", "B --seeds 1"]


def test_renamed_arm_is_checked_against_its_new_run(bench):
    """``--rename learned=learned_support``: the saved arm's scores and records move to the
    new name, are compared with a new run of that name, and the new ``learned`` is added."""
    first = [_run(0, {"plugin": [0.0, 1.0], "learned": [2.0, 0.5]}, "A")]
    renamed = bench.rename_arms(first, {"learned": "learned_support"})
    assert set(renamed[0]["table"]["5"]) == {"plugin", "learned_support"}
    assert set(renamed[0]["records"]) == {"learned_support"}
    new = _run(0, {"learned_support": [2.0, 0.5], "learned": [1.0, 0.25]}, "B")
    merged = bench.merge_runs(renamed, [new])
    assert merged[0]["table"]["10"]["learned"]["mmd2_med"] == [1.0, 0.25]
    assert merged[0]["meta"]["renamed"] == [["learned", "learned_support"]]
    assert "`learned` as `learned_support`" in bench._renamed_text(merged[0]["meta"])
    assert "learned" in first[0]["table"]["5"]  # inputs untouched
    new["table"]["5"]["learned_support"]["mmd2_med"][0] = 2.5  # not what was saved
    with pytest.raises(ValueError, match="learned_support differs"):
        bench.merge_runs(renamed, [new])
    with pytest.raises(ValueError, match="exists"):
        bench.rename_arms(first, {"learned": "plugin"})


def test_taken_arm_is_quoted_as_renamed(bench):
    """``--take learned_support=learned``: the arm added under a new name is named in the
    merged run's renamings (the page quotes them under each section)."""
    first = [_run(0, {"plugin": [0.0, 1.0], "learned": [2.0, 0.5]}, "A")]
    first = bench.rename_arms(first, {"learned": "pred_sized_rows"})
    more = _run(0, {"plugin": [0.0, 1.0], "learned_support": [1.0, 0.25]}, "B")
    taken = bench.take_arms([more], {"learned_support": "learned"})
    merged = bench.merge_runs(first, taken)
    assert merged[0]["table"]["5"]["learned"]["mmd2_med"] == [1.0, 0.25]
    assert merged[0]["meta"]["renamed"] == [
        ["learned", "pred_sized_rows"],
        ["learned_support", "learned"],
    ]
    assert "`learned_support` as `learned`" in bench._renamed_text(merged[0]["meta"])


def test_renaming_swaps_names_and_keeps_every_former_name(bench):
    """``prior_ft=prior_ft_gentle prior_ft_lr=prior_ft`` (the card took the schedule of
    ``prior_ft_lr``): one arm takes the name the other gives up, and a name renamed before
    (``prior_ft`` once ``prior_ft_choice_extra``) keeps both renamings in the docs."""
    arms = {"plugin": [0.0, 1.0], "prior_ft": [2.0, 0.5], "prior_ft_lr": [1.0, 0.5]}
    first = [_run(0, arms, "A")]
    first[0]["meta"]["renamed"] = {"prior_ft": "prior_ft_choice_extra"}  # a former dict
    out = bench.rename_arms(first, {"prior_ft": "prior_ft_gentle", "prior_ft_lr": "prior_ft"})
    arms = out[0]["table"]["5"]
    assert set(arms) == {"plugin", "prior_ft", "prior_ft_gentle"}
    assert arms["prior_ft"]["mmd2_med"] == [1.0, 0.5]
    assert arms["prior_ft_gentle"]["mmd2_med"] == [2.0, 0.5]
    text = bench._renamed_text(out[0]["meta"])
    assert "`prior_ft` as `prior_ft_choice_extra`, `prior_ft` as `prior_ft_gentle`" in text
    assert "`prior_ft_lr` as `prior_ft`" in text


def test_docs_tables_are_written_from_the_saved_runs(bench, tmp_path):
    """The block of ``docs/transfer.md`` is what ``--docs-from --write-docs`` writes from the
    saved runs: no number on the page is typed by hand or left from an older run."""
    page = tmp_path / "transfer.md"
    page.write_text("")
    bench.write_docs(bench.saved_runs(bench.RESULTS / f"{n}.json" for n in bench.DOCS_RUNS), page)
    written = page.read_text()
    block = written[written.index(bench.BEGIN) :]
    assert block in bench.PAGE.read_text()


def test_a_section_without_learned_pred_has_no_table_against_it(bench):
    """Two predictive-frame variants but not ``learned_pred`` itself: the section is written
    without the ablation table of the predictive frame (it has no base to compare with)."""
    arms = {a: [1.0, 2.0] for a in ("plugin", "plugin_tuned", "best_classical")}
    arms |= {"pred_no_aug": [0.5, 1.0], "pred_big": [0.4, 1.1]}
    runs = [_run(s, arms, "A") for s in (0, 1)]
    for run in runs:
        run["meta"] |= {"max_time": 60.0, "machine": "2 cores"}
        for m in run["table"]:
            for arm in run["table"][m].values():
                arm |= {k: list(arm["mmd2_med"]) for k in ("mmd2_q", "mmd2_2x", "copy")}
    text = bench.section(runs)
    assert "| pred_big |" in text and "than `learned_pred`" not in text
    for run in runs:  # with it, the table is there
        for m in run["table"]:
            run["table"][m]["learned_pred"] = copy.deepcopy(run["table"][m]["pred_big"])
    assert "than `learned_pred`" in bench.section(runs)


def test_bayes_est_is_the_student_t_predictive_with_the_estimated_hyperparameters(bench):
    """``bayes_est``: the family's form (Student-t rows, its ``df``), ``mu_0`` and ``T`` as
    empirical Bayes estimates them, and the scale ``W`` from the pooled covariance, which is
    ``W df / (df - 2)`` for Student-t rows: with the true moments it is the family itself."""
    family = bench.family("student_t")
    scale = family.df / (family.df - 2.0)
    eb = type("Fitted", (), {})()  # what the arm reads of a fitted EmpiricalBayesGaussianSampler
    eb.prior_mean_ = np.zeros(bench.D)
    eb.prior_covariance_ = family.prior_cov
    eb.within_covariance_ = family.within_cov * scale
    arm = bench.estimated_family_arm(family, eb)
    assert arm.within == "student_t" and arm.df == family.df
    np.testing.assert_allclose(arm.within_cov, family.within_cov)
    np.testing.assert_allclose(arm.prior_cov, family.prior_cov)


def test_best_with_learned_is_the_selector_with_the_learned_candidate(bench):
    """``best_with_learned``: the default candidates and the learned sampler, chosen per m on
    class-grouped folds; its record gives the choice and both validation scores per m, and the
    records text says how many folds."""
    from skflow.tasks import HierarchicalTasks

    X, y = HierarchicalTasks(3).make_classes(6, 40, random_state=0)
    params = {"candidate_of": "BestClassicalSampler", "max_iter": 2, "d_model": 16,
              "n_heads": 2, "n_layers": 1}  # fmt: skip
    sel, record = bench.fit_selected(X, y, 0, 30.0, **params)
    assert [type(c).__name__ for c in sel.candidates][-1] == "LearnedFlowSampler"
    assert sel.candidates[-1].max_iter == 2 and sel.n_splits == bench.SELECTION_SPLITS
    assert list(record["choice"]) == [str(m) for m in bench.SUPPORT_SIZES]
    scores = sel.validation_mmd2_
    np.testing.assert_allclose(record["learned_validation_mmd2"], scores[:, -1].round(5))
    np.testing.assert_allclose(record["best_validation_mmd2"], scores.min(axis=1).round(5))
    run = {"seed": 0, "records": {"best_with_learned": record}}
    assert f"{bench.SELECTION_SPLITS} class-grouped folds" in bench.records_text([run])


def test_defaults_table_on_the_page_is_written_from_the_saved_runs(bench):
    """The summary table of the defaults (between its own markers) is ``defaults_table`` of
    the saved runs."""
    saved = bench.saved_runs(bench.RESULTS / f"{n}.json" for n in bench.DOCS_RUNS)
    page = bench.PAGE.read_text()
    block = page[page.index(bench.DEFAULTS_BEGIN) + len(bench.DEFAULTS_BEGIN) :]
    assert block[: block.index(bench.DEFAULTS_END)].strip() == bench.defaults_table(saved)


def test_defaults_table_marks_an_arm_the_defaults_lose_to(bench):
    """``worse`` where the paired interval of the % below an arm lies under 0; ``take_arms``
    adds the former defaults under their new name only."""
    rng = np.random.default_rng(0)
    good, bad = rng.uniform(1.0, 2.0, 30), rng.uniform(3.0, 4.0, 30)
    arms = {"learned": bad, "best_classical": good, "emp_bayes": bad * 2, "plugin_tuned": bad}
    run = _run(0, arms, "c")
    for m in run["table"]:
        for arm in run["table"][m]:
            run["table"][m][arm].update(mmd2_q=run["table"][m][arm]["mmd2_med"], copy=[1.0])
            run["table"][m][arm]["mmd2_2x"] = run["table"][m][arm]["mmd2_med"]
    former = bench.take_arms([copy.deepcopy(run)], {"plugin_tuned": "learned_two_frames"})
    assert list(former[0]["table"]["5"]) == ["learned_two_frames"]
    merged = bench.merge_runs([run], former)
    rows = bench.defaults_table(merged).splitlines()[2:]
    cells = rows[0].split(" | ")
    assert len(rows) == 2 and "worse**" in cells[4] and "worse" not in cells[5]
    assert cells[7].startswith("+0 % [+0, +0]")  # the former defaults: the same scores


PANEL_KEYS = ("mmd2_med", "mmd2_q", "mmd2_2x", "copy", "energy", "c2st", "energy_floor",
              "c2st_floor")  # fmt: skip


@pytest.fixture(scope="module")
def smoke(bench):
    """A tiny run of ``digits-rows`` (2 tasks, 60 generated rows): the classical arms and
    ``few_shot`` without its learned candidate (``--few-shot-budget 0``), no learned arm."""
    from skflow.threads import limit_threads

    with limit_threads(1):
        run = bench.run_setting("digits-rows", 0, 2, 60, 0.0, None, ["few_shot"], 0.0)
    run["meta"] = {"command": "smoke", "n_generated": 60, "max_time": 0.0, "machine": "test"}
    return run


def test_every_arm_is_scored_on_the_panel_with_the_reference_floors(bench, smoke):
    """Each arm and m holds the panel keys; the floors are those of ``metric_panel`` between
    halves of each task's reference: the same for every arm and m, about 0.5 for the C2ST,
    while the copying plug-in (``sigma_min=0.01``) is told apart from the reference."""
    from skflow.metrics import metric_panel

    data = bench.setting_data("digits-rows", 2, 0)
    floors = [
        metric_panel(p, p, r, n_splits=bench.FLOOR_SPLITS, random_state=j)
        for j, (p, r) in enumerate(zip(data["pools"], data["refs"], strict=True))
    ]
    expected = [f["c2st_accuracy"].floor for f in floors]
    for arms in smoke["table"].values():
        assert "few_shot" in arms
        for scores in arms.values():
            assert set(scores) == set(PANEL_KEYS) and len(scores["c2st"]) == 2
            np.testing.assert_allclose(scores["c2st_floor"], expected)
            np.testing.assert_allclose(
                scores["energy_floor"], [f["energy_distance"].floor for f in floors]
            )
    plugin = smoke["table"]["5"]["plugin"]
    assert min(plugin["c2st"]) > 0.8 and max(plugin["c2st_floor"]) < 0.6


def test_few_shot_is_fitted_for_new_rows_with_its_record(bench, smoke):
    record = smoke["records"]["few_shot"]
    assert record["params"] == {"new": "rows", "budget_s": 0.0, "support_size": [5, 10, 20]}
    assert list(record["chosen"]) == ["5", "10", "20"] and record["cpu_s"] > 0
    text = bench.records_text([smoke])
    assert "few_shot: " in text and "new='rows'" in text and str(record["chosen"]) in text
    assert [bench.few_shot_new(n) for n in ("digits-rows", "digits", "mixtures")] == [
        "rows", "classes", "classes",
    ]  # fmt: skip


def test_panel_table_of_the_smoke_run(bench, smoke):
    """Every arm measured, the base first per m, the floor row after each m; the C2ST floor
    cell is the mean of the floors over the tasks."""
    table = bench.panel_table([smoke])
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    assert [r[1] for r in rows if r[0] == "| 5"][:2] == ["best_classical (base)", "few_shot"]
    floors = [r for r in rows if r[1] == "noise floor"]
    assert [r[0] for r in floors] == ["| 5", "| 10", "| 20"]
    c2st = np.mean(smoke["table"]["5"]["plugin"]["c2st_floor"])
    assert floors[0][-1].startswith(f"{c2st:.3f} [")
    assert len(rows) == 3 * (len(smoke["table"]["5"]) + 1)
    text = bench.section([smoke])
    assert "| 20 | noise floor |" in text and "- `few_shot` against `best_classical`:" in text


def test_runs_saved_before_the_panel_show_it_not_measured(bench, smoke):
    """Arms without the panel keys are left out of the panel table (never filled in); runs
    without any show "not measured"; merging keeps the old scores and adds the new keys."""
    old = copy.deepcopy(smoke)
    for arms in old["table"].values():
        for scores in arms.values():
            for key in ("energy", "c2st", "energy_floor", "c2st_floor"):
                del scores[key]
    assert bench.panel_arms([old]) == []
    assert bench.NOT_MEASURED in bench.panel_table([old])
    text = bench.section([old])
    assert bench.NOT_MEASURED in text and "The metric panel" not in text
    mixed = copy.deepcopy(old)
    for m, arms in mixed["table"].items():
        arms["few_shot"] = smoke["table"][m]["few_shot"]
        arms["plugin"] = smoke["table"][m]["plugin"]
    assert bench.panel_arms([mixed]) == ["few_shot", "plugin"]
    assert "| 5 | few_shot (base) |" in bench.panel_table([mixed])
    merged = bench.merge_runs([old], [smoke])[0]
    assert merged["table"]["10"]["pooled"] == smoke["table"]["10"]["pooled"]
    smoke_copy = copy.deepcopy(smoke)
    smoke_copy["table"]["10"]["pooled"]["copy"][0] += 1.0  # a shared key that differs
    with pytest.raises(ValueError, match="m=10: pooled differs"):
        bench.merge_runs([old], [smoke_copy])


def _panel_run(seed: int, arms: dict) -> dict:
    """A run whose arms hold ``{key: values}`` for the panel keys given (the others 0)."""
    table = {
        m: {a: {k: list(v.get(k, np.zeros(20))) for k in PANEL_KEYS} for a, v in arms.items()}
        for m in ("5", "10")
    }
    return {"setting": "s", "seed": seed, "table": table, "records": {}, "meta": {"command": "c"}}


def test_reading_says_wins_or_loses_only_beyond_the_paired_interval(bench):
    """Against ``learned``: ``few_shot`` lower on energy in every task (wins), higher on the
    MMD² (loses), and on the C2ST lower on average but with an interval across 0: not named."""
    rng = np.random.default_rng(0)
    base = {k: rng.uniform(1.0, 2.0, 20) for k in ("mmd2_med", "energy", "c2st")}
    noise = rng.normal(0.0, 1.0, 20)
    arm = {
        "mmd2_med": base["mmd2_med"] + 0.5,
        "energy": base["energy"] - 0.5,
        "c2st": base["c2st"] + noise - noise.mean() - 0.05,
    }
    runs = [_panel_run(0, {"learned": base, "few_shot": arm})]
    _, lo, hi = bench._paired_diff(runs, "5", "few_shot", "c2st", "learned")
    assert lo < 0 < hi  # the case under test: an interval across 0
    assert bench.panel_readings(runs) == (
        "- `few_shot` against `learned`: wins on energy ×10³ (m=5, 10); loses on "
        "MMD² median bw ×10³ (m=5, 10)."
    )
    cells = bench.panel_table(runs).splitlines()[3].split(" | ")
    assert cells[1] == "few_shot" and cells[4].endswith(" (-500.00 [-500.00, -500.00])")


def test_an_arm_leads_the_one_liner_only_on_most_metrics_and_without_copying(bench):
    """``pooled`` is better than ``few_shot`` on three of four metrics (leads), ``plugin`` on
    all four but copies (memorisation 0.01: not counted), ``ledoit_wolf`` on two (half: not a
    majority), ``bayes`` on all four but is an oracle."""
    rng = np.random.default_rng(1)
    keys = ("mmd2_med", "mmd2_q", "energy", "c2st")
    own = {k: rng.uniform(1.0, 2.0, 20) for k in keys} | {"copy": np.ones(20)}

    def lower_on(names, copy=1.0):
        return {k: own[k] - 0.5 if k in names else own[k] for k in keys} | {
            "copy": np.full(20, copy)
        }

    runs = [
        _panel_run(0, {
            "few_shot": own,
            "pooled": lower_on(keys[:3]),
            "plugin": lower_on(keys, copy=0.01),
            "ledoit_wolf": lower_on(keys[2:]),
            "bayes": lower_on(keys),
        })
    ]  # fmt: skip
    assert bench.beaten_by(runs, "5", "few_shot") == ["pooled"]
    assert bench.panel_counts(runs, "5", "few_shot", "ledoit_wolf") == ([], ["energy", "c2st"])
    table = bench.versus_every_arm_table(runs)
    assert "| 5 | pooled | — | mmd, mmd/4, energy | 1.00 | **they lead on the majority** |" in table
    oracle_row = "| 10 | bayes | — | mmd, mmd/4, energy, c2st | {} | oracle (not fittable) |"
    assert oracle_row.format("0.01") not in table
    assert oracle_row.format("1.00") in table
    summary = bench.one_liner_summary(runs).splitlines()
    assert summary[2].startswith("| s (panel) | 5 | 1 × 20 | pooled | 1.00 |")
