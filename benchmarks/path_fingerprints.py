#!/usr/bin/env python
"""Fingerprints of the OT path's numbers, to check a refactoring leaves them bit for bit.

Prints one SHA-1 prefix per quantity (field velocities, divergences and log-densities on
NumPy float64/float32 and Torch, every engine, scalar and per-row times; a callable bandwidth;
``NWFlowSampler`` samples and scores, closed form and change of variables; the multi-head
module; training times; task velocities; the projection loss; a few ``LearnedFlowSampler``
fits with every target and time sampling, their samples and loss curves). Run it on two
checkouts and diff the outputs::

    PYTHONPATH=/path/to/a python benchmarks/path_fingerprints.py > a.txt
    PYTHONPATH=/path/to/b python benchmarks/path_fingerprints.py > b.txt
    diff a.txt b.txt

The introduction of ``skflow.paths.GaussianPath`` was checked this way against the commit
before it (no difference). Runs in about a minute on 2 CPU cores.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import torch

from skflow import LearnedFlowSampler, NWFlowSampler
from skflow.field import NWField
from skflow.nn.heads import MultiHeadNW
from skflow.nn.objective import sample_times
from skflow.projection import nw_flow_matching_loss
from skflow.samplers.options import learned_params_from_flat
from skflow.tasks import GaussianMixtureTasks


def field_values() -> dict:
    """The prepared field on every backend, dtype and engine."""
    out, rng = {}, np.random.default_rng(0)
    S, X, t = rng.standard_normal((40, 3)), rng.standard_normal((25, 3)), rng.random(25)
    cases = [
        ("np64", S, X, t, ("auto", "gemm", "pruned")),
        ("np32", S.astype(np.float32), X.astype(np.float32), t, ("auto",)),
        ("t64", torch.from_numpy(S), torch.from_numpy(X), torch.from_numpy(t), ("auto", "gemm")),
    ]
    for name, sup, x, tt, engines in cases:
        for eng in engines:
            f = NWField(sup, sigma_min=0.02, engine=eng)
            for tv in (0.3, 0.999, tt):
                out[f"{name}-{eng}-v-{type(tv).__name__}"] = f.velocity(x, tv)
                out[f"{name}-{eng}-div-{type(tv).__name__}"] = f.velocity_and_divergence(x, tv)[1]
            out[f"{name}-{eng}-logp"] = f.log_density(x, 0.7)
    out["callable"] = NWField(S, sigma_min=0.02, bandwidth=lambda s: 0.5 + 0 * s).velocity(X, t)
    return out


def sampler_values() -> dict:
    """Samplers, Torch modules, training times, tasks and the projection loss."""
    out, rng = {}, np.random.default_rng(0)
    S, X, t = rng.standard_normal((40, 3)), rng.standard_normal((25, 3)), rng.random(25)
    s = NWFlowSampler(sigma_min=0.05, random_state=0).fit(S)
    out["sample"], out["score"] = s.sample(30), s.score_samples(X)
    out["score_cov"] = NWFlowSampler(1.3, 0.1).fit(S[:8]).score_samples(X[:4])
    out["auto"] = NWFlowSampler(sigma_min="auto", random_state=0).fit(S).sample(10)
    mh = MultiHeadNW(3, 2, sigma_min=0.03, dtype=torch.float64)
    Xt, St = torch.from_numpy(X)[None], torch.from_numpy(S)[None]
    out["multihead"] = mh(Xt, St, torch.from_numpy(t)[None]).detach()
    out["multihead_scalar"] = mh(Xt, St, 0.4).detach()
    g = torch.Generator().manual_seed(0)
    out["times"] = sample_times((4, 5), sigma_min=0.01, method="log-bandwidth", generator=g)
    tasks = GaussianMixtureTasks(n_features=3)
    _, Q, params = tasks.sample_tasks(2, 5, 7, random_state=0, return_params=True)
    out["task_velocity"] = tasks.velocity(Q, np.full((2, 7), 0.6), params, sigma_min=0.02)
    out["projection_loss"] = np.array(nw_flow_matching_loss(S, X, random_state=0))
    return out


def learned_values() -> dict:
    """Tiny meta-training runs: samples and loss curves."""
    out, tasks = {}, GaussianMixtureTasks(n_features=2)
    S, _ = tasks.sample_task(6, 0, random_state=1)
    for target in ("conditional", "marginal", "exact"):
        for sampling in ("uniform", "log-bandwidth"):
            flat = dict(
                d_model=16, n_heads=2, n_layers=1, max_iter=6, batch_tasks=4, n_targets=8,
                support_size=6, target=target, time_sampling=sampling, random_state=0,
                validation_interval=3,
            )  # fmt: skip
            lf = LearnedFlowSampler(**learned_params_from_flat(flat)).fit(tasks)
            out[f"learned-{target}-{sampling}"] = lf.sample(5, support=S, random_state=0)
            out[f"learned-{target}-{sampling}-loss"] = np.array(lf.loss_curve_)
    return out


def fingerprint(value) -> str:
    """First 16 hex digits of the SHA-1 of an array's bytes."""
    array = value.detach().numpy() if torch.is_tensor(value) else np.asarray(value)
    return hashlib.sha1(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]


def main() -> None:
    warnings.simplefilter("ignore")
    values = {**field_values(), **sampler_values(), **learned_values()}
    for name in sorted(values):
        print(name, fingerprint(values[name]))


if __name__ == "__main__":
    main()
