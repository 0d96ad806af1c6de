"""The documentation's executable parts: docstring examples and the getting-started snippets.

* Every module of the package runs its docstring examples (``doctest``), and each public
  module exposes at least one example, in its own docstrings or in those of its public names.
* The "Ten lines" example of ``docs/getting_started.rst`` runs, and the install and test
  commands the page shows are the README's.

None of this needs Sphinx; ``bash docs/build.sh`` builds the site itself.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import numpy as np
import pytest

import skflow

ROOT = Path(__file__).resolve().parents[2]

#: Public modules (as in the API reference); those that do not exist yet are skipped.
PUBLIC_MODULES = [
    "skflow",
    "skflow.paths",
    "skflow.field",
    "skflow.solvers",
    "skflow.samplers",
    "skflow.pipeline",
    "skflow.projection",
    "skflow.metrics",
    "skflow.diagnostics",
    "skflow.tasks",
    "skflow.nn",
    "skflow.threads",
]

OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _all_modules() -> list[str]:
    names = ["skflow"]
    for info in pkgutil.walk_packages(skflow.__path__, prefix="skflow."):
        if info.name == "skflow.__main__":
            continue  # importing it is harmless, but it is a script: no examples
        names.append(info.name)
    return sorted(names)


ALL_MODULES = _all_modules()
#: The listed modules that exist, and every other module without a private path component.
CHECKED_PUBLIC_MODULES = sorted(
    set(PUBLIC_MODULES)
    | {m for m in ALL_MODULES if not any(p.startswith("_") for p in m.split("."))}
)


def _existing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _public_objects(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        if name.startswith("__") and name.endswith("__"):
            continue
        yield name, getattr(module, name)


@pytest.fixture(autouse=True)
def _quiet_numpy_printing():
    # Docstrings show NumPy's default printing; keep it whatever another test changed.
    with np.printoptions(legacy=False, precision=8, suppress=False):
        yield


@pytest.mark.parametrize("modname", ALL_MODULES)
def test_docstring_examples_pass(modname):
    module = importlib.import_module(modname)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    report: list[str] = []
    for test in sorted(finder.find(module, modname), key=lambda t: t.name):
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    if results.failed:
        pytest.fail(
            f"{results.failed} of {results.attempted} docstring examples of {modname} failed:\n"
            + "".join(report),
            pytrace=False,
        )


@pytest.mark.parametrize("modname", CHECKED_PUBLIC_MODULES)
def test_public_module_has_examples(modname):
    if not _existing(modname):
        pytest.skip(f"{modname} does not exist (yet)")
    module = importlib.import_module(modname)
    finder = doctest.DocTestFinder(exclude_empty=True)
    examples = sum(len(t.examples) for t in finder.find(module, modname))
    for name, obj in _public_objects(module):
        if callable(obj) or isinstance(obj, type):
            try:
                found = finder.find(obj, f"{modname}.{name}", module=False, globs={})
            except ValueError:  # objects doctest cannot inspect (e.g. some C builtins)
                continue
            examples += sum(len(t.examples) for t in found)
    assert examples >= 1, (
        f"{modname} has no docstring example: add an 'Examples' section to the module or to "
        "one of its public functions or classes."
    )


# -- docs/getting_started.rst ------------------------------------------------------------------


def _code_blocks(text: str, language: str, *, with_options: bool = False) -> list:
    """Bodies of the ``.. code-block:: <language>`` directives of a reST text, at any
    indentation (with their option lines, such as ``:class: skip-test``, when
    ``with_options``)."""
    blocks = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(rf"^( *)\.\. code-block:: {language}\s*$", line)
        if not match:
            continue
        indent = len(match.group(1)) + 3
        options, body, j = [], [], i + 1
        while j < len(lines) and lines[j].startswith(" " * indent + ":"):
            options.append(lines[j].strip())
            j += 1
        while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" " * indent)):
            body.append(lines[j][indent:])
            j += 1
        code = "\n".join(body).strip()
        blocks.append(("\n".join(options), code) if with_options else code)
    return blocks


def test_getting_started_example_runs():
    text = (ROOT / "docs" / "getting_started.rst").read_text(encoding="utf-8")
    blocks = _code_blocks(text, "python")
    assert blocks, "docs/getting_started.rst has no Python example"
    namespace: dict = {}
    exec(compile(blocks[-1], "getting_started.rst", "exec"), namespace)
    assert namespace["X"].shape == (200, 2)
    assert namespace["paths"].shape[1:] == (10, 2)


def test_getting_started_commands_match_readme():
    """The page shows the README's two commands verbatim: the demo and the test command."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "getting_started.rst").read_text(encoding="utf-8")
    commands = [c.strip() for c in re.findall(r"```bash\n(.*?)\n\s*```", readme, re.S)]
    demo = [c for c in commands if "skflow demo" in c]
    test = re.search(r"<!-- test-command -->\s*```bash\n(.*?)\n\s*```", readme, re.S)
    assert demo and test, "README.md lost its demo or test command"
    # both create and activate the same virtual environment (no pip into a system Python, which
    # fails where it is externally managed, PEP 668)
    venv = "python3 -m venv .venv && . .venv/bin/activate && "
    assert demo[0].startswith(venv) and test.group(1).strip().startswith(venv)
    page_commands = _code_blocks(page, "bash")
    for command in (demo[0], test.group(1).strip()):
        assert command in page_commands, (
            f"docs/getting_started.rst does not show the README command {command!r}"
        )


def test_user_guide_examples_run():
    """The Python blocks of docs/user_guide.rst run in order, in one namespace, except those
    marked ``:class: skip-test`` (code that needs a cluster)."""
    text = (ROOT / "docs" / "user_guide.rst").read_text(encoding="utf-8")
    blocks = _code_blocks(text, "python", with_options=True)
    assert blocks, "docs/user_guide.rst has no Python example"
    namespace: dict = {}
    ran = 0
    for options, body in blocks:
        if "skip-test" in options:
            continue
        missing = re.findall(r"from (skflow[.\w]*) import", body)
        if any(not _existing(name) for name in missing):
            continue  # describes a module that is not there yet (guarded by ``.. only::``)
        exec(compile(body, "user_guide.rst", "exec"), namespace)
        ran += 1
    assert ran >= 1
