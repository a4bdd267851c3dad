"""Metrics for continuous scores and multiple labels per document (issue 15).

Regression: root mean squared error and mean absolute error (in the outcome's units), Pearson
and Spearman correlation (scipy), R^2 (scikit-learn's ``r2_score``: 1 - SSE/SST, negative when
worse than the mean), and a predicted-vs-true scatter plot. Multi-label: per-label precision,
recall, F1 and support, micro- and macro-averaged F1, subset accuracy (all labels right) and
Hamming loss (share of wrong label decisions), all from scikit-learn (Tsoumakas & Katakis
2007, "Multi-label classification: an overview"). Documents with a missing truth or prediction
are left out and counted.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError


def regression_metrics(truth, predicted) -> dict:
    """RMSE, MAE, Pearson r, Spearman rho and R^2 of ``predicted`` against ``truth``.

    Args:
        truth, predicted: sequences of numbers (missing values are left out and counted).

    Returns:
        ``{"n", "n_missing", "rmse", "mae", "pearson", "spearman", "r2", "mean_truth",
        "mean_predicted"}`` (correlations are NaN when either side is constant).

    Raises:
        InputError: different lengths, fewer than 2 complete pairs, a non-numeric value.
    """
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

    from .train.tasks import as_numbers

    t, p = as_numbers(np.asarray(truth, dtype=object)), as_numbers(
        np.asarray(predicted, dtype=object))
    if len(t) != len(p):
        raise InputError(f"truth has {len(t)} values but the predictions {len(p)}; give one "
                         "prediction per document")
    ok = ~np.isnan(t) & ~np.isnan(p)
    if ok.sum() < 2:
        raise InputError("fewer than 2 documents have both a true and a predicted value; "
                         "regression metrics need at least 2")
    t, p = t[ok], p[ok]
    constant = np.ptp(t) == 0 or np.ptp(p) == 0
    return {"n": int(ok.sum()), "n_missing": int((~ok).sum()),
            "rmse": float(np.sqrt(mean_squared_error(t, p))),
            "mae": float(mean_absolute_error(t, p)),
            "pearson": float("nan") if constant else float(pearsonr(t, p)[0]),
            "spearman": float("nan") if constant else float(spearmanr(t, p)[0]),
            "r2": float(r2_score(t, p)),
            "mean_truth": float(t.mean()), "mean_predicted": float(p.mean())}


def scatter_plot(truth, predicted, path: str | os.PathLike, title: str | None = None) -> Path:
    """Predicted against true values, with the 45-degree line, as a PNG (atomic)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .frames import write_figure
    from .train.tasks import as_numbers

    t, p = as_numbers(np.asarray(truth, dtype=object)), as_numbers(
        np.asarray(predicted, dtype=object))
    ok = ~np.isnan(t) & ~np.isnan(p)
    m = regression_metrics(t, p)
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter(t[ok], p[ok], s=8, alpha=0.5)
    lo, hi = float(min(t[ok].min(), p[ok].min())), float(max(t[ok].max(), p[ok].max()))
    ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    ax.set_xlabel("true")
    ax.set_ylabel("predicted")
    ax.set_title(title or f"RMSE {m['rmse']:.3g}, r {m['pearson']:.3f}, R\u00b2 {m['r2']:.3f}")
    fig.tight_layout()
    return write_figure(fig, path)


