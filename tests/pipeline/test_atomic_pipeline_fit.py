"""Atomic fit (issue 63) of the projection and the sampling pipeline.

A fit that raises (bad input, a planted ``RuntimeError`` half way) or is interrupted
(``KeyboardInterrupt``) leaves :class:`~skflow.FlowProjection` and
:class:`~skflow.SamplingPipeline` as they were: the same attributes (the same objects), for a
pipeline in every step too (scikit-learn fits the steps in place, so a step fitted before the
failing one is put back), the same outputs; a failed first fit leaves them unfitted.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from skflow import FlowProjection, NWFlowSampler, SolverOptions, make_sampling_pipeline
from skflow.samplers import nw

RNG = np.random.default_rng(0)
X3, X5 = RNG.normal(size=(40, 3)), RNG.normal(size=(40, 5))
Y = np.repeat(np.arange(4), 10)
Y_NAN = np.where(np.arange(40) == 0, np.nan, Y.astype(float))


def _pipeline():
    sampler = NWFlowSampler(solver=SolverOptions(n_steps=4), random_state=0)
    return make_sampling_pipeline(PCA(n_components=2), sampler)


#: name -> (a fresh estimator, its output after fit, bad refits (X, y), (owner, attribute,
#: call) of a function the fit calls half way: the PCA step is fitted before it)
CASES = {
    "projection": (
        lambda: FlowProjection(n_components=2, n_iter=5, random_state=0),
        lambda est: est.transform(X3),
        [(X5, Y[:-1]), (X5, Y_NAN)],
        (FlowProjection, "_draw_splits", 3),
    ),
    "pipeline": (
        _pipeline,
        lambda est: est.sample(6, support=X3[:8], random_state=0),
        [(X5, Y_NAN), (X5, Y[:-1])],
        (nw, "fit_projection", 3),
    ),
}


def _raise_on_call(owner, name, exc, call):
    original = getattr(owner, name)
    calls = []

    def planted(*args, **kwargs):
        calls.append(1)
        if len(calls) >= call:
            raise exc("planted")
        return original(*args, **kwargs)

    return planted


def _plant(monkeypatch, name, exc):
    owner, attr, call = CASES[name][3]
    monkeypatch.setattr(owner, attr, _raise_on_call(owner, attr, exc, call))


def _state(est) -> list:
    """``(object, copy of its vars)`` of the estimator and of every step, in order."""
    objects = [est] + [step for _, step in getattr(est, "steps", [])]
    return [(obj, dict(vars(obj))) for obj in objects] + [(None, list(getattr(est, "steps", [])))]


def _assert_same_state(est, before: list) -> None:
    now = _state(est)
    assert now[-1][1] == before[-1][1]  # the same step objects
    for (obj, old), (_, new) in zip(before[:-1], now[:-1], strict=True):
        assert set(new) == set(old), type(obj).__name__
        changed = [k for k in old if new[k] is not old[k]]
        assert not changed, f"{type(obj).__name__}: attributes replaced: {changed}"


def _fitted(name):
    return CASES[name][0]().fit(X3, Y)


@pytest.mark.exactness
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_refit_that_fails_on_bad_input_changes_nothing(name):
    est = _fitted(name)
    output = CASES[name][1]
    expected = output(est)
    before = _state(est)
    for X, y in CASES[name][2]:
        with pytest.raises(ValueError):
            est.fit(X, y)
        _assert_same_state(est, before)
    np.testing.assert_array_equal(output(est), expected)


@pytest.mark.exactness
@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_refit_interrupted_half_way_changes_nothing(name, exc, monkeypatch):
    est = _fitted(name)
    output = CASES[name][1]
    expected = output(est)
    before = _state(est)
    with monkeypatch.context() as patch:
        _plant(patch, name, exc)
        with pytest.raises(exc, match="planted"):
            est.fit(X5, Y)
    _assert_same_state(est, before)
    np.testing.assert_array_equal(output(est), expected)


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_failed_first_fit_leaves_it_unfitted(name, exc, monkeypatch):
    est = CASES[name][0]()
    with monkeypatch.context() as patch:
        _plant(patch, name, exc)
        with pytest.raises(exc, match="planted"):
            est.fit(X3, Y)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    with pytest.raises(NotFittedError):
        CASES[name][1](est)


def test_the_projection_sets_its_attributes_at_the_end(monkeypatch):
    """Without the guard, a fit interrupted in its optimisation has changed only what the
    input's validation sets (``n_features_in_``)."""
    est = _fitted("projection")
    before = dict(vars(est))
    _plant(monkeypatch, "projection", RuntimeError)
    with pytest.raises(RuntimeError, match="planted"):
        FlowProjection.fit.__wrapped__(est, X5, Y)
    assert set(vars(est)) == set(before)
    assert [k for k in before if vars(est)[k] is not before[k]] == ["n_features_in_"]


def test_the_pipeline_keeps_sklearn_fit_behaviour():
    """Fitted in place, as :class:`sklearn.pipeline.Pipeline`: the steps given are the steps
    fitted, and ``fit`` returns the pipeline."""
    pipe = _pipeline()
    pca = pipe.steps[0][1]
    assert pipe.fit(X3) is pipe
    assert pipe.steps[0][1] is pca and pca.n_features_in_ == 3
    assert pipe.sample(4, random_state=0).shape == (4, 3)
