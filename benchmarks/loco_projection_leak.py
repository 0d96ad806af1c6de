"""Why empirical Bayes validates well on digits and transfers badly to a held-out digit.

``bench_transfer.py --settings digits-loco`` fits its PCA (16 components) and scaling on the
nine training digits; the selection of :class:`skflow.BestClassicalSampler` then folds those
nine digits *after* the projection, so each validation digit had a say in the PCA that its
supports are projected with, and the held-out test digit had none. This script scores the
empirical-Bayes and Ledoit-Wolf arms and the plug-in (``sigma_min = 0.3``) on each held-out
digit (10 supports of ``m = 10`` rows per digit, 200 generated rows, MMD² at the reference's
median-heuristic bandwidth) under the two projections: fitted on the nine training digits
(``pca-9``, what the benchmark and a user do) and on all ten (``pca-10``, the leak that the
selection's folds enjoy).

Usage: ``python benchmarks/loco_projection_leak.py`` (a few seconds on one core); it
prints a markdown table.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from skflow import EmpiricalBayesGaussianSampler, LedoitWolfSampler, NWFlowSampler
from skflow.metrics import mmd2

M, N_SUPPORTS, N_GEN = 10, 10, 200


def arms() -> dict:
    return {
        "emp_bayes": EmpiricalBayesGaussianSampler(random_state=0),
        "ledoit_wolf": LedoitWolfSampler(random_state=0),
        "plugin (0.3)": NWFlowSampler(sigma_min=0.3, sigma_min_search=None, random_state=0),
    }


def held_out_scores(X: np.ndarray, y: np.ndarray, digit: int, leak: bool) -> dict:
    """Mean MMD² of each arm on ``digit``, trained on the nine others."""
    train = y != digit
    fit_rows = np.ones_like(train) if leak else train
    pca = PCA(16, random_state=0).fit(X[fit_rows])
    Z = StandardScaler().fit(pca.transform(X[fit_rows])).transform(pca.transform(X))
    rows = Z[y == digit]
    rng = np.random.default_rng(digit)
    orders = [rng.permutation(len(rows)) for _ in range(N_SUPPORTS)]
    S = np.stack([rows[o[:M]] for o in orders])
    refs = [rows[o[M:]] for o in orders]
    out = {}
    for name, arm in arms().items():
        gen = arm.fit(Z[train], y[train]).sample(N_GEN, support=S, random_state=1)
        out[name] = float(
            np.mean([mmd2(g, r, reference=r) for g, r in zip(gen, refs, strict=True)])
        )
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    X, y = load_digits(return_X_y=True)
    names = list(arms())
    print("| projection fitted on | " + " | ".join(f"{n} ×10³" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for leak, label in ((False, "the nine training digits"), (True, "all ten digits")):
        per_digit = [held_out_scores(X, y, d, leak) for d in range(10)]
        cells = []
        for n in names:
            v = 1e3 * np.array([p[n] for p in per_digit])
            cells.append(f"{v.mean():.1f} (worst digit {int(v.argmax())}: {v.max():.1f})")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
