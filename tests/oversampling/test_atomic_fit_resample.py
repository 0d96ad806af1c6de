"""Atomic ``fit`` and ``fit_resample`` (issue 63) of :class:`~skflow.oversampling.FlowOverSampler`.

A call that raises (bad input, a planted ``RuntimeError`` half way) or is interrupted
(``KeyboardInterrupt``) leaves the over-sampler as it was (the same attributes, the same
objects); a failed first call leaves it unfitted. The per-class record (``n_components_``,
``sigma_min_``) is set only once every class was generated.
"""

from __future__ import annotations

import imblearn.base
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from skflow.oversampling import FlowOverSampler

RNG = np.random.default_rng(0)
Y = np.array([0] * 30 + [1] * 8 + [2] * 8)
X3, X5 = RNG.normal(size=(46, 3)), RNG.normal(size=(46, 5))
Y_ONE_CLASS = np.zeros(46, dtype=np.int64)  # refused once the width was read


def _fitted() -> FlowOverSampler:
    est = FlowOverSampler(n_steps=4, random_state=0)
    est.fit_resample(X3, Y)
    return est


def _raise_on_call(owner, name, exc, call):
    original = getattr(owner, name)
    calls = []

    def planted(*args, **kwargs):
        calls.append(1)
        if len(calls) >= call:
            raise exc("planted")
        return original(*args, **kwargs)

    return planted


def _assert_same_state(est, before: dict, allowed: set = frozenset()) -> None:
    assert set(vars(est)) == set(before)
    changed = [k for k in before if k not in allowed and vars(est)[k] is not before[k]]
    assert not changed, f"attributes replaced by the failed call: {changed}"


def test_a_resample_that_fails_on_bad_input_changes_nothing():
    est = _fitted()
    record = (dict(est.n_components_), dict(est.sigma_min_))  # (not filled in place either)
    before = dict(vars(est))
    with pytest.raises(ValueError, match="more than 1 class"):
        est.fit_resample(X5, Y_ONE_CLASS)
    _assert_same_state(est, before)
    assert est.n_features_in_ == 3
    assert (est.n_components_, est.sigma_min_) == record


@pytest.mark.exactness
@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_a_resample_interrupted_half_way_changes_nothing(exc, monkeypatch):
    est = _fitted()
    record = (dict(est.n_components_), dict(est.sigma_min_))
    before = dict(vars(est))
    with monkeypatch.context() as patch:
        patch.setattr(
            FlowOverSampler,
            "_generate",
            _raise_on_call(FlowOverSampler, "_generate", exc, 2),
        )
        with pytest.raises(exc, match="planted"):
            est.fit_resample(X5, Y)
    _assert_same_state(est, before)
    assert (est.n_components_, est.sigma_min_) == record
    X_res, y_res = est.fit_resample(X3, Y)  # and it still works, as before
    np.testing.assert_array_equal(X_res, _fitted().fit_resample(X3, Y)[0])


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_an_interrupted_fit_changes_nothing(exc, monkeypatch):
    est = _fitted()
    before = dict(vars(est))
    with monkeypatch.context() as patch:
        original = imblearn.base.check_sampling_strategy
        patch.setattr(
            imblearn.base,
            "check_sampling_strategy",
            _raise_on_call(imblearn.base, "check_sampling_strategy", exc, 1),
        )
        assert imblearn.base.check_sampling_strategy is not original
        with pytest.raises(exc, match="planted"):
            est.fit(X5, Y)  # after the width was read
    _assert_same_state(est, before)


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_a_failed_first_resample_leaves_it_unfitted(exc, monkeypatch):
    est = FlowOverSampler(n_steps=4, random_state=0)
    with monkeypatch.context() as patch:
        patch.setattr(
            FlowOverSampler, "_generate", _raise_on_call(FlowOverSampler, "_generate", exc, 2)
        )
        with pytest.raises(exc, match="planted"):
            est.fit_resample(X3, Y)
    with pytest.raises(ValueError):
        est.fit_resample(X5, Y_ONE_CLASS)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


def test_the_per_class_record_is_set_at_the_end(monkeypatch):
    """Without the guard, a resample interrupted at its second class has changed only what
    imbalanced-learn's checks set first (the width, the strategy), not the record."""
    est = _fitted()
    before = dict(vars(est))
    patch = _raise_on_call(FlowOverSampler, "_generate", RuntimeError, 2)
    monkeypatch.setattr(FlowOverSampler, "_generate", patch)
    with pytest.raises(RuntimeError, match="planted"):
        FlowOverSampler.fit_resample.__wrapped__(est, X5, Y)
    _assert_same_state(est, before, allowed={"n_features_in_", "sampling_strategy_"})
