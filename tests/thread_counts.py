"""Run a call at a given Torch thread count (the thread-policy tests compare counts)."""

from __future__ import annotations

import torch


def on_threads(n_threads, call):
    """``call()`` with ``torch.set_num_threads(n_threads)``, the previous count restored."""
    saved = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        return call()
    finally:
        torch.set_num_threads(saved)
