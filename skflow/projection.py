"""Learned linear projections for kernel smoothing: :class:`FlowProjection`.

The isotropic Nadaraya-Watson (NW) field weighs support points by their Euclidean distance,
which wastes the kernel's bandwidth on uninformative directions of anisotropic data. A linear
map ``P`` (k x d) before the kernel, ``w_i ∝ exp(-||P (x - t s_i)||^2 / (2 sigma_t^2))`` with
the values ``s_i`` kept in input space, fixes that when ``P`` keeps the informative directions.
PCA keeps the directions of highest *variance*, which need not be those. ``FlowProjection``
learns ``P`` by minimizing the conditional flow-matching loss of the NW field itself on held-out
points (random support/query splits of the data, or of each task), so the metric is chosen for
the generator that will use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ._array import resolve_device
from ._validation import check_data, check_int, check_random_state, check_real, check_sigma_min
from .field import NWField
from .paths import as_path
from .samplers._atomic import atomic_fit
from .threads import limit_threads

__all__ = ["FlowProjection", "nw_flow_matching_loss"]

# Query draws (x_1, t, x_0) of one task in one training step.
_QUERY_DRAWS = 256


def _check_finite(out: np.ndarray, dtype: Any) -> np.ndarray:
    """The projected array, or a ValueError if it overflows ``dtype`` (e.g. float32 input
    with a projection fitted on data of magnitude above float32's range)."""
    if not np.all(np.isfinite(out)):
        raise ValueError(
            f"the projection of finite input is not finite in {np.dtype(dtype).name}: the "
            "magnitudes overflow; pass float64 input or rescale the data."
        )
    return out


def nw_flow_matching_loss(
    support: Any,
    query: Any,
    projection: Any = None,
    *,
    sigma_min: float = 0.01,
    n_draws: int = 16,
    random_state: Any = None,
) -> float:
    """Held-out conditional flow-matching loss of the (projected) NW field of a support.

    Monte-Carlo estimate of ``E ||u_t(x_t) - (x_1 - (1 - sigma_min) x_0)||^2`` with ``x_1``
    a query point, ``x_0 ~ N(0, I)``, ``x_t = t x_1 + sigma_t x_0`` and ``u_t`` the NW velocity
    of ``support`` with weights from ``||P (x - t s_i)||^2``. Each query point gets ``n_draws``
    pairs ``(t, x_0)``; the times are stratified (one uniform draw in each of ``n_draws`` equal
    sub-intervals of [0, 1]), which keeps the estimate unbiased and tames the heavy tail from
    ``t`` near 1, where ``sigma_t`` is small. The same ``random_state`` gives the same draws, so
    two projections compared at one seed are compared on common random numbers.

    Parameters
    ----------
    support : array-like of shape (m, d)
        Support set of the field.
    query : array-like of shape (n, d)
        Held-out points ``x_1`` of the same distribution.
    projection : array-like of shape (k, d), optional
        ``P``; None is the isotropic kernel.
    sigma_min : float, default=0.01
        Noise level of the path at ``t = 1``.
    n_draws : int, default=16
        Pairs ``(t, x_0)`` per query point.
    random_state : int, RandomState instance or None, default=None
        Seed of the draws.

    Returns
    -------
    loss : float
        Mean over query points and draws of the squared error (summed over features).

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.projection import nw_flow_matching_loss
    >>> rng = np.random.RandomState(0)
    >>> S, Q = rng.normal(size=(50, 3)), rng.normal(size=(20, 3))
    >>> loss = nw_flow_matching_loss(S, Q, random_state=0)
    >>> loss > 0, loss == nw_flow_matching_loss(S, Q, random_state=0)
    (True, True)
    """
    support = check_array(support, dtype=np.float64, input_name="support")
    query = check_array(query, dtype=np.float64, input_name="query")
    if support.shape[1] != query.shape[1]:
        raise ValueError(f"support has {support.shape[1]} features but query has {query.shape[1]}.")
    path = as_path(None, sigma_min)
    n_draws = check_int(n_draws, "n_draws", minimum=1)
    rng = check_random_state(random_state)
    n, d = query.shape
    strata = np.arange(n_draws, dtype=np.float64)
    t = (strata[None, :] + rng.uniform(size=(n, n_draws))) / n_draws
    t = t.reshape(-1)
    x0 = rng.standard_normal((n * n_draws, d))
    x1 = np.repeat(query, n_draws, axis=0)
    xt = path.sample_conditional(x0, x1, t)
    v = NWField(support, path=path, projection=projection).velocity(xt, t)
    target = path.conditional_velocity(x0, x1, t)
    return float(np.mean(np.sum((v - target) ** 2, axis=1)))


def _batched_nw_velocity(x, support, t, P, path):
    """NW velocity of a batch of tasks (Torch, differentiable in ``P``).

    ``x`` (B, q, d), ``support`` (B, m, d), ``t`` (B, q), ``P`` (k, d): the field of
    :func:`skflow.field.nw_velocity` with ``projection=P`` for each task, computed by one
    prepared :class:`~skflow.field.NWField` over the batch of supports.
    """
    return NWField(support, path=path, projection=P).velocity(x, t)


class FlowProjection(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Linear projection learned for the Nadaraya-Watson flow by flow matching.

    Learns ``P`` (``n_components`` x d) minimizing the conditional flow-matching loss of the
    NW field whose weights use ``||P (x - t s_i)||^2`` and whose values stay the support points
    in input space. Each step draws ``n_tasks`` random support/query splits (of ``X``, or of
    the rows of one task label each when ``fit(X, y)`` gets task labels), and for at most 256
    query points ``x_1`` per split draws ``t ~ U(0, 1)``, ``x_0 ~ N(0, I)``,
    ``x_t = t x_1 + sigma_t x_0``; the loss is the mean of
    ``||u_t(x_t) - (x_1 - (1 - sigma_min) x_0)||^2`` with ``u_t`` the NW velocity of the
    support split (the field of :func:`skflow.field.nw_velocity`, batched over the step's
    tasks and differentiated by Torch autograd with respect to ``P``). The times are
    stratified within each task (every ``t`` is still uniform on [0, 1]). ``P`` starts at the
    PCA components of ``X`` and is optimized with Adam. Its scale is learned too: it sets the
    kernel's width in the projected space.

    All randomness comes from ``random_state`` (a local ``torch.Generator`` and a NumPy
    ``RandomState``); the global seeds are never touched.

    Parameters
    ----------
    n_components : int, default=2
        Dimension ``k`` of the projection (at most ``min(n_samples, n_features)``).
    sigma_min : float, default=0.01
        Noise level of the path at ``t = 1`` (use the sampler's).
    n_iter : int, default=200
        Adam steps.
    learning_rate : float, default=0.05
        Adam learning rate.
    support_size : int, optional
        Support rows of each split; half the rows of the task (at least 1) when None. Each task
        needs at least ``support_size + 1`` rows.
    n_tasks : int, default=8
        Support/query splits (tasks) per step.
    random_state : int, RandomState instance or None, default=None
        Seed of the initialization, the splits and the draws.
    device : {"cpu", "cuda", "auto"} or "cuda:N", default="cpu"
        Torch device of the optimization.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The learned ``P``.
    mean_ : ndarray of shape (n_features,)
        Mean of the training rows.
    loss_curve_ : list of float
        Training loss (mean over the step's tasks) at each step.
    n_iter_ : int
        Steps run.
    n_features_in_ : int
        Number of features seen in ``fit``.

    See Also
    --------
    sklearn.decomposition.PCA : the initialization.
    skflow.NWFlowSampler : takes ``projection=FlowProjection(...)``.
    nw_flow_matching_loss : the objective, evaluated on held-out points.

    Notes
    -----
    ``transform(X) = (X - mean_) @ components_.T`` is affine, so the projection can define the
    kernel geometry of :class:`~skflow.NWFlowSampler`. ``inverse_transform`` uses the
    Moore-Penrose pseudo-inverse: ``Z @ pinv(components_).T + mean_``, the minimum-norm preimage
    (the point of ``mean_ + rowspace(P)`` that projects to ``Z``); it inverts ``transform``
    exactly only on that affine subspace, as PCA's does.

    Along the conditional path the error is ``v - target = (m(x_t) - x_1) / sigma_t``, with
    ``m`` the NW local mean, so the loss weighs ``t`` near 1 by ``1 / sigma_t^2`` and its
    gradient there by about ``1 / sigma_t^4`` (the weights switch between support points at
    cell boundaries). For a small ``sigma_min`` (relative to the spacing of the projected
    support) the stochastic gradient is therefore heavy-tailed: on the test problems a step's
    gradient had a signal-to-noise ratio of about 0.2 at ``sigma_min=0.01`` even with 4096
    draws, and Adam mostly random-walks. Learning is reliable from ``sigma_min`` of about
    0.05 (data of unit scale); a projection learned with a larger ``sigma_min`` can be used by
    a sampler with a smaller one. The learned scale of ``P`` is tuned to the training
    ``sigma_min``.

    The optimisation is chaotic: a change in the last bits of ``X`` or of one gradient can make
    Adam settle on a different ``P`` (on the task family of the tests, perturbing ``X`` at the
    level of rounding error moves some seeds between a projection onto the informative
    directions and one onto noise). Parallel reductions (matrix products, sums) split their
    work by the thread count and round differently, so ``fit`` runs the PCA and the
    optimisation with one Torch and one BLAS thread (restored afterwards): the same
    ``random_state`` gives the same ``components_``, bit for bit, whatever the thread
    settings. The last bits of single-threaded arithmetic can still differ between CPUs
    (vector widths) and library versions, and so can the projection found.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.projection import FlowProjection
    >>> X = np.random.RandomState(0).normal(size=(60, 5))
    >>> proj = FlowProjection(n_components=2, n_iter=5, random_state=0).fit(X)
    >>> proj.components_.shape, proj.transform(X).shape, len(proj.loss_curve_)
    ((2, 5), (60, 2), 5)
    >>> proj.inverse_transform(proj.transform(X)).shape
    (60, 5)
    """

    def __init__(
        self,
        n_components: int = 2,
        *,
        sigma_min: float = 0.01,
        n_iter: int = 200,
        learning_rate: float = 0.05,
        support_size: int | None = None,
        n_tasks: int = 8,
        random_state: Any = None,
        device: str = "cpu",
    ):
        self.n_components = n_components
        self.sigma_min = sigma_min
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.support_size = support_size
        self.n_tasks = n_tasks
        self.random_state = random_state
        self.device = device

    def _validate_params(self) -> None:
        check_int(self.n_components, "n_components", minimum=1)
        check_sigma_min(self.sigma_min)
        check_int(self.n_iter, "n_iter", minimum=1)
        check_real(self.learning_rate, "learning_rate", low=0.0, low_open=True)
        if self.support_size is not None:
            check_int(self.support_size, "support_size", minimum=1)
        check_int(self.n_tasks, "n_tasks", minimum=1)
        resolve_device(self.device)

    def _tasks(self, X: np.ndarray, y: Any) -> list[np.ndarray]:
        """Row indices of each task, checked to allow a support/query split."""
        if y is None:
            groups = [np.arange(X.shape[0])]
        else:
            y = np.asarray(y)
            if y.ndim != 1 or y.shape[0] != X.shape[0]:
                raise ValueError(
                    f"y must be 1-D task labels with one entry per row of X; got shape "
                    f"{y.shape} for {X.shape[0]} rows."
                )
            groups = [np.flatnonzero(y == label) for label in np.unique(y)]
        for rows in groups:
            size = self.support_size
            if rows.shape[0] < 2 or (size is not None and rows.shape[0] <= size):
                need = 2 if size is None else size + 1
                raise ValueError(
                    f"FlowProjection splits every task into support and query rows and needs "
                    f"at least {need} rows per task; got n_samples = {rows.shape[0]}."
                )
        return groups

    @atomic_fit
    def fit(self, X: Any, y: Any = None) -> FlowProjection:
        """Learn the projection.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows.
        y : array-like of shape (n_samples,), optional
            Task labels: each label's rows form one task (support/query splits stay inside a
            task). None treats ``X`` as one task.

        Returns
        -------
        self : FlowProjection

        Notes
        -----
        A fit that raises or is interrupted (``KeyboardInterrupt`` too) leaves the estimator
        as it was: fitted, the same projection; unfitted, ``NotFittedError``.
        """
        self._validate_params()
        X = check_data(validate_data, self, X, dtype=[np.float64, np.float32])
        n, d = X.shape
        groups = self._tasks(X, y)
        k = self.n_components
        if k > min(n, d):
            raise ValueError(
                f"n_components={k} must be <= min(n_samples, n_features) = {min(n, d)} "
                f"(n_samples = {n}, n_features = {d})."
            )
        rng = check_random_state(self.random_state)
        # One thread: the result of this chaotic optimisation must not depend on the machine's
        # thread count (see Notes).
        with limit_threads(1):
            P, mean, loss_curve = self._optimize(X, groups, rng)
        if not np.all(np.isfinite(P)):
            raise ValueError(
                "FlowProjection diverged (non-finite projection): X is too large in "
                "magnitude for the flow-matching loss; rescale it, e.g. with StandardScaler."
            )
        self.components_, self.mean_, self.loss_curve_ = P, mean, loss_curve
        self.n_iter_ = self.n_iter
        return self

    def _optimize(self, X: np.ndarray, groups: list[np.ndarray], rng) -> tuple:
        """Adam on the flow-matching loss from the PCA components; returns ``P`` (k, d) as a
        NumPy array, the mean (d,) of ``X`` and the loss curve (the estimator untouched)."""
        import torch

        d, k = X.shape[1], self.n_components
        device = resolve_device(self.device)
        generator = torch.Generator(device="cpu").manual_seed(int(rng.randint(2**31 - 1)))

        X64 = X.astype(np.float64)
        mean = X64.mean(axis=0)
        Xc = X64 - mean
        init = PCA(n_components=k, svd_solver="full").fit(Xc).components_
        P = torch.tensor(init, dtype=torch.float64, device=device, requires_grad=True)
        data = torch.as_tensor(Xc, device=device)
        optimizer = torch.optim.Adam([P], lr=float(self.learning_rate))
        # Linear decay to 0: the stochastic gradient of this loss is heavy-tailed (see Notes),
        # and a decaying step averages its noise out of the final iterate.
        n_iter = self.n_iter
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0 - i / n_iter)
        path = as_path(None, self.sigma_min)

        loss_curve = []
        for _ in range(self.n_iter):
            support, query = self._draw_splits(groups, rng, data)
            B, q, _ = query.shape
            x0 = torch.randn(B, q, d, generator=generator, dtype=torch.float64).to(device)
            # Stratified times: every t ~ U(0, 1), one per stratum of [0, 1] in each task.
            strata = torch.stack([torch.randperm(q, generator=generator) for _ in range(B)])
            u = torch.rand(B, q, generator=generator, dtype=torch.float64)
            t = ((strata.to(torch.float64) + u) / q).to(device)
            xt = path.sample_conditional(x0, query, t[..., None])
            v = _batched_nw_velocity(xt, support, t, P, path)
            loss = ((v - path.conditional_velocity(x0, query)) ** 2).sum(dim=-1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            loss_curve.append(float(loss.detach()))
        return P.detach().cpu().numpy(), mean, loss_curve

    def _draw_splits(self, groups, rng, data):
        """``n_tasks`` random support/query splits, stacked: (B, m, d) and (B, q, d).

        Tasks are drawn uniformly (with replacement) among the labels. All tasks of one step
        share ``m`` (``support_size``, or half the rows of the smallest drawn task). Each task
        contributes ``q = 256`` query draws, cycling through its (shuffled) query rows, so a
        query row gets several ``(t, x_0)`` draws when fewer than 256 rows are left.
        """
        import torch

        drawn = [groups[i] for i in rng.randint(len(groups), size=self.n_tasks)]
        smallest = min(rows.shape[0] for rows in drawn)
        m = self.support_size or max(1, smallest // 2)
        perms = [rng.permutation(rows) for rows in drawn]
        support = torch.stack([data[p[:m]] for p in perms])
        query = torch.stack(
            [data[p[m:][np.arange(_QUERY_DRAWS) % (p.shape[0] - m)]] for p in perms]
        )
        return support, query

    @property
    def _n_features_out(self) -> int:
        return self.components_.shape[0]

    def transform(self, X: Any) -> np.ndarray:
        """Project: ``(X - mean_) @ components_.T``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
            float32 for float32 input, float64 otherwise.
        """
        check_is_fitted(self)
        X = check_data(validate_data, self, X, reset=False, dtype=[np.float64, np.float32])
        with np.errstate(over="ignore", invalid="ignore"):
            Z = (X - self.mean_.astype(X.dtype)) @ self.components_.T.astype(X.dtype)
        return _check_finite(Z, X.dtype)

    def inverse_transform(self, X: Any) -> np.ndarray:
        """Map projected points back: ``X @ pinv(components_).T + mean_`` (minimum norm).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        Z = check_array(X, dtype=[np.float64, np.float32])
        k = self.components_.shape[0]
        if Z.shape[1] != k:
            raise ValueError(f"X has {Z.shape[1]} features, but the projection has {k}.")
        pinv = np.linalg.pinv(self.components_)
        with np.errstate(over="ignore", invalid="ignore"):
            out = (Z @ pinv.T.astype(Z.dtype) + self.mean_.astype(Z.dtype)).astype(Z.dtype)
        return _check_finite(out, Z.dtype)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
