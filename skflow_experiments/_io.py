"""Small helpers shared by the experiments: output folders, JSON, figures, the record of a
run, seeds, threads and progress bars."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from skflow.threads import parallel_map


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


class RunLog:
    """What every experiment's ``run`` records around its work.

    Created at the start: the output folder (created), the training seeds, the machine and
    the clock; :meth:`finish` writes the results with the figure and the folder.

    Parameters
    ----------
    output_dir : str or Path
        Folder of ``results.json`` and the figure (created).
    random_state : int
        First seed; the seeds are ``random_state, random_state + 1, ...``.
    n_seeds : int, default=1
        Number of seeds.

    Examples
    --------
    >>> import tempfile
    >>> log = RunLog(tempfile.mkdtemp(), random_state=3, n_seeds=2)
    >>> log.seeds
    [3, 4]
    >>> sorted(log.finish({"wall": log.wall() >= 0}))
    ['output_dir', 'wall']
    """

    def __init__(self, output_dir: str | Path, random_state: int, n_seeds: int = 1):
        self.out = prepare_output(output_dir)
        self.seeds = [int(random_state) + k for k in range(int(n_seeds))]
        self.machine_start = machine_info()
        self._start = time.perf_counter()

    def wall(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self._start

    def machine(self) -> dict[str, dict[str, Any]]:
        """The machine at the start and now (:func:`machine_info`)."""
        return {"start": self.machine_start, "end": machine_info()}

    def finish(self, results: dict, plot: Any = None, *, plain: bool = True) -> dict:
        """``results`` (as plain Python unless not ``plain``) with the name of the figure that
        ``plot(results, folder)`` saved and the folder, written as ``results.json``."""
        if plain:
            results = to_plain(results)
        if plot is not None:
            results["figure"] = plot(results, self.out).name
        results["output_dir"] = str(self.out)
        write_json(results, self.out)
        return results


def derive_seed(random_state: int, *keys: int) -> int:
    """A 31-bit seed derived from ``random_state`` and integer keys (independent streams)."""
    ss = np.random.SeedSequence([int(random_state), *[int(k) for k in keys]])
    return int(ss.generate_state(1)[0] & 0x7FFFFFFF)


#: The preset that only tries the pipeline (at most minutes on two cores): never a result,
#: never written to the docs.
SMOKE = "smoke"


def machine_info() -> dict[str, Any]:
    """Cores, load averages (1, 5, 15 min), platform, Torch version and thread count."""
    import os
    import platform

    import torch

    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return {
        "cpu_count": os.cpu_count(),
        "load_average": load,
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": bool(torch.cuda.is_available()),
    }


class _NoBar:
    """Stand-in for a progress bar when progress is off: does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str, enabled: bool) -> Any:
    """A ``tqdm`` bar on stderr with an ETA over ``total`` units (a no-op when not ``enabled``).

    The rate is averaged over the whole run (``smoothing=0``): the units of an experiment
    (trainings, evaluations) differ in length, and the mean is the better guess of the rest.

    Examples
    --------
    >>> with progress_bar(3, "jobs", enabled=False) as bar:
    ...     bar.update(1)
    """
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="job", smoothing=0.0, dynamic_ncols=True)


def run_jobs(func: Any, jobs: list[tuple], *, n_jobs: int | None, bar: Any) -> list:
    """``[func(*job) for job in jobs]`` through joblib, advancing ``bar`` as each job ends.

    Results come back in the order of ``jobs`` (joblib's ordered generator), whatever the
    backend (processes, threads or a Dask cluster under ``joblib.parallel_config``); each
    worker is held to its share of the cores (:func:`skflow.threads.parallel_map`).

    Examples
    --------
    >>> run_jobs(pow, [(2, 3), (3, 2)], n_jobs=None, bar=progress_bar(2, "x", enabled=False))
    [8, 9]
    """
    return parallel_map(func, jobs, n_jobs, on_result=lambda _: bar.update(1))


class WarningTally:
    """Collect the warnings of a run and report each distinct one once, with a count.

    An experiment fits many estimators: the same warning (e.g. a
    :class:`~skflow.exceptions.MemorizationWarning` of every plug-in fit at a small
    ``sigma_min``) would otherwise fill the terminal with near-identical blocks whose numbers
    differ. Warnings are grouped by category and the line that raised them; each group is
    one line: the count, the category, the place and the first message. Warnings raised in
    joblib worker processes (``n_jobs > 1``) are printed by the workers and not collected.

    Examples
    --------
    >>> import warnings
    >>> with WarningTally() as tally:
    ...     for i in range(3):
    ...         warnings.warn(f"value {i} is odd", UserWarning)
    >>> print(tally.lines()[0].split(" at ")[0])
    3 x UserWarning
    """

    def __init__(self, width: int = 160):
        self.width = width
        self.records: list = []
        self._catch = None

    def __enter__(self) -> WarningTally:
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self.records = self._catch.__enter__()
        warnings.simplefilter("always")  # every occurrence is counted, even a repeated one
        return self

    def __exit__(self, *exc) -> bool:
        self._catch.__exit__(*exc)
        return False

    def lines(self) -> list[str]:
        """One line per distinct warning (category and place), most frequent first."""
        groups: dict[tuple, list] = {}
        for rec in self.records:
            groups.setdefault((rec.category.__name__, rec.filename, rec.lineno), []).append(rec)
        out = []
        for (category, filename, lineno), recs in sorted(groups.items(), key=lambda g: -len(g[1])):
            message = " ".join(str(recs[0].message).split())
            if len(message) > self.width:
                message = message[: self.width - 3] + "..."
            place = f"{Path(filename).name}:{lineno}"
            out.append(f"{len(recs)} x {category} at {place} (first: {message})")
        return out
