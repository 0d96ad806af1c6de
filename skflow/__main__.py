"""Command line: python -m skflow demo (also installed as the skflow script).

The demo has two parts, both on scikit-learn's bundled handwritten digits (no download):

1. the exact flow: the NW flow conditioned on a few digits of one class samples new digits;
   it prints MMD² against held-out digits of the same class, the memorisation ratio of the
   samples (distance to the closest support digit, relative to that of real held-out digits:
   near 1 for new digits, near 0 for copies) and the effective sample size of the kernel along
   the flow's own trajectories;
2. few-shot, plug-in vs learned: the shipped prior general-16-sized, the one whose network
   sees the support size (LearnedFlowSampler.from_pretrained, meta-trained on synthetic tasks
   only, no training here)
   and the plug-in field are conditioned, with no parameter update, on ten examples of the
   held-out digit (PCA to 16 dimensions and standardized, both fitted on the other classes);
   their MMD² and memorisation ratio against the rest of that class are printed (feature space,
   median-heuristic bandwidth from the held-out rows). --train-iter N fine-tunes the prior for
   N iterations on the other nine classes first.

The work is fixed (iterations, not seconds), so the numbers are the same on a busy and on a
quiet machine; only the wall time changes. A PNG shows both supports and the generated digits
of every sampler, each row titled with its numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

import numpy as np

from ._install import install_hint
from .samplers import SolverOptions

__all__ = ["main", "run_demo", "run_few_shot"]

#: Fine-tuning iterations of the demo's learned sampler (0: the shipped prior, zero-shot; a
#: fixed budget otherwise, so that a run does the same work whatever the machine's load).
DEMO_TRAIN_ITER = 0
#: The shipped prior of the demo's few-shot part: the one that sees the support size, which
#: docs/learned.md recommends zero-shot (general-16 copies part of a 10-row support).
DEMO_PRIOR = "general-16-sized"


def run_demo(
    digit: int = 3,
    n_support: int = 20,
    n_samples: int = 64,
    sigma_min: float | str = "auto",
    n_steps: int = 50,
    output: str | None = "skflow_demo.png",
    random_state: int = 0,
    learned: bool = True,
    few_shot_support: int = 10,
    train_iter: int = DEMO_TRAIN_ITER,
    verbose: int = 1,
) -> dict:
    """Fit the exact flow on ``n_support`` digits of one class, sample and report.

    With ``learned=True`` it also compares the shipped prior (fine-tuned on the other classes
    when ``train_iter > 0``) with the plug-in field on ``few_shot_support`` examples of ``digit``
    (:func:`run_few_shot`).

    Parameters
    ----------
    digit : int, default=3
        The digit class to generate.
    n_support : int, default=20
        Support rows of the exact-flow part.
    n_samples : int, default=64
        Generated digits of the exact-flow part (at least 200 in the few-shot part).
    sigma_min, n_steps : float or "auto", int
        Terminal bandwidth (exact-flow part; ``"auto"``: chosen from the support, so the
        samples are not copies) and Heun steps of every sampler.
    output : str or None, default="skflow_demo.png"
        Path of the figure; None skips it.
    random_state : int, default=0
        Seed of the splits, the training and the sampling.
    learned : bool, default=True
        Run the few-shot part.
    few_shot_support : int, default=10
        Support rows of the few-shot part.
    train_iter : int, default=0
        Fine-tuning iterations of the prior on the other classes (0: zero-shot; a fixed
        budget, no time cap).
    verbose : int, default=1
        Show the training progress bar.

    Returns
    -------
    report : dict
        ``mmd2_generated`` (generated vs held-out digits of the class), ``mmd2_support``
        (the support itself vs held-out, a reference), ``mmd2_other_class`` (held-out digits of
        another class vs held-out, the scale of a real mismatch), ``memorization_generated``
        (:func:`skflow.metrics.memorization_ratio` of the generated digits), ``n_eff`` (median
        effective sample size at a few times along the flow's own trajectories), ``few_shot``
        (the report of :func:`run_few_shot` without its images, or None) and ``figure`` (path
        or None).

    Examples
    --------
    >>> report = run_demo(n_support=10, n_samples=8, n_steps=5, output=None, learned=False)
    >>> report["n_eff"][0.0]
    10.0
    """
    from .threads import limit_threads

    with limit_threads(1):  # see run_few_shot
        exact = _exact_flow(digit, n_support, n_samples, sigma_min, n_steps, random_state)
    report = {k: v for k, v in exact.items() if k not in ("support", "generated")}
    report["few_shot"], report["figure"], few = None, None, None
    if learned:
        few = run_few_shot(
            digit=digit,
            n_support=few_shot_support,
            n_samples=n_samples,
            n_steps=n_steps,
            train_iter=train_iter,
            random_state=random_state,
            verbose=verbose,
        )
        report["few_shot"] = {k: v for k, v in few.items() if k != "images"}
    if output:
        report["figure"] = _plot(_panels(exact, few), output, digit)
    return report


def _exact_flow(digit, n_support, n_samples, sigma_min, n_steps, random_state) -> dict:
    """Part 1: the exact NW flow on ``n_support`` pixel images of ``digit``."""
    from sklearn.datasets import load_digits

    from .metrics import memorization_ratio, mmd2
    from .samplers import NWFlowSampler

    X, y = load_digits(return_X_y=True)
    X = X / 16.0  # pixel intensities in [0, 1]
    rng = np.random.default_rng(random_state)
    rows = rng.permutation(np.flatnonzero(y == digit))
    support, held_out = X[rows[:n_support]], X[rows[n_support:]]
    other = X[y == (digit + 1) % 10][: len(held_out)]

    sampler = NWFlowSampler(
        sigma_min=sigma_min, random_state=random_state, solver=SolverOptions(n_steps=n_steps)
    )
    sampler.fit(support)
    times, paths = sampler.sample_trajectories(n_samples)
    generated = paths[-1]
    n_eff = {}
    for t in (0.0, 0.25, 0.5, 0.75, 0.9, 1.0):
        k = int(np.argmin(np.abs(times - t)))
        values = sampler.effective_sample_size(paths[k], float(times[k]))
        n_eff[round(float(times[k]), 2)] = float(np.median(values))
    return {
        "digit": digit,
        "n_support": n_support,
        "mmd2_generated": mmd2(generated, held_out, reference=held_out),
        "mmd2_support": mmd2(support, held_out, reference=held_out),
        "mmd2_other_class": mmd2(other, held_out, reference=held_out),
        "memorization_generated": memorization_ratio(generated, support, held_out),
        "n_eff": n_eff,
        "support": support,
        "generated": generated,
    }


def _digit_features(digit: int) -> tuple:
    """Digits (pixels in [0, 1]), and a PCA-16 + standardization fitted on the other classes."""
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    train = y != digit
    features = make_pipeline(PCA(n_components=16, random_state=0), StandardScaler())
    features.fit(X[train])
    return X, y, features


def _meta_trained_sampler(Z, y, digit, n_support, n_steps, train_iter, random_state, verbose):
    """The few-shot part's learned sampler: the shipped prior, fine-tuned if ``train_iter``.

    ``LearnedFlowSampler.from_pretrained("general-16-sized")`` was meta-trained on synthetic
    tasks only (``docs/pretrained.md``): zero-shot, nothing of the digits is seen. With
    ``train_iter > 0`` it is fine-tuned (``warm_start``) for that many iterations on every
    class but ``digit``. Returns the sampler and the iterations and seconds of the fine-tuning.
    """
    from .samplers import LearnedFlowSampler

    learned = LearnedFlowSampler.from_pretrained(DEMO_PRIOR, n_features=Z.shape[1])
    learned.set_params(solver__n_steps=n_steps, random_state=random_state, verbose=verbose)
    n_iter, seconds = learned.n_iter_, learned.training_time_
    if train_iter > 0:
        learned.set_params(training__max_iter=train_iter)
        # The training loop writes a loss line to stdout every validation_interval
        # iterations beside its progress bar (stderr); the demo shows the bar only.
        with contextlib.redirect_stdout(io.StringIO()):
            learned.fit(Z[y != digit], y[y != digit])
    return learned, learned.n_iter_ - n_iter, learned.training_time_ - seconds


def run_few_shot(
    digit: int = 3,
    n_support: int = 10,
    n_samples: int = 64,
    n_steps: int = 50,
    train_iter: int = DEMO_TRAIN_ITER,
    random_state: int = 0,
    verbose: int = 0,
) -> dict:
    """Few-shot generation of a held-out digit: plug-in NW field vs the shipped prior.

    The learned sampler is ``LearnedFlowSampler.from_pretrained("general-16-sized")``,
    meta-trained on synthetic tasks only (``docs/pretrained.md``); with ``train_iter > 0`` it
    is first fine-tuned (``warm_start``, on one Torch thread) for exactly ``train_iter``
    iterations on the nine other classes of the standardized PCA-16 feature space, every task
    a class under a fresh random rotation (the estimator's default augmentation of
    ``fit(X, y)``). Both it
    and the plug-in :class:`~skflow.NWFlowSampler` (``sigma_min="auto"``, the bandwidth
    chosen from the support: the plug-in that does not copy, unlike the paper's 0.01)
    are conditioned in context on the same ``n_support`` rows of ``digit`` and generate
    ``max(n_samples, 200)`` points, compared with the class's remaining rows by MMD² in feature
    space (bandwidth from the held-out rows) and by the memorisation ratio
    (:func:`skflow.metrics.memorization_ratio`). ``mmd2_holdout_split`` is the MMD² between
    two halves of the held-out rows: the scale of the estimator's noise at this size.

    Parameters
    ----------
    digit : int, default=3
        The held-out class.
    n_support : int, default=10
        Support rows of ``digit`` both samplers are conditioned on.
    n_samples : int, default=64
        Generated points (at least 200).
    n_steps : int, default=50
        Heun steps of both samplers.
    train_iter : int, default=0
        Fine-tuning iterations (0: zero-shot; fixed: no time cap).
    random_state : int, default=0
        Seed of the split, the training and the sampling.
    verbose : int, default=0
        Show the training progress bar.

    Returns
    -------
    report : dict
        ``mmd2`` ({"plug-in": float, "learned": float}), ``memorization`` (the same keys),
        ``mmd2_holdout_split``, ``train_iterations``, ``train_seconds``, ``support_images``
        (the ``n_support`` pixel images of the support, shape (n_support, 64)) and ``images``
        (pixel images of the first ten generated points of each sampler, (10, 64) each).
    """
    from .metrics import memorization_ratio, mmd2
    from .samplers import NWFlowSampler
    from .threads import limit_threads

    X, y, features = _digit_features(digit)
    Z = features.transform(X)
    rng = np.random.default_rng(random_state)
    rows = rng.permutation(np.flatnonzero(y == digit))
    support, held_out = Z[rows[:n_support]], Z[rows[n_support:]]
    n_gen = max(n_samples, 200)
    # One Torch thread: the float sums do not depend on the machine's core count (the same
    # numbers everywhere), and a small model trains faster on one thread than on two that
    # contend with other work on a busy machine.
    with limit_threads(1):
        learned, n_iter, seconds = _meta_trained_sampler(
            Z, y, digit, n_support, n_steps, train_iter, random_state, verbose
        )
        # the automatic bandwidth: the plug-in a user would fit (sigma_min=0.01 copies)
        plugin = NWFlowSampler(sigma_min="auto", solver=SolverOptions(n_steps=n_steps)).fit(support)
        generated = {
            "plug-in": plugin.sample(n_gen, random_state=random_state),
            "learned": learned.sample(n_gen, support=support, random_state=random_state),
        }
    half = len(held_out) // 2
    return {
        "digit": digit,
        "n_support": n_support,
        "prior": DEMO_PRIOR,
        "mmd2": {k: mmd2(g, held_out, reference=held_out) for k, g in generated.items()},
        "memorization": {k: memorization_ratio(g, support, held_out) for k, g in generated.items()},
        "mmd2_holdout_split": mmd2(held_out[:half], held_out[half:], reference=held_out),
        "train_iterations": int(n_iter),
        "train_seconds": float(seconds),
        "support_images": X[rows[:n_support]],
        "images": {k: features.inverse_transform(g[:10]) for k, g in generated.items()},
    }


def _panels(exact: dict, few: dict | None) -> list[tuple[str, np.ndarray]]:
    """``(title, images)`` rows of the figure: each support, then each sampler's digits."""
    m = exact["n_support"]
    shown = min(10, m)
    panels = [
        (
            f"Exact flow: support, {shown} of the {m} real digits it is conditioned on",
            exact["support"],
        ),
        (
            f"Exact flow: generated samples  (MMD² {exact['mmd2_generated']:.3f}, "
            f"memorisation ratio "
            f"{exact['memorization_generated']:.2f})",
            exact["generated"],
        ),
    ]
    if few is not None:
        k = few["n_support"]
        support_title = f"Few-shot: the {k} real examples of the held-out digit (the support)"
        first = np.asarray(exact["support"])[:k]
        if first.shape == np.shape(few["support_images"]) and np.array_equal(
            first, few["support_images"]
        ):  # one seed draws both supports: say so rather than let it look like a mistake
            support_title = f"Few-shot: {k} real examples, the first {k} of row 1 again (same seed)"
        panels.append((support_title, few["support_images"]))
        for name, images in few["images"].items():
            label = "Plug-in NW field" if name == "plug-in" else "Pretrained prior"
            title = (
                f"{label}, conditioned on those {k}  (MMD² {few['mmd2'][name]:.3f} in PCA "
                f"features, "
                f"memorisation ratio {few['memorization'][name]:.2f})"
            )
            panels.append((title, images))
    return panels


def _plot(panels: list, output: str, digit: int) -> str | None:
    """One titled row of up to ten digit images per ``(title, images)``; the path or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: skipping the figure ({install_hint('plot')}).")
        return None
    n = 10
    fig, axes = plt.subplots(len(panels), n, figsize=(10.0, 1.45 * len(panels) + 0.9))
    axes = np.asarray(axes).reshape(len(panels), n)
    for row, (title, images) in zip(axes, panels, strict=True):
        # the row's title starts above its first digit and runs across the row
        row[0].set_title(title, fontsize=11, loc="left", pad=6)
        for j, ax in enumerate(row):
            ax.set_xticks([])
            ax.set_yticks([])
            if j < len(images):
                img = np.clip(np.asarray(images[j]).reshape(8, 8), 0.0, 1.0)
                ax.imshow(img, cmap="gray_r", vmin=0, vmax=1)
            else:
                ax.axis("off")
    fig.suptitle(
        f"skflow demo: handwritten {digit}s generated from a few real examples\n"
        "MMD²: lower is closer to real digits.  Memorisation ratio: ~1 new digits, ~0 copies.",
        fontsize=12,
    )
    top = 1.0 - 0.95 / fig.get_figheight()
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=top, hspace=0.55, wspace=0.1)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=100)
    plt.close(fig)
    return str(output)


def _print_report(report: dict) -> None:
    print(f"skflow demo: digit {report['digit']}, support of {report['n_support']} examples")
    print(f"  MMD^2 generated  vs held-out : {report['mmd2_generated']:.4f}")
    print(f"  MMD^2 support    vs held-out : {report['mmd2_support']:.4f}  (reference)")
    print(f"  MMD^2 other digit vs held-out: {report['mmd2_other_class']:.4f}  (a real mismatch)")
    print(
        f"  memorisation ratio           : {report['memorization_generated']:.2f}  "
        "(~1: new digits, ~0: copies of the support)"
    )
    print(
        "  median n_eff along the flow  : "
        + ", ".join(f"t={t:g}: {v:.2f}" for t, v in report["n_eff"].items())
    )
    few = report.get("few_shot")
    if few:
        print(
            f"few-shot, held-out digit {few['digit']} from {few['n_support']} examples "
            + (
                f"(learned: the shipped prior, fine-tuned on the other classes for "
                f"{few['train_iterations']} iterations, {few['train_seconds']:.0f} s):"
                if few["train_iterations"]
                else f"(learned: the shipped prior {DEMO_PRIOR}, zero-shot, no training):"
            )
        )
        for name, value in few["mmd2"].items():
            print(
                f"  MMD^2 {name:<8} vs held-out : {value:.4f}   "
                f"memorisation ratio {few['memorization'][name]:.2f}"
            )
        print(f"  MMD^2 held-out half vs half: {few['mmd2_holdout_split']:.4f}  (noise scale)")
    if report["figure"]:
        print(f"  figure written to {report['figure']}")


def _sigma_min_arg(value: str) -> float | str:
    return value if value == "auto" else float(value)


def _parser() -> argparse.ArgumentParser:
    first = __doc__.splitlines()[0]
    parser = argparse.ArgumentParser(
        prog="skflow",
        description=first,
        epilog="python -m skflow demo --help: the demo's options. "
        "python -m skflow_experiments --help (from a clone): the paper's experiments.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="condition on a few digits, sample, report, plot",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--digit", type=int, default=3, help="digit class (default 3)")
    demo.add_argument("--n-support", type=int, default=20, help="exact-flow support size")
    demo.add_argument("--n-samples", type=int, default=64, help="generated digits")
    demo.add_argument(
        "--sigma-min", type=_sigma_min_arg, default="auto", help="exact-flow sigma_min ('auto')"
    )
    demo.add_argument("--n-steps", type=int, default=50, help="ODE steps of every sampler")
    demo.add_argument("--output", default="skflow_demo.png", help="PNG path ('' to skip)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--no-learned", action="store_true", help="skip the few-shot part")
    demo.add_argument("--few-shot-support", type=int, default=10, help="few-shot support size")
    demo.add_argument(
        "--train-iter",
        type=int,
        default=DEMO_TRAIN_ITER,
        help=f"fine-tuning iterations of the prior (default {DEMO_TRAIN_ITER}: zero-shot)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m skflow``."""
    args = _parser().parse_args(argv)
    report = run_demo(
        digit=args.digit,
        n_support=args.n_support,
        n_samples=args.n_samples,
        sigma_min=args.sigma_min,
        n_steps=args.n_steps,
        output=args.output or None,
        random_state=args.seed,
        learned=not args.no_learned,
        few_shot_support=args.few_shot_support,
        train_iter=args.train_iter,
    )
    _print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
