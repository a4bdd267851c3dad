"""Evaluation of predicted labels against hand-coded ones.

Accuracy, macro-F1 (the paper's measure, Wankmüller 2022 section 6.5), per-class precision,
recall, F1 and support, and the confusion matrix, all from scikit-learn's metrics. Documents
with a missing truth or a missing prediction are left out with a count. Labels in the truth that
the model never predicts or never saw in training are reported (their recall is 0), never an
error. ``--label-map`` turns label phrases (zero-shot output such as ``"in favor of"``) into the
corpus codes before comparing.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.atomic import write_text
from .._core.errors import InputError
from .._core.show import print_table
from ..io.columns import LABEL_COLUMN, PREDICTED_COLUMN
from ..io.frames import as_str_series
from ..io.writing import write_figure
from .reliability import agreement, agreement_lines


class EvaluationWarning(UserWarning):
    """Documents left out of an evaluation, or labels the model does not know."""


def _as_labels(values) -> list:
    s = values if isinstance(values, pd.Series) else pd.Series(list(values))
    return as_str_series(s).tolist()


@dataclass
class Report:
    """An evaluation report (dict-like: ``report["macro_f1"]``).

    Attributes:
        accuracy, macro_f1: floats in [0, 1].
        labels: label order of the per-class table and the confusion matrix.
        per_class: DataFrame indexed by label with precision, recall, f1, support.
        confusion: DataFrame, rows = true label, columns = predicted label (counts).
        n: documents evaluated; n_missing_truth / n_missing_pred: left out.
        unseen_labels: truth labels outside the model's labels (when those were given).
        agreement: the model as one more coder: Krippendorff's alpha (nominal) and Cohen's
            kappa with bootstrap intervals (:func:`quantformer.score.reliability.agreement`).
        calibration: ``{"ece", "n_bins", "n"}`` of
            :func:`quantformer.score.calibration.calibration_summary`; ``"ece"`` None with a
            ``"reason"`` where no document has probabilities.
    """

    accuracy: float
    macro_f1: float
    labels: list
    per_class: pd.DataFrame
    confusion: pd.DataFrame
    n: int
    n_missing_truth: int = 0
    n_missing_pred: int = 0
    unseen_labels: list = field(default_factory=list)
    agreement: dict = field(default_factory=dict)
    calibration: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (what ``--out report.json`` holds)."""
        return {
            "n": self.n,
            "accuracy": self.accuracy,
            "macro_f1": self.macro_f1,
            "labels": list(self.labels),
            "per_class": {lab: {k: (int(v) if k == "support" else float(v))
                                for k, v in row.items()}
                          for lab, row in self.per_class.to_dict(orient="index").items()},
            "confusion_matrix": self.confusion.to_numpy().astype(int).tolist(),
            "n_missing_truth": self.n_missing_truth,
            "n_missing_pred": self.n_missing_pred,
            "unseen_labels": list(self.unseen_labels),
            "agreement": self.agreement,
            "calibration": self.calibration,
        }

    def __getitem__(self, key):
        return self.to_dict()[key]

    def keys(self):
        return self.to_dict().keys()

    def summary(self) -> pd.DataFrame:
        """The per-class table with macro average and accuracy rows (what the CLI prints)."""
        t = self.per_class.copy()
        t.loc["macro avg"] = [t["precision"].mean(), t["recall"].mean(), self.macro_f1,
                              int(t["support"].sum())]
        t.loc["accuracy"] = [np.nan, np.nan, self.accuracy, self.n]
        t["support"] = t["support"].astype(int)
        return t

    def print(self, file=None, title: str | None = None) -> None:
        """Print the summary and confusion matrix as plain-text tables."""
        print_table(self.summary(), title=title or f"evaluation on {self.n} documents",
                    file=file)
        print_table(self.confusion, title="confusion matrix (rows: true, columns: predicted)",
                    file=file)

        for line in agreement_lines(self.agreement):
            print(line, file=file)
        if self.calibration and self.calibration.get("ece") is None:
            print("expected calibration error: not available: "
                  f"{self.calibration.get('reason', 'no probabilities')}", file=file)
        elif self.calibration:
            print(f"expected calibration error: {self.calibration['ece']:.4f} "
                  f"({self.calibration['n_bins']} bins, Guo et al. 2017, on "
                  f"{self.calibration['n']} documents)", file=file)
        if self.unseen_labels:
            print(f"labels in the truth that the model does not know: "
                  f"{', '.join(self.unseen_labels)}", file=file)

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`to_dict` as JSON (atomically)."""
        return write_text(path, json.dumps(self.to_dict(), indent=2))

    def plot(self, path: str | os.PathLike, title: str | None = None) -> Path:
        """Save the confusion matrix as a PNG heat map with the counts written in the cells."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        cm = self.confusion.to_numpy()
        k = len(self.labels)
        fig, ax = plt.subplots(figsize=(1.2 * k + 2.5, 1.1 * k + 2))
        im = ax.imshow(cm, cmap="Blues")
        ax.set_xticks(range(k), labels=self.labels, rotation=45, ha="right")
        ax.set_yticks(range(k), labels=self.labels)
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        ax.set_title(title or f"accuracy {self.accuracy:.3f}, macro-F1 {self.macro_f1:.3f}")
        top = cm.max() if cm.size else 0
        for i in range(k):
            for j in range(k):
                ax.text(j, i, str(int(cm[i, j])), ha="center", va="center",
                        color="white" if cm[i, j] > top / 2 else "black")
        fig.colorbar(im, ax=ax)
        fig.tight_layout()
        return write_figure(fig, path)


