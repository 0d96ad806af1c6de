"""NWFlowSampler: the exact, zero-parameter flow of a support set as a scikit-learn estimator."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import field as F
from .._device import resolve_device, use_torch_backend
from ..paths import OTPath
from ..solvers import integrate
from ._base import BaseFlowSampler

__all__ = ["NWFlowSampler"]


class NWFlowSampler(BaseFlowSampler):
    """Exact support-conditioned flow: the Nadaraya-Watson velocity field of a support set.

    ``fit(S)`` stores the support; sampling integrates
    ``u_t(x) = (sum_i w_i(x, t) s_i - (1 - sigma_min) x) / sigma_t`` from Gaussian noise at
    ``t = 0`` to ``t = 1``, where ``w(x, t)`` are Gaussian-kernel weights with the OT bandwidth
    ``h(t) = sigma_t / t``. With the exact bandwidth the flow transports ``N(0, I)`` to the
    Gaussian KDE of the support with bandwidth ``sigma_min``; ``score_samples`` returns that
    density in closed form. Nothing is learned: conditioning on a new support is free
    (``sample(n, support=S_new)``).

    Parameters
    ----------
    bandwidth : {"ot"} or float or callable, default="ot"
        ``"ot"``: the exact ``h(t) = sigma_t / t``. A positive float scales it; a callable maps
        an array of times in (0, 1] to bandwidths (rescaled coordinates ``x / t``). Only the
        weights change; the affine map of the path stays the same.
    sigma_min : float, default=0.01
        Path noise at ``t = 1`` (in (0, 1)); the terminal KDE's bandwidth.
    solver : {"euler", "midpoint", "heun", "rk4", "dopri5"}, default="heun"
        ODE solver (see :mod:`skflow.solvers`).
    n_steps : int, default=100
        Steps of the fixed-step solvers.
    rtol, atol : float, default=1e-5
        Tolerances of ``"dopri5"``.
    backend : {"auto", "numpy", "torch"}, default="auto"
        Array library of the field and the solver. ``"auto"`` picks Torch on a CUDA device and
        NumPy otherwise. Inputs and outputs are NumPy arrays whatever the backend.
    device : {"cpu", "cuda", "auto"} or "cuda:N", default="cpu"
        Torch device (Torch backend only).
    chunk_size : int, optional
        Queries per block of the ``(chunk, m)`` kernel matrix; default keeps it near 64 MiB.
    support_size : int, optional
        Support rows per task in the few-shot :meth:`score` (half of each task when None).
    random_state : int, RandomState instance or None, default=None
        Seed of the starting noise when a method is not given one.

    Attributes
    ----------
    support_ : ndarray of shape (m, n_features)
        The support set (float32 if given in float32, float64 otherwise).
    n_features_in_ : int
        Number of features.
    path_ : OTPath
        The probability path.

    See Also
    --------
    sklearn.neighbors.KernelDensity : the terminal law of the exact flow.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow import NWFlowSampler
    >>> S = np.random.RandomState(0).normal(size=(20, 2))
    >>> sampler = NWFlowSampler(sigma_min=0.05, random_state=0).fit(S)
    >>> sampler.sample(5).shape
    (5, 2)
    >>> sampler.weights(np.zeros((3, 2)), 0.0).sum(axis=1)
    array([1., 1., 1.])
    """

    def __init__(
        self,
        bandwidth: Any = "ot",
        sigma_min: float = 0.01,
        *,
        solver: str = "heun",
        n_steps: int = 100,
        rtol: float = 1e-5,
        atol: float = 1e-5,
        backend: str = "auto",
        device: str = "cpu",
        chunk_size: int | None = None,
        support_size: int | None = None,
        random_state: Any = None,
    ):
        self.bandwidth = bandwidth
        self.sigma_min = sigma_min
        self.solver = solver
        self.n_steps = n_steps
        self.rtol = rtol
        self.atol = atol
        self.backend = backend
        self.device = device
        self.chunk_size = chunk_size
        self.support_size = support_size
        self.random_state = random_state

    # -- fitting ---------------------------------------------------------------------------
    def _validate_params(self) -> None:
        self.path_ = OTPath(self.sigma_min)
        F._check_bandwidth(self.bandwidth)
        self._validate_solver_params()
        use_torch_backend(self.backend, self.device)
        if self.chunk_size is not None:
            from ._base import _check_positive_int

            _check_positive_int(self.chunk_size, "chunk_size")

    def fit(self, X: Any, y: Any = None) -> NWFlowSampler:
        """Condition on the support set ``X``.

        Parameters
        ----------
        X : array-like of shape (m, n_features)
            Support set (at least one row).
        y : None
            Ignored.

        Returns
        -------
        self : NWFlowSampler
        """
        self._validate_params()
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=1)
        self.support_ = X.copy()
        return self

    # -- backend ---------------------------------------------------------------------------
    def _use_torch(self) -> bool:
        return use_torch_backend(self.backend, self.device)

    def _to_backend(self, a: np.ndarray) -> Any:
        if not self._use_torch():
            return a
        import torch

        return torch.as_tensor(a, device=resolve_device(self.device))

    def _kwargs(self) -> dict:
        return {
            "sigma_min": self.sigma_min,
            "bandwidth": self.bandwidth,
            "chunk_size": self.chunk_size,
        }

    def _field(self, support: Any):
        kwargs = self._kwargs()

        def velocity(t, x):
            return F.nw_velocity(x, support, t, **kwargs)

        return velocity

    def _call(self, fn, X, t, support, **extra):
        check_is_fitted(self)
        self._validate_params()
        support = self._check_support(support)
        X = self._check_queries(X)
        t = np.asarray(t, dtype=np.float64)
        if X.dtype != support.dtype:
            dtype = np.result_type(X.dtype, support.dtype)
            X, support = X.astype(dtype), support.astype(dtype)
        out = fn(self._to_backend(X), self._to_backend(support), t, **extra)
        return self._to_numpy(out)

    # -- the field -------------------------------------------------------------------------
    def velocity(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Exact velocity ``u_t(X)`` of the flow conditioned on the support.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
            States at time ``t``.
        t : float or array-like of shape (n,)
            Times in [0, 1] (both ends included).
        support : array-like of shape (m, n_features), optional
            In-context support; the fitted one when None.

        Returns
        -------
        V : ndarray of shape (n, n_features)
        """
        return self._call(F.nw_velocity, X, t, support, **self._kwargs())

    def weights(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Nadaraya-Watson weights ``w_i(X, t)``.

        Returns
        -------
        W : ndarray of shape (n, m)
            Rows are probability vectors.
        """
        kw = {"sigma_min": self.sigma_min, "bandwidth": self.bandwidth}
        return self._call(F.nw_weights, X, t, support, **kw)

    def effective_sample_size(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Kish effective sample size ``1 / sum_i w_i^2`` of the weights at ``(X, t)``.

        Returns
        -------
        n_eff : ndarray of shape (n,)
            ``m`` at ``t = 0``; tends to 1 as the kernel collapses on the nearest neighbour.
        """
        return self._call(F.nw_effective_sample_size, X, t, support, **self._kwargs())

    def divergence(self, X: Any, t: Any, *, support: Any = None) -> np.ndarray:
        """Exact divergence of the velocity field at ``(X, t)``.

        Returns
        -------
        div : ndarray of shape (n,)
        """
        return self._call(F.nw_divergence, X, t, support, **self._kwargs())

    # -- densities -------------------------------------------------------------------------
    def score_samples(self, X: Any, *, support: Any = None) -> np.ndarray:
        """Log-density of the flow's terminal law at ``X``.

        With ``bandwidth="ot"`` the exactly integrated flow samples the Gaussian KDE of the
        support with bandwidth ``sigma_min``, whose log-density is returned in closed form
        (identical to ``KernelDensity(bandwidth=sigma_min).score_samples``). For any other
        bandwidth there is no closed form; the log-density is then obtained by integrating the
        flow backwards from ``t = 1`` to ``t = 0`` with the exact divergence (instantaneous
        change of variables), using this sampler's solver and ``n_steps``.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        support : array-like of shape (m, n_features), optional

        Returns
        -------
        log_density : ndarray of shape (n,)
        """
        if self.bandwidth == "ot":
            return self._call(
                F.nw_log_density,
                X,
                1.0,
                support,
                sigma_min=self.sigma_min,
                chunk_size=self.chunk_size,
            )
        return self._ode_log_density(X, support)

    def _ode_log_density(self, X: Any, support: Any) -> np.ndarray:
        check_is_fitted(self)
        self._validate_params()
        support = self._check_support(support)
        X = self._check_queries(X).astype(support.dtype)
        S, xb = self._to_backend(support), self._to_backend(X)
        d = X.shape[1]
        kwargs = self._kwargs()

        # Reverse time s = 1 - t; the last column accumulates the integral of the divergence.
        def reverse(s, state):
            x = state[:, :d]
            v, div = F.nw_velocity_and_divergence(x, S, 1.0 - s, **kwargs)
            return F.get_namespace(v).concat([-v, div[:, None]], axis=1)

        xp = F.get_namespace(xb)
        state0 = xp.concat([xb, xp.full((X.shape[0], 1), 0.0, xb)], axis=1)
        grid = self._time_grid()
        sol = integrate(reverse, state0, grid, method=self.solver, rtol=self.rtol, atol=self.atol)
        end = self._to_numpy(sol.y).astype(np.float64)
        x0, integral = end[:, :d], end[:, d]
        log_p0 = -0.5 * np.sum(x0**2, axis=1) - 0.5 * d * np.log(2 * np.pi)
        return log_p0 - integral

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
