"""Torch modules of skflow: the exact NW attention head, multi-head NW smoothers, the learned
cross-attention velocity network and its meta-training loop (:mod:`skflow.nn.training`)."""

from .heads import MultiHeadNW, NWAttentionHead
from .training import TrainingResult, train_flow_model
from .transformer import CrossAttentionVelocity

__all__ = [
    "CrossAttentionVelocity",
    "MultiHeadNW",
    "NWAttentionHead",
    "TrainingResult",
    "train_flow_model",
]
