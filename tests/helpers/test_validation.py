"""The shared validation layer: one exception and message per mistake, one random-state policy."""

import numpy as np
import pytest

from skflow import SolverOptions
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


def test_check_times():
    np.testing.assert_array_equal(check_times(np.float32(0.5)), 0.5)
    assert check_times([0, 1]).dtype == np.float64
    with pytest.raises(ValueError, match=r"t must lie in \[0, 1\]"):
        check_times([0.5, 1.5])
    with pytest.raises(ValueError, match="scalar or a 1-D array"):
        check_times(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="real-valued"):
        check_times(np.array([0.5j]))


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
            lambda a: LearnedFlowSampler(max_iter=0).fit(a),
            lambda a: fitted.sample(2, support=a),
            lambda a: fitted.velocity(a, 0.5),
        ):
            with pytest.raises(ValueError, match=word) as info:
                call(bad)
            assert len(str(info.value)) < 200
