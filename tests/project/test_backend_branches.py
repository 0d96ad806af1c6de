"""The NumPy/Torch seam holds (issue #64): array-type branches live in ``skflow/_array.py``.

An array-type branch is a test of an array's library outside the seam: ``isinstance(...,
torch.Tensor)``, ``torch.is_tensor(``, ``is_torch(``, ``is_numpy(``, ``xp is torch`` or a
backend-name comparison (``backend == "torch"``). Modules ask ``skflow._array`` instead (its
``get_backend``, ``dispatch``, ``as_time``, ``as_array``, ``to_numpy``, ``host_to_like``,
...); the few branches left are counted here, one per occurrence, and may not grow past
:data:`MAX_BRANCHES`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "skflow"
#: The most array-type branches allowed outside ``skflow/_array.py`` (22 before issue #64).
MAX_BRANCHES = 15
#: The branch patterns, as issue #64 counts them with grep -E.
BRANCH = re.compile(
    r"torch\.is_tensor\(|isinstance\([^)]*Tensor|is_torch\(|backend ?(==|!=|in) "
    r"|xp is torch|is_numpy\("
)


def branches(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` once per branch pattern occurring in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        found += [(number, line.strip())] * len(BRANCH.findall(line))
    return found


def test_the_count_is_one_per_occurrence():
    text = (
        "if is_torch(a) and is_torch(b):\n"
        "    pass\n"
        "elif isinstance(x, torch.Tensor) or torch.is_tensor(y):\n"
        'ok = backend == "torch" or backend in ("a",) or xp is torch or is_numpy(z)\n'
        "get_backend(a).is_torch  # an attribute of the backend: no branch\n"
    )
    assert [n for n, _ in branches(text)] == [1, 1, 3, 3, 4, 4, 4, 4]


def test_array_type_branches_stay_in_the_seam():
    offenders = [
        f"{path.relative_to(ROOT.parent)}:{number}: {line}"
        for path in sorted(ROOT.rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != "_array.py"
        for number, line in branches(path.read_text(encoding="utf-8"))
    ]
    assert len(offenders) <= MAX_BRANCHES, (
        f"{len(offenders)} array-type branches outside skflow/_array.py (at most "
        f"{MAX_BRANCHES}); ask skflow._array (get_backend, dispatch, as_time, as_array, "
        "to_numpy, host_to_like) instead:\n" + "\n".join(offenders)
    )
