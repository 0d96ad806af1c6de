"""FlowProjection: a linear projection learned by NW flow matching."""

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA
from sklearn.utils.estimator_checks import parametrize_with_checks

from skflow import NWFlowSampler, SolverOptions
from skflow.field import nw_velocity
from skflow.paths import OTPath
from skflow.pipeline import make_sampling_pipeline
from skflow.projection import FlowProjection, _batched_nw_velocity, nw_flow_matching_loss

# -- a task family whose informative directions have the lowest variance --------------------
# K clusters sit at the vertices of a regular simplex (unit variance along each of its K - 1
# axes); N_NOISE isotropic noise dimensions have variance NOISE**2 = 2.25 > 1, so PCA keeps
# noise. One direction of the simplex space separates all clusters and so identifies all
# K - 1 informative coordinates of a point: a nonlinear gain that PCA cannot see.
K, N_NOISE, NOISE, WITHIN = 6, 2, 1.5, 0.05
_BASIS, _ = np.linalg.qr((np.eye(K) - 1.0 / K)[:, : K - 1])
VERTICES = _BASIS * np.sqrt(K)  # (K, K - 1), V^T V / K = I


def _task(n, rng):
    labels = rng.integers(0, K, n)
    informative = VERTICES[labels] + WITHIN * rng.normal(size=(n, K - 1))
    return np.hstack([NOISE * rng.normal(size=(n, N_NOISE)), informative])


def _tasks(n_tasks, n_rows, seed):
    rng = np.random.default_rng(seed)
    X = np.vstack([_task(n_rows, rng) for _ in range(n_tasks)])
    return X, np.repeat(np.arange(n_tasks), n_rows)


def _held_out_loss(P, sigma_min):
    rng = np.random.default_rng(1)
    losses = []
    for j in range(10):
        T = _task(64, rng)
        losses.append(
            nw_flow_matching_loss(
                T[:32], T[32:], P, sigma_min=sigma_min, n_draws=16, random_state=j
            )
        )
    return float(np.mean(losses))


def test_learned_projection_beats_pca_where_variance_is_uninformative():
    X, y = _tasks(16, 64, seed=0)
    sigma_min = 0.05
    pca = PCA(n_components=1).fit(X)
    # PCA keeps a noise direction (the highest-variance one).
    assert np.sum(pca.components_[0, :N_NOISE] ** 2) > 0.9
    # The optimisation is chaotic (see FlowProjection's Notes): the run from random_state=0
    # switches between the informative subspace and a noise direction when X is perturbed at
    # the level of rounding error, as another CPU or BLAS does. The run from random_state=1
    # lands in the informative subspace under relative perturbations from 1e-14 to 1e-11.
    proj = FlowProjection(n_components=1, sigma_min=sigma_min, n_iter=200, random_state=1).fit(X, y)
    loss_pca = _held_out_loss(pca.components_, sigma_min)
    loss_flow = _held_out_loss(proj.components_, sigma_min)
    assert loss_flow < 0.8 * loss_pca
    # ... by moving the projection into the informative (low-variance) subspace.
    P = proj.components_[0]
    assert np.sum(P[N_NOISE:] ** 2) / np.sum(P**2) > 0.9
    # The training loss went down.
    assert np.mean(proj.loss_curve_[-20:]) < np.mean(proj.loss_curve_[:20])


def test_attributes_transform_and_pseudo_inverse():
    X, _ = _tasks(1, 80, seed=2)
    proj = FlowProjection(n_components=2, n_iter=5, random_state=0).fit(X)
    assert proj.components_.shape == (2, X.shape[1])
    np.testing.assert_allclose(proj.mean_, X.mean(axis=0))
    assert len(proj.loss_curve_) == 5 and proj.n_iter_ == 5 and proj.n_features_in_ == 7
    Z = proj.transform(X)
    np.testing.assert_allclose(Z, (X - proj.mean_) @ proj.components_.T)
    back = proj.inverse_transform(Z)
    # Minimum-norm preimage: mean_ + pinv(P) Z, which projects back to Z.
    np.testing.assert_allclose(back, Z @ np.linalg.pinv(proj.components_).T + proj.mean_)
    np.testing.assert_allclose(proj.transform(back), Z, atol=1e-10)
    assert list(proj.get_feature_names_out()) == ["flowprojection0", "flowprojection1"]
    Z32 = proj.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z, rtol=1e-4, atol=1e-4)


def test_initialized_from_pca():
    X, _ = _tasks(1, 80, seed=3)
    proj = FlowProjection(n_components=2, n_iter=1, learning_rate=1e-12).fit(X)
    pca = PCA(n_components=2, svd_solver="full").fit(X)
    np.testing.assert_allclose(proj.components_, pca.components_, atol=1e-9)


@pytest.mark.exactness
def test_seeded_and_leaves_global_generators_alone():
    X, y = _tasks(4, 30, seed=4)
    torch_state, np_state = torch.random.get_rng_state(), np.random.get_state()  # noqa: NPY002
    a = FlowProjection(n_iter=5, random_state=7).fit(X, y).components_
    b = FlowProjection(n_iter=5, random_state=7).fit(X, y).components_
    np.testing.assert_array_equal(a, b)
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert np.random.get_state()[1].tolist() == np_state[1].tolist()  # noqa: NPY002
    c = FlowProjection(n_iter=5, random_state=8).fit(X, y).components_
    assert not np.allclose(a, c)


