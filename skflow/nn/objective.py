"""The flow-matching objective of meta-training: training times, regression targets, loss.

A training point of a task is a data point ``x_1`` (a target row), noise ``x_0 ~ N(0, I)`` and a
time ``t`` (:func:`sample_times`); the network's ``v(x_t, t; S)`` at ``x_t = t x_1 + sigma_t
x_0`` is regressed on a goal (:func:`flow_matching_loss`): the conditional target
``x_1 - (1 - sigma_min) x_0`` of the OT path (:class:`skflow.paths.OTPath`), the tasks'
population velocity (:func:`exact_goal`) or the marginal NW field of a reference set of the
task (:func:`marginal_goal`). The optimisation loop is :mod:`skflow.nn.training`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .._validation import InvalidParameterError
from ..paths import GaussianPath, as_path

__all__ = [
    "H_MAX",
    "MARGINAL_REFERENCE_FACTOR",
    "TARGETS",
    "TIME_SAMPLINGS",
    "exact_goal",
    "flow_matching_loss",
    "marginal_goal",
    "sample_times",
]

TIME_SAMPLINGS = ("uniform", "log-bandwidth")
TARGETS = ("conditional", "exact", "marginal")

# target="marginal": each task's reference set has this many times n_targets points (its
# first n_targets are the regression points), as in empirical flow matching.
MARGINAL_REFERENCE_FACTOR = 4

# Largest OT bandwidth h(t) = sigma_t / t drawn by the "log-bandwidth" time sampling; the
# corresponding smallest time is 1 / (H_MAX + 1 - sigma_min), about 0.0099.
H_MAX = 100.0


def sample_times(
    shape: tuple[int, ...],
    *,
    sigma_min: float = 0.01,
    method: str,
    generator: torch.Generator | None,
    device: Any = "cpu",
    path: GaussianPath | None = None,
) -> torch.Tensor:
    """Training times of the flow-matching loss.

    ``"uniform"``: ``t ~ U(0, 1)``. ``"log-bandwidth"``: the path's bandwidth
    ``h(t) = sigma_t / alpha_t`` is drawn log-uniformly on ``[sigma_1 / alpha_1, H_MAX]`` and
    inverted (on the OT path ``t = 1 / (h + 1 - sigma_min)``): every octave of kernel width
    gets the same share of the samples, which puts more of them at late times (small
    bandwidths) than uniform sampling.

    Parameters
    ----------
    shape : tuple of int
        Shape of the returned times, e.g. ``(B, n)``.
    sigma_min : float, default=0.01
        Path noise at ``t = 1`` of the default OT path (ignored when ``path`` is given).
    method : {"uniform", "log-bandwidth"}
    generator : torch.Generator or None
    device : torch device, default="cpu"
    path : GaussianPath, optional
        The probability path; default ``OTPath(sigma_min)``.

    Returns
    -------
    t : tensor of shape ``shape``, values in [0, 1]

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> sample_times((2, 3), sigma_min=0.01, method="uniform", generator=g).shape
    torch.Size([2, 3])
    """
    u = torch.rand(shape, generator=generator, device=device)
    if method == "uniform":
        return u
    if method == "log-bandwidth":
        path = as_path(path, sigma_min)
        lo, hi = math.log(path.sigma_min / path.alpha(1.0)), math.log(H_MAX)
        h = torch.exp(lo + (hi - lo) * u)
        return path.time_of_bandwidth(h).clamp(0.0, 1.0)
    raise InvalidParameterError(f"time_sampling must be one of {TIME_SAMPLINGS}, got {method!r}.")


def flow_matching_loss(
    model: Callable,
    supports: torch.Tensor,
    targets: torch.Tensor,
    x0: torch.Tensor,
    t: torch.Tensor,
    sigma_min: float = 0.01,
    goal: torch.Tensor | Callable | None = None,
    path: GaussianPath | None = None,
) -> torch.Tensor:
    """Mean over targets of ``||v(x_t, t; S) - goal||^2``.

    Parameters
    ----------
    model : callable
        ``model(x_t (B, n, d), supports (B, m, d), t (B, n)) -> (B, n, d)``.
    supports : tensor of shape (B, m, d)
    targets : tensor of shape (B, n, d)
        Data end points ``x_1``.
    x0 : tensor of shape (B, n, d)
        Noise end points.
    t : tensor of shape (B, n)
    sigma_min : float, default=0.01
        Terminal noise of the default OT path (ignored when ``path`` is given).
    goal : tensor of shape (B, n, d) or callable, optional
        Regression target, or ``goal(x_t, t) -> tensor (B, n, d)`` (evaluated without
        gradient); the path's conditional target (``x_1 - (1 - sigma_min) x_0`` on the OT
        path) when None.
    path : GaussianPath, optional
        The probability path; default ``OTPath(sigma_min)``.

    Returns
    -------
    loss : tensor of shape ()
        Squared error ``||v - target||^2`` averaged over tasks and target points.
    """
    path = as_path(path, sigma_min)
    xt = path.sample_conditional(x0, targets, t[..., None])
    if goal is None:
        goal = path.conditional_velocity(x0, targets, t[..., None])
    elif callable(goal):
        with torch.no_grad():
            goal = goal(xt, t)
    v = model(xt, supports, t)
    return ((v - goal) ** 2).sum(dim=-1).mean()


def marginal_goal(
    reference: torch.Tensor, sigma_min: float = 0.01, path: GaussianPath | None = None
) -> Callable:
    """Self-normalized marginal field of ``reference`` (B, n_ref, d): its exact NW velocity.

    The regression target of ``target="marginal"``, as in empirical flow matching.

    Parameters
    ----------
    reference : tensor of shape (B, n_ref, d)
        Each task's reference set.
    sigma_min : float, default=0.01
        Terminal noise of the default OT path (ignored when ``path`` is given).
    path : GaussianPath, optional
        The probability path; default ``OTPath(sigma_min)``.

    Returns
    -------
    goal : callable
        ``goal(x_t (B, n, d), t (B, n)) -> (B, n, d)``.

    Examples
    --------
    >>> import torch
    >>> reference = torch.tensor([[[1.0, -1.0]]])  # one task, one reference point
    >>> goal = marginal_goal(reference, sigma_min=0.01)
    >>> torch.allclose(goal(torch.zeros(1, 2, 2), torch.zeros(1, 2)), reference.expand(1, 2, 2))
    True
    """
    from .heads import NWAttentionHead

    head = NWAttentionHead(sigma_min=sigma_min, path=path)
    return lambda xt, t: head(xt, reference, t)


def exact_goal(velocity: Callable, device: Any) -> Callable:
    """The population velocity ``velocity(x_t (B, n, d), t (B, n))`` of NumPy tasks, as a
    regression target on tensors (``target="exact"``).

    Parameters
    ----------
    velocity : callable
        ``velocity(x (B, n, d) float64 ndarray, t (B, n) float64 ndarray) -> (B, n, d)``.
    device : torch device
        Where the target tensor goes.

    Returns
    -------
    goal : callable
        ``goal(x_t (B, n, d), t (B, n)) -> float32 tensor (B, n, d)``.

    Examples
    --------
    >>> import torch
    >>> goal = exact_goal(lambda x, t: -x, "cpu")
    >>> goal(torch.ones(1, 2, 2), torch.zeros(1, 2)).tolist()
    [[[-1.0, -1.0], [-1.0, -1.0]]]
    """

    def goal(xt, t):
        x = xt.detach().cpu().numpy().astype(np.float64)
        u = velocity(x, t.detach().cpu().numpy().astype(np.float64))
        return torch.as_tensor(np.asarray(u, dtype=np.float32), device=device)

    return goal
