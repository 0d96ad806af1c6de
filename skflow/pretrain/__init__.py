"""Training of the shipped in-context priors (``python -m skflow.pretrain NAME``).

:class:`PriorTasks` is the synthetic meta-distribution, :data:`RECIPES` the named recipes,
:func:`train_prior` the resumable training run that writes a prior's weights and model card.
Loading a shipped prior needs none of this: :meth:`skflow.LearnedFlowSampler.from_pretrained`.
"""

from .meta_distribution import FAMILIES, EllipticalMixtureTasks, PriorTasks
from .recipes import RECIPES
from .training import train_prior

__all__ = ["FAMILIES", "RECIPES", "EllipticalMixtureTasks", "PriorTasks", "train_prior"]
