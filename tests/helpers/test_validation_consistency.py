"""One validation layer: the same bad parameter fails the same way in every public entry point.

Every case passes one bad value of one parameter to a public estimator, module or function and
expects :class:`skflow._validation.InvalidParameterError` (a ``ValueError`` and a
``TypeError``) with a message that starts with the parameter's name. Only the public API is
used, so the cases cover every module that takes the parameter.
"""

import numpy as np
import pytest
import torch

from skflow import (
    FlowProjection,
    KernelOptions,
    LearnedFlowSampler,
    NWFlowSampler,
    SolverOptions,
)
from skflow.diagnostics import diagnose, neff_along_path
from skflow.exceptions import InvalidParameterError
from skflow.field import NWField, nw_velocity
from skflow.inspection import AttentionRecorder
from skflow.metrics import mmd2, mmd2_test
from skflow.nn import CrossAttentionVelocity, MultiHeadNW, NWAttentionHead
from skflow.paths import OTPath
from skflow.tasks import ClassTasks, GaussianMixtureTasks, SphericalShellTasks

S = np.random.default_rng(0).standard_normal((10, 2))
X = np.random.default_rng(1).standard_normal((6, 2))


def _gmm_velocity(sigma_min):
    tasks = GaussianMixtureTasks(n_features=2)
    _, Q, params = tasks.sample_tasks(1, 3, 5, random_state=0, return_params=True)
    return tasks.velocity(Q, 0.5, params, sigma_min=sigma_min)


def _recorder(random_state):
    with AttentionRecorder(torch.nn.Linear(2, 2), random_state=random_state):
        pass


#: parameter -> [(entry point name, callable taking the bad value), ...]
ENTRY_POINTS = {
    "sigma_min": [
        ("NWFlowSampler", lambda v: NWFlowSampler(sigma_min=v).fit(S)),
        ("LearnedFlowSampler", lambda v: LearnedFlowSampler(sigma_min=v, max_iter=0).fit(S)),
        ("FlowProjection", lambda v: FlowProjection(sigma_min=v, n_iter=1).fit(S)),
        ("NWAttentionHead", lambda v: NWAttentionHead(sigma_min=v)),
        ("MultiHeadNW", lambda v: MultiHeadNW(2, sigma_min=v)),
        ("CrossAttentionVelocity", lambda v: CrossAttentionVelocity(2, sigma_min=v)),
        ("NWField", lambda v: NWField(S, sigma_min=v)),
        ("nw_velocity", lambda v: nw_velocity(X, S, 0.5, sigma_min=v)),
        ("OTPath", lambda v: OTPath(v)),
        ("diagnose", lambda v: diagnose(S, sigma_min=v)),
        ("neff_along_path", lambda v: neff_along_path(S, sigma_min=v)),
        ("GaussianMixtureTasks.velocity", _gmm_velocity),
    ],
    "n_steps": [
        ("NWFlowSampler", lambda v: NWFlowSampler(solver=SolverOptions(n_steps=v)).fit(S)),
        ("LearnedFlowSampler", lambda v: LearnedFlowSampler(n_steps=v, max_iter=0).fit(S)),
        ("diagnose", lambda v: diagnose(S, n_steps=v)),
        ("neff_along_path", lambda v: neff_along_path(S, n_steps=v)),
    ],
    "n_samples": [
        ("NWFlowSampler.sample", lambda v: NWFlowSampler().fit(S).sample(v)),
        ("LearnedFlowSampler.sample", lambda v: LearnedFlowSampler(max_iter=0).fit(S).sample(v)),
    ],
    "n_iter": [
        ("FlowProjection", lambda v: FlowProjection(n_iter=v).fit(S)),
    ],
    "n_tasks": [
        ("GaussianMixtureTasks", lambda v: GaussianMixtureTasks(2).sample_tasks(v, 3, 4)),
        ("SphericalShellTasks", lambda v: SphericalShellTasks(2).sample_tasks(v, 3, 4)),
    ],
    "n_permutations": [("mmd2_test", lambda v: mmd2_test(S, X, n_permutations=v))],
    "chunk_size": [("mmd2", lambda v: mmd2(S, X, chunk_size=v))],
    "random_state": [
        ("NWFlowSampler", lambda v: NWFlowSampler(random_state=v).fit(S).sample(2)),
        ("NWFlowSampler.sample", lambda v: NWFlowSampler().fit(S).sample(2, random_state=v)),
        ("LearnedFlowSampler", lambda v: LearnedFlowSampler(random_state=v, max_iter=0).fit(S)),
        ("FlowProjection", lambda v: FlowProjection(random_state=v, n_iter=1).fit(S)),
        ("GaussianMixtureTasks", lambda v: GaussianMixtureTasks(2).sample_tasks(2, 3, 4, v)),
        ("SphericalShellTasks", lambda v: SphericalShellTasks(2).sample_task(3, 4, v)),
        (
            "ClassTasks",
            lambda v: ClassTasks(np.vstack([S, S]), np.repeat([0, 1], 10), random_state=v).classes_,
        ),
        ("diagnose", lambda v: diagnose(S, random_state=v)),
        ("mmd2_test", lambda v: mmd2_test(S, X, random_state=v)),
        ("AttentionRecorder", _recorder),
    ],
}

