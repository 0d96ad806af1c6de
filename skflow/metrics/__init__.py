"""Metrics for support-conditioned samplers: MMD², energy distance, classifier two-sample test,
precision/recall, memorisation, their panel with noise floors, effective sample size, weight
correlation.

This package depends on NumPy and SciPy (and scikit-learn, imported when
:func:`classifier_two_sample_test` is given a classifier or asked for the AUC). Torch is
optional: functions documented to accept ``torch.Tensor`` inputs detect them without importing
torch (a tensor can only exist if torch is already loaded), so ``import skflow.metrics`` never
imports torch.

Functions (one family per module of the package)
-------------------------------------------------
mmd2 (:mod:`skflow.metrics.mmd`, as ``mmd2_test``)
    Gaussian-kernel squared maximum mean discrepancy (U- or V-statistic), chunked so that very
    large samples run in bounded memory.
mmd2_test
    Permutation two-sample test of the unbiased MMD².
effective_sample_size (:mod:`skflow.metrics.weights`)
    Kish effective sample size ``1 / sum_i w_i**2`` of probability vectors (e.g. NW weights).
nw_weight_correlation (:mod:`skflow.metrics.correlation`)
    Row-wise Spearman / Pearson correlation of attention weights with Nadaraya–Watson weights.
distance_to_closest_record, memorization_ratio (:mod:`skflow.metrics.memorization`)
    Memorisation (copy) check: how close generated points lie to the support, measured against
    how close real held-out points lie to it. MMD² alone rewards copies of the support.
multiscale_mmd2 (:mod:`skflow.metrics.multiscale`)
    MMD² with the sum of Gaussian kernels at multiples of the median distance.
energy_distance (:mod:`skflow.metrics.energy`)
    Energy distance (U- or V-statistic) from exact Euclidean distances.
classifier_two_sample_test (:mod:`skflow.metrics.c2st`)
    Leave-one-out 1-NN accuracy on the pooled, balanced samples (or any scikit-learn
    classifier, cross-validated): 0.5 when generated rows cannot be told from real ones.
precision_recall (:mod:`skflow.metrics.precision_recall`)
    k-NN precision (fidelity) and recall (coverage), Kynkäänniemi et al. (2019).
metric_panel, MetricPanel, PanelEntry (:mod:`skflow.metrics.panel`)
    All of the above for one generated sample, each beside its noise floor (the same metric
    between two random halves of the reference).
"""

from .c2st import classifier_two_sample_test
from .correlation import WeightCorrelation, nw_weight_correlation
from .energy import energy_distance
from .memorization import distance_to_closest_record, memorization_ratio
from .mmd import MMDTestResult, mmd2, mmd2_test
from .multiscale import multiscale_mmd2
from .panel import MetricPanel, PanelEntry, metric_panel
from .precision_recall import precision_recall
from .weights import effective_sample_size

__all__ = [
    "MMDTestResult",
    "MetricPanel",
    "PanelEntry",
    "WeightCorrelation",
    "classifier_two_sample_test",
    "distance_to_closest_record",
    "effective_sample_size",
    "energy_distance",
    "memorization_ratio",
    "metric_panel",
    "mmd2",
    "mmd2_test",
    "multiscale_mmd2",
    "nw_weight_correlation",
    "precision_recall",
]

# ``doctest.testmod(skflow.metrics)`` sees only what this module defines; list the re-exported
# names so that it runs their examples too, as it did when the package was one module.
__test__ = {name: globals()[name] for name in __all__}
