"""Property-based fuzzing of every public entry point with arbitrary arrays (Hypothesis).

Every call gets arrays of arbitrary shape (0 rows, 0 columns, 0-D, 1-D, 3-D), dtype (bool,
int, float16/32/64, complex, object, strings) and values (NaN, inf, huge and tiny numbers),
besides mostly-valid arrays so that the valid paths are exercised too. The contract checked:

* either a valid result: every array in it finite (with the documented exception of NaN
  correlations of constant rows in ``nw_weight_correlation``) and of the right shape;
* or a ``ValueError`` / ``TypeError`` (``NotFittedError`` is both a ``ValueError`` and an
  ``AttributeError``) with a non-empty message;
* never another exception, a hang, or a non-finite result.

The suite is derandomized (``derandomize=True``, no example database; ``tests/conftest.py``
imports every ``skflow`` module first, so the examples do not depend on which tests ran
before), so every run tries the same examples; ``max_examples`` keeps the whole file well
under a minute on a loaded 2-core machine. ``python -m pytest tests/test_fuzz.py -s`` prints
the number of cases tried per test and how they ended; with ``SKFLOW_FUZZ_COUNTS=PATH`` in
the environment the counts are also written to ``PATH`` as JSON, which
``python benchmarks/fuzz_counts.py --write-docs`` turns into the table of
``docs/robustness.md``.
"""

from __future__ import annotations

import json
import os
import warnings
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst
from sklearn.decomposition import PCA

from skflow import NWFlowSampler
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
    "NWFlowSampler": 400,
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


