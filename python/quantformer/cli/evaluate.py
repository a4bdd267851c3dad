"""``quantformer evaluate``: accuracy, macro-F1, per-class scores and the confusion matrix of
a predictions file or of a model directory on a labelled test file; regression and
multi-label scores for those tasks.

The scores themselves come from :mod:`quantformer.score` (arrays and frames in, numbers out);
this module reads the files, runs the model, prints the report and writes ``--out``,
``--plot`` and ``--calibration-plot``.
"""

from __future__ import annotations

import json
from pathlib import Path

from .._core.atomic import json_default, write_text
from .._core.errors import InputError
from ..infer.load import load_model
from ..io.codes import read_machine_codes
from ..io.columns import LABEL_COLUMN, PREDICTED_COLUMN, PROB_PREFIX
from ..io.frames import read_frame
from ..io.formats import read_table_file
from ..io.modeldir import read_record
from ..io.writable import check_writable
from ..models.tasks import check_label_columns
from ..score.calibration import calibration_summary
from ..score.evaluate import apply_label_map, evaluate, parse_label_map
from ..score.metrics import multilabel_metrics, regression_metrics, scatter_plot
from ..score.truth import (
    bool_column,
    delimited_truth,
    join_truth_file,
    pred_with_truth,
    zero_one_truth,
)
from ..train.data import prepare
from ._options import (
    add_corpus_options,
    add_device_option,
    add_labels_file_option,
    add_quiet_option,
    add_task_options,
    corpus_kwargs,
    positive,
)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "evaluate",
        help="accuracy, macro-F1, per-class scores and confusion matrix",
        description="Evaluate predictions against hand-coded labels: either a predictions file "
                    "(--pred, with the truth in --truth-col or another file --truth joined on "
                    "doc_id), or a model directory on a labelled test file (--model, --input).",
    )
    p.add_argument("--pred", default=None,
                   help="predictions file (output of predict or zeroshot: doc_id, predicted, "
                        "prob_*) or codes file (annotate: doc_id, label, prob_*)")
    p.add_argument("--truth", default=None,
                   help="file with the true labels (doc_id and a label column)")
    p.add_argument("--truth-col", default=None,
                   help="column of --pred that holds the true labels (e.g. label)")
    p.add_argument("--pred-col", default=None,
                   help="column of --pred with the predictions (default: predicted, else "
                        "label, as annotate writes it)")
    p.add_argument("--label-map", default=None,
                   help="map predicted labels to corpus codes: 'in favor of=2,against=1' or a "
                        "JSON file")
    p.add_argument("--model", default=None, help="model directory (with --input)")
    p.add_argument("--input", default=None, help="labelled test corpus (with --model)")
    add_corpus_options(p)
    add_labels_file_option(p)
    p.add_argument("--batch-size", type=positive(int), default=64,
                   help="documents per forward pass with --model at most (64; at most 4096 "
                        "padded tokens per pass)")
    add_device_option(p)
    add_quiet_option(p)
    p.add_argument("--out", default=None, help="write the report as JSON here")
    p.add_argument("--plot", default=None, help="write the confusion matrix as a PNG here")
    add_task_options(p, "with --pred: regression scores numbers (RMSE, MAE, Pearson, "
                        "Spearman, R^2; --plot: a scatter), multilabel the predicted_<label> "
                        "columns (per-label P/R/F1, micro/macro-F1, subset accuracy, Hamming "
                        "loss) against --label-cols or --label-sep truth; --model knows its "
                        "task")
    p.add_argument("--calibration-plot", default=None,
                   help="write the reliability diagram (needs prob_<class> columns) as a PNG")
    p.set_defaults(func=run)


def run(args) -> int:
    _check_outputs(args)
    mapping = parse_label_map(args.label_map)
    if args.model or args.input:
        scored = _model_scores(args, mapping)
    else:
        scored = _pred_scores(args, mapping)
    if scored is not None:  # None: a regression or multi-label report, already written
        _classification_report(args, *scored)
    return 0


# ------------------------------------------------------------------------------------------
# checks before any file is read


def _check_outputs(args) -> None:
    _check_png(args.plot)
    _check_png(args.calibration_plot)
    if args.out and Path(args.out).is_dir():
        raise InputError(f"--out '{args.out}' is a folder; give a file name such as report.json")
    for param in ("out", "plot", "calibration_plot"):
        if getattr(args, param):
            check_writable(getattr(args, param), param)
    check_label_columns(args.task, args.label_cols or None, args.label_sep or None)


