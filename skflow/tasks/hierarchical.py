"""A hierarchical family whose Bayes-optimal few-shot answer is known: the ceiling of a sampler.

Every task is a *class*: its mean is drawn from a shared Gaussian prior and its rows from a
shared within-class law around that mean. A support of ``m`` rows of a new class then has an
exact Bayes predictive law (what the next row of that class looks like, given the support and
the family): the best any few-shot generator can do, the number a learned sampler is compared
with.
"""

import numbers

import numpy as np

from .._validation import InvalidParameterError, as_generator, check_choice, check_int, check_real
from ._base import SyntheticTasks
from ._device import t_standard_gamma

__all__ = ["HierarchicalTasks"]

_WITHIN = ("gaussian", "student_t")


def _check_matrix(value, d, name):
    """A ``(d, d)`` symmetric positive-definite float64 matrix from a float, a (d,) or a (d, d)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = check_real(value, name, low=0.0, low_open=True)
        return v * np.eye(d)
    a = np.asarray(value, dtype=np.float64)
    if a.shape == (d,):
        a = np.diag(a)
    if a.shape != (d, d) or not np.all(np.isfinite(a)):
        raise InvalidParameterError(
            f"{name} must be a positive float, a ({d},) vector of variances or a ({d}, {d}) "
            f"matrix, got shape {a.shape}."
        )
    if not np.allclose(a, a.T, rtol=1e-10, atol=1e-12):
        raise InvalidParameterError(f"{name} must be symmetric.")
    try:
        np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise InvalidParameterError(f"{name} must be positive definite.") from None
    return 0.5 * (a + a.T)


def _check_vector(value, d, name):
    """A ``(d,)`` float64 vector from a float (repeated) or a (d,) array."""
    a = np.asarray(value, dtype=np.float64)
    if a.ndim == 0:
        a = np.full(d, float(a))
    if a.shape != (d,) or not np.all(np.isfinite(a)):
        raise InvalidParameterError(f"{name} must be a float or a finite ({d},) vector.")
    return a


def _check_support(support, d):
    """``(support (B, m, d) float64, batched)`` from an (m, d) or (B, m, d) array."""
    S = np.asarray(support, dtype=np.float64)
    batched = S.ndim == 3
    if not batched:
        S = S[None]
    if S.ndim != 3 or S.shape[-1] != d or S.shape[1] < 1:
        raise ValueError(
            f"support must have shape (m, {d}) or (B, m, {d}) with m >= 1, got {np.shape(support)}."
        )
    if not np.all(np.isfinite(S)):
        raise ValueError("support contains NaN or infinity.")
    return S, batched


class HierarchicalTasks(SyntheticTasks):
    """Classes with a shared Gaussian prior on their means, and their exact Bayes predictive.

    A task (a class ``c``) draws its mean ``mu_c ~ N(prior_mean, prior_cov)`` and then iid
    rows ``x | c = mu_c + e`` with ``e`` from the within-class law:

    * ``within="gaussian"``: ``e ~ N(0, W)``, ``W = within_cov``;
    * ``within="student_t"``: ``e`` multivariate Student-t with ``df`` degrees of freedom and
      scale matrix ``W`` (``e = W^{1/2} z / sqrt(g)``, ``z ~ N(0, I)``,
      ``g ~ Gamma(df/2, rate=df/2)``), covariance ``df / (df - 2) W``: heavy tails, and a
      Bayes predictive with no closed form.

    The **Bayes predictive** of a support ``S`` of ``m`` rows of a new class is the law of a
    new row of that class given ``S``. In the Gaussian case it is
    ``N(mu_m, W + Sigma_m)`` with ``Sigma_m = (T^{-1} + m W^{-1})^{-1}`` and
    ``mu_m = Sigma_m (T^{-1} mu_0 + W^{-1} sum_i s_i)`` (``T = prior_cov``, ``mu_0 =
    prior_mean``), :meth:`predictive_moments`. :meth:`sample_predictive` draws from it exactly
    (Gaussian case) or exactly up to Markov chain Monte Carlo (Student-t case: a Gibbs sampler
    on the scale-mixture representation, see its Notes).

    Parameters
    ----------
    n_features : int >= 1, default=2
        Dimension ``d`` of the rows.
    prior_mean : float or array-like of shape (d,), default=0.0
        Mean ``mu_0`` of the class means.
    prior_cov : float, array-like of shape (d,) or (d, d), default=4.0
        Covariance ``T`` of the class means (a float is ``T = prior_cov * I``, a vector the
        diagonal); symmetric positive definite.
    within_cov : float, array-like of shape (d,) or (d, d), default=1.0
        The within-class covariance ``W`` (Gaussian) or scale matrix (Student-t).
    within : {"gaussian", "student_t"}, default="gaussian"
        The within-class law.
    df : float > 2, default=5.0
        Degrees of freedom of the Student-t law (unused for ``"gaussian"``).

    Attributes
    ----------
    n_features : int
        Dimension of the rows.

    Notes
    -----
    Held-out tasks are free: every call of ``sample_tasks`` draws new class means, so the
    classes of :meth:`make_classes` (a labelled training set for ``fit(X, y)``) and the tasks
    drawn for evaluation share only the family.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import HierarchicalTasks
    >>> tasks = HierarchicalTasks(n_features=3, prior_cov=4.0, within_cov=[1.0, 0.5, 0.2])
    >>> S, Q = tasks.sample_tasks(4, 5, 100, random_state=0)
    >>> S.shape, Q.shape
    ((4, 5, 3), (4, 100, 3))
    >>> X, y = tasks.make_classes(10, 30, random_state=0)   # 10 training classes
    >>> X.shape, len(np.unique(y))
    ((300, 3), 10)
    >>> mean, cov = tasks.predictive_moments(S)              # exact Bayes predictive
    >>> mean.shape, cov.shape
    ((4, 3), (4, 3, 3))
    >>> tasks.sample_predictive(7, S, random_state=0).shape
    (4, 7, 3)
    """

    _param_names = ("n_features", "prior_mean", "prior_cov", "within_cov", "within", "df")

    def __init__(
        self,
        n_features=2,
        *,
        prior_mean=0.0,
        prior_cov=4.0,
        within_cov=1.0,
        within="gaussian",
        df=5.0,
    ):
        self.n_features = n_features
        self.prior_mean = prior_mean
        self.prior_cov = prior_cov
        self.within_cov = within_cov
        self.within = within
        self.df = df

    def _validate(self):
        d = check_int(self.n_features, "n_features")
        mu0 = _check_vector(self.prior_mean, d, "prior_mean")
        T = _check_matrix(self.prior_cov, d, "prior_cov")
        W = _check_matrix(self.within_cov, d, "within_cov")
        within = check_choice(self.within, "within", _WITHIN)
        df = check_real(self.df, "df", low=2.0, low_open=True)
        return d, mu0, T, W, within, df

    @staticmethod
    def _within_noise(rng, B, n, d, W, within, df):
        """Rows around a zero class mean, (B, n, d): Gaussian or Student-t with scale W."""
        e = rng.standard_normal((B, n, d)) @ np.linalg.cholesky(W).T
        if within == "student_t":
            e /= np.sqrt(rng.gamma(df / 2.0, 2.0 / df, size=(B, n, 1)))
        return e

    @classmethod
    def _draw(cls, rng, B, n, d, mu0, T, W, within, df):
        means = mu0 + rng.standard_normal((B, d)) @ np.linalg.cholesky(T).T
        return means[:, None, :] + cls._within_noise(rng, B, n, d, W, within, df), means

    @staticmethod
    def _within_noise_torch(gen, B, n, d, W, within, df, device, dtype):
        """:meth:`_within_noise` in Torch: rows around a zero class mean, (B, n, d)."""
        import torch

        L = torch.as_tensor(np.linalg.cholesky(W).T, device=device, dtype=dtype)
        e = torch.randn((B, n, d), generator=gen, device=device, dtype=dtype) @ L
        if within == "student_t":
            g = t_standard_gamma(gen, df / 2.0, (B, n, 1), device, dtype) * (2.0 / df)
            e = e / torch.sqrt(g)
        return e

    @classmethod
    def _draw_torch(cls, gen, B, n, d, mu0, T, W, within, df, *, device, dtype):
        """The law of :meth:`_draw` in Torch: rows (B, n, d) and the class means (B, d)."""
        import torch

        LT = torch.as_tensor(np.linalg.cholesky(T).T, device=device, dtype=dtype)
        z = torch.randn((B, d), generator=gen, device=device, dtype=dtype)
        means = torch.as_tensor(mu0, device=device, dtype=dtype) + z @ LT
        e = cls._within_noise_torch(gen, B, n, d, W, within, df, device, dtype)
        return means[:, None, :] + e, means

    def sample_rows(self, means, n_samples, random_state=None):
        """New rows of known classes: the within-class law around each of ``means``.

        With the means returned by ``sample_tasks(..., return_means=True)`` these are fresh
        rows of the same classes: a perfect generator, whose MMD² to a task's query rows is the
        estimator's noise floor.

        Parameters
        ----------
        means : array-like of shape (n_classes, n_features)
        n_samples : int >= 1
            Rows per class.
        random_state : None, int, RandomState or Generator, default=None

        Returns
        -------
        rows : ndarray of shape (n_classes, n_samples, n_features), float64

        Examples
        --------
        >>> tasks = HierarchicalTasks(2, within_cov=0.01)
        >>> rows = tasks.sample_rows([[5.0, 0.0]], 1000, random_state=0)
        >>> rows.shape, bool(abs(rows.mean() - 2.5) < 0.01)
        ((1, 1000, 2), True)
        """
        d, _, _, W, within, df = self._validate()
        M = np.asarray(means, dtype=np.float64)
        if M.ndim != 2:
            raise ValueError(f"means must have shape (n_classes, {d}), got {M.shape}.")
        means = _check_support(M[:, None, :], d)[0][:, 0]
        n = check_int(n_samples, "n_samples")
        rng = as_generator(random_state)
        return means[:, None, :] + self._within_noise(rng, means.shape[0], n, d, W, within, df)

    def sample_tasks(
        self, n_tasks, n_support, n_query, random_state=None, *, return_means=False,
        device=None, dtype=None,
    ):  # fmt: skip
        """Draw a batch of independent classes (new class means every call).

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Number of support rows per task.
        n_query : int >= 0
            Number of query rows per task.
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness.
        return_means : bool, default=False
            Also return the class means (the same draws either way).
        device : None, str or torch.device, default=None
            None: NumPy arrays (float64). A device: the same law drawn in Torch there (a
            local :class:`torch.Generator` seeded by ``random_state``), tensors throughout.
        dtype : torch.dtype, default=None
            Floating dtype of the tensors (``torch.float32`` when None).

        Returns
        -------
        supports : ndarray or tensor of shape (n_tasks, n_support, n_features)
        queries : ndarray or tensor of shape (n_tasks, n_query, n_features)
        means : ndarray or tensor of shape (n_tasks, n_features), only if ``return_means``

        Examples
        --------
        >>> tasks = HierarchicalTasks(2, within="student_t")
        >>> S, Q = tasks.sample_tasks(3, 4, 5, random_state=0, device="cpu")
        >>> tuple(S.shape), tuple(Q.shape), S.dtype
        ((3, 4, 2), (3, 5, 2), torch.float32)
        """
        S, Q, means = self._sample(n_tasks, n_support, n_query, random_state, device, dtype)
        return (S, Q, means) if return_means else (S, Q)

    def make_classes(self, n_classes, n_per_class, random_state=None):
        """A labelled data set of ``n_classes`` classes of the family (for ``fit(X, y)``).

        Parameters
        ----------
        n_classes : int >= 1
            Number of classes.
        n_per_class : int >= 1
            Rows per class.
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness.

        Returns
        -------
        X : ndarray of shape (n_classes * n_per_class, n_features), float64
            Rows, class by class.
        y : ndarray of shape (n_classes * n_per_class,), int64
            Class labels ``0 .. n_classes - 1``.
        """
        n_per_class = check_int(n_per_class, "n_per_class")
        X, _ = self.sample_tasks(n_classes, n_per_class, 0, random_state=random_state)
        y = np.repeat(np.arange(X.shape[0], dtype=np.int64), n_per_class)
        return X.reshape(-1, X.shape[-1]), y

    def within_covariance(self):
        """Covariance of a row around its class mean: ``W``, or ``df / (df - 2) W`` (Student-t).

        Returns
        -------
        cov : ndarray of shape (n_features, n_features)
        """
        _, _, _, W, within, df = self._validate()
        return W * (df / (df - 2.0)) if within == "student_t" else W

    def posterior_moments(self, support):
        """Gaussian case: the posterior ``N(mu_m, Sigma_m)`` of the class mean given the support.

        Parameters
        ----------
        support : array-like of shape (m, n_features) or (B, m, n_features)

        Returns
        -------
        mean : ndarray of shape (n_features,) or (B, n_features)
            ``mu_m = Sigma_m (T^{-1} mu_0 + W^{-1} sum_i s_i)``.
        cov : ndarray of shape (n_features, n_features)
            ``Sigma_m = (T^{-1} + m W^{-1})^{-1}`` (the same for every support of size m).
        """
        d, mu0, T, W, within, _ = self._validate()
        if within != "gaussian":
            raise ValueError(
                "posterior_moments is the closed form of the Gaussian family; with "
                "within='student_t' use sample_predictive (Gibbs sampling)."
            )
        S, batched = _check_support(support, d)
        Ti, Wi = np.linalg.inv(T), np.linalg.inv(W)
        cov = np.linalg.inv(Ti + S.shape[1] * Wi)
        mean = (Ti @ mu0 + S.sum(axis=1) @ Wi) @ cov  # cov, Ti, Wi symmetric
        return (mean if batched else mean[0]), 0.5 * (cov + cov.T)

    def predictive_moments(self, support):
        """Gaussian case: moments of the exact Bayes predictive ``N(mu_m, W + Sigma_m)``.

        Parameters
        ----------
        support : array-like of shape (m, n_features) or (B, m, n_features)

        Returns
        -------
        mean : ndarray of shape (n_features,) or (B, n_features)
        cov : ndarray of shape (n_features, n_features) or (B, n_features, n_features)
        """
        mean, post = self.posterior_moments(support)
        cov = self.within_covariance() + post
        if mean.ndim == 2:
            cov = np.broadcast_to(cov, (mean.shape[0], *cov.shape)).copy()
        return mean, cov

    def sample_predictive(self, n_samples, support, random_state=None, *, n_burnin=200):
        """Draw from the exact Bayes predictive law of a new row given the support.

        Parameters
        ----------
        n_samples : int >= 1
            Draws per support.
        support : array-like of shape (m, n_features) or (B, m, n_features)
            Rows of one new class (or of ``B`` classes).
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness.
        n_burnin : int >= 1, default=200
            Gibbs sweeps per draw (Student-t case only).

        Returns
        -------
        X : ndarray of shape (n_samples, n_features) or (B, n_samples, n_features)

        Notes
        -----
        Gaussian: ``mu_m + L z`` with ``L L^T = W + Sigma_m``, exact. Student-t: with the
        latent precisions ``g_i`` of the rows, ``s_i | mu, g_i ~ N(mu, W / g_i)``, so the
        posterior of ``mu`` given the ``g_i`` is Gaussian and ``g_i | mu`` is
        ``Gamma((df + d) / 2, rate=(df + q_i) / 2)`` with ``q_i`` the Mahalanobis distance
        of ``s_i`` to ``mu`` under ``W``. Every draw runs its own chain of ``n_burnin``
        sweeps (started at the Gaussian posterior mean) and returns ``mu`` of its last sweep
        plus a fresh Student-t row: the draws are independent, exact up to the chain's
        convergence. The sweeps run in the joint eigenbasis of ``W`` and ``T``, where both
        are diagonal, so a sweep is O(n_samples * m * d) per support.
        """
        d, mu0, T, W, within, df = self._validate()
        n = check_int(n_samples, "n_samples")
        S, batched = _check_support(support, d)
        rng = as_generator(random_state)
        if within == "gaussian":
            mean, cov = self.posterior_moments(S)
            L = np.linalg.cholesky(W + cov)
            X = mean[:, None, :] + rng.standard_normal((S.shape[0], n, d)) @ L.T
        else:
            X = _gibbs_student_t(rng, S, n, mu0, T, W, df, check_int(n_burnin, "n_burnin"))
        return X if batched else X[0]


def _joint_basis(T, W):
    """``(A, tau)``: ``A W A^T = I`` and ``A T A^T = diag(tau)`` (joint diagonalisation)."""
    C = np.linalg.cholesky(W)
    Ci = np.linalg.inv(C)
    tau, V = np.linalg.eigh(Ci @ T @ Ci.T)
    return V.T @ Ci, tau


def _gibbs_student_t(rng, S, n, mu0, T, W, df, n_burnin):
    """Predictive draws ``(B, n, d)`` of the Student-t family: one Gibbs chain per draw."""
    A, tau = _joint_basis(T, W)
    Y, y0 = S @ A.T, A @ mu0  # rows and prior mean in the basis where W = I, T = diag(tau)
    B, m, d = Y.shape
    prec0 = 1.0 / tau
    # start every chain at the posterior mean of the Gaussian model (all g_i = 1)
    mu = np.repeat(((y0 * prec0 + Y.sum(axis=1)) / (prec0 + m))[:, None, :], n, axis=1)
    y2 = np.sum(Y**2, axis=-1)[:, None, :]  # (B, 1, m)
    for _ in range(n_burnin):
        # squared distances of the rows to each chain's mean, without a (B, n, m, d) array
        q = y2 - 2.0 * np.einsum("bnd,bmd->bnm", mu, Y) + np.sum(mu**2, axis=-1)[..., None]
        q = np.maximum(q, 0.0)
        g = rng.gamma((df + d) / 2.0, 2.0 / (df + q))
        prec = prec0 + g.sum(axis=-1, keepdims=True)  # (B, n, d): diagonal posterior precision
        mean = (y0 * prec0 + np.einsum("bnm,bmd->bnd", g, Y)) / prec
        mu = mean + rng.standard_normal((B, n, d)) / np.sqrt(prec)
    g_new = rng.gamma(df / 2.0, 2.0 / df, size=(B, n, 1))
    Y_new = mu + rng.standard_normal((B, n, d)) / np.sqrt(g_new)
    return Y_new @ np.linalg.inv(A).T
