"""Plots of an attention inspection (NW correspondence per step, like the paper's figure) and of
a generated sample over its support and reference, with the metric panel's values."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._array import to_numpy
from .._validation import check_choice
from ..metrics import MetricPanel, metric_panel
from .analysis import NWCorrespondence

__all__ = ["plot_metric_panel", "plot_nw_correspondence"]


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


#: The panel entries of the title of :func:`plot_metric_panel`, with their short labels.
_TITLE_METRICS = (
    ("c2st_accuracy", "1-NN acc"),
    ("energy_distance", "energy"),
    ("mmd2_multiscale", "MMD² ms"),
    ("precision", "prec"),
    ("recall", "rec"),
    ("memorization_ratio", "memo"),
)


def plot_metric_panel(
    generated: Any,
    support: Any,
    reference: Any,
    *,
    panel: MetricPanel | None = None,
    ax: Any = None,
    random_state: Any = None,
) -> Any:
    """Generated rows over the support and the reference on their two leading principal axes.

    The axes are the two leading principal directions of the pooled support and reference
    (the real data; the generated rows are projected on them, not fitted). The title holds
    the values of :func:`~skflow.metrics.metric_panel` with their noise floors, ``value
    (floor)``. Needs matplotlib (the ``plot`` extra).

    Parameters
    ----------
    generated : array-like or torch.Tensor of shape (n_generated, n_features)
        Samples of the generator conditioned on ``support``.
    support : array-like or torch.Tensor of shape (m, n_features)
        The support the samples were conditioned on.
    reference : array-like or torch.Tensor of shape (n_reference, n_features)
        Real held-out points of the target law.
    panel : MetricPanel, optional
        The panel to show; computed with ``metric_panel(generated, support, reference,
        random_state=random_state)`` when not given.
    ax : matplotlib Axes, optional
        Where to draw; a new figure by default.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        Seed of the panel's splits (when ``panel`` is not given).

    Returns
    -------
    fig : matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If the samples are invalid for :func:`~skflow.metrics.metric_panel` (checked there
        first).

    Examples
    --------
    >>> import numpy as np
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skflow.inspection import plot_metric_panel
    >>> rng = np.random.default_rng(0)
    >>> S, R = rng.normal(size=(20, 3)), rng.normal(size=(60, 3))
    >>> fig = plot_metric_panel(rng.normal(size=(60, 3)), S, R, random_state=0)
    >>> len(fig.axes[0].collections)
    3
    """
    import matplotlib.pyplot as plt

    if panel is None:
        panel = metric_panel(generated, support, reference, random_state=random_state)
    G, S, R = (np.asarray(to_numpy(a), dtype=np.float64) for a in (generated, support, reference))
    real = np.concatenate([S, R], axis=0)
    centre = real.mean(axis=0)
    # principal axes of the real data only: the generated rows must not move the frame
    _, _, vt = np.linalg.svd(real - centre, full_matrices=False)
    axes2 = vt[:2].T if vt.shape[0] >= 2 else np.pad(vt.T, ((0, 0), (0, 1)))
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 5.0))
    else:
        fig = ax.figure
    for data, style in (
        (R, {"s": 10, "c": "0.65", "label": f"reference ({len(R)})"}),
        (G, {"s": 10, "c": "C1", "alpha": 0.7, "label": f"generated ({len(G)})"}),
        (S, {"s": 40, "c": "k", "marker": "x", "label": f"support ({len(S)})"}),
    ):
        xy = (data - centre) @ axes2
        ax.scatter(xy[:, 0], xy[:, 1], **style)
    parts = [f"{label} {panel[n].value:.3g} ({panel[n].floor:.3g})" for n, label in _TITLE_METRICS]
    ax.set_title(", ".join(parts[:3]) + "\n" + ", ".join(parts[3:]), fontsize=9)
    ax.set_xlabel("principal axis 1")
    ax.set_ylabel("principal axis 2")
    ax.legend(fontsize=8, loc="best")
    return fig
