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
from ..io.writing import write_figure


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

