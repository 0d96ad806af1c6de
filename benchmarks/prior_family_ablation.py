"""Which synthetic families transfer to real classes? A short-training ablation of the prior.

Trains one :class:`~skflow.LearnedFlowSampler` per family mixture of
:class:`skflow.priors.PriorTasks` (the ``general-16`` recipe, a short budget, one Torch
thread), then scores each zero-shot on a *selection* set that no headline uses: digits classes
0-6 after a PCA to 16 components (the few-shot experiment's training classes; the zero-shot
table of ``docs/results.md`` evaluates digits on classes 7-9 only). Each task is one class:
``m`` support rows, the other rows the reference; MMD² under the "true" median convention,
the plug-in at ``sigma_min = 0.01`` and at the best ``sigma_min`` of a grid (chosen on
independent draws of the same classes), and the memorisation ratio.

Usage: ``python benchmarks/prior_family_ablation.py [--iters 2000] [--tasks 35] [--write-docs]``;
it prints a markdown table, writes ``--json`` after every variant and, with ``--write-docs``,
the table into ``docs/pretrained.md`` (``--docs-from JSON`` writes it from a saved run).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from skflow import LearnedFlowSampler, NWFlowSampler
from skflow.experiments.protocol import scores_both_conventions
from skflow.metrics import memorization_ratio
from skflow.priors import RECIPES, PriorTasks
from skflow.threads import limit_threads

VARIANTS = {
    "all families": None,
    "elliptical (gaussian, student, lognormal)": {"gaussian": 1, "student": 1, "lognormal": 1},
    "gaussian only": {"gaussian": 1},
    "curves and shells": {"rings": 1, "moons": 1, "spirals": 1, "shells": 1},
}
GRID = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
MS = (5, 10, 20)
PAGE = Path(__file__).resolve().parents[1] / "docs" / "pretrained.md"
BEGIN, END = "<!-- prior-ablation:begin -->", "<!-- prior-ablation:end -->"


def selection_tasks(n_tasks: int, seed: int) -> list:
    X, y = load_digits(return_X_y=True)
    keep = y <= 6
    Z = PCA(16, random_state=0).fit_transform(X[keep])
    Z, y = StandardScaler().fit_transform(Z), y[keep]
    rng = np.random.default_rng(seed)
    out = []
    for j in range(n_tasks):
        rows = Z[y == j % 7]
        order = rng.permutation(len(rows))
        out.append((rows[order[: max(MS)]], rows[order[max(MS) :]]))
    return out


def _machine() -> str:
    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{os.cpu_count()} cores, load average (1 / 5 / 15 min) {load} at the end"


def score_sampler(sampler, tasks, m: int, n_gen: int) -> tuple[float, float]:
    pools = np.stack([p[:m] for p, _ in tasks])
    if isinstance(sampler, NWFlowSampler):  # in-context supports need a fitted estimator
        sampler = sampler.fit(pools[0])
    gen = sampler.sample(n_gen, support=pools, random_state=1)
    mmd = [scores_both_conventions(g, r)["true"] for g, (_, r) in zip(gen, tasks, strict=True)]
    copy = [memorization_ratio(g, p[:m], r) for g, (p, r) in zip(gen, tasks, strict=True)]
    return float(np.mean(mmd)), float(np.median(copy))


def table(saved: dict) -> str:
    """The markdown block of a saved run (its rows and settings)."""
    a = saved["args"]
    lines = [
        BEGIN,
        "Written by `python benchmarks/prior_family_ablation.py --iters "
        f"{a['iters']} --tasks {a['tasks']} --write-docs` ({a['iters']} iterations per variant, "
        f"{a['tasks']} tasks of digits classes 0-6, {a['n_generated']} generated points; machine: "
        f"{saved.get('machine', 'load not recorded by this run')}). A short budget: it ranks "
        "family mixtures, it does not measure the shipped prior.",
        "",
        "| training families | m | MMD² (true median) | median memorisation ratio |",
        "|---|---|---|---|",
    ]
    for key, val in saved["rows"].items():
        name, m = key.rsplit(", m=", 1)
        lines.append(f"| {name} | {m} | {val[0]:.4f} | {val[1]:.2f} |")
    return "\n".join(lines + ["", END])


def write_docs(saved: dict, page: Path = PAGE) -> None:
    """Put the block into the model-card page (replacing an older one)."""
    text = page.read_text()
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + text[text.index(END) + len(END) :].lstrip("\n")
    page.write_text(text.rstrip("\n") + "\n\n" + table(saved) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--tasks", type=int, default=35)
    ap.add_argument("--n-generated", type=int, default=200)
    ap.add_argument("--json", default="prior_family_ablation.json")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--docs-from", default=None, help="write the docs block from a saved JSON")
    args = ap.parse_args()
    if args.docs_from:
        write_docs(json.loads(Path(args.docs_from).read_text()))
        return
    tasks, tune = selection_tasks(args.tasks, 0), selection_tasks(args.tasks, 1)
    rows = {}
    with limit_threads(1):
        for m in MS:
            best = min(
                GRID,
                key=lambda s, m=m: score_sampler(
                    NWFlowSampler(sigma_min=s), tune, m, args.n_generated
                )[0],
            )
            rows[f"plug-in tuned (sigma_min per m), m={m}"] = score_sampler(
                NWFlowSampler(sigma_min=best), tasks, m, args.n_generated
            ) + (best,)
            rows[f"plug-in 0.01, m={m}"] = score_sampler(
                NWFlowSampler(sigma_min=0.01), tasks, m, args.n_generated
            )
        for name, weights in VARIANTS.items():
            recipe = RECIPES["general-16"]
            params = {**recipe["sampler"], "max_iter": args.iters, "validation_fraction": 0.0}
            t0 = time.perf_counter()
            model = LearnedFlowSampler(**params).fit(PriorTasks(16, weights=weights))
            wall = time.perf_counter() - t0
            for m in MS:
                rows[f"{name}, m={m}"] = score_sampler(model, tasks, m, args.n_generated) + (wall,)
            print(name, "done", round(wall), "s", flush=True)
            saved = {"args": vars(args), "rows": rows, "machine": _machine()}
            with open(args.json, "w") as f:  # after every variant: a crash keeps the others
                json.dump(saved, f, indent=1)
    print("| method | m | MMD² (true) | median copy ratio |\n|---|---|---|---|")
    for key, val in rows.items():
        name, m = key.rsplit(", m=", 1)
        print(f"| {name} | {m} | {val[0]:.4f} | {val[1]:.2f} |")
    if args.write_docs:
        write_docs(saved)


if __name__ == "__main__":
    main()
