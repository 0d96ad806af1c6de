"""The NumPy/Torch array backend of ``skflow._array``: both backends compute the same thing.

The field, the solvers, the metrics and the pruned engine dispatch every library-specific
operation through the backend object of :func:`skflow._array.get_backend`, so an operation
whose two implementations disagree would make the NumPy and Torch paths drift apart; each is
checked here on the same data, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from skflow._array import NUMPY_BACKEND, get_backend, get_namespace, torch_backend

torch = pytest.importorskip("torch")

A = np.array([[0.5, -2.0, 3.0], [np.inf, 1.0, -0.25]])
B = np.array([[1.0, -3.0, 2.5], [0.0, 2.0, -1.0]])
MASK = np.array([True, False, True, True, False])
ROWS = np.array([0, 1, 1])

#: (name, function of (xp, a, b) with ``a``, ``b`` in that namespace's library)
OPERATIONS = [
    ("clip", lambda xp, a, b: xp.clip(b, -1.0, 2.0)),
    ("clip lower only", lambda xp, a, b: xp.clip(b, 0.5)),
    ("minimum", lambda xp, a, b: xp.minimum(a, b)),
    ("maximum", lambda xp, a, b: xp.maximum(a, b)),
    ("isfinite", lambda xp, a, b: xp.isfinite(a)),
    ("all rows", lambda xp, a, b: xp.all(xp.isfinite(a), axis=1)),
    ("all", lambda xp, a, b: xp.all(xp.isfinite(b))),
    ("argmax", lambda xp, a, b: xp.argmax(b, 1)),
    ("stack", lambda xp, a, b: xp.stack([a, b])),
    ("concat columns", lambda xp, a, b: xp.concat([a, b], axis=1)),
    ("copy", lambda xp, a, b: xp.copy(b)),
    ("astype", lambda xp, a, b: xp.astype(b, "float32")),
    ("full float64", lambda xp, a, b: xp.full((3,), 0.1, xp.astype(b, "float32"), dtype="float64")),
    ("full like", lambda xp, a, b: xp.full((3,), 0.1, xp.astype(b, "float32"))),
    ("as_floating", lambda xp, a, b: xp.as_floating(xp.astype(b, "int64"))),
    ("add_scaled_", lambda xp, a, b: xp.add_scaled_(xp.copy(b), 0.5, b)),
    ("shifted_exp_", lambda xp, a, b: xp.shifted_exp_(xp.copy(b), xp.amax(b, 1)[:, None], -1.5)),
    ("cast", lambda xp, a, b: xp.cast(b, xp.float32)),
    ("cast same dtype", lambda xp, a, b: xp.cast(b, xp.float64)),
    ("to_float64", lambda xp, a, b: xp.to_float64(xp.astype(b, "float32"), like=b)),
    ("to_device", lambda xp, a, b: xp.to_device(np.array([1, 0]), b, dtype=xp.float32)),
    # Torch's fused ``sub(alpha=)`` may round differently from NumPy's two passes (as the
    # field always has); scales that are powers of two make both exact
    ("sub_scaled", lambda xp, a, b: xp.sub_scaled(b, a, 0.5)),
    ("velocity_", lambda xp, a, b: xp.velocity_(xp.copy(b), b * 0.5 + 1.0, 0.25, 2.0)),
    ("clamp_min_", lambda xp, a, b: xp.clamp_min_(xp.copy(b), 0.25)),
    ("exp_", lambda xp, a, b: xp.exp_(xp.copy(b))),
    ("fill_diagonal_", lambda xp, a, b: xp.fill_diagonal_(xp.copy(b), 7.0)),
    ("abs_max", lambda xp, a, b: np.float64(xp.abs_max(b))),
    ("check_real", lambda xp, a, b: xp.check_real(b, "b")),
    ("empty", lambda xp, a, b: xp.empty(xp.float32, b)),
    # every row has an entry (as in skflow.field._screened, where each keeps its top pair)
    ("segment_sum", lambda xp, a, b: xp.segment_sum(xp.index(ROWS, b), b[[0, 1, 1]], 2)),
    ("segment_max", lambda xp, a, b: xp.segment_max(xp.index(ROWS, b), b[0], 2)),
]


def _both(a):
    return a, torch.as_tensor(a)


@pytest.mark.parametrize("name, op", OPERATIONS, ids=[n for n, _ in OPERATIONS])
def test_numpy_and_torch_namespaces_agree(name, op):
    results = []
    for a, b in zip(_both(A), _both(B), strict=True):
        out = op(get_namespace(a), a, b)
        results.append(out.numpy() if hasattr(out, "numpy") else np.asarray(out))
    assert results[0].dtype == results[1].dtype, name
    _assert_same_values(results[0], results[1])


def test_row_helpers_agree():
    for mask in _both(MASK):
        xp = get_namespace(mask)
        assert xp.nonzero(mask).tolist() == [0, 2, 3]
        assert xp.nonzero(mask, size=3).tolist() == [0, 2, 3]
    for target in _both(np.zeros((4, 2))):
        xp = get_namespace(target)
        idx = xp.index(np.array([3, 1]), target)
        rows = xp.from_host(np.array([[1.0, 2.0], [3.0, 4.0]]), target, "float64")
        xp.put_rows(target, idx, rows)
        assert np.asarray(target).tolist() == [[0, 0], [3, 4], [0, 0], [1, 2]]


def test_float_dtypes_are_the_library_ones():
    for lib, a in (("numpy", np.zeros(2, np.float32)), ("torch", torch.zeros(2))):
        xp = get_namespace(a)
        assert xp.name == lib and a.dtype == xp.float32 and a.dtype != xp.float64
        assert xp.astype(a, "float64").dtype == xp.float64


def _assert_same_values(numpy_result, torch_result):
    if np.issubdtype(numpy_result.dtype, np.floating):
        # two backends (NumPy's and Torch's kernels, e.g. exp): rtol 1e-15, a few units in the
        # last place of float64 (the float32 results here are casts and fills, exact on both)
        np.testing.assert_allclose(numpy_result, torch_result, rtol=1e-15, atol=0)
    else:
        np.testing.assert_array_equal(numpy_result, torch_result)


def _agree(make_numpy, make_torch, op):
    """Assert that ``op`` gives equal results (values and dtype) on both backends."""
    results = []
    for xp, a, b in ((make_numpy(), A, B), (make_torch(), *map(torch.as_tensor, (A, B)))):
        out = op(xp, a, b)
        results.append(out.numpy() if hasattr(out, "numpy") else np.asarray(out))
    assert results[0].dtype == results[1].dtype
    _assert_same_values(results[0], results[1])


def test_a_disagreeing_backend_is_caught():
    # the comparison above can fail: a NumPy backend whose clip forgets the upper bound
    class Broken(type(NUMPY_BACKEND)):
        @staticmethod
        def clip(a, lo, hi=None):
            return np.clip(a, lo, None)

    clip = OPERATIONS[0][1]
    _agree(lambda: NUMPY_BACKEND, torch_backend, clip)
    with pytest.raises(AssertionError):
        _agree(Broken, torch_backend, clip)


def test_backend_is_decided_from_the_inputs():
    t, a = torch.zeros(2), np.zeros(2)
    assert get_backend(a) is NUMPY_BACKEND and get_backend([1.0], None, 2.0) is NUMPY_BACKEND
    assert get_backend(t) is torch_backend() and get_backend(t, None, 3.0) is torch_backend()
    assert get_namespace(t) is get_backend(t)
    assert not NUMPY_BACKEND.is_torch and torch_backend().is_torch
    with pytest.raises(TypeError, match="mix NumPy arrays and Torch tensors"):
        get_backend(a, t)
    assert get_backend(a, t, promote=True) is torch_backend()  # the metrics' rule


def test_backend_answers_about_arrays():
    xp, tp = NUMPY_BACKEND, torch_backend()
    t, a = torch.zeros((2, 3)), np.zeros((2, 3))
    assert xp.owns(a) and xp.owns([1.0]) and not xp.owns(t)
    assert tp.owns(t) and not tp.owns(a)
    assert not xp.on_device(a) and not xp.on_device(t) and tp.on_device(t)
    assert not tp.on_device(a)
    assert xp.device(a) is None and tp.device(t) == t.device
    assert xp.device_type(a) == "cpu" and tp.device_type(t) == "cpu"
    assert xp.layout_key(a) == (False, (2, 3), a.dtype, None)
    assert xp.layout_key(a.astype(complex)) is None and xp.layout_key([1.0]) is None
    assert tp.layout_key(t) == (True, (2, 3), t.dtype, t.device) and tp.layout_key(a) is None
    assert xp.to_numpy(t).dtype == np.float32 and tp.to_numpy(t.half()).dtype == np.float32
    for backend, z in ((xp, a + 1j), (tp, torch.zeros(2, dtype=torch.complex64))):
        with pytest.raises(TypeError, match="z must be real-valued"):
            backend.check_real(z, "z")
    assert xp.fused_attention is False and tp.fused_attention is True
    # host data under Torch is checked on the host (the caller moves it); tensors in place
    assert isinstance(tp.check_real([1, 2], "h"), np.ndarray) and tp.check_real(t, "t") is t
    assert xp.check_real(t, "t").dtype == np.float32  # a NumPy call takes a tensor to host
    assert xp.check_real(torch.ones(2, requires_grad=True), "g").tolist() == [1.0, 1.0]
    assert xp.as_array([1.0]).tolist() == [1.0] and tp.as_array(t) is t
    assert xp.from_numpy(a, None) is a and tp.from_numpy(a, "meta").device.type == "meta"
    assert xp.first_owned(a, t) is a and tp.first_owned(a, t) is t
    xp.check_device(a, t, "a", "t")
    tp.check_device(a, t.to("meta"), "a", "t")  # host data: the caller moves it
    with pytest.raises(ValueError, match="x is on device meta but s is on device cpu"):
        tp.check_device(t.to("meta"), t, "x", "s")
    with pytest.raises(TypeError, match="mix NumPy arrays"):
        xp.check_kind(t)
    with pytest.raises(TypeError, match="mix NumPy arrays"):
        tp.check_kind(a)
    xp.check_kind(a), tp.check_kind(t), tp.check_kind(None), tp.check_kind(2.0)


def test_backends_pickle_to_the_same_object():
    import pickle

    for backend in (NUMPY_BACKEND, torch_backend()):
        assert pickle.loads(pickle.dumps(backend)) is backend


def test_nonzero_pairs_agree():
    mask = np.array([[True, False, True], [False, True, False]])
    for xp, m in ((NUMPY_BACKEND, mask), (torch_backend(), torch.as_tensor(mask))):
        rows, cols = xp.nonzero_pairs(m)
        assert np.asarray(rows).tolist() == [0, 0, 1] and np.asarray(cols).tolist() == [0, 2, 1]


def test_velocity_keeps_autograd_graph():
    mean = torch.ones(2, requires_grad=True) * 1.0
    out = torch_backend().velocity_(mean, torch.ones(2), 0.5, 2.0)
    assert out.requires_grad and out.tolist() == [0.25, 0.25] and mean.tolist() == [1.0, 1.0]
