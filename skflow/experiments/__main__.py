"""``python -m skflow.experiments NAME [--quick | --full | --preset P] [--output-dir DIR]``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from . import EXPERIMENTS


def main(argv: list[str] | None = None) -> int:
    """Run one experiment and print its summary as JSON."""
    parser = argparse.ArgumentParser(prog="python -m skflow.experiments")
    parser.add_argument("name", choices=EXPERIMENTS)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", dest="preset", action="store_const", const="quick")
    group.add_argument("--full", dest="preset", action="store_const", const="full")
    group.add_argument("--preset", dest="preset")
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    module = importlib.import_module(f"skflow.experiments.{args.name}")
    output_dir = args.output_dir or f"output/experiments/{args.name}"
    results = module.run(
        args.preset or "quick",
        output_dir=output_dir,
        n_jobs=args.n_jobs,
        random_state=args.seed,
    )
    print(json.dumps(results.get("summary", results), indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
