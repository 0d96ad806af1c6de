"""Metrics for support-conditioned samplers: MMD², effective sample size, weight correlation.

This package depends only on NumPy and SciPy. Torch is optional: functions documented to accept
``torch.Tensor`` inputs detect them without importing torch (a tensor can only exist if torch is
already loaded), so ``import skflow.metrics`` never imports torch.

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
"""

from .correlation import WeightCorrelation, nw_weight_correlation
from .memorization import distance_to_closest_record, memorization_ratio
from .mmd import MMDTestResult, mmd2, mmd2_test
from .weights import effective_sample_size

__all__ = [
    "MMDTestResult",
    "WeightCorrelation",
    "distance_to_closest_record",
    "effective_sample_size",
    "memorization_ratio",
    "mmd2",
    "mmd2_test",
    "nw_weight_correlation",
]

# ``doctest.testmod(skflow.metrics)`` sees only what this module defines; list the re-exported
# names so that it runs their examples too, as it did when the package was one module.
__test__ = {name: globals()[name] for name in __all__}
