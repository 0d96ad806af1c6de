#!/usr/bin/env python
"""Accuracy and cost of ``NWFlowSampler.score_samples`` without a closed form.

``NWFlowSampler(bandwidth=1.0)`` has exactly the field of ``bandwidth="ot"`` but computes its
log-density by the adaptive change of variables, so the closed form
(``NWFlowSampler().score_samples``, the KDE) is an exact reference. Workload: a 2-D support of
``m`` standard-normal points, ``sigma_min = 0.01``, 200 held-out standard-normal points and 200
of the model's own samples; NumPy backend. For each ``density_rtol = density_atol`` the table
gives the maximum and median absolute error (nats), the largest error estimate of
``log_density_with_error`` and the ratio estimate / error (min over rows with error > 1e-6),
and the wall time per point of ``score_samples`` (both solves of the error estimate included).

Usage::

    .venv/bin/python benchmarks/bench_likelihood.py            # m = 40, tolerances 1e-6..1e-9
    .venv/bin/python benchmarks/bench_likelihood.py --m 10 --tols 1e-8
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from skflow import DensityOptions, NWFlowSampler


def _row(name, tol, sampler, X, ref):
    start = time.perf_counter()
    log_p, err = sampler.log_density_with_error(X)
    per_point = (time.perf_counter() - start) / len(X)
    actual = np.abs(log_p - ref)
    big = actual > 1e-6
    ratio = float(np.min(err[big] / actual[big])) if big.any() else float("nan")
    return (
        f"| {name} | {tol:.0e} | {actual.max():.2e} | {np.median(actual):.2e} | "
        f"{err.max():.2e} | {ratio:.2f} | {1e3 * per_point:.1f} |"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=40, help="support size")
    parser.add_argument("--tols", type=float, nargs="+", default=[1e-6, 1e-7, 1e-8, 1e-9])
    args = parser.parse_args(argv)
    rng = np.random.RandomState(0)
    support = rng.normal(size=(args.m, 2))
    held_out = rng.normal(size=(200, 2))
    exact = NWFlowSampler(sigma_min=0.01, backend="numpy", random_state=1).fit(support)
    own = exact.sample(200)
    refs = {"held-out": exact.score_samples(held_out), "own samples": exact.score_samples(own)}
    print(
        f"m = {args.m}, d = 2, sigma_min = 0.01; {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"held-out log p: min {refs['held-out'].min():.0f}, mean {refs['held-out'].mean():.0f}")
    print("| points | tol | max err | median err | max estimate | min estimate/err | ms/point |")
    print("|---|---|---|---|---|---|---|")
    for tol in args.tols:
        sampler = NWFlowSampler(
            bandwidth=1.0,
            sigma_min=0.01,
            backend="numpy",
            density=DensityOptions(rtol=tol, atol=tol),
        ).fit(support)
        for name, X in (("held-out", held_out), ("own samples", own)):
            print(_row(name, tol, sampler, X, refs[name]))


if __name__ == "__main__":
    main()
