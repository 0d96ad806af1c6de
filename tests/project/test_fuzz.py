"""Property-based fuzzing of every public entry point with arbitrary arrays (Hypothesis).

Every call gets arrays of arbitrary shape (0 rows, 0 columns, 0-D, 1-D, 3-D), dtype (bool,
int, float16/32/64, complex, object, strings) and values (NaN, inf, huge and tiny numbers),
besides mostly-valid arrays so that the valid paths are exercised too. The contract checked:

* valid inputs give a valid result: every array in it finite (with the documented exception
  of NaN correlations of constant rows in ``nw_weight_correlation``) and of the right shape;
* inputs with a definite problem raise a ``ValueError`` / ``TypeError`` whose message names
  one of their problems (:class:`Expect` says which problems each call's inputs have);
* inputs that may or may not be usable (string arrays, extreme magnitudes) do either;
* never another exception, a hang, or a non-finite result.

The last two tests check the helper itself: an estimator that always raises, or raises with
a message that names nothing, fails it.

The suite is derandomized (``derandomize=True``, no example database; ``tests/conftest.py``
imports every ``skflow`` module first, so the examples do not depend on which tests ran
before), so every run tries the same examples; ``max_examples`` keeps the default run of the
file short (the deep ``NWFlowSampler`` run, ``test_nw_flow_sampler_deep``, is marked ``slow``:
``python -m pytest -m slow tests/project/test_fuzz.py``).
``python -m pytest tests/project/test_fuzz.py -s`` prints
the number of cases tried per test and how they ended; with ``SKFLOW_FUZZ_COUNTS=PATH`` in
the environment the counts are also written to ``PATH`` as JSON, which
``python benchmarks/fuzz_counts.py --write-docs`` turns into the table of
``docs/robustness.md``.
"""

from __future__ import annotations

import json
import os
import re
import traceback
import warnings
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst
from sklearn.decomposition import PCA

from skflow import EngineOptions, NetworkOptions, NWFlowSampler, SolverOptions, TrainingOptions
from skflow.diagnostics import diagnose
from skflow.metrics import effective_sample_size, mmd2, mmd2_test, nw_weight_correlation
from skflow.pipeline import make_sampling_pipeline
from skflow.projection import FlowProjection

# Deeper local runs: SKFLOW_FUZZ_SCALE=10 multiplies every max_examples, SKFLOW_FUZZ_RANDOM=1
# draws fresh random examples instead of the fixed derandomized ones, SKFLOW_FUZZ_NO_SHRINK=1
# reports failures without shrinking them. CI uses none of them.
_SCALE = float(os.environ.get("SKFLOW_FUZZ_SCALE", "1"))
_RANDOM = bool(os.environ.get("SKFLOW_FUZZ_RANDOM"))
_PHASES = (
    [Phase.explicit, Phase.reuse, Phase.generate]
    if os.environ.get("SKFLOW_FUZZ_NO_SHRINK")
    else list(Phase)
)


# Warnings (overflow while casting the fuzzed values, numerical warnings inside the library)
# are allowed; only exceptions and non-finite results break the contract.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _fuzz(max_examples: int):
    return settings(
        max_examples=max(1, int(max_examples * _SCALE)),
        deadline=None,
        derandomize=not _RANDOM,
        database=None,
        phases=_PHASES,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


# -- outcome bookkeeping ----------------------------------------------------------------------
#: test name -> Counter of outcomes ("ok", "ValueError", "TypeError"); printed at the end.
OUTCOMES: dict[str, Counter] = defaultdict(Counter)
CASES: Counter = Counter()


#: test name -> max_examples before SKFLOW_FUZZ_SCALE (recorded by ``_fuzz``'s callers).
MAX_EXAMPLES = {
    "NWFlowSampler": 40,
    "NWFlowSampler (deep)": 250,
    "SamplingPipeline": 120,
    "FlowProjection": 60,
    "LearnedFlowSampler": 25,
    "mmd2": 300,
    "ess/correlation": 300,
    "diagnose": 100,
}


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    total_calls = sum(sum(c.values()) for c in OUTCOMES.values())
    print(f"\n[fuzz] {sum(CASES.values())} generated cases, {total_calls} checked calls")
    for name in sorted(OUTCOMES):
        counts = ", ".join(f"{k}={v}" for k, v in sorted(OUTCOMES[name].items()))
        print(f"[fuzz]   {name}: {CASES[name]} cases; calls: {counts}")
    path = os.environ.get("SKFLOW_FUZZ_COUNTS")
    if path:  # only on request (benchmarks/fuzz_counts.py): a run never writes files otherwise
        counts = {
            name: {
                "max_examples": MAX_EXAMPLES.get(name),
                "cases": CASES[name],
                "calls": dict(OUTCOMES[name]),
            }
            for name in sorted(CASES)
        }
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"scale": _SCALE, "random": _RANDOM, "tests": counts}, fh, indent=1)


