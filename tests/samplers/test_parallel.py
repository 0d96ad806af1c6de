"""Scale-out: sampling split over joblib workers (and a Dask cluster) gives identical samples."""

import numpy as np
import pytest
from joblib import parallel_config

from skflow import EngineOptions, NWFlowSampler, SolverOptions
from skflow.samplers._base import SAMPLING_BATCH_SIZE

# every test here compares the same kernels on the same arrays (n_jobs and a Dask cluster
# vs serial): bit for bit
pytestmark = pytest.mark.exactness

# a test extra (dask[distributed]); images without it (the GPU check's) skip this file only
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def fitted():
    support = np.random.default_rng(0).normal(size=(40, 3))
    return NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=4)).fit(support)


def _with_jobs(sampler, n_jobs):
    return sampler.set_params(engine=EngineOptions(n_jobs=n_jobs))


def test_n_jobs_two_equals_serial(fitted):
    n = 2 * SAMPLING_BATCH_SIZE + 10
    serial = _with_jobs(fitted, 1).sample(n, random_state=3)
    parallel = _with_jobs(fitted, 2).sample(n, random_state=3)
    np.testing.assert_array_equal(serial, parallel)
    t, traj = _with_jobs(fitted, 2).sample_trajectories(n, random_state=3)
    np.testing.assert_array_equal(traj[-1], serial)


def test_dask_cluster_equals_serial(fitted):
    n = 2 * SAMPLING_BATCH_SIZE + 10
    serial = _with_jobs(fitted, 1).sample(n, random_state=5)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        with parallel_config(backend="dask"):
            on_cluster = _with_jobs(fitted, 2).sample(n, random_state=5)
    np.testing.assert_array_equal(serial, on_cluster)
