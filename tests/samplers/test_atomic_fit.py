"""Atomic fit (issue 63): a fit that raises or is interrupted leaves the sampler as it was.

For every public sampler: a fitted one keeps the very same attributes (the same objects) and
the same samples for the same seed after a refit that fails on bad input, on a planted
``RuntimeError`` half way through, or on a ``KeyboardInterrupt``; an unfitted one stays
unfitted (``NotFittedError``). The fits themselves set their fitted attributes only at the
end (checked on the fit without its guard); a warm start trains a copy of the network.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from skflow import (
    BestClassicalSampler,
    BICGaussianMixtureSampler,
    EmpiricalBayesGaussianSampler,
    LearnedFlowSampler,
    LedoitWolfSampler,
    NetworkOptions,
    NWFlowSampler,
    PooledGaussianSampler,
    SolverOptions,
    TrainingOptions,
)
from skflow.nn import training as training_module
from skflow.samplers import classical, nw

RNG = np.random.default_rng(0)
X3, X5 = RNG.normal(size=(40, 3)), RNG.normal(size=(40, 5))
Y = np.repeat(np.arange(4), 10)
Y_NAN = np.where(np.arange(40) == 0, np.nan, Y.astype(float))
SUPPORT = X3[:8]

TINY_LEARNED = dict(
    network=NetworkOptions(d_model=8, n_heads=2, n_layers=1),
    training=TrainingOptions(
        max_iter=3, batch_tasks=2, support_size=4, n_targets=4, validation_interval=1
    ),
    solver=SolverOptions(n_steps=4),
)


def _best() -> BestClassicalSampler:
    return BestClassicalSampler(
        [LedoitWolfSampler(), PooledGaussianSampler()],
        support_size=3,
        n_splits=2,
        n_repeats=1,
        n_generated=10,
        random_state=0,
    )


#: name -> (a fresh estimator, does it take labels, (owner, attribute, call) of a function
#: that its fit calls half way, after the input's validation, to raise at that call)
CASES = {
    "nw": (
        lambda: NWFlowSampler(solver=SolverOptions(n_steps=4), random_state=0),
        False,
        (nw, "fit_projection", 1),
    ),
    "nw-labelled": (  # sigma_min chosen on the classes: fits clones, then itself
        lambda: NWFlowSampler(solver=SolverOptions(n_steps=4), random_state=0),
        True,
        (nw, "fit_projection", 3),
    ),
    "learned": (
        lambda: LearnedFlowSampler(**TINY_LEARNED, random_state=0),
        True,
        (training_module._Trainer, "step", 2),
    ),
    "ledoit-wolf": (lambda: LedoitWolfSampler(random_state=0), False, None),
    "pooled": (lambda: PooledGaussianSampler(random_state=0), True, None),
    "empirical-bayes": (lambda: EmpiricalBayesGaussianSampler(random_state=0), True, None),
    "bic-mixture": (lambda: BICGaussianMixtureSampler(random_state=0), False, None),
    "best-classical": (_best, True, (classical.BestClassicalSampler, "_fold_scores", 2)),
}
#: what a validation step sets before the fit has succeeded (sklearn's validate_data)
VALIDATION_ATTRIBUTES = {"n_features_in_", "feature_names_in_"}


def _raise_on_call(owner, name, exc, call: int = 2, returned: bool = False):
    """``owner.name`` replaced by the original that raises ``exc`` on call number ``call``
    (half way through a fit that calls it several times, else at its first call); with
    ``returned``, once that call has run (what it did to the estimator is done)."""
    original = getattr(owner, name)
    calls = []

    def planted(*args, **kwargs):
        calls.append(1)
        if len(calls) < call:
            return original(*args, **kwargs)
        if returned:
            original(*args, **kwargs)
        raise exc("planted")

    return planted


def _plant(monkeypatch, name: str, est, exc) -> None:
    """Make ``est.fit`` raise ``exc`` half way (after validating its input)."""
    where = CASES[name][2]
    returned = where is None
    if where is None:  # once the arm has computed its statistics of the classes
        where = (type(est), "_fit_classes", 1)
    owner, attr, call = where
    monkeypatch.setattr(owner, attr, _raise_on_call(owner, attr, exc, call, returned))


def _fitted(name: str):
    make, labelled, _ = CASES[name]
    est = make()
    return est.fit(X3, Y) if labelled else est.fit(X3)


def _draw(est) -> np.ndarray:
    return est.sample(6, support=SUPPORT, random_state=0)


def _assert_same_state(est, before: dict, allowed: set = frozenset()) -> None:
    now = vars(est)
    assert set(now) - allowed == set(before) - allowed
    changed = [k for k in before if k not in allowed and now[k] is not before[k]]
    assert not changed, f"attributes replaced by the failed fit: {changed}"


def _bad_fits(name: str) -> list:
    """Fits at a new width that raise after the width was read (labels checked later)."""
    bad = [(X5, Y[:-1])]  # one label too few
    if name in ("nw", "nw-labelled", "learned"):
        bad.append((X5, Y_NAN))  # a NaN label
    return bad


@pytest.mark.exactness
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_refit_that_fails_on_bad_input_changes_nothing(name):
    est = _fitted(name)
    expected = _draw(est)  # (sampling may fill caches: drawn before the snapshot)
    before = dict(vars(est))
    for X, y in _bad_fits(name):
        with pytest.raises(ValueError):
            est.fit(X, y)
        _assert_same_state(est, before)
    assert est.n_features_in_ == 3
    np.testing.assert_array_equal(_draw(est), expected)


@pytest.mark.exactness
@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_refit_interrupted_half_way_changes_nothing(name, exc, monkeypatch):
    est = _fitted(name)
    expected = _draw(est)
    before = dict(vars(est))
    with monkeypatch.context() as patch:
        _plant(patch, name, est, exc)
        with pytest.raises(exc, match="planted"):
            est.fit(X5, Y) if CASES[name][1] else est.fit(X5)
    _assert_same_state(est, before)
    np.testing.assert_array_equal(_draw(est), expected)


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_failed_first_fit_leaves_the_sampler_unfitted(name, exc, monkeypatch):
    est = CASES[name][0]()
    with monkeypatch.context() as patch:
        _plant(patch, name, est, exc)
        with pytest.raises(exc, match="planted"):
            est.fit(X3, Y) if CASES[name][1] else est.fit(X3)
    with pytest.raises(ValueError):
        est.fit(X5, Y[:-1])
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    with pytest.raises(NotFittedError):
        _draw(est)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_fit_itself_sets_its_attributes_at_the_end(name, monkeypatch):
    """Without the guard (the undecorated fit), a fit interrupted half way has changed only
    what the input's validation sets: the results are computed in locals first."""
    est = _fitted(name)
    before = dict(vars(est))
    unguarded = type(est).fit.__wrapped__
    _plant(monkeypatch, name, est, RuntimeError)
    with pytest.raises(RuntimeError, match="planted"):
        unguarded(est, X5, Y) if CASES[name][1] else unguarded(est, X5)
    _assert_same_state(est, before, allowed=VALIDATION_ATTRIBUTES)


