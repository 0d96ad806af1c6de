"""Task augmentation: every task mapped by its own random orthogonal matrix."""

import numpy as np

from .._array import dispatch
from .._validation import InvalidParameterError, as_generator
from ._base import TransformedTasks, haar_rotations
from ._device import t_haar_rotations, torch_generator

__all__ = ["RotatedTasks", "rotate_tasks"]


def rotate_tasks(supports, queries, random_state=None, *, center="support"):
    """Map every task by its own uniformly random (Haar) orthogonal matrix.

    Task ``b`` is mapped by ``x -> (x - c_b) R_b + c_b`` with one matrix ``R_b`` for its
    support *and* its queries, so every distance within a task (support to support, support
    to query, query to query) is kept: the task's shape (spectrum, tails, clusters) survives,
    its orientation, which cannot transfer to new classes, is randomized.

    Parameters
    ----------
    supports : array-like or tensor of shape (B, m, d)
    queries : array-like or tensor of shape (B, n, d)
    random_state : None, int, RandomState, Generator or torch.Generator, default=None
        Source of the rotations. Torch tensors (both) are rotated in Torch on their device,
        by rotations drawn from a local :class:`torch.Generator` seeded by ``random_state``.
    center : {"support", "origin"}, default="support"
        Rotate about each task's support mean (its location is kept), or about the origin
        (for centred data: locations are rotated too).

    Returns
    -------
    supports : ndarray or tensor of shape (B, m, d)
    queries : ndarray or tensor of shape (B, n, d)

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
    # tensors (both) are rotated on their device, anything else as float64 NumPy arrays
    rotations = dispatch(supports, queries, numpy=_numpy_rotations, torch=_torch_rotations)
    S, Q, rot = rotations(supports, queries, random_state)
    if center == "origin":
        return S @ rot, Q @ rot
    c = S.mean(axis=1, keepdims=True)  # NumPy and Torch alike
    return (S - c) @ rot + c, (Q - c) @ rot + c


def _check_tasks(S, Q) -> None:
    """Refuse supports and queries that are not (B, m, d) and (B, n, d)."""
    if S.ndim != 3 or Q.ndim != 3 or S.shape[0] != Q.shape[0] or S.shape[2] != Q.shape[2]:
        raise ValueError(
            f"expected supports (B, m, d) and queries (B, n, d), got {S.shape} and {Q.shape}."
        )


def _numpy_rotations(supports, queries, random_state):
    """``S, Q`` as float64 arrays and one Haar rotation (B, d, d) per task, in NumPy."""
    S, Q = np.asarray(supports, dtype=np.float64), np.asarray(queries, dtype=np.float64)
    _check_tasks(S, Q)
    return S, Q, haar_rotations(as_generator(random_state), (S.shape[0],), S.shape[2])


def _torch_rotations(S, Q, random_state):
    """Tensors ``S, Q`` and one Haar rotation (B, d, d) per task, drawn on their device."""
    _check_tasks(S, Q)
    gen = torch_generator(random_state, S.device)
    return S, Q, t_haar_rotations(gen, (S.shape[0],), S.shape[2], S.device, S.dtype)


class RotatedTasks(TransformedTasks):
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
        super().__init__(source)
        self.center = center

    def transform(self, supports, queries, rng):
        """Rotate each task of a batch (:func:`rotate_tasks`)."""
        return rotate_tasks(supports, queries, rng, center=self.center)
