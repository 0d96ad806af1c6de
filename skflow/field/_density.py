"""Log-density of the path marginal ``p_t = (1/m) sum_i N(alpha_t s_i, sigma_t^2 I)`` (a KDE at 1).

Computed in float64 from exact differences (not the norm expansion of the logits): near
``t = 1`` the distances are divided by ``sigma_min^2``, so the expansion's cancellation error
would be amplified ~1e4 times, and float32 distances would cost ~1e-3 nats.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..paths import GaussianPath
from ._plan import BLOCK_ELEMENTS, default_chunk_size

__all__ = ["path_log_density"]


def path_log_density(
    xp: Any,
    x: Any,
    support: Any,
    t: float,
    *,
    path: GaussianPath,
    chunk_size: int | None,
    support_chunk_size: int | None,
) -> Any:
    """Log-density (n,) at validated queries ``x`` (n, d) of a single support (m, d).

    ``x`` is computed in float64 (except on MPS, which has none) and the result returned in
    ``x``'s dtype; the support is read in chunks of ``support_chunk_size`` rows (default:
    whole when an ``(m, d)`` block fits ``2**23`` elements) combined with ``logaddexp``.
    """
    out_dtype = x.dtype
    if xp.device_type(x) != "mps":
        x = xp.to_float64(x)
    alpha, sigma_t = float(path.alpha(float(t))), float(path.sigma(float(t)))
    m, d = support.shape
    rows = support_chunk_size
    if rows is None:
        rows = m if m * d <= BLOCK_ELEMENTS else max(1, BLOCK_ELEMENTS // max(d, 1))
    rows = min(rows, m)
    step = chunk_size or default_chunk_size(rows * d)
    chunks = [(j, min(m, j + rows)) for j in range(0, m, rows)]
    out = []
    for start in range(0, max(x.shape[0], 1), step):
        lse = None
        for j0, j1 in chunks:
            part_s = xp.asarray(support[j0:j1], x)
            diff = x[start : start + step, None, :] - alpha * part_s[None, :, :]
            part = xp.logsumexp(-xp.sum(diff * diff, axis=2) / (2.0 * sigma_t**2), axis=1)
            lse = part if lse is None else xp.logaddexp(lse, part)
        out.append(lse)
    norm = float(np.log(m) + 0.5 * d * np.log(2.0 * np.pi * sigma_t**2))
    log_p = xp.concat(out, axis=0) - norm
    return xp.cast(log_p, out_dtype)
