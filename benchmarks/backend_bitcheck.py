"""Bit-for-bit check of a refactor: dump the outputs of many public calls, compare two dumps.

Fields (every engine, dtype, projection, streaming, bandwidth kind, precision fallback,
times 0..1, per-row times), the pruned engine, the solvers, the metrics and NWFlowSampler, on
NumPy and on Torch (CPU). Errors are outputs too (their type and message). Used for the
array-backend refactor of issue #35: the outputs of the commit before it and after it are
equal byte for byte.

Usage (run each dump from the checkout to measure)::

    PYTHONPATH=<old checkout> python benchmarks/backend_bitcheck.py dump /tmp/old.pkl
    PYTHONPATH=<new checkout> python benchmarks/backend_bitcheck.py dump /tmp/new.pkl
    python benchmarks/backend_bitcheck.py compare /tmp/old.pkl /tmp/new.pkl
    python benchmarks/backend_bitcheck.py count   # NumPy/Torch type branches outside the backend
"""

# ruff: noqa: B023 - every lambda below is called at once by _record, inside its loop

from __future__ import annotations

import argparse
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import torch

RNG = np.random.default_rng(0)
S = RNG.normal(size=(300, 3)) * [1.0, 2.0, 0.5]
X = RNG.normal(size=(64, 3))
P = RNG.normal(size=(2, 3))
T = RNG.uniform(0, 1, size=64)
Y = RNG.normal(size=(40, 3)) + 0.3
BIG = RNG.normal(size=(300, 3))
FIELD_OPTIONS = (
    {},
    {"projection": "P"},
    {"support_chunk_size": 70},
    {"bandwidth": 0.7},
    {"bandwidth": "callable"},
    {"float32_logit_limit": 1e-3},
    {"float32_logit_limit": 1e-3, "float32_fallback": "float64"},
)


def _host(v):
    if isinstance(v, tuple):
        return tuple(_host(a) for a in v)
    if isinstance(v, torch.Tensor):
        return ("torch", str(v.dtype), v.detach().cpu().numpy().copy())
    return ("np", np.asarray(v).copy())


def _record(out, key, fn):
    try:
        out[key] = _host(fn())
    except Exception as exc:  # noqa: BLE001 - an error is an output too
        out[key] = ("error", type(exc).__name__, str(exc))


def _options(kw, p):
    kw = dict(kw)
    if kw.get("projection") == "P":
        kw["projection"] = p
    if kw.get("bandwidth") == "callable":
        kw["bandwidth"] = lambda t: 0.1 + 0.5 * t
    return kw


def _fields(out, tag, conv, times):
    from skflow.field import NWField

    s, x, p = conv(S), conv(X), conv(P)
    engines = ["auto", "gemm"] + (["attention"] if tag[0] == "torch" else [])
    for engine in engines:
        for options in FIELD_OPTIONS:
            key = (*tag, engine, str(sorted(options)))
            try:
                f = NWField(s, sigma_min=0.05, engine=engine, **_options(options, p))
            except Exception as exc:  # noqa: BLE001
                out[(*key, "init")] = ("error", type(exc).__name__, str(exc))
                continue
            for t in (0.0, 0.3, 0.97, 1.0):
                _record(out, (*key, t, "v"), lambda: f.velocity(x, t))
                _record(out, (*key, t, "m"), lambda: f.local_mean(x, t))
                _record(out, (*key, t, "w"), lambda: f.weights(x[:5], t))
                _record(out, (*key, t, "vd"), lambda: f.velocity_and_divergence(x, t))
                _record(out, (*key, t, "ess"), lambda: f.effective_sample_size(x, t))
                if t > 0:
                    _record(out, (*key, t, "ld"), lambda: f.log_density(x, t))
            _record(out, (*key, "rows"), lambda: f.velocity(x, times))


def _pruned(out, tag, conv):
    from skflow.field import NWField, kernel_coefficients
    from skflow.field.pruned import ClusteredSupport, pruned_local_mean

    s, x, p, big = conv(S), conv(X), conv(P), conv(BIG)
    for options in ({}, {"pruned_max_share": None}, {"projection": p}):
        f = NWField(s, sigma_min=0.05, engine="pruned", n_clusters=12, **options)
        key = (*tag, "pruned", str(sorted(options)))
        for t in (0.5, 0.97, 0.999):
            _record(out, (*key, t), lambda: (f.velocity(x, t), f.last_velocity_error_))
        _record(out, (*key, "big"), lambda: f.velocity(big, 0.99))
    index = ClusteredSupport(s - s.mean(0), n_clusters=10)
    a, b, _ = kernel_coefficients(0.95, sigma_min=0.01)
    res = pruned_local_mean(index, 0.95 * (x - s.mean(0)), float(a), float(b), rtol=1e-9)
    out[(*tag, "plm")] = _host((res.mean, res.mean_error, res.neglected))


def _solvers(out, tag, conv):
    from skflow.field import NWField
    from skflow.solvers import integrate

    x = conv(X)
    for method in ("euler", "heun", "rk4", "dopri5"):
        _record(
            out,
            (*tag, "ode", method),
            lambda: (
                integrate(
                    lambda t, y: -y * (1 + y * y) ** 0.5,
                    x,
                    np.linspace(0, 1, 7),
                    method=method,
                    return_trajectory=True,
                    rtol=1e-6,
                    atol=1e-6,
                ).y
            ),
        )
    f = NWField(conv(S), sigma_min=0.05)
    _record(out, (*tag, "ode-nw"), lambda: integrate(f.velocity, x * 0.1, method="dopri5").y)
    _record(out, (*tag, "ode-nw-heun"), lambda: integrate(f.velocity, x * 0.1, (0, 0.5, 1)).y)