#: parameter -> bad values (each a different mistake: wrong type, out of range, a bool)
BAD_VALUES = {
    "sigma_min": [0, 0.0, 1.0, -0.5, True, "0.01", float("nan")],
    "n_steps": [1.5, 0, True, "10"],
    "n_samples": [1.5, 0, True],
    "n_iter": [1.5, 0, True],
    "n_tasks": [1.5, 0, True],
    "n_permutations": [1.5, 0, True],
    "chunk_size": [1.5, 0, True],
    "random_state": ["seed", 1.5, -1, True],
}


def _cases():
    for param, entries in ENTRY_POINTS.items():
        for entry in entries:
            name, func, marks = (
                (entry.values[0], entry.values[1], entry.marks)
                if hasattr(entry, "values")
                else (entry[0], entry[1], ())
            )
            for bad in BAD_VALUES[param]:
                yield pytest.param(param, func, bad, marks=marks, id=f"{param}-{name}-{bad!r}")


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("param", "func", "bad"), list(_cases()))
def test_same_mistake_same_error(param, func, bad):
    with pytest.raises(InvalidParameterError, match=rf"^{param}\b.* must be"):
        func(bad)


def test_invalid_parameter_error_is_both_value_and_type_error():
    # code written against either exception keeps catching every parameter mistake
    for caught in (ValueError, TypeError):
        with pytest.raises(caught, match="n_steps of SolverOptions must be"):
            NWFlowSampler(solver=SolverOptions(n_steps=1.5)).fit(S)


def test_invalid_parameter_error_is_public():
    from skflow import _validation

    assert InvalidParameterError is _validation.InvalidParameterError


def _learned():
    return LearnedFlowSampler(max_iter=0, n_steps=2, random_state=0).fit(S)


#: (estimator factory, bad parameter values, public calls that run after set_params)
AFTER_SET_PARAMS = [
    (
        lambda: NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=2)).fit(S),
        [
            {"engine": "bogus"},
            {"kernel": KernelOptions},
            {"solver": "bogus"},
            {"kernel": "foo"},
            {"backend": "foo"},
            {"device": "tpu"},
            {"density": "tight"},
        ],
        [
            lambda s: s.sample(2),
            lambda s: s.sample_trajectories(2),
            lambda s: s.score(X),
            lambda s: s.velocity(X, 0.5),
            lambda s: s.score_samples(X),
        ],
    ),
    (
        _learned,
        [{"solver": "bogus"}, {"n_steps": 0}, {"device": "tpu"}, {"sigma_min": 2.0}],
        [
            lambda s: s.sample(2),
            lambda s: s.sample_trajectories(2),
            lambda s: s.score(X),
            lambda s: s.velocity(X, 0.5),
            lambda s: s.attention_weights(X, 0.5),
            lambda s: s.sample_batch(2, S[None]),
        ],
    ),
]


@pytest.mark.parametrize(
    ("make", "params", "call"),
    [
        pytest.param(make, params, call, id=f"{type(make()).__name__}-{list(params)[0]}-{i}")
        for make, bad, calls in AFTER_SET_PARAMS
        for params in bad
        for i, call in enumerate(calls)
    ],
)
def test_every_public_call_validates_after_set_params(make, params, call):
    """A parameter set after fit is checked by each public call, as in fit."""
    sampler = make().set_params(**params)
    name = list(params)[0]
    with pytest.raises(InvalidParameterError, match=rf"^{name} must be"):
        call(sampler)


@pytest.mark.parametrize("params", [{"kernel": "foo"}, {"backend": "foo"}, {"kernel": -1}])
def test_choice_parameters_raise_invalid_parameter_error_at_fit(params):
    name = list(params)[0]
    with pytest.raises(InvalidParameterError, match=rf"^{name} must be"):
        NWFlowSampler(**params).fit(S)
