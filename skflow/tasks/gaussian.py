"""Random Gaussian mixtures, with their exact population velocity under the OT path."""

from typing import NamedTuple

import numpy as np

from .._validation import check_bool, check_int, check_real
from ..paths import as_path
from ._base import (
    SyntheticTasks,
    categorical,
    check_int_range,
    check_positive_range,
    haar_rotations,
    masked_dirichlet,
)
from ._device import t_categorical, t_haar_rotations, t_masked_dirichlet, t_uniform

__all__ = ["GaussianMixtureParams", "GaussianMixtureTasks"]


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


class GaussianMixtureTasks(SyntheticTasks):
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
        k_lo, k_hi = check_int_range(self.n_components, "n_components", 1)
        box = check_real(self.box, "box", low=0.0, low_open=True)
        s_lo, s_hi = check_positive_range(self.scale, "scale")
        return d, k_lo, k_hi, box, s_lo, s_hi, check_bool(self.anisotropic, "anisotropic")

    def sample_tasks(
        self, n_tasks, n_support, n_query, random_state=None, *, return_params=False,
        device=None, dtype=None,
    ):  # fmt: skip
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
            Also return the mixtures, for :meth:`velocity` (the same draws either way;
            NumPy draws only).
        device : None, str or torch.device, default=None
            None: NumPy arrays (float64). A device: the same law drawn in Torch there
            (a local :class:`torch.Generator` seeded by ``random_state``).
        dtype : torch.dtype, default=None
            Floating dtype of the tensors (``torch.float32`` when None).

        Returns
        -------
        supports : ndarray or tensor of shape (n_tasks, n_support, n_features)
        queries : ndarray or tensor of shape (n_tasks, n_query, n_features)
        params : GaussianMixtureParams, only if ``return_params``
            The task's mixture: component ``k`` of task ``b`` is
            ``N(means[b, k], rotations[b, k] diag(scales[b, k]**2) rotations[b, k]^T)``
            with weight ``weights[b, k]`` (0 for unused slots).

        Examples
        --------
        >>> S, Q = GaussianMixtureTasks(3).sample_tasks(4, 5, 7, random_state=0, device="cpu")
        >>> tuple(S.shape), tuple(Q.shape), S.dtype, S.device.type
        ((4, 5, 3), (4, 7, 3), torch.float32, 'cpu')
        """
        if return_params and device is not None:
            raise ValueError("return_params=True needs the NumPy draw (device=None).")
        S, Q, params = self._sample(n_tasks, n_support, n_query, random_state, device, dtype)
        return (S, Q, params) if return_params else (S, Q)

    @staticmethod
    def _draw(rng, B, n, d, k_lo, k_hi, box, s_lo, s_hi, anisotropic):
        n_active = rng.integers(k_lo, k_hi + 1, size=B)
        weights, _ = masked_dirichlet(rng, n_active, k_hi)
        means = rng.uniform(-box, box, size=(B, k_hi, d))
        if anisotropic:
            rot = haar_rotations(rng, (B, k_hi), d)
            scales = rng.uniform(s_lo, s_hi, size=(B, k_hi, d))
        else:
            rot = np.broadcast_to(np.eye(d), (B, k_hi, d, d))
            scales = np.repeat(rng.uniform(s_lo, s_hi, size=(B, k_hi))[..., None], d, axis=2)
        params = GaussianMixtureParams(weights, means, rot, scales)

        comp = categorical(rng, weights, n, n_active)  # (B, n)
        z = rng.standard_normal((B, n, d))
        if anisotropic:
            return _rotated_points(means, rot * scales[..., None, :], comp, z), params
        X = np.take_along_axis(means, comp[:, :, None], axis=1)  # (B, n, d)
        X += np.take_along_axis(scales[..., 0], comp, axis=1)[:, :, None] * z
        return X, params

    @staticmethod
    def _draw_torch(gen, B, n, d, k_lo, k_hi, box, s_lo, s_hi, anisotropic, *, device, dtype):
        """The law of :meth:`_draw` in Torch: points (B, n, d) and their mixtures' means."""
        import torch

        n_active = torch.randint(k_lo, k_hi + 1, (B,), generator=gen, device=device)
        weights, _ = t_masked_dirichlet(gen, n_active, k_hi, dtype)
        means = t_uniform(gen, -box, box, (B, k_hi, d), device, dtype)
        comp = None
        if anisotropic:
            rot = t_haar_rotations(gen, (B, k_hi), d, device, dtype)
            scales = t_uniform(gen, s_lo, s_hi, (B, k_hi, d), device, dtype)
            A = rot * scales[..., None, :]  # (B, K, d, d): R diag(scales)
        else:
            sigma = t_uniform(gen, s_lo, s_hi, (B, k_hi), device, dtype)
        comp = t_categorical(gen, weights, n, n_active)  # (B, n)
        z = torch.randn((B, n, d), generator=gen, device=device, dtype=dtype)
        X = torch.gather(means, 1, comp[..., None].expand(B, n, d))
        if anisotropic:  # every slot's product z A_k^T, (B, K, n, d), then the point's slot
            Z = torch.einsum("bnj,bkij->bkni", z, A)
            X = X + torch.gather(Z, 1, comp[:, None, :, None].expand(B, 1, n, d))[:, 0]
        else:
            X = X + torch.gather(sigma, 1, comp)[..., None] * z
        return X, means

    @staticmethod
    def posterior_mean(x, t, params, *, sigma_min=0.01, path=None):
        """Exact ``E[x_1 | x_t = x]`` under the path (OT by default), for the mixtures ``params``.

        With ``x_1`` from the mixture and ``x_t = alpha_t x_1 + sigma_t x_0`` (``alpha_t = t``
        on the OT path), ``x_t`` is a Gaussian mixture with components
        ``N(alpha_t mu_k, alpha_t^2 Sigma_k + sigma_t^2 I)``; the posterior mean is the
        responsibility-weighted ``mu_k + alpha_t Sigma_k (alpha_t^2 Sigma_k + sigma_t^2 I)^{-1}
        (x - alpha_t mu_k)``, computed in each component's eigenbasis (no matrix inverse).

        Parameters
        ----------
        x : array-like of shape (B, n, n_features)
            Points at time ``t``; ``B`` is the number of tasks of ``params``.
        t : float or array-like of shape (B, n)
            Times in [0, 1].
        params : GaussianMixtureParams
            From ``sample_tasks(..., return_params=True)``.
        sigma_min : float, default=0.01
            Path noise at ``t = 1`` (of the default OT path; ignored when ``path`` is given).
        path : GaussianPath, optional
            The probability path; default ``OTPath(sigma_min)``.

        Returns
        -------
        mean : ndarray of shape (B, n, n_features), float64
        """
        path = as_path(path, sigma_min)
        x = np.asarray(x, dtype=np.float64)
        t = np.broadcast_to(np.asarray(t, dtype=np.float64), x.shape[:2])[..., None]
        var_noise = path.sigma(t) ** 2  # (B, n, 1)
        t = path.alpha(t)  # the signal coefficient (the time itself on the OT path)
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

    def velocity(self, x, t, params, *, sigma_min=0.01, path=None):
        """Exact population velocity of the path (OT by default) for the mixtures ``params``.

        ``u_t(x) = (E[x_1 | x_t = x] - (1 - sigma_min) x) / sigma_t`` on the OT path (``path``'s
        :meth:`~skflow.paths.GaussianPath.velocity_from_mean` otherwise): the marginal field that
        conditional flow matching regresses on in expectation, here without sampling noise
        (a low-variance regression target,
        ``LearnedFlowSampler(training=TrainingOptions(target="exact"))``).

        Parameters
        ----------
        x : array-like of shape (B, n, n_features)
        t : float or array-like of shape (B, n)
            Times in [0, 1].
        params : GaussianMixtureParams
            From ``sample_tasks(..., return_params=True)``.
        sigma_min : float, default=0.01
            Path noise at ``t = 1`` (of the default OT path; ignored when ``path`` is given).
        path : GaussianPath, optional
            The probability path; default ``OTPath(sigma_min)``.

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
        path = as_path(path, sigma_min)
        x = np.asarray(x, dtype=np.float64)
        tt = np.broadcast_to(np.asarray(t, dtype=np.float64), x.shape[:2])[..., None]
        mean = self.posterior_mean(x, tt[..., 0], params, path=path)
        return path.velocity_from_mean(mean, x, tt)


def _rotated_points(means, A, comp, z):
    """Points ``mu_k + A_k z`` (B, n, d) of the slots ``comp`` (B, n), from the means
    (B, K, d), the factors ``A = R diag(scales)`` (B, K, d, d) and the normals ``z`` (B, n, d).

    One batched GEMM ``z A_k^T`` per used slot, written only to the rows of that slot (the
    ``where=`` of :func:`numpy.add`): the same floating-point operations as adding every
    slot's product masked to zero, so the same points bit for bit, without the K full-size
    masked temporaries (``benchmarks/bench_task_draw.py``).

    Examples
    --------
    >>> import numpy as np
    >>> A = np.stack([np.eye(2), 2 * np.eye(2)])[None]  # (1, 2, 2, 2)
    >>> _rotated_points(np.zeros((1, 2, 2)), A, np.array([[0, 1]]), np.ones((1, 2, 2)))
    array([[[1., 1.],
            [2., 2.]]])
    """
    X, product = np.empty_like(z), np.empty_like(z)
    for k in range(A.shape[1]):
        mask = comp == k
        if mask.any():
            np.matmul(z, np.swapaxes(A[:, k], -1, -2), out=product)
            np.add(means[:, k, None, :], product, out=X, where=mask[:, :, None])
    return X
