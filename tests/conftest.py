"""Make every test file's Hypothesis examples independent of what ran before it.

Two things made the examples of a derandomized test depend on the run order:

* Tests without ``derandomize`` drew fresh random examples and replayed failures from the
  example database in ``.hypothesis/``. The ``skflow`` profile below makes every test
  derandomized (the examples are a function of the test alone) with no database; a test's
  own ``@settings`` still sets its ``max_examples`` and the like.
* Hypothesis (6.131 and later) also draws, now and then, constants harvested from the
  *local* modules that are in ``sys.modules`` when a test runs (here: the ``skflow``
  modules; test files are excluded). Which ``skflow`` modules a test run has imported
  depends on the files it collected and the tests that ran before, so the same test saw
  different examples alone and in the whole suite. Importing every ``skflow`` module here,
  before any test runs, gives every order the same set of constants.

``HYPOTHESIS_PROFILE=random python -m pytest ...`` draws fresh random examples instead (for
deeper local runs; CI uses the default profile).
"""

from __future__ import annotations

import importlib
import os
import pkgutil

from hypothesis import settings

import skflow

settings.register_profile("skflow", derandomize=True, database=None, deadline=None)
settings.register_profile("random", derandomize=False, database=None, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "skflow"))


def _import_all_skflow_modules() -> None:
    for info in pkgutil.walk_packages(skflow.__path__, prefix="skflow."):
        try:
            importlib.import_module(info.name)
        except ImportError:
            # an optional dependency that is missing: the same on every run of this machine
            continue


_import_all_skflow_modules()
