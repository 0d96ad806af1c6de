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
from .options import (
    DensityOptions,
    EngineOptions,
    KernelOptions,
    NetworkOptions,
    SigmaMinSearch,
    SolverOptions,
    TrainingOptions,
)

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
    "NetworkOptions",
    "PooledGaussianSampler",
    "SigmaMinSearch",
    "SolverOptions",
    "TrainingOptions",
]
