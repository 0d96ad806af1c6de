"""Support-conditioned samplers (scikit-learn estimators)."""

from .learned import LearnedFlowSampler
from .nw import NWFlowSampler

__all__ = ["LearnedFlowSampler", "NWFlowSampler"]
