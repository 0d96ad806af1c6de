"""Command line of the experiments: python -m skflow_experiments NAME [preset] [options].

Run from the root of a clone of the repository (the experiments are not installed with skflow).

Runs one experiment with a progress bar (stderr, with an ETA), then prints a short table of
its headline numbers with their 95 % intervals and the path of every file it wrote. --json
prints the run's summary as JSON instead of the table; --write-docs writes the experiment's
section of docs/results.md with this exact command line (never for a smoke run).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import json
import sys
import time
from pathlib import Path

from . import EXPERIMENTS
from ._io import SMOKE, WarningTally
from ._report import recorded_wall_times

_SMOKE_LABEL = "smoke: not a result (a short run that only checks the pipeline works)"


def _one_line(name: str) -> str:
    """The first line of experiment ``name``'s module docstring, read without importing it."""
    spec = importlib.util.find_spec(f"skflow_experiments.{name}")
    if spec is None or spec.origin is None:
        return "(module not found)"
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""
    return doc.strip().split("\n")[0]


def _times(name: str, recorded: dict[str, dict[str, float]]) -> str:
    """Preset times of ``name`` as recorded on the results page; the rest said unrecorded."""
    runs = recorded.get(name, {})
    parts = [f"{preset}: {seconds:.0f} s (recorded run)" for preset, seconds in runs.items()]
    missing = [p for p in ("smoke", "quick", "full") if p not in runs]
    return "; ".join([*parts, ", ".join(missing) + ": not recorded"])


def _epilog() -> str:
    recorded = recorded_wall_times()
    lines = [
        "experiments (times: the wall time of the run recorded in docs/results.md, on the",
        "machine described there; other presets are not recorded):",
        "",
    ]
    for name in EXPERIMENTS:
        lines += [f"  {name:<10} {_one_line(name)}", f"  {'':<10} {_times(name, recorded)}"]
    lines += [
        "",
        "presets: smoke (tries the pipeline, meant to take at most 2 minutes on 2 cores; not a",
        "result, never written to the docs), quick (the CPU preset whose results are in",
        "docs/results.md), full (the paper's scale, a GPU job).",
        "example: python -m skflow_experiments attention --smoke",
    ]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m skflow_experiments",
        description=__doc__.split("\n\n", 1)[1].strip(),
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", choices=EXPERIMENTS, metavar="NAME", help="the experiment")
    group = parser.add_mutually_exclusive_group()
    for preset, text in (
        ("smoke", "a short run that checks the pipeline (not a result)"),
        ("quick", "the CPU preset (the default)"),
        ("full", "the paper's scale, meant for a GPU"),
    ):
        group.add_argument(
            f"--{preset}", dest="preset", action="store_const", const=preset, help=text
        )
    group.add_argument("--preset", dest="preset", help="a preset by name (e.g. tiny, long)")
    parser.add_argument("--output-dir", default=None, help="default: output/experiments/NAME")
    parser.add_argument("--n-jobs", type=int, default=None, help="joblib workers")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=None, help="number of training seeds")
    parser.add_argument("--n-tasks", type=int, default=None, help="held-out tasks per seed")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--write-docs", action="store_true", help="update docs/results.md")
    parser.add_argument("--docs-path", default=None, help="page --write-docs updates")
    return parser


def _run(module, args, output_dir: str):
    """Call ``module.run`` with the command line's options (``progress`` where accepted)."""
    kwargs = {
        key: value
        for key, value in (("seeds", args.seeds), ("n_tasks", args.n_tasks))
        if value is not None
    }
    if "progress" in inspect.signature(module.run).parameters:
        kwargs["progress"] = not args.no_progress
    return module.run(
        args.preset or "quick",
        output_dir=output_dir,
        n_jobs=args.n_jobs,
        random_state=args.seed,
        **kwargs,
    )


def _generic_rows(s: dict, prefix: str = "") -> list[tuple[str, str]]:
    """The numbers of a summary this command line has no table for, flattened."""
    rows: list[tuple[str, str]] = []
    for key, value in s.items():
        if isinstance(value, dict):
            rows += _generic_rows(value, f"{prefix}{key}.")
        elif isinstance(value, bool | int | float):
            rows.append(
                (f"{prefix}{key}", f"{value:.4g}" if isinstance(value, float) else str(value))
            )
    return rows


