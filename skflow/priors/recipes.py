"""Named recipes of the shipped priors: the estimator, its task law and its training budget.

A recipe is everything ``python -m skflow.priors NAME`` needs to rebuild a prior bit for bit
(on one Torch thread): the :class:`~skflow.LearnedFlowSampler` parameters, the
:class:`~skflow.priors.PriorTasks` parameters and the number of iterations. Add a recipe
here to train a new prior; its weights and model card land in ``skflow/priors/data/``.

Examples
--------
>>> from skflow.priors import RECIPES
>>> recipe = RECIPES["general-16"]
>>> recipe["tasks"]["max_features"], recipe["sampler"]["support_size"]
(16, (2, 100))
"""

from __future__ import annotations

from typing import Any

__all__ = ["RECIPES"]

#: name -> {"description", "sampler" (LearnedFlowSampler params, in the flat form of a model
#: card: ``learned_params_from_flat`` groups them), "tasks" (PriorTasks
#: params), "finetune" (the estimator parameters ``from_pretrained`` sets: a warm start with
#: the few-shot defaults and a short schedule at a fit's own learning rate and warmup (a warm
#: start skips the warmup); ``normalize="auto"``: the prior continues in its own frame),
#: "max_iter", "chunk" (iterations between checkpoints)}.
RECIPES: dict[str, dict[str, Any]] = {
    "general-16": {
        "description": (
            "General in-context prior: any number of features up to 16, supports of 2 to 100 "
            "rows, trained on mixtures of rotated anisotropic Gaussian, Student-t and skewed "
            "clusters, rings, moons, spirals and shells at random scales."
        ),
        "sampler": {
            "d_model": 64,
            "n_heads": 4,
            "n_layers": 2,
            "mlp_ratio": 2,
            "exact_head": True,
            "sigma_min": 0.01,
            "batch_tasks": 32,
            "support_size": (2, 100),
            "n_targets": 128,
            "augment": None,
            "normalize": True,
            "learning_rate": 1e-3,
            "warmup": 200,
            "lr_schedule": "constant",
            "ema_decay": 0.999,
            "validation_fraction": 0.1,
            "n_iter_no_change": None,
            "validation_interval": 250,
            "random_state": 0,
        },
        "finetune": {
            "warm_start": True,
            "normalize": "auto",
            "support_size": "auto",
            "augment": "auto",
            "validation_fraction": "auto",
            "n_iter_no_change": "auto",
            "max_iter": 300,
            "learning_rate": 1e-3,
            "warmup": 100,
            "lr_schedule": "cosine",
            "validation_interval": 50,
        },
        "tasks": {"max_features": 16, "weights": None, "scale": (0.1, 10.0)},
        "max_iter": 20000,
        "chunk": 1000,
    },
}
# The same prior with the support size as an input (``size_embedding``): without it one
# network serves every m with about the same spread (it copies part of a 5-row support and
# over-smooths a 50-row one, measured on held-out tasks of its own law in docs/pretrained.md).
RECIPES["general-16-sized"] = {
    **RECIPES["general-16"],
    "description": (
        "General in-context prior that sees the support size: any number of features up to "
        "16, supports of 2 to 100 rows, trained on mixtures of rotated anisotropic Gaussian, "
        "Student-t and skewed clusters, rings, moons, spirals and shells at random scales."
    ),
    "sampler": {**RECIPES["general-16"]["sampler"], "size_embedding": True},
}