def _leaves(out):
    """Arrays / numbers inside a result (tuples, dataclasses, dicts)."""
    if isinstance(out, tuple | list):
        for item in out:
            yield from _leaves(item)
    elif isinstance(out, dict):
        for item in out.values():
            yield from _leaves(item)
    elif hasattr(out, "__dataclass_fields__"):
        for name in out.__dataclass_fields__:
            yield from _leaves(getattr(out, name))
    elif isinstance(out, np.ndarray | float | int | np.floating | np.integer):
        yield out


class Expect:
    """What a call's inputs allow: the problems they have and the messages that may name them.

    ``must_fail``: regular expressions (case-insensitive) of the inputs' definite problems
    (NaN in an array, a wrong shape, an invalid parameter): the call must raise a ValueError or
    TypeError whose message matches one of them. ``may_fail``: problems that a correct
    implementation may or may not reject (a string array that may convert to numbers, data
    of extreme magnitude): the call may succeed, or raise with a matching message. Both empty:
    the inputs are valid and the call must succeed.
    """

    def __init__(self, must_fail=(), may_fail=()):
        self.must_fail, self.may_fail = tuple(must_fail), tuple(may_fail)

    def __add__(self, other):
        return Expect(self.must_fail + other.must_fail, self.may_fail + other.may_fail)

    def __repr__(self):
        return f"Expect(must_fail={self.must_fail}, may_fail={self.may_fail})"


VALID = Expect()
# What a message must say to name each problem (any of the words; case-insensitive).
NONFINITE = r"NaN|infinity|\binf\b|not finite|non-finite"
DTYPE = r"dtype|complex|convert|real|numeric|string|float|object"
SHAPE = r"2D|2-D|1D|1-D|\bdim|shape|scalar|reshape|entries"
SIZE = r"sample|feature|at least|minimum|empty|rows?\b"
FEATURES = r"features?|columns?"
MAGNITUDE = (
    r"magnitude|too large|overflow|rescale|stiff|collapsed|max_steps|diverged|not finite"
    r"|floating-point"
)


def array_expect(X, *, n_features=None, min_rows=1, batch=False):
    """The :class:`Expect` of ``X`` as a 2-D array of ``n_features`` columns (every problem
    it has: a check may report any of them first); with ``batch`` a 3-D array (B, m, d) of
    supports is also valid, and its problems are those of its rows."""
    X = np.asarray(X)
    if X.dtype.kind == "c":  # refused for its dtype, or first for its shape or size
        return Expect([DTYPE, SHAPE, SIZE, FEATURES])
    if X.dtype.kind in "OUS":  # may convert to numbers, or not, or to NaN
        return Expect(may_fail=[DTYPE, NONFINITE, SHAPE, SIZE, FEATURES, MAGNITUDE])
    if batch and X.ndim == 3:
        if X.shape[0] == 0:
            return Expect([SIZE])
        rows = X.reshape(X.shape[0] * X.shape[1], X.shape[2])
        return array_expect(rows, n_features=n_features, min_rows=min_rows)
    if X.ndim != 2:
        return Expect([SHAPE])
    problems = []
    if X.shape[0] < min_rows or X.shape[1] == 0:
        problems.append(SIZE)
    if n_features is not None and X.shape[1] != n_features:
        problems.append(FEATURES)
    with np.errstate(all="ignore"):
        Xf = X.astype(np.float64)
    if not np.all(np.isfinite(Xf)):
        problems.append(NONFINITE)
    if problems:
        return Expect(problems)
    top = np.max(np.abs(Xf)) if Xf.size else 0.0
    if top > 1e6 or 0.0 < top < 1e-6 or X.dtype == np.float16:
        return Expect(may_fail=[MAGNITUDE])  # distances over- or underflow
    return VALID


def _batched_call_expect(Q, S2, d):
    """The :class:`Expect` of queries ``Q`` in a call with a batch of supports (or of batched
    queries against one support): ``Q`` of shape (B, n, d) matching ``S2`` (B, m, d) is the
    valid form; other combinations may be refused for their shape."""
    Q = np.asarray(Q)
    if Q.ndim == 3 and S2 is not None and np.ndim(S2) == 3 and Q.shape[0] == np.shape(S2)[0]:
        return array_expect(Q, n_features=d, batch=True)
    return array_expect(Q, n_features=d, batch=True) + Expect(may_fail=[SHAPE])


#: MMD² with the median heuristic: a sample whose pairwise distances are mostly 0.
DUPLICATES = Expect(may_fail=[r"duplicate"])


