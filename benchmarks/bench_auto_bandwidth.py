#!/usr/bin/env python
"""The automatic bandwidth of the plug-in (``NWFlowSampler(sigma_min="auto")``) against oracles.

Three parts, each a CPU job on one thread:

* ``--fit``: fits the constants of the rule (``skflow/samplers/_bandwidth.py``: ``RULE_SCALE``,
  ``RULE_EXPONENT``, ``COPY_FLOOR``) on the **training** classes 0-6 of digits (PCA-16,
  standardised on those classes) only, and prints them. The MMD term: per support size m,
  the bandwidth relative to the support's spread that minimises the mean MMD² over tasks
  (geometric mean of the two median conventions' optima), fitted by a line in log-log. The
  copy floor: the smallest multiple of ``nn / sqrt(d)`` whose median memorisation ratio over
  tasks reaches ``--copy-target``.
* default: held-out evaluation. On digits PCA-16 (held-out classes 7, 8, 9), raw digit pixels
  (classes 7, 8, 9, unstandardised 0-16 values), iris, wine and breast cancer (standardised;
  no constant was fitted on them), m = 5, 10, 20, 50 (where the classes allow 20 reference
  rows): MMD² (both median conventions of ``skflow_experiments``: bandwidth from the true
  points, and from the pooled sample) and memorisation ratio of ``sigma_min="auto"`` against
  the **oracle-tuned** plug-in, whose ``sigma_min`` (a grid, in units of the data's global
  spread) is chosen per data set, m and convention on the very tasks it is scored on, and
  against the paper's ``sigma_min=0.01``. Every method samples the same tasks from the same
  noise through ``NWFlowSampler.sample`` (Heun, ``--n-steps`` steps), all tasks of a cell in
  one batched call.
* the paper's task families (``GaussianMixtureTasks``, the collapse experiment's family, and
  ``SphericalShellTasks``), m = 50: MMD² of ``"auto"`` next to ``sigma_min=0.01``.

Usage::

    python benchmarks/bench_auto_bandwidth.py [--fit] [--tasks N] [--write-docs]

``--write-docs`` writes the tables into the marked block of ``docs/auto_bandwidth.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skflow import NWFlowSampler, SolverOptions  # noqa: E402
from skflow.metrics import memorization_ratio, mmd2  # noqa: E402

SIZES = (5, 10, 20, 50)
#: Oracle grid of sigma_min, in units of the data's global spread (1 on standardised data).
GRID = (0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: Fit grid: bandwidth relative to each support's spread.
FIT_GRID = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.2)
N_REF = 200
PAGE = ROOT / "docs" / "auto_bandwidth.md"
BEGIN, END = "<!-- auto-bandwidth:begin -->", "<!-- auto-bandwidth:end -->"


def _digits(raw: bool = False):
    """Digits PCA-16 standardised on classes 0-6 (or raw pixels): (Z, y, train mask)."""
    X, y = load_digits(return_X_y=True)
    train = ~np.isin(y, (7, 8, 9))
    if raw:
        return X, y, train
    pca = PCA(n_components=16, random_state=0).fit(X[train])
    Z = StandardScaler().fit(pca.transform(X[train])).transform(pca.transform(X))
    return Z, y, train


def datasets() -> dict:
    """Held-out evaluation data: name -> (Z, y, global spread of Z)."""
    out = {}
    for name, raw in (("digits PCA-16", False), ("digits raw pixels", True)):
        Z, y, train = _digits(raw)
        out[name] = (Z[~train], y[~train])
    for name, load in (
        ("iris", load_iris),
        ("wine", load_wine),
        ("breast cancer", load_breast_cancer),
    ):
        X, y = load(return_X_y=True)
        out[name] = (StandardScaler().fit_transform(X), y)
    return {k: (Z, y, float(np.sqrt(Z.var(axis=0, ddof=1).mean()))) for k, (Z, y) in out.items()}


def draw_tasks(Z, y, m: int, n_tasks: int, seed: int):
    """``n_tasks`` (support (m, d), reference <= N_REF rows) pairs from the classes with at
    least ``m + 20`` rows, cycling over them; None when no class is large enough."""
    classes = [c for c in np.unique(y) if np.sum(y == c) >= m + 20]
    if not classes:
        return None
    rng = np.random.default_rng(seed)
    S, R, labels = [], [], []
    for j in range(n_tasks):
        labels.append(classes[j % len(classes)])
        rows = Z[y == labels[-1]]
        order = rng.permutation(len(rows))
        S.append(rows[order[:m]])
        R.append(rows[order[m:][:N_REF]])
    return np.stack(S), R, np.array(labels)


def scores(gen, S, R) -> np.ndarray:
    """(n_tasks, 3): MMD² (true points' median), MMD² (pooled median), memorisation ratio."""
    return np.array(
        [
            (mmd2(g[: len(r)], r, reference=r), mmd2(g[: len(r)], r), memorization_ratio(g, s, r))
            for g, s, r in zip(gen, S, R, strict=True)
        ]
    )


def sample(sampler, S, c: float, n_steps: int, seed: int) -> np.ndarray:
    """``N_REF`` draws per support, all tasks in one batched call, in units of ``c``."""
    return (
        sampler.set_params(solver=SolverOptions(n_steps=n_steps))
        .fit(S[0] / c)
        .sample(N_REF, support=S / c, random_state=seed)
        * c
    )


def selections(name: str, Z, y) -> dict:
    """``sigma_min`` chosen by ``NWFlowSampler(sigma_min=0.01).fit(X, y)`` (the grid search of
    the paper's plug-in) for every evaluation class: on the digits training classes 0-6 for
    digits, on the other classes (leave one class out) for the other data sets."""
    if name.startswith("digits"):
        Zt, yt, train = _digits(raw="raw" in name)
        chosen = NWFlowSampler(sigma_min=0.01).fit(Zt[train], yt[train]).sigma_min_
        return dict.fromkeys(np.unique(y).tolist(), chosen)
    if np.unique(y).size < 3:  # one class left for training: nothing to split by class
        return None
    return {
        c: NWFlowSampler(sigma_min=0.01).fit(Z[y != c], y[y != c]).sigma_min_
        for c in np.unique(y).tolist()
    }


def evaluate_cell(S, R, labels, chosen: dict, n_steps: int, seed: int) -> dict:
    """Per-task scores of "auto", of ``fit(X, y)``'s choice, of sigma_min=0.01 and of every
    oracle grid value (in units of the data's spread ``c``) on one cell."""
    c = chosen["c"]
    res = {"auto": scores(sample(NWFlowSampler(sigma_min="auto"), S, 1.0, n_steps, seed), S, R)}
    res["fit"] = np.full_like(res["auto"], np.nan)
    for value in () if chosen.get("fit") is None else set(chosen[k] for k in labels.tolist()):
        rows = np.flatnonzero([chosen[k] == value for k in labels.tolist()])
        gen = sample(NWFlowSampler(sigma_min=value), S[rows], 1.0, n_steps, seed)
        res["fit"][rows] = scores(gen, S[rows], [R[i] for i in rows])
    for g in GRID:
        res[g] = scores(sample(NWFlowSampler(sigma_min=g), S, c, n_steps, seed), S, R)
    return res


def ratio_ci(a: np.ndarray, b: np.ndarray, seed: int = 0, n_boot: int = 2000) -> tuple:
    """``mean(a) / mean(b)`` with a 95 % paired bootstrap interval over tasks."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), (n_boot, len(a)))
    boot = a[idx].mean(axis=1) / b[idx].mean(axis=1)
    return float(a.mean() / b.mean()), *np.quantile(boot, [0.025, 0.975]).tolist()


def summarise_cell(res: dict) -> dict:
    """Oracle per convention, auto / oracle MMD² ratios with intervals, memorisation ratios."""
    out = {
        "copy_fit": float(np.median(res["fit"][:, 2])),
        "copy_auto": float(np.median(res["auto"][:, 2])),
        "copy_001": float(np.median(res[0.01][:, 2])),
    }
    for k, conv in enumerate(("true", "pooled")):
        best = min(GRID, key=lambda g: res[g][:, k].mean())
        out[conv] = {
            "oracle_sigma": best,
            "oracle_mmd2": float(res[best][:, k].mean()),
            "auto_mmd2": float(res["auto"][:, k].mean()),
            "auto_over_oracle": ratio_ci(res["auto"][:, k], res[best][:, k]),
            "fit_over_oracle": ratio_ci(res["fit"][:, k], res[best][:, k]),
            "plugin001_over_oracle": float(res[0.01][:, k].mean() / res[best][:, k].mean()),
            "copy_oracle": float(np.median(res[best][:, 2])),
        }
    return out


def run_evaluation(n_tasks: int, n_steps: int, seed: int, only=None) -> dict:
    out = {}
    for name, (Z, y, c) in datasets().items():
        if only and name not in only:
            continue
        choice = selections(name, Z, y)
        out[f"{name}|fit"] = None if choice is None else {str(k): v for k, v in choice.items()}
        print(name, "fit(X, y) chose", choice, flush=True)
        chosen = {"c": c, "fit": choice, **(choice or {})}
        for m in SIZES:
            tasks = draw_tasks(Z, y, m, n_tasks, seed + m)
            if tasks is None:
                continue
            t0 = time.perf_counter()
            cell = summarise_cell(evaluate_cell(*tasks, chosen, n_steps, seed))
            cell["seconds"] = time.perf_counter() - t0
            out[f"{name}|{m}"] = cell
            print(name, m, json.dumps(cell), flush=True)
    return out


def run_families(n_tasks: int, n_steps: int, seed: int) -> dict:
    """MMD² (true-point median) of "auto" and of sigma_min=0.01 on the paper's families, m = 50."""
    from skflow.tasks import GaussianMixtureTasks, SphericalShellTasks

    out = {}
    for fam, cls in (
        ("gaussian mixtures (collapse)", GaussianMixtureTasks),
        ("shells", SphericalShellTasks),
    ):
        for d in (2, 8, 16):
            S, Q = cls(n_features=d).sample_tasks(n_tasks, 50, N_REF, random_state=seed + d)
            R = list(Q)
            a = scores(sample(NWFlowSampler(sigma_min="auto"), S, 1.0, n_steps, seed), S, R)
            b = scores(sample(NWFlowSampler(sigma_min=0.01), S, 1.0, n_steps, seed), S, R)
            out[f"{fam}|{d}"] = {
                "auto_mmd2": [float(a[:, 0].mean()), float(a[:, 1].mean())],
                "plugin001_mmd2": [float(b[:, 0].mean()), float(b[:, 1].mean())],
                "auto_over_001": [ratio_ci(a[:, k], b[:, k]) for k in (0, 1)],
                "copy": [float(np.median(a[:, 2])), float(np.median(b[:, 2]))],
            }
            print(fam, d, json.dumps(out[f"{fam}|{d}"]), flush=True)
    return out


def support_nn_distances(S: np.ndarray) -> np.ndarray:
    """Median nearest-neighbour distance of every support ``(B, m, d)``; NaN when ``m < 2``.

    What the rule of ``sigma_min="auto"`` reads of a support (every row a query: exact for the
    sizes fitted here, ``m <= 256``; the library subsamples the queries of larger supports).
    """
    B, m, _ = S.shape
    if m < 2:
        return np.full(B, np.nan)
    if m > 256:
        raise ValueError(f"m = {m}: the rule's statistic subsamples above 256 rows")
    C = S - S.mean(axis=1, keepdims=True)
    sq = np.einsum("bij,bij->bi", C, C)
    d2 = sq[:, :, None] + sq[:, None, :] - 2.0 * np.einsum("bid,bjd->bij", C, C)
    d2[:, np.arange(m), np.arange(m)] = np.inf
    return np.sqrt(np.maximum(np.median(d2.min(axis=2), axis=1), 0.0))


# -- fitting the rule on the digits training classes -------------------------------------------
def _kde_draws(S, rho, spread, x0, idx):
    """Exact draws of the KDE of every support with bandwidth ``rho * spread`` (the plug-in's
    terminal law), from fixed component indices and noise."""
    return np.take_along_axis(S, idx[..., None], axis=1) + (rho * spread)[:, None, None] * x0


def fit_rule(n_tasks: int, seed: int, copy_target: float) -> dict:
    """Fit RULE_SCALE, RULE_EXPONENT and COPY_FLOOR on digits classes 0-6 (see the module)."""
    Z, y, train = _digits()
    Z, y = Z[train], y[train]
    optima, floors = [], []
    for m in SIZES:
        S, R, _ = draw_tasks(Z, y, m, n_tasks, seed + m)
        d = S.shape[2]
        rng = np.random.default_rng(seed)
        x0, idx = rng.standard_normal((n_tasks, N_REF, d)), rng.integers(0, m, (n_tasks, N_REF))
        spread = np.sqrt(((S - S.mean(1, keepdims=True)) ** 2).sum(axis=(1, 2)) / ((m - 1) * d))
        curves = np.array(
            [scores(_kde_draws(S, r, spread, x0, idx), S, R).mean(0) for r in FIT_GRID]
        )
        rho = [FIT_GRID[int(np.argmin(curves[:, k]))] for k in (0, 1)]
        optima.append(float(np.sqrt(rho[0] * rho[1])))
        # the floor's unit nn / sqrt(d), relative to the spread
        unit = support_nn_distances(S) / np.sqrt(d) / spread
        at_unit = scores(_kde_draws(S, 1.0, unit * spread, x0, idx), S, R)[:, 2]
        floors.append(copy_target / float(np.median(at_unit)))
        print(f"m={m}: optimal rho true/pooled {rho}, copy floor {floors[-1]:.3f}", flush=True)
    slope, intercept = np.polyfit(np.log(SIZES), np.log(optima), 1)
    fitted = {
        "RULE_SCALE": round(float(np.exp(intercept)), 2),
        "RULE_EXPONENT": round(float(-slope), 2),
        "COPY_FLOOR": round(float(max(floors)), 2),
        "optima": optima,
        "floors": floors,
    }
    print(json.dumps(fitted), flush=True)
    return fitted


# -- calibrating the MemorizationWarning ------------------------------------------------------
def calibration_sources(n_tasks: int, seed: int):
    """(name, supports (B, m, d), references) on which the copy check is calibrated."""
    from skflow.tasks import GaussianMixtureTasks, SphericalShellTasks

    Z, y, train = _digits()
    yield "digits PCA-16 (0-6)", Z[train], y[train]
    Z, y, train = _digits(raw=True)
    yield "digits raw (0-6)", Z[train], y[train]
    for name, (Z, y, _) in datasets().items():
        if name in ("iris", "wine", "breast cancer"):
            yield name, Z, y
    for cls in (GaussianMixtureTasks, SphericalShellTasks):
        for d in (2, 16):
            S, Q = cls(n_features=d).sample_tasks(n_tasks, 50, N_REF, random_state=seed + d)
            yield f"{cls.__name__} d={d}", S, list(Q)


def calibrate_warning(n_tasks: int, seed: int) -> dict:
    """Memorisation ratio against what the copy check sees, ``h sqrt(d) / nn``: their ratio
    ``k`` per source, m and bandwidth (median over tasks), in the copying regime."""
    rows = []
    for name, A, B in calibration_sources(n_tasks, seed):
        for m in (10, 50):
            if isinstance(B, list):  # synthetic: supports and references already drawn
                S, R = A[:, :m], B
            else:
                tasks = draw_tasks(A, B, m, n_tasks, seed + m)
                if tasks is None:
                    continue
                S, R, _ = tasks
            d = S.shape[2]
            rng = np.random.default_rng(seed)
            x0, idx = rng.standard_normal((len(S), N_REF, d)), rng.integers(0, m, (len(S), N_REF))
            nn = support_nn_distances(S)
            for x in (0.01, 0.05, 0.1, 0.2, 0.3):  # h sqrt(d) / nn
                h = x * nn / np.sqrt(d)
                copy = scores(_kde_draws(S, np.ones(len(S)), h, x0, idx), S, R)[:, 2]
                rows.append((name, m, x, float(np.median(copy))))
                print(name, m, x, round(rows[-1][3], 3), flush=True)
    k = np.array([r[3] / r[2] for r in rows])
    return {"rows": rows, "k_min": float(k.min()), "k_median": float(np.median(k))}


# -- speed -------------------------------------------------------------------------------------
def speed(rounds: int = 7, seed: int = 0) -> dict:
    """Cost of the per-support selection in a batched call: ``sample(256, support=S)`` with
    ``S`` (256, 50, 16) float32, Heun 100 steps, ``"auto"`` against ``sigma_min=0.01``
    (``benchmarks/bench_small_support.py``'s many-supports shape), interleaved rounds; the
    median of the per-round time ratios."""
    S = np.random.default_rng(seed).normal(size=(256, 50, 16)).astype(np.float32)
    samplers = {k: NWFlowSampler(sigma_min=k).fit(S[0]) for k in (0.01, "auto")}
    times = {k: [] for k in samplers}
    for _ in range(rounds):
        for k, s in samplers.items():
            t0 = time.perf_counter()
            s.sample(256, support=S, random_state=0)
            times[k].append(time.perf_counter() - t0)
    ratio = float(np.median(np.array(times["auto"]) / np.array(times[0.01])))
    out = {"ratio_auto_over_001": ratio, "seconds_001": float(np.median(times[0.01]))}
    out["seconds_auto"] = float(np.median(times["auto"]))
    print(json.dumps(out), machine(), flush=True)
    return out


# -- the docs --------------------------------------------------------------------------------
def _num(x, digits: int = 3) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def _ci(r) -> str:
    return f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]"


