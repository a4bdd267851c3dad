"""What is measured: one class per document, a number, or several labels per document.

Each task says how labels are read and encoded, which Hugging Face head loss it uses (through
``config.problem_type``: cross-entropy, MSE, BCE-with-logits, as the library's
``...ForSequenceClassification`` heads implement them), what prediction writes, and which
validation metric early stopping follows:

================  ==================  ===========================  =================
task              problem_type        prediction columns           validation metric
================  ==================  ===========================  =================
classification    single_label_...    predicted, prob_<label>      macro-F1 (higher)
regression        regression          predicted (a number)         RMSE (lower)
multilabel        multi_label_...     prob_<l>, predicted_<l>      macro-F1 over labels
================  ==================  ===========================  =================

Regression targets are standardised for training (mean 0, standard deviation 1; as grafzahl
and text do) and mapped back at prediction; the record keeps the mean and scale.

Multi-label: several labels per document (multi-label classification, binary cross-entropy per label via
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

import warnings

import numpy as np
import pandas as pd

from .._core.errors import InputError, ParamWarning, unused_error
from ..io.columns import LABEL_COLUMN, PREDICTED_COLUMN, prob_column
from ..io.frames import as_str_series, zero_one
from ..score.evaluate import evaluate
from ..score.metrics import as_numbers, multilabel_metrics, regression_metrics


#: more distinct labels than this, all of them numbers, look like a numeric outcome (a year,
#: a score) read as classes: classification warns and names ``--task regression``. Ten keeps
#: 0-10 rating scales and small numeric codes quiet.
NUMERIC_CLASSES_MAX = 10


class TrainingWarning(ParamWarning):
    """A problem in the training data that training works around (tiny classes, dropped rows,
    numeric labels read as classes)."""


def label_column(frame: pd.DataFrame, what: str, meaning: str = "") -> pd.Series:
    """The ``label`` column of the ``what`` data (``meaning``: what it holds, in the message).

    Raises:
        InputError: ``frame`` has no ``label`` column (naming ``label_col``).
    """
    if LABEL_COLUMN not in frame.columns:
        raise InputError(f"the {what} data has no 'label' column{meaning}; name it with "
                         "{label_col}", params=["label_col"])
    return frame[LABEL_COLUMN]


def _missing(values: pd.Series) -> np.ndarray:
    return as_str_series(values).isna().to_numpy()


class Classification:
    """One class per document (cross-entropy over softmax)."""

    name = "classification"
    problem_type = "single_label_classification"
    higher_is_better = True
    metric = "macro_f1"

    def __init__(self, labels=None):
        self.labels = [str(x) for x in labels] if labels is not None else None
        self.counts: dict = {}

    # ---- training side
    def missing_labels(self, frame: pd.DataFrame, what: str) -> np.ndarray:
        return _missing(label_column(frame, what))

    def clean(self, kept: pd.DataFrame, frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
        kept[LABEL_COLUMN] = as_str_series(frame[LABEL_COLUMN])[mask]
        return kept

    def strata(self, frame: pd.DataFrame):
        return frame[LABEL_COLUMN]

    def fit(self, data: pd.DataFrame, oversample=None) -> None:
        """Fix the label order from the training data; warn about rare classes.

        Raises:
            InputError: a single class, training labels missing from ``labels``.
        """
        seen = sorted(data[LABEL_COLUMN].unique().tolist())
        if self.labels is None:
            _warn_numeric(seen)
        self.labels = _label_order(self.labels, seen)
        if len(seen) < 2:
            raise InputError(
                f"the training data has only one class ({seen[0]!r}) after removing missing "
                "labels; a classifier needs documents of at least two classes: code documents "
                "of at least one other class, or check {label_col}", params=["label_col"])
        counts = data[LABEL_COLUMN].value_counts()
        singles = sorted(counts[counts == 1].index.tolist())
        if singles:
            warnings.warn(f"class(es) {', '.join(map(repr, singles))} have a single training "
                          "example; the classifier will hardly learn them. Code more examples",
                          TrainingWarning, stacklevel=4)
        self.counts = {lab: int(counts.get(lab, 0)) for lab in self.labels}

    def oversample_labels(self, data: pd.DataFrame) -> np.ndarray:
        return data[LABEL_COLUMN].to_numpy()

    def targets(self, data: pd.DataFrame) -> np.ndarray:
        label2id = {lab: i for i, lab in enumerate(self.labels)}
        return data[LABEL_COLUMN].map(label2id).to_numpy(dtype=np.int64)

    def head(self) -> dict:
        """``from_pretrained`` arguments of the classification head."""
        return {"num_labels": len(self.labels), "problem_type": self.problem_type,
                "id2label": dict(enumerate(self.labels)),
                "label2id": {lab: i for i, lab in enumerate(self.labels)}}

    def describe(self) -> str:
        return ", ".join(f"{k}: {v}" for k, v in self.counts.items())

    def record(self) -> dict:
        return {"task": self.name, "labels": self.labels, "label_counts": self.counts}

    # ---- prediction side
    def activation(self, logits):
        import torch

        return torch.softmax(logits.float(), dim=-1)

    def columns(self, probs: np.ndarray, missing: np.ndarray) -> dict:
        labels = np.asarray(self.labels, dtype=object)
        top = labels[np.nan_to_num(probs, nan=-1.0).argmax(axis=1)] if len(probs) else labels[:0]
        predicted = [None if m else str(t) for t, m in zip(top, missing)]
        out = {PREDICTED_COLUMN: pd.Series(predicted, dtype="string").to_numpy()}
        out.update({prob_column(lab): probs[:, j] for j, lab in enumerate(self.labels)})
        return out

    def score(self, valid: pd.DataFrame, pred: pd.DataFrame) -> dict:
        rep = evaluate(valid[LABEL_COLUMN], pred[PREDICTED_COLUMN], labels=self.labels)
        return {"n": rep.n, "accuracy": rep.accuracy, "macro_f1": rep.macro_f1,
                "per_class": rep.to_dict()["per_class"]}

    def say(self, result: dict) -> str:
        return f"accuracy {result['accuracy']:.4f}, macro-F1 {result['macro_f1']:.4f}"


def _warn_numeric(seen: list) -> None:
    """Warn when the labels are more than :data:`NUMERIC_CLASSES_MAX` distinct numbers: a
    numeric outcome would silently become one class per value."""
    if len(seen) <= NUMERIC_CLASSES_MAX:
        return
    numbers = pd.to_numeric(pd.Series(seen, dtype=object), errors="coerce")
    if numbers.isna().any():
        return
    low, second, high = (f"{v:g}" for v in numbers.sort_values().iloc[[0, 1, -1]])
    warnings.warn(TrainingWarning(
        f"every label is a number and there are {len(seen)} distinct ones ({low}, {second}, "
        f"..., {high}); they become {len(seen)} classes, one per value. For a numeric "
        "outcome (a year, a score) pass {task=regression}; to keep them as classes, list "
        "them with {labels}",
        params=["task=regression", "labels"]), stacklevel=5)


def _label_order(given, seen: list) -> list:
    if given is None:
        return seen
    order = list(given)
    if len(set(order)) != len(order):
        raise InputError(f"{{labels}} repeats a label: {', '.join(order)}", params=["labels"])
    missing = sorted(set(seen) - set(order))
    if missing:
        raise InputError(f"training labels {', '.join(map(repr, missing))} are not in "
                         f"{{labels}} ({', '.join(order)}); add them", params=["labels"])
    absent = [x for x in order if x not in seen]
    if absent:
        warnings.warn(f"--labels {', '.join(map(repr, absent))} have no training document",
                      TrainingWarning, stacklevel=5)
    return order


class Regression:
    """A number per document (mean squared error on standardised targets)."""

    name = "regression"
    problem_type = "regression"
    higher_is_better = False
    metric = "rmse"

    def __init__(self, mean: float = 0.0, scale: float = 1.0, target: str = LABEL_COLUMN):
        self.mean, self.scale, self.target = float(mean), float(scale), target
        self.labels: list = []  # one output, no classes
        self.n = 0

    def missing_labels(self, frame: pd.DataFrame, what: str) -> np.ndarray:
        return _missing(label_column(frame, what, " (the numeric outcome)"))

    def clean(self, kept: pd.DataFrame, frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
        kept[LABEL_COLUMN] = as_numbers(frame[LABEL_COLUMN][mask].to_numpy())
        return kept

    def strata(self, frame: pd.DataFrame):
        return None

    def fit(self, data: pd.DataFrame, oversample=None) -> None:
        """Standardise: record the training mean and standard deviation.

        Raises:
            InputError: every training value is the same; oversampling was asked for.
        """
        if oversample is not None:
            raise InputError("{oversample} balances classes and has no meaning for {task} "
                             "regression; leave it out", params=["oversample", "task"])
        y = data[LABEL_COLUMN].to_numpy(dtype=np.float64)
        if len(np.unique(y)) < 2:
            raise InputError(f"every training value of the label column is {y[0]:g}; a "
                             "regression needs at least two different values")
        self.mean, self.scale, self.n = float(y.mean()), float(y.std()), len(y)

    def targets(self, data: pd.DataFrame) -> np.ndarray:
        return ((data[LABEL_COLUMN].to_numpy(dtype=np.float64) - self.mean) / self.scale
                ).astype(np.float32)

    def head(self) -> dict:
        return {"num_labels": 1, "problem_type": self.problem_type,
                "id2label": {0: PREDICTED_COLUMN}, "label2id": {PREDICTED_COLUMN: 0}}

    def describe(self) -> str:
        return f"mean {self.mean:.4g}, standard deviation {self.scale:.4g}"

    def record(self) -> dict:
        return {"task": self.name, "labels": [], "label_counts": {},
                "target_mean": self.mean, "target_scale": self.scale}

    def activation(self, logits):
        return logits.float()[:, :1] * self.scale + self.mean

    def columns(self, probs: np.ndarray, missing: np.ndarray) -> dict:
        values = probs[:, 0].astype(np.float64) if len(probs) else np.zeros(0)
        return {PREDICTED_COLUMN: np.where(missing, np.nan, values)}

    def score(self, valid: pd.DataFrame, pred: pd.DataFrame) -> dict:
        return regression_metrics(valid[LABEL_COLUMN], pred[PREDICTED_COLUMN])

    def say(self, result: dict) -> str:
        return f"RMSE {result['rmse']:.4g}, Pearson r {result['pearson']:.4f}"


def from_record(record: dict):
    """The task of a saved model, from its ``quantformer.json`` record (old records:
    classification)."""
    kind = record.get("task", "classification")
    if kind == "regression":
        return Regression(record.get("target_mean", 0.0), record.get("target_scale", 1.0))
    if kind == "multilabel":
        return Multilabel(record["labels"], thresholds=record.get("thresholds"),
                          label_cols=record.get("label_cols"), label_sep=record.get("label_sep"))
    return Classification(record["labels"])


def check_label_columns(task: str, label_cols=None, label_sep=None) -> None:
    """``label_cols`` and ``label_sep`` name a multilabel task's labels; with another task they
    would not be used.

    Raises:
        InputError: either given with a ``task`` other than multilabel.
    """
    given = [k for k, v in (("label_cols", label_cols), ("label_sep", label_sep))
             if v is not None]
    if task != "multilabel" and given:
        raise unused_error(given, "is for {task} multilabel; add {task} multilabel or leave "
                                  "it out", "are for {task} multilabel; add {task} multilabel "
                                            "or leave them out", also=["task"])


def make_task(task: str, labels=None, label_cols=None, label_sep=None):
    """A task object for training (see :data:`quantformer.train.arguments.TASKS`).

    Raises:
        InputError: options that do not fit the task.
    """
    if task == "multilabel":
        return Multilabel.for_training(labels, label_cols, label_sep)
    check_label_columns(task, label_cols, label_sep)
    if task == "regression":
        if labels is not None:
            raise InputError("{labels} orders classes and has no meaning for {task} "
                             "regression; leave it out", params=["labels", "task"])
        return Regression()
    return Classification(labels)


# ------------------------------------------------------------------------------------------
# several labels per document

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
            raise InputError("{task} multilabel needs either {label_cols} A,B,C (one 0/1 column "
                             "per label) or {label_sep} '|' (one column of delimited labels)",
                             params=["task", "label_cols", "label_sep"])
        if label_cols is not None:
            if labels is not None:
                raise InputError("{labels} is not used with {label_cols} (the columns give the "
                                 "label order); leave it out", params=["labels", "label_cols"])
            if len(set(label_cols)) != len(label_cols):
                raise InputError(f"{{label_cols}} repeats a column: {', '.join(label_cols)}",
                                 params=["label_cols"])
            return cls(label_cols, label_cols=list(label_cols))
        return cls(labels, label_sep=label_sep)

    # ---- training side
    def missing_labels(self, frame: pd.DataFrame, what: str) -> np.ndarray:
        if self.label_cols is None:
            return label_column(frame, what).isna().to_numpy()
        absent = [c for c in self.label_cols if c not in frame.columns]
        if absent:
            raise InputError(f"the {what} data has no column {', '.join(map(repr, absent))} of "
                             f"{{label_cols}}; its columns are "
                             f"{', '.join(map(str, frame.columns))}", params=["label_cols"])
        return frame[self.label_cols].isna().any(axis=1).to_numpy()

    def clean(self, kept: pd.DataFrame, frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
        if self.label_cols is None:
            kept[LABEL_COLUMN] = [tuple(sorted({x.strip() for x in str(v).split(self.label_sep)
                                           if x.strip()})) for v in frame[LABEL_COLUMN][mask]]
            return kept
        values = {c: zero_one(frame[c], c, mask)[mask] for c in self.label_cols}
        kept[LABEL_COLUMN] = [tuple(c for c in self.label_cols if values[c][i])
                         for i in range(int(mask.sum()))]
        return kept

    def strata(self, frame: pd.DataFrame):
        return None

    def fit(self, data: pd.DataFrame, oversample=None) -> None:
        """Fix the label order; refuse labels with one value only and oversampling."""
        if oversample is not None:
            raise InputError("{oversample} balances the classes of a single-label classifier; "
                             "with {task} multilabel a document carries several labels, so it "
                             "is not defined: leave it out", params=["oversample", "task"])
        seen = sorted({lab for labs in data[LABEL_COLUMN] for lab in labs})
        if self.labels is None:
            self.labels = seen
        unknown = sorted(set(seen) - set(self.labels))
        if unknown:
            raise InputError(f"training labels {', '.join(map(repr, unknown))} are not in "
                             f"{{labels}} ({', '.join(self.labels)}); add them", params=["labels"])
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
        for i, labs in enumerate(data[LABEL_COLUMN]):
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
        out = {prob_column(lab): probs[:, j] for j, lab in enumerate(self.labels)}
        for j, lab in enumerate(self.labels):
            cut = (self.thresholds or {}).get(lab, 0.5)
            out[f"predicted_{lab}"] = pd.array(
                [None if m else bool(p >= cut) for p, m in zip(probs[:, j], missing)],
                dtype="boolean")
        return out

    def score(self, valid: pd.DataFrame, pred: pd.DataFrame) -> dict:
        predicted = pred[[f"predicted_{lab}" for lab in self.labels]].astype("float64")
        return multilabel_metrics(self.targets(valid), predicted.to_numpy(), self.labels)

    def say(self, result: dict) -> str:
        return f"micro-F1 {result['micro_f1']:.4f}, macro-F1 {result['macro_f1']:.4f}"
