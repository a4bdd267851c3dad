"""``quantformer demo``: the main job end to end on the SOTU example
(:func:`quantformer.select.demo.run_demo`)."""

from __future__ import annotations

import argparse

from ..select.demo import MAX_LENGTH, SINCE, TRAIN_DOCS, run_demo
from ._options import (
    add_device_option,
    add_model_option,
    add_quiet_option,
    max_length_arg,
    positive,
)


def _count_or_all(s: str) -> int | None:
    """argparse type: a whole number of at least 2, or ``all`` (None)."""
    if s.lower() == "all":
        return None
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a whole number or 'all', not '{s}'") from None
    if v < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2, not {s}")
    return v


def add_cli(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="the main job on the SOTU example: fine-tune, predict held-out addresses, evaluate",
        description="Fine-tune the default model to recognise the president's party in State "
                    f"of the Union paragraphs since {SINCE} (train and test split by address), "
                    "predict the held-out addresses and print the evaluation. Writes "
                    "predictions (.parquet, .rds), evaluation.json, confusion.png and model/.",
    )
    p.add_argument("--out", required=True, help="output folder (created; its demo files are "
                                                "replaced)")
    p.add_argument("--train-docs", type=_count_or_all, default=TRAIN_DOCS,
                   help=f"training paragraphs sampled, or 'all' ({TRAIN_DOCS})")
    p.add_argument("--test-docs", type=_count_or_all, default=None,
                   help="test paragraphs sampled, or 'all' (all)")
    add_model_option(p)
    p.add_argument("--epochs", type=positive(int), default=None,
                   help="epochs (default: by model size, as finetune)")
    p.add_argument("--max-length", type=max_length_arg, default=MAX_LENGTH,
                   help=f"tokens per paragraph ({MAX_LENGTH})")
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    add_device_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    run_demo(args.out, train_docs=args.train_docs, test_docs=args.test_docs, model=args.model,
             epochs=args.epochs, max_length=args.max_length, seed=args.seed,
             device=args.device, quiet=args.quiet)
    return 0
