"""The NumPy/Torch array namespace of ``skflow._array``: both namespaces compute the same thing.

The solvers and the pruned engine dispatch every library-specific operation through
:func:`skflow._array.get_namespace`, so an operation whose two implementations disagree would
make the NumPy and Torch backends drift apart; each is checked here on the same data.
"""

from __future__ import annotations

import numpy as np
import pytest

from skflow._array import get_namespace

torch = pytest.importorskip("torch")

A = np.array([[0.5, -2.0, 3.0], [np.inf, 1.0, -0.25]])
B = np.array([[1.0, -3.0, 2.5], [0.0, 2.0, -1.0]])
MASK = np.array([True, False, True, True, False])

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
    np.testing.assert_array_equal(results[0], results[1])


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
