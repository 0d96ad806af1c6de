"""``benchmarks/bench_mmd_conventions.py``: the exact Bayes predictive, dilated, under the two
MMD² conventions; its percent changes, and the block it writes into ``docs/results.md``."""

from __future__ import annotations

import numpy as np
import pytest

from skflow.tasks import HierarchicalTasks


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_mmd_conventions")


@pytest.fixture(scope="module")
def scores(bench):
    tasks = HierarchicalTasks(n_features=4, prior_cov=1.0, within_cov=1.0)
    return bench.dilated_scores(tasks, 5, 60, 100, seed=3)


def test_the_exact_predictive_beats_its_dilations_under_the_fixed_kernel(bench, scores):
    change = bench.change_against_exact(scores, "true")
    assert change[1.0] == (0.0, 0.0, 0.0)
    # the exact predictive minimises the expected MMD² of a kernel fixed before the samples
    for c in (0.7, 1.5):
        assert change[c][2] < 0, (c, change[c])
    assert max(change, key=lambda c: change[c][0]) == 1.0


def test_the_pooled_convention_punishes_narrow_samplers_more_than_wide_ones(bench, scores):
    pooled = bench.change_against_exact(scores, "pooled")
    true = bench.change_against_exact(scores, "true")
    # too narrow by 30 %: the pooled kernel shrinks with the samples and sees the gap sharper
    assert pooled[0.7][0] < true[0.7][0]
    # too wide by 50 %: the pooled kernel widens with the samples and forgives part of it
    assert pooled[1.5][0] > true[1.5][0]


def test_dilations_are_about_the_predictive_mean(bench, scores):
    # the same draws moved far from the origin: a dilation about the predictive mean scores
    # alike (MMD² is translation invariant), a dilation about the origin would not
    far = HierarchicalTasks(n_features=4, prior_mean=50.0, prior_cov=1.0, within_cov=1.0)
    moved = bench.dilated_scores(far, 5, 60, 100, seed=3)
    for c in bench.DILATIONS:
        for conv in ("pooled", "true"):
            np.testing.assert_allclose(moved[c][conv], scores[c][conv], rtol=1e-6, atol=1e-9)


def test_change_against_exact_is_paired_percent_of_means(bench):
    base = np.array([1.0, 2.0, 3.0, 4.0])
    s = {c: {"pooled": base * (1 + (c - 1) * 2)} for c in bench.DILATIONS}
    change = bench.change_against_exact(s, "pooled", n_boot=200)
    # every task scaled by the same factor: the bootstrap interval collapses on the point
    point, lo, hi = change[1.5]
    assert point == pytest.approx(-100.0)
    assert lo == pytest.approx(-100.0) and hi == pytest.approx(-100.0)


def test_write_docs_replaces_only_its_block(bench, tmp_path):
    page = tmp_path / "results.md"
    page.write_text(f"intro\n{bench.BEGIN}\nold\n{bench.END}\noutro\n")
    bench.write_docs("new table\n", page)
    assert page.read_text() == f"intro\n{bench.BEGIN}\nnew table\n{bench.END}\noutro\n"


def test_the_table_names_its_command_and_every_dilation(bench, scores):
    rows = [
        {
            "family": "d = 4",
            "m": 5,
            "change": {
                conv: bench.change_against_exact(scores, conv) for conv in ("pooled", "true")
            },
            "best": {"pooled": 1.0, "true": 1.0},
        }
    ]
    text = bench.table(rows, 60, 100, 1.0)
    assert "python benchmarks/bench_mmd_conventions.py --write-docs" in text
    assert text.count("| d = 4 | 5 |") == 2
    for c in bench.DILATIONS:
        assert f"c = {c:g}" in text
