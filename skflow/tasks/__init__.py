"""Meta-distributions of tasks for in-context (support-conditioned) flow matching.

A *task* is a support set and a set of query points drawn from **one** distribution.
A *meta-distribution* draws such distributions at random. Every class in this module
shares one interface:

``sample_task(n_support, n_query, random_state=None)``
    returns ``(support, query)`` with shapes ``(n_support, n_features)`` and
    ``(n_query, n_features)``, both ``float64``.
``sample_tasks(n_tasks, n_support, n_query, random_state=None)``
    returns ``(supports, queries)`` with shapes ``(n_tasks, n_support, n_features)`` and
    ``(n_tasks, n_query, n_features)``, both ``float64``; vectorized over tasks and points.
``n_features``
    the dimension of the points.

``random_state`` may be ``None``, an int, a :class:`numpy.random.RandomState` or a
:class:`numpy.random.Generator`. The same int seed always gives identical arrays, and
``sample_task(m, n, random_state=s)`` equals task 0 of
``sample_tasks(1, m, n, random_state=s)``.

Classes (one family per module of the package)
----------------------------------------------
GaussianMixtureTasks (:mod:`skflow.tasks.gaussian`)
    Random Gaussian mixtures (random number of components, means, weights and
    anisotropic covariances).
SphericalShellTasks (:mod:`skflow.tasks.shells`)
    Random concentric spherical shells, where the variation is purely radial (a geometric
    mismatch for isotropic kernels).
RingTasks, MoonsTasks, SpiralTasks (:mod:`skflow.tasks.planar`)
    The paper's 2-D families (random rings, two moons, multi-arm spirals), embedded in
    ``d`` dimensions by a random rotation of their plane.
HierarchicalTasks (:mod:`skflow.tasks.hierarchical`)
    Classes whose means share a Gaussian prior, rows from a shared within-class law
    (Gaussian or Student-t), with the exact Bayes predictive of a new class given its
    support (the ceiling of few-shot generation) and labelled training classes.
MixedTasks (:mod:`skflow.tasks.mixed`)
    Mixes families with weights (the paper's "mixed" meta-distribution).
ClassTasks (:mod:`skflow.tasks.labelled`, as the next two)
    Real data: every class of a labelled data set is a task.
SingleDatasetTasks
    Random support/target splits of one data set (``LearnedFlowSampler.fit(X)``).
FewShotClassTasks
    Scarce labelled data: every class with a handful of rows is a task, at any support size
    it can give (``LearnedFlowSampler.fit(X, y)``).
RotatedTasks, rotate_tasks (:mod:`skflow.tasks.rotation`)
    Task augmentation: every task mapped by its own random orthogonal matrix (support and
    queries alike).
RecentredTasks, recentre_tasks (:mod:`skflow.tasks.recentre`)
    Task augmentation: every task moved to a new centre drawn like the training classes'
    centres (shape and orientation kept).
PrefetchedDraws, supports_device_draws (:mod:`skflow.tasks._device`)
    Training batches where the model trains: every family above draws on a device with
    ``sample_tasks(..., device=...)`` (``supports_device_draws``); a source that cannot is
    drawn one batch ahead in a background thread (``PrefetchedDraws``).

The task sources never put a task's support rows among its targets (the synthetic ones draw
every point independently; the data-based ones split rows).

:class:`GaussianMixtureTasks` also knows its exact population velocity under the OT path
(:meth:`GaussianMixtureTasks.velocity`), a low-variance regression target.
"""

from ._device import PrefetchedDraws, supports_device_draws
from .gaussian import GaussianMixtureParams, GaussianMixtureTasks
from .hierarchical import HierarchicalTasks
from .labelled import ClassTasks, FewShotClassTasks, SingleDatasetTasks
from .mixed import MixedTasks
from .planar import MoonsTasks, RingTasks, SpiralTasks
from .recentre import RecentredTasks, recentre_tasks
from .rotation import RotatedTasks, rotate_tasks
from .shells import SphericalShellTasks

__all__ = [
    "ClassTasks",
    "FewShotClassTasks",
    "GaussianMixtureParams",
    "GaussianMixtureTasks",
    "HierarchicalTasks",
    "MixedTasks",
    "MoonsTasks",
    "PrefetchedDraws",
    "RingTasks",
    "RecentredTasks",
    "RotatedTasks",
    "SingleDatasetTasks",
    "SphericalShellTasks",
    "SpiralTasks",
    "recentre_tasks",
    "rotate_tasks",
    "supports_device_draws",
]

# ``doctest.testmod(skflow.tasks)`` sees only what this module defines; list the re-exported
# names so that it runs their examples too, as it did when the package was one module.
__test__ = {name: globals()[name] for name in __all__}
