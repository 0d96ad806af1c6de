"""An experiment as a specification (:class:`Experiment`) and the one runner that every
experiment's ``run`` goes through: preset, seeds, Torch threads, progress bar, the work, wall
time, machine record, ``results.json`` with the figure, and the section of the results page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._io import RunLog, TorchThreads, progress_bar, run_jobs
from ._report import write_run_section
from .protocol import preset_config


@dataclass
class Run:
    """What one run of an experiment knows while it works: handed to the spec's functions.

    Attributes
    ----------
    preset : str
        The preset's name.
    cfg : dict
        The preset's configuration, with the command line's overrides.
    seeds : list of int
        The training seeds, ``random_state, random_state + 1, ...``.
    random_state : int
        The first seed.
    n_jobs : int or None
        joblib workers.
    log : RunLog
        The output folder (``log.out``), the clock and the machine at the start.
    options : dict
        The keyword arguments of ``run`` that only this experiment takes.
    bar : progress bar
        Advanced by the work (a no-op unless progress is shown).
    wall : float
        Seconds from the start to the end of the work (set after it).
    """

    preset: str
    cfg: dict[str, Any]
    seeds: list[int]
    random_state: int
    n_jobs: int | None
    log: RunLog
    options: dict[str, Any] = field(default_factory=dict)
    bar: Any = None
    wall: float = 0.0

    @property
    def out(self) -> Path:
        """The output folder (created)."""
        return self.log.out

    def jobs(self, func: Callable, jobs: list[tuple]) -> list:
        """``[func(*job) for job in jobs]`` on the run's workers, one bar step per job."""
        return run_jobs(func, jobs, n_jobs=self.n_jobs, bar=self.bar)

    def machine(self) -> dict[str, dict[str, Any]]:
        """The machine at the start and now (cores, load averages, Torch)."""
        return self.log.machine()


@dataclass(frozen=True)
class Experiment:
    """An experiment as a specification; :meth:`run` does the steps every experiment shares.

    Parameters
    ----------
    name : str
        The experiment's name (``python -m skflow_experiments NAME``, the results page's
        markers, the default output folder ``output/experiments/NAME``).
    presets : dict
        Preset name -> configuration.
    measure : callable
        ``measure(run) -> outputs``: the work, given the :class:`Run` (seeds, config, jobs,
        progress bar).
    assemble : callable
        ``assemble(run, outputs) -> results``: the dict written as ``results.json``, in the
        order its keys are written (``run.wall`` and ``run.machine()`` are the records).
    configure : callable, optional
        ``configure(preset, seeds, n_tasks) -> cfg``; default
        :func:`~skflow_experiments.protocol.preset_config` of ``presets``.
    units : callable, optional
        ``units(cfg, seeds) -> int``: steps of the progress bar (default: no bar).
    desc : str, default=""
        The progress bar's label.
    figure : callable, optional
        ``figure(results, outputs, folder) -> path`` draws the run's PNG; its file name is
        recorded as ``results["figure"]``.
    docs : callable, optional
        ``docs(results, command) -> markdown``: the experiment's section of the results page.
    headline : callable, optional
        ``headline(summary) -> [(quantity, value), ...]``: the numbers the command line
        prints after a run (default: the summary's numbers, flattened).
    plain : bool, default=True
        Return the results as plain Python (lists instead of arrays), as written.
    options : tuple of str, default=()
        The keyword arguments of :meth:`run` that only this experiment takes (handed to the
        work as ``run.options``); any other name raises ``TypeError``.

    Examples
    --------
    >>> import tempfile
    >>> spec = Experiment(
    ...     name="toy",
    ...     presets={"tiny": {"n_seeds": 2, "n_eval_tasks": 3}},
    ...     measure=lambda run: [s * run.cfg["n_eval_tasks"] for s in run.seeds],
    ...     assemble=lambda run, outputs: {"preset": run.preset, "values": outputs},
    ... )
    >>> res = spec.run("tiny", output_dir=tempfile.mkdtemp(), random_state=1)
    >>> res["values"], sorted(res)
    ([3, 6], ['output_dir', 'preset', 'values'])
    """

    name: str
    presets: dict[str, dict[str, Any]]
    measure: Callable[[Run], Any]
    assemble: Callable[[Run, Any], dict]
    configure: Callable[[str, int | None, int | None], dict] | None = None
    units: Callable[[dict, list[int]], int] | None = None
    desc: str = ""
    figure: Callable[[dict, Any, Path], Path] | None = None
    docs: Callable[[dict, str], str] | None = None
    headline: Callable[[dict], list[tuple[str, str]]] | None = None
    plain: bool = True
    options: tuple[str, ...] = ()

    def config(self, preset: str, seeds: int | None, n_tasks: int | None) -> dict[str, Any]:
        """The configuration of ``preset`` with the command line's seed and task counts."""
        if self.configure is not None:
            return self.configure(preset, seeds, n_tasks)
        return preset_config(self.presets, preset, seeds=seeds, n_tasks=n_tasks)

    def run(
        self,
        preset: str = "quick",
        *,
        output_dir: str | Path | None = None,
        n_jobs: int | None = None,
        random_state: int = 0,
        seeds: int | None = None,
        n_tasks: int | None = None,
        progress: bool = False,
        **options: Any,
    ) -> dict[str, Any]:
        """Run the experiment; write ``results.json`` and the figure into ``output_dir``.

        Parameters
        ----------
        preset : str, default="quick"
            A key of ``presets``.
        output_dir : str or Path, optional
            Default ``output/experiments/NAME`` (created if needed).
        n_jobs : int or None, default=None
            joblib workers of the run's jobs.
        random_state : int, default=0
            First seed.
        seeds, n_tasks : int, optional
            Overrides of the preset's seed and held-out task counts.
        progress : bool, default=False
            Show a progress bar on stderr (when ``units`` counts the work; else nothing).
        **options
            Arguments of this experiment alone (named in ``options``), kept in ``run.options``.

        Returns
        -------
        results : dict
            ``assemble``'s dict with ``figure`` (when drawn) and ``output_dir``.
        """
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise TypeError(f"{self.name}.run() got unexpected keyword arguments {unknown}")
        cfg = self.config(preset, seeds, n_tasks)
        folder = f"output/experiments/{self.name}" if output_dir is None else output_dir
        log = RunLog(folder, random_state, cfg.get("n_seeds", 1))
        run = Run(preset, cfg, log.seeds, int(random_state), n_jobs, log, options)
        total = 0 if self.units is None else self.units(cfg, log.seeds)
        bar = progress_bar(total, self.desc, progress and self.units is not None)
        with TorchThreads(cfg.get("torch_threads")), bar:
            run.bar = bar
            outputs = self.measure(run)
        run.wall = log.wall()
        results = self.assemble(run, outputs)
        draw = None if self.figure is None else lambda res, out: self.figure(res, outputs, out)
        return log.finish(results, draw, plain=self.plain)

    def write_docs(self, results: dict, command: str, path: str | Path | None = None) -> Path:
        """Write ``docs(results, command)`` and the run's figure to the experiment's section of
        the results page (``path``, default ``docs/results.md``); returns the page's path."""
        if self.docs is None:
            raise ValueError(f"{self.name} has no section on the results page.")
        return write_run_section(self.name, self.docs(results, command), results, path)
