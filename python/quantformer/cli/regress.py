"""``quantformer regress``: regress a measured class on docvars (OLS or logistic) with
prediction-powered confidence intervals."""

from __future__ import annotations

from ..io.writable import check_output_file
from ..measure.prevalence import METHODS
from ..measure.regress import FAMILIES, regress
from ._options import add_gold_options, add_table_out_option, gold_kwargs, show_and_write_table


def add_cli(sub) -> None:
    p = sub.add_parser(
        "regress",
        help="regress a measured class on docvars (OLS/logistic) with PPI intervals",
        description="Coefficients of a regression of one class's indicator on docvars, with "
                    "prediction-powered confidence intervals from a prediction file and a "
                    "hand-coded random sample (Angelopoulos et al. 2023), or design-based "
                    "supervised learning (--method dsl). Output columns: "
                    "outcome, term, estimate, ci_low, ci_high, family, method, n_gold, "
                    "n_total, note (which predictions were used: probabilities, or the hard "
                    "labels where a document has none). --pred takes predict's or zeroshot's "
                    "output (predicted, prob_*) or annotate's codes (label, prob_*) as they "
                    "are.",
    )
    add_gold_options(p)
    p.add_argument("--formula", required=True,
                   help="'CLASS ~ docvar + docvar' (patsy syntax on the right, e.g. C(party))")
    p.add_argument("--family", default="ols", choices=FAMILIES, help="ols (default) or logistic")
    p.add_argument("--method", default="ppi", choices=METHODS,
                   help="ppi (default), naive (predicted labels), gold (hand-coded alone) or "
                        "dsl (design-based supervised learning, Egami et al. 2023: "
                        "pseudo-outcomes from the predictions and the gold codes weighted by "
                        "their known inclusion probabilities (--weight-col), regressed with "
                        "sandwich standard errors)")
    add_table_out_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if args.out:
        check_output_file(args.out)
    table = regress(args.pred, args.gold, args.formula, family=args.family,
                    method=args.method, **gold_kwargs(args))
    show_and_write_table(table, args.out, f"{args.family} regression ({args.method}, "
                         f"{args.level:.0%} intervals)", shown=table if table["note"].any()
                         else table.drop(columns="note"))
    return 0
