"""How to install an optional part of skflow: one place for the distribution's name.

The import name is ``skflow``; the distribution on the package index is ``skflow-matching``
(the index's ``skflow`` is an unrelated project). Every message that tells a user how to get an
optional dependency is written by :func:`install_hint`, so a hint can never name the wrong
distribution or an extra that does not exist.
"""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "install_hint"]

#: The name to ``pip install`` (the import name stays ``skflow``).
DISTRIBUTION = "skflow-matching"


def install_hint(extra: str) -> str:
    """The command that installs skflow with an optional extra, from the index or a clone.

    Parameters
    ----------
    extra : str
        An extra of ``pyproject.toml``'s ``[project.optional-dependencies]``.

    Returns
    -------
    hint : str
        The ``pip install`` command of the distribution with that extra, and its form for
        a clone.

    Examples
    --------
    >>> from skflow._install import install_hint
    >>> install_hint("plot")
    "pip install 'skflow-matching[plot]' (from a clone: pip install -e '.[plot]')"
    """
    return f"pip install '{DISTRIBUTION}[{extra}]' (from a clone: pip install -e '.[{extra}]')"
