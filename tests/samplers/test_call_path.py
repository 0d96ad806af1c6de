"""One straight path from each public call to the field (issue #23).

Every public method of the samplers checks the parameters, the fitted state and the backend
once per call, prepares the field of a support once, and reports the pruned engine's error
bound as a value (``sampling_error_bound_`` of that call only). The counts are taken by
wrapping the shared helpers the methods go through.
"""

import numpy as np
import pytest

from skflow import (
    EngineOptions,
    LearnedFlowSampler,
    NWFlowSampler,
    SolverOptions,
    TrainingOptions,
)
from skflow import field as F
from skflow.samplers import _base
from skflow.samplers._solve import ADAPTIVE_MAX_STEPS, FlowSolveError, solve_adaptive

S = np.random.default_rng(0).standard_normal((12, 2))
X = np.random.default_rng(1).standard_normal((5, 2))

NW_CALLS = {
    "sample": lambda s: s.sample(3),
    "sample_batch_of_supports": lambda s: s.sample(3, support=np.stack([S, S + 1.0])),
    "sample_list_of_supports": lambda s: s.sample(3, support=[S, S[:5]]),
    "sample_trajectories": lambda s: s.sample_trajectories(3),
    "score": lambda s: s.score(X),
    "few_shot_score": lambda s: s.score(np.vstack([S, X]), np.repeat([0, 1], [12, 5])),
    "velocity": lambda s: s.velocity(X, 0.5),
    "weights": lambda s: s.weights(X, 0.5),
    "effective_sample_size": lambda s: s.effective_sample_size(X, 0.5),
    "divergence": lambda s: s.divergence(X, 0.5),
    "score_samples": lambda s: s.score_samples(X),
    "log_density_with_error": lambda s: s.log_density_with_error(X),
}


def _counting(monkeypatch, owner, name):
    calls = []
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.mark.parametrize("call", NW_CALLS.values(), ids=list(NW_CALLS))
def test_nw_checks_run_once_per_public_call(monkeypatch, call):
    sampler = NWFlowSampler(bandwidth=0.8, random_state=0, solver=SolverOptions(n_steps=4)).fit(S)
    validated = _counting(monkeypatch, _base, "validate_parameters")
    fitted = _counting(monkeypatch, _base, "check_is_fitted")
    backends = _counting(monkeypatch, NWFlowSampler, "_backend")
    call(sampler)
    assert (len(validated), len(fitted), len(backends)) == (1, 1, 1)


@pytest.mark.parametrize("call", ["velocity", "score_samples", "log_density_with_error"])
def test_nw_prepares_one_field_per_evaluation_or_density(monkeypatch, call):
    """score_samples solves twice (two tolerances) with one prepared field."""
    sampler = NWFlowSampler(bandwidth=0.8).fit(S)
    built = _counting(monkeypatch, F, "NWField")
    NW_CALLS[call](sampler)
    assert len(built) == 1


def test_sampling_prepares_one_field_per_support(monkeypatch):
    sampler = NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=4)).fit(S)
    built = _counting(monkeypatch, F, "NWField")
    sampler.sample(3, support=[S, S[:5], S[:7]], random_state=0)
    assert len(built) == 3


def test_learned_checks_run_once_per_public_call(monkeypatch):
    sampler = LearnedFlowSampler(
        training=TrainingOptions(max_iter=0), solver=SolverOptions(n_steps=2), random_state=0
    ).fit(S)
    calls = {
        "sample": lambda s: s.sample(2),
        "sample_batch": lambda s: s.sample_batch(2, S[None]),
        "velocity": lambda s: s.velocity(X, 0.5),
        "attention_weights": lambda s: s.attention_weights(X, 0.5),
        "score": lambda s: s.score(X),
    }
    for name, call in calls.items():
        validated = _counting(monkeypatch, _base, "validate_parameters")
        fitted = _counting(monkeypatch, _base, "check_is_fitted")
        backends = _counting(monkeypatch, LearnedFlowSampler, "_backend")
        call(sampler)
        assert (len(validated), len(fitted), len(backends)) == (1, 1, 1), name
        monkeypatch.undo()


@pytest.mark.parametrize("estimator", [NWFlowSampler(), LearnedFlowSampler()])
def test_every_parameter_has_one_declared_constraint(estimator):
    assert set(estimator._parameter_constraints) == set(estimator.get_params(deep=False))


def test_error_bound_is_the_value_of_the_last_call():
    sampler = NWFlowSampler(engine="pruned", random_state=0, solver=SolverOptions(n_steps=4)).fit(S)
    sampler.sample(3)
    assert sampler.sampling_error_bound_ >= 0.0
    sampler.set_params(engine="dense").sample(3)
    assert not hasattr(sampler, "sampling_error_bound_")
    assert "sampling_error_bound_" not in vars(
        NWFlowSampler(solver=SolverOptions(n_steps=4)).fit(S)
    )


def test_adaptive_solve_stops_at_its_step_budget_with_a_typed_error():
    """A smooth field oscillating far faster than the interval needs ~1e5 steps: the solve
    stops at its budget with the typed error (a ValueError), not the solver's RuntimeError."""

    def fast(t, y):
        return np.cos(1e6 * np.asarray(t))[:, None] * np.ones_like(y)

    with pytest.raises(FlowSolveError, match=f"max_steps={ADAPTIVE_MAX_STEPS}") as info:
        solve_adaptive(fast, np.ones((1, 1)), (0.0, 1.0), rtol=1e-6, atol=1e-6, advice="ADVICE")
    assert isinstance(info.value, ValueError) and str(info.value).endswith("ADVICE")


def test_adaptive_solve_passes_the_fields_own_errors_through():
    """A RuntimeError of the field (e.g. Torch's) is not mistaken for a stiff solve."""

    def broken(t, y):
        raise RuntimeError("the field's own failure")

    with pytest.raises(RuntimeError, match="the field's own failure") as info:
        solve_adaptive(broken, np.ones((1, 1)), (0.0, 1.0), rtol=1e-6, atol=1e-6, advice="")
    assert not isinstance(info.value, FlowSolveError)


def test_closed_form_density_of_the_pruned_engine_builds_no_index():
    """The KDE closed form needs no pruning index (clustering the support) and takes any
    ``support_chunk_size``, which the pruned engine refuses."""
    pruned = NWFlowSampler(engine=EngineOptions("pruned", support_chunk_size=4)).fit(S)
    dense = NWFlowSampler().fit(S)
    np.testing.assert_allclose(pruned.score_samples(X), dense.score_samples(X), rtol=1e-12)
