"""Metrics: macro-F1 of predicted classes, and metrics for continuous scores and multiple labels
per document (issue 15). They score arrays and know no model.

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

from .._core.errors import InputError


def as_numbers(values) -> np.ndarray:
    """Float64 array from label values; InputError naming the first value that is no number."""
    out = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
    bad = out.isna().to_numpy() & ~pd.isna(pd.Series(values, dtype=object)).to_numpy()
    if bad.any():
        first = values[int(np.flatnonzero(bad)[0])]
        raise InputError("{task} regression needs a numeric label column, but %r is not a "
                         "number; fix or blank that value, or use {task} classification" % (first,),
                         params=["task"])
    return out.to_numpy(dtype=np.float64)


def macro_f1(truth, predicted, labels) -> float:
    """Macro-F1 over ``labels`` (scikit-learn, zero_division=0); missing predictions are wrong."""
    from sklearn.metrics import f1_score

    pred = ["\0missing" if p is None else p for p in predicted]
    return float(f1_score(list(truth), pred, labels=list(labels), average="macro",
                          zero_division=0))


def predicted_labels(clf, frame: pd.DataFrame) -> np.ndarray:
    """Labels predicted by anything with ``labels`` and ``predict_proba(frame) -> (n, k)``
    (a :class:`~quantformer.infer.classifier.Classifier`); None where a row of scores is all NaN."""
    probs = np.asarray(clf.predict_proba(frame), dtype=float)
    labels = np.asarray(clf.labels, dtype=object)
    out = labels[np.nan_to_num(probs, nan=-np.inf).argmax(axis=1)] if len(probs) else labels[:0]
    out = out.astype(object)
    out[np.isnan(probs).all(axis=1)] = None
    return out


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

    from ..io.frames import write_figure
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

    from ..io.frames import read_frame
    from .._core.atomic import json_default, write_text
    from ..io.modeldir import read_record
    from ..infer.classifier import Classifier
    from ..train.data import prepare

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
        write_text(args.out, json.dumps(result, indent=2, default=json_default))
        print(f"wrote {args.out}")
    if args.plot:
        scatter_plot(data["label"], pred["predicted"], args.plot)
        print(f"wrote {args.plot}")
    return result


def _print(result: dict, title: str) -> None:
    print(f"{title} ({result['n']} documents)")
    for key, value in result.items():
        if isinstance(value, float):
            print(f"  {key:<16} {value:.4f}")
    for label, row in result.get("per_label", {}).items():
        print(f"  {label:<16} precision {row['precision']:.3f}  recall {row['recall']:.3f}  "
              f"F1 {row['f1']:.3f}  support {row['support']}")


def evaluate_pred_regression(args) -> dict:
    """``evaluate --pred F --task regression``: regression metrics of a predictions file; the
    truth is a column of it (``--truth-col``) or the ``--label-col`` (default ``label``) of a
    ``--truth`` file joined on ``doc_id``.

    Raises:
        InputError: a missing file or column, non-numbers, no shared doc_id.
    """
    if bool(args.truth) == bool(args.truth_col):
        raise InputError("give exactly one of --truth (a file) or --truth-col (a column of "
                         "--pred)")
    truth_col = args.truth_col or args.label_col or "label"
    frame = _pred_with_truth(args, [truth_col])
    return _report({**regression_metrics(frame[truth_col], frame[args.pred_col]),
                    "task": "regression"}, args, frame[truth_col], frame[args.pred_col])


def evaluate_pred_multilabel(args) -> dict:
    """``evaluate --pred F --task multilabel``: multi-label metrics of a predictions file
    (``predicted_<label>`` columns, as ``predict`` writes them for a multi-label model).

    The truth is either one 0/1 column per label (``--label-cols a,b``, named as the labels)
    or one column of delimited labels (``--label-sep "|"``; empty = none of the labels); the
    columns are in ``--pred`` (``--label-cols``, or ``--truth-col`` with ``--label-sep``) or in
    a ``--truth`` file joined on ``doc_id`` (``--label-cols``, or ``--label-col``, default
    ``label``, with ``--label-sep``). Delimited labels that the model does not predict are
    ignored.

    Raises:
        InputError: neither or both of --label-cols / --label-sep, a missing
            ``predicted_<label>`` or truth column, a truth column that is not 0/1.
    """
    from ..models.tasks import _zero_one

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
    sep_col = None if cols else (args.truth_col or args.label_col or "label")
    frame = _pred_with_truth(args, cols or [sep_col], pred_cols=[])
    labels = cols or [str(c)[len("predicted_"):] for c in frame.columns
                      if str(c).startswith("predicted_")]
    missing = [f"predicted_{lab}" for lab in labels if f"predicted_{lab}" not in frame.columns]
    if missing or not labels:
        raise InputError(f"'{args.pred}' has no column {', '.join(missing) or 'predicted_<label>'}"
                         "; give the predictions of a multi-label model (predict writes "
                         "predicted_<label> per label)")
    pred = frame[[f"predicted_{lab}" for lab in labels]].apply(_bool_column).to_numpy()
    if cols:
        truth = np.column_stack([_zero_one(frame[c].astype(object).where(frame[c].notna(), "0"),
                                           c) for c in cols]).astype(float)
        truth[frame[cols].isna().any(axis=1).to_numpy()] = np.nan
    else:
        sets = [None if pd.isna(v) else {x.strip() for x in str(v).split(args.label_sep)}
                for v in frame[sep_col]]
        truth = np.array([[np.nan] * len(labels) if s is None else
                          [float(lab in s) for lab in labels] for s in sets]).reshape(-1, len(labels))
    return _report({**multilabel_metrics(truth, pred, labels), "task": "multilabel"}, args)


def _bool_column(values: pd.Series) -> pd.Series:
    """True/False/missing from a predicted_<label> column (booleans, 0/1 or true/false)."""
    text = values.astype(str).str.strip().str.lower()
    out = pd.Series(np.nan, index=values.index)
    out[text.isin(["true", "1", "1.0"])] = 1.0
    out[text.isin(["false", "0", "0.0"])] = 0.0
    return out


def _pred_with_truth(args, truth_cols: list, pred_cols=None) -> pd.DataFrame:
    """The ``--pred`` file, with ``truth_cols`` from ``--truth`` joined on doc_id when given.

    Raises:
        InputError: a missing file or column, no doc_id, no shared doc_id.
    """
    from ..io.frames import _as_str_series

    pred_cols = [args.pred_col] if pred_cols is None else pred_cols
    frame = _read_file(args.pred)
    if args.truth:
        truth = _read_file(args.truth)
        _need(truth, truth_cols, args.truth)
        id_col = args.id_col or "doc_id"
        _need(truth, [id_col], args.truth, " (name it with --id-col)")
        _need(frame, ["doc_id"], args.pred)
        right = truth[truth_cols].assign(doc_id=_as_str_series(truth[id_col]).to_numpy())
        left = frame.drop(columns=[c for c in truth_cols if c in frame.columns])
        left = left.assign(doc_id=_as_str_series(left["doc_id"]).to_numpy())
        frame = left.merge(right, on="doc_id", how="inner", validate="one_to_one")
        if len(frame) == 0:
            raise InputError(f"no doc_id of '{args.pred}' is in '{args.truth}'; check --id-col")
    _need(frame, pred_cols + truth_cols, args.pred)
    return frame


def _read_file(path) -> pd.DataFrame:
    from ..io.frames import _read_raw, detect_format

    p = Path(path)
    if not p.is_file():
        raise InputError(f"file not found: '{path}'")
    return _read_raw(p, detect_format(p), None)


def _need(frame: pd.DataFrame, cols: list, path, fix: str = "") -> None:
    absent = [c for c in cols if c not in frame.columns]
    if absent:
        raise InputError(f"'{path}' has no column {', '.join(map(repr, absent))}{fix}; its "
                         f"columns are: {', '.join(map(str, frame.columns))}")


def _report(result: dict, args, truth=None, predicted=None) -> dict:
    """Print ``result``, write ``--out`` (JSON) and, for regression, the ``--plot`` scatter."""
    import json

    from .._core.atomic import json_default, write_text

    _print(result, f"evaluation of {args.pred}")
    if args.out:
        write_text(args.out, json.dumps(result, indent=2, default=json_default))
        print(f"wrote {args.out}")
    if args.plot:
        scatter_plot(truth, predicted, args.plot)
        print(f"wrote {args.plot}")
    return result
