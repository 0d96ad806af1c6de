"""The shipped in-context priors, in one place: stored form, task law, recipes, training.

A prior is a fitted :class:`~skflow.LearnedFlowSampler` kept as two files in
``skflow/priors/data/`` (package data: nothing is downloaded): ``NAME.npz``, the network's
float32 ``state_dict``, and ``NAME.json``, its model card, which holds the configuration that
rebuilds the estimator (architecture, fitted attributes, estimator parameters), the SHA-256
of the weights and the training command, budget, machine and curves.

- :mod:`skflow.samplers.prior_store`: that format (:func:`read_prior`, :func:`load_prior`,
  :func:`write_prior`, the SHA-256 check), kept with the estimators that load it (this
  package builds estimators, so it sits above them);
  :meth:`skflow.LearnedFlowSampler.from_pretrained` is one call of :func:`load_prior`;
- :class:`PriorTasks`: the synthetic meta-distribution the priors are trained on;
- :data:`RECIPES`: the named recipes (estimator, task law, budget);
- :func:`train_prior` and ``python -m skflow.priors NAME``: the resumable, deterministic
  training run that writes a prior's weights and card; ``python -m skflow.priors
  --write-docs`` writes ``docs/pretrained.md`` from the cards.

Examples
--------
>>> from skflow.priors import RECIPES, pretrained_cards
>>> card = pretrained_cards()["general-16"]
>>> card["weights_file"], card["network"]["n_features"], sorted(RECIPES)
('general-16.npz', 16, ['general-16', 'general-16-sized'])
"""

from ..samplers.prior_store import (
    PRIORS_DIR,
    file_sha256,
    load_prior,
    pretrained_cards,
    read_prior,
    write_prior,
)
from .meta_distribution import FAMILIES, EllipticalMixtureTasks, PriorTasks
from .recipes import RECIPES
from .training import train_prior

__all__ = [
    "FAMILIES",
    "PRIORS_DIR",
    "RECIPES",
    "EllipticalMixtureTasks",
    "PriorTasks",
    "file_sha256",
    "load_prior",
    "pretrained_cards",
    "read_prior",
    "train_prior",
    "write_prior",
]
