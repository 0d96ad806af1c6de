"""The copy-aware choice rule shared by every selection of a sampler (`_copy_aware.py`)."""

import numpy as np
import pytest

from skflow.exceptions import MemorizationWarning
from skflow.samplers._copy_aware import MEMORIZATION_FLOOR, choose_copy_aware, task_scores


def test_the_floor_is_the_diagnose_threshold():
    assert MEMORIZATION_FLOOR == 0.5


def test_lowest_mmd2_among_candidates_that_do_not_copy():
    best, reasons = choose_copy_aware([0.01, 0.02, 0.03], [0.1, 0.7, 0.9])
    assert best == 1
    assert reasons[0].startswith("not chosen: memorisation")
    assert reasons[1].startswith("chosen: lowest")
    assert reasons[2].startswith("not chosen: multi-scale")


def test_failed_and_unknown_candidates():
    """inf never chosen; a NaN memorisation ratio (reference on the support) is not held
    against a candidate."""
    best, reasons = choose_copy_aware([np.inf, 0.05, 0.02], [1.0, 0.9, np.nan])
    assert best == 2 and "could not be fitted" in reasons[0]


def test_every_candidate_copies_warns_and_takes_the_least_copying():
    with pytest.warns(MemorizationWarning, match="copies"):
        best, reasons = choose_copy_aware([0.01, 0.02], [0.1, 0.3], names=["a", "b"])
    assert best == 1 and reasons[1].startswith("chosen although")


def test_without_a_floor_it_is_the_plain_argmin():
    assert choose_copy_aware([0.02, 0.01], [0.9, 0.0], floor=-np.inf)[0] == 1


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="1-D"):
        choose_copy_aware([0.1, 0.2], [0.5])


def test_task_scores_oracles():
    """New draws of the law: memorisation near 1 and MMD² near 0; copies: memorisation 0."""
    rng = np.random.default_rng(0)
    S, R, G = rng.normal(size=(20, 2)), rng.normal(size=(200, 2)), rng.normal(size=(200, 2))
    d_new, memo_new = task_scores(G, S, R)
    d_copy, memo_copy = task_scores(S[rng.integers(0, 20, 200)], S, R)
    assert memo_copy == 0.0 and memo_new > 0.7
    assert abs(d_new) < 0.1 * d_copy  # unbiased MMD² may be slightly negative