def call(test: str, fn, *args, expect, shape=None, allow_nan=False, check_finite=True, **kwargs):
    """Run ``fn``; check the outcome against ``expect`` (an :class:`Expect`).

    Valid inputs must give a finite result (of ``shape``); a ValueError/TypeError must name
    one of the inputs' problems (its message matches one of their expressions). Returns the
    result, or None when it raised.
    """
    name = getattr(fn, "__name__", fn)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings are allowed, only errors matter
            out = fn(*args, **kwargs)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        allowed = expect.must_fail + expect.may_fail
        assert allowed, f"{name} raised on valid input: {type(exc).__name__}: {message}"
        assert any(re.search(p, message, re.IGNORECASE) for p in allowed), (
            f"{name} raised {type(exc).__name__}({message!r}), which names none of the "
            f"inputs' problems {allowed}"
        )
        OUTCOMES[test][type(exc).__name__] += 1
        return None
    assert not expect.must_fail, f"{name} accepted inputs with problems {expect.must_fail}"
    OUTCOMES[test]["ok"] += 1
    for leaf in _leaves(out) if check_finite else ():
        arr = np.asarray(leaf)
        if arr.dtype.kind in "biuf":
            ok = np.isfinite(arr) | (np.isnan(arr) if allow_nan else False)
            assert np.all(ok), f"non-finite result from {name}: {out!r}"
    if shape is not None:
        assert np.shape(out) == shape, (np.shape(out), shape)
    return out


# -- strategies -------------------------------------------------------------------------------
_SPECIAL = [0.0, -0.0, 1.0, 1e-300, -1e-300, 1e300, -1e300, 1e30, -1e30, 1e-30, 1e6, 1e-6,
            5e-324, np.nan, np.inf, -np.inf]  # fmt: skip
_KINDS = ["float64", "float32", "float16", "int64", "int8", "uint8", "bool", "complex128",
          "object", "str"]  # fmt: skip
_OBJECTS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-3, 3),
    st.complex_numbers(max_magnitude=10),
    st.text(max_size=2),
    st.none(),
)


@st.composite
def valid_arrays(draw, n_rows=None, n_cols=None, min_rows=1, max_rows=8):
    """2-D finite float arrays at various scales (the valid path)."""
    n = n_rows if n_rows is not None else draw(st.integers(min_rows, max_rows))
    d = n_cols if n_cols is not None else draw(st.integers(1, 4))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    scale = draw(st.sampled_from([1.0, 1.0, 1e-6, 1e6, 1e-30, 1e30, 1e-300, 1e150, 1e300]))
    base = draw(
        npst.arrays(
            np.float64,
            (n, d),
            elements=st.floats(-10, 10, allow_subnormal=False),
            unique=draw(st.booleans()),
        )
    )
    return (base * scale).astype(dtype)


@st.composite
def wild_arrays(draw, max_side=5):
    """Arbitrary shape, dtype and values."""
    shape = draw(npst.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=max_side))
    kind = draw(st.sampled_from(_KINDS))
    if kind == "object":
        return draw(npst.arrays(object, shape, elements=_OBJECTS))
    if kind == "str":
        text = st.text(st.characters(exclude_characters="\x00"), max_size=3)  # NUL: not in U3
        return draw(npst.arrays(np.dtype("U3"), shape, elements=text))
    dtype = np.dtype(kind)
    if dtype.kind == "f":
        width = 8 * dtype.itemsize
        special = [v for v in _SPECIAL if np.isnan(v) or np.isfinite(dtype.type(v)) or np.isinf(v)]
        elements = st.one_of(st.floats(width=width), st.sampled_from(special).map(dtype.type))
        return draw(npst.arrays(dtype, shape, elements=elements))
    return draw(npst.arrays(dtype, shape, elements=npst.from_dtype(dtype)))


def arrays(**kwargs):
    """Half valid 2-D float arrays, half arbitrary ones."""
    return st.one_of(valid_arrays(**kwargs), wild_arrays())


def with_bad_values(draw, X):
    """Sometimes poison a valid array with NaN / inf / a huge value."""
    if X.size and X.dtype.kind == "f" and draw(st.integers(0, 4)) == 0:
        X = X.copy()
        X.flat[draw(st.integers(0, X.size - 1))] = draw(st.sampled_from([np.nan, np.inf, 1e308]))
    return X


TIMES = st.one_of(
    st.floats(0.0, 1.0),
    st.sampled_from([0.0, 1.0, 1e-12, 1 - 1e-12]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.5, 1.5, np.nan, 1j, "0.5", None]),
    npst.arrays(np.float64, st.integers(0, 4), elements=st.floats(0.0, 1.0)),
)
COUNTS = st.one_of(st.integers(1, 5), st.sampled_from([0, -1, True, 2.5, "3", None]))


#: Times within this distance of [0, 1] are clamped (adaptive third-party solvers step past 1).
TIME_TOLERANCE = 1e-6
#: The estimators' field methods: any finite time, the field frozen at the nearest end.
FROZEN = {"tolerance": np.inf}


