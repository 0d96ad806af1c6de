"""``benchmarks/loco_projection_leak.py``: the projection of the held-out digit.

The script's claim rests on one switch: without the leak the PCA and scaling are fitted on
the nine training digits only, with it on all ten. The scores must depend on it (a script
whose switch did nothing would report two equal rows) and be reproducible.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits


@pytest.fixture(scope="module")
def leak(load_benchmark):
    return load_benchmark("loco_projection_leak")


def test_the_leak_switch_changes_the_projection_and_the_scores(leak):
    X, y = load_digits(return_X_y=True)
    honest = leak.held_out_scores(X, y, 0, leak=False)
    leaky = leak.held_out_scores(X, y, 0, leak=True)
    assert set(honest) == set(leaky) == set(leak.arms())
    assert all(np.isfinite(v) for v in [*honest.values(), *leaky.values()])
    assert all(honest[k] != leaky[k] for k in honest)  # the projection differs


@pytest.mark.exactness
def test_scores_are_reproducible(leak):
    X, y = load_digits(return_X_y=True)
    assert leak.held_out_scores(X, y, 3, leak=False) == leak.held_out_scores(X, y, 3, leak=False)
