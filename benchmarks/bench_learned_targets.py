"""Regression targets of LearnedFlowSampler compared at equal iterations (Gaussian mixtures).

Trains one small model per (target, seed) on ``GaussianMixtureTasks(n_features=d)`` with the
same settings and iterations, conditions each on the same held-out supports and reports the
mean MMD² (Gaussian kernel, median heuristic from the true points) of generated vs true points,
and the paired difference to ``target="conditional"`` per held-out task (averaged over seeds)
with a 95 % t-interval over tasks. The noise floor is the MMD² of two independent samples of
the true task of the same size; the isotropic plug-in (``NWFlowSampler``, same solver) is
reported beside them.

Run: ``python benchmarks/bench_learned_targets.py`` (one Torch thread; ``--help``). The JSON
result goes to ``--out``; nothing is written into the docs by this script.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from scipy import stats

from skflow import SolverOptions
from skflow.metrics import mmd2
from skflow.samplers.learned import LearnedFlowSampler
from skflow.samplers.nw import NWFlowSampler
from skflow.samplers.options import learned_params_from_flat
from skflow.tasks import GaussianMixtureTasks

TARGETS = ("conditional", "exact", "marginal")


def _model(target: str, seed: int, args) -> LearnedFlowSampler:
    flat = dict(
        d_model=32,
        n_heads=4,
        n_layers=2,
        batch_tasks=16,
        support_size=args.n_support,
        n_targets=64,
        max_iter=args.iterations,
        warmup=50,
        solver="heun",
        n_steps=args.n_steps,
        target=target,
        random_state=seed,
    )
    return LearnedFlowSampler(**learned_params_from_flat(flat))


def _mmd_per_task(generated: np.ndarray, true: np.ndarray) -> np.ndarray:
    return np.array([mmd2(g, q, reference=q) for g, q in zip(generated, true, strict=True)])


def _interval(diff: np.ndarray) -> list[float]:
    half = stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / np.sqrt(len(diff))
    return [float(diff.mean() - half), float(diff.mean() + half)]


def run(args) -> dict:
    tasks = GaussianMixtureTasks(n_features=args.n_features)
    S, Q = tasks.sample_tasks(args.n_tasks, args.n_support, 2 * args.n_points, random_state=10_000)
    true, floor_ref = Q[:, : args.n_points], Q[:, args.n_points :]
    out = {"settings": vars(args), "mmd2": {}, "train_seconds": {}}
    out["noise_floor"] = float(_mmd_per_task(floor_ref, true).mean())
    plugin = NWFlowSampler(sigma_min=0.01, solver=SolverOptions("heun", n_steps=args.n_steps))
    plugin_gen = np.stack([plugin.fit(s).sample(args.n_points, random_state=0) for s in S])
    out["mmd2"]["plug-in"] = float(_mmd_per_task(plugin_gen, true).mean())
    out["mmd2_per_seed"] = {}
    per_task = {}
    for target in TARGETS:
        rows = []
        for seed in range(args.seeds):
            t0 = time.perf_counter()
            lf = _model(target, seed, args).fit(tasks)
            out["train_seconds"][f"{target}/{seed}"] = time.perf_counter() - t0
            gen = lf.sample_batch(args.n_points, S, random_state=seed)
            rows.append(_mmd_per_task(gen, true))
            print(f"{target:12s} seed {seed}: mean MMD² {rows[-1].mean():.5f}", flush=True)
        out["mmd2_per_seed"][target] = [float(r.mean()) for r in rows]
        per_task[target] = np.mean(rows, axis=0)  # (n_tasks,) averaged over seeds
        out["mmd2"][target] = float(per_task[target].mean())
    out["paired_vs_conditional"] = {
        t: {
            "mean_diff": float((per_task[t] - per_task["conditional"]).mean()),
            "ci95": _interval(per_task[t] - per_task["conditional"]),
        }
        for t in TARGETS[1:]
    }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-features", type=int, default=2)
    p.add_argument("--n-support", type=int, default=50)
    p.add_argument("--iterations", type=int, default=400)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--n-tasks", type=int, default=100)
    p.add_argument("--n-points", type=int, default=300)
    p.add_argument("--n-steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="bench_learned_targets.json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    result = run(args)
    print(json.dumps({k: v for k, v in result.items() if k != "train_seconds"}, indent=2))
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
