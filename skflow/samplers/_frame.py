"""What the learned sampler's training and inference share: support sizes, frames, networks.

:func:`support_bounds` reads the ``support_size`` parameter (validation, the training tasks'
sizes, the few-shot score's support rows); :func:`task_frame` is the per-task normalisation
that training applies to every task and inference to every support, so both must be the
same function; :func:`predictive_frame` is the other per-task frame (``normalize="predictive"``):
the mean and the Cholesky factor of a Gaussian predictive fitted on the training classes, so
that the network starts from, and corrects, that Gaussian; :func:`build_model` constructs the
network for training and for unpickling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import InvalidParameterError, check_choice, check_int

__all__ = [
    "FrameMap",
    "build_model",
    "into_frame",
    "is_task_source",
    "log_spaced_sizes",
    "predictive_frame",
    "spread_mask",
    "support_bounds",
    "task_frame",
    "warn_no_spread",
]


def support_bounds(support_size: Any) -> tuple[int, int]:
    """``(low, high)`` of ``support_size``: an int, a pair of ints or ``"auto"`` (``(2, 50)``).

    Parameters
    ----------
    support_size : int, (int, int) or "auto"
        The ``support_size`` parameter of :class:`~skflow.LearnedFlowSampler`.

    Returns
    -------
    bounds : tuple of int
        ``(low, high)`` with ``low <= high``; ``(k, k)`` for an int ``k``.

    Raises
    ------
    InvalidParameterError
        For anything else, a pair of non-integers or a pair with ``low > high``.

    Examples
    --------
    >>> support_bounds((3, 8)), support_bounds(10), support_bounds("auto")
    ((3, 8), (10, 10), (2, 50))
    """
    if isinstance(support_size, str):
        check_choice(support_size, "support_size", ("auto",))
        return 2, 50
    if isinstance(support_size, tuple | list):
        if len(support_size) != 2:
            raise InvalidParameterError(
                f"support_size must be an int, a pair (low, high) or 'auto', got {support_size!r}."
            )
        lo = check_int(support_size[0], "support_size[0]")
        hi = check_int(support_size[1], "support_size[1]")
        if lo > hi:
            raise InvalidParameterError(
                f"support_size=(low, high) needs low <= high, got {support_size!r}."
            )
        return lo, hi
    k = check_int(support_size, "support_size")
    return k, k


def log_spaced_sizes(lo: int, hi: int, n_sizes: int) -> np.ndarray:
    """Up to ``n_sizes`` support sizes from ``lo`` to ``hi``, evenly spaced on a log scale and
    rounded: the sizes that validation and the predictive frame's selection look at.

    Examples
    --------
    >>> log_spaced_sizes(2, 50, 4).tolist(), log_spaced_sizes(5, 5, 3).tolist()
    ([2, 6, 17, 50], [5])
    """
    return np.unique(np.round(np.geomspace(lo, hi, n_sizes)).astype(int))


def task_frame(supports: Any, fallback: float) -> tuple[Any, Any]:
    """Centre ``(B, 1, d)`` and scale ``(B, 1, 1)`` of every support ``(B, m, d)``.

    The centre is the support mean, the scale its per-coordinate standard deviation (ddof 1),
    so a normalised support has unit spread whatever the data's units; a support of one row
    (or of identical rows, exactly) has no spread: its centre is that row and its scale
    ``fallback``. Works on NumPy arrays and Torch tensors alike.

    Parameters
    ----------
    supports : ndarray or tensor of shape (B, m, d)
    fallback : float
        Scale of a support without spread.

    Returns
    -------
    centre : array of shape (B, 1, d)
    scale : array of shape (B, 1, 1)

    Examples
    --------
    >>> import numpy as np
    >>> centre, scale = task_frame(np.array([[[0.0, 0.0], [2.0, 2.0]]]), 1.0)
    >>> centre.ravel().tolist(), round(float(scale.ravel()[0]), 4)
    ([1.0, 1.0], 1.4142)
    """
    m, d = supports.shape[-2], supports.shape[-1]
    centre = supports.mean(axis=-2, keepdims=True)
    ss = ((supports - centre) ** 2).sum(axis=(-2, -1), keepdims=True)
    scale = (ss / (max(m - 1, 1) * d)) ** 0.5
    # no spread means identical rows, exactly: never an absolute threshold, so ``a S + b``
    # frames as ``S`` for any a (issue 63); such a support is centred on its row itself
    first = supports[..., :1, :]
    tiny = abs(supports - first).sum(axis=(-2, -1), keepdims=True) == 0
    centre = centre * ~tiny + first * tiny
    scale = scale * ~tiny + fallback * tiny
    return centre, scale


#: Largest ratio ``offset / spread`` of a support that float64 holds: beyond it the rows'
#: differences keep fewer than ~6 significant digits (``eps * 1e10 ~ 2e-6`` of the spread),
#: so a sampler refuses the support and asks to centre the data (issue 63).
MAX_OFFSET_RATIO = 1e10


def spread_mask(supports: Any, owner: str) -> np.ndarray:
    """Which supports ``(B, m, d)`` have spread; refuses those float64 cannot resolve.

    A support whose rows are all equal (one row, or duplicates) has no spread, hence no scale
    to set a bandwidth from: samplers that take their scale from the support return copies of
    its row (:func:`warn_no_spread`). A support whose spread is nonzero but below
    ``offset / MAX_OFFSET_RATIO`` (e.g. ``1e8 + 1e-3 * noise``) is refused: its rows keep
    fewer than ~6 significant digits of their differences.

    Parameters
    ----------
    supports : ndarray of shape (B, m, d)
    owner : str
        The sampler's name, for the message.

    Returns
    -------
    has_spread : ndarray of bool, shape (B,)

    Raises
    ------
    ValueError
        For a spread below float64 resolution at the support's offset.

    Examples
    --------
    >>> import numpy as np
    >>> spread_mask(np.stack([np.ones((3, 2)), np.eye(3)[:, :2]]), "X").tolist()
    [False, True]
    """
    S = np.asarray(supports, dtype=np.float64)
    centre, scale = task_frame(S, 0.0)
    offset = np.abs(centre).max(axis=-1, keepdims=True)
    unresolved = (scale > 0) & (scale * MAX_OFFSET_RATIO < offset)
    if np.any(unresolved):
        b = int(np.flatnonzero(unresolved.ravel())[0])
        raise ValueError(
            f"{owner}: the support's spread ({float(scale.ravel()[b]):.3g}) is below float64 "
            f"resolution at its offset ({float(offset.ravel()[b]):.3g}; ratio above "
            f"{MAX_OFFSET_RATIO:.0e}), so its rows differ only in their last digits; centre "
            "the data first (e.g. X - X.mean(axis=0), the same shift for the support and "
            "everything compared with it)."
        )
    return scale.reshape(-1) > 0


def warn_no_spread(owner: str, batch_index: int | None = None) -> None:
    """The :class:`~skflow.exceptions.MemorizationWarning` of a support without spread.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_no_spread("LedoitWolfSampler")
    >>> "copies" in str(caught[0].message)
    True
    """
    import warnings

    from ..exceptions import MemorizationWarning

    which = "" if batch_index is None else f" (task {batch_index} of the batch)"
    warnings.warn(
        f"the support{which} has no spread (a single row, or identical rows): there is no "
        f"scale to set a bandwidth from, so {owner} returns copies of that row. Pass more "
        "distinct rows, or an absolute bandwidth: NWFlowSampler(sigma_min=0.01, "
        "normalize=False) samples the row plus sigma_min-sized noise in data units.",
        MemorizationWarning,
        stacklevel=4,
    )


def predictive_frame(estimator: Any, supports: Any) -> tuple[Any, Any, Any]:
    """Affine frame of every support from a Gaussian predictive: centre, factor, inverse.

    ``estimator.predictive_moments`` (a fitted Gaussian arm of :mod:`skflow.samplers.classical`)
    gives the mean ``c`` and covariance ``C = L L^T`` of the predictive law of each support;
    a row ``x`` is ``z = L^{-1} (x - c)`` in the frame, where that law is ``N(0, I)``.

    Parameters
    ----------
    estimator : fitted classical Gaussian sampler
    supports : ndarray of shape (B, m, d)

    Returns
    -------
    centre : ndarray of shape (B, 1, d)
    factor : ndarray of shape (B, d, d)
        Lower-triangular ``L`` (float64).
    inverse : ndarray of shape (B, d, d)
        ``L^{-1}``.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.samplers import PooledGaussianSampler
    >>> X, y = np.random.default_rng(0).normal(size=(40, 2)), np.repeat(np.arange(4), 10)
    >>> est = PooledGaussianSampler().fit(X, y)
    >>> centre, factor, inverse = predictive_frame(est, X[None, :5])
    >>> bool(np.allclose(factor[0] @ inverse[0], np.eye(2)))
    True
    """
    S = np.asarray(supports, dtype=np.float64)
    means, covs = estimator.predictive_moments(S)
    d = S.shape[-1]
    # a floor on the spectrum keeps the factor invertible for a singular estimate
    floor = 1e-9 * max(float(np.max(np.trace(covs, axis1=-2, axis2=-1))) / d, 1e-300)
    factor = np.linalg.cholesky(covs + floor * np.eye(d))
    return means[:, None, :], factor, np.linalg.inv(factor)


def into_frame(X: Any, centre: Any, matrix: Any) -> Any:
    """Rows ``X`` (B, n, d) mapped by ``x -> matrix (x - centre)``: NumPy or Torch alike.

    With ``matrix`` the inverse factor of :func:`predictive_frame` this is the map into the
    frame; velocities and noise come back with the factor itself (``v -> L v``).

    Parameters
    ----------
    X : array of shape (B, n, d)
    centre : array of shape (B, 1, d) or 0
    matrix : array of shape (B, d, d)

    Returns
    -------
    array of shape (B, n, d)

    Examples
    --------
    >>> import numpy as np
    >>> into_frame(np.ones((1, 2, 2)), np.ones((1, 1, 2)), 2 * np.eye(2)[None]).tolist()
    [[[0.0, 0.0], [0.0, 0.0]]]
    """
    # Torch tensors and NumPy >= 2 arrays have ``mT``; older NumPy swaps the axes
    swapped = matrix.mT if hasattr(matrix, "mT") else np.swapaxes(matrix, -1, -2)
    return (X - centre) @ swapped


@dataclass(frozen=True)
class FrameMap:
    """The frame of a batch of supports: rows into it, velocities back to data units.

    Either the support's own frame (``centre``, ``scale``: ``x -> (x - centre) / scale``), a
    predictive frame (``centre``, ``factor`` ``L``, ``inverse`` ``L^{-1}``:
    ``x -> L^{-1} (x - centre)``) or none (the identity). Built once per flow and reused at every
    solver step; NumPy or Torch arrays alike.

    Examples
    --------
    >>> import numpy as np
    >>> frame = FrameMap(centre=np.ones((1, 1, 2)), scale=np.full((1, 1, 1), 2.0))
    >>> frame.into(np.full((1, 1, 2), 3.0)).tolist()
    [[[1.0, 1.0]]]
    >>> frame.velocity_out(np.ones((1, 1, 2))).tolist()
    [[[2.0, 2.0]]]
    """

    centre: Any = 0.0
    scale: Any = None
    factor: Any = None
    inverse: Any = None

    def into(self, x: Any) -> Any:
        """Rows (B, n, d) in the frame."""
        if self.inverse is not None:
            return into_frame(x, self.centre, self.inverse)
        # a frame without spread (scale 0) collapses onto its row: velocity_out maps any
        # velocity to 0, so any finite map into it will do (it divides by 1)
        return x if self.scale is None else (x - self.centre) / (self.scale + (self.scale == 0))

    def velocity_out(self, v: Any) -> Any:
        """Velocities (B, n, d) of the frame's flow, in data units."""
        if self.factor is not None:
            return into_frame(v, 0.0, self.factor)
        return v if self.scale is None else v * self.scale


def is_task_source(X: Any) -> bool:
    """Whether ``X`` is a task source (callable ``sample_tasks``) rather than an array.

    Parameters
    ----------
    X : object
        What ``fit`` was given.

    Returns
    -------
    bool
        True for an object with a callable ``sample_tasks`` and no ``__array__``.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import GaussianMixtureTasks
    >>> is_task_source(GaussianMixtureTasks(n_features=2)), is_task_source(np.zeros((3, 2)))
    (True, False)
    """
    source = hasattr(X, "sample_tasks") and callable(X.sample_tasks)
    return source and not hasattr(X, "__array__")


def build_model(cls: type, config: dict) -> Any:
    """Construct a network without consuming the global Torch RNG (its state is restored).

    Parameters
    ----------
    cls : type
        The network class, e.g. :class:`~skflow.nn.transformer.CrossAttentionVelocity`.
    config : dict
        Its keyword arguments.

    Returns
    -------
    torch.nn.Module

    Examples
    --------
    >>> from skflow.nn.transformer import CrossAttentionVelocity
    >>> build_model(CrossAttentionVelocity, {"n_features": 2, "d_model": 8}).n_features
    2
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        return cls(**config)
