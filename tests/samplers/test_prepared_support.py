"""What derives from a support alone is prepared once (issue 65): the fitted support's frame and
automatic bandwidth at ``fit``, an in-context support's once per call, never per solver step.

The automatic bandwidth's nearest-neighbour scan (``median_nn_distance``, O(m^2 d), run for
supports of more than 256 rows) is counted where :mod:`skflow.samplers._bandwidth` looks it
up; the results must be those of a sampler that computes everything afresh.
"""

from __future__ import annotations

import pickle
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
from sklearn.base import clone

from skflow import NWFlowSampler, SolverOptions
from skflow.samplers import _bandwidth

BACKENDS = ("numpy", "torch")
M = 300  # above 256 rows: the bandwidth rule runs the subsampled scan, one call per support


def _support(seed: int, shape=(M, 3), dtype=np.float32) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 2.0 + 1.0).astype(dtype)


def _sampler(backend: str, **params) -> NWFlowSampler:
    return NWFlowSampler(backend=backend, solver=SolverOptions(n_steps=6), random_state=0, **params)


@contextmanager
def _counted():
    """The calls of the nearest-neighbour scan of the bandwidth rule, counted."""
    with mock.patch.object(
        _bandwidth, "median_nn_distance", wraps=_bandwidth.median_nn_distance
    ) as scan:
        yield scan


@pytest.mark.parametrize("backend", BACKENDS)
def test_fitted_support_scanned_once_at_fit(backend):
    S = _support(0)
    X = _support(1, (40, 3))
    with _counted() as scan:
        sampler = _sampler(backend).fit(S)
        assert scan.call_count == 1
        for t in np.linspace(0.0, 1.0, 7):  # a third-party solver's steps
            sampler.velocity(X, t)
        sampler.sample(50)
        sampler.sample_trajectories(5)
        sampler.score_samples(X)
        _ = sampler.kde_bandwidth_, sampler.path_
        assert scan.call_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_context_support_scanned_once_per_call(backend):
    sampler = _sampler(backend).fit(_support(0))
    S, X = _support(2), _support(1, (40, 3))
    with _counted() as scan:
        sampler.velocity(X, 0.5, support=S)
        assert scan.call_count == 1
        sampler.sample(50, support=S)  # the start points and the flow share it
        assert scan.call_count == 2
        sampler.velocity(X, 0.5, support=S)  # the same rows, a new call: once again
        assert scan.call_count == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_scanned_once_per_task(backend):
    # 20 tasks of 300 rows and 2000 samples are cut into work items of 13 and 7 tasks
    # (skflow.samplers._batch.work_items): each task's frame is still computed once
    sampler = _sampler(backend).fit(_support(0))
    SB = np.stack([_support(10 + b) for b in range(20)])
    with _counted() as scan:
        batch = sampler.sample(2000, random_state=0, support=SB)
        assert scan.call_count == 20
    X0 = np.random.RandomState(0).standard_normal((20, 2000, 3)).astype(np.float32)
    for b in (0, 12, 13, 19):  # the first and last tasks of both work items
        alone = sampler.sample(2000, support=SB[b], noise=X0[b])
        np.testing.assert_array_equal(batch[b], alone)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unpickled_sampler_scans_nothing(backend):
    sampler = _sampler(backend).fit(_support(0))
    X = _support(1, (40, 3))
    expected = sampler.sample(30), sampler.velocity(X, 0.3)
    sampler.velocity(X, 0.3, support=_support(5))  # an in-context call's frame stays behind
    with _counted() as scan:
        restored = pickle.loads(pickle.dumps(sampler))
        got = restored.sample(30), restored.velocity(X, 0.3)
        assert scan.call_count == 0
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not hasattr(clone(sampler), "_support_frame_")  # fitted state: clone drops it


@pytest.mark.parametrize("backend", BACKENDS)
def test_prepared_frames_match_a_fresh_computation(backend):
    # another support of the fitted support's shape must not be given the fitted frame
    S, other = _support(0), _support(3)
    X = _support(1, (40, 3))
    sampler = _sampler(backend).fit(S)
    fresh = _sampler(backend).fit(other)
    np.testing.assert_array_equal(sampler.velocity(X, 0.6, support=other), fresh.velocity(X, 0.6))
    np.testing.assert_array_equal(sampler.sample(20, support=other), fresh.sample(20))
    # a support changed in place between calls is prepared again
    rows = other.copy()
    sampler.velocity(X, 0.6, support=rows)
    rows *= 3.0
    np.testing.assert_array_equal(
        sampler.velocity(X, 0.6, support=rows), _sampler(backend).fit(rows).velocity(X, 0.6)
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameters_changed_after_fit_are_used(backend):
    # the prepared frame belongs to the sigma_min it was computed for
    S, X = _support(0), _support(1, (40, 3))
    sampler = _sampler(backend).fit(S).set_params(sigma_min=0.3, normalize=True)
    fresh = _sampler(backend, sigma_min=0.3, normalize=True).fit(S)
    assert sampler.kde_bandwidth_ == fresh.kde_bandwidth_
    np.testing.assert_array_equal(sampler.velocity(X, 0.4), fresh.velocity(X, 0.4))
    # a refit prepares the new support, and forgets the former one's (here fitted without a
    # frame, then given one again)
    new = _sampler(backend).fit(_support(4))
    refit = sampler.set_params(normalize="auto").fit(_support(4))
    assert refit.set_params(sigma_min="auto").kde_bandwidth_ == new.kde_bandwidth_


@contextmanager
def _fields_made():
    """Counts the fields a sampler prepares (``NWFlowSampler._nw_field``)."""
    with mock.patch.object(
        NWFlowSampler, "_nw_field", autospec=True, side_effect=NWFlowSampler._nw_field
    ) as made:
        yield made


@pytest.mark.parametrize("backend", BACKENDS)
def test_fitted_support_field_prepared_once_across_velocity_calls(backend):
    """A solver calling ``velocity`` at each step meets one prepared field of the fitted
    support; the values are those of a fresh sampler (the same kernels on the same arrays)."""
    S, X = _support(0), _support(1, (40, 3))
    sampler = _sampler(backend).fit(S)
    with _fields_made() as made:
        got = [sampler.velocity(X, t) for t in (0.2, 0.5, 0.9, 0.5)]
        assert made.call_count == 1
        sampler.velocity(X, 0.5, support=_support(4))  # in context: its own field
        assert made.call_count == 2
        sampler.velocity(X, 0.5)
        assert made.call_count == 2
    for t, v in zip((0.2, 0.5, 0.9, 0.5), got, strict=True):
        np.testing.assert_array_equal(v, _sampler(backend).fit(S).velocity(X, t))


@pytest.mark.parametrize("backend", BACKENDS)
def test_kept_field_is_remade_when_the_sampler_changes(backend):
    S, X = _support(0), _support(1, (40, 3))
    sampler = _sampler(backend).fit(S)
    sampler.velocity(X, 0.5)
    sampler.set_params(sigma_min=0.3)  # a parameter: a new field, the new value's
    np.testing.assert_array_equal(
        sampler.velocity(X, 0.5), _sampler(backend, sigma_min=0.3).fit(S).velocity(X, 0.5)
    )
    other = _support(3)
    sampler.fit(other)  # a new fitted support
    np.testing.assert_array_equal(
        sampler.velocity(X, 0.5), _sampler(backend, sigma_min=0.3).fit(other).velocity(X, 0.5)
    )
    assert "_fitted_field" not in pickle.loads(pickle.dumps(sampler)).__dict__
    assert "_fitted_field" not in clone(sampler).__dict__
