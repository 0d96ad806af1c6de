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

Classes
-------
GaussianMixtureTasks
    Random Gaussian mixtures (random number of components, means, weights and
    anisotropic covariances).
SphericalShellTasks
    Random concentric spherical shells, where the variation is purely radial (a geometric
    mismatch for isotropic kernels).
RingTasks, MoonsTasks, SpiralTasks
    The paper's 2-D families (random rings, two moons, multi-arm spirals), embedded in
    ``d`` dimensions by a random rotation of their plane.
MixedTasks
    Mixes families with weights (the paper's "mixed" meta-distribution).
ClassTasks
    Real data: every class of a labelled data set is a task.
SingleDatasetTasks
    Random support/target splits of one data set (``LearnedFlowSampler.fit(X)``).
FewShotClassTasks
    Scarce labelled data: every class with a handful of rows is a task, at any support size
    it can give (``LearnedFlowSampler.fit(X, y)``).
RotatedTasks, rotate_tasks
    Task augmentation: every task mapped by its own random orthogonal matrix (support and
    queries alike).

The task sources never put a task's support rows among its targets (the synthetic ones draw
every point independently; the data-based ones split rows).

:class:`GaussianMixtureTasks` also knows its exact population velocity under the OT path
(:meth:`GaussianMixtureTasks.velocity`), a low-variance regression target.
"""

import numbers
import warnings
from typing import NamedTuple

import numpy as np

from ._validation import InvalidParameterError, as_generator, check_bool, check_int, check_real
from .paths import OTPath

__all__ = [
    "ClassTasks",
    "FewShotClassTasks",
    "GaussianMixtureParams",
    "GaussianMixtureTasks",
    "MixedTasks",
    "MoonsTasks",
    "RingTasks",
    "RotatedTasks",
    "SingleDatasetTasks",
    "SphericalShellTasks",
    "SpiralTasks",
    "rotate_tasks",
]

# Upper bound on the number of float64 random keys drawn at once by ClassTasks when it
# samples rows without replacement (bounds memory for large classes).
_MAX_KEYS_PER_CHUNK = 1 << 22


# --------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------
def _rng(random_state):
    """``random_state`` as a :class:`numpy.random.Generator` (the policy of ``skflow._validation``).

    ``None`` seeds one from NumPy's global RandomState (as scikit-learn uses it), an int seeds
    :func:`numpy.random.default_rng`, a RandomState provides a seed (advancing its state) and
    a Generator is used as is.
    """
    return as_generator(random_state)


def _check_int_range(value, name, min_value):
    """An int ``k`` (fixed) or a pair ``(lo, hi)`` of ints with ``min_value <= lo <= hi``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        lo = hi = check_int(value, name, minimum=min_value)
        return lo, hi
    message = (
        f"{name} must be an integer >= {min_value} or a pair (low, high) of them, got {value!r}."
    )
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise InvalidParameterError(message) from None
    for v in (lo, hi):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < min_value:
            raise InvalidParameterError(message)
    if lo > hi:
        raise InvalidParameterError(f"{name}=(low, high) needs low <= high, got {value!r}.")
    return int(lo), int(hi)


