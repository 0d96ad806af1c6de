"""Tests of skflow._validation: the checks, and one validation layer behind every entry point.

The shared validation layer: one exception and message per mistake, one random-state policy.

One validation layer: the same bad parameter fails the same way in every public entry point.

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
    TrainingOptions,
)
from skflow._validation import (
    InvalidParameterError,
    as_generator,
    check_choice,
    check_int,
    check_random_state,
    check_real,
    check_sigma_min,
    check_times,
)
from skflow.diagnostics import diagnose, neff_along_path
from skflow.field import NWField, nw_velocity
from skflow.inspection import AttentionRecorder
from skflow.metrics import mmd2, mmd2_test
from skflow.nn import CrossAttentionVelocity, MultiHeadNW, NWAttentionHead
from skflow.paths import OTPath
from skflow.tasks import ClassTasks, GaussianMixtureTasks, SphericalShellTasks

#: The training of an untrained LearnedFlowSampler (the plug-in NW field).
UNTRAINED = TrainingOptions(max_iter=0)


@pytest.mark.parametrize("bad", [1.5, "3", True, None, 0, -2, np.float64(2.0)])
def test_check_int_refuses_with_one_type(bad):
    with pytest.raises(InvalidParameterError, match=r"n_steps must be an integer >= 1, got"):
        check_int(bad, "n_steps")
    # the same mistake is both a ValueError and a TypeError, whichever the caller catches
    assert issubclass(InvalidParameterError, ValueError)
    assert issubclass(InvalidParameterError, TypeError)


def test_check_int_accepts_numpy_ints_and_none_when_allowed():
    assert check_int(np.int64(3), "k") == 3 and type(check_int(np.int64(3), "k")) is int
    assert check_int(None, "k", allow_none=True) is None
    assert check_int(0, "k", minimum=0) == 0


@pytest.mark.parametrize(
    "value, kwargs, ok",
    [
        (0.0, {"low": 0.0}, True),
        (0.0, {"low": 0.0, "low_open": True}, False),
        (1.0, {"high": 1.0, "high_open": True}, False),
        (float("nan"), {}, False),
        (float("inf"), {}, False),
        (True, {}, False),
        (np.float32(0.25), {"low": 0.0, "high": 1.0}, True),
    ],
)
def test_check_real_bounds(value, kwargs, ok):
    if ok:
        assert check_real(value, "x", **kwargs) == float(value)
    else:
        with pytest.raises(InvalidParameterError, match="x must be a finite real number"):
            check_real(value, "x", **kwargs)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 2, "0.1", None])
def test_sigma_min(bad):
    with pytest.raises(InvalidParameterError, match=r"sigma_min must be .* in \(0, 1\)"):
        check_sigma_min(bad)
    assert check_sigma_min(0.5) == 0.5


def test_check_choice():
    with pytest.raises(InvalidParameterError, match=r"solver must be one of \('a', 'b'\)"):
        check_choice("c", "solver", ("a", "b"))


@pytest.mark.exactness
def test_clamp_times_holds_each_end_at_its_own_value():
    """Times past an end are held at that end: ``t > 1`` at 1, ``t < 0`` at 0 (the frozen
    extension the samplers document for third-party adaptive solvers)."""
    from skflow._validation import clamp_times

    inf = float("inf")
    got = clamp_times(
        np.array([-0.7, -1e-12, 0.0, 0.4, 1.0, 1.0 + 1e-12, 1.5, 40.0]), tolerance=inf
    )
    np.testing.assert_array_equal(got, [0.0, 0.0, 0.0, 0.4, 1.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(clamp_times(np.array([1.0 + 1e-10, -1e-10])), [1.0, 0.0])
    with pytest.raises(ValueError, match="got 1.5"):
        clamp_times(np.array([0.5, 1.5]))


@pytest.mark.exactness
def test_check_times():
    np.testing.assert_array_equal(check_times(np.float32(0.5)), 0.5)
    assert check_times([0, 1]).dtype == np.float64
    with pytest.raises(ValueError, match=r"t must lie in \[0, 1\]"):
        check_times([0.5, 1.5])
    with pytest.raises(ValueError, match="scalar or a 1-D array"):
        check_times(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="real-valued"):
        check_times(np.array([0.5j]))


@pytest.mark.exactness
def test_random_state_policy_is_reproducible():
    # ints: sklearn's RandomState stream; Generators accepted and advanced, not copied
    assert check_random_state(3).randint(1000) == np.random.RandomState(3).randint(1000)
    g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
    a = check_random_state(g1).randint(1000)
    assert a == check_random_state(g2).randint(1000)
    assert g1.bit_generator.state != np.random.default_rng(7).bit_generator.state  # advanced
    gen = np.random.default_rng(1)
    assert as_generator(gen) is gen
    np.testing.assert_array_equal(as_generator(4).random(3), np.random.default_rng(4).random(3))
    rs = np.random.RandomState(0)
    assert as_generator(rs).random() == as_generator(np.random.RandomState(0)).random()
    for bad in ("0", 1.5, True, -1):
        with pytest.raises(InvalidParameterError, match="random_state must be"):
            as_generator(bad)
    for bad in ("0", 1.5, True):
        with pytest.raises(InvalidParameterError, match="random_state must be"):
            check_random_state(bad)


def test_declared_constraints_keep_the_check_functions_messages():
    """The declarative constraints are the check functions with their bounds bound."""
    from skflow._validation import (
        choice,
        either,
        integer,
        optional,
        random_seed,
        real,
        validate_parameters,
    )

    constraints = {
        "n_steps": integer(),
        "chunk_size": optional(integer()),
        "rtol": real(low=0.0, low_open=True),
        "solver": choice(lambda: ("euler", "heun")),
        "tol": either("auto", real(low=0.0)),
        "random_state": random_seed(),
    }
    good = {"n_steps": 3, "chunk_size": None, "rtol": 1e-5, "solver": "heun", "tol": "auto",
            "random_state": np.random.default_rng(0)}  # fmt: skip
    validate_parameters(good, constraints)
    bad = {
        "n_steps": (0, r"^n_steps must be an integer >= 1, got 0\.$"),
        "chunk_size": (0, r"^chunk_size must be an integer >= 1, got 0\.$"),
        "rtol": (0.0, r"^rtol must be a finite real number in \(0, inf\)"),
        "solver": ("rk9", r"^solver must be one of \('euler', 'heun'\)"),
        "tol": ("x", r"^tol must be a finite real number"),
        "random_state": (-1, r"^random_state must be None, a non-negative int"),
    }
    for name, (value, message) in bad.items():
        with pytest.raises(InvalidParameterError, match=message):
            validate_parameters({**good, name: value}, constraints)
    with pytest.raises(KeyError, match="no declared constraint"):
        validate_parameters({**good, "undeclared": 1}, constraints)


@pytest.mark.parametrize("name", ["NWFlowSampler", "LearnedFlowSampler"])
def test_parameter_groups_of_the_docstring_name_every_parameter_once(name):
    """The class docstring's "Parameter groups" paragraph (model, solver, execution, ...)
    lists every constructor parameter exactly once."""
    import re

    import skflow

    cls = getattr(skflow, name)
    paragraph = cls.__doc__.split("**Parameter groups.**")[1].split("\n\n")[0]
    listed = re.findall(r"``(\w+)``", paragraph)
    params = list(cls().get_params(deep=False))
    assert sorted(set(listed)) == sorted(params)
    assert len(listed) == len(set(listed)) == len(params)


def test_check_data_restates_infinity_and_complex_messages():
    """Infinite and complex input get skflow's own short messages (issue 34), in the style of
    the NaN one; complex input no longer prints the whole array. Both stay ValueError."""
    from sklearn.utils import check_array

    from skflow._validation import check_data

    inf = np.ones((400, 3))
    inf[5, 1] = np.inf
    with pytest.raises(ValueError, match="support contains infinity") as info:
        check_data(check_array, inf, input_name="support")
    assert "finite values" in str(info.value) and "dtype(" not in str(info.value)
    with pytest.raises(ValueError, match=r"not supported: input X has dtype complex128;") as info:
        check_data(check_array, np.ones((400, 3)) * 1j)
    assert "np.real(X)" in str(info.value) and len(str(info.value)) < 150
    with pytest.raises(ValueError, match="contains NaN"):  # unchanged
        check_data(check_array, np.full((2, 2), np.nan))
    # through the estimators (fit, a new support, a call)
    from skflow import LearnedFlowSampler, NWFlowSampler

    fitted = NWFlowSampler(solver=SolverOptions(n_steps=2)).fit(
        np.random.default_rng(0).normal(size=(6, 3))
    )
    for bad, word in ((inf, "contains infinity"), (np.ones((4, 3)) * (1 + 1j), "dtype complex")):
        for call in (
            lambda a: NWFlowSampler().fit(a),
            lambda a: LearnedFlowSampler(training=UNTRAINED).fit(a),
            lambda a: fitted.sample(2, support=a),
            lambda a: fitted.velocity(a, 0.5),
        ):
            with pytest.raises(ValueError, match=word) as info:
                call(bad)
            assert len(str(info.value)) < 200


S = np.random.default_rng(0).standard_normal((10, 2))
X = np.random.default_rng(1).standard_normal((6, 2))


def _gmm_velocity(sigma_min):
    tasks = GaussianMixtureTasks(n_features=2)
    _, Q, params = tasks.sample_tasks(1, 3, 5, random_state=0, return_params=True)
    return tasks.velocity(Q, 0.5, params, sigma_min=sigma_min)


def _learned_n_steps(n_steps):
    solver = SolverOptions(n_steps=n_steps)
    return LearnedFlowSampler(solver=solver, training=UNTRAINED).fit(S)


def _recorder(random_state):
    with AttentionRecorder(torch.nn.Linear(2, 2), random_state=random_state):
        pass


#: parameter -> [(entry point name, callable taking the bad value), ...]
ENTRY_POINTS = {
    "sigma_min": [
        ("NWFlowSampler", lambda v: NWFlowSampler(sigma_min=v).fit(S)),
        (
            "LearnedFlowSampler",
            lambda v: LearnedFlowSampler(sigma_min=v, training=UNTRAINED).fit(S),
        ),
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
        ("LearnedFlowSampler", _learned_n_steps),
        ("diagnose", lambda v: diagnose(S, n_steps=v)),
        ("neff_along_path", lambda v: neff_along_path(S, n_steps=v)),
    ],
    "n_samples": [
        ("NWFlowSampler.sample", lambda v: NWFlowSampler().fit(S).sample(v)),
        (
            "LearnedFlowSampler.sample",
            lambda v: LearnedFlowSampler(training=UNTRAINED).fit(S).sample(v),
        ),
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
        (
            "LearnedFlowSampler",
            lambda v: LearnedFlowSampler(random_state=v, training=UNTRAINED).fit(S),
        ),
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
    return LearnedFlowSampler(
        training=UNTRAINED, solver=SolverOptions(n_steps=2), random_state=0
    ).fit(S)


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
        [{"solver": "bogus"}, {"training": 5}, {"device": "tpu"}, {"sigma_min": 2.0}],
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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_check_data_keeps_the_float_dtype_of_a_torch_tensor(dtype):
    """scikit-learn reads no Torch dtype and made every tensor float64; a tensor now keeps
    float32 where a NumPy array of that dtype would (and its values)."""
    import torch
    from sklearn.utils import check_array

    from skflow._validation import check_data

    t = torch.arange(6, dtype=getattr(torch, dtype)).reshape(3, 2) / 7
    out = check_data(check_array, t, dtype=[np.float64, np.float32])
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, t.numpy())