def time_expect(t, n_rows, name="t", tolerance=TIME_TOLERANCE):
    """The :class:`Expect` of times ``t`` for ``n_rows`` queries (None: any length, and a
    (B, n) array of a batched call may be valid). The estimators' field methods take any
    finite time (``time_tolerance=inf``: frozen at the nearest end): ``tolerance=inf``."""
    word = Expect([rf"\b{name}\b"])
    arr = np.asarray(t)
    if arr.dtype.kind not in "biuf":
        return word
    if arr.ndim > 1:
        return word if n_rows is not None else Expect(may_fail=[rf"\b{name}\b", SHAPE])
    with np.errstate(all="ignore"):
        outside = np.any(arr < -tolerance) or np.any(arr > 1 + tolerance)
    if not np.all(np.isfinite(arr)) or outside:
        return word
    if np.any(arr < 0) or np.any(arr > 1):  # within the tolerance: clamped, or refused
        return Expect(may_fail=[rf"\b{name}\b"])
    if arr.ndim == 1 and n_rows is not None and arr.shape[0] != n_rows:
        return word
    return VALID


def count_expect(k, name="n_samples"):
    ok = isinstance(k, int) and not isinstance(k, bool) and k >= 1
    return VALID if ok else Expect([rf"\b{name}\b"])


def labels_expect(y, n_rows):
    """Task labels ``y`` of ``n_rows`` rows (None: one task)."""
    if y is None:
        return VALID
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n_rows:
        return Expect([r"\by\b"])
    # per-label row counts decide whether each task can be split
    return Expect(may_fail=[r"\by\b|label|task|rows|support|at least|reference|not supported"])


def then(fit_expect):
    """What a fit's inputs leave for the later calls: only what may make them fail."""
    return Expect(may_fail=fit_expect.may_fail)


# -- NWFlowSampler --------------------------------------------------------------------------
_HAS_CUDA = __import__("torch").cuda.is_available()


def _callable_bandwidth(t):
    return 0.5 + 0.0 * t


NW_PARAMS = st.fixed_dictionaries(
    {
        "backend": st.sampled_from(["numpy", "torch"]),
        "kernel": st.sampled_from(["isotropic", "diagonal", "mahalanobis"]),
        "sigma_min": st.sampled_from([0.01, 1e-6, 0.5, 0.999]),
        "bandwidth": st.sampled_from(["ot", "ot", 0.5, 2.0, _callable_bandwidth]),
        "solver": st.sampled_from(["euler", "heun", "heun", "dopri5"]),
        "support_chunk_size": st.sampled_from([None, None, 2]),
        "chunk_size": st.sampled_from([None, None, 1]),
    }
)
#: In a quarter of the cases one invalid parameter (checked at fit or at the first use).
BAD_PARAMS = st.one_of(
    st.just({}),
    st.just({}),
    st.just({}),
    st.sampled_from(
        [
            {"solver": 0},
            {"solver": 2.5},
            {"sigma_min": 0.0},
            {"sigma_min": 1.0},
            {"sigma_min": np.nan},
            {"bandwidth": -1.0},
            {"bandwidth": np.nan},
            {"bandwidth": "scott"},
            {"kernel": "rbf"},
            {"kernel": -1.0},
            {"engine": 0},
            {"engine": "sparse"},
            {"density": 1.5},
            {"backend": "jax"},
            {"device": "tpu"},
            {"solver": "rk45"},
            {"projection": np.ones((1, 99))},
            {"projection": "pca"},
            {"projection": np.array([[1j]])},
            {"device": "cuda:0"} if not _HAS_CUDA else {"device": "cpu"},
        ]
    ),
)


def param_expect(bad):
    """An invalid parameter: fit must name it (a CUDA device only the first sampling)."""
    if not bad or bad == {"device": "cpu"}:
        return VALID
    (key,) = bad
    if bad == {"device": "cuda:0"}:
        return Expect(may_fail=[r"device|cuda"])
    return Expect([rf"\b{key}\b"])


@_fuzz(MAX_EXAMPLES["NWFlowSampler"])
@given(data=st.data(), params=NW_PARAMS, bad=BAD_PARAMS)
def test_nw_flow_sampler(data, params, bad):
    check_nw_flow_sampler("NWFlowSampler", data, params, bad)


# The same contract at depth: about 1.7 s a case on a loaded 2-core machine, so 250 cases are
# minutes (a third of the default run before it was marked slow). ``-m slow`` runs it; with
# SKFLOW_FUZZ_SCALE both go deeper.
@pytest.mark.slow
@_fuzz(MAX_EXAMPLES["NWFlowSampler (deep)"])
@given(data=st.data(), params=NW_PARAMS, bad=BAD_PARAMS)
def test_nw_flow_sampler_deep(data, params, bad):
    check_nw_flow_sampler("NWFlowSampler (deep)", data, params, bad)