def evaluate(truth, predicted, labels=None) -> Report:
    """Compare predicted labels with the true ones.

    Args:
        truth: sequence (n,) of true labels (any type; compared as strings; None/NaN missing).
        predicted: sequence (n,) of predicted labels, same order.
        labels: the model's label order. Truth labels outside it are appended (and listed in
            ``unseen_labels`` with a warning); default: the sorted union of both sequences.

    Returns:
        :class:`Report`. Pairs with a missing truth or prediction are left out (counted).

    Raises:
        InputError: lengths differ, or no pair is left to evaluate.
    """
    from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support

    t = _as_labels(truth)
    p = _as_labels(predicted)
    if len(t) != len(p):
        raise InputError(f"got {len(t)} true labels but {len(p)} predictions; they must match")
    miss_t = sum(v is None for v in t)
    miss_p = sum(v is None and u is not None for u, v in zip(t, p))
    pairs = [(u, v) for u, v in zip(t, p) if u is not None and v is not None]
    if miss_t:
        warnings.warn(f"{miss_t} document(s) have no true label and are left out of the "
                      "evaluation", EvaluationWarning, stacklevel=2)
    if miss_p:
        warnings.warn(f"{miss_p} document(s) have no prediction (missing or empty text) and "
                      "are left out of the evaluation", EvaluationWarning, stacklevel=2)
    if not pairs:
        raise InputError("no document has both a true label and a prediction; nothing to "
                         "evaluate")
    tt = [u for u, _ in pairs]
    pp = [v for _, v in pairs]
    unseen: list = []
    if labels is None:
        order = sorted(set(tt) | set(pp))
    else:
        order = [str(x) for x in labels]
        unseen = sorted(set(tt) - set(order))
        extra_pred = sorted(set(pp) - set(order) - set(unseen))
        if unseen:
            warnings.warn(f"true label(s) {', '.join(map(repr, unseen))} are not among the "
                          f"model's labels ({', '.join(order)}); they count as errors",
                          EvaluationWarning, stacklevel=2)
        order = order + unseen + extra_pred
    prec, rec, f1, sup = precision_recall_fscore_support(tt, pp, labels=order, zero_division=0)
    # macro-F1 over the classes that occur in the truth or the predictions
    present = [i for i, lab in enumerate(order) if lab in set(tt) | set(pp)]
    macro = float(np.mean(f1[present]))
    per_class = pd.DataFrame({"precision": prec, "recall": rec, "f1": f1,
                              "support": sup.astype(int)}, index=pd.Index(order, name=LABEL_COLUMN))
    with warnings.catch_warnings():  # one class only: the 1 x 1 matrix is right, say nothing
        warnings.filterwarnings("ignore", message="A single label was found")
        cm = confusion_matrix(tt, pp, labels=order)
    confusion = pd.DataFrame(cm, index=pd.Index(order, name="true"),
                             columns=pd.Index(order, name=PREDICTED_COLUMN))

    return Report(accuracy=float(accuracy_score(tt, pp)), macro_f1=macro, labels=order,
                  per_class=per_class, confusion=confusion, n=len(pairs),
                  n_missing_truth=miss_t, n_missing_pred=miss_p, unseen_labels=unseen,
                  agreement=agreement(tt, pp))


# ------------------------------------------------------------------------------------------
# label maps


def parse_label_map(label_map: str | None) -> dict | None:
    """Parse a label map: ``"in favor of=2,against=1"`` or a JSON file ``{"phrase": code}``.

    Raises:
        InputError: a malformed entry or an unreadable JSON file.
    """
    spec = label_map
    if not spec:
        return None
    p = Path(spec)
    if spec.endswith(".json") or p.is_file():
        if not p.is_file():
            raise InputError(f"label map file not found: '{spec}'")
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(f"label map '{spec}' is not valid JSON ({exc.msg})") from exc
        if not isinstance(obj, dict):
            raise InputError(f"label map '{spec}' must be a JSON object "
                             '{"predicted label": "corpus code", ...}')
        return {str(k): str(v) for k, v in obj.items()}
    out = {}
    for part in spec.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise InputError(f"{{label_map}} entry '{part}' has no '='; write "
                             "'phrase=code,phrase=code' or give a JSON file",
                             params=["label_map"])
        k, _, v = part.rpartition("=")
        if not k.strip() or not v.strip():
            raise InputError(f"{{label_map}} entry '{part}' is empty on one side",
                             params=["label_map"])
        out[k.strip()] = v.strip()
    return out


def apply_label_map(values, mapping: dict | None) -> list:
    """Map predicted labels with ``mapping``; unmapped labels stay as they are (with a warning)."""
    vals = _as_labels(values)
    if not mapping:
        return vals
    unmapped = sorted({v for v in vals if v is not None and v not in mapping})
    if unmapped:
        warnings.warn(f"--label-map does not map {', '.join(map(repr, unmapped))}; kept as is",
                      EvaluationWarning, stacklevel=2)
    return [None if v is None else mapping.get(v, v) for v in vals]


