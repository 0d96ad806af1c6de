#!/usr/bin/env python
"""Time of one training batch of tasks, drawn on the CPU: the paper configuration's
``GaussianMixtureTasks(n_features=16).sample_tasks(256, 50, 256)``.

The GPU check measured 165 ms of each paper-configuration training step in this draw
(``benchmarks/results/gpu_check``). This prints the median and the spread of ``--repeats``
timed draws (after one warm-up draw), the load average, and a SHA-256 of the draws of seeds
0..2 (supports, queries and mixture parameters), so two versions of the drawing code can be
checked for bit-identical draws as well as timed.

The Torch arm (``--devices``, default ``cpu``, plus ``cuda`` when available) times the same
batch drawn in Torch on each device (``sample_tasks(..., device=DEVICE)``, float32, a local
generator; issue 55), synchronised before and after each draw, so what the training loop
pays for a batch drawn where the model trains.

Usage::

    python benchmarks/bench_task_draw.py [--repeats 10] [--devices cpu cuda] [--json OUT]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skflow.tasks import GaussianMixtureTasks  # noqa: E402

SHAPE = (256, 50, 256)  # tasks, support points, targets (LearnedFlowSampler.paper_config())


def _fingerprint(tasks: GaussianMixtureTasks) -> str:
    digest = hashlib.sha256()
    for seed in range(3):
        drawn = tasks.sample_tasks(*SHAPE, random_state=seed, return_params=True)
        S, Q, params = drawn
        for array in (S, Q, *params):
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def torch_arm(tasks: GaussianMixtureTasks, device: str, repeats: int) -> dict:
    """Median, min and max milliseconds of the batch drawn in Torch on ``device``."""
    gen = np.random.default_rng(0)  # one seed per draw, as the training loop passes it
    tasks.sample_tasks(*SHAPE, random_state=gen, device=device)  # warm-up (kernels, QR)
    seconds = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        tasks.sample_tasks(*SHAPE, random_state=gen, device=device)
        _sync(device)
        seconds.append(time.perf_counter() - start)
    ms = 1e3 * np.asarray(seconds)
    return {
        "median_ms": round(float(np.median(ms)), 2),
        "min_ms": round(float(ms.min()), 2),
        "max_ms": round(float(ms.max()), 2),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--devices", nargs="*", default=None, help="Torch arms: cpu, cuda")
    args = parser.parse_args(argv)
    import torch

    devices = args.devices
    if devices is None:
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    tasks, rng = GaussianMixtureTasks(n_features=16), np.random.default_rng(0)
    tasks.sample_tasks(*SHAPE, random_state=rng)  # warm-up
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        tasks.sample_tasks(*SHAPE, random_state=rng)
        seconds.append(time.perf_counter() - start)
    ms = 1e3 * np.asarray(seconds)
    result = {
        "call": "GaussianMixtureTasks(n_features=16).sample_tasks(256, 50, 256)",
        "repeats": args.repeats,
        "median_ms": round(float(np.median(ms)), 2),
        "min_ms": round(float(ms.min()), 2),
        "max_ms": round(float(ms.max()), 2),
        "load_average": "/".join(f"{v:.2f}" for v in os.getloadavg()),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "sha256_seeds_0_2": _fingerprint(tasks),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_draws": {device: torch_arm(tasks, device, args.repeats) for device in devices},
    }
    result["load_average_end"] = "/".join(f"{v:.2f}" for v in os.getloadavg())
    print(json.dumps(result, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
