"""A panel of sample metrics, each beside its noise floor: what two real samples score."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import check_random_state
from ._inputs import check_positive_int, prepare_samples
from .c2st import classifier_two_sample_test
from .energy import energy_distance
from .memorization import memorization_ratio
from .multiscale import DEFAULT_SCALES, multiscale_mmd2
from .precision_recall import precision_recall

__all__ = ["MetricPanel", "PanelEntry", "metric_panel"]

#: The panel's metrics, in the order of its table, with the value of an ideal generator.
PANEL_METRICS = (
    ("energy_distance", "0"),
    ("c2st_accuracy", "0.5"),
    ("mmd2_multiscale", "0"),
    ("precision", "floor"),
    ("recall", "floor"),
    ("memorization_ratio", "1"),
)


@dataclass(frozen=True)
class PanelEntry:
    """One metric of a :class:`MetricPanel`.

    Attributes
    ----------
    value : float
        The metric of the generated sample against the whole reference.
    floor : float
        Its noise floor: the mean of the same metric between the two halves of the
        reference, over the random splits; what a generator of the target law itself scores.
    floor_std : float
        The standard deviation of that metric over the splits (NaN for one split): values
        within a few ``floor_std`` of ``floor`` are not distinguishable from sampling noise.
    """

    value: float
    floor: float
    floor_std: float


@dataclass(frozen=True, repr=False)
class MetricPanel:
    """Result of :func:`metric_panel`: every metric's value beside its noise floor.

    ``panel["energy_distance"]`` is a :class:`PanelEntry`; ``print(panel)`` shows the table,
    ``panel.to_dict()`` gives plain Python values (JSON-serialisable).

    Attributes
    ----------
    entries : tuple of (str, PanelEntry)
        The metrics in table order: ``energy_distance``, ``c2st_accuracy``,
        ``mmd2_multiscale``, ``precision``, ``recall``, ``memorization_ratio``.
    n_generated, n_support, n_reference : int
        Rows of the three samples.
    n_splits : int
        Random halvings of the reference behind each floor (halves of
        ``n_reference // 2`` rows).
    """

    entries: tuple[tuple[str, PanelEntry], ...]
    n_generated: int
    n_support: int
    n_reference: int
    n_splits: int

    @property
    def names(self) -> tuple[str, ...]:
        """The metric names, in table order."""
        return tuple(name for name, _ in self.entries)

    def __getitem__(self, name: str) -> PanelEntry:
        for key, entry in self.entries:
            if key == name:
                return entry
        raise KeyError(f"{name!r} is not a metric of the panel; it has {self.names}")

    def to_dict(self) -> dict[str, Any]:
        """Sizes and every metric as plain Python values.

        Returns
        -------
        panel : dict
            ``{"n_generated": ..., "n_support": ..., "n_reference": ..., "n_splits": ...,
            "metrics": {name: {"value": ..., "floor": ..., "floor_std": ...}}}``.
        """
        metrics = {name: vars(entry).copy() for name, entry in self.entries}
        return {
            "n_generated": self.n_generated,
            "n_support": self.n_support,
            "n_reference": self.n_reference,
            "n_splits": self.n_splits,
            "metrics": metrics,
        }

    def summary(self) -> str:
        """The table: one row per metric with its value, floor ± spread and ideal value.

        Returns
        -------
        table : str
        """
        half = self.n_reference // 2
        lines = [
            f"MetricPanel: {self.n_generated} generated vs {self.n_reference} reference rows "
            f"(support {self.n_support}); floor: {self.n_splits} split(s) of the reference "
            f"into {half} + {half}",
            f"{'metric':<20}{'value':>12}{'floor':>12}{'± std':>11}   ideal",
        ]
        ideal = dict(PANEL_METRICS)
        for name, e in self.entries:
            lines.append(
                f"{name:<20}{e.value:>12.4g}{e.floor:>12.4g}{e.floor_std:>11.2g}   {ideal[name]}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return self.summary()


def metric_panel(
    generated: Any,
    support: Any,
    reference: Any,
    *,
    scales: Sequence[float] = DEFAULT_SCALES,
    n_neighbors: int = 3,
    n_splits: int = 5,
    random_state: Any = None,
) -> MetricPanel:
    """Every sample metric of :mod:`skflow.metrics` at once, each beside its noise floor.

    One number (MMD² at the median bandwidth) mostly sees the first two moments and rewards
    copies of the support. The panel measures ``generated`` against ``reference`` with

    * :func:`energy_distance` (U-statistic; 0 for one law);
    * :func:`classifier_two_sample_test`, leave-one-out 1-NN accuracy (0.5: indistinguishable;
      towards 1 for repeated copies or clusters);
    * :func:`multiscale_mmd2` at ``scales`` times the median distance of the reference;
    * :func:`precision_recall` (k-NN precision and recall, ``n_neighbors``);
    * :func:`memorization_ratio` against ``support`` (about 1; towards 0 for copies).

    The **noise floor** of a metric is the same metric between the two halves of the
    reference, split at random (``n_splits`` times; the mean and the standard deviation):
    ``metric(half_A, half_B)``, and ``memorization_ratio(half_A, support, half_B)``. It is
    what a generator of the target law itself would score, so a value within a few
    ``floor_std`` of its floor is not distinguishable from sampling noise. The halves are
    smaller than the samples of the value (``n_reference // 2`` rows each), so the floor's
    spread is, if anything, larger than the value's own noise.

    Parameters
    ----------
    generated : array-like or torch.Tensor of shape (n_generated, n_features)
        Samples of the generator conditioned on ``support``.
    support : array-like or torch.Tensor of shape (m, n_features)
        The support the samples were conditioned on.
    reference : array-like or torch.Tensor of shape (n_reference, n_features)
        Real held-out points of the target law, **not** in ``support``.
    scales : sequence of float, default=(0.25, 1.0, 4.0)
        Multiples of the reference's median distance for :func:`multiscale_mmd2` (one kernel
        for the value and every floor).
    n_neighbors : int, default=3
        ``k`` of :func:`precision_recall`.
    n_splits : int, default=5
        Random halvings of the reference for the floors.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        Seeds the splits (all drawn first, as ``rng.permutation(n_reference)`` each, with
        ``rng = check_random_state(random_state)``) and then the classifier test's
        subsampling.

    Returns
    -------
    panel : MetricPanel

    Raises
    ------
    ValueError
        If a sample is invalid (not 2-D, empty, NaN/inf, other features), ``reference`` has
        fewer than ``2 * (n_neighbors + 1)`` rows (each half needs more than
        ``n_neighbors``), ``generated`` has no more than ``n_neighbors`` rows, or reference
        rows lie on the support.

    Examples
    --------
    >>> import numpy as np
    >>> from skflow.metrics import metric_panel
    >>> rng = np.random.default_rng(0)
    >>> support, reference = rng.normal(size=(40, 2)), rng.normal(size=(200, 2))
    >>> copies = support[rng.integers(0, 40, 200)]
    >>> panel = metric_panel(copies, support, reference, random_state=0)
    >>> panel["memorization_ratio"].value, 0.7 < panel["memorization_ratio"].floor < 1.3
    (0.0, True)
    >>> panel["c2st_accuracy"].value > 0.8 > panel["c2st_accuracy"].floor
    True
    >>> sorted(panel.to_dict()["metrics"]["energy_distance"])
    ['floor', 'floor_std', 'value']
    """
    k = check_positive_int(n_neighbors, "n_neighbors")
    n_halvings = check_positive_int(n_splits, "n_splits")
    xp, (G, S, R) = prepare_samples(
        ("generated", generated), ("support", support), ("reference", reference)
    )
    half = R.shape[0] // 2
    if half <= k:
        raise ValueError(
            f"reference has {R.shape[0]} rows; the noise floor splits it into two halves of "
            f"more than n_neighbors={k} rows: pass at least {2 * (k + 1)} reference rows or a "
            "smaller n_neighbors"
        )
    rng = check_random_state(random_state)
    splits = [rng.permutation(R.shape[0]) for _ in range(n_halvings)]
    value = _measure(G, S, R, R, scales, k, rng)
    floors = [
        _measure(R[xp.index(p[:half], R)], S, R[xp.index(p[half : 2 * half], R)], R, scales, k, rng)
        for p in splits
    ]
    entries = tuple(
        (name, _entry(value[name], [f[name] for f in floors])) for name, _ in PANEL_METRICS
    )
    return MetricPanel(entries, G.shape[0], S.shape[0], R.shape[0], n_halvings)


def _measure(
    candidate: Any,
    support: Any,
    real: Any,
    bandwidth_reference: Any,
    scales: Sequence[float],
    k: int,
    rng: np.random.RandomState,
) -> dict[str, float]:
    """Every panel metric of ``candidate`` against ``real`` (and ``support``)."""
    precision, recall = precision_recall(candidate, real, n_neighbors=k)
    return {
        "energy_distance": energy_distance(candidate, real),
        "c2st_accuracy": classifier_two_sample_test(candidate, real, random_state=rng),
        "mmd2_multiscale": multiscale_mmd2(
            candidate, real, scales=scales, reference=bandwidth_reference
        ),
        "precision": precision,
        "recall": recall,
        "memorization_ratio": memorization_ratio(candidate, support, real),
    }


def _entry(value: float, floors: list[float]) -> PanelEntry:
    spread = float(np.std(floors, ddof=1)) if len(floors) > 1 else math.nan
    return PanelEntry(float(value), float(np.mean(floors)), spread)
