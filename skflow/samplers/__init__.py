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
from .options import DensityOptions, EngineOptions, KernelOptions, SigmaMinSearch, SolverOptions

__all__ = [
    "BICGaussianMixtureSampler",
    "BestClassicalSampler",
    "DensityOptions",
    "EngineOptions",
    "KernelOptions",
    "EmpiricalBayesGaussianSampler",
    "LearnedFlowSampler",
    "LedoitWolfSampler",
    "NWFlowSampler",
    "PooledGaussianSampler",
    "SigmaMinSearch",
    "SolverOptions",
]
