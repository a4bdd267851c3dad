"""Calibration: can predicted probabilities be read as probabilities?

* Expected calibration error (ECE): the top-label confidence against the accuracy in equal-width
  confidence bins, weighted by the bins' shares of documents (Naeini, Cooper & Hauskrecht 2015;
  Guo, Pleiss, Sun & Weinberger 2017, "On calibration of modern neural networks", ICML, eq. 3),
  with 10 bins; and its reliability diagram (Guo et al. 2017, figure 1).
* Temperature scaling (Guo et al. 2017, section 4.2): one scalar ``T`` divides the logits before
  the softmax; fitted by minimising the negative log-likelihood of hand-coded validation
  documents (scipy's bounded scalar minimiser over ``log T``). It changes no predicted label.
  From stored probabilities the logits are ``log p`` (the softmax ignores a constant shift).

Verb ``calibrate``: fit ``T`` on a validation prediction file of a model directory (the output
of ``predict`` on hand-coded documents the model was not trained on) and store it in the
directory's ``quantformer.json`` record as ``"calibration"``; ``predict --calibrated`` applies it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._core.errors import InputError, ModelDirError
from ..io.columns import LABEL_COLUMN, prob_column
from ..io.writing import write_figure
from ..io.gold import read_table
from ..io.modeldir import read_record, record_path, update_record
from ..io.writable import check_writable

N_BINS = 10


def _bins(probs: np.ndarray, truth_idx: np.ndarray, n_bins: int):
    confidence = probs.max(axis=1)
    correct = probs.argmax(axis=1) == truth_idx
    which = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    for b in range(n_bins):
        mask = which == b
        if mask.any():
            yield b, mask.mean(), confidence[mask].mean(), correct[mask].mean()


def expected_calibration_error(probs, truth_idx, n_bins: int = N_BINS) -> float:
    """ECE of a probability matrix (n, k) against true class indices (n,), in [0, 1]."""
    probs, truth_idx = np.asarray(probs, float), np.asarray(truth_idx)
    return float(sum(share * abs(conf - acc)
                     for _, share, conf, acc in _bins(probs, truth_idx, n_bins)))


def reliability_diagram(probs, truth_idx, path, n_bins: int = N_BINS,
                        title: str | None = None) -> Path:
    """Save the reliability diagram (accuracy per confidence bin against the diagonal) as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(_bins(np.asarray(probs, float), np.asarray(truth_idx), n_bins))
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.bar([(b + 0.5) / n_bins for b, *_ in rows], [acc for *_, acc in rows],
           width=1 / n_bins, edgecolor="black", alpha=0.7, label="accuracy")
    ax.plot([0, 1], [0, 1], "--", color="grey", label="perfect calibration")
    ax.set_xlabel("confidence (top predicted probability)")
    ax.set_ylabel("accuracy")
    ece = expected_calibration_error(probs, truth_idx, n_bins)
    ax.set_title(title or f"reliability diagram, ECE {ece:.3f}")
    ax.legend(loc="upper left")
    fig.tight_layout()
    return write_figure(fig, path)


def apply_temperature(probs, temperature: float) -> np.ndarray:
    """Probabilities after temperature scaling: ``softmax(log(p) / T)`` (rows with NaN stay)."""
    logits = np.log(np.clip(np.asarray(probs, float), 1e-12, 1.0)) / temperature
    logits -= np.nanmax(logits, axis=1, keepdims=True)
    out = np.exp(logits)
    return out / out.sum(axis=1, keepdims=True)


def fit_temperature(probs, truth_idx) -> float:
    """The temperature minimising the negative log-likelihood of the true classes."""
    from scipy.optimize import minimize_scalar

    probs, truth_idx = np.asarray(probs, float), np.asarray(truth_idx)

    def nll(log_t):
        p = apply_temperature(probs, np.exp(log_t))
        return -np.mean(np.log(np.clip(p[np.arange(len(p)), truth_idx], 1e-12, 1)))

    return float(np.exp(minimize_scalar(nll, bounds=(-4, 4), method="bounded").x))


def truth_indices(truth, labels: list) -> np.ndarray:
    """Class indices of the true labels; labels outside ``labels`` are an InputError."""
    index = {lab: j for j, lab in enumerate(labels)}
    unknown = sorted({str(t) for t in truth} - set(index))
    if unknown:
        raise InputError(f"true label(s) {', '.join(unknown)} are not classes of the model "
                         f"({', '.join(labels)}); calibration needs the model's classes")
    return np.array([index[str(t)] for t in truth])


