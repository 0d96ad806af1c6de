"""Kernel geometry of NWFlowSampler: diagonal / Mahalanobis kernels and projections."""

import pickle

import numpy as np
import pytest
from nw_reference import brute_force_field
from sklearn.base import clone
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.random_projection import GaussianRandomProjection
from sklearn.utils.estimator_checks import parametrize_with_checks

from skflow import KernelOptions, NWFlowSampler, SolverOptions
from skflow import field as F

TIMES = [0.0, 0.1, 0.5, 0.9, 0.99, 1.0]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 4)) * np.array([3.0, 1.0, 0.3, 0.1])
    support = rng.normal(size=(25, 4)) @ A.T + np.array([1.0, -2.0, 0.5, 0.0])
    x = rng.normal(size=(9, 4))
    return support, x


def _diag_oracle(S, reg):
    var = S.var(axis=0)
    G = np.diag(1.0 / np.sqrt(var + reg * var.mean()))
    C = np.cov(S.T, bias=True)
    return G * np.sqrt(np.trace(C) / np.trace(G.T @ G @ C))


def _maha_oracle(S, reg):
    C = np.cov(S.T, bias=True)
    evals, evecs = np.linalg.eigh(C + reg * np.trace(C) / C.shape[0] * np.eye(C.shape[0]))
    G = evecs @ np.diag(evals**-0.5) @ evecs.T
    return G * np.sqrt(np.trace(C) / np.trace(G.T @ G @ C))


@pytest.mark.parametrize(
    "kernel, oracle", [("diagonal", _diag_oracle), ("mahalanobis", _maha_oracle)]
)
def test_anisotropic_fields_match_brute_force(data, kernel, oracle):
    support, x = data
    s = NWFlowSampler(kernel=KernelOptions(kernel, reg=1e-3), sigma_min=0.05).fit(support)
    P = oracle(support, 1e-3)
    np.testing.assert_allclose(s.projection_, P, rtol=1e-10, atol=1e-12)
    for t in TIMES:
        # Query near the support so that the weights are not one-hot at t = 1.
        xq = t * support[:9] + 0.3 * x
        np.testing.assert_allclose(
            s.weights(xq, t),
            brute_force_field(xq, support, t, 0.05, projection=P)[0],
            rtol=0,
            atol=1e-10,
        )
        np.testing.assert_allclose(
            s.velocity(xq, t),
            brute_force_field(xq, support, t, 0.05, projection=P)[1],
            rtol=1e-10,
            atol=1e-10,
        )


def test_normalization_keeps_mean_support_distance(data):
    support, _ = data
    C = np.cov(support.T, bias=True)
    for kernel in ("diagonal", "mahalanobis"):
        P = NWFlowSampler(kernel=kernel).fit(support).projection_
        # tr(P^T P C) = tr(C): mean squared pairwise support distance is unchanged.
        assert np.trace(P.T @ P @ C) == pytest.approx(np.trace(C), rel=1e-12)
        # Invariant to a global rescaling of the data: only the shape is estimated.
        P10 = NWFlowSampler(kernel=kernel).fit(10.0 * support).projection_
        np.testing.assert_allclose(P10, P, rtol=1e-10)
    assert NWFlowSampler().fit(support).projection_ is None


def test_isotropic_data_gives_identity_shape():
    # A support whose covariance is exactly proportional to I: both kernels reduce to I.
    S = 2.5 * np.vstack([np.eye(3), -np.eye(3)])
    for kernel in ("diagonal", "mahalanobis"):
        np.testing.assert_allclose(NWFlowSampler(kernel=kernel).fit(S).projection_, np.eye(3))
    # A constant support has no shape: the geometry stays isotropic.
    assert NWFlowSampler(kernel="mahalanobis").fit(np.ones((4, 3))).projection_ is None


