"""The results page (``docs/results.md``): each experiment's section between its markers,
the Markdown the sections share (opening lines, one table per MMD² bandwidth convention, a
percentage with its interval) and the wall times recorded there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ._io import SMOKE, prepare_output

#: The page the experiments' ``--write-docs`` updates.
RESULTS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "results.md"


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


def section_head(
    results: dict, command: str, preset_line: str, label: str | None = None
) -> list[str]:
    """The opening lines of a section: the command, the preset, the machine.

    Parameters
    ----------
    results : dict
        The output of an experiment's ``run`` (its ``machine`` entry is read).
    command : str
        The exact command line that produced ``results``.
    preset_line : str
        The experiment's sentence on its preset (sizes, seeds, wall time).
    label : str, optional
        A bold title between the command and the preset (a run under a named setting).

    Returns
    -------
    lines : list of str
        Markdown lines, blank lines between paragraphs.

    Examples
    --------
    >>> info = {"cpu_count": 2, "platform": "p", "torch": "t", "load_average": None}
    >>> section_head({"machine": {"start": info, "end": info}}, "cmd", "Preset `x`.")[:3]
    ['Command (from the repository root): `cmd`', '', 'Preset `x`.']
    """
    lines = [f"Command (from the repository root): `{command}`", ""]
    if label:
        lines += [f"**{label}.**", ""]
    machine = results["machine"]
    return [*lines, preset_line, "", machine_line(machine["start"], machine["end"])]


def convention_tables(
    table: Callable[[str], str],
    labels: tuple[str, str],
    caption: str,
    note: str | None = None,
) -> list[str]:
    """One captioned table per MMD² bandwidth convention: true points first, then pooled.

    Parameters
    ----------
    table : callable
        ``table(convention)``, the Markdown table of ``"true"`` or ``"pooled"``.
    labels : tuple of str
        What each convention's bandwidth comes from, in words (true, pooled).
    caption : str
        The sentence above each table; ``{label}`` stands for the convention's label.
    note : str, optional
        The sentence under each table.

    Returns
    -------
    lines : list of str
        Markdown lines, each paragraph preceded by a blank line.

    Examples
    --------
    >>> convention_tables(str.upper, ("a", "b"), "from {label}:")
    ['', 'from a:', '', 'TRUE', '', 'from b:', '', 'POOLED']
    """
    lines: list[str] = []
    for conv, label in zip(("true", "pooled"), labels, strict=True):
        lines += ["", caption.format(label=label), "", table(conv)]
        if note is not None:
            lines += ["", note]
    return lines


def lower_pct(comparison: dict) -> dict[str, Any]:
    """How much lower the challenger is, in percent, with its interval.

    ``100 (1 - mean(challenger) / mean(baseline))`` from a comparison's ``ratio`` (baseline /
    challenger) and ``ratio_ci``.

    Examples
    --------
    >>> lower_pct({"ratio": 2.0, "ratio_ci": [1.0, 4.0]})
    {'pct': 50.0, 'ci': [0.0, 75.0]}
    """
    with np.errstate(divide="ignore"):
        inv = 1.0 / np.asarray([comparison["ratio"], *comparison["ratio_ci"]], dtype=float)
    return {"pct": float(100 * (1 - inv[0])), "ci": [float(100 * (1 - v)) for v in inv[1:]]}


def value_ci(value: float, ci: Any, fmt: str = "{:.3g}") -> str:
    """A value and its interval ``[lo, hi]``, each written with ``fmt``.

    Examples
    --------
    >>> value_ci(2.0, [1.5, 2.5])
    '2 [1.5, 2.5]'
    """
    return f"{fmt.format(value)} [{fmt.format(ci[0])}, {fmt.format(ci[1])}]"


def ci_pct(r: dict) -> str:
    """A percentage and its 95 % interval, signed, one decimal: ``r["pct"]``, ``r["ci"]``.

    Examples
    --------
    >>> ci_pct({"pct": 12.34, "ci": [-1.0, 20.0]})
    '+12.3 % [-1.0 %, +20.0 %]'
    """
    return f"{r['pct']:+.1f} % [{r['ci'][0]:+.1f} %, {r['ci'][1]:+.1f} %]"


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
