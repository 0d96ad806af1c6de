"""Task augmentation: every task moved to a new centre drawn like the training classes' centres."""

import numpy as np

from .._array import dispatch
from .._validation import as_generator
from ._base import TransformedTasks
from ._device import torch_generator

__all__ = ["RecentredTasks", "recentre_tasks"]


def recentre_tasks(supports, queries, random_state=None):
    """Move every task of a batch to a new centre with the batch's law of centres.

    Task ``b`` (centre ``c_b``: the mean of its support and queries) is translated, support and
    queries alike, to ``c_bar + (c_i - c_j) / sqrt(2)`` for a random pair ``i != j`` of the
    batch (``c_bar`` the batch's mean centre). The new centres have the mean and covariance of
    the batch's centres, so where classes lie *relative to each other* (the law a shrinkage
    estimator uses) survives, and so does every task's shape and orientation (a shared
    within-class covariance); which centres the training classes had does not: a meta-learner
    cannot memorise a few classes' locations. Rotation (:func:`~skflow.tasks.rotate_tasks`)
    instead keeps the location and randomises the orientation.

    Parameters
    ----------
    supports : array-like or tensor of shape (B, m, d)
        ``B >= 2`` tasks (one task is returned unchanged).
    queries : array-like or tensor of shape (B, n, d)
    random_state : None, int, RandomState, Generator or torch.Generator, default=None
        Source of the pairs. Torch tensors (both) are moved in Torch on their device, the
        pairs drawn from a local :class:`torch.Generator` seeded by ``random_state``.

    Returns
    -------
    supports : ndarray or tensor of shape (B, m, d)
    queries : ndarray or tensor of shape (B, n, d)

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import recentre_tasks
    >>> rng = np.random.default_rng(0)
    >>> S, Q = rng.normal(size=(4, 3, 2)), rng.normal(size=(4, 5, 2))
    >>> S2, Q2 = recentre_tasks(S, Q, random_state=0)
    >>> bool(np.allclose(S2 - S2.mean(axis=1, keepdims=True), S - S.mean(axis=1, keepdims=True)))
    True
    """
    recentre = dispatch(supports, queries, numpy=_recentre_numpy, torch=_recentre_torch)
    return recentre(supports, queries, random_state)


def _recentre_numpy(supports, queries, random_state):
    """:func:`recentre_tasks` in NumPy (inputs that are not both tensors, read as float64)."""
    S, Q = np.asarray(supports, dtype=np.float64), np.asarray(queries, dtype=np.float64)
    B = _tasks_of(S, Q)
    if B < 2:
        return S, Q
    rng = as_generator(random_state)
    centres = np.concatenate([S, Q], axis=1).mean(axis=1)  # (B, d)
    i = rng.integers(0, B, size=B)
    j = (i + rng.integers(1, B, size=B)) % B  # j != i
    new = centres.mean(axis=0) + (centres[i] - centres[j]) / np.sqrt(2.0)
    shift = (new - centres)[:, None, :]
    return S + shift, Q + shift


def _tasks_of(S, Q) -> int:
    """The number of tasks ``B`` of supports (B, m, d) and queries (B, n, d) (NumPy or Torch)."""
    if S.ndim != 3 or Q.ndim != 3 or S.shape[0] != Q.shape[0] or S.shape[2] != Q.shape[2]:
        raise ValueError(
            f"expected supports (B, m, d) and queries (B, n, d), got {tuple(S.shape)} and "
            f"{tuple(Q.shape)}."
        )
    return int(S.shape[0])


def _recentre_torch(S, Q, random_state):
    """:func:`recentre_tasks` of Torch tensors (B, m, d) and (B, n, d), on their device."""
    import torch

    B = _tasks_of(S, Q)
    if B < 2:
        return S, Q
    gen = torch_generator(random_state, S.device)
    centres = torch.cat([S, Q], dim=1).mean(dim=1)  # (B, d)
    i = torch.randint(0, B, (B,), generator=gen, device=S.device)
    j = (i + torch.randint(1, B, (B,), generator=gen, device=S.device)) % B  # j != i
    new = centres.mean(dim=0) + (centres[i] - centres[j]) / np.sqrt(2.0)
    shift = (new - centres)[:, None, :]
    return S + shift, Q + shift


class RecentredTasks(TransformedTasks):
    """A task source whose tasks are moved to new centres: the recentring augmentation.

    Every batch of ``source`` is mapped by :func:`recentre_tasks`. Few training classes are
    few class locations; a meta-learner that sees the support's absolute position
    (``LearnedFlowSampler(NetworkOptions(frame_context=True))``) and always the same
    locations learns to snap to them. Recentred tasks keep what transfers to new classes: the
    spread of the class centres and every class's shape and orientation.

    Parameters
    ----------
    source : task source
        Any object with ``sample_tasks(n_tasks, n_support, n_query, random_state, **kw)``
        (extra keywords are passed through).

    Attributes
    ----------
    n_features : int
        The source's dimension.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.tasks import ClassTasks, RecentredTasks
    >>> X = np.random.default_rng(0).normal(size=(40, 3))
    >>> tasks = RecentredTasks(ClassTasks(X, np.repeat([0, 1], 20), random_state=0))
    >>> S, Q = tasks.sample_tasks(5, 4, 6, random_state=0)
    >>> S.shape, Q.shape
    ((5, 4, 3), (5, 6, 3))
    """

    def transform(self, supports, queries, rng):
        """Recentre a batch of tasks (:func:`recentre_tasks`)."""
        return recentre_tasks(supports, queries, rng)
