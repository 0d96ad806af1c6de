"""``python -m skflow.experiments NAME [--quick | --full | --preset P] [options]``.

Options: ``--output-dir DIR``, ``--n-jobs N``, ``--seed S`` (first seed), ``--seeds N``
(number of training seeds), ``--n-tasks N`` (held-out tasks per seed), ``--write-docs``
(write the experiment's section of ``docs/results.md``, with this exact command line) and
``--docs-path FILE`` (another page with the same markers, e.g. a copy in tests).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from . import EXPERIMENTS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m skflow.experiments")
    parser.add_argument("name", choices=EXPERIMENTS)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", dest="preset", action="store_const", const="quick")
    group.add_argument("--full", dest="preset", action="store_const", const="full")
    group.add_argument("--preset", dest="preset")
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=None, help="number of training seeds")
    parser.add_argument("--n-tasks", type=int, default=None, help="held-out tasks per seed")
    parser.add_argument("--write-docs", action="store_true", help="update docs/results.md")
    parser.add_argument("--docs-path", default=None, help="page --write-docs updates")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one experiment, print its summary as JSON, optionally write its docs section."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    module = importlib.import_module(f"skflow.experiments.{args.name}")
    output_dir = args.output_dir or f"output/experiments/{args.name}"
    overrides = {
        key: value
        for key, value in (("seeds", args.seeds), ("n_tasks", args.n_tasks))
        if value is not None
    }
    results = module.run(
        args.preset or "quick",
        output_dir=output_dir,
        n_jobs=args.n_jobs,
        random_state=args.seed,
        **overrides,
    )
    print(json.dumps(results.get("summary", results), indent=2, default=float))
    if args.write_docs:
        command = "python -m skflow.experiments " + " ".join(argv)
        page = module.write_docs(results, command, args.docs_path)
        print(f"wrote its section of {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
