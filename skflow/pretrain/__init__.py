"""Deprecated alias of :mod:`skflow.priors` (the priors' task law, recipes and training).

``from skflow.pretrain import PriorTasks`` (or ``FAMILIES``, ``RECIPES``,
``EllipticalMixtureTasks``, ``train_prior``) still works and warns; ``python -m
skflow.pretrain NAME`` still trains and warns. Use ``skflow.priors`` and ``python -m
skflow.priors NAME``. The former submodules (``skflow.pretrain.training`` ...) are the moved
modules under their old names, so old scripts and checkpoints still load.

Examples
--------
>>> import warnings
>>> import skflow.priors
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     from skflow.pretrain import PriorTasks
>>> PriorTasks is skflow.priors.PriorTasks, caught[0].category.__name__
(True, 'DeprecationWarning')
"""

import importlib
import sys
import warnings

#: The names the former package exported (each now in :mod:`skflow.priors`).
MOVED = ("FAMILIES", "RECIPES", "EllipticalMixtureTasks", "PriorTasks", "train_prior")

# old dotted paths (scripts, pickled checkpoints) resolve to the moved modules, not to copies
for _name in ("meta_distribution", "recipes", "training", "model_card"):
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"skflow.priors.{_name}")


def __getattr__(name: str):
    # warn on use, not on import: walking the package (docs, tests) stays silent
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"skflow.pretrain is deprecated: use skflow.priors.{name} (and python -m skflow.priors).",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module("skflow.priors"), name)
