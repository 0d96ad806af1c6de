#!/usr/bin/env python
"""Counts of the fuzz suite's cases and outcomes, from one run of ``tests/project/test_fuzz.py``.

Runs ``python -m pytest tests/project/test_fuzz.py`` in a subprocess with
``SKFLOW_FUZZ_COUNTS`` set, so the suite itself records, per test, how many cases Hypothesis
ran through the test body
and how every checked call ended (a valid result, a ``ValueError``, a ``TypeError``); then
prints them as a Markdown table with the command, the wall time and the machine (cores, load
average). The suite is derandomized, so the counts are a function of the code and of the
Hypothesis release (printed with the table).

Usage::

    python benchmarks/fuzz_counts.py [--write-docs]

``--write-docs`` writes the table into ``docs/robustness.md`` between the ``fuzz:counts``
markers (the rest of the file is kept). The run fails, and nothing is written, if the suite
fails.

Examples
--------
>>> rows = {"mmd2": {"max_examples": 3, "cases": 3, "calls": {"ok": 2, "ValueError": 4}}}
>>> print(table(rows).splitlines()[2])
| mmd2 | 3 | 3 | 2 | 4 | 0 | 6 |
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "robustness.md"
START, END = "<!-- fuzz:counts:start -->", "<!-- fuzz:counts:end -->"
OUTCOMES = ("ok", "ValueError", "TypeError")


def _load() -> str:
    return "{:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg())


def run_suite() -> tuple[dict, float]:
    """Run the fuzz suite once; return its recorded counts and the wall time in seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "counts.json")
        env = dict(os.environ, SKFLOW_FUZZ_COUNTS=path)
        # the documented counts are those of the default (CI) settings
        for name in ("SKFLOW_FUZZ_SCALE", "SKFLOW_FUZZ_RANDOM", "SKFLOW_FUZZ_NO_SHRINK"):
            env.pop(name, None)
        # the slow tests too: the deep NWFlowSampler run is part of the documented counts
        command = [sys.executable, "-m", "pytest", "tests/project/test_fuzz.py", "-q", "-m", ""]
        t0 = time.perf_counter()
        done = subprocess.run(command + ["-p", "no:cacheprovider"], cwd=ROOT, env=env)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"the fuzz suite failed (exit code {done.returncode})")
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)["tests"], wall


def table(rows: dict) -> str:
    """Markdown table of the per-test counts with a total row."""
    lines = [
        "| test | max_examples | cases | valid result | `ValueError` | `TypeError` | calls |",
        "|---|---|---|---|---|---|---|",
    ]
    total = dict.fromkeys(("max_examples", "cases", *OUTCOMES), 0)
    for name, row in rows.items():
        calls = [row["calls"].get(k, 0) for k in OUTCOMES]
        values = [row["max_examples"] or 0, row["cases"], *calls]
        for key, value in zip(total, values, strict=True):
            total[key] += value
        lines.append(f"| {name} | " + " | ".join(map(str, values)) + f" | {sum(calls)} |")
    tot = list(total.values())
    lines.append(
        "| **total** | " + " | ".join(f"**{v}**" for v in tot) + f" | **{sum(tot[2:])}** |"
    )
    return "\n".join(lines)


def report(rows: dict, wall: float, load0: str, load1: str, command: str) -> str:
    import hypothesis
    import numpy

    return "\n".join(
        [
            f"Command: `{command}` ({wall:.1f} s for the pytest run).",
            "",
            f"Machine: {os.cpu_count()} cores; load average (1/5/15 min) {load0} at start, "
            f"{load1} at end; Python {platform.python_version()}, NumPy {numpy.__version__}, "
            f"Hypothesis {hypothesis.__version__}.",
            "",
            table(rows),
            "",
            '"Cases" are the examples Hypothesis ran through the test body; "calls" are the '
            "checked calls of public functions and methods, by outcome. No call raised another "
            "exception or returned a non-finite result (the run fails otherwise).",
        ]
    )


def write_docs(text: str, path: Path = DOCS) -> None:
    doc = path.read_text(encoding="utf-8")
    if START not in doc or END not in doc:
        raise SystemExit(f"{path} has no {START} ... {END} block")
    block = f"{START}\n{text}\n{END}"
    doc = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, doc, flags=re.S)
    path.write_text(doc, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write-docs", action="store_true", help="update docs/robustness.md")
    args = ap.parse_args()
    load0 = _load()
    rows, wall = run_suite()
    load1 = _load()
    command = "python benchmarks/fuzz_counts.py" + (" --write-docs" if args.write_docs else "")
    text = report(rows, wall, load0, load1, command)
    print(text)
    if args.write_docs:
        write_docs(text)


if __name__ == "__main__":
    main()
