"""NWFlowSampler: sklearn conformance, the KDE terminal law, straight lines for m = 1, errors."""

import pickle

import numpy as np
import pytest
import torch
from nw_reference import brute_force_field
from scipy.spatial.distance import cdist, pdist
from sklearn.base import clone
from sklearn.neighbors import KernelDensity
from sklearn.utils.estimator_checks import parametrize_with_checks

from skflow import NWFlowSampler, SolverOptions
from skflow.field import nw_velocity
from skflow.metrics import mmd2_test
from skflow.solvers import METHODS


@parametrize_with_checks([NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=5))])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture
def support():
    rng = np.random.default_rng(0)
    centers = np.array([[-2.0, 0.0], [2.0, 1.0], [0.0, -2.0]])
    return centers[rng.integers(0, 3, 30)] + 0.5 * rng.normal(size=(30, 2))


def test_sample_shape_dtype_and_fitted_attributes(support):
    s = NWFlowSampler(random_state=0).fit(support)
    assert s.n_features_in_ == 2 and s.support_.shape == (30, 2)
    X = s.sample(7)
    assert X.shape == (7, 2) and X.dtype == np.float64
    X32 = NWFlowSampler(random_state=0).fit(support.astype(np.float32)).sample(7)
    assert X32.dtype == np.float32
    np.testing.assert_allclose(X32, X, rtol=1e-3, atol=1e-3)


def _kde_vs_flow_pvalue(support, sigma_min, kde_bandwidth, seed=0):
    flow = NWFlowSampler(sigma_min=sigma_min, solver=SolverOptions("rk4", n_steps=200)).fit(support)
    generated = flow.sample(400, random_state=seed)
    kde = KernelDensity(bandwidth=kde_bandwidth).fit(support).sample(400, random_state=seed + 1)
    # A kernel at the scale of the KDE's bumps (not the median heuristic, which sees only the
    # three clusters) gives the test power against a wrong bandwidth.
    test = mmd2_test(generated, kde, n_permutations=400, bandwidth=0.3, random_state=seed)
    return test.pvalue


def test_samples_follow_the_kde_terminal_law(support):
    """Two-sample permutation test: flow samples vs KernelDensity(sigma_min) samples.

    The threshold is the permutation null's 1% level; the same test rejects a KDE of a
    different bandwidth, so it has power to see a wrong terminal law.
    """
    assert _kde_vs_flow_pvalue(support, 0.3, 0.3) > 0.01
    assert _kde_vs_flow_pvalue(support, 0.3, 0.6) < 0.01


def test_score_samples_equals_kernel_density(support):
    X = np.random.default_rng(1).normal(size=(50, 2)) * 2
    for smin in (0.01, 0.2):
        s = NWFlowSampler(sigma_min=smin).fit(support)
        kde = KernelDensity(bandwidth=smin).fit(support)
        np.testing.assert_allclose(s.score_samples(X), kde.score_samples(X), rtol=1e-10)


def test_ode_log_density_agrees_with_closed_form(support):
    """The change-of-variables path (used for non-OT bandwidths) reproduces the KDE."""
    s = NWFlowSampler(sigma_min=0.2, solver=SolverOptions("rk4", n_steps=200)).fit(support)
    X = s.sample(20, random_state=3)
    # bandwidth=1.0 is the OT bandwidth through the change of variables (no closed form)
    ode = NWFlowSampler(bandwidth=1.0, sigma_min=0.2).fit(support)
    np.testing.assert_allclose(ode.score_samples(X), s.score_samples(X), atol=1e-4)
    scaled = NWFlowSampler(
        bandwidth=1.5, sigma_min=0.2, solver=SolverOptions("rk4", n_steps=100)
    ).fit(support)
    assert np.all(np.isfinite(scaled.score_samples(X)))


