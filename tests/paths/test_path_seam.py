"""The path as a parameter: NWFlowSampler(path=...) is stored as given and used everywhere."""

import numpy as np
import pytest
from sklearn.base import clone

from skflow import NWFlowSampler, SigmaMinSearch
from skflow._validation import InvalidParameterError
from skflow.field import NWField
from skflow.paths import OTPath


def _support(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((12, 2)), rng.standard_normal((7, 2))


@pytest.mark.exactness
def test_a_given_path_wins_over_sigma_min():
    S, X = _support()
    given = NWFlowSampler(sigma_min=0.3, path=OTPath(0.05), random_state=0).fit(S)
    plain = NWFlowSampler(sigma_min=0.05, random_state=0).fit(S)
    assert given.path_ == OTPath(0.05) and given.kde_bandwidth_ == 0.05
    np.testing.assert_array_equal(given.velocity(X, 0.7), plain.velocity(X, 0.7))
    np.testing.assert_array_equal(given.sample(9), plain.sample(9))
    np.testing.assert_array_equal(given.score_samples(X), plain.score_samples(X))
    # the change of variables (a float bandwidth) receives the path too
    a = NWFlowSampler(1.3, 0.3, path=OTPath(0.2)).fit(S[:5]).score_samples(X[:3])
    b = NWFlowSampler(1.3, 0.2).fit(S[:5]).score_samples(X[:3])
    np.testing.assert_array_equal(a, b)


def test_the_path_parameter_is_stored_as_given_and_clones():
    path = OTPath(0.05)
    sampler = NWFlowSampler(path=path)
    assert sampler.get_params()["path"] is path
    assert clone(sampler).get_params()["path"] == path
    assert NWFlowSampler().get_params()["path"] is None


def test_bad_paths_are_refused():
    S, _ = _support()
    with pytest.raises(InvalidParameterError, match="GaussianPath"):
        NWFlowSampler(path=0.05).fit(S)


def test_a_path_carries_its_own_terminal_noise():
    """With ``path`` given, ``sigma_min`` (the default ``"auto"`` or a float) is ignored: the
    flow is the path's, in data units (no per-support frame)."""
    S, X = _support()
    ref = NWField(S, path=OTPath(0.05)).velocity(X, 0.4)
    for sigma_min in ("auto", 0.3):
        s = NWFlowSampler(sigma_min=sigma_min, path=OTPath(0.05)).fit(S)
        assert s.path_ == OTPath(0.05) and s.kde_bandwidth_ == pytest.approx(0.05)
        np.testing.assert_allclose(s.velocity(X, 0.4), ref, rtol=1e-12)


def test_with_a_path_fit_with_labels_selects_nothing():
    S, _ = _support()
    y = np.repeat([0, 1, 2], 4)
    sampler = NWFlowSampler(path=OTPath(0.05), sigma_min_search=SigmaMinSearch(cv=3)).fit(S, y)
    assert not hasattr(sampler, "sigma_min_") and sampler.path_ == OTPath(0.05)


@pytest.mark.exactness
def test_the_field_takes_a_path_object():
    S, X = _support()
    np.testing.assert_array_equal(
        NWField(S, sigma_min=0.5, path=OTPath(0.05)).velocity(X, 0.4),
        NWField(S, sigma_min=0.05).velocity(X, 0.4),
    )


@pytest.mark.exactness
def test_the_sampler_builds_its_ot_path_once_per_terminal_noise(monkeypatch):
    """Every call of a fitted NWFlowSampler reuses one OT path per frame ``sigma`` (built
    once, not per call), and a support of another size gets its own (``"auto"``)."""
    from skflow.samplers import nw as nw_module

    built = []
    real = nw_module.as_path
    monkeypatch.setattr(nw_module, "as_path", lambda *a: built.append(a) or real(*a))
    S, X = _support()
    sampler = NWFlowSampler(sigma_min="auto", random_state=0).fit(S)
    path = sampler.path_
    sampler.velocity(X, 0.4)
    sampler.sample(5)
    sampler.score_samples(X)
    assert sampler.path_ is path and len(built) == 1
    small = S[:5]  # another support size: another frame sigma, another path
    fresh = NWFlowSampler(sigma_min="auto").fit(small)
    np.testing.assert_array_equal(sampler.velocity(X, 0.4, support=small), fresh.velocity(X, 0.4))
    assert len(built) == 3 and sampler.path_ is path  # one for fresh, one for small
    sampler.set_params(sigma_min=0.2)  # a new sigma without refitting: a new path
    assert sampler.path_ == OTPath(0.2)
    np.testing.assert_array_equal(
        sampler.velocity(X, 0.4), NWFlowSampler(sigma_min=0.2).fit(S).velocity(X, 0.4)
    )


def test_a_given_path_is_used_as_is():
    S, _ = _support()
    path = OTPath(0.05)
    sampler = NWFlowSampler(path=path).fit(S)
    assert sampler.path_ is path
