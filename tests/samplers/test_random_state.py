"""One random_state policy (docs/user_guide.rst): None, int, RandomState and Generator.

For every public estimator and task source: an int, a ``RandomState`` and a ``Generator`` in
the same state give the same result; None follows NumPy's global ``RandomState``; a bad value
raises ``InvalidParameterError`` naming ``random_state``.
"""

import numpy as np
import pytest

from skflow import (
    FlowProjection,
    LearnedFlowSampler,
    NetworkOptions,
    NWFlowSampler,
    SolverOptions,
    TrainingOptions,
)
from skflow._validation import InvalidParameterError
from skflow.diagnostics import neff_along_path
from skflow.metrics import mmd2_test
from skflow.tasks import (
    ClassTasks,
    GaussianMixtureTasks,
    MixedTasks,
    MoonsTasks,
    RingTasks,
    SingleDatasetTasks,
    SphericalShellTasks,
    SpiralTasks,
)

S = np.random.default_rng(0).standard_normal((12, 2))
Y = np.random.default_rng(1).standard_normal((12, 2)) + 1.0
LABELS = np.repeat([0, 1], 6)


def _nw(rs):
    return NWFlowSampler(random_state=rs, solver=SolverOptions(n_steps=4)).fit(S).sample(3)


def _nw_call(rs):
    return NWFlowSampler(solver=SolverOptions(n_steps=4)).fit(S).sample(3, random_state=rs)


def _learned(rs):
    est = LearnedFlowSampler(
        NetworkOptions(d_model=8, n_heads=2, n_layers=1),
        training=TrainingOptions(max_iter=2, batch_tasks=2, support_size=4, n_targets=4),
        solver=SolverOptions(n_steps=2),
        random_state=rs,
    )
    return est.fit(S).sample(2, random_state=0)


def _projection(rs):
    return FlowProjection(n_components=1, n_iter=2, n_tasks=2, random_state=rs).fit(S).components_


def _task_source(source):
    return lambda rs: np.concatenate([a.ravel() for a in source.sample_tasks(2, 3, 2, rs)])


RUNS = {
    "NWFlowSampler": _nw,
    "NWFlowSampler.sample": _nw_call,
    "LearnedFlowSampler": _learned,
    "FlowProjection": _projection,
    "GaussianMixtureTasks": _task_source(GaussianMixtureTasks(2)),
    "SphericalShellTasks": _task_source(SphericalShellTasks(2)),
    "RingTasks": _task_source(RingTasks(2)),
    "MoonsTasks": _task_source(MoonsTasks(2)),
    "SpiralTasks": _task_source(SpiralTasks(2)),
    "MixedTasks": _task_source(MixedTasks([RingTasks(2), MoonsTasks(2)])),
    "ClassTasks": _task_source(ClassTasks(S, LABELS)),
    "ClassTasks(random_state)": lambda rs: np.asarray(
        ClassTasks(S, LABELS, validation_fraction=0.5, random_state=rs).sample_tasks(
            1, 2, 1, 0, split="validation"
        )[0]
    ),
    "SingleDatasetTasks": _task_source(SingleDatasetTasks(S)),
    "neff_along_path": lambda rs: neff_along_path(S, n_trajectories=4, n_steps=4, random_state=rs)[
        1
    ],
    "mmd2_test": lambda rs: mmd2_test(S, Y, n_permutations=9, random_state=rs).null_distribution,
}


@pytest.mark.exactness
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(RUNS))
def test_int_randomstate_and_generator_are_reproducible(name):
    run = RUNS[name]
    np.testing.assert_array_equal(run(3), run(3))
    np.testing.assert_array_equal(run(np.random.RandomState(3)), run(np.random.RandomState(3)))
    np.testing.assert_array_equal(run(np.random.default_rng(3)), run(np.random.default_rng(3)))
    # different seeds give different draws (the seed is really used)
    assert not np.array_equal(run(3), run(4))


@pytest.mark.exactness
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(RUNS))
def test_none_follows_the_global_randomstate(name):
    np.random.seed(5)  # noqa: NPY002 - the legacy global state is what None means
    first = RUNS[name](None)
    np.random.seed(5)  # noqa: NPY002 - the legacy global state is what None means
    np.testing.assert_array_equal(RUNS[name](None), first)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(RUNS))
@pytest.mark.parametrize("bad", ["seed", 1.5, True, -1])
def test_bad_random_state_raises_the_same_error(name, bad):
    with pytest.raises(InvalidParameterError, match=r"^random_state must be None, a non-negative"):
        RUNS[name](bad)