def evaluation_table(ev: dict) -> list[str]:
    lines = [
        "| data set | m | oracle sigma true / pooled | auto / oracle MMD² (true) [95 % CI] | "
        "auto / oracle MMD² (pooled) [95 % CI] | fit(X, y) / oracle (true, pooled) | "
        "0.01 / oracle (true, pooled) | "
        "memorisation ratio auto / fit(X, y) / oracle (true) / 0.01 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, c in ev.items():
        name, m = key.split("|")
        if m == "fit":
            continue
        t, p = c["true"], c["pooled"]
        lines.append(
            f"| {name} | {m} | {t['oracle_sigma']:g} / {p['oracle_sigma']:g} | "
            f"{_ci(t['auto_over_oracle'])} | {_ci(p['auto_over_oracle'])} | "
            f"{_num(t['fit_over_oracle'][0])}, {_num(p['fit_over_oracle'][0])} | "
            f"{t['plugin001_over_oracle']:.2f}, {p['plugin001_over_oracle']:.2f} | "
            f"{c['copy_auto']:.2f} / {_num(c['copy_fit'], 2)} / {t['copy_oracle']:.2f} / "
            f"{c['copy_001']:.2f} |"
        )
    chosen = {k.split("|")[0]: v for k, v in ev.items() if k.endswith("|fit")}
    lines += [
        "",
        "`fit(X, y)` chose (per held-out class): "
        + "; ".join(
            f"{name}: {'n/a (2 classes)' if v is None else v}" for name, v in chosen.items()
        )
        + ".",
    ]
    return lines


def families_table(fam: dict) -> list[str]:
    lines = [
        "| family | d | MMD² auto (true, pooled) | MMD² 0.01 (true, pooled) | "
        "auto / 0.01 (true) [95 % CI] | memorisation ratio auto / 0.01 |",
        "|---|---|---|---|---|---|",
    ]
    for key, c in fam.items():
        name, d = key.split("|")
        a, b = c["auto_mmd2"], c["plugin001_mmd2"]
        lines.append(
            f"| {name} | {d} | {a[0]:.4f}, {a[1]:.4f} | {b[0]:.4f}, {b[1]:.4f} | "
            f"{_ci(c['auto_over_001'][0])} | {c['copy'][0]:.2f} / {c['copy'][1]:.2f} |"
        )
    return lines


def write_docs(results: dict, path: Path = PAGE) -> None:
    head = [
        f"Command: `{results['command']}`; {results['machine']}; "
        f"{results['seconds']:.0f} s wall, one Torch/BLAS thread.",
        "",
        f"{results['n_tasks']} tasks per cell, {N_REF} samples per task, Heun with "
        f'{results["n_steps"]} steps. Ratios below 1 favour `"auto"`; intervals: 95 % paired '
        "bootstrap over tasks. Memorisation ratio: median over tasks.",
        "",
    ]
    text = "\n".join(head + evaluation_table(results["evaluation"]))
    if "families" in results:
        text += "\n\nThe paper's task families, m = 50:\n\n" + "\n".join(
            families_table(results["families"])
        )
    doc = path.read_text(encoding="utf-8")
    if doc.count(BEGIN) != 1 or doc.count(END) != 1:
        raise ValueError(f"{path} must contain one {BEGIN} ... {END} block.")
    a, b = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    path.write_text(doc[:a] + "\n" + text + "\n" + doc[b:], encoding="utf-8")


def merge(parts: list) -> dict:
    """Results of runs on parts of the data sets as one (commands, machines, times joined)."""
    out = {"evaluation": {}, "n_tasks": parts[0]["n_tasks"], "n_steps": parts[0]["n_steps"]}
    for part in parts:
        out["evaluation"].update(part["evaluation"])
        if "families" in part:
            out["families"] = part["families"]
    out["command"] = "`; `".join(p["command"] for p in parts)
    out["machine"] = "; ".join(p["machine"] for p in parts)
    out["seconds"] = sum(p["seconds"] for p in parts)
    return out


def machine() -> str:
    load = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", action="store_true", help="fit the rule's constants and stop")
    ap.add_argument("--calibrate-warning", action="store_true", help="the copy check's data")
    ap.add_argument("--speed", action="store_true", help="time the selection in a batched call")
    ap.add_argument("--tasks", type=int, default=30)
    ap.add_argument("--n-steps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--copy-target", type=float, default=0.65)
    ap.add_argument("--no-families", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--datasets", nargs="*", default=None, help="evaluate only these")
    ap.add_argument("--docs-from", nargs="*", default=None, help="merge saved JSONs, write docs")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    if args.fit:
        fit_rule(args.tasks * 2, args.seed, args.copy_target)
        return
    if args.speed:
        speed()
        return
    if args.calibrate_warning:
        print(json.dumps(calibrate_warning(args.tasks, args.seed)))
        return
    if args.docs_from:
        write_docs(merge([json.loads(Path(p).read_text()) for p in args.docs_from]))
        return
    t0, start = time.perf_counter(), machine()
    results = {
        "command": "python " + " ".join(sys.argv[0:1] + sys.argv[1:]).replace(str(ROOT) + "/", ""),
        "n_tasks": args.tasks,
        "n_steps": args.n_steps,
    }
    results["evaluation"] = run_evaluation(args.tasks, args.n_steps, args.seed, args.datasets)
    if not args.no_families:
        results["families"] = run_families(args.tasks, args.n_steps, args.seed)
    results["seconds"] = time.perf_counter() - t0
    results["machine"] = f"start: {start}; end: {machine()}"
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    if args.write_docs:
        write_docs(results)


if __name__ == "__main__":
    main()