def nw_params(params, bad):
    """The fuzzed keywords as NWFlowSampler's parameters: the solver and the block sizes in
    their option groups (whose own checks, at construction, test_options.py covers)."""
    p = dict(params)
    engine = EngineOptions(
        chunk_size=p.pop("chunk_size"), support_chunk_size=p.pop("support_chunk_size")
    )
    solver = SolverOptions(p.pop("solver"), n_steps=2)
    return {"random_state": 0, "solver": solver, "engine": engine, **p, **bad}


def check_nw_flow_sampler(name, data, params, bad):
    """One fuzz case of NWFlowSampler: fit, every field method, sample, score (the body of
    the fast and the deep test; ``name`` keys the outcome counts)."""
    CASES[name] += 1
    X = data.draw(arrays(), label="X")
    if X.dtype.kind == "f" and X.ndim == 2:
        X = with_bad_values(data.draw, X)
    est = NWFlowSampler(**nw_params(params, bad))
    fit_expect = array_expect(X) + param_expect(bad)
    if params["sigma_min"] == 1e-6 and params["solver"] == "dopri5":
        fit_expect += Expect(may_fail=[MAGNITUDE])  # a near-singular flow may be too stiff
    fitted = call(name, est.fit, X, expect=fit_expect)
    if fitted is None:
        return
    base = then(fit_expect)
    m, d = est.support_.shape
    n = data.draw(st.integers(1, 4), label="n")
    # queries: a valid (n, d) array, possibly poisoned, or an arbitrary one
    Q = data.draw(st.one_of(valid_arrays(n_rows=n, n_cols=d), wild_arrays()), label="Q")
    Q = with_bad_values(data.draw, Q)
    t = data.draw(TIMES, label="t")
    S2 = data.draw(st.one_of(st.none(), valid_arrays(n_cols=d), wild_arrays()), label="S2")
    rows = Q.shape[0] if Q.ndim == 2 else None
    m2 = m if S2 is None or S2.ndim != 2 else S2.shape[0]
    q_expect = array_expect(Q, n_features=d)
    s_expect = VALID if S2 is None else array_expect(S2, n_features=d)
    batched = Q.ndim == 3 or (S2 is not None and S2.ndim == 3)
    if batched:  # (B, n, d) queries against (B, m, d) supports: valid when the shapes agree
        q_expect = _batched_call_expect(Q, S2, d)
        s_expect = VALID if S2 is None else array_expect(S2, n_features=d, batch=True)
    for method, shape in (
        ("velocity", (rows, d)),
        ("weights", (rows, m2)),
        ("effective_sample_size", (rows,)),
        ("divergence", (rows,)),
    ):
        expect = base + q_expect + s_expect + time_expect(t, None if batched else rows, **FROZEN)
        shape = shape if rows and not batched else None
        # +inf is the true divergence at t = 0 on cell boundaries of a bounded bandwidth
        inf_ok = method == "divergence" and callable(params["bandwidth"])
        out = call(
            name,
            getattr(est, method),
            Q,
            t,
            support=S2,
            expect=expect,
            shape=shape,
            check_finite=not inf_ok,
        )
        if out is not None and inf_ok:
            assert not np.any(np.isnan(out)) and not np.any(np.isneginf(out)), out
    # a bandwidth bounded at t = 0 may make the density solve too stiff: refused up front with
    # that reason; -inf is a valid log-density (rows the flow never reaches)
    expect = base + array_expect(Q, n_features=d) + Expect(may_fail=[r"too stiff to integrate"])
    # the change-of-variables solve may also be refused as too stiff at the data's scale (a
    # FlowSolveError naming that and the fix; seen with sigma_min=1e-6, and with bandwidth=0.5
    # on 1-D data, on main as well): a clear refusal, not a wrong number
    expect += Expect(may_fail=[r"too stiff at this data scale"])
    log_p = call(
        name,
        est.score_samples,
        Q,
        expect=expect,
        shape=(rows,) if rows else None,
        check_finite=False,
    )
    if log_p is not None:
        assert not np.any(np.isnan(log_p)) and not np.any(log_p == np.inf), log_p
    k = data.draw(COUNTS, label="n_samples")
    if S2 is not None:  # sample takes one support (m, d) or a batch (B, m, d)
        s_expect = array_expect(S2, n_features=d, batch=True)
    expect = base + count_expect(k) + s_expect
    out = call(name, est.sample, k, support=S2, random_state=1, expect=expect)
    if out is not None:
        assert out.shape == ((k, d) if S2 is None or S2.ndim == 2 else (S2.shape[0], k, d))
    call(name, est.sample_trajectories, 2, support=S2, random_state=1, expect=base + s_expect)
    y = data.draw(st.one_of(st.none(), wild_arrays()), label="y")
    score_expect = array_expect(Q, n_features=d, min_rows=2)
    expect = base + score_expect + labels_expect(y, rows) + DUPLICATES
    call(name, est.score, Q, y, expect=expect)
    if bad == {"device": "cuda:0"} and params["backend"] != "numpy":  # checked at first use
        call(name, est.sample, 2, expect=then(fit_expect) + Expect([r"device|cuda"]))


