"""Torch modules of skflow: the exact NW attention head and multi-head NW smoothers."""

from .heads import MultiHeadNW, NWAttentionHead
from .transformer import CrossAttentionVelocity

__all__ = ["CrossAttentionVelocity", "MultiHeadNW", "NWAttentionHead"]
