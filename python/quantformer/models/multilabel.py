"""Several labels per document (multi-label classification, binary cross-entropy per label via
the Hugging Face head's ``problem_type = "multi_label_classification"``).

Labels come from several 0/1 columns (``label_cols``) or from one column of delimited labels
(``label_sep``, e.g. ``"econ|health"``; an empty value means none of the labels). A document is
predicted to carry a label when its probability reaches the label's threshold: 0.5 by default,
or, with ``tune_thresholds``, the value in 0.05, 0.10, ..., 0.95 with the best F1 on the
validation data (ties: the one nearest 0.5), as in Fan & Lin (2007), "A study on threshold
selection for multi-label classification". Oversampling is refused: its classes are not defined
when a document carries several labels.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._core.errors import InputError
from .tasks import Classification

GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)


class Multilabel(Classification):
    """Several 0/1 labels per document (the head and its description as for classification)."""

    name = "multilabel"
    problem_type = "multi_label_classification"
    higher_is_better = True
    metric = "macro_f1"

    def __init__(self, labels=None, *, label_cols=None, label_sep=None, thresholds=None):
        self.labels = [str(x) for x in labels] if labels is not None else None
        self.label_cols, self.label_sep = label_cols, label_sep
        self.thresholds = dict(thresholds) if thresholds else None
        self.counts: dict = {}

    @classmethod
    def for_training(cls, labels, label_cols, label_sep) -> Multilabel:
        """Raises InputError unless exactly one of ``label_cols`` / ``label_sep`` is given."""
        if (label_cols is None) == (label_sep is None):
            raise InputError("--task multilabel needs either --label-cols A,B,C (one 0/1 column "
                             "per label) or --label-sep '|' (one column of delimited labels)")
        if label_cols is not None:
            if labels is not None:
                raise InputError("--labels is not used with --label-cols (the columns give the "
                                 "label order); leave it out")
            if len(set(label_cols)) != len(label_cols):
                raise InputError(f"--label-cols repeats a column: {', '.join(label_cols)}")
            return cls(label_cols, label_cols=list(label_cols))
        return cls(labels, label_sep=label_sep)

    # ---- training side
    def missing_labels(self, frame: pd.DataFrame, what: str) -> np.ndarray:
        if self.label_cols is None:
            if "label" not in frame.columns:
                raise InputError(f"the {what} data has no 'label' column; name it with "
                                 "--label-col")
            return frame["label"].isna().to_numpy()
        absent = [c for c in self.label_cols if c not in frame.columns]
        if absent:
            raise InputError(f"the {what} data has no column {', '.join(map(repr, absent))} of "
                             f"--label-cols; its columns are {', '.join(map(str, frame.columns))}")
        return frame[self.label_cols].isna().any(axis=1).to_numpy()

    def clean(self, kept: pd.DataFrame, frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
        if self.label_cols is None:
            kept["label"] = [tuple(sorted({x.strip() for x in str(v).split(self.label_sep)
                                           if x.strip()})) for v in frame["label"][mask]]
            return kept
        values = {c: zero_one(frame[c], c, mask)[mask] for c in self.label_cols}
        kept["label"] = [tuple(c for c in self.label_cols if values[c][i])
                         for i in range(int(mask.sum()))]
        return kept

    def strata(self, frame: pd.DataFrame):
        return None

    def fit(self, data: pd.DataFrame, oversample=None) -> None:
        """Fix the label order; refuse labels with one value only and oversampling."""
        if oversample is not None:
            raise InputError("--oversample balances the classes of a single-label classifier; "
                             "with --task multilabel a document carries several labels, so it "
                             "is not defined: leave it out")
        seen = sorted({lab for labs in data["label"] for lab in labs})
        if self.labels is None:
            self.labels = seen
        unknown = sorted(set(seen) - set(self.labels))
        if unknown:
            raise InputError(f"training labels {', '.join(map(repr, unknown))} are not in "
                             f"--labels ({', '.join(self.labels)}); add them")
        y = self.targets(data)
        for j, lab in enumerate(self.labels):
            if y[:, j].min() == y[:, j].max():
                which = "every" if y[0, j] else "no"
                raise InputError(f"label {lab!r} is present in {which} training document: a "
                                 "label with one value only cannot be learned. Code documents "
                                 "with the other value, or leave the label out")
        self.counts = {lab: int(y[:, j].sum()) for j, lab in enumerate(self.labels)}
        self.thresholds = {lab: 0.5 for lab in self.labels}

    def targets(self, data: pd.DataFrame) -> np.ndarray:
        index = {lab: j for j, lab in enumerate(self.labels)}
        y = np.zeros((len(data), len(self.labels)), dtype=np.float32)
        for i, labs in enumerate(data["label"]):
            y[i, [index[lab] for lab in labs if lab in index]] = 1.0
        return y

    def record(self) -> dict:
        return {"task": self.name, "labels": self.labels, "label_counts": self.counts,
                "thresholds": self.thresholds, "label_cols": self.label_cols,
                "label_sep": self.label_sep}

    def tune_thresholds(self, valid: pd.DataFrame, probs: np.ndarray) -> None:
        """Per label, the grid value with the best validation F1 (ties: nearest 0.5)."""
        from sklearn.metrics import f1_score

        y = self.targets(valid)
        ok = ~np.isnan(probs).any(axis=1)
        for j, lab in enumerate(self.labels):
            f1 = [f1_score(y[ok, j], probs[ok, j] >= t, zero_division=0) for t in GRID]
            best = max(range(len(GRID)), key=lambda i: (f1[i], -abs(GRID[i] - 0.5)))
            self.thresholds[lab] = float(GRID[best])

    # ---- prediction side
    def activation(self, logits):
        import torch

        return torch.sigmoid(logits.float())

    def columns(self, probs: np.ndarray, missing: np.ndarray) -> dict:
        out = {f"prob_{lab}": probs[:, j] for j, lab in enumerate(self.labels)}
        for j, lab in enumerate(self.labels):
            cut = (self.thresholds or {}).get(lab, 0.5)
            out[f"predicted_{lab}"] = pd.array(
                [None if m else bool(p >= cut) for p, m in zip(probs[:, j], missing)],
                dtype="boolean")
        return out

    def score(self, valid: pd.DataFrame, pred: pd.DataFrame) -> dict:
        from ..score.metrics import multilabel_metrics

        predicted = pred[[f"predicted_{lab}" for lab in self.labels]].astype("float64")
        return multilabel_metrics(self.targets(valid), predicted.to_numpy(), self.labels)

    def say(self, result: dict) -> str:
        return f"micro-F1 {result['micro_f1']:.4f}, macro-F1 {result['macro_f1']:.4f}"


def zero_one(values: pd.Series, column: str, checked: np.ndarray | None = None) -> np.ndarray:
    """Booleans from a 0/1 (or true/false) column; InputError naming the first other value
    among the ``checked`` rows (default: all) and its row, counted 1-based in the whole column
    (the file's row; in R, the document's number)."""
    text = values.astype(str).str.strip().str.lower()
    ok = text.isin(["0", "1", "0.0", "1.0", "true", "false"]).to_numpy()
    if checked is not None:
        ok = ok | ~np.asarray(checked, dtype=bool)
    if not ok.all():
        row = int(np.flatnonzero(~ok)[0])
        raise InputError(f"label column {column!r} (--label-cols) must hold 0/1 values, but it "
                         f"has {_show(values.iloc[row])} (row {row + 1}); recode it as 0/1")
    return text.isin(["1", "1.0", "true"]).to_numpy()


def _show(value) -> str:
    """A cell as the user wrote it: ``2`` for a whole number read as a float (R's numeric
    vectors, or a column with missing values, arrive as floats), ``'yes'`` for text."""
    value = value.item() if hasattr(value, "item") else value  # 2, not np.int64(2)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)
