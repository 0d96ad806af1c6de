"""skflow: support-conditioned (in-context) flow matching with scikit-learn ergonomics.

Given a handful of examples ``S`` of a distribution, skflow generates new samples with no
parameter update, through the exact Nadaraya-Watson velocity field of ``S``
(:class:`NWFlowSampler`) or a meta-trained cross-attention model.
"""

from .pipeline import SamplingPipeline, make_sampling_pipeline
from .projection import FlowProjection
from .samplers import (
    BestClassicalSampler,
    BICGaussianMixtureSampler,
    DensityOptions,
    EmpiricalBayesGaussianSampler,
    EngineOptions,
    FewShotSampler,
    KernelOptions,
    LearnedFlowSampler,
    LedoitWolfSampler,
    NetworkOptions,
    NWFlowSampler,
    PooledGaussianSampler,
    SigmaMinSearch,
    SolverOptions,
    TrainingOptions,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "BICGaussianMixtureSampler",
    "BestClassicalSampler",
    "DensityOptions",
    "EmpiricalBayesGaussianSampler",
    "EngineOptions",
    "FewShotSampler",
    "KernelOptions",
    "FlowProjection",
    "LearnedFlowSampler",
    "LedoitWolfSampler",
    "NWFlowSampler",
    "NetworkOptions",
    "PooledGaussianSampler",
    "SamplingPipeline",
    "SigmaMinSearch",
    "SolverOptions",
    "TrainingOptions",
    "__version__",
    "make_sampling_pipeline",
]
