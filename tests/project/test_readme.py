"""The README's Python snippets run as written, each in a fresh interpreter, and print what
their comments promise.

Every ```` ```python ```` block of ``README.md`` is run on its own with ``python -c`` in a
subprocess (a new user pastes one snippet into a new interpreter: a snippet that leans on an
import of another one fails here), from an empty folder, and its standard output is checked
against the values its comments name. The text before each block says how long it takes on
two cores; the test checks that the sentence is there (not the time: no timed tests).

One shrink, and only one: a snippet that trains (``max_iter=300``) runs here with
``max_iter=3`` (:data:`FAST`), so the test takes seconds instead of minutes; every other
character of the snippet is the README's. The substitution must match exactly once, so a
changed snippet fails here until :data:`FAST` follows it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

#: README text -> what the test runs instead (the only change to a snippet).
FAST = {"max_iter=300": "max_iter=3"}


def _blocks() -> list[tuple[str, str]]:
    """``(text before the block since the previous block, code)`` of every Python block."""
    out, end = [], 0
    for match in re.finditer(r"```python\n(.*?)```", README, re.S):
        out.append((README[end : match.start()], match.group(1)))
        end = match.end()
    return out


BLOCKS = _blocks()


def _name(code: str) -> str:
    if "memorization_ratio" in code:
        return "few-shot"
    if "from_pretrained" in code:
        return "pretrained"
    return "ten-lines"


def _check_ten_lines(lines: list[str]) -> None:
    assert lines == ["(200, 2) (2, 200, 2) (101, 10, 2)"]  # 100 steps: 101 states


def _check_pretrained(lines: list[str]) -> None:
    assert lines[0] == "(200, 4)"
    assert lines[1].startswith("python -m skflow.priors general-16"), lines


def _check_few_shot(lines: list[str]) -> None:
    ratio = float(lines[-1])
    assert 0.0 <= ratio < 5.0  # a ratio of distances; after 3 iterations it is not the claim


CHECKS = {
    "ten-lines": _check_ten_lines,
    "pretrained": _check_pretrained,
    "few-shot": _check_few_shot,
}


def test_readme_has_the_three_snippets():
    assert sorted(_name(code) for _, code in BLOCKS) == sorted(CHECKS)


@pytest.mark.parametrize("before,code", BLOCKS, ids=[_name(code) for _, code in BLOCKS])
def test_snippet_runs_as_written_in_a_fresh_interpreter(before, code, tmp_path):
    for old, new in FAST.items():
        if old in code:
            assert code.count(old) == 1, f"{old!r} appears more than once"
            code = code.replace(old, new)
    # the README says how long the snippet takes (in the paragraph just before it)
    paragraph = before.strip().split("\n\n")[-1]
    assert re.search(r"\d+(\.\d+)? s on (2|two)\s+cores", paragraph), (
        f"the text before the {_name(code)} snippet does not say its time on 2 cores"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, "the snippet prints nothing"
    CHECKS[_name(code)](lines)
    assert not list(tmp_path.iterdir()), "a snippet wrote files"