@pytest.mark.exactness
def test_same_components_on_any_thread_count():
    X, y = _tasks(4, 40, seed=9)
    saved = torch.get_num_threads()
    fits = []
    try:
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            fits.append(FlowProjection(n_iter=20, random_state=3).fit(X, y).components_)
            assert torch.get_num_threads() == n_threads  # the caller's setting is restored
    finally:
        torch.set_num_threads(saved)
    np.testing.assert_array_equal(fits[0], fits[1])


def test_optimisation_runs_on_one_thread(monkeypatch):
    # Equal results on this machine's thread counts do not prove that no reduction splits by
    # threads elsewhere; the optimisation running single-threaded does.
    from threadpoolctl import threadpool_info, threadpool_limits

    import skflow.projection as projection

    seen = []

    def recording(*args):
        seen.append((torch.get_num_threads(), max(i["num_threads"] for i in threadpool_info())))
        return _batched_nw_velocity(*args)

    monkeypatch.setattr(projection, "_batched_nw_velocity", recording)
    X, _ = _tasks(1, 40, seed=10)
    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with threadpool_limits(limits=2):
            FlowProjection(n_iter=3, random_state=0).fit(X)
    finally:
        torch.set_num_threads(saved)
    assert seen == [(1, 1)] * 3


def test_field_is_differentiable_in_the_projection():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, generator=g, dtype=torch.float64)
    S = torch.randn(5, 3, generator=g, dtype=torch.float64)
    t = torch.rand(6, generator=g, dtype=torch.float64)
    P = torch.randn(2, 3, generator=g, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda p: nw_velocity(x, S, t, projection=p), (P,))
    # The batched training field is the functional field, task by task.
    xb, Sb = x.reshape(2, 3, 3), torch.randn(2, 5, 3, generator=g, dtype=torch.float64)
    tb = torch.tensor([[0.0, 0.5, 1.0], [0.2, 0.9, 0.99]], dtype=torch.float64)
    vb = _batched_nw_velocity(xb, Sb, tb, P, OTPath(0.01))  # the fit's path object
    for b in range(2):
        torch.testing.assert_close(
            vb[b], nw_velocity(xb[b], Sb[b], tb[b], projection=P), rtol=1e-10, atol=1e-10
        )


def test_flow_matching_loss_oracle_and_determinism():
    # One support point equal to the query: the NW field is exact, so the loss is 0.
    s = np.array([[1.0, -2.0, 0.5]])
    assert nw_flow_matching_loss(s, s, random_state=0) == pytest.approx(0.0, abs=1e-18)
    rng = np.random.default_rng(0)
    S, Q = rng.normal(size=(20, 3)), rng.normal(size=(10, 3))
    a = nw_flow_matching_loss(S, Q, np.eye(3), random_state=1)
    assert a == nw_flow_matching_loss(S, Q, random_state=1)  # P = I is the isotropic field
    with pytest.raises(ValueError, match="features"):
        nw_flow_matching_loss(S, Q[:, :2])


def test_usable_as_sampler_geometry_and_in_a_pipeline():
    X, _ = _tasks(1, 60, seed=5)
    s = NWFlowSampler(
        projection=FlowProjection(n_iter=3, random_state=0), solver=SolverOptions(n_steps=5)
    )
    s.fit(X)
    np.testing.assert_allclose(s.projection_, s.projection_transformer_.components_, atol=1e-12)
    assert s.sample(4, random_state=0).shape == (4, 7)
    assert "projection__n_components" in s.get_params(deep=True)
    pipe = make_sampling_pipeline(
        FlowProjection(n_components=3, n_iter=3, random_state=0),
        NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=5)),
    ).fit(X)
    assert pipe.sample(4).shape == (4, 7)


@pytest.mark.parametrize(
    "params, err, match",
    [
        ({"n_components": 0}, ValueError, "n_components"),
        ({"n_components": 8}, ValueError, "n_components=8"),
        ({"n_iter": 1.5}, TypeError, "n_iter"),
        ({"learning_rate": -1.0}, ValueError, "learning_rate"),
        ({"sigma_min": 1.5}, ValueError, "sigma_min"),
        ({"support_size": 80}, ValueError, "at least 81 rows"),
        ({"device": "tpu"}, ValueError, "device"),
    ],
)
def test_bad_params(params, err, match):
    X, _ = _tasks(1, 60, seed=6)
    with pytest.raises(err, match=match):
        FlowProjection(n_iter=2, **params).fit(X)


def test_task_labels_are_validated():
    X, y = _tasks(3, 10, seed=7)
    with pytest.raises(ValueError, match="one entry per row"):
        FlowProjection(n_iter=2).fit(X, y[:-1])
    y_small = y.copy()
    y_small[0] = 99  # a task with a single row cannot be split
    with pytest.raises(ValueError, match="n_samples = 1"):
        FlowProjection(n_iter=2).fit(X, y_small)


@parametrize_with_checks([FlowProjection(n_components=1, n_iter=3, n_tasks=2, random_state=0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)