def call(test: str, fn, *args, shape=None, allow_nan=False, check_finite=True, **kwargs):
    """Run ``fn``; check it returns a finite result of ``shape`` or raises a clear error.

    Returns the result, or None when it raised a ValueError/TypeError.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings are allowed, only errors matter
            out = fn(*args, **kwargs)
    except (ValueError, TypeError) as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message from {fn}"
        OUTCOMES[test][type(exc).__name__] += 1
        return None
    OUTCOMES[test]["ok"] += 1
    for leaf in _leaves(out) if check_finite else ():
        arr = np.asarray(leaf)
        if arr.dtype.kind in "biuf":
            ok = np.isfinite(arr) | (np.isnan(arr) if allow_nan else False)
            assert np.all(ok), f"non-finite result from {getattr(fn, '__name__', fn)}: {out!r}"
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
            {"n_steps": 0},
            {"n_steps": 2.5},
            {"sigma_min": 0.0},
            {"sigma_min": 1.0},
            {"sigma_min": np.nan},
            {"bandwidth": -1.0},
            {"bandwidth": np.nan},
            {"bandwidth": "scott"},
            {"kernel": "rbf"},
            {"kernel_reg": -1.0},
            {"chunk_size": 0},
            {"support_chunk_size": -3},
            {"support_chunk_size": 1.5},
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


@_fuzz(MAX_EXAMPLES["NWFlowSampler"])
@given(data=st.data(), params=NW_PARAMS, bad=BAD_PARAMS)
def test_nw_flow_sampler(data, params, bad):
    name = "NWFlowSampler"
    CASES[name] += 1
    X = data.draw(arrays(), label="X")
    if X.dtype.kind == "f" and X.ndim == 2:
        X = with_bad_values(data.draw, X)
    est = NWFlowSampler(**{"n_steps": 2, "random_state": 0, **params, **bad})
    fitted = call(name, est.fit, X)
    if fitted is None:
        return
    m, d = est.support_.shape
    n = data.draw(st.integers(1, 4), label="n")
    # queries: a valid (n, d) array, possibly poisoned, or an arbitrary one
    Q = data.draw(st.one_of(valid_arrays(n_rows=n, n_cols=d), wild_arrays()), label="Q")
    Q = with_bad_values(data.draw, Q)
    t = data.draw(TIMES, label="t")
    S2 = data.draw(st.one_of(st.none(), valid_arrays(n_cols=d), wild_arrays()), label="S2")
    rows = Q.shape[0] if Q.ndim == 2 else None
    m2 = m if S2 is None or S2.ndim != 2 else S2.shape[0]
    for method, shape in (
        ("velocity", (rows, d)),
        ("weights", (rows, m2)),
        ("effective_sample_size", (rows,)),
        ("divergence", (rows,)),
    ):
        call(name, getattr(est, method), Q, t, support=S2, shape=shape if rows else None)
    call(name, est.score_samples, Q, shape=(rows,) if rows else None)
    k = data.draw(COUNTS, label="n_samples")
    out = call(name, est.sample, k, support=S2, random_state=1)
    if out is not None:
        assert out.shape == (k, d)
    call(name, est.sample_trajectories, 2, support=S2, random_state=1)
    y = data.draw(st.one_of(st.none(), wild_arrays()), label="y")
    call(name, est.score, Q, y)


# -- pipeline and projection --------------------------------------------------------------------
@_fuzz(MAX_EXAMPLES["SamplingPipeline"])
@given(data=st.data())
def test_sampling_pipeline(data):
    name = "SamplingPipeline"
    CASES[name] += 1
    X = data.draw(arrays(min_rows=2), label="X")
    k = data.draw(st.sampled_from([1, 2, 5]), label="n_components")
    pipe = make_sampling_pipeline(PCA(n_components=k), NWFlowSampler(n_steps=2, random_state=0))
    if call(name, pipe.fit, X) is None:
        return
    d = X.shape[1]
    out = call(name, pipe.sample, data.draw(COUNTS), random_state=0)
    if out is not None:
        assert out.shape[1] == d
    S2 = data.draw(st.one_of(valid_arrays(n_cols=d), wild_arrays()), label="S2")
    call(name, pipe.sample, 3, support=S2, random_state=0)
    call(name, pipe.sample_trajectories, 2, random_state=0)
    Q = data.draw(st.one_of(valid_arrays(n_cols=d, min_rows=2), wild_arrays()), label="Q")
    call(name, pipe.score, Q)


@_fuzz(MAX_EXAMPLES["FlowProjection"])
@given(data=st.data())
def test_flow_projection(data):
    name = "FlowProjection"
    CASES[name] += 1
    X = data.draw(arrays(min_rows=2), label="X")
    k = data.draw(st.sampled_from([1, 2, 5]), label="n_components")
    y = data.draw(st.one_of(st.none(), wild_arrays()), label="y")
    proj = FlowProjection(n_components=k, n_iter=2, n_tasks=2, random_state=0)
    if call(name, proj.fit, X, y) is None:
        return
    Q = data.draw(st.one_of(valid_arrays(n_cols=X.shape[1]), wild_arrays()), label="Q")
    Z = call(name, proj.transform, Q)
    if Z is not None:
        assert Z.shape == (Q.shape[0], k)
        back = call(name, proj.inverse_transform, Z)
        assert back is None or back.shape == Q.shape
    call(name, proj.inverse_transform, data.draw(wild_arrays(), label="Z"))


# -- LearnedFlowSampler (tiny config; skipped if the module does not import) --------------------
@_fuzz(MAX_EXAMPLES["LearnedFlowSampler"])
@given(data=st.data())
def test_learned_flow_sampler(data):
    try:
        from skflow.samplers.learned import LearnedFlowSampler
    except ImportError:  # pragma: no cover - module in progress
        pytest.skip("skflow.samplers.learned does not import")
    name = "LearnedFlowSampler"
    CASES[name] += 1
    X = data.draw(arrays(min_rows=2), label="X")
    est = LearnedFlowSampler(
        d_model=4,
        n_heads=1,
        n_layers=1,
        max_iter=1,
        batch_tasks=2,
        support_size=2,
        n_targets=2,
        warmup=0,
        n_steps=2,
        random_state=0,
    )
    if call(name, est.fit, X) is None:
        return
    d = est.n_features_in_
    S2 = data.draw(st.one_of(valid_arrays(n_cols=d), wild_arrays()), label="S2")
    Q = data.draw(st.one_of(valid_arrays(n_cols=d), wild_arrays()), label="Q")
    t = data.draw(TIMES, label="t")
    call(name, est.sample, data.draw(COUNTS), support=S2, random_state=0)
    call(name, est.velocity, Q, t, support=S2)
    call(name, est.score, Q)


# -- metrics and diagnostics ----------------------------------------------------------------
@_fuzz(MAX_EXAMPLES["mmd2"])
@given(data=st.data())
def test_mmd2(data):
    name = "mmd2"
    CASES[name] += 1
    X = data.draw(arrays(), label="X")
    Y = data.draw(arrays(n_cols=X.shape[1] if X.ndim == 2 else None), label="Y")
    bandwidth = data.draw(
        st.one_of(
            st.just("median"),
            st.floats(allow_nan=True, allow_infinity=True),
            st.sampled_from([0.0, -1.0, "mean", [], [1.0, 2.0], 1j, None]),
        ),
        label="bandwidth",
    )
    unbiased = data.draw(st.booleans(), label="unbiased")
    call(name, mmd2, X, Y, bandwidth=bandwidth, unbiased=unbiased, chunk_size=3)
    call(name, mmd2_test, X, Y, n_permutations=5, bandwidth=bandwidth, random_state=0)


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
    n_eff = call(name, effective_sample_size, W)
    if n_eff is not None:
        assert np.shape(n_eff) == W.shape[:-1]
        assert np.all(n_eff >= 1 - 1e-6) and np.all(n_eff <= W.shape[-1] * (1 + 1e-6))
    A = data.draw(st.one_of(wild_arrays(), valid_arrays()), label="A")
    method = data.draw(st.sampled_from(["spearman", "pearson", "kendall"]), label="method")
    res = call(name, nw_weight_correlation, A, W, method=method, allow_nan=True)
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
    report = call(
        name,
        diagnose,
        S,
        sigma_min=sigma_min,
        times=times,
        n_trajectories=data.draw(st.sampled_from([4, 0, -1, 2.0])),
        n_steps=data.draw(st.sampled_from([3, 0, True])),
        random_state=0,
        check_finite=False,  # documented: condition_number may be inf, undefined stats NaN
    )
    if report is not None:
        for arr in (report.neff_median, report.neff_q25, report.neff_q75, report.eigenvalues):
            assert np.all(np.isfinite(arr))
        assert np.isfinite(report.neff_mid) and report.summary()