@pytest.mark.exactness
def test_projected_field_is_isotropic_field_of_projected_points(data):
    support, x = data
    P = np.random.default_rng(1).normal(size=(2, 4))
    s = NWFlowSampler(projection=P, sigma_min=0.05).fit(support)
    np.testing.assert_array_equal(s.projection_, P)
    for t in TIMES:
        xq = t * support[:9] + 0.5 * x
        # Oracle: isotropic weights of the P-transformed points, values in input space.
        np.testing.assert_allclose(
            s.velocity(xq, t),
            brute_force_field(xq, support, t, 0.05, projection=P)[1],
            rtol=1e-10,
            atol=1e-10,
        )
        # The same through the functional core's isotropic weights on projected coordinates.
        w_iso = F.nw_weights(xq @ P.T, support @ P.T, t, sigma_min=0.05)
        np.testing.assert_allclose(s.weights(xq, t), w_iso, rtol=0, atol=1e-10)
        sigma_t = 1.0 - 0.95 * t
        np.testing.assert_allclose(
            s.velocity(xq, t),
            (w_iso @ support - 0.95 * xq) / sigma_t,
            rtol=1e-10,
            atol=1e-10,
        )


@pytest.mark.parametrize(
    "transformer",
    [
        PCA(n_components=2),
        TruncatedSVD(n_components=2, random_state=0),
        GaussianRandomProjection(n_components=3, random_state=0),
        StandardScaler(),
    ],
)
def test_affine_transformers_give_their_linear_part(data, transformer):
    support, x = data
    s = NWFlowSampler(projection=transformer, sigma_min=0.01, random_state=0).fit(support)
    fitted = s.projection_transformer_
    assert fitted is not transformer  # cloned
    offset = fitted.transform(np.zeros((1, 4)))
    np.testing.assert_allclose(s.projection_, (fitted.transform(np.eye(4)) - offset).T)
    # Samples stay in input space.
    assert s.sample(5).shape == (5, 4)
    np.testing.assert_allclose(
        s.velocity(x, 0.5),
        brute_force_field(x, support, 0.5, 0.01, projection=s.projection_)[1],
        rtol=1e-9,
    )


def test_kernel_combines_with_projection(data):
    support, _ = data
    s = NWFlowSampler(projection=PCA(n_components=2), kernel="mahalanobis").fit(support)
    L = s.projection_transformer_.components_
    Z = support @ L.T
    np.testing.assert_allclose(s.projection_, _maha_oracle(Z, 0.1) @ L, rtol=1e-9, atol=1e-12)


def test_nonaffine_transformer_is_refused(data):
    support, _ = data
    with pytest.raises(ValueError, match="not affine"):
        NWFlowSampler(projection=FunctionTransformer(np.tanh)).fit(support)


@pytest.mark.parametrize(
    "params, err, match",
    [
        ({"kernel": "cosine"}, ValueError, "kernel must be one of"),
        ({"kernel": 0.1}, ValueError, "kernel must be a name or KernelOptions"),
        ({"projection": np.ones((2, 3))}, ValueError, r"shape \(k, 4\)"),
        ({"projection": np.full((2, 4), np.nan)}, ValueError, "NaN"),
        ({"projection": "pca"}, TypeError, "projection must be"),
    ],
)
def test_bad_geometry_params(data, params, err, match):
    with pytest.raises(err, match=match):
        NWFlowSampler(**params).fit(data[0])


@pytest.mark.exactness
def test_in_context_support_reuses_fitted_projection(data):
    support, x = data
    s = NWFlowSampler(kernel="diagonal", projection=PCA(n_components=2), sigma_min=0.01)
    s = s.fit(support)
    P = s.projection_.copy()
    other = support[::-1] * 2.0 + 1.0
    np.testing.assert_allclose(
        s.velocity(x, 0.7, support=other),
        brute_force_field(x, other, 0.7, 0.01, projection=P)[1],
        rtol=1e-9,
    )
    assert s.sample(3, support=other, random_state=0).shape == (3, 4)
    np.testing.assert_array_equal(s.projection_, P)