# -- pipeline and projection --------------------------------------------------------------------
def components_expect(X, k):
    """``n_components=k`` on ``X``: at most ``min(n_samples, n_features)``."""
    X = np.asarray(X)
    if X.ndim == 2 and X.dtype.kind in "biuf" and k > min(X.shape):
        return Expect([r"n_components"])
    return VALID


@_fuzz(MAX_EXAMPLES["SamplingPipeline"])
@given(data=st.data())
def test_sampling_pipeline(data):
    name = "SamplingPipeline"
    CASES[name] += 1
    X = data.draw(arrays(min_rows=2), label="X")
    k = data.draw(st.sampled_from([1, 2, 5]), label="n_components")
    pipe = make_sampling_pipeline(
        PCA(n_components=k), NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=2))
    )
    fit_expect = array_expect(X) + components_expect(X, k)
    if call(name, pipe.fit, X, expect=fit_expect) is None:
        return
    base, d = then(fit_expect), X.shape[1]
    n = data.draw(COUNTS)
    out = call(name, pipe.sample, n, random_state=0, expect=base + count_expect(n))
    if out is not None:
        assert out.shape[1] == d
    S2 = data.draw(st.one_of(valid_arrays(n_cols=d), wild_arrays()), label="S2")
    expect = base + array_expect(S2, n_features=d)
    call(name, pipe.sample, 3, support=S2, random_state=0, expect=expect)
    call(name, pipe.sample_trajectories, 2, random_state=0, expect=base)
    Q = data.draw(st.one_of(valid_arrays(n_cols=d, min_rows=2), wild_arrays()), label="Q")
    call(name, pipe.score, Q, expect=base + array_expect(Q, n_features=d, min_rows=2) + DUPLICATES)


@_fuzz(MAX_EXAMPLES["FlowProjection"])
@given(data=st.data())
def test_flow_projection(data):
    name = "FlowProjection"
    CASES[name] += 1
    X = data.draw(arrays(min_rows=2), label="X")
    k = data.draw(st.sampled_from([1, 2, 5]), label="n_components")
    y = data.draw(st.one_of(st.none(), wild_arrays()), label="y")
    proj = FlowProjection(n_components=k, n_iter=2, n_tasks=2, random_state=0)
    rows = X.shape[0] if X.ndim == 2 else None
    # every task is split into support and query rows: at least 2 rows each
    fit_expect = array_expect(X, min_rows=2) + components_expect(X, k) + labels_expect(y, rows)
    if call(name, proj.fit, X, y, expect=fit_expect) is None:
        return
    base = then(fit_expect)
    Q = data.draw(st.one_of(valid_arrays(n_cols=X.shape[1]), wild_arrays()), label="Q")
    Z = call(name, proj.transform, Q, expect=base + array_expect(Q, n_features=X.shape[1]))
    if Z is not None:
        assert Z.shape == (Q.shape[0], k)
        back = call(name, proj.inverse_transform, Z, expect=base + array_expect(Z))
        assert back is None or back.shape == Q.shape
    Z = data.draw(wild_arrays(), label="Z")
    call(name, proj.inverse_transform, Z, expect=base + array_expect(Z, n_features=k))


# -- LearnedFlowSampler (tiny config) -------------------------------------------------------------
@_fuzz(MAX_EXAMPLES["LearnedFlowSampler"])
@given(data=st.data())
def test_learned_flow_sampler(data):
    from skflow.samplers.learned import LearnedFlowSampler

    name = "LearnedFlowSampler"
    CASES[name] += 1
    X = data.draw(arrays(min_rows=2), label="X")
    est = LearnedFlowSampler(
        NetworkOptions(d_model=4, n_heads=1, n_layers=1),
        training=TrainingOptions(max_iter=1, batch_tasks=2, support_size=2, n_targets=2, warmup=0),
        solver=SolverOptions(n_steps=2),
        random_state=0,
    )
    # training tasks need support_size + n_targets rows
    fit_expect = array_expect(X, min_rows=2) + Expect(may_fail=[r"rows|support_size|n_targets"])
    if call(name, est.fit, X, expect=fit_expect) is None:
        return
    base, d = then(fit_expect), est.n_features_in_
    S2 = data.draw(st.one_of(valid_arrays(n_cols=d), wild_arrays()), label="S2")
    Q = data.draw(st.one_of(valid_arrays(n_cols=d), wild_arrays()), label="Q")
    t = data.draw(TIMES, label="t")
    s_expect = array_expect(S2, n_features=d, batch=True)
    n = data.draw(COUNTS)
    call(name, est.sample, n, support=S2, random_state=0, expect=base + count_expect(n) + s_expect)
    rows = Q.shape[0] if Q.ndim == 2 else None
    q_expect = array_expect(Q, n_features=d)
    if Q.ndim == 3 or S2.ndim == 3:
        q_expect, rows = _batched_call_expect(Q, S2, d), None
    expect = base + q_expect + time_expect(t, rows, **FROZEN) + s_expect
    call(name, est.velocity, Q, t, support=S2, expect=expect)
    call(name, est.score, Q, expect=base + array_expect(Q, n_features=d, min_rows=2) + DUPLICATES)


