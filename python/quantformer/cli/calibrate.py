"""``quantformer calibrate``: fit temperature scaling on validation predictions and store it in
the model directory."""

from __future__ import annotations

from ..io.columns import LABEL_COLUMN
from ..score.calibration import calibrate


def add_cli(sub) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit temperature scaling on validation predictions; store it in the model",
        description="Fit one temperature (Guo et al. 2017) on a model's predictions for "
                    "hand-coded validation documents and store it in the model directory's "
                    "quantformer.json; `predict --calibrated` then applies it.",
    )
    p.add_argument("--model", required=True, help="model directory from `quantformer finetune`")
    p.add_argument("--pred", required=True,
                   help="its `predict` output on labelled validation documents")
    p.add_argument("--truth-col", default=LABEL_COLUMN,
                   help="column of --pred with the true class")
    p.set_defaults(func=run)


def run(args) -> int:
    res = calibrate(args.model, args.pred, truth_col=args.truth_col)
    print(f"temperature {res['temperature']:.3f} fitted on {res['n']} documents; expected "
          f"calibration error {res['ece_before']:.4f} -> {res['ece_after']:.4f}; stored in "
          f"{args.model}")
    return 0
