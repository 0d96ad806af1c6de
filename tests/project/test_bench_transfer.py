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