# -- metrics and diagnostics ----------------------------------------------------------------
def bandwidth_expect(bandwidth):
    word = Expect([r"bandwidth"])
    if isinstance(bandwidth, str):
        return VALID if bandwidth == "median" else word
    if isinstance(bandwidth, list):
        return VALID if bandwidth else word  # a multi-scale list of positive floats
    if not isinstance(bandwidth, float) or not (0.0 < bandwidth < np.inf):
        return word
    if not 1e-150 < bandwidth < 1e150:  # squared bandwidths over- or underflow
        return Expect(may_fail=[r"bandwidth", MAGNITUDE])
    return VALID


@_fuzz(MAX_EXAMPLES["mmd2"])
@given(data=st.data())
def test_mmd2(data):
    name = "mmd2"
    CASES[name] += 1
    X = data.draw(arrays(), label="X")
    d = X.shape[1] if X.ndim == 2 else None
    Y = data.draw(arrays(n_cols=d), label="Y")
    bandwidth = data.draw(
        st.one_of(
            st.just("median"),
            st.floats(allow_nan=True, allow_infinity=True),
            st.sampled_from([0.0, -1.0, "mean", [], [1.0, 2.0], 1j, None]),
        ),
        label="bandwidth",
    )
    unbiased = data.draw(st.booleans(), label="unbiased")
    rows = 2 if unbiased else 1  # the U-statistic leaves the diagonal out
    expect = array_expect(X, min_rows=rows) + array_expect(Y, n_features=d, min_rows=rows)
    expect += bandwidth_expect(bandwidth)
    if bandwidth == "median":
        expect += DUPLICATES
    call(name, mmd2, X, Y, bandwidth=bandwidth, unbiased=unbiased, chunk_size=3, expect=expect)
    expect = array_expect(X, min_rows=2) + array_expect(Y, n_features=d, min_rows=2)
    expect += bandwidth_expect(bandwidth) + (DUPLICATES if bandwidth == "median" else VALID)
    call(
        name, mmd2_test, X, Y, n_permutations=5, bandwidth=bandwidth, random_state=0, expect=expect
    )


def weights_expect(W):
    """Probability vectors along the last axis."""
    W = np.asarray(W)
    if W.dtype.kind == "c":
        return Expect([DTYPE])
    if W.dtype.kind in "OUS":
        return Expect(may_fail=[DTYPE, NONFINITE, r"probability|negative|empty|dimension"])
    if W.ndim == 0:
        return Expect([r"dimension|scalar"])
    if W.shape[-1] == 0:
        return Expect([r"empty"])
    with np.errstate(all="ignore"):
        Wf = W.astype(np.float64)
    if not np.all(np.isfinite(Wf)):
        return Expect([NONFINITE])
    if np.any(Wf < 0) or np.any(np.abs(Wf.sum(axis=-1) - 1.0) > 1e-6):
        return Expect([r"probability"])
    return VALID


def correlation_expect(A, W, method):
    """nw_weight_correlation(A, W): (n, m) or (heads, n, m), W of A's shape or its last two."""
    problems = [] if method in ("spearman", "pearson") else [r"method"]
    for X in (A, W):
        X = np.asarray(X)
        if X.dtype.kind == "c":
            problems.append(DTYPE)
        elif X.dtype.kind in "OUS":
            return Expect(may_fail=[*problems, DTYPE, NONFINITE, SHAPE, r"columns|empty"])
        elif X.size and not np.all(np.isfinite(X.astype(np.float64))):
            problems.append(NONFINITE)
    A, W = np.asarray(A), np.asarray(W)
    if A.ndim not in (2, 3) or W.shape not in (A.shape, A.shape[-2:]):
        problems.append(SHAPE)
    elif A.shape[-1] < 2 or 0 in A.shape:
        problems.append(r"columns|empty")
    return Expect(problems)


