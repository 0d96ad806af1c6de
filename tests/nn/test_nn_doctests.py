"""The docstring examples of the modules this folder covers (see tests/doctest_support.py)."""

import pytest
from doctest_support import modules_of, run_doctests


@pytest.mark.parametrize("modname", modules_of("skflow.nn"))
def test_docstring_examples(modname):
    run_doctests(modname)
