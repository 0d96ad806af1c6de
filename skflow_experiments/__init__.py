"""The paper's four experiments and its leave-one-family-out test, on skflow's public API.

The research bench, beside the library: a top-level folder of the repository, not part of the
installed ``skflow`` package (the wheel leaves it out). Run it from a clone's root, where
``python -m skflow_experiments`` finds it, after ``pip install -e .``. It imports public names
of skflow only (``tests/project/test_layering.py`` checks it), so it doubles as an example of
the API.

Each experiment is a module with ``PRESETS`` and
``run(preset="quick", *, output_dir=..., n_jobs=None, random_state=0) -> dict``, which writes
``results.json`` and a PNG figure into ``output_dir`` and returns the numbers. The module is a
specification, its ``SPEC`` (:class:`~skflow_experiments._experiment.Experiment`: name,
presets, the work, the results, the figure, the section of ``docs/results.md``, the headline
rows of the command line); one runner does what every run shares (seeds, Torch threads,
progress bar, wall time, machine and load records, the files). A new experiment is a module
with its ``SPEC``, ``run`` and ``write_docs`` calling it, and its name in :data:`EXPERIMENTS`;
class-grouped few-shot tasks come from :func:`~skflow_experiments._splits.class_splits`. The
presets:
``"smoke"`` tries the pipeline (meant for at most 2 minutes on 2 cores; not a result, never
written to the docs); ``"quick"`` is the CPU preset of ``docs/results.md``, whose recorded runs
took many minutes each on 2 cores, up to half an hour (each experiment's section there gives
its wall time, and ``python -m skflow_experiments --help`` lists them); ``"full"`` is the paper's
scale, meant for a GPU; ``"tiny"`` is the end-to-end test. Run one with
``python -m skflow_experiments NAME --smoke`` (or ``--quick``, ``--full``): a progress bar,
then a table of the headline numbers and the files written (``--json`` for the summary as
JSON).

========== ==================================================================
name       experiment
========== ==================================================================
collapse   dimension collapse on Gaussian-mixture tasks (d = 2 ... 16)
geometry   geometric mismatch on spherical shells
scarcity   support scarcity on real data with classes as tasks
attention  attention-vs-NW weight correlation of the learned model across t
families   leave-one-family-out generalization (mixtures, rings, moons, spirals)
fewshot    the default ``LearnedFlowSampler().fit(X, y)`` on held-out digit classes
pretrained the shipped pretrained prior, zero-shot on four real data sets, and fine-tuning
========== ==================================================================

Examples
--------
>>> from skflow_experiments import EXPERIMENTS
>>> EXPERIMENTS
('collapse', 'geometry', 'scarcity', 'attention', 'families', 'fewshot', 'pretrained')
"""

EXPERIMENTS = (
    "collapse",
    "geometry",
    "scarcity",
    "attention",
    "families",
    "fewshot",
    "pretrained",
)

__all__ = ["EXPERIMENTS"]
