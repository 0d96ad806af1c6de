"""``python -m skflow.priors NAME``: train (or extend) a shipped prior.

Examples: ``python -m skflow.priors general-16`` (the recipe's budget, about half an hour on
one core), ``python -m skflow.priors general-16 --max-iter 500 --out /tmp/prior`` (a short
run elsewhere), ``--checkpoint DIR`` to write a checkpoint (tensors and JSON, no pickle)
into ``DIR`` after every chunk and ``--resume --checkpoint DIR`` to continue an interrupted
run from it,
``--write-docs`` to rewrite ``docs/pretrained.md`` from the shipped model cards,
``--refresh-finetune`` to write a recipe's fine-tuning parameters into its shipped card (the
weights untouched: they do not depend on them).
"""

from __future__ import annotations

import argparse

from ..samplers.prior_store import update_finetune_params
from .model_card import write_docs
from .recipes import RECIPES
from .training import train_prior


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skflow.priors", description=__doc__)
    parser.add_argument("name", nargs="?", choices=sorted(RECIPES), help="recipe to train")
    parser.add_argument("--max-iter", type=int, default=None, help="total iterations")
    parser.add_argument("--out", default=None, help="folder of the weights and model card")
    parser.add_argument(
        "--checkpoint", default=None, help="checkpoint folder, written after every chunk"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from the checkpoint in --checkpoint"
    )
    parser.add_argument("--no-progress", action="store_true", help="no per-chunk progress bar")
    parser.add_argument(
        "--write-docs", action="store_true", help="write docs/pretrained.md from the cards"
    )
    parser.add_argument(
        "--refresh-finetune",
        action="store_true",
        help="write the recipe's fine-tuning parameters into its card (the shipped one, or "
        "the one in --out), no training",
    )
    args = parser.parse_args(argv)
    if args.refresh_finetune:
        if args.name is None:
            parser.error("name the recipe whose card to refresh")
        finetune = RECIPES[args.name]["finetune"]
        print(f"wrote {update_finetune_params(args.name, finetune, args.out)}")
        return 0
    if args.write_docs:
        print(f"wrote {write_docs()}")
        if args.name is None:
            return 0
    if args.name is None:
        parser.error("name the recipe to train (or pass --write-docs)")
    if args.resume and args.checkpoint is None:
        parser.error("--resume needs --checkpoint DIR, the folder of the interrupted run")
    card = train_prior(
        args.name,
        max_iter=args.max_iter,
        folder=args.out,
        checkpoint=args.checkpoint,
        resume=args.resume,
        progress=not args.no_progress,
    )
    print(f"wrote {card} and its weights")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