def calibrate(model_dir, pred, truth_col: str = LABEL_COLUMN) -> dict:
    """Fit the temperature on validation predictions and store it in the model directory.

    Args:
        model_dir: a model directory from ``finetune``.
        pred: its prediction DataFrame or file of hand-coded validation documents (not used in
            training): ``prob_<class>`` for every class of the model and ``truth_col``.
        truth_col: the column with the true classes (default ``label``).

    Returns:
        The ``calibration`` record: ``temperature``, ``n``, ``ece_before``, ``ece_after``,
        ``method`` ("temperature scaling (Guo et al. 2017)").

    Raises:
        ModelDirError: not a model directory. InputError: missing columns, unknown labels,
            fewer than 10 documents with a label, a model directory that cannot be written.
    """
    record = read_record(model_dir)
    check_writable(record_path(model_dir), "model")  # the temperature is stored there
    labels = [str(x) for x in record["labels"]]
    table = read_table(pred, "prediction")
    missing = [c for c in [truth_col] + [prob_column(x) for x in labels] if c not in table.columns]
    if missing:
        raise InputError(f"the prediction file lacks {', '.join(missing)}; give `quantformer "
                         "predict` output of this model on labelled validation documents")
    table = table[table[truth_col].notna() & table[prob_column(labels[0])].notna()]
    if len(table) < 10:
        raise InputError(f"{len(table)} labelled validation documents; calibration needs at "
                         "least 10 (a few hundred for a stable temperature)")
    probs = table[[prob_column(x) for x in labels]].to_numpy(float)
    truth = truth_indices(table[truth_col].astype(str), labels)
    temperature = fit_temperature(probs, truth)
    result = {"temperature": temperature, "n": int(len(table)),
              "ece_before": expected_calibration_error(probs, truth),
              "ece_after": expected_calibration_error(apply_temperature(probs, temperature),
                                                      truth),
              "method": "temperature scaling (Guo et al. 2017)"}

    update_record(model_dir, {**record, "calibration": result})
    return result


def stored_temperature(record: dict, model_dir) -> float:
    """The temperature a model directory's record holds; ModelDirError without one, InputError
    for a regression or multi-label model (temperature scaling calibrates a softmax)."""
    task = record.get("task", "classification")
    if task != "classification":
        raise InputError(f"{{calibrated}} applies temperature scaling to a classifier's "
                         f"softmax; '{model_dir}' is a {task} model: predict without "
                         "{calibrated}", params=["calibrated"])
    calib = record.get("calibration") or {}
    if "temperature" not in calib:
        raise ModelDirError(f"'{model_dir}' has no calibration; run `quantformer calibrate "
                            f"--model {model_dir} --pred VALIDATION_PRED` first, or predict "
                            "without {calibrated}", params=["calibrated"])
    return float(calib["temperature"])


#: why an evaluation has no expected calibration error (``calibration["reason"]``)
NO_ECE = {
    "no_columns": "the predictions have no probabilities (no prob_<class> column for every "
                  "class), only labels",
    "all_missing": "no document has probabilities (every prob_<class> value is missing, as in "
                   "the codes of an endpoint that gave no token log-probabilities)",
    "no_pairs": "no document has both probabilities and a true label among the classes",
}


def calibration_summary(frame, truth, labels: list, calibration_plot=None) -> dict:
    """ECE of the ``prob_<class>`` columns of ``frame`` against ``truth`` (aligned rows).

    Rows without a truth, with a truth outside ``labels`` or without probabilities are left
    out. Writes the reliability diagram to ``calibration_plot`` (a .png path) when given.

    Returns:
        ``{"ece", "n_bins", "n"}``; where no row has probabilities and a truth, ``"ece"`` is
        None (not available: an ECE of no documents is no number) and ``"reason"`` says why
        (:data:`NO_ECE`).

    Raises:
        InputError: ``calibration_plot`` given but no row has probabilities.
    """
    columns = [prob_column(lab) for lab in labels]
    probs = (frame[columns].to_numpy(float)
             if labels and all(c in frame.columns for c in columns) else None)
    truth = np.asarray([None if t is None or t != t else str(t) for t in truth], dtype=object)
    keep = (np.zeros(len(truth), bool) if probs is None else
            ~np.isnan(probs).any(axis=1) & np.isin(truth, list(labels)))
    if not keep.any():
        why = ("no_columns" if probs is None else
               "all_missing" if np.isnan(probs).any(axis=1).all() else "no_pairs")
        if calibration_plot:
            raise InputError(f"{{calibration_plot}} needs probabilities, but {NO_ECE[why]}; "
                             "give `predict` output with prob_<class> columns",
                             params=["calibration_plot"])
        return {"ece": None, "n_bins": N_BINS, "n": 0, "reason": NO_ECE[why]}
    index = truth_indices(truth[keep], list(labels))
    if calibration_plot:
        reliability_diagram(probs[keep], index, calibration_plot)
    return {"ece": expected_calibration_error(probs[keep], index), "n_bins": N_BINS,
            "n": int(keep.sum())}