# -- warm starts ------------------------------------------------------------------------------
def _weights(est) -> dict:
    return {k: v.detach().clone() for k, v in est.model_.state_dict().items()}


def _assert_same_weights(est, weights: dict) -> None:
    now = est.model_.state_dict()
    assert set(now) == set(weights)
    for k, v in weights.items():
        assert torch.equal(now[k], v), k


def _prior() -> LearnedFlowSampler:
    prior = LearnedFlowSampler.from_pretrained("general-16", n_features=3)
    return prior.set_params(
        random_state=0, training__max_iter=6, training__batch_tasks=2, training__n_targets=8
    )


@pytest.mark.exactness
def test_an_interrupted_fine_tune_of_a_prior_keeps_its_weights(monkeypatch):
    prior = _prior()
    assert prior.warm_start  # fit fine-tunes the shipped weights
    weights, n_iter, expected = _weights(prior), prior.n_iter_, _draw(prior)
    before = dict(vars(prior))
    with monkeypatch.context() as patch:
        owner = training_module._Trainer
        patch.setattr(owner, "step", _raise_on_call(owner, "step", KeyboardInterrupt, call=4))
        with pytest.raises(KeyboardInterrupt):
            prior.fit(X3, Y)
    _assert_same_state(prior, before)
    _assert_same_weights(prior, weights)
    assert prior.n_iter_ == n_iter
    np.testing.assert_array_equal(_draw(prior), expected)
    # the same fine-tune, not interrupted, does change them
    prior.fit(X3, Y)
    assert prior.n_iter_ == n_iter + 6
    changed = prior.model_.state_dict()
    assert any(not torch.equal(changed[k], v) for k, v in weights.items())
    assert not np.array_equal(_draw(prior), expected)


@pytest.mark.exactness
def test_an_interrupted_warm_start_does_not_advance_its_generators(monkeypatch):
    """A warm start continues the fit's task and noise generators and optimizer: an
    interrupted one leaves them as they were, so the next warm start is the one it would
    have been."""

    def make():
        return LearnedFlowSampler(**TINY_LEARNED, warm_start=True, random_state=0).fit(X3, Y)

    est, twin = make(), make()  # (a copy would lose the generators: they are not pickled)
    weights, n_iter = _weights(est), est.n_iter_
    with monkeypatch.context() as patch:
        owner = training_module._Trainer
        patch.setattr(owner, "step", _raise_on_call(owner, "step", KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            est.fit(X3, Y)
    _assert_same_weights(est, weights)
    assert est.n_iter_ == n_iter
    est.fit(X3, Y), twin.fit(X3, Y)
    assert est.n_iter_ == twin.n_iter_ == n_iter + 3
    np.testing.assert_array_equal(_draw(est), _draw(twin))


@pytest.mark.exactness
def test_a_warm_start_on_data_of_another_width_changes_nothing():
    est = LearnedFlowSampler(**TINY_LEARNED, warm_start=True, random_state=0).fit(X3, Y)
    before, expected = dict(vars(est)), _draw(est)
    with pytest.raises(ValueError, match="warm_start=True but the data have 5 features"):
        est.fit(X5, Y)
    _assert_same_state(est, before)
    np.testing.assert_array_equal(_draw(est), expected)