def headline_rows(name: str, summary: dict) -> list[tuple[str, str]]:
    """``(quantity, value [95 % CI])`` rows of experiment ``name``'s key numbers.

    Intervals are the protocol's 95 % bootstrap intervals over held-out tasks, with the
    median heuristic of the true points. The rows are the ``headline`` of the experiment's
    spec (its module's ``SPEC``); an experiment without one shows the numbers of its summary
    (at most 30).

    Examples
    --------
    >>> headline_rows("scarcity", {"support_sizes": [10], "true": {
    ...     "learned_vs_plugin": {"10": {"pct": 20.0, "ci": [15.0, 25.0]}},
    ...     "learned_vs_plugin_tuned": {"10": {"pct": 5.0, "ci": [1.0, 9.0]}}}})[0]
    ('m = 10: learned MMD² below plug-in', '+20.0 % [+15.0 %, +25.0 %]')
    """
    spec = (
        importlib.import_module(f"skflow_experiments.{name}").SPEC if name in EXPERIMENTS else None
    )
    if spec is not None and spec.headline is not None:
        rows = spec.headline(summary)
    else:
        rows = _generic_rows(summary)[:30]
    if "wall_seconds" in summary:
        rows.append(("wall time", f"{summary['wall_seconds']:.0f} s"))
    return rows


def format_report(name: str, results: dict, files: list[str], label: str | None = None) -> str:
    """The end-of-run text: optional label, the headline table, the files written.

    Examples
    --------
    >>> print(format_report("x", {"preset": "tiny", "summary": {"a": 1.5}}, ["out/r.json"]))
    x (preset tiny): headline numbers
      a  1.5
    files written:
      out/r.json
    """
    rows = headline_rows(name, results.get("summary", {}))
    width = max((len(q) for q, _ in rows), default=0)
    lines = [f"[{label}]"] if label else []
    lines.append(f"{name} (preset {results.get('preset', '?')}): headline numbers")
    if any("[" in v for _, v in rows):
        lines.append("  (value [95 % interval]; MMD² with the median heuristic of the true points)")
    lines += [f"  {q:<{width}}  {v}" for q, v in rows]
    lines.append("files written:")
    lines += [f"  {f}" for f in files] or ["  (none)"]
    if label:
        lines.append(f"[{label}]")
    return "\n".join(lines)


def _files_written(output_dir: str, since: float) -> list[str]:
    """Every file under ``output_dir`` modified at or after ``since`` (this run's files)."""
    root = Path(output_dir)
    if not root.exists():
        return []
    # file systems store modification times coarsely: allow one second of slack
    return sorted(
        str(p) for p in root.rglob("*") if p.is_file() and p.stat().st_mtime >= since - 1.0
    )


def _print_warnings(tally: WarningTally) -> None:
    """The run's warnings on stderr, each distinct one once with its count."""
    lines = tally.lines()
    if lines:
        print(
            f"warnings of the run ({len(tally.records)}, each distinct one once):", file=sys.stderr
        )
        for line in lines:
            print("  " + line, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run one experiment; print its headline table and files (or JSON with ``--json``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    args = parser.parse_args(argv)
    preset = args.preset or "quick"
    if preset == SMOKE and args.write_docs:
        parser.error("--write-docs: a smoke run is not a result and is never written to the docs")
    if preset == SMOKE:
        print(f"[{_SMOKE_LABEL}]", file=sys.stderr)
    module = importlib.import_module(f"skflow_experiments.{args.name}")
    output_dir = args.output_dir or f"output/experiments/{args.name}"
    start = time.time()
    with WarningTally() as tally:  # one line per distinct warning instead of one per fit
        results = _run(module, args, output_dir)
    _print_warnings(tally)
    files = _files_written(output_dir, start)
    if args.write_docs:
        command = "python -m skflow_experiments " + " ".join(argv)
        page = module.write_docs(results, command, args.docs_path)
        files.append(f"{page} (wrote its section for {args.name})")
    if args.json:
        print(json.dumps(results.get("summary", results), indent=2, default=float))
    else:
        label = _SMOKE_LABEL if preset == SMOKE else None
        print(format_report(args.name, results, files, label=label))
    return 0


if __name__ == "__main__":
    sys.exit(main())
