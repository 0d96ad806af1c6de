"""Docstring examples run by each module's own test folder.

``tests/project/test_docs.py`` runs every module's examples; each folder of ``tests/`` also
runs those of the modules it covers (``tests/field`` those of ``skflow.field``, ...), so that a
bug planted in a module whose examples see it fails that module's own test folder.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import numpy as np
import pytest

OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def modules_of(*names: str) -> list[str]:
    """The named modules and, for a package, every module under it (``__main__`` left out)."""
    found = []
    for name in names:
        module = importlib.import_module(name)
        found.append(name)
        if hasattr(module, "__path__"):
            for info in pkgutil.walk_packages(module.__path__, prefix=f"{name}."):
                if not info.name.endswith("__main__"):
                    found.append(info.name)
    return sorted(set(found))


def run_doctests(modname: str) -> None:
    """Run the docstring examples of one module; fail with their report."""
    module = importlib.import_module(modname)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    report: list[str] = []
    # docstrings show NumPy's default printing, whatever another test changed
    with np.printoptions(legacy=False, precision=8, suppress=False):
        for test in sorted(finder.find(module, modname), key=lambda t: t.name):
            runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    if results.failed:
        pytest.fail(
            f"{results.failed} of {results.attempted} docstring examples of {modname} failed:\n"
            + "".join(report),
            pytrace=False,
        )
