"""Persistence: fitted estimators survive pickle and joblib round trips unchanged.

A round-tripped estimator must give *identical* samples (same seed), transforms and field
values. ``NWFlowSampler`` keeps only NumPy arrays as fitted state, so a model fitted with
``device="cuda"`` loads on a CPU-only machine and samples there after
``set_params(device="cpu")``; a real CUDA round trip runs where a GPU exists.
"""

from __future__ import annotations

import pickle

import joblib
import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from skflow import DensityOptions, NWFlowSampler, SolverOptions
from skflow.pipeline import make_sampling_pipeline
from skflow.projection import FlowProjection

# every test here compares the same kernels on the same arrays (pickle and joblib round trips):
# bit for bit
pytestmark = pytest.mark.exactness

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)) @ np.diag([3.0, 1.0, 0.5, 0.1])
    return X, rng.normal(size=(7, 4))


def _pickle(est, tmp_path):
    return pickle.loads(pickle.dumps(est))


def _joblib(est, tmp_path):
    path = tmp_path / "model.joblib"
    joblib.dump(est, path)
    return joblib.load(path)


ROUND_TRIPS = [_pickle, _joblib]


def _assert_same_sampler(a, b, X):
    np.testing.assert_array_equal(a.sample(25, random_state=3), b.sample(25, random_state=3))
    t, traj = a.sample_trajectories(5, random_state=4)
    np.testing.assert_array_equal(traj, b.sample_trajectories(5, random_state=4)[1])
    np.testing.assert_array_equal(a.velocity(X, 0.7), b.velocity(X, 0.7))
    np.testing.assert_array_equal(a.weights(X, 0.7), b.weights(X, 0.7))
    np.testing.assert_array_equal(a.score_samples(X), b.score_samples(X))
    assert a.score(X) == b.score(X)


# the loose tolerances below trigger the accuracy warning by design
@pytest.mark.filterwarnings("ignore::skflow.exceptions.AccuracyWarning")
@pytest.mark.parametrize("round_trip", ROUND_TRIPS)
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize(
    "geometry",
    [{}, {"kernel": "mahalanobis"}, {"projection": PCA(n_components=2)}],
    ids=["isotropic", "mahalanobis", "pca"],
)
def test_nw_flow_sampler_round_trip(data, tmp_path, round_trip, backend, geometry):
    X, Q = data
    # loose density tolerances: the round trip must reproduce score_samples bit for bit, its
    # accuracy is tested in test_likelihood.py (the Mahalanobis solve takes about 25 times
    # longer at 1e-4: tens of seconds per case on a loaded 2-core machine)
    est = NWFlowSampler(
        backend=backend,
        random_state=0,
        **geometry,
        solver=SolverOptions(n_steps=4),
        density=DensityOptions(rtol=1e-2, atol=1e-2, max_error=10.0),
    ).fit(X)
    loaded = round_trip(est, tmp_path)
    assert loaded.get_params()["backend"] == backend
    np.testing.assert_array_equal(loaded.support_, est.support_)
    if est.projection_ is not None:
        np.testing.assert_array_equal(loaded.projection_, est.projection_)
    _assert_same_sampler(est, loaded, Q)
    # in-context conditioning after loading, too
    np.testing.assert_array_equal(
        est.sample(5, support=X[:20], random_state=1),
        loaded.sample(5, support=X[:20], random_state=1),
    )


