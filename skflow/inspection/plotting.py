"""Plots of an attention inspection: NW correspondence per step, like the paper's figure."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_choice
from .analysis import NWCorrespondence

__all__ = ["plot_nw_correspondence"]


def plot_nw_correspondence(
    result: NWCorrespondence,
    *,
    by: str = "step",
    x: Any = None,
    xlabel: str | None = None,
    axes: Any = None,
) -> Any:
    """Correlation with NW weights per step, and the fraction of NW-like heads per step.

    Left panel: the median Spearman correlation of every (module, head) against the step (thin
    lines) and the median over them (thick). Right panel: the fraction of heads whose median
    Spearman exceeds ``result.threshold``. Needs matplotlib (the ``plot`` extra).

    Parameters
    ----------
    result : NWCorrespondence
        Output of :func:`~skflow.inspection.nw_correspondence`.
    by : {"step", "call", "position"}, default="step"
        The horizontal axis.
    x : array-like of shape (n_groups,), optional
        Values to plot instead of the group keys (e.g. the diffusion timesteps of the steps).
    xlabel : str, optional
        Label of the horizontal axis; default ``by``.
    axes : sequence of two matplotlib Axes, optional
        Where to draw; a new figure of two panels by default.

    Returns
    -------
    fig : matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If ``by`` is not a grouping key or ``x`` has the wrong length.

    Examples
    --------
    >>> import numpy as np
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skflow.inspection import NWCorrespondence, plot_nw_correspondence
    >>> res = NWCorrespondence(
    ...     module=np.array(["a", "a"]), step=np.array([0, 1]), call=np.array([0, 1]),
    ...     position=np.array([0, 0]), head=np.array([0, 0]), spearman=np.array([0.5, 0.95]),
    ...     pearson=np.array([0.4, 0.9]), fraction_above=np.array([0.0, 1.0]),
    ...     key_norm_dispersion=np.array([1.0, 0.1]), n_rows=np.array([4, 4]),
    ...     row_spearman=(np.zeros(4), np.ones(4)), threshold=0.9)
    >>> fig = plot_nw_correspondence(res)
    >>> len(fig.axes)
    2
    """
    import matplotlib.pyplot as plt

    check_choice(by, "by", ("step", "call", "position"))
    keys, frac = result.fraction_nw_like(by)
    xs = keys if x is None else np.asarray(x, dtype=float)
    if xs.shape != keys.shape:
        raise ValueError(f"x has shape {xs.shape}, expected ({len(keys)},): one value per {by}")
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    else:
        fig = axes[0].figure
    col = getattr(result, by)
    pos = {k: i for i, k in enumerate(keys.tolist())}
    for name in np.unique(result.module):
        for head in np.unique(result.head[result.module == name]):
            sel = (result.module == name) & (result.head == head)
            idx = [pos[k] for k in col[sel].tolist()]
            order = np.argsort(idx)
            axes[0].plot(xs[np.asarray(idx)[order]], result.spearman[sel][order], lw=0.7, alpha=0.4)
    _, med = result.median_by(by)
    axes[0].plot(xs, med, "k-o", lw=2, ms=4, label="median over heads")
    axes[0].set_ylim(-1.05, 1.05)
    axes[0].set_ylabel("Spearman (attention vs NW)")
    axes[0].legend(fontsize=10, loc="lower right")
    axes[1].plot(xs, frac, "-o", color="C3")
    axes[1].set_ylim(-0.05, 1.05)
    axes[1].set_ylabel(f"fraction of heads with rho > {result.threshold:g}")
    for ax in axes:
        ax.set_xlabel(xlabel or by)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
