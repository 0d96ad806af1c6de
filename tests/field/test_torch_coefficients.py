"""Host times given to the Torch coefficients are read as float64, like a float64 tensor."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from skflow.field._coefficients import torch_coefficients
from skflow.paths import OTPath

torch = pytest.importorskip("torch")


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5))
@example([1.0 / 3.0, 0.7])
def test_host_times_equal_float64_tensor_times_bit_for_bit(values):
    # a float32 detour on the host would round 1/3 before the float64 arithmetic
    kw = dict(path=OTPath(0.01), bandwidth="ot", dtype=torch.float64, device="cpu")
    expected = torch_coefficients(torch.tensor(values, dtype=torch.float64), **kw)
    for host in (values, np.asarray(values)):
        for got, want in zip(torch_coefficients(host, **kw), expected, strict=True):
            assert got.dtype == torch.float64
            assert torch.equal(got, want)
