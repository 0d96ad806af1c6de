"""The experiments' comparison protocol on synthetic per-task numbers with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from skflow.metrics import mmd2
from skflow_experiments import protocol


def test_exact_ratio_has_a_degenerate_interval():
    rng = np.random.default_rng(0)
    a = rng.uniform(0.005, 0.015, size=(3, 100))
    res = protocol.paired_comparison(a, a / 10.0, paper_ratio=11.0, n_boot=300)
    assert res["ratio"] == pytest.approx(10.0, rel=1e-12)
    assert res["ratio_ci"] == pytest.approx([10.0, 10.0], rel=1e-12)
    assert res["ratio_ci_contains_paper"] is False
    assert res["difference"] == pytest.approx(0.9 * a.mean(), rel=1e-12)
    assert res["difference_ci_contains_zero"] is False
    assert res["b_lower_fraction"] == 1.0
    assert [s["ratio"] for s in res["per_seed"]] == pytest.approx([10.0] * 3, rel=1e-12)
    assert (res["n_seeds"], res["n_tasks"]) == (3, 100)


def test_bootstrap_is_stratified_by_seed():
    # seed 0 scores 1 everywhere, seed 1 scores 3: a bootstrap that keeps 100 tasks of each
    # seed always averages 2; one that pools the 200 tasks would not
    a = np.vstack([np.ones(100), np.full(100, 3.0)])
    res = protocol.paired_comparison(a, np.zeros_like(a), n_boot=500)
    assert res["difference_ci"] == pytest.approx([2.0, 2.0], abs=1e-12)
    idx = protocol.bootstrap_indices(2, 100, 50)
    assert idx.shape == (50, 2, 100) and idx.min() >= 0 and idx.max() <= 99


def test_difference_interval_matches_the_normal_theory_width():
    rng = np.random.default_rng(1)
    n = 400
    diff = rng.normal(0.3, 1.0, size=n)
    a = 5.0 + rng.normal(size=n)
    res = protocol.paired_comparison(a, a - diff, n_boot=4000)
    half = 1.96 * diff.std(ddof=1) / np.sqrt(n)
    lo, hi = res["difference_ci"]
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.1)
    assert (lo + hi) / 2 == pytest.approx(diff.mean(), abs=0.2 * half)
    narrow = protocol.paired_comparison(a, a - diff, n_boot=4000, confidence=0.5)
    assert narrow["difference_ci"][1] - narrow["difference_ci"][0] < 0.5 * (hi - lo)


def test_interval_contains_zero_when_there_is_no_difference():
    rng = np.random.default_rng(2)
    a = rng.normal(0.01, 0.002, size=(3, 100))
    b = a + rng.normal(0.0, 1e-3, size=a.shape)
    b -= (b - a).mean()  # no difference on average, noise per task
    res = protocol.paired_comparison(a, b, paper_ratio=1.0, n_boot=1000)
    assert res["difference_ci_contains_zero"] is True
    assert res["ratio_ci_contains_paper"] is True


def test_nonpositive_denominator_gives_an_infinite_ratio():
    a = np.full((1, 4), 0.01)
    b = np.array([[-1e-4, 1e-4, -2e-4, 0.0]])
    res = protocol.paired_comparison(a, b, n_boot=200)
    assert res["ratio"] == np.inf
    assert res["ratio_ci"][1] == np.inf and np.isfinite(res["difference_ci"]).all()


def test_bootstrap_is_reproducible_and_seeded():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(size=(2, 3, 30))
    r1 = protocol.paired_comparison(a, b, n_boot=200, random_state=5)
    r2 = protocol.paired_comparison(a, b, n_boot=200, random_state=5)
    r3 = protocol.paired_comparison(a, b, n_boot=200, random_state=6)
    assert r1["difference_ci"] == r2["difference_ci"]
    assert r1["difference_ci"] != r3["difference_ci"]


def test_input_checks():
    with pytest.raises(ValueError, match="same shape"):
        protocol.paired_comparison(np.ones((2, 5)), np.ones((3, 5)))
    with pytest.raises(ValueError, match="at least 2 tasks"):
        protocol.paired_comparison(np.ones((2, 1)), np.ones((2, 1)))
    with pytest.raises(ValueError, match="NaN or infinity"):
        protocol.paired_comparison(np.array([1.0, np.nan]), np.ones(2))
    with pytest.raises(ValueError, match="confidence"):
        protocol.paired_comparison(np.ones(3), np.ones(3), confidence=1.5)
    with pytest.raises(ValueError, match="at least 2 finite"):
        protocol.noise_floor([0.1])


def test_noise_floor_summary():
    values = np.arange(201.0).reshape(3, 67)
    fl = protocol.noise_floor(values)
    assert fl["mean"] == pytest.approx(100.0)
    assert fl["q95"] == pytest.approx(190.0)
    assert fl["sd"] == pytest.approx(np.std(values, ddof=1))


@pytest.mark.exactness
def test_scores_both_conventions_are_the_two_median_rules():
    rng = np.random.default_rng(4)
    gen, true = rng.normal(size=(60, 3)) * 2.0, rng.normal(size=(70, 3))
    s = protocol.scores_both_conventions(gen, true)
    assert s["pooled"] == mmd2(gen, true)
    assert s["true"] == mmd2(gen, true, reference=true)
    assert s["pooled"] != s["true"]  # the wider generated points widen the pooled bandwidth


def test_compare_to_baseline_floor_and_table():
    rng = np.random.default_rng(5)
    floor = {c: rng.normal(0.0, 1e-4, size=(3, 100)) for c in protocol.CONVENTIONS}
    base = {c: 0.01 + rng.normal(0.0, 1e-3, size=(3, 100)) for c in protocol.CONVENTIONS}
    at_floor = {c: floor[c] + rng.normal(0.0, 1e-4, size=(3, 100)) for c in protocol.CONVENTIONS}
    above = {c: floor[c] + 1e-3 for c in protocol.CONVENTIONS}
    res = protocol.compare_to_baseline(base, at_floor, floor, paper_ratio=11.0, n_boot=500)
    res_above = protocol.compare_to_baseline(base, above, floor, paper_ratio=11.0, n_boot=500)
    for conv in protocol.CONVENTIONS:
        assert res[conv]["challenger_minus_floor"]["ci_contains_zero"] is True
        assert res_above[conv]["challenger_minus_floor"]["ci_contains_zero"] is False
        assert res_above[conv]["challenger_minus_floor"]["difference"] == pytest.approx(1e-3)
        assert res[conv]["noise_floor"] == protocol.noise_floor(floor[conv])
    table = protocol.markdown_table(res_above, paper_ratio=11.0)
    lines = table.splitlines()
    assert len(lines) == 4 and lines[2].startswith("| pooled |") and "| 11 |" in lines[2]
    text = protocol.claims(res_above, paper_ratio=11.0)
    assert "above the noise floor" in text[0] and "paper's 11" in text[0]
    assert "not distinguishable" in protocol.claims(res)[1]
