"""A picture beside the numbers: four generators on one held-out digit, on the metric panel.

Digits PCA-16 (standardised on the training digits 0-6, as the ``digits`` setting of
``bench_transfer.py``), a support of ``--m`` rows of digit 9 (never seen in training), the
other rows of digit 9 the reference. Four arms, each drawn by
:func:`skflow.inspection.plot_metric_panel` (the generated rows over the support and the
reference on their two leading principal axes, the panel's values and noise floors in the
title):

- ``NWFlowSampler(sigma_min=0.01)``: the paper's plug-in bandwidth (copies its support);
- ``NWFlowSampler()``: the automatic bandwidth;
- ``EmpiricalBayesGaussianSampler()`` fitted on the training digits;
- ``FewShotSampler(budget_s=B)`` fitted on the training digits (``B = 0``: the classical
  candidates only).

Run ``python benchmarks/plot_panel_figure.py --out docs/_static/panel_digits.png``; it prints
the panel of every arm as a Markdown table (the numbers of ``docs/metrics.md``).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from skflow import EmpiricalBayesGaussianSampler, FewShotSampler, NWFlowSampler
from skflow.metrics import metric_panel

HELD = 9
TRAIN = np.arange(7)


def digits_task(m: int, seed: int) -> tuple:
    """Training rows and labels (digits 0-6), a support of ``m`` rows of digit 9 and the
    reference (its other rows), PCA-16 standardised on the training digits."""
    X, y = load_digits(return_X_y=True)
    train = np.isin(y, TRAIN)
    pca = PCA(n_components=16, random_state=0).fit(X[train])
    Z = StandardScaler().fit(pca.transform(X[train])).transform(pca.transform(X))
    rows = Z[y == HELD][np.random.default_rng(seed).permutation(int(np.sum(y == HELD)))]
    return Z[train], y[train], rows[:m], rows[m:]


def arms(X, y, budget: float, seed: int) -> dict:
    """Name -> fitted sampler."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "NWFlowSampler(sigma_min=0.01)": NWFlowSampler(sigma_min=0.01, random_state=seed),
            "NWFlowSampler()": NWFlowSampler(random_state=seed),
            "EmpiricalBayesGaussianSampler()": EmpiricalBayesGaussianSampler(random_state=seed).fit(
                X, y
            ),
            f"FewShotSampler(budget_s={budget:g})": FewShotSampler(
                budget_s=budget, random_state=seed
            ).fit(X, y),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=10)
    ap.add_argument("--generated", type=int, default=200)
    ap.add_argument("--few-shot-budget", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="panel_digits.png")
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skflow.inspection import plot_metric_panel

    start = time.perf_counter()
    X, y, S, R = digits_task(args.m, args.seed)
    fitted = arms(X, y, args.few_shot_budget, args.seed)
    fig, axes = plt.subplots(2, 2, figsize=(13, 11))
    rows = []
    for ax, (name, sampler) in zip(axes.ravel(), fitted.items(), strict=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            support = None if isinstance(sampler, NWFlowSampler) else S
            if support is None:
                sampler.fit(S)
            G = sampler.sample(args.generated, support=support, random_state=args.seed)
        panel = metric_panel(G, S, R, random_state=args.seed)
        plot_metric_panel(G, S, R, panel=panel, ax=ax)
        ax.set_title(f"{name}\n{ax.get_title()}", fontsize=8)
        rows.append((name, panel.to_dict()["metrics"]))
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)
    print(f"wrote {args.out}")
    print(markdown(rows, args, time.perf_counter() - start))


def markdown(rows: list, args, seconds: float) -> str:
    """The panels as a Markdown table, value (floor), and the command and machine."""
    names = list(rows[0][1])
    lines = ["| arm | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for arm, panel in rows:
        cells = [f"{panel[k]['value']:.3g} ({panel[k]['floor']:.3g})" for k in names]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    load = os.getloadavg()[0]
    lines.append("")
    lines.append(
        f"Command: `python benchmarks/plot_panel_figure.py --m {args.m} --generated "
        f"{args.generated} --few-shot-budget {args.few_shot_budget:g} --seed {args.seed}`; "
        f"{seconds:.0f} s on {os.cpu_count()} cores, load average {load:.1f}."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
