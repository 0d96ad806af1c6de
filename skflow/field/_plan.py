"""Block plan of the field: how many queries and support rows one block holds.

The O(n m) work is done in blocks of explicit logits whose size is bounded by a budget
(``2**23`` elements, 64 MiB of float64, on the host; a fraction of the free memory on CUDA),
so memory stays ``O(chunk * m + m * d)`` and never ``O(n * m * d)``. Above the budget even for
a few query rows the support is streamed in chunks (see :mod:`skflow.field._stream`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "BLOCK_ELEMENTS",
    "FLOAT32_LOGIT_LIMIT",
    "block_budget",
    "check_chunk",
    "default_chunk_size",
    "stream_rows",
]

#: Budget for one (chunk, m) block of logits, in elements: 2**23 float64 values = 64 MiB.
BLOCK_ELEMENTS = 2**23
# The dense path keeps whole-support temporaries (the centred support, its keys: m * max(d, k)
# elements) and blocks of at least _STREAM_MIN_ROWS full rows of logits; above the block
# budget the support is streamed in chunks instead.
_STREAM_MIN_ROWS = 64
# Streaming: support chunks are sized for blocks of (up to) this many queries.
_STREAM_QUERY_ROWS = 1024
# On CUDA a block may use this fraction of the free device memory (a few temporaries of the
# block's size are alive at once: logits, exponentials, weights).
_CUDA_MEMORY_FRACTION = 0.0625
_CUDA_MAX_ELEMENTS = 2**31 - 1

#: float32 inputs are computed in float64 where ``a(t) * max_i ||s_i - mu||^2`` exceeds this:
#: the logits' float32 rounding error is about ``eps_32`` times that product.
FLOAT32_LOGIT_LIMIT = 1e4


def default_chunk_size(
    n_support: int, budget: int | None = None, *, device: Any = None, itemsize: int = 8
) -> int:
    """Number of queries per block so that a ``(chunk, m)`` logits block fits ``budget``.

    Parameters
    ----------
    n_support : int
        Number of support points ``m`` (columns of the block).
    budget : int, optional
        Elements per block. By default ``2**23`` (64 MiB of float64) on the host and, for a
        CUDA ``device``, ``1/16`` of the free device memory (``torch.cuda.mem_get_info``)
        divided by ``itemsize``.
    device : str or torch.device, optional
        Where the block lives; only a CUDA device changes the default budget.
    itemsize : int, default=8
        Bytes per element of the block (CUDA budget only).

    Returns
    -------
    chunk : int
        At least 1.

    Examples
    --------
    >>> default_chunk_size(1000)
    8388
    """
    if budget is None:
        budget = block_budget(device, itemsize)
    return int(max(1, budget // max(1, n_support)))


def block_budget(device: Any = None, itemsize: int = 8) -> int:
    """Elements of one explicit logits block on ``device`` (64 MiB of float64 on the host)."""
    if device is not None and str(device).startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(
            min(_CUDA_MAX_ELEMENTS, max(BLOCK_ELEMENTS, free * _CUDA_MEMORY_FRACTION // itemsize))
        )
    return BLOCK_ELEMENTS


def check_chunk(value: Any, name: str) -> int | None:
    """A positive int block size, or None (automatic)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}.")
    return int(value)


def stream_rows(
    m: int, d: int, k: int, n_queries: int, support_chunk_size: int | None, budget: int
) -> int | None:
    """Rows per streamed support chunk, or None for the dense path.

    Streaming is chosen when ``support_chunk_size`` (< m) is given, or automatically when the
    dense path's whole-support temporaries or a block of ``_STREAM_MIN_ROWS`` rows of logits
    (``m * max(d, k, 64)`` elements) would exceed the block budget.
    """
    if support_chunk_size is not None:
        return support_chunk_size if support_chunk_size < m else None
    width = max(d, k, _STREAM_MIN_ROWS)
    if m * width <= BLOCK_ELEMENTS or m * width <= budget:
        return None
    rows = budget // max(min(max(n_queries, 1), _STREAM_QUERY_ROWS), d, k, 1)
    return max(1, rows) if rows < m else None
