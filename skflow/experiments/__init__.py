"""The paper's four experiments and its leave-one-family-out test, on skflow's public API.

Each experiment is a module with ``PRESETS`` (``"quick"``: a CPU run of a few minutes;
``"full"``: the paper's scale, meant for a GPU; ``"tiny"``: the end-to-end test) and
``run(preset="quick", *, output_dir=..., n_jobs=None, random_state=0) -> dict``, which writes
``results.json`` and a PNG figure into ``output_dir`` and returns the numbers. Run them with
``python -m skflow.experiments NAME --quick`` (or ``--full``).

========== ==================================================================
name       experiment
========== ==================================================================
collapse   dimension collapse on Gaussian-mixture tasks (d = 2 ... 16)
geometry   geometric mismatch on spherical shells
scarcity   support scarcity on real data with classes as tasks
attention  attention-vs-NW weight correlation of the learned model across t
families   leave-one-family-out generalization (mixtures, rings, moons, spirals)
fewshot    the default ``LearnedFlowSampler().fit(X, y)`` on held-out digit classes
========== ==================================================================

Examples
--------
>>> from skflow.experiments import EXPERIMENTS
>>> EXPERIMENTS
('collapse', 'geometry', 'scarcity', 'attention', 'families', 'fewshot')
"""

EXPERIMENTS = ("collapse", "geometry", "scarcity", "attention", "families", "fewshot")

__all__ = ["EXPERIMENTS"]
