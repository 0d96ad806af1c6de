"""CUDA computations equal the CPU ones, and device problems fail loudly.

With CUDA visible, the ``cuda``-marked tests here run tiny field, sampler and training
computations on the GPU and compare them with the CPU (and a float64 brute force). No test
body skips: only the marker skips them where CUDA is absent, so a CUDA that is visible but
broken (a kernel error, a tensor left on the wrong device, a result silently computed on the
host) fails the suite. ``benchmarks/gpu_check.py`` runs them first on a GPU machine.

The other tests run everywhere: with CUDA hidden from a subprocess, ``device="cuda"`` is a
clear ``ValueError``, never a silent fallback to the CPU.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from nw_reference import brute_force_field

from skflow import (
    LearnedFlowSampler,
    NetworkOptions,
    NWFlowSampler,
    SolverOptions,
    TrainingOptions,
)
from skflow.field import (
    nw_effective_sample_size,
    nw_velocity,
    nw_velocity_and_divergence,
    nw_weights,
)
from skflow.tasks import GaussianMixtureTasks

ROOT = Path(__file__).resolve().parents[2]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
SIGMA_MIN = 0.01
TOL = {torch.float64: 1e-10, torch.float32: 1e-4}


def _problem(seed=0, m=300, n=40, d=5):
    """Standardized support, states on the path at t = 0.7 and per-row times."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(m, d))
    s = (s - s.mean(0)) / s.std(0)
    x = 0.7 * s[rng.integers(0, m, n)] + 0.3 * rng.normal(size=(n, d))
    return x, s, rng.uniform(0.0, 1.0, size=n)


def field_results(device: str, dtype: torch.dtype) -> dict:
    """Every field function on ``device``: name -> (tensor, float64 reference or None)."""
    x, s, t_rows = _problem()
    xt, st = (torch.as_tensor(a, dtype=dtype, device=device) for a in (x, s))
    tt = torch.as_tensor(t_rows, dtype=torch.float64, device=device)
    v_div = nw_velocity_and_divergence(xt, st, 0.7)
    return {
        "velocity": (nw_velocity(xt, st, 0.7), brute_force_field(x, s, 0.7, SIGMA_MIN)[1]),
        "velocity_rows": (nw_velocity(xt, st, tt), brute_force_field(x, s, t_rows, SIGMA_MIN)[1]),
        "velocity_t1": (nw_velocity(xt, st, 1.0), brute_force_field(x, s, 1.0, SIGMA_MIN)[1]),
        "weights": (nw_weights(xt, st, 0.7), None),
        "n_eff": (nw_effective_sample_size(xt, st, 0.7), None),
        "velocity_of_pair": (v_div[0], brute_force_field(x, s, 0.7, SIGMA_MIN)[1]),
        "divergence": (v_div[1], None),
    }


def _normwise(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


@CUDA
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cuda_field_equals_cpu_and_brute_force(dtype):
    gpu, cpu = field_results("cuda", dtype), field_results("cpu", dtype)
    for name, (value, reference) in gpu.items():
        assert value.device.type == "cuda", f"{name} was computed on {value.device}"
        assert value.dtype == dtype, f"{name} came back as {value.dtype}"
        host = value.cpu().numpy()
        assert np.isfinite(host).all(), name
        assert _normwise(host, cpu[name][0].numpy()) < TOL[dtype], name
        if reference is not None:
            assert _normwise(host, reference) < TOL[dtype], name


@CUDA
@pytest.mark.cuda
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-8), (np.float32, 1e-3)])
def test_cuda_sampler_equals_cpu(dtype, tol):
    _, s, _ = _problem(seed=1)
    s = s.astype(dtype)
    params = {"backend": "torch", "solver": SolverOptions("heun", n_steps=20), "random_state": 0}
    gpu = NWFlowSampler(device="cuda", **params).fit(s)
    cpu = NWFlowSampler(device="cpu", **params).fit(s)
    a, b = gpu.sample(64), cpu.sample(64)
    assert a.dtype == b.dtype == dtype
    assert _normwise(a, b) < tol
    x = s[:10] * 0.5
    assert _normwise(gpu.velocity(x, 0.9), cpu.velocity(x, 0.9)) < tol


@CUDA
@pytest.mark.cuda
def test_cuda_learned_sampler_trains_on_device_and_matches_cpu():
    tasks = GaussianMixtureTasks(n_features=2)
    lf = LearnedFlowSampler(
        NetworkOptions(d_model=16, n_layers=1),
        training=TrainingOptions(batch_tasks=4, support_size=10, n_targets=16, max_iter=3),
        solver=SolverOptions(n_steps=5),
        random_state=0,
    )
    lf.set_params(device="cuda").fit(tasks)
    assert all(p.is_cuda for p in lf.model_.parameters())
    support, _ = tasks.sample_task(10, 0, random_state=1)
    x = support[:6] * 0.5
    on_cpu = copy.deepcopy(lf).set_params(device="cpu")
    assert (
        _normwise(lf.velocity(x, 0.6, support=support), on_cpu.velocity(x, 0.6, support=support))
        < 1e-4
    )
    assert np.isfinite(lf.sample(8, support=support, random_state=0)).all()


_HIDDEN_CUDA = textwrap.dedent(
    """
    import numpy as np
    from skflow import LearnedFlowSampler, NWFlowSampler, TrainingOptions
    X = np.random.default_rng(0).normal(size=(20, 2))
    one_step = TrainingOptions(max_iter=1)
    for make in (lambda: NWFlowSampler(backend="torch", device="cuda").fit(X).sample(2),
                 lambda: LearnedFlowSampler(training=one_step, device="cuda").fit(X)):
        try:
            make()
        except ValueError as exc:
            print("ValueError:", exc)
        else:
            print("no error")
    """
)


def test_cuda_requested_but_hidden_is_a_clear_error():
    """``CUDA_VISIBLE_DEVICES=""`` hides any GPU, so this runs on every machine."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-c", _HIDDEN_CUDA], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stdout.splitlines() if line]
    assert len(lines) == 2 and all("CUDA is not available" in line for line in lines), lines


def test_support_and_queries_on_different_devices_raise_a_clear_error():
    x = torch.zeros(4, 3, device="meta")
    s = torch.randn(6, 3)
    with pytest.raises(ValueError, match="meta"):  # a clear error names the devices
        nw_velocity(x, s, 0.5)
