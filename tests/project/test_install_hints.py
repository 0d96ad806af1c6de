"""Every install hint names the distribution ``skflow-matching`` and an extra that exists.

The package index's ``skflow`` is an unrelated project (2016, TensorFlow): a hint that says
``pip install skflow[...]`` installs it. This file finds every ``pip install`` in the code, the
README and the docs, and checks the name and the extra; and that a wheel built from the
checkout carries the name and the extras.
"""

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from skflow._install import DISTRIBUTION, install_hint

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])

#: ``pip install`` followed by an optional ``-e`` and a (quoted) requirement with extras
HINT = re.compile(r"pip install\s+(?:-e\s+)?['\"`]?([A-Za-z0-9_.\-]+)\[([\w,\s]+)\]")
#: ``pip install skflow`` alone or with extras: the other project
WRONG = re.compile(r"pip install\s+['\"`]?skflow(?![\w-])")
#: ``install_hint('extra')`` calls in the code
CALLS = re.compile(r"install_hint\(\s*['\"](\w+)['\"]\s*\)")

#: the CHANGELOG quotes former hints to say what changed; .venv and build outputs are not ours
SKIP_PARTS = {".venv", "build", "_build", ".git", "node_modules"}


def _files():
    for pattern in ("**/*.py", "**/*.md", "**/*.rst", "**/*.txt", "**/*.toml", ".ci/run"):
        for path in ROOT.glob(pattern):
            rel = path.relative_to(ROOT)
            if SKIP_PARTS.intersection(rel.parts) or rel.name == "CHANGELOG.md":
                continue
            if rel.parts[0] == "docs" and rel.name == "changelog.md":
                continue
            yield rel, path.read_text(encoding="utf-8", errors="replace")


def test_the_distribution_is_named_in_pyproject():
    assert PYPROJECT["project"]["name"] == DISTRIBUTION == "skflow-matching"


def test_every_hint_names_the_distribution_and_an_existing_extra():
    found = []
    for rel, text in _files():
        if rel == Path("tests/project/test_install_hints.py"):
            continue
        assert not WRONG.search(text), f"{rel}: a hint installs the index's other 'skflow'"
        for name, extras in HINT.findall(text):
            found.append((rel, name))
            assert name in (DISTRIBUTION, "."), f"{rel}: pip install {name}[{extras}]"
            for extra in extras.replace(" ", "").split(","):
                assert extra in EXTRAS, f"{rel}: extra {extra!r} is not in pyproject.toml"
        for extra in CALLS.findall(text):
            found.append((rel, extra))
            assert extra in EXTRAS, f"{rel}: install_hint({extra!r}) names no extra"
    # the README's commands and the library's messages are among them
    assert any(rel == Path("README.md") for rel, _ in found)
    assert {rel.parts[0] for rel, _ in found} >= {"skflow", "README.md"}


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_install_hint_of_every_extra(extra):
    hint = install_hint(extra)
    ((name, extras),) = {m for m in HINT.findall(hint) if m[0] == DISTRIBUTION}
    assert extras == extra and f"-e '.[{extra}]'" in hint


def test_a_built_wheel_carries_the_name_and_the_extras(tmp_path):
    """``pip wheel`` of a copy of the checkout (the build writes ``build/`` beside its
    sources), offline (no build isolation: the setuptools of this environment)."""
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "skflow", src / "skflow", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(src)],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("skflow_matching-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        text = zf.read(meta).decode()
        names = zf.namelist()
    assert re.search(r"^Name: skflow-matching$", text, re.M)
    assert set(re.findall(r"^Provides-Extra: (\S+)$", text, re.M)) == EXTRAS
    assert "skflow/__init__.py" in names and "skflow/priors/data/general-16.npz" in names
