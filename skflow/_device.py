"""Choice of array backend and Torch device for the estimators."""

from __future__ import annotations

__all__ = ["BACKENDS", "DEVICES", "resolve_device", "use_torch_backend"]

BACKENDS = ("auto", "numpy", "torch")
DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str) -> str:
    """Map ``"auto"`` to ``"cuda"`` when a GPU is visible, else ``"cpu"``; validate the rest."""
    if device not in DEVICES and not str(device).startswith("cuda:"):
        raise ValueError(f"device must be one of {DEVICES} or 'cuda:N', got {device!r}.")
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def use_torch_backend(backend: str, device: str) -> bool:
    """Whether an estimator with these parameters computes with Torch."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    if backend == "torch":
        return True
    if backend == "numpy":
        return False
    return resolve_device(device).startswith("cuda")
