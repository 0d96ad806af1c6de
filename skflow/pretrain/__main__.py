"""``python -m skflow.pretrain``: the former name of ``python -m skflow.priors`` (deprecated)."""

from __future__ import annotations

import warnings

from skflow.priors.__main__ import main as _priors_main

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run ``python -m skflow.priors`` with ``argv``, after a deprecation warning."""
    # a FutureWarning: shown to the person who typed the command (a DeprecationWarning is not)
    warnings.warn(
        "python -m skflow.pretrain is deprecated: use python -m skflow.priors.",
        FutureWarning,
        stacklevel=2,
    )
    return _priors_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
