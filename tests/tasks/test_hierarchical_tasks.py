"""HierarchicalTasks: draws, and the exact Bayes predictive against independent oracles."""

import numpy as np
import pytest
from scipy import stats

from skflow.tasks import HierarchicalTasks

T3 = np.array([[4.0, 1.0, 0.5], [1.0, 2.0, -0.3], [0.5, -0.3, 1.0]])
W3 = np.array([[1.0, 0.4, 0.0], [0.4, 0.5, 0.1], [0.0, 0.1, 0.2]])
MU3 = np.array([1.0, -2.0, 0.5])


def _joint_conditioning(support, mu0, T, W):
    """Predictive of x_new given the rows by conditioning the joint Gaussian of all rows.

    The rows ``s_1..s_m, x_new`` share ``mu``: jointly Gaussian with mean ``mu0`` each,
    ``Cov(s_i, s_j) = T + [i == j] W``. A second route to the closed form (no posterior of mu).
    """
    m, d = support.shape
    K = np.kron(np.ones((m + 1, m + 1)), T) + np.kron(np.eye(m + 1), W)
    Kss, Kxs, Kxx = K[: m * d, : m * d], K[m * d :, : m * d], K[m * d :, m * d :]
    resid = (support - mu0).ravel()
    mean = mu0 + Kxs @ np.linalg.solve(Kss, resid)
    cov = Kxx - Kxs @ np.linalg.solve(Kss, Kxs.T)
    return mean, cov


@pytest.mark.parametrize("m", [1, 4, 20])
def test_gaussian_predictive_equals_joint_conditioning(m):
    tasks = HierarchicalTasks(3, prior_mean=MU3, prior_cov=T3, within_cov=W3)
    S, _ = tasks.sample_task(m, 0, random_state=m)
    mean, cov = tasks.predictive_moments(S)
    ref_mean, ref_cov = _joint_conditioning(S, MU3, T3, W3)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(cov, ref_cov, rtol=1e-10, atol=1e-10)


def _grid_posterior(support, mu0, tau2, w, within, df):
    """1-D posterior of the class mean on a fine grid (brute force)."""
    grid = np.linspace(mu0 - 12 * np.sqrt(tau2), mu0 + 12 * np.sqrt(tau2), 40001)
    logp = stats.norm.logpdf(grid, mu0, np.sqrt(tau2))
    resid = support[None, :] - grid[:, None]
    if within == "gaussian":
        logp += stats.norm.logpdf(resid, 0.0, np.sqrt(w)).sum(axis=1)
    else:
        logp += stats.t.logpdf(resid / np.sqrt(w), df).sum(axis=1)
    p = np.exp(logp - logp.max())
    return grid, p / p.sum()


def test_gaussian_predictive_matches_grid_posterior_1d():
    tasks = HierarchicalTasks(1, prior_mean=0.5, prior_cov=3.0, within_cov=0.7)
    S = np.array([[1.2], [2.5], [0.3], [1.9], [2.2]])
    grid, p = _grid_posterior(S[:, 0], 0.5, 3.0, 0.7, "gaussian", None)
    post_mean = np.sum(p * grid)
    post_var = np.sum(p * (grid - post_mean) ** 2)
    mean, cov = tasks.predictive_moments(S)
    np.testing.assert_allclose(mean, [post_mean], rtol=1e-8)
    np.testing.assert_allclose(cov, [[post_var + 0.7]], rtol=1e-6)


def test_student_t_gibbs_matches_grid_predictive_cdf_1d():
    """The Gibbs draws' CDF equals the grid predictive (a t-mixture over the grid posterior)."""
    df, w = 4.0, 0.5
    tasks = HierarchicalTasks(
        1, prior_mean=0.0, prior_cov=4.0, within_cov=w, within="student_t", df=df
    )
    S = np.array([[2.0], [2.4], [1.1], [6.0], [1.8], [2.9]])  # one outlier: not Gaussian
    grid, p = _grid_posterior(S[:, 0], 0.0, 4.0, w, "student_t", df)
    X = tasks.sample_predictive(40000, S, random_state=0, n_burnin=60)[:, 0]
    for x in (0.0, 1.0, 1.8, 2.3, 3.0, 4.5):
        exact = np.sum(p * stats.t.cdf((x - grid) / np.sqrt(w), df))
        assert abs(np.mean(X <= x) - exact) < 0.01, x  # binomial sd <= 0.0025
    # the Gaussian closed form (same W) would put the mean elsewhere: the test can tell
    gauss = HierarchicalTasks(1, prior_cov=4.0, within_cov=w * df / (df - 2)).predictive_moments(S)
    assert abs(gauss[0][0] - np.sum(p * grid)) > 0.1


def test_student_t_large_df_reduces_to_gaussian_closed_form():
    t_tasks = HierarchicalTasks(
        3, prior_mean=MU3, prior_cov=T3, within_cov=W3, within="student_t", df=1e7
    )
    g_tasks = HierarchicalTasks(3, prior_mean=MU3, prior_cov=T3, within_cov=W3)
    S, _ = g_tasks.sample_task(5, 0, random_state=1)
    X = t_tasks.sample_predictive(30000, S, random_state=0, n_burnin=20)
    mean, cov = g_tasks.predictive_moments(S)
    np.testing.assert_allclose(X.mean(0), mean, atol=0.03)
    np.testing.assert_allclose(np.cov(X.T), cov, atol=0.06)


