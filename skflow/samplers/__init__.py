"""Support-conditioned samplers (scikit-learn estimators)."""

from .classical import (
    BestClassicalSampler,
    BICGaussianMixtureSampler,
    EmpiricalBayesGaussianSampler,
    LedoitWolfSampler,
    PooledGaussianSampler,
)
from .few_shot import FewShotSampler
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
    "FewShotSampler",
    "LearnedFlowSampler",
    "LedoitWolfSampler",
    "NWFlowSampler",
    "NetworkOptions",
    "PooledGaussianSampler",
    "SigmaMinSearch",
    "SolverOptions",
    "TrainingOptions",
]