def test_float32_model_round_trip(data, tmp_path):
    X, Q = data
    est = NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=4)).fit(X.astype(np.float32))
    loaded = _joblib(est, tmp_path)
    assert loaded.support_.dtype == np.float32
    a, b = est.sample(10, random_state=2), loaded.sample(10, random_state=2)
    assert b.dtype == np.float32
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("round_trip", ROUND_TRIPS)
def test_sampling_pipeline_round_trip(data, tmp_path, round_trip):
    X, Q = data
    pipe = make_sampling_pipeline(
        PCA(n_components=2),
        NWFlowSampler(kernel="diagonal", random_state=0, solver=SolverOptions(n_steps=4)),
    ).fit(X)
    loaded = round_trip(pipe, tmp_path)
    np.testing.assert_array_equal(
        pipe.sample(20, random_state=5), loaded.sample(20, random_state=5)
    )
    np.testing.assert_array_equal(
        pipe.sample(4, support=X[:15], random_state=6),
        loaded.sample(4, support=X[:15], random_state=6),
    )
    np.testing.assert_array_equal(
        pipe.sample_trajectories(3, random_state=7)[1],
        loaded.sample_trajectories(3, random_state=7)[1],
    )
    assert pipe.score(X[:30]) == loaded.score(X[:30])


@pytest.mark.filterwarnings("ignore::skflow.exceptions.AccuracyWarning")
@pytest.mark.parametrize("round_trip", ROUND_TRIPS)
def test_flow_projection_round_trip(data, tmp_path, round_trip):
    X, Q = data
    proj = FlowProjection(n_components=2, n_iter=5, n_tasks=2, random_state=0).fit(X)
    loaded = round_trip(proj, tmp_path)
    np.testing.assert_array_equal(proj.transform(Q), loaded.transform(Q))
    Z = proj.transform(Q)
    np.testing.assert_array_equal(proj.inverse_transform(Z), loaded.inverse_transform(Z))
    assert loaded.loss_curve_ == proj.loss_curve_
    # ... and as the kernel geometry of a sampler, itself round-tripped (loose density
    # tolerances, as above: at the default 1e-8 the density solve took over a minute)
    loose = {"density": DensityOptions(rtol=1e-2, atol=1e-2, max_error=10.0)}
    est = NWFlowSampler(
        projection=proj, random_state=0, **loose, solver=SolverOptions(n_steps=4)
    ).fit(X)
    _assert_same_sampler(est, round_trip(est, tmp_path), Q)


def test_cuda_model_loads_and_samples_on_cpu(data, tmp_path):
    """``device="cuda"`` is only a parameter: the fitted state is NumPy, so the model unpickles
    anywhere and samples on the CPU after ``set_params(device="cpu")``."""
    X, Q = data
    # fit needs no GPU (it stores NumPy arrays); this mimics a model fitted on a GPU machine
    gpu_model = NWFlowSampler(
        backend="torch", device="cuda", random_state=0, solver=SolverOptions(n_steps=4)
    )
    gpu_model.fit(X)
    assert not any(torch.is_tensor(v) for v in vars(gpu_model).values())
    loaded = _joblib(gpu_model, tmp_path)
    assert loaded.get_params()["device"] == "cuda"
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            loaded.sample(3)
    loaded.set_params(device="cpu")
    cpu_model = NWFlowSampler(
        backend="torch", device="cpu", random_state=0, solver=SolverOptions(n_steps=4)
    ).fit(X)
    np.testing.assert_array_equal(
        loaded.sample(12, random_state=1), cpu_model.sample(12, random_state=1)
    )
    np.testing.assert_array_equal(loaded.velocity(Q, 0.4), cpu_model.velocity(Q, 0.4))


@CUDA
@pytest.mark.cuda
def test_real_cuda_round_trip_to_cpu(data, tmp_path):
    X, Q = data
    est = NWFlowSampler(
        backend="torch", device="cuda", random_state=0, solver=SolverOptions(n_steps=4)
    ).fit(X)
    on_gpu = est.sample(16, random_state=2)
    loaded = _pickle(est, tmp_path)
    np.testing.assert_array_equal(loaded.sample(16, random_state=2), on_gpu)
    loaded.set_params(device="cpu")
    # same noise, same float64 field: CPU and GPU agree to rounding
    np.testing.assert_allclose(loaded.sample(16, random_state=2), on_gpu, rtol=1e-8, atol=1e-8)
