"""The sampling calls' thread policy: the same seed gives the same arrays on any thread count,
small calls run on the calling thread, large calls spread their items (skflow.threads)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from skflow import LearnedFlowSampler, NWFlowSampler, SolverOptions
from skflow.samplers._base import SAMPLING_BATCH_SIZE
from skflow.threads import ITEM_WORK, MIN_ITEM_ROWS, map_on_threads, rows_per_item

THREAD_COUNTS = (1, 2, 3)


def _on(n_threads, call):
    saved = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        return call()
    finally:
        torch.set_num_threads(saved)


def _same_on_every_count(call):
    first, *rest = [_on(k, call) for k in THREAD_COUNTS]
    for other in rest:
        if isinstance(first, tuple):
            for a, b in zip(first, other, strict=True):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(first, other)
    return first


@pytest.fixture(scope="module")
def large():
    """A support large enough that sample(3000) is cut into several items."""
    S = np.random.default_rng(0).normal(size=(1500, 8))
    sampler = NWFlowSampler(solver=SolverOptions(n_steps=4), random_state=0).fit(S)
    assert rows_per_item(1500, 8, SAMPLING_BATCH_SIZE) < 3000 // 4  # several items
    return sampler


def test_items_depend_on_the_problem_size_only():
    assert rows_per_item(10, 16, 4096) == 4096  # a few-shot call: one item
    assert rows_per_item(65536, 64, 4096) == MIN_ITEM_ROWS
    assert rows_per_item(1000, 16, 4096) == ITEM_WORK // 16000
    assert rows_per_item(1000, 16, 100) == 100


def test_every_item_runs_on_one_torch_thread_and_items_spread():
    seen = []

    def item(i):
        seen.append((threading.get_ident(), torch.get_num_threads()))
        time.sleep(0.002)  # long enough that the pool hands items to several threads
        return i * i

    out = _on(3, lambda: map_on_threads(item, [(i,) for i in range(40)]))
    assert out == [i * i for i in range(40)]  # in order
    assert {n for _, n in seen} == {1}
    assert len({ident for ident, _ in seen}) >= 2
    seen.clear()
    caller = threading.get_ident()
    _on(1, lambda: map_on_threads(item, [(i,) for i in range(5)]))  # budget 1: in place
    assert {ident for ident, _ in seen} == {caller}


def test_one_item_runs_on_the_calling_thread():
    caller, seen = threading.get_ident(), []
    _on(3, lambda: map_on_threads(lambda: seen.append(threading.get_ident()), [()]))
    assert seen == [caller]


def test_nw_sampling_is_the_same_on_any_thread_count(large):
    X = _same_on_every_count(lambda: large.sample(3000, random_state=1))
    assert X.shape == (3000, 8)
    t, traj = _same_on_every_count(lambda: large.sample_trajectories(700, random_state=2))
    np.testing.assert_array_equal(traj[-1], _on(1, lambda: large.sample(700, random_state=2)))


def test_nw_field_and_density_are_the_same_on_any_thread_count(large):
    X = np.random.default_rng(3).normal(size=(2500, 8))
    V = _same_on_every_count(lambda: large.velocity(X, 0.4))
    W = _same_on_every_count(lambda: large.weights(X[:600], np.linspace(0, 1, 600)))
    lp = _same_on_every_count(lambda: large.score_samples(X))
    assert V.shape == X.shape and W.shape == (600, 1500) and lp.shape == (2500,)
    # rows are independent: an item's rows give the rows of the whole call
    np.testing.assert_array_equal(large.velocity(X[:300], 0.4), V[:300])
    np.testing.assert_array_equal(large.score_samples(X[-5:]), lp[-5:])


def test_pretrained_prior_samples_are_the_same_on_any_thread_count():
    prior = LearnedFlowSampler.from_pretrained("general-16-sized", n_features=6)
    prior.set_params(n_steps=5)
    S = np.random.default_rng(4).normal(size=(10, 6))
    X = _same_on_every_count(lambda: prior.sample(300, support=S, random_state=0))
    V = _same_on_every_count(lambda: prior.velocity(X, 0.5, support=S))
    assert X.shape == V.shape == (300, 6)