@pytest.mark.parametrize("solver", METHODS)
def test_single_support_point_gives_straight_lines(solver):
    s1 = np.array([[3.0, -1.0, 0.5]])
    s = NWFlowSampler(sigma_min=0.05, solver=SolverOptions(solver, n_steps=10), random_state=0).fit(
        s1
    )
    t, paths = s.sample_trajectories(20, n_points=11)
    x0 = paths[0]
    sigma_t = 1 - 0.95 * t
    expected = t[:, None, None] * s1[None] + sigma_t[:, None, None] * x0[None]
    np.testing.assert_allclose(paths, expected, atol=1e-6)
    np.testing.assert_allclose(paths[-1], s1 + 0.05 * x0, atol=1e-6)


@pytest.mark.exactness
def test_trajectories_end_where_sample_ends(support):
    s = NWFlowSampler(random_state=4, solver=SolverOptions(n_steps=20)).fit(support)
    t, paths = s.sample_trajectories(5)
    assert t.shape == (21,) and paths.shape == (21, 5, 2) and t[0] == 0.0 and t[-1] == 1.0
    np.testing.assert_array_equal(paths[-1], s.sample(5))


@pytest.mark.exactness
def test_in_context_support_needs_no_refit(support):
    s = NWFlowSampler(random_state=0).fit(support)
    other = support + 10.0
    X = s.sample(50, support=other)
    assert np.abs(X.mean(0) - other.mean(0)).max() < 1.5
    np.testing.assert_array_equal(s.support_, support)
    ref = NWFlowSampler(random_state=0).fit(other).sample(50)
    np.testing.assert_array_equal(X, ref)


# kernel width in x-space, t * h(t), for each kind of bandwidth
WIDTHS = {
    "ot": ("ot", lambda t, sigma_t: sigma_t),
    "scaled": (0.5, lambda t, sigma_t: 0.5 * sigma_t),
    "callable": (lambda t: 0.3 + 0.0 * t, lambda t, sigma_t: 0.3 * t),
}


