"""
Generating new digits with a PCA + NW-flow pipeline
===================================================

Generating new digits: a PCA + NW-flow sampling pipeline chosen by cross-validation.

The scikit-learn example "Kernel Density Estimation" (``plot_digits_kde_sampling``) projects
the 8x8 digits on 15 PCA components, fits a Gaussian KDE whose bandwidth is chosen by
``GridSearchCV``, samples new points and maps them back with ``PCA.inverse_transform``. This
script does the same with skflow: ``make_sampling_pipeline(PCA(whiten=False), NWFlowSampler())``
is searched over the PCA dimension and the flow's ``sigma_min`` (the bandwidth of the KDE that
the exact flow samples at t = 1). ``SamplingPipeline.score`` is -MMD^2 *in input space* with a
bandwidth from the held-out digits alone, so pipelines with different numbers of components are
compared on the same scale.

Pixel values are divided by 16 (to [0, 1]) so that ``sigma_min`` in (0, 1) is a meaningful
bandwidth for the PCA coordinates.

Run ``python examples/plot_digits_pipeline.py [--quick] [--output-dir output]``; it prints the
search results and writes ``digits_pipeline.png`` (real digits above, generated ones below).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV

from skflow import NWFlowSampler, SolverOptions
from skflow.metrics import mmd2
from skflow.pipeline import make_sampling_pipeline


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description="Generating new digits with a PCA + NW-flow pipeline"
    )
    parser.add_argument("--quick", action="store_true", help="small grid, fewer ODE steps")
    parser.add_argument("--output-dir", default="output", help="where the PNG is written")
    args = parser.parse_args(argv)

    digits = load_digits()
    rng = np.random.default_rng(0)
    order = rng.permutation(digits.data.shape[0])
    X = digits.data[order] / 16.0
    n_test = 300
    X_train, X_test = X[:-n_test], X[-n_test:]

    if args.quick:
        grid = {"pca__n_components": [4, 15, 30], "nwflowsampler__sigma_min": [0.05, 0.3]}
        n_steps, cv = 10, 2
    else:
        grid = {
            "pca__n_components": [4, 8, 15, 30, 45],
            "nwflowsampler__sigma_min": [0.02, 0.05, 0.1, 0.2, 0.4],
        }
        n_steps, cv = 50, 3

    pipe = make_sampling_pipeline(
        PCA(whiten=False), NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=n_steps))
    )
    start = time.perf_counter()
    search = GridSearchCV(pipe, grid, cv=cv).fit(X_train)
    elapsed = time.perf_counter() - start

    print(f"GridSearchCV over {grid} ({cv}-fold, {elapsed:.1f} s)")
    print("score = -MMD^2 in input space (higher is better)")
    results = search.cv_results_
    for params, mean, std in zip(
        results["params"], results["mean_test_score"], results["std_test_score"], strict=True
    ):
        print(
            f"  n_components={params['pca__n_components']:>3}  "
            f"sigma_min={params['nwflowsampler__sigma_min']:<5}  "
            f"score={mean:+.5f} (+/- {std:.5f})"
        )
    print(f"best: {search.best_params_}  (cv score {search.best_score_:+.5f})")

    best = search.best_estimator_
    new = best.sample(44, random_state=0)
    held_out = -mmd2(best.sample(n_test, random_state=1), X_test, reference=X_test)
    # Reference points: the same number of training digits against the test digits.
    baseline = -mmd2(X_train[:n_test], X_test, reference=X_test)
    print(f"held-out score of the best pipeline: {held_out:+.5f}")
    print(f"real training digits vs test digits:  {baseline:+.5f}")
    # MMD^2 cannot tell new digits from copies of training digits: report how close the
    # samples are to their nearest training digit, next to the same for real test digits.
    nn_new = _nearest_distance(best.sample(n_test, random_state=2), X_train)
    nn_test = _nearest_distance(X_test, X_train)
    print(
        f"median distance to the nearest training digit: samples {np.median(nn_new):.3f}, "
        f"test digits {np.median(nn_test):.3f}"
    )

    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "digits_pipeline.png"
    _plot(X_test[:44], new, path, search.best_params_)
    print(f"wrote {path}")
    return {
        "best_params": search.best_params_,
        "best_score": float(search.best_score_),
        "held_out_score": float(held_out),
        "baseline_score": float(baseline),
        "nn_distance_samples": float(np.median(nn_new)),
        "nn_distance_test": float(np.median(nn_test)),
    }


def _nearest_distance(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    d2 = (A**2).sum(1)[:, None] + (B**2).sum(1)[None, :] - 2.0 * A @ B.T
    return np.sqrt(np.maximum(d2.min(axis=1), 0.0))


def _plot(real: np.ndarray, new: np.ndarray, path: Path, params: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(9, 11, subplot_kw={"xticks": [], "yticks": []}, figsize=(6, 5.5))
    for j in range(11):
        ax[4, j].set_visible(False)
        for i in range(4):
            ax[i, j].imshow(real[i * 11 + j].reshape(8, 8), cmap=plt.cm.binary, vmin=0, vmax=1)
            ax[i + 5, j].imshow(new[i * 11 + j].reshape(8, 8), cmap=plt.cm.binary, vmin=0, vmax=1)
    ax[0, 5].set_title("Selection from the input data")
    ax[5, 5].set_title(
        f"NW flow samples (PCA {params['pca__n_components']}, "
        f"sigma_min {params['nwflowsampler__sigma_min']})"
    )
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