def _check_png(path: str | None) -> None:
    if path and Path(path).suffix.lower() != ".png":
        raise InputError(f"--plot '{path}' must end in .png")
    if path and Path(path).is_dir():
        raise InputError(f"--plot '{path}' is a folder; give a file name such as cm.png")


def _check_one_truth(args) -> None:
    if bool(args.truth) == bool(args.truth_col):
        raise InputError("give exactly one of --truth (a file) or --truth-col (a column of "
                         "--pred)")


# ------------------------------------------------------------------------------------------
# classification: (truth, predicted, probability frame, labels, source)


def _model_scores(args, mapping):
    """A classifier directory on a labelled test file; None after a regression or
    multi-label model's report."""
    if not (args.model and args.input):
        raise InputError("--model and --input go together: a model directory and a "
                         "labelled test file")
    if args.pred:
        raise InputError("give either --pred or --model with --input, not both")
    if read_record(args.model).get("task", "classification") != "classification":
        _model_task_report(args)
        return None
    frame = read_frame(args.input, require_label=True, labels_file=args.labels_file,
                       **corpus_kwargs(args))
    clf = load_model(args.model, device=args.device, precision="fp32")
    preds = clf.predict(frame, batch_size=args.batch_size, progress=not args.quiet)
    return (frame[LABEL_COLUMN], apply_label_map(preds[PREDICTED_COLUMN], mapping), preds,
            clf.labels, f"{args.model} on {args.input}")


def _pred_scores(args, mapping):
    """A predictions file with its truth (a column of it, or a --truth file); None after a
    regression or multi-label report."""
    if not args.pred:
        raise InputError("give --pred (a predictions file) with --truth or --truth-col, "
                         "or --model with --input")
    if args.task != "classification":
        (_pred_regression if args.task == "regression" else _pred_multilabel)(args)
        return None
    _check_one_truth(args)
    codes = read_machine_codes(read_table_file(args.pred), f"--pred '{args.pred}'",
                               label_col=args.pred_col)
    labels = [str(c)[len(PROB_PREFIX):] for c in codes.frame.columns
              if str(c).startswith(PROB_PREFIX)] or None
    # one shape for every coder: the hard labels as `predicted`, the prob_ columns as read
    pred_df = codes.frame.assign(**{PREDICTED_COLUMN: codes.predicted()})
    if mapping and labels:
        labels = list(dict.fromkeys(mapping.get(x, x) for x in labels))
    if args.truth_col:
        if args.truth_col not in pred_df.columns:
            raise InputError(f"'{args.pred}' has no '{args.truth_col}' column; its columns "
                             f"are: {', '.join(map(str, pred_df.columns))}")
        return (pred_df[args.truth_col], apply_label_map(pred_df[PREDICTED_COLUMN], mapping),
                pred_df, labels, args.pred)
    joined = join_truth_file(pred_df, args.pred, args.truth, pred_col=PREDICTED_COLUMN,
                             mapping=mapping, id_col=args.id_col, label_col=args.label_col,
                             fmt=args.in_format)
    return joined["truth"], joined["pred"], joined, labels, args.pred


def _classification_report(args, truth, pred, probs, labels, source) -> None:
    report = evaluate(truth, pred, labels=labels)
    report.calibration = calibration_summary(probs, list(truth), labels or [],
                                             args.calibration_plot)
    report.print(title=f"evaluation of {source} ({report.n} documents)")
    if args.out:
        report.save(args.out)
        print(f"wrote {args.out}")
    if args.plot:
        report.plot(args.plot)
        print(f"wrote {args.plot}")
    if args.calibration_plot:
        print(f"wrote {args.calibration_plot}")


# ------------------------------------------------------------------------------------------
# regression and multi-label (issue 15)


def _model_task_report(args) -> dict:
    """``--model --input`` for a regression or multi-label model: prints the metrics, writes
    ``--out`` (JSON) and ``--plot`` (regression: predicted-vs-true scatter).

    Raises:
        InputError: ``--plot`` for a multi-label model; bad test data (as in training).
    """
    clf = load_model(args.model, device=args.device, precision="fp32")
    if args.plot and clf.task.name == "multilabel":
        raise InputError("--plot draws a confusion matrix or a regression scatter; a "
                         "multi-label model has neither: leave --plot out")
    frame = read_frame(args.input, text_col=args.text_col, id_col=args.id_col,
                       label_col=args.label_col, fmt=args.in_format,
                       require_label=getattr(clf.task, "label_cols", None) is None)
    data, n_missing_label, n_missing_text = prepare(frame, "test", clf.task)
    pred = clf.predict(data, batch_size=args.batch_size, progress=not args.quiet)
    result = {**clf.task.score(data, pred), "n_missing_label": n_missing_label,
              "n_missing_text": n_missing_text, "task": clf.task.name}
    # the scatter's data (regression only: a multi-label model refused --plot above)
    truth, predicted = (data[LABEL_COLUMN], pred[PREDICTED_COLUMN]) if args.plot else (None, None)
    return _task_report(result, args, f"evaluation of {args.model} on {args.input}", truth,
                        predicted)


