"""Choice of array backend and Torch device for the estimators."""

from __future__ import annotations

__all__ = [
    "AUTO_TORCH_MIN_SUPPORT",
    "BACKENDS",
    "DEVICES",
    "resolve_device",
    "use_torch_backend",
]

BACKENDS = ("auto", "numpy", "torch")
DEVICES = ("auto", "cpu", "cuda")

#: With ``backend="auto"`` on the CPU, supports of at least this many points use Torch.
AUTO_TORCH_MIN_SUPPORT = 1024


def resolve_device(device: str) -> str:
    """Map ``"auto"`` to ``"cuda"`` when a GPU is visible, else ``"cpu"``; validate the rest."""
    if device not in DEVICES and not str(device).startswith("cuda:"):
        raise ValueError(f"device must be one of {DEVICES} or 'cuda:N', got {device!r}.")
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def use_torch_backend(backend: str, device: str, *, n_support: int | None = None) -> bool:
    """Whether an estimator with these parameters computes with Torch.

    Rule for ``backend="auto"`` (from ``benchmarks/bench_field.py``, see
    ``docs/performance.md``):

    * the device resolves to CUDA: Torch;
    * CPU and ``n_support >= AUTO_TORCH_MIN_SUPPORT`` (1024): Torch. Its attention engine (one
      fused ``scaled_dot_product_attention`` per block, memory linear in ``n + m``) was 2-5x
      faster than NumPy's chunked GEMMs from ``m ~ 1000`` on, in float32 and in float64
      alike, and its float64 results equal the float64 brute force to ~1e-12 just like
      NumPy's;
    * otherwise (small supports, or ``n_support`` not given): NumPy, whose per-call overhead
      is lower, so it wins on small problems such as the paper's ``m = 50``.

    ``"numpy"`` and ``"torch"`` are always honoured.

    Parameters
    ----------
    backend : {"auto", "numpy", "torch"}
    device : {"auto", "cpu", "cuda"} or "cuda:N"
    n_support : int, optional
        Size of the support the field will be evaluated with.

    Returns
    -------
    bool

    Examples
    --------
    >>> use_torch_backend("auto", "cpu")
    False
    >>> use_torch_backend("auto", "cpu", n_support=4096)
    True
    >>> use_torch_backend("numpy", "cpu", n_support=4096)
    False
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    if backend == "torch":
        return True
    if backend == "numpy":
        return False
    if resolve_device(device).startswith("cuda"):
        return True
    return n_support is not None and n_support >= AUTO_TORCH_MIN_SUPPORT