@_fuzz(MAX_EXAMPLES["ess/correlation"])
@given(data=st.data())
def test_effective_sample_size_and_correlation(data):
    name = "ess/correlation"
    CASES[name] += 1
    W = data.draw(st.one_of(wild_arrays(), valid_arrays()), label="W")
    if data.draw(st.booleans()) and W.dtype.kind in "f" and W.ndim >= 1 and W.shape[-1]:
        W = np.abs(W)
        with np.errstate(all="ignore"):
            W = W / W.sum(axis=-1, keepdims=True)  # probability vectors (NaN if a row is 0)
    n_eff = call(name, effective_sample_size, W, expect=weights_expect(W))
    if n_eff is not None:
        assert np.shape(n_eff) == W.shape[:-1]
        assert np.all(n_eff >= 1 - 1e-6) and np.all(n_eff <= W.shape[-1] * (1 + 1e-6))
    A = data.draw(st.one_of(wild_arrays(), valid_arrays()), label="A")
    method = data.draw(st.sampled_from(["spearman", "pearson", "kendall"]), label="method")
    expect = correlation_expect(A, W, method)
    res = call(name, nw_weight_correlation, A, W, method=method, allow_nan=True, expect=expect)
    if res is not None:
        per_row = np.asarray(res.per_row)
        assert np.all(np.isnan(per_row) | (np.abs(per_row) <= 1.0))


@_fuzz(MAX_EXAMPLES["diagnose"])
@given(data=st.data())
def test_diagnose(data):
    name = "diagnose"
    CASES[name] += 1
    S = data.draw(arrays(), label="support")
    times = data.draw(st.one_of(st.none(), TIMES), label="times")
    sigma_min = data.draw(st.sampled_from([0.01, 0.5, 0.0, 1.0, -1.0, np.nan, "x"]))
    n_trajectories = data.draw(st.sampled_from([4, 0, -1, 2.0]))
    n_steps = data.draw(st.sampled_from([3, 0, True]))
    expect = array_expect(S) + count_expect(n_trajectories, "n_trajectories")
    expect += count_expect(n_steps, "n_steps")
    if sigma_min not in (0.01, 0.5):
        expect += Expect([r"sigma_min"])
    if times is not None:
        expect += time_expect(times, None, name="times")
    # statistics of a support with a single point or a single distinct point are undefined
    expect += Expect(may_fail=[SIZE, r"distinct|duplicate|identical"])
    report = call(
        name,
        diagnose,
        S,
        sigma_min=sigma_min,
        times=times,
        n_trajectories=n_trajectories,
        n_steps=n_steps,
        random_state=0,
        check_finite=False,  # documented: condition_number may be inf, undefined stats NaN
        expect=expect,
    )
    if report is not None:
        for arr in (report.neff_median, report.neff_q25, report.neff_q75, report.eigenvalues):
            assert np.all(np.isfinite(arr))
        assert np.isfinite(report.neff_mid) and report.summary()


# -- the helper itself: an estimator that always raises, or raises vaguely, must fail it -----
class AlwaysRaises(NWFlowSampler):
    """Raises on every input, with a message that names a plausible problem."""

    def fit(self, X, y=None):
        raise ValueError("Input X contains NaN or infinity.")


@pytest.fixture
def own_counts(monkeypatch):
    """Keep the helper's own runs out of the reported counts."""
    monkeypatch.setattr(f"{__name__}.OUTCOMES", defaultdict(Counter))
    monkeypatch.setattr(f"{__name__}.CASES", Counter())


def test_an_always_raising_estimator_fails_the_fuzz_test(monkeypatch, own_counts):
    monkeypatch.setattr(f"{__name__}.NWFlowSampler", AlwaysRaises)
    # Hypothesis reports one failure, or a group of the distinct failures it found
    with pytest.raises((AssertionError, ExceptionGroup)) as info:
        test_nw_flow_sampler()
    assert "raised on valid input" in "".join(traceback.format_exception(info.value))


def test_helper_requires_valid_calls_to_succeed_and_errors_to_name_the_problem(own_counts):
    valid = np.array([[0.5, 1.0], [0.0, 1.0]])
    nan = np.array([[np.nan, 1.0], [0.0, 1.0]])

    def vague(X):
        raise ValueError("something went wrong")

    def silent(X):
        return X

    with pytest.raises(AssertionError, match="raised on valid input"):
        call("self-test", vague, valid, expect=array_expect(valid))
    with pytest.raises(AssertionError, match="names none of the inputs' problems"):
        call("self-test", vague, nan, expect=array_expect(nan))
    with pytest.raises(AssertionError, match="accepted inputs with problems"):
        call("self-test", silent, nan, expect=array_expect(nan), check_finite=False)
    # the contract's other side: a named problem and a valid result pass
    with pytest.raises(AssertionError):  # NaN in, NaN out: a non-finite result
        call("self-test", silent, valid * np.nan, expect=VALID)
    np.testing.assert_array_equal(call("self-test", silent, valid, expect=VALID), valid)
