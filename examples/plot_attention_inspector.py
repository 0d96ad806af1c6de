"""
Attention inspector: is a model's attention kernel smoothing?
=============================================================

:class:`skflow.inspection.AttentionRecorder` records the attention calls made inside any
``torch.nn.Module`` forward (``scaled_dot_product_attention`` wherever it is called, and
``torch.nn.MultiheadAttention``), and :func:`skflow.inspection.nw_correspondence` compares every
recorded head with the Gaussian-kernel Nadaraya-Watson weights of its own queries and keys at
the matched bandwidth ``h = 1/sqrt(scale)``: the two differ only by the key-norm term
``scale * ||k_i||^2 / 2``.

Two models are inspected:

1. a small randomly initialised :class:`torch.nn.TransformerDecoder` (one layer's
   cross-attention, a subsample of the query rows), with a check that the outputs are unchanged
   bit for bit;
2. a :class:`skflow.LearnedFlowSampler` (without the exact head) meta-trained on
   Gaussian-mixture tasks, inspected along its own sampling trajectories: one recorded step per
   flow time ``t``, plotted like the paper's figure (correlation and fraction of NW-like heads
   against the step).

Run::

    python examples/plot_attention_inspector.py                 # quick preset, seconds on a CPU
    python examples/plot_attention_inspector.py --preset full   # a longer-trained model
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from skflow import LearnedFlowSampler
from skflow.inspection import AttentionRecorder, nw_correspondence, plot_nw_correspondence
from skflow.samplers.options import learned_params_from_flat
from skflow.tasks import GaussianMixtureTasks

PRESETS = {
    "quick": {"max_iter": 300, "d_model": 32, "batch_tasks": 8, "n_targets": 64},
    "full": {"max_iter": 2000, "d_model": 64, "batch_tasks": 32, "n_targets": 128},
}
TIMES = (0.1, 0.3, 0.5, 0.7, 0.9, 0.99)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Attention inspector")
    p.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", default="output", help="where the PNG goes (default output/)")
    return p.parse_args(argv)


def inspect_decoder(seed):
    """One cross-attention layer of a random TransformerDecoder, 16 of 40 query rows."""
    torch.manual_seed(seed)
    layer = torch.nn.TransformerDecoderLayer(32, 4, dim_feedforward=64, batch_first=True)
    decoder = torch.nn.TransformerDecoder(layer, num_layers=3).eval()
    queries, memory = torch.randn(2, 40, 32), torch.randn(2, 50, 32)
    with torch.no_grad():
        reference = decoder(queries, memory)
        with AttentionRecorder(
            decoder, modules="layers.1.multihead_attn", max_queries=16, random_state=seed
        ) as rec:
            inspected = decoder(queries, memory)
    print(f"outputs unchanged bit for bit: {torch.equal(reference, inspected)}")
    print(f"attention calls seen per module: {rec.calls_seen_}")
    res = nw_correspondence(rec)
    print("| module | head | Spearman | Pearson | key-norm dispersion |")
    print("|---|---|---|---|---|")
    for row in res.to_records():
        print(
            f"| {row['module']} | {row['head']} | {row['spearman']:.3f} | "
            f"{row['pearson']:.3f} | {row['key_norm_dispersion']:.3f} |"
        )


def inspect_learned(cfg, seed):
    """A LearnedFlowSampler's cross-attention along its own trajectories, one step per t."""
    tasks = GaussianMixtureTasks(n_features=2)
    flat = dict(exact_head=False, support_size=50, n_steps=50, random_state=seed, **cfg)
    model = LearnedFlowSampler(**learned_params_from_flat(flat))
    start = time.perf_counter()
    model.fit(tasks)
    print(f"\ntrained {model.n_iter_} iterations in {time.perf_counter() - start:.1f} s")
    S, _ = tasks.sample_task(50, 0, random_state=seed + 1)
    grid, traj = model.sample_trajectories(128, support=S, random_state=seed + 2)
    idx = np.abs(grid[None, :] - np.asarray(TIMES)[:, None]).argmin(axis=1)
    with AttentionRecorder(model.model_, modules="blocks.*.attn") as rec:
        for i in idx:  # one forward of the network per t: the recorded steps
            model.velocity(traj[i], float(grid[i]), support=S)
    res = nw_correspondence(rec)
    steps, frac = res.fraction_nw_like("step")
    _, med = res.median_by("step")
    print("| t | median Spearman over heads | fraction of heads with rho > 0.9 |")
    print("|---|---|---|")
    for s in steps:
        print(f"| {grid[idx[s]]:.2f} | {med[s]:.3f} | {frac[s]:.2f} |")
    return res, grid[idx]


def main(argv=None):
    args = parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # these small models run fastest on one thread; restored below
    try:
        inspect_decoder(args.seed)
        res, times = inspect_learned(PRESETS[args.preset], args.seed)
    finally:
        torch.set_num_threads(threads)

    import matplotlib

    matplotlib.use("Agg")

    fig = plot_nw_correspondence(res, x=times, xlabel="flow time t (one recorded step per t)")
    fig.suptitle("LearnedFlowSampler cross-attention vs Gaussian-kernel NW of its own q, k")
    fig.tight_layout()
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "attention_inspector.png"
    fig.savefig(path, dpi=120)
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()
