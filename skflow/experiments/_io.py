"""Small helpers shared by the experiments: output folders, JSON, figures, seeds, threads,
progress bars and the recorded wall times of the results page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from skflow._threads import parallel_map


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


#: The page the experiments' ``--write-docs`` updates.
RESULTS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "results.md"

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


def machine_line(start: dict[str, Any], end: dict[str, Any]) -> str:
    """One sentence on the machine: cores and the load average at the start and the end."""

    def load(info: dict) -> str:
        values = info.get("load_average")
        return "n/a" if values is None else " / ".join(f"{v:.2f}" for v in values)

    return (
        f"Machine: {start['cpu_count']} cores ({start['platform']}, Torch {start['torch']}); "
        f"load average (1 / 5 / 15 min) {load(start)} at the start, {load(end)} at the end."
    )


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of experiment ``name``'s section of the results page."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_docs_section(
    name: str, text: str, path: str | Path = RESULTS_PAGE, figure: str | Path | None = None
) -> Path:
    """Replace the block between ``name``'s markers in ``path`` by ``text``; returns the path.

    With ``figure`` (a PNG of the run), the file is copied to ``_static/results/NAME.png``
    beside the page and linked at the end of the section.

    Raises
    ------
    ValueError
        If the page lacks the markers (the section is never appended silently).
    """
    import re
    import shutil

    path = Path(path)
    begin, end = markers(name)
    doc = path.read_text(encoding="utf-8")
    if doc.count(begin) != 1 or doc.count(end) != 1:
        raise ValueError(f"{path} must contain exactly one {begin} ... {end} block.")
    if figure is not None:
        target = prepare_output(path.parent / "_static" / "results") / f"{name}.png"
        shutil.copyfile(figure, target)
        text = f"{text.strip()}\n\n![{name}: figure of this run](_static/results/{name}.png)"
    block = f"{begin}\n{text.strip()}\n{end}"
    doc = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, doc, flags=re.S)
    path.write_text(doc, encoding="utf-8")
    return path


def write_run_section(name: str, text: str, results: dict, path: str | Path | None = None) -> Path:
    """Write an experiment's section and the figure of its run (``results["output_dir"]``,
    ``results["figure"]``) to the results page (``path``, default :data:`RESULTS_PAGE`)."""
    if results.get("preset") == SMOKE:
        raise ValueError(
            f"{name}: a {SMOKE!r} run checks the pipeline, it is not a result; it is never "
            "written to the docs (run --quick or --full)."
        )
    figure = Path(results["output_dir"]) / results["figure"]
    page = RESULTS_PAGE if path is None else path
    return write_docs_section(name, text, path=page, figure=figure)



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
    worker is held to its share of the cores (:func:`skflow._threads.parallel_map`).

    Examples
    --------
    >>> run_jobs(pow, [(2, 3), (3, 2)], n_jobs=None, bar=progress_bar(2, "x", enabled=False))
    [8, 9]
    """
    return parallel_map(func, jobs, n_jobs, on_result=lambda _: bar.update(1))


def recorded_wall_times(path: str | Path = RESULTS_PAGE) -> dict[str, dict[str, float]]:
    """Experiment -> preset -> wall time in seconds of the runs recorded on the results page.

    Read from each experiment's section (``Preset `quick`: ... Wall time 1820 s.``, written
    by ``--write-docs``); an experiment without a recorded run is absent, and so is every
    one when the page is not there (an installed package without its docs).

    Examples
    --------
    >>> times = recorded_wall_times()
    >>> all(isinstance(s, float) for run in times.values() for s in run.values())
    True
    """
    import re

    path = Path(path)
    if not path.exists():
        return {}
    doc = path.read_text(encoding="utf-8")
    found: dict[str, dict[str, float]] = {}
    for name, body in re.findall(r"<!-- (\w+):begin -->(.*?)<!-- \1:end -->", doc, flags=re.S):
        for preset, seconds in re.findall(r"Preset `(\w+)`.*?Wall time (\d+(?:\.\d+)?) s", body):
            found.setdefault(name, {})[preset] = float(seconds)
    return found