def _pred_regression(args) -> dict:
    """``--pred F --task regression``: the truth is a column of it (``--truth-col``) or the
    ``--label-col`` (default ``label``) of a ``--truth`` file joined on ``doc_id``.

    Raises:
        InputError: a missing file or column, non-numbers, no shared doc_id.
    """
    _check_one_truth(args)
    truth_col = args.truth_col or args.label_col or LABEL_COLUMN
    pred_col = args.pred_col or PREDICTED_COLUMN
    frame = pred_with_truth(args.pred, args.truth, [truth_col], [pred_col], args.id_col)
    return _task_report({**regression_metrics(frame[truth_col], frame[pred_col]),
                         "task": "regression"}, args, f"evaluation of {args.pred}",
                        frame[truth_col], frame[pred_col])


def _pred_multilabel(args) -> dict:
    """``--pred F --task multilabel``: the ``predicted_<label>`` columns (as ``predict``
    writes them for a multi-label model) against one 0/1 column per label (``--label-cols
    a,b``, named as the labels) or one column of delimited labels (``--label-sep "|"``;
    empty = none of the labels), in ``--pred`` (``--label-cols``, or ``--truth-col`` with
    ``--label-sep``) or in a ``--truth`` file joined on ``doc_id`` (``--label-cols``, or
    ``--label-col``, default ``label``, with ``--label-sep``). Delimited labels that the
    model does not predict are ignored.

    Raises:
        InputError: neither or both of --label-cols / --label-sep, a missing
            ``predicted_<label>`` or truth column, a truth column that is not 0/1.
    """
    if args.plot:
        raise InputError("--plot draws a confusion matrix or a regression scatter; "
                         "multi-label predictions have neither: leave --plot out")
    cols = [c.strip() for c in args.label_cols.split(",") if c.strip()] \
        if args.label_cols else None
    if (cols is None) == (args.label_sep is None):
        raise InputError("evaluate --task multilabel needs either --label-cols A,B (one 0/1 "
                         "truth column per label) or --label-sep '|' (one column of delimited "
                         "labels)")
    if cols is None and bool(args.truth) == bool(args.truth_col):
        raise InputError("with --label-sep give exactly one of --truth (a file) or --truth-col "
                         "(a column of --pred)")
    sep_col = None if cols else (args.truth_col or args.label_col or LABEL_COLUMN)
    frame = pred_with_truth(args.pred, args.truth, cols or [sep_col], [], args.id_col)
    labels = cols or [str(c)[len("predicted_"):] for c in frame.columns
                      if str(c).startswith("predicted_")]
    missing = [f"predicted_{lab}" for lab in labels if f"predicted_{lab}" not in frame.columns]
    if missing or not labels:
        raise InputError(f"'{args.pred}' has no column {', '.join(missing) or 'predicted_<label>'}"
                         "; give the predictions of a multi-label model (predict writes "
                         "predicted_<label> per label)")
    pred = frame[[f"predicted_{lab}" for lab in labels]].apply(bool_column).to_numpy()
    truth = (zero_one_truth(frame, cols) if cols
             else delimited_truth(frame[sep_col], labels, args.label_sep))
    return _task_report({**multilabel_metrics(truth, pred, labels), "task": "multilabel"},
                        args, f"evaluation of {args.pred}")


def _task_report(result: dict, args, title: str, truth=None, predicted=None) -> dict:
    """Print ``result``, write ``--out`` (JSON) and, for regression, the ``--plot`` scatter."""
    _print_task_result(result, title)
    if args.out:
        write_text(args.out, json.dumps(result, indent=2, default=json_default))
        print(f"wrote {args.out}")
    if args.plot:
        scatter_plot(truth, predicted, args.plot)
        print(f"wrote {args.plot}")
    return result


def _print_task_result(result: dict, title: str) -> None:
    print(f"{title} ({result['n']} documents)")
    for key, value in result.items():
        if isinstance(value, float):
            print(f"  {key:<16} {value:.4f}")
    for label, row in result.get("per_label", {}).items():
        print(f"  {label:<16} precision {row['precision']:.3f}  recall {row['recall']:.3f}  "
              f"F1 {row['f1']:.3f}  support {row['support']}")
