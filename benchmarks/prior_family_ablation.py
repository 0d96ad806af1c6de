"""Which synthetic families and which recipe transfer to real classes? A short-training
ablation of the prior.

Trains one :class:`~skflow.LearnedFlowSampler` per variant of the ``general-16`` recipe (a
family mixture of :class:`skflow.priors.PriorTasks`, or one estimator parameter changed: the
exact head's ``sigma_min``, the support sizes), a short budget, one Torch thread, then scores
each zero-shot on a *selection* set that no headline uses: digits classes
0-6 after a PCA to 16 components (the few-shot experiment's training classes; the zero-shot
table of ``docs/results.md`` evaluates digits on classes 7-9 only). Each task is one class:
``m`` support rows, the other rows the reference; MMD² under the "true" and the "pooled"
median conventions (the prior's losses at ``m = 5`` in ``docs/results.md`` are under the
pooled one), the plug-in at ``sigma_min = 0.01`` and at the best ``sigma_min`` of a grid (chosen on
independent draws of the same classes), and the memorisation ratio.

``--selection prior-law`` scores on held-out draws of the prior's own task law instead
(:class:`skflow.priors.PriorTasks`, 16 features, supports of ``--ms`` rows), where the data's
scale is random, so the reference is the automatic-bandwidth plug-in
(``sigma_min="auto"``) instead of a tuned one. A sampler that draws from the law's Bayes
predictive has a memorisation ratio near 1 there (its points are as far from the support as
fresh rows are), so the ratio alone shows a variant that copies or over-smooths; its table is
a second block of ``docs/pretrained.md``.

Usage: ``python benchmarks/prior_family_ablation.py [--iters 2000] [--tasks 35] [--variants
NAME ...] [--selection digits|prior-law] [--ms 5 10 20] [--write-docs]``; it prints a
markdown table, writes ``--json`` after every variant and, with ``--write-docs``, the table
into ``docs/pretrained.md`` (``--docs-from JSON [JSON ...]`` writes it from saved runs, their
variants side by side: one process per variant subset on a multi-core machine).
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
from skflow.metrics import memorization_ratio
from skflow.priors import RECIPES, PriorTasks
from skflow.samplers.options import learned_params_from_flat
from skflow.threads import limit_threads
from skflow_experiments.protocol import scores_both_conventions

#: name -> (PriorTasks family weights, LearnedFlowSampler parameters changed from the recipe)
VARIANTS = {
    "all families": (None, {}),
    "elliptical (gaussian, student, lognormal)": (
        {"gaussian": 1, "student": 1, "lognormal": 1},
        {},
    ),
    "gaussian only": ({"gaussian": 1}, {}),
    "curves and shells": ({"rings": 1, "moons": 1, "spirals": 1, "shells": 1}, {}),
    # the exact head and the path's floor blur (the frame's units): the plug-in tuned at m = 5
    # blurs by about half a class's spread, the recipe's head by 1 %
    "all families, sigma_min 0.1": (None, {"sigma_min": 0.1}),
    "all families, sigma_min 0.3": (None, {"sigma_min": 0.3}),
    # no 2- to 4-row tasks, whose own-spread frames put targets far away (loss spikes)
    "all families, supports 5-100": (None, {"support_size": (5, 100)}),
    # the network sees m (attention averages over the rows and cannot count them)
    "all families, size embedding": (None, {"size_embedding": True}),
    "all families, size embedding, sigma_min 0.1": (
        None,
        {"size_embedding": True, "sigma_min": 0.1},
    ),
    # no exact head: the untrained network is the support mean, nothing pulls to the rows
    "all families, no exact head": (None, {"exact_head": False}),
}
GRID = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
MS = (5, 10, 20)
PAGE = Path(__file__).resolve().parents[1] / "docs" / "pretrained.md"
BEGIN, END = "<!-- prior-ablation:begin -->", "<!-- prior-ablation:end -->"
#: selection set -> (markers of its docs block, name of the reference row)
SELECTIONS = {
    "digits": ((BEGIN, END), "plug-in tuned (sigma_min per m)"),
    "prior-law": (
        ("<!-- prior-ablation-law:begin -->", "<!-- prior-ablation-law:end -->"),
        "plug-in auto",
    ),
}


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


def prior_law_tasks(n_tasks: int, seed: int, ms: tuple, n_features: int = 16) -> list:
    """Held-out tasks of the prior's own law with ``n_features`` features: (pool, reference)
    pairs, ``max(ms)`` pool rows and 300 reference rows each (batches of another width, which
    ``PriorTasks`` draws at random, are skipped)."""
    law, rng = PriorTasks(n_features), np.random.default_rng(10_000 + seed)
    while True:
        S, Q = law.sample_tasks(n_tasks, max(ms), 300, random_state=rng)
        if S.shape[-1] == n_features:
            return list(zip(S, Q, strict=True))


def _machine() -> str:
    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{os.cpu_count()} cores, load average (1 / 5 / 15 min) {load} at the end"


def score_sampler(sampler, tasks, m: int, n_gen: int) -> dict:
    """Mean MMD² (``true``, ``pooled`` convention) and median memorisation ratio (``copy``)
    over the tasks."""
    pools = np.stack([p[:m] for p, _ in tasks])
    if isinstance(sampler, NWFlowSampler):  # in-context supports need a fitted estimator
        sampler = sampler.fit(pools[0])
    gen = sampler.sample(n_gen, support=pools, random_state=1)
    mmd = [scores_both_conventions(g, r) for g, (_, r) in zip(gen, tasks, strict=True)]
    copy = [memorization_ratio(g, p[:m], r) for g, (p, r) in zip(gen, tasks, strict=True)]
    out = {k: float(np.mean([v[k] for v in mmd])) for k in ("true", "pooled")}
    return out | {"copy": float(np.median(copy))}


def _pct(row: dict, base: dict, key: str) -> str:
    return f"{row[key]:.4f} ({100 * (1 - row[key] / base[key]):+.0f} %)"


_LABELS = {"plug-in tuned (sigma_min per m)": "tuned plug-in", "plug-in auto": "auto plug-in"}


def _selection(saved: dict) -> str:
    return saved["args"].get("selection", "digits")


def _set_description(saved: dict) -> str:
    a = saved["args"]
    if _selection(saved) == "digits":
        return f"{a['tasks']} tasks of digits classes 0-6"
    return f"{a['tasks']} held-out tasks of the prior's own law (PriorTasks, 16 features)"


def table(saved: dict) -> str:
    """The markdown block of saved runs (their rows and settings)."""
    a = saved["args"]
    (begin, end), reference = SELECTIONS[_selection(saved)]
    lines = [
        begin,
        "Written by " + " and ".join(f"`{c}`" for c in saved["commands"]) + f" ({a['iters']} "
        f"iterations per variant, {_set_description(saved)}, {a['n_generated']} "
        f"generated points; machine: {saved['machine']}). A short budget: it ranks recipe "
        f"variants, it does not measure the shipped prior. In brackets: % lower MMD² than the "
        f"{_LABELS[reference]}.",
        "",
        "| training variant | m | MMD² (true median) | MMD² (pooled median) | median memorisation "
        "ratio |",
        "|---|---|---|---|---|",
    ]
    for key, row in saved["rows"].items():
        name, m = key.rsplit(", m=", 1)
        base = saved["rows"][f"{reference}, m={m}"]
        lines.append(
            f"| {name} | {m} | {_pct(row, base, 'true')} | {_pct(row, base, 'pooled')} | "
            f"{row['copy']:.2f} |"
        )
    return "\n".join(lines + ["", end])


def write_docs(saved: dict, page: Path = PAGE) -> None:
    """Put the block into the model-card page: in place of an older one of its selection
    set, else at the end."""
    (begin, end), _ = SELECTIONS[_selection(saved)]
    text = page.read_text()
    if begin in text:
        rest = text[text.index(end) + len(end) :]
        page.write_text(text[: text.index(begin)] + table(saved) + rest)
        return
    page.write_text(text.rstrip("\n") + "\n\n" + table(saved) + "\n")


def combine(runs: list[dict]) -> dict:
    """Saved runs of the same settings (variant subsets) as one: rows in order, commands."""
    keys = ("iters", "tasks", "n_generated", "selection", "ms")
    defaults = {"selection": "digits", "ms": list(MS)}  # runs saved before these options
    if len({tuple(str(r["args"].get(k, defaults.get(k))) for k in keys) for r in runs}) != 1:
        raise ValueError("the runs differ in --iters, --tasks, --n-generated, --selection or --ms")
    rows = {k: v for r in runs for k, v in r["rows"].items()}
    machines = "; ".join(dict.fromkeys(r["machine"] for r in runs))
    commands = [c for r in runs for c in r["commands"]]
    return {"args": runs[0]["args"], "rows": rows, "machine": machines, "commands": commands}


def plugin_rows(tasks, tune, n_gen: int, ms: tuple = MS) -> dict:
    """The plug-in at 0.01 and at the sigma_min of the grid best on the tuning draws, per m."""
    rows = {}
    for m in ms:
        best = min(
            GRID,
            key=lambda s, m=m: score_sampler(NWFlowSampler(sigma_min=s), tune, m, n_gen)["true"],
        )
        rows[f"plug-in tuned (sigma_min per m), m={m}"] = score_sampler(
            NWFlowSampler(sigma_min=best), tasks, m, n_gen
        ) | {"sigma_min": best}
        rows[f"plug-in 0.01, m={m}"] = score_sampler(NWFlowSampler(sigma_min=0.01), tasks, m, n_gen)
    return rows


def auto_plugin_rows(tasks, n_gen: int, ms: tuple) -> dict:
    """The automatic-bandwidth plug-in (each support's bandwidth from itself), per m."""
    return {
        f"plug-in auto, m={m}": score_sampler(NWFlowSampler(sigma_min="auto"), tasks, m, n_gen)
        for m in ms
    }


def train_variant(name: str, iters: int) -> tuple[LearnedFlowSampler, float]:
    """The ``general-16`` recipe with the variant's families and parameters, ``iters`` steps."""
    weights, changed = VARIANTS[name]
    recipe = RECIPES["general-16"]
    params = {**recipe["sampler"], "max_iter": iters, "validation_fraction": 0.0, **changed}
    t0 = time.perf_counter()
    model = LearnedFlowSampler(**learned_params_from_flat(params))  # a recipe's flat form
    model.fit(PriorTasks(16, weights=weights))
    return model, time.perf_counter() - t0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--tasks", type=int, default=35)
    ap.add_argument("--n-generated", type=int, default=200)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--selection", default="digits", choices=list(SELECTIONS))
    ap.add_argument("--ms", nargs="+", type=int, default=list(MS), help="support sizes")
    ap.add_argument("--json", default="prior_family_ablation.json")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--docs-from", nargs="+", default=None, help="saved JSON files")
    return ap


def _command(args) -> str:
    extra = "" if args.selection == "digits" else f" --selection {args.selection}"
    extra += "" if tuple(args.ms) == MS else " --ms " + " ".join(map(str, args.ms))
    return (
        f"python benchmarks/prior_family_ablation.py --iters {args.iters} --tasks {args.tasks}"
        f"{extra} --variants " + " ".join(f"'{v}'" for v in args.variants)
    )


def _reference_rows(args) -> tuple[list, dict]:
    """The scored tasks and the plug-in rows of the selection set."""
    ms = tuple(args.ms)
    if args.selection == "digits":
        tasks, tune = selection_tasks(args.tasks, 0), selection_tasks(args.tasks, 1)
        return tasks, plugin_rows(tasks, tune, args.n_generated, ms)
    tasks = prior_law_tasks(args.tasks, 0, ms)
    rows = auto_plugin_rows(tasks, args.n_generated, ms)
    rows |= {f"plug-in 0.01, m={m}": score_sampler(NWFlowSampler(sigma_min=0.01), tasks, m,
                                                   args.n_generated) for m in ms}  # fmt: skip
    return tasks, rows


def main() -> None:
    args = _parser().parse_args()
    if args.docs_from:
        write_docs(combine([json.loads(Path(p).read_text()) for p in args.docs_from]))
        return
    command = _command(args)
    with limit_threads(1):
        tasks, rows = _reference_rows(args)
        for name in args.variants:
            model, wall = train_variant(name, args.iters)
            for m in args.ms:
                rows[f"{name}, m={m}"] = score_sampler(model, tasks, m, args.n_generated) | {
                    "wall_s": wall
                }
            print(name, "done", round(wall), "s", flush=True)
            saved = {"args": vars(args), "rows": rows, "machine": _machine(), "commands": [command]}
            with open(args.json, "w") as f:  # after every variant: a crash keeps the others
                json.dump(saved, f, indent=1)
    print(table(saved))
    if args.write_docs:
        write_docs(saved)


if __name__ == "__main__":
    main()
