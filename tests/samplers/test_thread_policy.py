"""The sampling calls' thread policy: the same seed gives the same arrays on any thread count,
small calls run on the calling thread, large calls spread their items (skflow.threads)."""

from __future__ import annotations

import numpy as np
import pytest
from thread_counts import on_threads

from skflow import LearnedFlowSampler, NWFlowSampler, SolverOptions
from skflow.samplers._base import SAMPLING_BATCH_SIZE
from skflow.samplers._batch import work_items
from skflow.threads import MIN_ITEMS, SPLIT_WORK, rows_per_item

# every test here compares the same kernels on the same arrays (thread counts):
# bit for bit
pytestmark = pytest.mark.exactness

THREAD_COUNTS = (1, 2, 3)


def _same_on_every_count(call):
    first, *rest = [on_threads(k, call) for k in THREAD_COUNTS]
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
    assert rows_per_item(1500, 8, SAMPLING_BATCH_SIZE, 3000) <= 3000 // 4  # several items
    return sampler


def test_nw_sampling_is_the_same_on_any_thread_count(large):
    X = _same_on_every_count(lambda: large.sample(3000, random_state=1))
    assert X.shape == (3000, 8)
    t, traj = _same_on_every_count(lambda: large.sample_trajectories(700, random_state=2))
    np.testing.assert_array_equal(
        traj[-1], on_threads(1, lambda: large.sample(700, random_state=2))
    )


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
    prior.set_params(solver__n_steps=5)
    S = np.random.default_rng(4).normal(size=(10, 6))
    X = _same_on_every_count(lambda: prior.sample(300, support=S, random_state=0))
    V = _same_on_every_count(lambda: prior.velocity(X, 0.5, support=S))
    assert X.shape == V.shape == (300, 6)


def test_a_large_batched_call_is_cut_for_the_cores_and_stays_the_same():
    """256 supports x 256 rows (m = 50, d = 16) is above SPLIT_WORK: it is cut into at least
    MIN_ITEMS runs of supports (one run before, which left the second core idle), and the
    samples are the same on any thread count."""
    S = np.random.default_rng(4).normal(size=(256, 50, 16))
    x0 = np.zeros((256, 256, 16))
    assert x0.size * 50 > SPLIT_WORK
    items = work_items(x0, 50, rows_per_item(50, 16, SAMPLING_BATCH_SIZE, 256), split=True)
    assert len(items) >= MIN_ITEMS
    assert len(work_items(x0, 50, 256, split=False)) == 1
    sampler = NWFlowSampler(solver=SolverOptions(n_steps=3), random_state=0).fit(S[0])
    X = _same_on_every_count(lambda: sampler.sample(256, support=S, random_state=5))
    assert X.shape == (256, 256, 16)


def test_the_sampler_cuts_a_large_batched_call_into_min_items(monkeypatch):
    """The batched sampling call asks for the split itself (its size is above SPLIT_WORK)."""
    from skflow.samplers import _base

    seen = []

    def recording(*args, **kwargs):
        seen.append(work_items(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(_base, "work_items", recording)
    S = np.random.default_rng(4).normal(size=(256, 50, 16))
    sampler = NWFlowSampler(solver=SolverOptions(n_steps=1), random_state=0).fit(S[0])
    sampler.sample(256, support=S, random_state=5)
    assert len(seen) == 1 and len(seen[0]) >= MIN_ITEMS