def _check_positive_range(value, name):
    """A positive float (fixed) or a pair ``(lo, hi)`` with ``0 < lo <= hi``."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        v = check_real(value, name, low=0.0, low_open=True)
        return v, v
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"{name} must be a positive number or a pair (low, high) of them, got {value!r}."
        ) from None
    lo = check_real(lo, name, low=0.0, low_open=True)
    hi = check_real(hi, name, low=0.0, low_open=True)
    if lo > hi:
        raise InvalidParameterError(f"{name}=(low, high) needs low <= high, got {value!r}.")
    return lo, hi


def _check_sizes(n_tasks, n_support, n_query):
    n_tasks = check_int(n_tasks, "n_tasks")
    n_support = check_int(n_support, "n_support")
    n_query = check_int(n_query, "n_query", minimum=0)
    return n_tasks, n_support, n_query


def _masked_dirichlet(rng, n_active, k_max):
    """Dirichlet(1) weights over the first ``n_active[b]`` of ``k_max`` slots, 0 elsewhere."""
    active = np.arange(k_max)[None, :] < n_active[:, None]  # (B, k_max)
    w = rng.standard_exponential((len(n_active), k_max)) * active
    w /= w.sum(axis=1, keepdims=True)
    return w, active


def _categorical(rng, weights, n_draws, n_active):
    """Vectorized categorical draws: ``weights`` (B, K) -> indices (B, n_draws)."""
    cum = np.cumsum(weights, axis=1)  # (B, K)
    u = rng.random((weights.shape[0], n_draws))  # (B, n)
    idx = (u[:, :, None] >= cum[:, None, :]).sum(axis=2)
    # guard against cum[-1] < 1 by rounding: never pick an inactive slot
    return np.minimum(idx, n_active[:, None] - 1)


def _haar_rotations(rng, batch_shape, d):
    """Uniformly random (Haar) orthogonal matrices of shape ``(*batch_shape, d, d)``.

    QR of a Gaussian matrix with the sign fix (columns scaled by the signs of diag(R)).
    """
    G = rng.standard_normal((*batch_shape, d, d))
    Qm, Rm = np.linalg.qr(G)
    signs = np.sign(np.diagonal(Rm, axis1=-2, axis2=-1))
    signs[signs == 0] = 1.0
    return Qm * signs[..., None, :]


class GaussianMixtureParams(NamedTuple):
    """Parameters of a batch of Gaussian mixtures (one per task), slot ``k`` of task ``b``.

    Attributes
    ----------
    weights : ndarray of shape (B, K)
        Mixture weights (0 for unused slots; rows sum to 1).
    means : ndarray of shape (B, K, d)
    rotations : ndarray of shape (B, K, d, d)
        Orthogonal eigenbases ``R`` of the covariances ``R diag(scales**2) R^T``.
    scales : ndarray of shape (B, K, d)
        Standard deviations along the columns of ``R``.
    """

    weights: np.ndarray
    means: np.ndarray
    rotations: np.ndarray
    scales: np.ndarray


class _TaskDistribution:
    """Shared interface: ``sample_task`` is task 0 of ``sample_tasks(1, ...)``."""

    _param_names = ()

    def sample_task(self, n_support, n_query, random_state=None):
        """Draw one task.

        Parameters
        ----------
        n_support : int >= 1
            Number of support points.
        n_query : int >= 0
            Number of query points.
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness.

        Returns
        -------
        support : ndarray of shape (n_support, n_features), float64
        query : ndarray of shape (n_query, n_features), float64
        """
        supports, queries = self.sample_tasks(1, n_support, n_query, random_state=random_state)
        return supports[0], queries[0]

    def __repr__(self):
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._param_names)
        return f"{type(self).__name__}({args})"


# --------------------------------------------------------------------------------------
# Gaussian mixtures
# --------------------------------------------------------------------------------------
class GaussianMixtureTasks(_TaskDistribution):
    """Meta-distribution of random Gaussian mixtures.

    For every task: the number of components ``K`` is uniform on the integers in
    ``n_components`` (inclusive), the means are uniform in ``[-box, box]^d``, the mixture
    weights follow a Dirichlet(1) law, and component ``k`` is a Gaussian with covariance
    ``A_k A_k^T``. When ``anisotropic``, ``A_k = R_k diag(sigma_k)`` with ``R_k`` a
    uniformly random rotation (QR of a Gaussian matrix with the sign fix) and the ``d``
    entries of ``sigma_k`` uniform in ``scale``; otherwise ``A_k = sigma_k I`` with one
    ``sigma_k`` uniform in ``scale``. Support and query points are iid draws from the same
    mixture.

    Parameters
    ----------
    n_features : int >= 1, default=2
        Dimension ``d`` of the points.
    n_components : int or (int, int), default=(2, 8)
        Range ``(low, high)`` (inclusive) of the number of components; an int fixes it.
    box : float > 0, default=5.0
        Means are uniform in ``[-box, box]^d``.
    scale : float or (float, float), default=(0.3, 1.0)
        Range of the component standard deviations (per axis when anisotropic); a float
        fixes it. Must be positive.
    anisotropic : bool, default=True
        Random rotated axis-aligned covariances if True, isotropic ones if False.

    Attributes
    ----------
    n_features : int
        Dimension of the points.

    Notes
    -----
    ``sample_tasks`` is vectorized: every task draws ``high`` components and the unused
    ones get zero weight. Parameters are validated when sampling.

    Examples
    --------
    >>> from skflow.tasks import GaussianMixtureTasks
    >>> S, Q = GaussianMixtureTasks(n_features=3).sample_task(5, 7, random_state=0)
    >>> S.shape, Q.shape, S.dtype
    ((5, 3), (7, 3), dtype('float64'))
    >>> Ss, Qs = GaussianMixtureTasks(n_features=3).sample_tasks(4, 5, 7, random_state=0)
    >>> Ss.shape, Qs.shape
    ((4, 5, 3), (4, 7, 3))
    """

    _param_names = ("n_features", "n_components", "box", "scale", "anisotropic")

    def __init__(
        self, n_features=2, *, n_components=(2, 8), box=5.0, scale=(0.3, 1.0), anisotropic=True
    ):
        self.n_features = n_features
        self.n_components = n_components
        self.box = box
        self.scale = scale
        self.anisotropic = anisotropic

    def _validate(self):
        d = check_int(self.n_features, "n_features")
        k_lo, k_hi = _check_int_range(self.n_components, "n_components", 1)
        box = check_real(self.box, "box", low=0.0, low_open=True)
        s_lo, s_hi = _check_positive_range(self.scale, "scale")
        return d, k_lo, k_hi, box, s_lo, s_hi, check_bool(self.anisotropic, "anisotropic")

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None, *, return_params=False):
        """Draw a batch of independent tasks.

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Number of support points per task.
        n_query : int >= 0
            Number of query points per task.
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness.
        return_params : bool, default=False
            Also return the mixtures, for :meth:`velocity` (the same draws either way).

        Returns
        -------
        supports : ndarray of shape (n_tasks, n_support, n_features), float64
        queries : ndarray of shape (n_tasks, n_query, n_features), float64
        params : GaussianMixtureParams, only if ``return_params``
            The task's mixture: component ``k`` of task ``b`` is
            ``N(means[b, k], rotations[b, k] diag(scales[b, k]**2) rotations[b, k]^T)``
            with weight ``weights[b, k]`` (0 for unused slots).
        """
        d, k_lo, k_hi, box, s_lo, s_hi, anisotropic = self._validate()
        B, m, q = _check_sizes(n_tasks, n_support, n_query)
        rng = _rng(random_state)
        n_active = rng.integers(k_lo, k_hi + 1, size=B)
        weights, _ = _masked_dirichlet(rng, n_active, k_hi)
        means = rng.uniform(-box, box, size=(B, k_hi, d))
        if anisotropic:
            rot = _haar_rotations(rng, (B, k_hi), d)
            scales = rng.uniform(s_lo, s_hi, size=(B, k_hi, d))
        else:
            rot = np.broadcast_to(np.eye(d), (B, k_hi, d, d))
            scales = np.repeat(rng.uniform(s_lo, s_hi, size=(B, k_hi))[..., None], d, axis=2)
        params = GaussianMixtureParams(weights, means, rot, scales)

        comp = _categorical(rng, weights, m + q, n_active)  # (B, n)
        z = rng.standard_normal((B, m + q, d))
        X = np.take_along_axis(means, comp[:, :, None], axis=1)  # (B, n, d)
        if anisotropic:
            A = rot * scales[..., None, :]  # R diag(scales)
            # loop over the (few) component slots only: X += A_k z for points of slot k
            for k in range(k_hi):
                mask = comp == k
                if mask.any():
                    X += np.where(mask[:, :, None], z @ np.swapaxes(A[:, k], -1, -2), 0.0)
        else:
            X += np.take_along_axis(scales[..., 0], comp, axis=1)[:, :, None] * z
        S, Q = np.ascontiguousarray(X[:, :m]), np.ascontiguousarray(X[:, m:])
        return (S, Q, params) if return_params else (S, Q)

    @staticmethod
    def posterior_mean(x, t, params, *, sigma_min=0.01):
        """Exact ``E[x_1 | x_t = x]`` under the OT path, for the mixtures ``params``.

        With ``x_1`` from the mixture and ``x_t = t x_1 + sigma_t x_0``, ``x_t`` is a Gaussian
        mixture with components ``N(t mu_k, t^2 Sigma_k + sigma_t^2 I)``; the posterior mean is
        the responsibility-weighted ``mu_k + t Sigma_k (t^2 Sigma_k + sigma_t^2 I)^{-1}
        (x - t mu_k)``, computed in each component's eigenbasis (no matrix inverse).

        Parameters
        ----------
        x : array-like of shape (B, n, n_features)
            Points at time ``t``; ``B`` is the number of tasks of ``params``.
        t : float or array-like of shape (B, n)
            Times in [0, 1].
        params : GaussianMixtureParams
            From ``sample_tasks(..., return_params=True)``.
        sigma_min : float, default=0.01
            Path noise at ``t = 1``.

        Returns
        -------
        mean : ndarray of shape (B, n, n_features), float64
        """
        path = OTPath(sigma_min)
        x = np.asarray(x, dtype=np.float64)
        t = np.broadcast_to(np.asarray(t, dtype=np.float64), x.shape[:2])[..., None]
        var_noise = path.sigma(t) ** 2  # (B, n, 1)
        K = params.means.shape[1]
        log_resp = np.empty(x.shape[:2] + (K,))
        cond = np.empty(x.shape[:2] + (K, x.shape[2]))
        with np.errstate(divide="ignore"):
            log_w = np.log(params.weights)  # unused slots: -inf
        for k in range(K):
            mu, R = params.means[:, None, k], params.rotations[:, k]  # (B, 1, d), (B, d, d)
            s2 = params.scales[:, None, k] ** 2  # (B, 1, d)
            var = t**2 * s2 + var_noise  # eigenvalues of the component's covariance at t
            z = (x - t * mu) @ R  # coordinates in the eigenbasis, (B, n, d)
            log_resp[..., k] = log_w[:, None, k] - 0.5 * np.sum(z**2 / var + np.log(var), -1)
            cond[..., k, :] = mu + ((t * s2 / var) * z) @ np.swapaxes(R, -1, -2)
        log_resp -= log_resp.max(axis=-1, keepdims=True)
        resp = np.exp(log_resp)
        resp /= resp.sum(axis=-1, keepdims=True)
        return np.einsum("bnk,bnkd->bnd", resp, cond)

    def velocity(self, x, t, params, *, sigma_min=0.01):
        """Exact population velocity of the OT path for the mixtures ``params``.

        ``u_t(x) = (E[x_1 | x_t = x] - (1 - sigma_min) x) / sigma_t``: the marginal field that
        conditional flow matching regresses on in expectation, here without sampling noise
        (a low-variance regression target, ``LearnedFlowSampler(target="exact")``).

        Parameters
        ----------
        x : array-like of shape (B, n, n_features)
        t : float or array-like of shape (B, n)
            Times in [0, 1].
        params : GaussianMixtureParams
            From ``sample_tasks(..., return_params=True)``.
        sigma_min : float, default=0.01

        Returns
        -------
        u : ndarray of shape (B, n, n_features), float64

        Examples
        --------
        >>> import numpy as np
        >>> from skflow.tasks import GaussianMixtureTasks
        >>> tasks = GaussianMixtureTasks(n_features=2)
        >>> S, Q, params = tasks.sample_tasks(3, 5, 7, random_state=0, return_params=True)
        >>> u = tasks.velocity(Q, 0.5, params)
        >>> u.shape
        (3, 7, 2)
        """
        path = OTPath(sigma_min)
        x = np.asarray(x, dtype=np.float64)
        tt = np.broadcast_to(np.asarray(t, dtype=np.float64), x.shape[:2])[..., None]
        mean = self.posterior_mean(x, tt[..., 0], params, sigma_min=sigma_min)
        return path.velocity_from_mean(mean, x, tt)


# --------------------------------------------------------------------------------------
# spherical shells
# --------------------------------------------------------------------------------------
class SphericalShellTasks(_TaskDistribution):
    """Meta-distribution of random concentric spherical shells.

    For every task: the number of shells ``K`` is uniform on the integers in ``n_shells``
    (inclusive), the radii are uniform in ``(0.5, max_radius]`` (sorted increasingly),
    and the shell probabilities follow a Dirichlet(1) law (so some shells may be rare).
    A point is ``center + r * u`` with ``u`` uniform on the unit sphere (a normalized
    Gaussian vector), ``r = radius_k + radial_noise * N(0, 1)`` and ``k`` the point's
    shell. The center is the origin unless ``center_box > 0``, in which case it is uniform
    in ``[-center_box, center_box]^d`` per task.

    The variation within a task is purely radial, the regime in which an isotropic
    kernel's geometry does not match the data.

    Parameters
    ----------
    n_features : int >= 1, default=8
        Dimension ``d`` of the points.
    n_shells : int or (int, int), default=(2, 5)
        Range ``(low, high)`` (inclusive) of the number of shells; an int fixes it.
    max_radius : float > 0.5, default=5.0
        Largest possible shell radius.
    radial_noise : float >= 0, default=0.3
        Standard deviation of the Gaussian noise added to the radius. The noisy radius is
        not clipped: a negative ``r`` places the point on the opposite side.
    center_box : float >= 0, default=0.0
        Half-width of the box the center is drawn from; 0 keeps it at the origin.

    Attributes
    ----------
    n_features : int
        Dimension of the points.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import SphericalShellTasks
    >>> tasks = SphericalShellTasks(n_features=4, radial_noise=0.0)
    >>> S, Q = tasks.sample_task(10, 3, random_state=0)
    >>> S.shape, Q.shape
    ((10, 4), (3, 4))
    >>> bool(np.all(np.linalg.norm(S, axis=1) <= 5.0))
    True
    """

    _param_names = ("n_features", "n_shells", "max_radius", "radial_noise", "center_box")

    def __init__(
        self, n_features=8, *, n_shells=(2, 5), max_radius=5.0, radial_noise=0.3, center_box=0.0
    ):
        self.n_features = n_features
        self.n_shells = n_shells
        self.max_radius = max_radius
        self.radial_noise = radial_noise
        self.center_box = center_box

    def _validate(self):
        d = check_int(self.n_features, "n_features")
        k_lo, k_hi = _check_int_range(self.n_shells, "n_shells", 1)
        r_max = check_real(self.max_radius, "max_radius", low=0.5, low_open=True)
        noise = check_real(self.radial_noise, "radial_noise", low=0.0)
        cbox = check_real(self.center_box, "center_box", low=0.0)
        return d, k_lo, k_hi, r_max, noise, cbox

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None):
        """Draw a batch of independent tasks.

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Number of support points per task.
        n_query : int >= 0
            Number of query points per task.
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness.

        Returns
        -------
        supports : ndarray of shape (n_tasks, n_support, n_features), float64
        queries : ndarray of shape (n_tasks, n_query, n_features), float64
        """
        d, k_lo, k_hi, r_max, noise, cbox = self._validate()
        B, m, q = _check_sizes(n_tasks, n_support, n_query)
        rng = _rng(random_state)
        n = m + q

        n_active = rng.integers(k_lo, k_hi + 1, size=B)
        weights, active = _masked_dirichlet(rng, n_active, k_hi)
        # uniform in (0.5, r_max]; inactive slots pushed to the end by the sort
        radii = r_max - rng.random((B, k_hi)) * (r_max - 0.5)
        radii = np.sort(np.where(active, radii, np.inf), axis=1)
        if cbox > 0:
            center = rng.uniform(-cbox, cbox, size=(B, 1, d))
        else:
            center = np.zeros((B, 1, d))

        shell = _categorical(rng, weights, n, n_active)  # (B, n)
        u = rng.standard_normal((B, n, d))
        norms = np.linalg.norm(u, axis=2, keepdims=True)
        while np.any(norms == 0):  # measure zero; redraw to stay on the sphere
            bad = norms[..., 0] == 0
            u[bad] = rng.standard_normal((int(bad.sum()), d))
            norms = np.linalg.norm(u, axis=2, keepdims=True)
        u /= norms
        r = np.take_along_axis(radii, shell, axis=1) + noise * rng.standard_normal((B, n))
        X = center + r[:, :, None] * u
        return np.ascontiguousarray(X[:, :m]), np.ascontiguousarray(X[:, m:])


# --------------------------------------------------------------------------------------
# 2-D families of the paper (rings, moons, spirals), embedded in d dimensions
# --------------------------------------------------------------------------------------
def _embed_plane(rng, P, d, box, noise):
    """Place 2-D task shapes ``P`` (B, n, 2) in ``R^d``: a random rotation, a shift, noise.

    Each task's plane is spanned by two orthonormal rows of a Haar-random rotation (in 2-D: a
    random rotation or reflection of the plane), the shape is shifted by a vector uniform in
    ``[-box, box]^d`` and isotropic Gaussian noise of the task's level ``noise`` (B,) is added
    in all ``d`` dimensions.
    """
    B, n, _ = P.shape
    frame = _haar_rotations(rng, (B,), d)[:, :2, :]  # (B, 2, d), orthonormal rows
    shift = rng.uniform(-box, box, size=(B, 1, d)) if box > 0 else np.zeros((B, 1, d))
    X = P @ frame + shift + noise[:, None, None] * rng.standard_normal((B, n, d))
    return X


class _PlanarTasks(_TaskDistribution):
    """Shared sampling of the 2-D families: draw shapes, embed them, split support/query."""

    def _common(self):
        d = check_int(self.n_features, "n_features", minimum=2)
        box = check_real(self.box, "box", low=0.0)
        n_lo, n_hi = _check_positive_range(self.noise, "noise")
        return d, box, n_lo, n_hi

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None):
        """Draw a batch of independent tasks.

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Number of support points per task.
        n_query : int >= 0
            Number of query points per task.
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness.

        Returns
        -------
        supports : ndarray of shape (n_tasks, n_support, n_features), float64
        queries : ndarray of shape (n_tasks, n_query, n_features), float64
        """
        d, box, n_lo, n_hi = self._common()
        shape_params = self._validate_shape()
        B, m, q = _check_sizes(n_tasks, n_support, n_query)
        rng = _rng(random_state)
        P = self._shapes(rng, B, m + q, *shape_params)  # (B, n, 2)
        noise = rng.uniform(n_lo, n_hi, size=B)
        X = _embed_plane(rng, P, d, box, noise)
        return np.ascontiguousarray(X[:, :m]), np.ascontiguousarray(X[:, m:])


class RingTasks(_PlanarTasks):
    """Meta-distribution of random rings (circles with Gaussian noise), in a random plane.

    For every task: ``K`` rings (uniform on the integers in ``n_rings``), each with its own
    centre uniform in ``[-spread, spread]^2``, radius uniform in ``radius`` and Dirichlet(1)
    weight; a point is ``centre_k + r_k (cos a, sin a)`` with ``a`` uniform. The planar task
    is then rotated into ``R^d``, shifted and noised (see ``noise``, ``box``).

    Parameters
    ----------
    n_features : int >= 2, default=2
        Dimension ``d``; for ``d > 2`` the rings lie in a random 2-D plane.
    n_rings : int or (int, int), default=(1, 3)
        Range (inclusive) of the number of rings.
    radius : float or (float, float), default=(1.0, 3.0)
        Range of the radii.
    spread : float >= 0, default=3.0
        Ring centres are uniform in ``[-spread, spread]^2`` (0: concentric rings).
    box : float >= 0, default=2.0
        The whole task is shifted by a vector uniform in ``[-box, box]^d``.
    noise : float or (float, float), default=(0.05, 0.2)
        Range of the task's isotropic Gaussian noise level (all ``d`` dimensions).

    Attributes
    ----------
    n_features : int
        Dimension of the points.

    Examples
    --------
    >>> from skflow.tasks import RingTasks
    >>> S, Q = RingTasks(n_features=4).sample_tasks(3, 10, 5, random_state=0)
    >>> S.shape, Q.shape
    ((3, 10, 4), (3, 5, 4))
    """

    _param_names = ("n_features", "n_rings", "radius", "spread", "box", "noise")

    def __init__(
        self, n_features=2, *, n_rings=(1, 3), radius=(1.0, 3.0), spread=3.0, box=2.0,
        noise=(0.05, 0.2),
    ):  # fmt: skip
        self.n_features = n_features
        self.n_rings = n_rings
        self.radius = radius
        self.spread = spread
        self.box = box
        self.noise = noise

    def _validate_shape(self):
        k_lo, k_hi = _check_int_range(self.n_rings, "n_rings", 1)
        r_lo, r_hi = _check_positive_range(self.radius, "radius")
        spread = check_real(self.spread, "spread", low=0.0)
        return k_lo, k_hi, r_lo, r_hi, spread

    @staticmethod
    def _shapes(rng, B, n, k_lo, k_hi, r_lo, r_hi, spread):
        n_active = rng.integers(k_lo, k_hi + 1, size=B)
        weights, _ = _masked_dirichlet(rng, n_active, k_hi)
        centres = rng.uniform(-spread, spread, size=(B, k_hi, 2))
        radii = rng.uniform(r_lo, r_hi, size=(B, k_hi))
        ring = _categorical(rng, weights, n, n_active)  # (B, n)
        angle = rng.uniform(0.0, 2.0 * np.pi, size=(B, n))
        circle = np.stack([np.cos(angle), np.sin(angle)], axis=-1)
        r = np.take_along_axis(radii, ring, axis=1)[..., None]
        return np.take_along_axis(centres, ring[..., None], axis=1) + r * circle


class MoonsTasks(_PlanarTasks):
    """Meta-distribution of random two-moons tasks (two interleaved half circles).

    The planar shape is scikit-learn's ``make_moons``: with ``a`` uniform in ``[0, pi]``,
    a point is ``(cos a, sin a)`` (upper moon) or ``(1 - cos a, 1/2 - sin a)`` (lower moon)
    with probability 1/2 each, centred on ``(1/2, 1/4)`` and multiplied by the task's
    ``scale``; the task is then rotated into ``R^d``, shifted and noised.

    Parameters
    ----------
    n_features : int >= 2, default=2
        Dimension ``d``; for ``d > 2`` the moons lie in a random 2-D plane.
    scale : float or (float, float), default=(1.0, 3.0)
        Range of the task's size factor (the moons' radius).
    box : float >= 0, default=3.0
        The task is shifted by a vector uniform in ``[-box, box]^d``.
    noise : float or (float, float), default=(0.05, 0.2)
        Range of the task's isotropic Gaussian noise level, in units of the data (not of
        ``scale``).

    Attributes
    ----------
    n_features : int
        Dimension of the points.

    Examples
    --------
    >>> from skflow.tasks import MoonsTasks
    >>> S, Q = MoonsTasks().sample_task(20, 4, random_state=0)
    >>> S.shape, Q.shape
    ((20, 2), (4, 2))
    """

    _param_names = ("n_features", "scale", "box", "noise")

    def __init__(self, n_features=2, *, scale=(1.0, 3.0), box=3.0, noise=(0.05, 0.2)):
        self.n_features = n_features
        self.scale = scale
        self.box = box
        self.noise = noise

    def _validate_shape(self):
        return _check_positive_range(self.scale, "scale")

    @staticmethod
    def _shapes(rng, B, n, s_lo, s_hi):
        scale = rng.uniform(s_lo, s_hi, size=(B, 1, 1))
        lower = rng.random((B, n)) < 0.5
        a = rng.uniform(0.0, np.pi, size=(B, n))
        x = np.where(lower, 1.0 - np.cos(a), np.cos(a)) - 0.5
        y = np.where(lower, 0.5 - np.sin(a), np.sin(a)) - 0.25
        return scale * np.stack([x, y], axis=-1)


class SpiralTasks(_PlanarTasks):
    """Meta-distribution of random Archimedean spirals with several arms.

    For every task: ``A`` arms (uniform on the integers in ``n_arms``) turned by ``2 pi a / A``,
    ``turns`` revolutions and a size ``scale``. A point of arm ``a`` is
    ``scale * s * (cos(theta + 2 pi a / A), sin(theta + 2 pi a / A))`` with
    ``theta = 2 pi * turns * s`` and ``s = sqrt(u)``, ``u`` uniform on [0, 1] (roughly uniform
    along the arm); the task is then rotated into ``R^d``, shifted and noised.

    Parameters
    ----------
    n_features : int >= 2, default=2
        Dimension ``d``; for ``d > 2`` the spiral lies in a random 2-D plane.
    n_arms : int or (int, int), default=(1, 3)
        Range (inclusive) of the number of arms.
    turns : float or (float, float), default=(1.0, 2.0)
        Range of the revolutions of each arm.
    scale : float or (float, float), default=(2.0, 5.0)
        Range of the outer radius.
    box : float >= 0, default=2.0
        The task is shifted by a vector uniform in ``[-box, box]^d``.
    noise : float or (float, float), default=(0.05, 0.2)
        Range of the task's isotropic Gaussian noise level.

    Attributes
    ----------
    n_features : int
        Dimension of the points.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import SpiralTasks
    >>> tasks = SpiralTasks(n_features=3, box=0.0, noise=1e-9, scale=2.0)
    >>> S, _ = tasks.sample_task(50, 0, random_state=0)
    >>> bool(np.linalg.norm(S, axis=1).max() <= 2.0 + 1e-6)
    True
    """

    _param_names = ("n_features", "n_arms", "turns", "scale", "box", "noise")

    def __init__(
        self, n_features=2, *, n_arms=(1, 3), turns=(1.0, 2.0), scale=(2.0, 5.0), box=2.0,
        noise=(0.05, 0.2),
    ):  # fmt: skip
        self.n_features = n_features
        self.n_arms = n_arms
        self.turns = turns
        self.scale = scale
        self.box = box
        self.noise = noise

    def _validate_shape(self):
        a_lo, a_hi = _check_int_range(self.n_arms, "n_arms", 1)
        t_lo, t_hi = _check_positive_range(self.turns, "turns")
        s_lo, s_hi = _check_positive_range(self.scale, "scale")
        return a_lo, a_hi, t_lo, t_hi, s_lo, s_hi

    @staticmethod
    def _shapes(rng, B, n, a_lo, a_hi, t_lo, t_hi, s_lo, s_hi):
        n_arms = rng.integers(a_lo, a_hi + 1, size=(B, 1))
        turns = rng.uniform(t_lo, t_hi, size=(B, 1))
        scale = rng.uniform(s_lo, s_hi, size=(B, 1))
        arm = np.floor(rng.random((B, n)) * n_arms)  # uniform arm index in [0, A)
        s = np.sqrt(rng.random((B, n)))
        theta = 2.0 * np.pi * (turns * s + arm / n_arms)
        return (scale * s)[..., None] * np.stack([np.cos(theta), np.sin(theta)], axis=-1)


# --------------------------------------------------------------------------------------
# mixtures of families
# --------------------------------------------------------------------------------------
class MixedTasks(_TaskDistribution):
    """A meta-distribution that mixes task families: each task comes from one family.

    Every task picks family ``j`` with probability ``weights[j]`` (independently), then is
    drawn from it. This is the paper's "mixed" meta-distribution (Gaussian mixtures, rings,
    moons and spirals); leaving one family out of ``families`` gives its leave-one-family-out
    training distribution.

    Parameters
    ----------
    families : sequence of task sources
        Objects with ``sample_tasks(n_tasks, n_support, n_query, random_state)`` and
        ``n_features`` (all equal), e.g. the classes of this module.
    weights : sequence of float or None, default=None
        Non-negative family probabilities (normalized); uniform when None.

    Attributes
    ----------
    n_features : int
        Dimension of the points (shared by the families).

    Examples
    --------
    >>> from skflow.tasks import (GaussianMixtureTasks, MixedTasks, MoonsTasks, RingTasks,
    ...                           SpiralTasks)
    >>> mixed = MixedTasks([GaussianMixtureTasks(4), RingTasks(4), MoonsTasks(4),
    ...                     SpiralTasks(4)], weights=[2, 1, 1, 1])
    >>> Ss, Qs = mixed.sample_tasks(6, 10, 3, random_state=0)
    >>> Ss.shape, Qs.shape
    ((6, 10, 4), (6, 3, 4))
    """

    def __init__(self, families, weights=None):
        self.families = families
        self.weights = weights

    def __repr__(self):
        return f"MixedTasks(families={list(self.families)!r}, weights={self.weights!r})"

    def _validate(self):
        families = list(self.families)
        if not families or not all(callable(getattr(f, "sample_tasks", None)) for f in families):
            raise ValueError("families must be a non-empty sequence of task sources.")
        dims = {int(f.n_features) for f in families}
        if len(dims) != 1:
            raise ValueError(f"all families must have the same n_features, got {sorted(dims)}.")
        if self.weights is None:
            w = np.full(len(families), 1.0 / len(families))
        else:
            w = np.asarray(self.weights, dtype=np.float64)
            if w.shape != (len(families),) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(
                    f"weights must be {len(families)} non-negative finite numbers, got "
                    f"{self.weights!r}."
                )
            if w.sum() <= 0:
                raise ValueError("weights must not all be zero.")
            w = w / w.sum()
        return families, w, dims.pop()

    @property
    def n_features(self):
        return self._validate()[2]

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None):
        """Draw a batch of tasks, each from a randomly chosen family.

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Number of support points per task.
        n_query : int >= 0
            Number of query points per task.
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness (shared, in order, by the family draws).

        Returns
        -------
        supports : ndarray of shape (n_tasks, n_support, n_features), float64
        queries : ndarray of shape (n_tasks, n_query, n_features), float64
        """
        families, w, d = self._validate()
        B, m, q = _check_sizes(n_tasks, n_support, n_query)
        rng = _rng(random_state)
        family = np.minimum(np.searchsorted(np.cumsum(w), rng.random(B), side="right"), len(w) - 1)
        supports, queries = np.empty((B, m, d)), None
        for j in np.unique(family):
            idx = np.flatnonzero(family == j)
            S, Q = families[j].sample_tasks(idx.size, m, q, random_state=rng)
            if queries is None:
                queries = np.empty((B, Q.shape[1], d))
            if S.shape[1:] != (m, d) or Q.shape[1:] != queries.shape[1:]:
                raise ValueError(
                    f"family {j} returned supports {S.shape} and queries {Q.shape}; every "
                    f"family must return ({idx.size}, {m}, {d}) and ({idx.size}, "
                    f"{queries.shape[1]}, {d})."
                )
            supports[idx], queries[idx] = S, Q
        return supports, queries


# --------------------------------------------------------------------------------------
# real data: classes as tasks
# --------------------------------------------------------------------------------------
def _check_labelled(X, y, validation_fraction, standardize):
    """Validated ``(X float64 (n, d), y (n,), validation_fraction)`` of :class:`ClassTasks`."""
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"X must be a numeric array, could not convert: {exc}") from None
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got {X.ndim}-D.")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be non-empty, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinity.")
    y = np.asarray(y)
    if y.ndim != 1:
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        else:
            raise ValueError(f"y must be 1-D, got shape {y.shape}.")
    if len(y) != len(X):
        raise ValueError(f"len(y)={len(y)} does not match len(X)={len(X)}.")
    vf = check_real(validation_fraction, "validation_fraction", low=0.0, high=1.0, high_open=True)
    check_bool(standardize, "standardize")
    return X, y, vf


def _split_classes(y, vf, rng):
    """Per-class train/validation row indices; classes with fewer than 2 rows are dropped.

    Returns ``(labels, keep, train_rows, val_rows)``: all labels, the indices of the kept
    ones, and one sorted index array per kept class for each split.
    """
    labels, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
    small = counts < 2
    if small.all():
        raise ValueError(
            "ClassTasks needs at least one class with 2 or more rows; every class has fewer than 2."
        )
    if small.any():
        warnings.warn(
            f"{int(small.sum())} class(es) with fewer than 2 rows are excluded: "
            f"{labels[small][:10].tolist()}{' ...' if small.sum() > 10 else ''}",
            UserWarning,
            stacklevel=4,
        )
    keep = np.flatnonzero(~small)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    train_rows, val_rows = [], []
    for c in keep:  # one permutation per class (setup only, not per sampled point)
        rows = order[starts[c] : starts[c + 1]]
        rows = rows[rng.permutation(len(rows))]
        n_val = int(round(vf * len(rows)))
        val_rows.append(np.sort(rows[:n_val]))
        train_rows.append(np.sort(rows[n_val:]))
    return labels, keep, train_rows, val_rows


def _pack_split(parts, classes):
    """Flat row indices, sizes and offsets of the classes of one split with >= 2 rows."""
    sizes = np.array([len(p) for p in parts], dtype=np.int64)
    ok = sizes >= 2
    rows = [p for p, o in zip(parts, ok, strict=True) if o]
    flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    sz = sizes[ok]
    return {
        "classes": classes[ok],
        "rows": flat,
        "sizes": sz,
        "offsets": np.concatenate([[0], np.cumsum(sz)[:-1]]).astype(np.int64),
    }


def _distinct_rows(rng, sizes, n):
    """``n`` distinct local row indices per task, uniformly ordered; ``sizes`` (B,) >= n.

    The ``n`` smallest of iid uniform keys over each class's rows, ordered by key, form a
    uniformly random ordered sample without replacement (chunked over tasks for memory).
    """
    B = sizes.size
    local = np.empty((B, n), dtype=np.int64)
    if B == 0 or n == 0:
        return local
    width = int(sizes.max())
    chunk = max(1, _MAX_KEYS_PER_CHUNK // width)
    for start in range(0, B, chunk):
        tasks = np.arange(start, min(B, start + chunk))
        keys = rng.random((tasks.size, width))
        keys[np.arange(width)[None, :] >= sizes[tasks][:, None]] = 2.0
        if n < width:
            cand = np.argpartition(keys, n - 1, axis=1)[:, :n]
        else:
            cand = np.broadcast_to(np.arange(width), (tasks.size, width))
        ck = np.take_along_axis(keys, cand, axis=1)
        local[tasks] = np.take_along_axis(cand, np.argsort(ck, axis=1), axis=1)
    return local


class ClassTasks(_TaskDistribution):
    """Tasks from a labelled data set: every class is one task.

    A task draws a class uniformly at random among the classes of the requested split
    that can give one, then ``n_support + n_query`` distinct rows of that class (drawn
    without replacement): the first ``n_support`` are the support, the rest the targets,
    so a task's support rows are never among its targets.

    When a class has fewer than ``n_support + n_query`` rows in the split, the target count
    of the call shrinks to what the smallest drawable class allows, ``size - n_support``,
    and a :class:`UserWarning` names that class, its size, ``n_support`` and the shrunk
    target count; classes with at most ``n_support`` rows cannot give a single target and
    are not drawn (also with a warning naming them). Each warning is emitted once per
    instance, split and sizes.

    Nothing is fitted: on first use the data are validated and each class's rows are
    split into a train and a validation part (``validation_fraction`` of the rows of each
    class, rounded, go to validation), seeded by ``random_state``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Finite numeric data.
    y : array-like of shape (n_samples,)
        Class labels; each class is a task.
    validation_fraction : float in [0, 1), default=0.0
        Fraction of each class's rows held out for ``split="validation"``.
    random_state : None, int, RandomState or Generator, default=None
        Seeds the train/validation split (not the sampling of tasks). Use an int for a
        reproducible split.
    standardize : bool, default=False
        If True, returned rows are standardized with the mean and standard deviation of
        the train split (features with zero spread are only centered).

    Attributes
    ----------
    classes_ : ndarray
        Labels of the classes that can be drawn (at least 2 rows in total), sorted.
    n_features : int
        Number of columns of ``X``.
    mean_, scale_ : ndarray of shape (n_features,)
        Standardization statistics (zeros and ones when ``standardize=False``).

    Notes
    -----
    Classes with fewer than 2 rows in total are dropped with a :class:`UserWarning`. A
    :class:`ValueError` is raised when no class of the split has more than ``n_support``
    rows. The returned queries have shape ``(n_tasks, n_query', n_features)`` with
    ``n_query' <= n_query`` (equal unless a class is too small, see above).

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import ClassTasks
    >>> X = np.arange(60.0).reshape(20, 3)
    >>> y = np.repeat([0, 1], 10)
    >>> tasks = ClassTasks(X, y, validation_fraction=0.2, random_state=0)
    >>> S, Q = tasks.sample_task(3, 4, random_state=0)
    >>> S.shape, Q.shape, tasks.n_features, tasks.classes_.tolist()
    ((3, 3), (4, 3), 3, [0, 1])
    >>> Ss, Qs = tasks.sample_tasks(5, 1, 0, split="validation", random_state=0)
    >>> Ss.shape, Qs.shape
    ((5, 1, 3), (5, 0, 3))
    """

    def __init__(self, X, y, *, validation_fraction=0.0, random_state=None, standardize=False):
        self.X = X
        self.y = y
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.standardize = standardize

    def __repr__(self):
        shape = getattr(self.X, "shape", None)
        return (
            f"ClassTasks(X=<{'x'.join(map(str, shape)) if shape else type(self.X).__name__}>, "
            f"y=..., validation_fraction={self.validation_fraction!r}, "
            f"random_state={self.random_state!r}, standardize={self.standardize!r})"
        )

    # ---- lazy preparation ------------------------------------------------------------
    def _prepare(self):
        if getattr(self, "_prepared", None) is not None:
            return self._prepared
        X, y, vf = _check_labelled(self.X, self.y, self.validation_fraction, self.standardize)
        labels, keep, train_rows, val_rows = _split_classes(y, vf, _rng(self.random_state))
        mean, scale = np.zeros(X.shape[1]), np.ones(X.shape[1])
        if self.standardize:
            all_train = np.concatenate(train_rows)
            mean = X[all_train].mean(axis=0)
            scale = X[all_train].std(axis=0)
            scale[scale == 0] = 1.0
            X = (X - mean) / scale
        self._prepared = {
            "X": X,
            "classes": labels[keep],
            "mean": mean,
            "scale": scale,
            "validation_fraction": vf,
            "train": _pack_split(train_rows, labels[keep]),
            "validation": _pack_split(val_rows, labels[keep]),
        }
        return self._prepared

    @property
    def classes_(self):
        return self._prepare()["classes"]

    @property
    def n_features(self):
        return self._prepare()["X"].shape[1]

    @property
    def mean_(self):
        return self._prepare()["mean"]

    @property
    def scale_(self):
        return self._prepare()["scale"]

    # ---- sampling --------------------------------------------------------------------
    def sample_task(self, n_support, n_query, random_state=None, *, split="train"):
        """Draw one task (one class).

        Parameters
        ----------
        n_support : int >= 1
            Number of support rows.
        n_query : int >= 0
            Number of query rows (fewer when the class is too small, see the class notes).
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness for the task draw.
        split : {"train", "validation"}, default="train"
            Which part of each class's rows to draw from.

        Returns
        -------
        support : ndarray of shape (n_support, n_features), float64
        query : ndarray of shape (n_query', n_features), float64
        """
        supports, queries = self.sample_tasks(
            1, n_support, n_query, random_state=random_state, split=split
        )
        return supports[0], queries[0]

    def _drawable(self, split, m, q):
        """Indices of the classes of ``split`` that can give a task, and the target count.

        Warns (once per split and sizes) when classes are skipped or targets shrink.
        """
        prep = self._prepare()
        part = prep[split]
        sizes = part["sizes"]
        if len(sizes) == 0 and split == "validation" and prep["validation_fraction"] == 0:
            raise ValueError(
                "split='validation' needs validation_fraction > 0 (it is 0, so there "
                "is no validation split)."
            )
        if len(sizes) == 0:
            raise ValueError(
                f"No class has at least 2 rows in the {split} split; lower or raise "
                "validation_fraction."
            )
        ok = np.flatnonzero(sizes > m)
        if ok.size == 0:
            largest = int(sizes.max())
            raise ValueError(
                f"No class of the {split} split has more than n_support={m} rows (largest: "
                f"{largest}), so no task can hold a target row apart from its support; lower "
                "n_support (support_size) or validation_fraction."
            )
        smallest = ok[np.argmin(sizes[ok])]
        q_eff = min(q, int(sizes[smallest]) - m)
        warned = self.__dict__.setdefault("_size_warnings", set())
        if (split, m, q) not in warned and (ok.size < len(sizes) or q_eff < q):
            warned.add((split, m, q))
            self._warn_small(part, split, m, q, ok, smallest, q_eff)
        return ok, q_eff

    @staticmethod
    def _warn_small(part, split, m, q, ok, smallest, q_eff):
        msgs = []
        skipped = np.setdiff1d(np.arange(len(part["sizes"])), ok)
        if skipped.size:
            msgs.append(
                f"class(es) {part['classes'][skipped][:10].tolist()} with "
                f"{part['sizes'][skipped][:10].tolist()} rows in the {split} split have at "
                f"most n_support={m} (support_size) rows and are not drawn"
            )
        if q_eff < q:
            label, size = part["classes"][smallest].item(), int(part["sizes"][smallest])
            msgs.append(
                f"class {label!r} has {size} rows "
                f"in the {split} split, fewer than n_support + n_query (support_size + "
                f"n_targets of LearnedFlowSampler) = {m} + {q}; its "
                f"support rows are kept out of its targets, so every task gets "
                f"n_query={q_eff} targets instead of {q}"
            )
        warnings.warn("ClassTasks: " + "; ".join(msgs) + ".", UserWarning, stacklevel=4)

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None, *, split="train"):
        """Draw a batch of tasks (classes drawn independently, with repetition).

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Number of support rows per task.
        n_query : int >= 0
            Number of query rows per task (fewer when a class is too small, see the class
            notes).
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness for the task draws.
        split : {"train", "validation"}, default="train"
            Which part of each class's rows to draw from.

        Returns
        -------
        supports : ndarray of shape (n_tasks, n_support, n_features), float64
        queries : ndarray of shape (n_tasks, n_query', n_features), float64
            Rows distinct from the task's support rows (and from each other).
        """
        if split not in ("train", "validation"):
            raise InvalidParameterError(f"split must be 'train' or 'validation', got {split!r}.")
        B, m, q = _check_sizes(n_tasks, n_support, n_query)
        prep = self._prepare()
        part = prep[split]
        ok, q = self._drawable(split, m, q)
        rng = _rng(random_state)
        cls = ok[rng.integers(0, ok.size, size=B)]
        local = _distinct_rows(rng, part["sizes"][cls], m + q)
        rows = part["rows"][part["offsets"][cls][:, None] + local]  # (B, m + q)
        X = prep["X"][rows]  # (B, m + q, d)
        return np.ascontiguousarray(X[:, :m]), np.ascontiguousarray(X[:, m:])


# --------------------------------------------------------------------------------------
# one data set: random support/target splits
# --------------------------------------------------------------------------------------
class SingleDatasetTasks(_TaskDistribution):
    """Random support/target splits of one data set: the tasks of ``fit(X)``.

    Each task takes ``k = min(n_support, n_samples - 1)`` distinct rows of ``X`` as its
    support and draws its ``n_query`` target rows uniformly, with replacement, among the
    *other* rows, so a task's support rows are never among its targets and a model trained
    on these tasks learns to generate points it has not been shown.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Finite numeric data with at least 2 rows.

    Attributes
    ----------
    n_features : int
        Number of columns of ``X``.

    Notes
    -----
    The supports have ``k`` rows, fewer than ``n_support`` when ``X`` has at most
    ``n_support`` rows. Up to 4096 rows every task permutes all rows at once (vectorized);
    above, it draws its ``k`` support rows without replacement and redraws the few targets
    that hit one of them.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import SingleDatasetTasks
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> Ss, Qs = SingleDatasetTasks(X).sample_tasks(3, 4, 6, random_state=0)
    >>> Ss.shape, Qs.shape
    ((3, 4, 2), (3, 6, 2))
    >>> bool(np.isin(Qs[0, :, 0], Ss[0, :, 0]).any())  # targets avoid the support rows
    False
    """

    def __init__(self, X):
        self.X = X

    def __repr__(self):
        shape = getattr(self.X, "shape", None)
        return f"SingleDatasetTasks(X=<{'x'.join(map(str, shape)) if shape else '?'}>)"

    def _data(self):
        X = getattr(self, "_X", None)
        if X is None:
            try:
                X = np.asarray(self.X, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"X must be a numeric array, could not convert: {exc}") from None
            if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] == 0:
                raise ValueError(f"X must be 2-D with at least 2 rows, got shape {X.shape}.")
            if not np.all(np.isfinite(X)):
                raise ValueError("X contains NaN or infinity.")
            self._X = X
        return X

    @property
    def n_features(self):
        return self._data().shape[1]

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None):
        """Draw a batch of support/target splits.

        Parameters
        ----------
        n_tasks : int >= 1
            Number of tasks ``B``.
        n_support : int >= 1
            Support rows per task (at most ``n_samples - 1`` are used).
        n_query : int >= 0
            Target rows per task.
        random_state : None, int, RandomState or Generator, default=None
            Source of randomness.

        Returns
        -------
        supports : ndarray of shape (n_tasks, k, n_features), float64
            ``k = min(n_support, n_samples - 1)`` distinct rows per task.
        queries : ndarray of shape (n_tasks, n_query, n_features), float64
            Rows of ``X`` that are not in the task's support.
        """
        X = self._data()
        B, m, q = _check_sizes(n_tasks, n_support, n_query)
        rng = _rng(random_state)
        N = X.shape[0]
        k = min(m, N - 1)
        if N <= 4096:
            order = np.argsort(rng.random((B, N)), axis=1)
            support_idx = order[:, :k]
            pick = rng.integers(0, N - k, size=(B, q))
            query_idx = np.take_along_axis(order[:, k:], pick, axis=1)
            return X[support_idx], X[query_idx]
        # large X: draw k distinct rows per task without permuting all N rows
        support_idx = np.stack([rng.choice(N, size=k, replace=False) for _ in range(B)])
        query_idx = rng.integers(0, N, size=(B, q))
        clash = (query_idx[:, :, None] == support_idx[:, None, :]).any(axis=2)
        while clash.any():
            query_idx[clash] = rng.integers(0, N, size=int(clash.sum()))
            clash = (query_idx[:, :, None] == support_idx[:, None, :]).any(axis=2)
        return X[support_idx], X[query_idx]


# --------------------------------------------------------------------------------------
# scarce labelled data: few-shot class tasks and task augmentation
# --------------------------------------------------------------------------------------
class FewShotClassTasks(_TaskDistribution):
    """Few-shot tasks of a labelled data set: every class with a handful of rows is a task.

    Made for scarce data (classes of 10-100 rows). A task draws a class uniformly among the
    classes that have at least ``n_support + min_targets`` rows, takes ``n_support``
    distinct rows of it as the support and draws its ``n_query`` targets uniformly, *with
    replacement*, among the class's *other* rows. So a task's support rows are never among
    its targets, the target count never shrinks, and a class of ``k`` rows serves every
    support size up to ``k - min_targets`` (unlike :class:`ClassTasks`, whose targets are
    distinct rows and whose target count shrinks to the smallest class).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Finite numeric data.
    y : array-like of shape (n_samples,)
        Class labels; each class is a task.
    classes : array-like, optional
        The labels used (default: all). Classes with fewer than ``2 + min_targets`` rows are
        left out with a :class:`UserWarning` (they cannot give a support of 2 rows, the
        fewest that has a spread, and ``min_targets`` target rows).
    min_targets : int, default=2
        Fewest distinct rows of a class left for the targets of a task.

    Attributes
    ----------
    classes_ : ndarray
        Labels of the usable classes, sorted.
    class_sizes_ : ndarray of int
        Their row counts.
    n_features : int
        Number of columns of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import FewShotClassTasks
    >>> X = np.random.default_rng(0).normal(size=(30, 2))
    >>> tasks = FewShotClassTasks(X, np.repeat([0, 1, 2], 10))
    >>> S, Q = tasks.sample_tasks(4, 7, 16, random_state=0)
    >>> S.shape, Q.shape, tasks.class_sizes_.tolist()
    ((4, 7, 2), (4, 16, 2), [10, 10, 10])
    """

    def __init__(self, X, y, *, classes=None, min_targets=2):
        self.X = X
        self.y = y
        self.classes = classes
        self.min_targets = min_targets

    def __repr__(self):
        shape = getattr(self.X, "shape", None)
        dims = "x".join(map(str, shape)) if shape else type(self.X).__name__
        return f"FewShotClassTasks(X=<{dims}>, y=..., min_targets={self.min_targets!r})"

    def _prepare(self):
        if getattr(self, "_prepared", None) is not None:
            return self._prepared
        X, y, _ = _check_labelled(self.X, self.y, 0.0, False)
        q_min = check_int(self.min_targets, "min_targets")
        labels = np.unique(y) if self.classes is None else np.unique(np.asarray(self.classes))
        rows = [np.flatnonzero(y == c) for c in labels]
        sizes = np.array([len(r) for r in rows], dtype=np.int64)
        small = sizes < 2 + q_min
        if small.all():
            raise ValueError(
                f"FewShotClassTasks needs a class with at least {2 + q_min} rows; the largest "
                f"has {int(sizes.max()) if sizes.size else 0}."
            )
        if small.any():
            warnings.warn(
                f"FewShotClassTasks: class(es) {labels[small][:10].tolist()} with "
                f"{sizes[small][:10].tolist()} rows have fewer than 2 + min_targets = "
                f"{2 + q_min} rows and are not used.",
                UserWarning,
                stacklevel=3,
            )
        keep = np.flatnonzero(~small)
        self._prepared = {
            "X": X,
            "classes": labels[keep],
            "sizes": sizes[keep],
            "rows": [rows[k] for k in keep],
            "min_targets": q_min,
        }
        return self._prepared

    @property
    def classes_(self):
        return self._prepare()["classes"]

    @property
    def class_sizes_(self):
        return self._prepare()["sizes"]

    @property
    def n_features(self):
        return self._prepare()["X"].shape[1]

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None):
        """Draw a batch of tasks (classes drawn independently, with repetition).

        Parameters
        ----------
        n_tasks : int >= 1
        n_support : int >= 1
            Support rows per task (distinct rows of the class).
        n_query : int >= 0
            Target rows per task (drawn with replacement among the class's other rows).
        random_state : None, int, RandomState or Generator, default=None

        Returns
        -------
        supports : ndarray of shape (n_tasks, n_support, n_features), float64
        queries : ndarray of shape (n_tasks, n_query, n_features), float64
        """
        B, m, q = _check_sizes(n_tasks, n_support, n_query)
        prep = self._prepare()
        ok = np.flatnonzero(prep["sizes"] >= m + prep["min_targets"])
        if ok.size == 0:
            raise ValueError(
                f"No class has n_support + min_targets = {m + prep['min_targets']} rows "
                f"(largest: {int(prep['sizes'].max())}); lower n_support."
            )
        rng = _rng(random_state)
        cls = ok[rng.integers(0, ok.size, size=B)]
        sizes = prep["sizes"][cls]
        local = _distinct_rows(rng, sizes, m)  # (B, m) support rows, distinct
        # targets: uniform over the size - m other rows (rank among non-support rows)
        rank = (rng.random((B, q)) * (sizes - m)[:, None]).astype(np.int64)
        others = np.sort(local, axis=1)
        for j in range(m):  # shift past every support row at or below the rank
            rank += rank >= others[:, j : j + 1]
        index = np.concatenate([local, rank], axis=1)
        rows = np.stack([prep["rows"][c][ix] for c, ix in zip(cls, index, strict=True)])
        X = prep["X"][rows]
        return np.ascontiguousarray(X[:, :m]), np.ascontiguousarray(X[:, m:])


def rotate_tasks(supports, queries, random_state=None, *, center="support"):
    """Map every task by its own uniformly random (Haar) orthogonal matrix.

    Task ``b`` is mapped by ``x -> (x - c_b) R_b + c_b`` with one matrix ``R_b`` for its
    support *and* its queries, so every distance within a task (support to support, support
    to query, query to query) is kept: the task's shape (spectrum, tails, clusters) survives,
    its orientation, which cannot transfer to new classes, is randomized.

    Parameters
    ----------
    supports : array-like of shape (B, m, d)
    queries : array-like of shape (B, n, d)
    random_state : None, int, RandomState or Generator, default=None
        Source of the rotations.
    center : {"support", "origin"}, default="support"
        Rotate about each task's support mean (its location is kept), or about the origin
        (for centred data: locations are rotated too).

    Returns
    -------
    supports : ndarray of shape (B, m, d)
    queries : ndarray of shape (B, n, d)

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import rotate_tasks
    >>> S, Q = np.ones((2, 3, 4)), np.zeros((2, 5, 4))
    >>> S2, Q2 = rotate_tasks(S, Q, random_state=0)
    >>> bool(np.allclose(np.linalg.norm(S2 - Q2[:, :1], axis=-1), 2.0))
    True
    """
    if center not in ("support", "origin"):
        raise InvalidParameterError(f"center must be 'support' or 'origin', got {center!r}.")
    S, Q = np.asarray(supports, dtype=np.float64), np.asarray(queries, dtype=np.float64)
    if S.ndim != 3 or Q.ndim != 3 or S.shape[0] != Q.shape[0] or S.shape[2] != Q.shape[2]:
        raise ValueError(
            f"expected supports (B, m, d) and queries (B, n, d), got {S.shape} and {Q.shape}."
        )
    rot = _haar_rotations(_rng(random_state), (S.shape[0],), S.shape[2])
    if center == "origin":
        return S @ rot, Q @ rot
    c = S.mean(axis=1, keepdims=True)
    return (S - c) @ rot + c, (Q - c) @ rot + c


class RotatedTasks(_TaskDistribution):
    """A task source whose tasks are randomly rotated: the rotation augmentation.

    Every task of ``source`` is mapped by :func:`rotate_tasks` (a fresh Haar-random
    orthogonal matrix per task, applied to its support and its queries alike). Few classes
    are far too few tasks for a meta-learner; the rotations remove the class identity and
    keep the within-class structure, which is what transfers to new classes. This is the
    default augmentation of ``LearnedFlowSampler().fit(X, y)``.

    Parameters
    ----------
    source : task source
        Any object with ``sample_tasks(n_tasks, n_support, n_query, random_state, **kw)``
        (extra keywords, e.g. ``split``, are passed through).
    center : {"support", "origin"}, default="support"
        See :func:`rotate_tasks`.

    Attributes
    ----------
    n_features : int
        The source's dimension.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import ClassTasks, RotatedTasks
    >>> X = np.random.default_rng(0).normal(size=(40, 3))
    >>> tasks = RotatedTasks(ClassTasks(X, np.repeat([0, 1], 20), random_state=0))
    >>> S, Q = tasks.sample_tasks(5, 4, 6, random_state=0)
    >>> S.shape, Q.shape
    ((5, 4, 3), (5, 6, 3))
    """

    _param_names = ("source", "center")

    def __init__(self, source, *, center="support"):
        self.source = source
        self.center = center

    @property
    def n_features(self):
        return self.source.n_features

    def sample_tasks(self, n_tasks, n_support, n_query, random_state=None, **kwargs):
        """Draw ``n_tasks`` tasks of the source and rotate each.

        Returns
        -------
        supports : ndarray of shape (n_tasks, n_support, n_features)
        queries : ndarray of shape (n_tasks, n_query, n_features)
        """
        rng = _rng(random_state)
        S, Q = self.source.sample_tasks(n_tasks, n_support, n_query, random_state=rng, **kwargs)
        return rotate_tasks(S, Q, rng, center=self.center)

    def sample_task(self, n_support, n_query, random_state=None, **kwargs):
        """Draw one task (task 0 of :meth:`sample_tasks`)."""
        S, Q = self.sample_tasks(1, n_support, n_query, random_state=random_state, **kwargs)
        return S[0], Q[0]