@pytest.mark.parametrize("kind", list(WIDTHS))
def test_field_methods_equal_brute_force(support, kind):
    bandwidth, width = WIDTHS[kind]
    s = NWFlowSampler(bandwidth=bandwidth, sigma_min=0.05).fit(support)
    X = np.random.default_rng(0).normal(size=(4, 2))
    t = np.array([0.1, 0.3, 0.6, 1.0])
    w_ref, v_ref = brute_force_field(X, support, t, 0.05, width=width)
    np.testing.assert_allclose(s.weights(X, t), w_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.velocity(X, t), v_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(s.effective_sample_size(X, t), 1.0 / np.sum(w_ref**2, axis=1))
    # t = 0 is the limit t -> 0+: uniform weights where the x-space width t h(t) stays
    # sigma_t-sized, the point maximizing <x, s_i> where it shrinks to 0 (bounded callable h)
    if kind == "callable":
        w0 = np.eye(len(support))[np.argmax(X @ support.T, axis=1)]
    else:
        w0 = np.full((4, len(support)), 1.0 / len(support))
    np.testing.assert_allclose(s.weights(X, 0.0), w0, atol=1e-12)
    np.testing.assert_allclose(s.effective_sample_size(X, 0.0), 1.0 / np.sum(w0**2, axis=1))


@pytest.mark.parametrize("kind", list(WIDTHS))
@pytest.mark.parametrize("t", [0.2, 0.7, 0.95])
def test_divergence_is_the_autograd_trace_of_the_velocity(support, kind, t):
    """Oracle: trace of the Jacobian of ``skflow.field.nw_velocity`` (torch float64) with the
    same bandwidth; a divergence that ignored the bandwidth would be the OT one."""
    bandwidth, _ = WIDTHS[kind]
    s = NWFlowSampler(bandwidth=bandwidth, sigma_min=0.05).fit(support)
    X = np.random.default_rng(1).normal(size=(5, 2)) * 1.5
    S = torch.from_numpy(support)

    def field(z):
        return nw_velocity(z, S, t, sigma_min=0.05, bandwidth=bandwidth)

    jac = torch.autograd.functional.jacobian(field, torch.from_numpy(X))  # (n, d, n, d)
    trace = torch.stack([torch.trace(jac[i, :, i, :]) for i in range(X.shape[0])]).numpy()
    np.testing.assert_allclose(s.divergence(X, t), trace, rtol=1e-9, atol=1e-9)


@pytest.mark.exactness
def test_same_seed_same_samples_pickle_and_clone(support):
    s = NWFlowSampler(random_state=0).fit(support)
    a = s.sample(10)
    np.testing.assert_array_equal(a, s.sample(10))
    np.testing.assert_array_equal(a, s.sample(10, random_state=0))
    assert not np.array_equal(a, s.sample(10, random_state=1))
    np.testing.assert_array_equal(a, pickle.loads(pickle.dumps(s)).sample(10))
    np.testing.assert_array_equal(a, clone(s).fit(support).sample(10))


def test_torch_backend_matches_numpy(support):
    a = NWFlowSampler(random_state=0, backend="numpy").fit(support).sample(10)
    b = NWFlowSampler(random_state=0, backend="torch").fit(support).sample(10)
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.exactness
def test_score_is_negative_mmd_and_deterministic(support):
    rng = np.random.default_rng(5)
    s = NWFlowSampler(random_state=0, solver=SolverOptions(n_steps=20)).fit(support)
    near = support + 0.05 * rng.normal(size=support.shape)
    far = near + 3.0
    assert s.score(near) == s.score(near)
    assert s.score(near) > s.score(far)


@pytest.mark.exactness
def test_score_is_deterministic_without_a_random_state(support):
    """random_state=None: score draws its samples with the fixed seed SCORE_RANDOM_STATE."""
    from sklearn.decomposition import PCA

    from skflow.pipeline import make_sampling_pipeline
    from skflow.samplers._base import SCORE_RANDOM_STATE

    near = support + 0.3 * np.random.default_rng(5).normal(size=support.shape)
    y = np.repeat([0, 1], len(near) // 2)
    s = NWFlowSampler(solver=SolverOptions(n_steps=5)).fit(support)
    assert s.score(near) == s.score(near)
    assert s.score(near, y) == s.score(near, y)
    seeded = NWFlowSampler(random_state=SCORE_RANDOM_STATE, solver=SolverOptions(n_steps=5)).fit(
        support
    )
    assert s.score(near) == seeded.score(near)
    pipe = make_sampling_pipeline(PCA(2), NWFlowSampler(solver=SolverOptions(n_steps=5))).fit(
        support
    )
    assert pipe.score(near) == pipe.score(near)


def _oracle_mmd2(X, Y):
    """Unbiased Gaussian MMD^2, bandwidth the median distance of Y's rows (the reference)."""
    h = np.median(pdist(Y))

    def mean_kernel(A, B, skip_diagonal):
        K = np.exp(-cdist(A, B, "sqeuclidean") / (2 * h * h))
        if skip_diagonal:
            return (K.sum() - np.trace(K)) / (len(A) * (len(A) - 1))
        return K.mean()

    return mean_kernel(X, X, True) + mean_kernel(Y, Y, True) - 2 * mean_kernel(X, Y, False)


def test_few_shot_score_splits_each_task_by_hand(support):
    """score(X, y): per label, the first len // 2 rows (in X's order) are the support and the
    rest the reference; samples use the estimator's seed; the mean over the labels."""
    rng = np.random.default_rng(6)
    X = np.vstack([support[:9] + 0.1 * rng.normal(size=(9, 2)), rng.normal(size=(12, 2)) + 4.0])
    y = np.array(["b"] * 9 + ["a"] * 12)
    order = rng.permutation(len(X))  # interleave the tasks
    X, y = X[order], y[order]
    s = NWFlowSampler(random_state=3, solver=SolverOptions(n_steps=10)).fit(support)
    expected = []
    for label in ("a", "b"):
        rows = X[y == label]
        k = len(rows) // 2
        ref = rows[k:]
        fresh = NWFlowSampler(random_state=3, solver=SolverOptions(n_steps=10)).fit(rows[:k])
        expected.append(-_oracle_mmd2(fresh.sample(len(ref)), ref))
    assert s.score(X, y) == pytest.approx(np.mean(expected), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"sigma_min": 0.0}, "sigma_min"),
        ({"sigma_min": 1.5}, "sigma_min"),
        ({"solver": "leapfrog"}, "solver"),
        ({"bandwidth": "scott"}, "bandwidth"),
        ({"bandwidth": 0.0}, "bandwidth"),
        ({"solver": 3}, "solver"),
        ({"engine": "sparse"}, "engine"),
        ({"density": "tight"}, "density"),
        ({"backend": "jax"}, "backend"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        NWFlowSampler(**params).fit(np.ones((3, 2)))


def test_bad_inputs(support):
    s = NWFlowSampler().fit(support)
    with pytest.raises(ValueError, match="NaN"):
        NWFlowSampler().fit(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="infinity"):
        s.velocity(np.array([[0.0, np.inf]]), 0.5)
    with pytest.raises(ValueError, match="NaN"):
        s.sample(3, support=np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="0 sample"):
        NWFlowSampler().fit(np.empty((0, 2)))
    with pytest.raises(ValueError, match="0 sample"):
        s.sample(3, support=np.empty((0, 2)))
    with pytest.raises(ValueError, match="2-D array"):
        NWFlowSampler().fit(np.ones(3))
    with pytest.raises(ValueError, match="features"):
        s.velocity(np.ones((2, 3)), 0.5)
    with pytest.raises(ValueError, match="features"):
        s.sample(3, support=np.ones((4, 5)))
    with pytest.raises(ValueError, match="n_samples"):
        s.sample(0)
    with pytest.raises(TypeError, match="n_samples"):
        s.sample(2.5)
    with pytest.raises(ValueError, match="t must lie in"):
        s.velocity(np.ones((2, 2)), np.nan)
    with pytest.raises(ValueError, match=r"t must lie in .*got 1\.2\. .*time_tolerance=inf"):
        s.set_params(solver=SolverOptions(time_tolerance=1e-6)).velocity(np.ones((2, 2)), 1.2)
    with pytest.raises(ValueError, match="could not convert|numeric"):
        NWFlowSampler().fit(np.array([["a", "b"]]))


@pytest.mark.parametrize("cls", ["nw", "learned", "pipeline"])
def test_input_messages_are_short_and_in_our_words(support, cls):
    """NaN: no scikit-learn paragraph about other estimators; 1-D: the shape, not the values."""
    from sklearn.decomposition import PCA

    from skflow import LearnedFlowSampler, TrainingOptions
    from skflow.pipeline import make_sampling_pipeline

    make = {
        "nw": lambda: NWFlowSampler(solver=SolverOptions(n_steps=2)),
        "learned": lambda: LearnedFlowSampler(
            training=TrainingOptions(max_iter=0), solver=SolverOptions(n_steps=2)
        ),
        "pipeline": lambda: make_sampling_pipeline(
            PCA(2), NWFlowSampler(solver=SolverOptions(n_steps=2))
        ),
    }[cls]
    fitted = make().fit(support)
    long_1d = np.arange(1000.0)
    calls = [lambda: fitted.sample(2, support=long_1d), lambda: fitted.score(long_1d)]
    if cls != "pipeline":  # the pipeline's fit is PCA's (scikit-learn's own message)
        calls.append(lambda: make().fit(long_1d))
    for call in calls:
        with pytest.raises(ValueError, match=r"2-D array .* got shape \(1000,\)") as info:
            call()
        assert len(str(info.value)) < 200
    with_nan = support.copy()
    with_nan[0, 0] = np.nan
    calls = [lambda: fitted.sample(2, support=with_nan)]
    if cls != "pipeline":
        calls.append(lambda: make().fit(with_nan))
    for call in calls:
        with pytest.raises(ValueError, match="contains NaN") as info:
            call()
        assert "HistGradientBoosting" not in str(info.value)
        assert "impute" in str(info.value)


def test_fit_warns_once_when_sigma_min_makes_samples_copies():
    """Raw 0-16 digit pixels with the paper's plug-in sigma_min=0.01: samples lie 0.08 from a
    support point, support points about 16 apart. One MemorizationWarning names the cause and
    a fix that can always be followed; standardised digits warn too at 0.01 (memorisation
    ratio about 0.01), not at sigma_min=0.5, nor with the default "auto" or a callable
    bandwidth."""
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    from skflow.exceptions import MemorizationWarning

    X = load_digits().data[:500]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        NWFlowSampler(sigma_min=0.01).fit(X)
    memo = [w for w in caught if issubclass(w.category, MemorizationWarning)]
    assert len(memo) == 1
    message = str(memo[0].message)
    for words in ("sigma_min=0.01", "near-copies", "sigma_min='auto'"):
        assert words in message
    assert memo[0].filename == __file__  # points at the user's fit call
    Z = StandardScaler().fit_transform(X)
    with pytest.warns(MemorizationWarning, match="memorisation ratio about 0.0"):
        NWFlowSampler(sigma_min=0.01).fit(Z)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemorizationWarning)
        NWFlowSampler(sigma_min=0.5).fit(Z)
        NWFlowSampler().fit(X)
        NWFlowSampler(bandwidth=lambda t: np.full(np.shape(t), 0.5)).fit(X)
        NWFlowSampler(sigma_min=0.01).fit(X[:1])  # one point: no spacing to compare with


@pytest.mark.parametrize("S", [np.ones((10, 4)), np.full((1, 4), 3.0)], ids=["constant", "m=1"])
def test_degenerate_support_lands_on_the_point_plus_sigma_min_noise(S):
    """Decided in issue 34: a support of one row, or of identical rows, is a valid support of
    the exact flow (its KDE is one Gaussian): every sample is ``s + sigma_min * x0``."""
    x0 = np.random.RandomState(0).standard_normal((50, 4))
    flow = NWFlowSampler(sigma_min=0.05, solver=SolverOptions("rk4", n_steps=20)).fit(S)
    np.testing.assert_allclose(flow.sample(50, noise=x0), S[0] + 0.05 * x0, atol=1e-12)


def test_the_default_bandwidth_does_not_copy_and_does_not_warn():
    """``NWFlowSampler(bandwidth="ot").fit(S).sample(100)`` with every other parameter at its
    default, on half of standardised iris: new points (memorisation ratio >= 0.5 against the
    other half) and no warning; the paper's plug-in ``sigma_min=0.01`` copies and says so."""
    import warnings

    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler

    from skflow.exceptions import MemorizationWarning
    from skflow.metrics import memorization_ratio

    Z = StandardScaler().fit_transform(load_iris().data)
    order = np.random.default_rng(0).permutation(len(Z))
    S, held_out = Z[order[:75]], Z[order[75:]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        G = NWFlowSampler(bandwidth="ot", random_state=0).fit(S).sample(100)
    assert memorization_ratio(G, S, held_out) >= 0.5
    with pytest.warns(MemorizationWarning):
        plug_in = NWFlowSampler(bandwidth="ot", sigma_min=0.01, random_state=0).fit(S)
    assert memorization_ratio(plug_in.sample(100), S, held_out) < 0.1


def test_a_float32_tensor_support_is_sampled_in_float32_like_a_float32_array():
    """A float32 Torch tensor passed to fit is kept float32 (it was made float64 by the
    validation, so a user's float32 tensor sampled at float64 cost): same support, same
    samples as the float32 NumPy array."""
    S = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    from_tensor = NWFlowSampler(random_state=0).fit(torch.from_numpy(S))
    from_array = NWFlowSampler(random_state=0).fit(S)
    assert from_tensor.support_.dtype == np.float32
    np.testing.assert_array_equal(from_tensor.sample(5), from_array.sample(5))
