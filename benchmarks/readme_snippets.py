#!/usr/bin/env python
"""Wall time of every Python snippet of ``README.md``, each run as written in a fresh interpreter.

A new user pastes one snippet into a new ``python``: this runs each ```` ```python ```` block of
the README the same way (``python -c``, from an empty temporary folder, the machine's default
threads), prints its output and its wall time, with the machine's cores and load average
before and after. The README quotes these times; ``tests/project/test_readme.py`` checks that the
snippets run and print what their comments say (with a shrunk ``max_iter``).

Usage::

    python benchmarks/readme_snippets.py [NAME ...]

``NAME``: ``ten-lines``, ``pretrained``, ``few-shot`` (default: all three, in README order).

Examples
--------
>>> [name for name, _ in readme_blocks()]
['ten-lines', 'pretrained', 'few-shot']
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def snippet_name(code: str) -> str:
    """The snippet's short name, from what it calls."""
    if "memorization_ratio" in code:
        return "few-shot"
    if "from_pretrained" in code:
        return "pretrained"
    return "ten-lines"


def readme_blocks(readme: Path = ROOT / "README.md") -> list[tuple[str, str]]:
    """``(name, code)`` of every Python block of the README, in order."""
    text = readme.read_text(encoding="utf-8")
    codes = re.findall(r"```python\n(.*?)```", text, re.S)
    return [(snippet_name(code), code) for code in codes]


def _load() -> str:
    return "{:.2f}/{:.2f}/{:.2f}".format(*os.getloadavg())


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_snippet(code: str) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run ``code`` with ``python -c`` in an empty folder; ``(wall seconds, CPU seconds,
    process)``. The CPU time (user + system, all threads) depends much less on other work on
    the machine than the wall time."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as tmp:
        t0, cpu0 = time.perf_counter(), _children_cpu()
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp, env=env, capture_output=True, text=True
        )
        return time.perf_counter() - t0, _children_cpu() - cpu0, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="snippets to run (default: all)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; Python {sys.version.split()[0]}")
    for name, code in readme_blocks():
        if args.names and name not in args.names:
            continue
        load0 = _load()
        wall, cpu, done = run_snippet(code)
        print(
            f"\n[{name}] {wall:.1f} s wall, {cpu:.1f} s CPU; load average {load0} at start, "
            f"{_load()} at end"
        )
        print(done.stdout.rstrip())
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"the {name} snippet failed (exit code {done.returncode})")


if __name__ == "__main__":
    main()