def multilabel_metrics(truth, predicted, labels: list) -> dict:
    """Per-label precision/recall/F1/support, micro- and macro-F1, subset accuracy, Hamming loss.

    Args:
        truth, predicted: (n, k) arrays of 0/1 (or booleans); rows with a missing value in
            either are left out and counted.
        labels: the k label names, in column order.

    Returns:
        ``{"n", "n_missing", "micro_f1", "macro_f1", "subset_accuracy", "hamming_loss",
        "per_label": {label: {"precision", "recall", "f1", "support"}}}``.

    Raises:
        InputError: shapes that differ or do not match ``labels``; no complete document.
    """
    from sklearn.metrics import accuracy_score, f1_score, hamming_loss
    from sklearn.metrics import precision_recall_fscore_support as prfs

    t = np.asarray(pd.DataFrame(truth).astype("float64"))
    p = np.asarray(pd.DataFrame(predicted).astype("float64"))
    if t.shape != p.shape or t.shape[1] != len(labels):
        raise InputError(f"truth {t.shape} and predictions {p.shape} must both be documents x "
                         f"{len(labels)} labels")
    ok = ~np.isnan(t).any(axis=1) & ~np.isnan(p).any(axis=1)
    if not ok.any():
        raise InputError("no document has both true and predicted labels")
    t, p = t[ok].astype(int), p[ok].astype(int)
    prec, rec, f1, sup = prfs(t, p, average=None, zero_division=0)
    return {"n": int(ok.sum()), "n_missing": int((~ok).sum()),
            "micro_f1": float(f1_score(t, p, average="micro", zero_division=0)),
            "macro_f1": float(f1_score(t, p, average="macro", zero_division=0)),
            "subset_accuracy": float(accuracy_score(t, p)),
            "hamming_loss": float(hamming_loss(t, p)),
            "per_label": {lab: {"precision": float(prec[j]), "recall": float(rec[j]),
                                "f1": float(f1[j]), "support": int(sup[j])}
                          for j, lab in enumerate(labels)}}


def evaluate_model_task(args) -> dict | None:
    """``evaluate --model --input`` for regression and multi-label models (``None`` for a
    classifier: evaluate.py handles it). Prints the metrics, writes ``--out`` (JSON) and
    ``--plot`` (regression: predicted-vs-true scatter).

    Raises:
        InputError: ``--plot`` for a multi-label model; bad test data (as in training).
    """
    import json

    from .frames import read_frame
    from .modeldir import _json_default, read_record
    from .predict import Classifier
    from .train.data import prepare

    if read_record(args.model).get("task", "classification") == "classification":
        return None
    clf = Classifier.from_dir(args.model, device=args.device)
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
    _print(result, f"evaluation of {args.model} on {args.input}")
    if args.out:
        _write_json(args.out, json.dumps(result, indent=2, default=_json_default))
        print(f"wrote {args.out}")
    if args.plot:
        scatter_plot(data["label"], pred["predicted"], args.plot)
        print(f"wrote {args.plot}")
    return result


def _write_json(path, text: str) -> Path:
    from .frames import _tmp_path

    target = Path(path)
    tmp = _tmp_path(target)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def _print(result: dict, title: str) -> None:
    print(f"{title} ({result['n']} documents)")
    for key, value in result.items():
        if isinstance(value, float):
            print(f"  {key:<16} {value:.4f}")
    for label, row in result.get("per_label", {}).items():
        print(f"  {label:<16} precision {row['precision']:.3f}  recall {row['recall']:.3f}  "
              f"F1 {row['f1']:.3f}  support {row['support']}")


def evaluate_pred_regression(args) -> dict:
    """``evaluate --pred F --truth-col C --task regression``: regression metrics of a
    predictions file whose truth is a column of it (``--truth`` files are not supported yet).

    Raises:
        InputError: ``--truth`` instead of ``--truth-col``, a missing column, non-numbers.
    """
    import json

    from .frames import _read_raw, detect_format
    from .modeldir import _json_default

    if args.truth or not args.truth_col:
        raise InputError("evaluate --task regression scores a column of --pred: give "
                         "--truth-col (a --truth file is not supported yet for regression)")
    pp = Path(args.pred)
    if not pp.is_file():
        raise InputError(f"file not found: '{args.pred}'")
    frame = _read_raw(pp, detect_format(pp), None)
    absent = [c for c in (args.pred_col, args.truth_col) if c not in frame.columns]
    if absent:
        raise InputError(f"'{args.pred}' has no column {', '.join(map(repr, absent))}; its "
                         f"columns are: {', '.join(map(str, frame.columns))}")
    result = {**regression_metrics(frame[args.truth_col], frame[args.pred_col]),
              "task": "regression"}
    _print(result, f"evaluation of {args.pred}")
    if args.out:
        _write_json(args.out, json.dumps(result, indent=2, default=_json_default))
        print(f"wrote {args.out}")
    if args.plot:
        scatter_plot(frame[args.truth_col], frame[args.pred_col], args.plot)
        print(f"wrote {args.plot}")
    return result
