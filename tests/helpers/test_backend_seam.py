"""The array backend is decided once per public call and passed down (issue #35, second seam).

The sampler decides NumPy or Torch for its call and hands that backend to the field; the
solver decides once per solve; the pruned index once per index. These tests count the
decisions (``get_backend`` calls) and check that a backend handed down is honoured.
"""

from __future__ import annotations

import numpy as np
import pytest

import skflow.field.prepared as prepared
import skflow.solvers as solvers
from skflow._array import NUMPY_BACKEND, get_backend, torch_backend
from skflow.field import NWField
from skflow.field.pruned import ClusteredSupport, pruned_local_mean
from skflow.samplers import NWFlowSampler, SolverOptions

torch = pytest.importorskip("torch")

S = np.random.default_rng(0).normal(size=(40, 2))


def _counting(monkeypatch, module):
    calls = []

    def counted(*arrays, **kwargs):
        calls.append(len(arrays))
        return get_backend(*arrays, **kwargs)

    monkeypatch.setattr(module, "get_backend", counted)
    return calls


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_sampler_hands_its_backend_to_the_field(monkeypatch, backend):
    calls = _counting(monkeypatch, prepared)
    sampler = NWFlowSampler(backend=backend, solver=SolverOptions(n_steps=4), random_state=0).fit(S)
    assert sampler.sample(5).shape == (5, 2)
    assert sampler.velocity(S[:3], 0.5).shape == (3, 2)
    assert calls == []  # the field never decided again from the array types


def test_field_decides_once_without_a_given_backend(monkeypatch):
    calls = _counting(monkeypatch, prepared)
    field = NWField(torch.as_tensor(S))
    for t in (0.2, 0.9):
        field.velocity(torch.as_tensor(S[:4]), t)
    assert calls == [1] and field.xp is torch_backend()


def test_field_refuses_a_support_of_another_backend():
    with pytest.raises(TypeError, match="mix NumPy arrays and Torch tensors"):
        NWField(S, backend=torch_backend())
    with pytest.raises(TypeError, match="mix NumPy arrays and Torch tensors"):
        NWField(torch.as_tensor(S), backend=NUMPY_BACKEND)
    assert NWField(S, backend=NUMPY_BACKEND).xp is NUMPY_BACKEND


def test_attention_engine_needs_a_fused_attention_backend():
    with pytest.raises(ValueError, match="engine='attention' needs Torch tensors"):
        NWField(S, engine="attention")
    field = NWField(torch.as_tensor(S), engine="attention")
    assert field.velocity(torch.as_tensor(S[:2]), 0.5).shape == (2, 2)


@pytest.mark.parametrize("method", ["heun", "dopri5"])
def test_solver_decides_once_per_solve(monkeypatch, method):
    calls = _counting(monkeypatch, solvers)
    y0 = torch.ones((6, 2), dtype=torch.float64)
    sol = solvers.integrate(lambda t, y: -y, y0, method=method, return_trajectory=True)
    assert calls == [1] and torch.is_tensor(sol.y)


def test_pruned_index_keeps_its_backend():
    index = ClusteredSupport(torch.as_tensor(S), n_clusters=4)
    assert index.backend_ is torch_backend()
    with pytest.raises(ValueError, match="queries must match the index: same library"):
        pruned_local_mean(index, S[:3], 1.0, 0.5)
    with pytest.raises(ValueError, match="keys and values must be the same kind"):
        ClusteredSupport(torch.as_tensor(S), S)
    res = pruned_local_mean(index, torch.as_tensor(S[:3]), 1.0, 0.5)
    assert torch.is_tensor(res.mean)
