"""Support-conditioned samplers (scikit-learn estimators)."""

from .nw import NWFlowSampler

__all__ = ["NWFlowSampler"]
