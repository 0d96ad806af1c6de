"""The plug-in's per-support frame and its automatic terminal bandwidth.

The exact flow of a support ``S`` transports ``N(0, I)`` to the Gaussian KDE of ``S`` with
bandwidth ``sigma_min``. Run in a frame ``z = (x - c) / s`` (centre ``c``, scale ``s``) with
terminal noise ``sigma`` and mapped back, it samples the KDE of ``S`` with bandwidth
``s * sigma`` in data units. So a bandwidth ``h_b`` per support of a batch rides on a
per-support scale ``s_b = h_b / sigma`` while every support shares one ``sigma``, and the
field itself does not change. :func:`support_frames` computes ``(c, s, sigma)`` for the
``sigma_min`` and ``normalize`` parameters of :class:`~skflow.NWFlowSampler`.

The rule ``sigma_min="auto"`` (:func:`auto_bandwidth`) is

``h = max(RULE_SCALE * m ** -RULE_EXPONENT * spread, COPY_FLOOR * nn / sqrt(d))``

with ``spread`` the support's root-mean-square per-coordinate standard deviation (ddof 1) and
``nn`` its median nearest-neighbour distance. The first term is the bandwidth that minimised
MMD² on held-out draws of real classes (it falls with ``m`` much faster than Scott's
``m ** (-1 / (d + 4))``: few-shot supports are not large-sample KDEs); the second keeps the
typical displacement of a sample, ``h sqrt(d)``, at a fixed fraction of the spacing of the
support, so that the memorisation ratio stays near 0.5 or above. The constants are fitted by
``benchmarks/bench_auto_bandwidth.py --fit`` (see docs/auto_bandwidth.md).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._frame import task_frame
from ._kernel_geometry import median_nn_distance

__all__ = [
    "BANDWIDTH_RULES",
    "COPY_FLOOR",
    "FRAME_SIGMA_MAX",
    "RULE_EXPONENT",
    "RULE_SCALE",
    "auto_bandwidth",
    "support_frames",
]

#: Named rules accepted by ``NWFlowSampler(sigma_min=...)``.
BANDWIDTH_RULES = ("auto",)
#: ``h = RULE_SCALE * m ** -RULE_EXPONENT * spread``: the MMD term of the rule.
RULE_SCALE = 1.27
RULE_EXPONENT = 0.37
#: ``h >= COPY_FLOOR * nn / sqrt(d)``: the floor that keeps samples off the support points.
COPY_FLOOR = 0.67
#: Largest terminal noise of the frame's flow (``sigma_min`` must stay below 1).
FRAME_SIGMA_MAX = 0.9


def _batch(supports: np.ndarray) -> tuple[np.ndarray, bool]:
    S = np.asarray(supports, dtype=np.float64)
    return (S, True) if S.ndim == 3 else (S[None], False)


def support_nn_distances(S: np.ndarray) -> np.ndarray:
    """Median nearest-neighbour distance of every support ``(B, m, d)``; NaN when ``m < 2``."""
    B, m, _ = S.shape
    if m < 2:
        return np.full(B, np.nan)
    if m > 256:  # the subsampled scan of the copy check keeps large supports affordable
        return np.array([median_nn_distance(s) for s in S])
    C = S - S.mean(axis=1, keepdims=True)
    sq = np.einsum("bij,bij->bi", C, C)
    d2 = sq[:, :, None] + sq[:, None, :] - 2.0 * np.einsum("bid,bjd->bij", C, C)
    d2[:, np.arange(m), np.arange(m)] = np.inf
    return np.sqrt(np.maximum(np.median(d2.min(axis=2), axis=1), 0.0))


def rule_sigma(m: int) -> float:
    """The rule's MMD term relative to the support's spread, ``RULE_SCALE * m**-RULE_EXPONENT``."""
    return RULE_SCALE * float(max(m, 1)) ** -RULE_EXPONENT


def auto_bandwidth(supports: Any, fallback: float = 0.0) -> np.ndarray:
    """The automatic terminal bandwidth of every support, in the data's units.

    Parameters
    ----------
    supports : array-like of shape (m, d) or (B, m, d)
        One support or a batch of supports of one size.
    fallback : float, default=0.0
        Spread of a support without any (one row, or identical rows): 0, so its bandwidth is
        0 and its flow returns copies of the row (no scale in data units to take one from).

    Returns
    -------
    h : float or ndarray of shape (B,)
        ``max(RULE_SCALE * m**-RULE_EXPONENT * spread, COPY_FLOOR * nn / sqrt(d))``; a float
        for one support.

    Examples
    --------
    >>> import numpy as np
    >>> S = np.random.default_rng(0).normal(size=(20, 4))
    >>> h = auto_bandwidth(S)
    >>> bool(np.isclose(auto_bandwidth(10 * S + 3), 10 * h))  # equivariant
    True
    """
    S, batched = _batch(supports)
    m, d = S.shape[1:]
    _, spread = task_frame(S, fallback)
    h = rule_sigma(m) * spread[:, 0, 0]
    nn = support_nn_distances(S)
    h = np.where(np.isfinite(nn), np.maximum(h, COPY_FLOOR * np.nan_to_num(nn) / math.sqrt(d)), h)
    return h if batched else float(h[0])


def support_frames(supports: Any, sigma_min: Any, normalize: bool) -> tuple:
    """Frame ``(centre, scale, sigma)`` of the flow of every support.

    Parameters
    ----------
    supports : array-like of shape (m, d) or (B, m, d)
    sigma_min : float or "auto"
        The sampler's parameter: a float is the terminal noise of the frame's flow (in data
        units without a frame, in units of the support's spread with one); ``"auto"`` the
        rule of :func:`auto_bandwidth`.
    normalize : bool
        Whether the flow runs in each support's frame (always, for ``"auto"``).

    Returns
    -------
    centre : ndarray of shape (1, d) or (B, 1, d), or None
        None when there is no frame (the flow runs in data units).
    scale : ndarray of shape (1, 1) or (B, 1, 1), or None
    sigma : float
        Terminal noise of the frame's flow, shared by the whole batch; the KDE bandwidth of
        support ``b`` in data units is ``scale[b] * sigma``.

    Examples
    --------
    >>> import numpy as np
    >>> S = np.array([[0.0, 0.0], [2.0, 2.0]])
    >>> c, s, sigma = support_frames(S, 0.5, True)
    >>> c.tolist(), round(float(s[0, 0] * sigma), 4)
    ([[1.0, 1.0]], 0.7071)
    """
    if not isinstance(sigma_min, str) and not normalize:
        return None, None, float(sigma_min)
    S, batched = _batch(supports)
    # 0 for a support without spread: its frame collapses onto the row (copies, issue 63)
    centre, spread = task_frame(S, 0.0)
    if isinstance(sigma_min, str):
        # the shared sigma depends on m alone, so a task's result does not depend on the
        # other tasks of its batch; the frame is the support's own (centre, spread) whenever
        # the MMD term of the rule binds, and wider when the copy floor does
        sigma = min(rule_sigma(S.shape[1]), FRAME_SIGMA_MAX)
        scale = auto_bandwidth(S)[:, None, None] / sigma
    else:
        sigma, scale = float(sigma_min), spread
    if not batched:
        centre, scale = centre[0], scale[0]
    return centre, scale, sigma
