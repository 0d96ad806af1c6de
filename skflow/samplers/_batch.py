"""Batched supports and given noise for the samplers: validation, grouping, work items.

``sample(n, support=S)`` accepts one support ``(m, d)``, a batch ``(B, m, d)`` or a list of
``B`` supports of different sizes ``(m_b, d)``. A batch is integrated in one solver run per
group of equal support size (a ragged list is *grouped by size*, no padding: every group is
an exact ``(G, m, d)`` batch, so the result does not depend on how the tasks were grouped).

**Noise of a batch.** Without ``noise=``, the starting points of all tasks are one draw
``check_random_state(random_state).standard_normal((B, n, d))`` (cast to the compute dtype).
Task ``b`` therefore equals ``sample(n, support=S[b], noise=X0[b])`` with that ``X0``, and
task 0 equals ``sample(n, support=S[0], random_state=random_state)`` (the first ``n * d``
numbers of the draw).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_int, check_times
from ..threads import MIN_ITEMS

__all__ = [
    "BATCHED_ROWS",
    "DENSE_SUPPORT_ELEMENTS",
    "check_batch_times",
    "check_noise",
    "check_query_batch",
    "check_support_batch",
    "group_by_size",
    "is_support_list",
    "work_items",
]

#: Rows (tasks x samples) integrated together in one solver run of a batch of supports:
#: 256 tasks x 256 samples (the paper's evaluation) is one run.
BATCHED_ROWS = 65536
# Elements of the (tasks, rows, m) logits of one batched run (2**23, as the field's block
# budget): larger supports run fewer tasks at once.
_BATCHED_ELEMENTS = 2**23
#: A support with ``m * max(d, 64)`` above this is streamed by the field (2**23, its block
#: budget), which needs one support: such batches are integrated task by task.
DENSE_SUPPORT_ELEMENTS = 2**23


def is_support_list(support: Any) -> bool:
    """Whether ``support`` is a list/tuple of 2-D supports (ragged batch), not one support."""
    if not isinstance(support, list | tuple) or len(support) == 0:
        return False
    try:
        return all(np.ndim(s) == 2 for s in support)
    except ValueError:  # a ragged nested list of numbers is no list of supports
        return False


def check_support_batch(supports: Any, n_features: int, name: str) -> np.ndarray:
    """A batch of supports ``(B, m, d)`` as a float32 (if given so) or float64 array.

    Parameters
    ----------
    supports : array-like of shape (B, m, d)
    n_features : int
        The estimator's ``n_features_in_``.
    name : str
        The estimator's class name (error messages).

    Returns
    -------
    supports : ndarray of shape (B, m, d)
    """
    try:
        arr = np.asarray(supports)
    except (TypeError, ValueError):
        raise ValueError("support must be a numeric array of shape (B, m, d).") from None
    if arr.ndim != 3:
        raise ValueError(f"support must have shape (B, m, n_features), got {arr.shape}.")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"support is empty (shape {arr.shape}); need B >= 1 and m >= 1.")
    if arr.shape[2] != n_features:
        raise ValueError(
            f"support has {arr.shape[2]} features, but {name} is expecting {n_features} "
            "features as input."
        )
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"support must be real numbers, got dtype {arr.dtype}.")
    arr = arr.astype(np.float32 if arr.dtype == np.float32 else np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError("Input support contains NaN or infinity.")
    return arr


def group_by_size(supports: list[np.ndarray]) -> tuple[list[tuple[np.ndarray, np.ndarray]], Any]:
    """Tasks grouped by support size: ``[(task indices, stacked supports (G, m, d)), ...]``
    in order of first appearance, and the common dtype (float32 only if all are)."""
    dtype = np.float32 if all(s.dtype == np.float32 for s in supports) else np.float64
    sizes: dict[int, list[int]] = {}
    for b, s in enumerate(supports):
        sizes.setdefault(s.shape[0], []).append(b)
    groups = [
        (np.asarray(idx), np.stack([supports[b] for b in idx]).astype(dtype, copy=False))
        for idx in sizes.values()
    ]
    return groups, dtype


def check_noise(
    noise: Any, n_samples: Any, n_features: int, dtype: Any, n_tasks: int | None
) -> np.ndarray:
    """Given starting points as an array of the compute ``dtype``.

    ``noise`` is ``(n, d)``, or for a batch of ``n_tasks`` supports ``(n_tasks, n, d)`` (an
    ``(n, d)`` array then starts every task from the same points). ``n_samples`` must equal
    ``n``.
    """
    n_samples = check_int(n_samples, "n_samples")
    try:
        arr = np.asarray(noise)
    except (TypeError, ValueError):
        raise ValueError(
            "noise must be a numeric array of shape (n_samples, n_features)."
        ) from None
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr) or arr.dtype == bool:
        raise ValueError(f"noise must be real numbers, got dtype {arr.dtype}.")
    shapes = "(n_samples, n_features)" + (
        "" if n_tasks is None else " or (B, n_samples, n_features)"
    )
    ok = arr.ndim == 2 or (arr.ndim == 3 and n_tasks is not None and arr.shape[0] == n_tasks)
    if not ok or arr.shape[-1] != n_features:
        raise ValueError(
            f"noise must have shape {shapes} with {n_features} features, got {arr.shape}."
        )
    if arr.shape[-2] != n_samples:
        raise ValueError(
            f"n_samples={n_samples} but noise has {arr.shape[-2]} rows; pass n_samples equal "
            "to the number of starting points."
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("noise contains NaN or infinity.")
    arr = arr.astype(dtype, copy=False)
    if n_tasks is not None and arr.ndim == 2:
        arr = np.broadcast_to(arr, (n_tasks, *arr.shape)).copy()
    return arr


def work_items(
    x0: np.ndarray, m: int, row_batch: int, split: bool = False
) -> list[tuple[Any, slice]]:
    """``(task slice or None, row slice)`` of the solver runs of one sampling call.

    Rows are split into batches of ``row_batch`` (whatever ``n_jobs`` is, so serial and
    parallel runs do the same arithmetic); a batch of supports ``x0`` of shape ``(G, n, d)``
    is further split into runs of at most :data:`BATCHED_ROWS` rows and about ``2**23``
    logits, and, with ``split`` (a large call, decided from its size alone), into at least
    :data:`skflow.threads.MIN_ITEMS` runs of supports, so that it uses the cores. Items are
    ordered task-major, so consecutive items share a support.
    """
    n = x0.shape[-2]
    rows = [slice(i, i + row_batch) for i in range(0, max(n, 1), row_batch)]
    if x0.ndim == 2:
        return [(None, r) for r in rows]
    per = max(1, min(n, row_batch))
    tasks = max(1, min(BATCHED_ROWS // per, _BATCHED_ELEMENTS // (per * max(m, 1))))
    if split and len(rows) < MIN_ITEMS:
        runs = -(-MIN_ITEMS // len(rows))  # runs of supports that give MIN_ITEMS items
        tasks = max(1, min(tasks, -(-x0.shape[0] // runs)))
    return [(slice(g, g + tasks), r) for g in range(0, x0.shape[0], tasks) for r in rows]


def check_query_batch(X: Any, n_tasks: int, n_features: int) -> np.ndarray:
    """Queries ``(B, n, d)`` of a batched field evaluation (float32 if given so, else float64)."""
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError):
        raise ValueError("X must be a numeric array of shape (B, n, n_features).") from None
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr) or arr.dtype == bool:
        raise ValueError(f"X must be real numbers, got dtype {arr.dtype}.")
    if arr.ndim != 3 or arr.shape[0] != n_tasks or arr.shape[2] != n_features:
        raise ValueError(
            f"with a batch of {n_tasks} supports X must have shape ({n_tasks}, n, "
            f"{n_features}), got {arr.shape}."
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("Input X contains NaN or infinity.")
    return arr.astype(np.float32 if arr.dtype == np.float32 else np.float64, copy=False)


def check_batch_times(t: Any, shape: tuple[int, int], **clamp: Any) -> np.ndarray:
    """Times of a batched evaluation: a scalar, ``(n,)`` (shared by the tasks) or ``(B, n)``,
    validated (and clamped near the ends) by :func:`skflow._validation.check_times`, which
    takes ``clamp`` (``tolerance``, ``hint``)."""
    arr = np.asarray(t.detach().cpu().numpy() if hasattr(t, "detach") else t)
    if arr.ndim == 2:
        if arr.shape != shape:
            raise ValueError(f"t must be a scalar, (n,) or {shape}, got shape {arr.shape}.")
        return check_times(arr.ravel(), **clamp).reshape(shape)
    out = check_times(arr, **clamp)
    if out.ndim == 1:
        if out.shape[0] != shape[1]:
            raise ValueError(f"t must be a scalar, ({shape[1]},) or {shape}, got {out.shape}.")
        out = np.broadcast_to(out, shape).copy()
    return out
