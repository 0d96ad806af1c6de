"""Torch modules of skflow: the exact NW attention head and multi-head NW smoothers."""

from .heads import MultiHeadNW, NWAttentionHead

__all__ = ["MultiHeadNW", "NWAttentionHead"]
