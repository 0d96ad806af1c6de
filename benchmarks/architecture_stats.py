"""Before/after numbers of the architecture page: seams, estimator sizes, package sizes, call depth.

For each git revision given, the script extracts the package at that revision into a temporary
folder (``git archive``) and, in a fresh Python process on that tree, counts:

* ``OTPath(...)`` calls in the code outside the paths module (the path seam; an AST walk, so
  docstrings and comments do not count);
* NumPy/Torch type branches outside the array-backend module (the grep of issue #35);
* the parameters of ``NWFlowSampler`` and ``LearnedFlowSampler``;
* Python files and lines per subpackage of ``skflow`` (and of ``tests``);
* the call depth from ``NWFlowSampler.sample`` to the first evaluation of the prepared field
  (frames of ``skflow`` code on the stack when the field's velocity is first computed, found
  with :func:`sys.setprofile`), and the functions on that chain.

Usage::

    python benchmarks/architecture_stats.py 67725a0 HEAD            # print the table
    python benchmarks/architecture_stats.py 67725a0 HEAD --write-docs  # docs/architecture.md

``--write-docs`` rewrites the block between ``<!-- architecture-stats:begin -->`` and
``<!-- architecture-stats:end -->`` of ``docs/architecture.md``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- architecture-stats:begin -->", "<!-- architecture-stats:end -->"
BRANCH = re.compile(
    r"get_namespace|xp\.name ==|is_torch\(|torch\.is_tensor|isinstance\([^)]*torch\.Tensor"
)

#: Run inside the extracted tree: parameter counts and the call chain of ``sample``.
PROBE = r"""
import inspect, json, sys
import numpy as np
import skflow
from skflow import LearnedFlowSampler, NWFlowSampler

counts = {c.__name__: len(inspect.signature(c.__init__).parameters) - 1
          for c in (NWFlowSampler, LearnedFlowSampler)}
S = np.random.default_rng(0).standard_normal((20, 2))
sampler = NWFlowSampler(sigma_min=0.1, n_steps=2, random_state=0).fit(S)
chain = []

def watch(frame, event, arg):
    if chain or event != "call":
        return
    code = frame.f_code
    if code.co_name == "velocity" and "field" in code.co_filename:
        f, names = frame, []
        while f is not None:
            if "/skflow/" in f.f_code.co_filename:
                rel = f.f_code.co_filename.split("/skflow/")[-1]
                names.append(f"{rel}:{f.f_code.co_name}")
            f = f.f_back
        chain.extend(reversed(names))

sys.setprofile(watch)
sampler.sample(3)
sys.setprofile(None)
print(json.dumps({"params": counts, "chain": chain}))
"""


def _extract(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "skflow", "tests"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def _ot_calls(source: str) -> int:
    """Calls ``OTPath(...)`` in the code of ``source`` (docstrings and comments do not count)."""
    calls = (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call))
    return sum(
        (isinstance(c.func, ast.Name) and c.func.id == "OTPath")
        or (isinstance(c.func, ast.Attribute) and c.func.attr == "OTPath")
        for c in calls
    )


def _static_counts(tree: Path) -> dict:
    """Seam counts and sizes read from the files of ``tree``."""
    pkg = tree / "skflow"
    ot, branches = 0, 0
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(pkg).as_posix()
        text = path.read_text()
        if not rel.startswith("paths"):
            ot += _ot_calls(text)
        if rel != "_array.py":
            branches += sum(bool(BRANCH.search(line)) for line in text.splitlines())
    sizes = {}
    for sub in sorted(p for p in pkg.iterdir() if p.is_dir() and p.name != "__pycache__"):
        files = list(sub.rglob("*.py"))
        lines = sum(len(f.read_text().splitlines()) for f in files)
        sizes[f"skflow/{sub.name}"] = (len(files), lines)
    top = list(pkg.glob("*.py"))
    sizes["skflow/*.py"] = (len(top), sum(len(f.read_text().splitlines()) for f in top))
    tests = list((tree / "tests").rglob("*.py"))
    sizes["tests"] = (len(tests), sum(len(f.read_text().splitlines()) for f in tests))
    folders = {p.parent for p in tests}
    return {"ot_path": ot, "branches": branches, "sizes": sizes, "test_folders": len(folders)}


def measure(rev: str) -> dict:
    """All numbers of one revision (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        _extract(rev, tree)
        stats = _static_counts(tree)
        out = subprocess.run(
            [sys.executable, "-c", PROBE],
            cwd=tree,
            env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    stats.update(json.loads(out.strip().splitlines()[-1]))
    stats["rev"] = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return stats


def markdown(before: dict, after: dict) -> str:
    """The before/after tables of the architecture page."""
    b, a = before, after
    lines = [
        f"Written by `python benchmarks/architecture_stats.py {b['rev']} {a['rev']} --write-docs`.",
        "",
        f"| measure | before ({b['rev']}) | after ({a['rev']}) |",
        "|---|---|---|",
        f"| `OTPath(` constructed outside the paths module | {b['ot_path']} | {a['ot_path']} |",
        f"| NumPy/Torch type branches outside the backend module | {b['branches']} "
        f"| {a['branches']} |",
    ]
    for name in ("NWFlowSampler", "LearnedFlowSampler"):
        lines.append(f"| `{name}` parameters | {b['params'][name]} | {a['params'][name]} |")
    lines.append(
        f"| frames from `NWFlowSampler.sample` to the field's velocity | {len(b['chain'])} "
        f"| {len(a['chain'])} |"
    )
    lines.append(f"| test folders | {b['test_folders']} | {a['test_folders']} |")
    lines += ["", "| package | files / lines before | files / lines after |", "|---|---|---|"]
    for key in sorted(set(b["sizes"]) | set(a["sizes"])):
        fb, fa = b["sizes"].get(key, (0, 0)), a["sizes"].get(key, (0, 0))
        lines.append(f"| `{key}` | {fb[0]} / {fb[1]} | {fa[0]} / {fa[1]} |")
    lines += ["", "The call chain after (outermost first):", ""]
    lines += [f"{i}. `{frame}`" for i, frame in enumerate(a["chain"], 1)]
    return "\n".join(lines) + "\n"


def write_docs(text: str, path: Path = DOCS) -> None:
    """Replace the marked block of ``path`` with ``text``."""
    page = path.read_text()
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    text = markdown(measure(args.before), measure(args.after))
    print(text)
    if args.write_docs:
        write_docs(text)


if __name__ == "__main__":
    main()
