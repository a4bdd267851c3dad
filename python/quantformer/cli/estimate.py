"""``quantformer estimate``: the prevalence of each class (per group) with valid confidence
intervals, from a prediction file and a hand-coded random sample."""

from __future__ import annotations

from ..io.writable import check_output_file
from ..measure.prevalence import METHODS, estimate
from ._options import (
    add_gold_options,
    add_table_out_option,
    gold_kwargs,
    positive,
    show_and_write_table,
)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "estimate",
        help="prevalence of each class (per group) with valid confidence intervals (PPI)",
        description="The share of documents in each class, per group of --by docvars, with a "
                    "confidence interval, from a prediction file and a hand-coded random "
                    "sample (prediction-powered inference, Angelopoulos et al. 2023). Output "
                    "columns: the --by columns, class, estimate, ci_low, ci_high, method, "
                    "n_gold, n_total, note [, n_gold_needed]. --pred takes predict's or "
                    "zeroshot's output (predicted, prob_*) or annotate's codes (label, "
                    "prob_*) as they are; where a document has no probabilities its hard "
                    "label is the prediction, and the note says so.",
    )
    add_gold_options(p)
    p.add_argument("--by", default=None, help="docvar(s) to group by, comma-separated")
    p.add_argument("--method", default="ppi", choices=METHODS,
                   help="ppi (prediction-powered, default), naive (share of predicted labels) "
                        "or gold (hand-coded sample alone)")
    p.add_argument("--target-halfwidth", type=positive(float), default=None,
                   help="also report how many hand-coded documents give intervals of this "
                        "half-width (e.g. 0.02)")
    add_table_out_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.out:
        check_output_file(args.out)
    table = estimate(args.pred, args.gold, by=args.by, method=args.method,
                     target_halfwidth=args.target_halfwidth, **gold_kwargs(args))
    # the note column is printed only when a row has a note; the file always has it
    show_and_write_table(table, args.out, f"prevalence ({args.method}, {args.level:.0%} "
                         "intervals)", shown=table if table["note"].any()
                         else table.drop(columns="note"))
    return 0