def test_gaussian_sample_predictive_moments_and_batch():
    tasks = HierarchicalTasks(3, prior_mean=MU3, prior_cov=T3, within_cov=W3)
    S, _ = tasks.sample_tasks(2, 6, 0, random_state=3)
    X = tasks.sample_predictive(40000, S, random_state=0)
    mean, cov = tasks.predictive_moments(S)
    assert X.shape == (2, 40000, 3)
    for b in range(2):
        np.testing.assert_allclose(X[b].mean(0), mean[b], atol=0.04)
        np.testing.assert_allclose(np.cov(X[b].T), cov[b], atol=0.08)
    one = tasks.sample_predictive(5, S[0], random_state=0)
    assert one.shape == (5, 3)


@pytest.mark.parametrize("within", ["gaussian", "student_t"])
def test_draws_have_the_family_moments(within):
    tasks = HierarchicalTasks(3, prior_mean=MU3, prior_cov=T3, within_cov=W3, within=within, df=6.0)
    S, Q, means = tasks.sample_tasks(4000, 1, 50, random_state=0, return_means=True)
    np.testing.assert_allclose(means.mean(0), MU3, atol=0.1)
    np.testing.assert_allclose(np.cov(means.T), T3, atol=0.25)
    resid = (Q - means[:, None, :]).reshape(-1, 3)
    np.testing.assert_allclose(np.cov(resid.T), tasks.within_covariance(), rtol=0.06, atol=0.01)
    np.testing.assert_allclose(resid.mean(0), 0.0, atol=0.01)


@pytest.mark.exactness
@pytest.mark.parametrize("within", ["gaussian", "student_t"])
def test_sample_rows_are_fresh_rows_of_the_same_classes(within):
    """sample_rows around the means of sample_tasks has the law of that call's query rows:
    the same within-class moments and, for Student-t rows, the heavy tails of a t (excess
    kurtosis 6 / (df - 4) = 1 at df = 10; 0 for Gaussian rows)."""
    tasks = HierarchicalTasks(3, prior_mean=MU3, prior_cov=T3, within_cov=W3, within=within, df=10)
    _, Q, means = tasks.sample_tasks(2000, 1, 40, random_state=0, return_means=True)
    rows = tasks.sample_rows(means, 40, random_state=1)
    assert rows.shape == Q.shape
    resid_q = (Q - means[:, None, :]).reshape(-1, 3)
    resid_r = (rows - means[:, None, :]).reshape(-1, 3)
    np.testing.assert_allclose(resid_r.mean(0), 0.0, atol=0.01)
    np.testing.assert_allclose(np.cov(resid_r.T), tasks.within_covariance(), rtol=0.05, atol=0.01)
    excess = 1.0 if within == "student_t" else 0.0
    np.testing.assert_allclose(stats.kurtosis(resid_q, axis=0), excess, atol=0.25)
    np.testing.assert_allclose(stats.kurtosis(resid_r, axis=0), excess, atol=0.25)
    same = tasks.sample_rows(means[:2], 5, random_state=3)
    np.testing.assert_array_equal(same, tasks.sample_rows(means[:2], 5, random_state=3))
    with pytest.raises(ValueError, match="means must have shape"):
        tasks.sample_rows(means[0], 5)


@pytest.mark.exactness
def test_determinism_and_interface():
    tasks = HierarchicalTasks(2, within="student_t")
    a = tasks.sample_tasks(3, 4, 5, random_state=7)
    b = tasks.sample_tasks(3, 4, 5, random_state=7)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    s, q = tasks.sample_task(4, 5, random_state=7)
    s1, q1 = tasks.sample_tasks(1, 4, 5, random_state=7)
    np.testing.assert_array_equal(s, s1[0])
    np.testing.assert_array_equal(q, q1[0])
    p1 = tasks.sample_predictive(6, a[0], random_state=2, n_burnin=5)
    p2 = tasks.sample_predictive(6, a[0], random_state=2, n_burnin=5)
    np.testing.assert_array_equal(p1, p2)
    X, y = tasks.make_classes(5, 8, random_state=0)
    assert X.shape == (40, 2) and np.array_equal(np.bincount(y), [8] * 5)
    assert "HierarchicalTasks(n_features=2" in repr(tasks)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prior_cov": -1.0},
        {"within_cov": np.array([[1.0, 2.0], [2.0, 1.0]])},  # not positive definite
        {"within_cov": np.array([[1.0, 0.1], [0.0, 1.0]])},  # not symmetric
        {"within_cov": np.ones(3)},
        {"prior_mean": [0.0, np.nan]},
        {"within": "laplace"},
        {"df": 2.0},
    ],
)
def test_bad_parameters_raise(kwargs):
    with pytest.raises(ValueError):
        HierarchicalTasks(2, **kwargs).sample_tasks(1, 2, 2, random_state=0)


def test_bad_support_and_closed_form_only_for_gaussian():
    tasks = HierarchicalTasks(2)
    with pytest.raises(ValueError, match="support must have shape"):
        tasks.predictive_moments(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="NaN"):
        tasks.sample_predictive(3, np.full((4, 2), np.nan))
    with pytest.raises(ValueError, match="student_t"):
        HierarchicalTasks(2, within="student_t").predictive_moments(np.zeros((4, 2)))
