"""Support-conditioned samplers (scikit-learn estimators)."""

from .classical import (
    BestClassicalSampler,
    BICGaussianMixtureSampler,
    EmpiricalBayesGaussianSampler,
    LedoitWolfSampler,
    PooledGaussianSampler,
)
from .learned import LearnedFlowSampler
from .nw import NWFlowSampler

__all__ = [
    "BICGaussianMixtureSampler",
    "BestClassicalSampler",
    "EmpiricalBayesGaussianSampler",
    "LearnedFlowSampler",
    "LedoitWolfSampler",
    "NWFlowSampler",
    "PooledGaussianSampler",
]