def _metrics(out, tag, conv):
    from skflow.field import NWField
    from skflow.metrics import (
        distance_to_closest_record,
        effective_sample_size,
        memorization_ratio,
        mmd2,
        mmd2_test,
        nw_weight_correlation,
    )

    s, x, y = conv(S), conv(X), conv(Y)
    for bw in ("median", 0.8, [0.5, 2.0]):
        for unbiased in (True, False):
            _record(
                out,
                (*tag, "mmd", str(bw), unbiased),
                lambda: mmd2(x, y, bandwidth=bw, unbiased=unbiased, chunk_size=17),
            )
    _record(out, (*tag, "mmd-ref"), lambda: mmd2(x, y, reference=s, return_bandwidth=True))
    _record(out, (*tag, "mmd-mixed"), lambda: mmd2(x, Y))
    _record(
        out,
        (*tag, "mmd-test"),
        lambda: mmd2_test(x, y, n_permutations=20, random_state=0).null_distribution,
    )
    w = NWField(s, sigma_min=0.05).weights(x[:6], 0.9)
    _record(out, (*tag, "ess"), lambda: effective_sample_size(w))
    _record(out, (*tag, "dcr"), lambda: distance_to_closest_record(x, s))
    _record(out, (*tag, "memo"), lambda: memorization_ratio(x, s, y))
    _record(out, (*tag, "corr"), lambda: nw_weight_correlation(w, w * w).per_row)


def _samplers(out):
    from skflow.samplers import NWFlowSampler

    for backend in ("numpy", "torch"):
        for solver in ("heun", "dopri5"):
            for engine in ("auto", "pruned"):
                key = (backend, solver, engine)
                sampler = NWFlowSampler(
                    sigma_min=0.05,
                    solver=solver,
                    n_steps=20,
                    backend=backend,
                    engine=engine,
                    random_state=0,
                ).fit(S)
                two = np.stack([S[:50], S[50:100]])
                _record(out, (*key, "sample"), lambda: sampler.sample(50))
                _record(out, (*key, "batch"), lambda: sampler.sample(20, support=two))
                _record(out, (*key, "score"), lambda: sampler.score_samples(X[:10]))
                _record(out, (*key, "div"), lambda: sampler.divergence(X[:10], 0.7))
                _record(out, (*key, "traj"), lambda: sampler.sample_trajectories(5)[1])


def dump(path: str) -> int:
    """Write the outputs to ``path``; return their number."""
    warnings.filterwarnings("ignore")
    out: dict = {}
    for lib in ("np", "torch"):
        for dtype in ("float64", "float32"):
            if lib == "np":
                conv = lambda a, dtype=dtype: a.astype(dtype)  # noqa: E731
            else:
                conv = lambda a, dtype=dtype: torch.as_tensor(a.astype(dtype))  # noqa: E731
            times = T if lib == "np" else torch.as_tensor(T)
            _fields(out, (lib, dtype), conv, times)
            _pruned(out, (lib, dtype), conv)
            _solvers(out, (lib, dtype), conv)
            _metrics(out, (lib, dtype), conv)
    _samplers(out)
    with open(path, "wb") as fh:
        pickle.dump(out, fh)
    return len(out)


def _equal(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, np.ndarray):
        same = isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        return same and a.tobytes() == b.tobytes()
    return a == b


def compare(old: str, new: str) -> int:
    """Print the outputs that differ between two dumps; return their number."""
    with open(old, "rb") as fh:
        a = pickle.load(fh)
    with open(new, "rb") as fh:
        b = pickle.load(fh)
    keys = sorted(set(a) | set(b), key=str)
    differ = [k for k in keys if k not in a or k not in b or not _equal(a[k], b[k])]
    for k in differ[:10]:
        print("differs:", k)
    errors = sum(1 for v in a.values() if v[0] == "error")
    print(f"{len(keys)} outputs compared ({errors} of them errors): {len(differ)} differ")
    return len(differ)


#: The type branches of issue #35 (its grep), and the backend questions that replaced some of
#: them, which that grep does not see: decisions, host-or-device and capability questions.
TYPE_BRANCH = re.compile(
    r"get_namespace|xp\.name ==|is_torch\(|torch\.is_tensor|isinstance\([^)]*torch\.Tensor"
)
BACKEND_QUESTION = re.compile(r"get_backend\(|\.is_torch\b|\.on_device\(|fused_attention")


def count(root: str = "skflow") -> tuple[int, int]:
    """Lines outside ``skflow/_array.py`` that match each pattern, printed by file."""
    totals = []
    for name, pattern in (("type branches", TYPE_BRANCH), ("backend questions", BACKEND_QUESTION)):
        hits = [
            f"{path}:{i}: {line.strip()}"
            for path in sorted(Path(root).rglob("*.py"))
            if path.name != "_array.py" or path.parent.name != Path(root).name
            for i, line in enumerate(path.read_text().splitlines(), 1)
            if pattern.search(line)
        ]
        print(f"{name}: {len(hits)}", *hits, sep="\n  ")
        totals.append(len(hits))
    return totals[0], totals[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("dump").add_argument("path")
    cmp = sub.add_parser("compare")
    cmp.add_argument("old")
    cmp.add_argument("new")
    sub.add_parser("count")
    args = parser.parse_args()
    if args.command == "dump":
        print(dump(args.path), "outputs written to", args.path)
    elif args.command == "count":
        count()
    else:
        raise SystemExit(1 if compare(args.old, args.new) else 0)


if __name__ == "__main__":
    main()
