"""``benchmarks/oversampling_priors.py``: the oversampler's prior, compared paired by fold."""

from __future__ import annotations

import numpy as np
import pytest

import skflow.oversampling


@pytest.fixture(scope="module")
def script(load_benchmark):
    return load_benchmark("oversampling_priors")


def _results(script, shift: float) -> dict:
    """Fake runs: the second prior's scores are the first's plus ``shift`` on every fold."""
    out = {}
    for j, prior in enumerate(script.PRIORS):
        tasks = {}
        for task in script.bench.TASKS:
            scores = {k: list(np.linspace(0.5, 0.6, 9) + j * shift) for k in script.KEYS}
            scores["memorization"] = [0.5 + j * 0.25] * 9
            tasks[task] = {"arms": {"skflow pretrained": scores}}
        out[prior] = tasks
    return out


def test_table_gives_the_paired_difference_and_both_memorisation_ratios(script):
    text = script.table(_results(script, 0.01))
    rows = text.splitlines()[2:]
    assert len(rows) == len(script.bench.TASKS)
    # a constant shift: the paired interval is the shift itself, whatever the fold spread
    assert rows[0].count("(+0.010 [+0.010, +0.010])") == len(script.KEYS)
    assert rows[0].endswith("| 0.50 → 0.75 |")


def test_run_sets_each_prior_and_restores_the_default(script, monkeypatch):
    seen = []

    def fake_run(tasks, arms, classifiers, repeats, progress):
        seen.append((skflow.oversampling.PRIOR, tuple(arms), repeats))
        return {}

    monkeypatch.setattr(script.bench, "run", fake_run)
    monkeypatch.setattr(skflow.oversampling, "PRIOR", "a-prior-of-neither-name")
    script.run(2)
    assert seen == [(p, ("skflow pretrained",), 2) for p in script.PRIORS]
    assert skflow.oversampling.PRIOR == "a-prior-of-neither-name"


def test_main_counts_the_folds_it_was_given(script, monkeypatch):
    # 9 folds in the results, whatever --repeats says: the header counts, it does not assume
    monkeypatch.setattr(script, "run", lambda repeats: _results(script, 0.01))
    block = script.main(["--repeats", "5"])
    assert "over the 9 folds]" in block and block.startswith(script.BEGIN)
