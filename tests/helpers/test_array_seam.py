"""The small helpers of ``skflow._array`` that keep NumPy/Torch decisions out of the modules
(issue #64): each does what its one branch used to do at the call sites, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skflow._array import (
    NUMPY_BACKEND,
    array_module,
    as_array,
    as_time,
    check_tensors,
    dispatch,
    host_to_like,
    torch_backend,
)

torch = pytest.importorskip("torch")

times = st.lists(st.floats(0.0, 1.0, width=32), min_size=1, max_size=6)


def test_as_array_keeps_tensors_and_converts_the_rest():
    t = torch.arange(3, dtype=torch.float32)
    assert as_array(t, np.float64) is t  # no host copy, no cast
    out = as_array([0, 1], np.float64)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    assert as_array(np.zeros(2, np.float32)).dtype == np.float32  # no dtype: kept


@given(times)
def test_as_time_of_host_values_is_the_tensor_of_their_array(values):
    like = torch.zeros(len(values), 2, dtype=torch.float32)
    host = np.asarray(values, dtype=np.float32)
    for dtype in (None, np.float64):
        out = as_time(host, like, dtype)
        expected = torch.as_tensor(np.asarray(host, dtype=dtype))
        assert out.dtype == expected.dtype and out.device == like.device
        assert torch.equal(out, expected)


def test_as_time_gives_a_float_for_host_scalars_only():
    like = torch.zeros(2, 3)
    for scalar in (0.5, np.float32(0.5), np.array(0.5), 1):
        out = as_time(scalar, like)
        assert type(out) is float and out == float(scalar)
    zero_d = torch.tensor(0.5, dtype=torch.float64)
    assert as_time(zero_d, like) is zero_d  # a tensor stays one, on its device


def test_check_tensors_names_every_input():
    check_tensors(x=torch.zeros(1), support=torch.zeros(1))
    with pytest.raises(TypeError, match=r"^x and support must be torch tensors\.$"):
        check_tensors(x=torch.zeros(1), support=np.zeros(1))
    with pytest.raises(TypeError, match=r"^x and support must be torch tensors\.$"):
        check_tensors(x=np.zeros(1), support=torch.zeros(1))


def test_host_to_like():
    a = np.array([0.1, 1.0 / 3.0])
    assert host_to_like(a, np.zeros(2, dtype=np.float32)) is a  # host input: untouched
    like = torch.zeros(2, dtype=torch.float32)
    out = host_to_like(a, like)
    assert out.dtype == torch.float32 and out.device == like.device
    assert torch.equal(out, torch.as_tensor(a).to(torch.float32))


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [(("t", "t"), "torch"), (("t", "n"), "numpy"), (("n", "t"), "numpy"), (("n", "n"), "numpy")],
)
def test_dispatch_gives_torch_only_when_every_input_is_a_tensor(kinds, expected):
    arrays = [torch.zeros(2) if k == "t" else np.zeros(2) for k in kinds]
    assert dispatch(*arrays, numpy="numpy", torch="torch") == expected


def test_array_module():
    assert array_module(torch.zeros(1)) is torch
    assert array_module(np.zeros(1)) is np and array_module([0.5]) is np


def test_broadcast_to_is_the_same_view_in_both_backends():
    frame = np.array([[[1.0, -2.0, 0.5]]])
    host = NUMPY_BACKEND.broadcast_to(frame, (2, 4, 3))
    dev = torch_backend().broadcast_to(torch.as_tensor(frame), (2, 4, 3))
    assert host.shape == tuple(dev.shape) == (2, 4, 3)
    np.testing.assert_array_equal(host, dev.numpy())
    assert dev.stride()[:2] == (0, 0) and host.strides[:2] == (0, 0)  # views, no copies
