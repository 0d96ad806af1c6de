"""Small helpers shared by the experiments: output folders, JSON, figures, seeds, threads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def prepare_output(output_dir: str | Path) -> Path:
    """Create ``output_dir`` (and parents) and return it as a Path."""
    path = Path(output_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def to_plain(value: Any) -> Any:
    """``value`` with NumPy arrays and scalars (also inside dicts and lists) as plain Python."""
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def write_json(results: dict, output_dir: str | Path, name: str = "results.json") -> Path:
    """Write ``results`` (NumPy values converted) as indented JSON; returns the path."""
    path = prepare_output(output_dir) / name
    path.write_text(json.dumps(to_plain(results), indent=2))
    return path


def save_figure(fig: Any, output_dir: str | Path, name: str) -> Path:
    """Save a matplotlib figure as PNG and close it; returns the path."""
    import matplotlib.pyplot as plt

    path = prepare_output(output_dir) / name
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


class TorchThreads:
    """Context manager: set Torch's intra-op threads, restore them on exit (None: no-op)."""

    def __init__(self, n_threads: int | None):
        self.n_threads = n_threads
        self._saved: int | None = None

    def __enter__(self):
        if self.n_threads is not None:
            import torch

            self._saved = torch.get_num_threads()
            torch.set_num_threads(self.n_threads)
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            import torch

            torch.set_num_threads(self._saved)
        return False


def derive_seed(random_state: int, *keys: int) -> int:
    """A 31-bit seed derived from ``random_state`` and integer keys (independent streams)."""
    ss = np.random.SeedSequence([int(random_state), *[int(k) for k in keys]])
    return int(ss.generate_state(1)[0] & 0x7FFFFFFF)


# Former names, kept until every experiment imports the public ones.
_plain, _TorchThreads, _seed = to_plain, TorchThreads, derive_seed
