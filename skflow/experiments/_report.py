"""The Markdown every experiment's section of the results page shares: its opening lines
(command, preset, machine), one table per MMD² bandwidth convention, and a percentage with
its interval."""

from __future__ import annotations

from collections.abc import Callable

from ._io import machine_line


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


def ci_pct(r: dict) -> str:
    """A percentage and its 95 % interval, signed, one decimal: ``r["pct"]``, ``r["ci"]``.

    Examples
    --------
    >>> ci_pct({"pct": 12.34, "ci": [-1.0, 20.0]})
    '+12.3 % [-1.0 %, +20.0 %]'
    """
    return f"{r['pct']:+.1f} % [{r['ci'][0]:+.1f} %, {r['ci'][1]:+.1f} %]"