def test_score_samples_uses_the_ode_with_the_projection(data):
    support, _ = data
    X = support[:5] + 0.05
    iso = NWFlowSampler(sigma_min=0.2, solver=SolverOptions("rk4", n_steps=200)).fit(support)
    # P = I through an explicit projection takes the ODE path and matches the closed form.
    eye = NWFlowSampler(
        sigma_min=0.2, solver=SolverOptions("rk4", n_steps=200), projection=np.eye(4)
    )
    np.testing.assert_allclose(
        eye.fit(support).score_samples(X), iso.score_samples(X), rtol=1e-3, atol=1e-3
    )
    maha = NWFlowSampler(sigma_min=0.2, kernel="mahalanobis", solver=SolverOptions(n_steps=50)).fit(
        support
    )
    lp = maha.score_samples(X)
    assert lp.shape == (5,) and np.all(np.isfinite(lp))
    assert not np.allclose(lp, iso.score_samples(X))


def test_effective_sample_size_and_divergence_use_the_projection(data):
    support, x = data
    P = np.array([[1.0, 0.0, 0.0, 0.0]])
    s = NWFlowSampler(projection=P, sigma_min=0.01).fit(support)
    w = brute_force_field(x, support, 0.8, 0.01, projection=P)[0]
    np.testing.assert_allclose(s.effective_sample_size(x, 0.8), 1.0 / (w**2).sum(axis=1))
    np.testing.assert_allclose(
        s.divergence(x, 0.8), F.nw_divergence(x, support, 0.8, projection=P), rtol=1e-12
    )


def test_gridsearch_over_nested_projection_params():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5)) * np.array([3.0, 2.0, 1.0, 0.5, 0.2])
    est = NWFlowSampler(projection=PCA(), random_state=0, solver=SolverOptions(n_steps=5))
    assert "projection__n_components" in est.get_params(deep=True)
    gs = GridSearchCV(est, {"projection__n_components": [2, 4]}, cv=2).fit(X)
    # by hand: unshuffled 2-fold split, fit on one half, score (-MMD^2) on the other
    by_hand = []
    for k in (2, 4):
        folds = [(X[30:], X[:30]), (X[:30], X[30:])]
        fold_scores = [
            clone(est).set_params(projection__n_components=k).fit(train).score(test)
            for train, test in folds
        ]
        by_hand.append(np.mean(fold_scores))
    np.testing.assert_allclose(gs.cv_results_["mean_test_score"], by_hand, rtol=1e-12)
    assert by_hand[0] != by_hand[1]
    assert gs.best_params_["projection__n_components"] == (2, 4)[int(np.argmax(by_hand))]
    best_k = gs.best_params_["projection__n_components"]
    assert gs.best_estimator_.projection_.shape == (best_k, 5)


@pytest.mark.exactness
def test_pickle_and_clone_keep_the_geometry(data):
    support, _ = data
    s = NWFlowSampler(kernel="mahalanobis", projection=PCA(3), random_state=0).fit(support)
    s2 = pickle.loads(pickle.dumps(s))
    np.testing.assert_array_equal(s2.projection_, s.projection_)
    np.testing.assert_array_equal(s2.sample(4), s.sample(4))
    c = clone(s)
    assert c.projection is not s.projection and not hasattr(c, "projection_")


def test_float32_support_with_projection(data):
    support, _ = data
    s = NWFlowSampler(kernel="diagonal", random_state=0).fit(support.astype(np.float32))
    out = s.sample(4)
    assert out.dtype == np.float32
    ref = NWFlowSampler(kernel="diagonal", random_state=0).fit(support).sample(4)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


@parametrize_with_checks(
    [
        NWFlowSampler(kernel="mahalanobis", random_state=0, solver=SolverOptions(n_steps=5)),
        NWFlowSampler(kernel="diagonal", random_state=0, solver=SolverOptions(n_steps=5)),
        NWFlowSampler(
            projection=PCA(n_components=1), random_state=0, solver=SolverOptions(n_steps=5)
        ),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
