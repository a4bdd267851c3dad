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
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._core.errors import InputError


class TrainingWarning(UserWarning):
    """A problem in the training data that training works around (tiny classes, dropped rows)."""


def _missing(values: pd.Series) -> np.ndarray:
    from ..io.frames import _as_str_series

    return _as_str_series(values).isna().to_numpy()


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
        if "label" not in frame.columns:
            raise InputError(f"the {what} data has no 'label' column; name it with --label-col")
        return _missing(frame["label"])

    def clean(self, kept: pd.DataFrame, frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
        from ..io.frames import _as_str_series

        kept["label"] = _as_str_series(frame["label"])[mask]
        return kept

    def strata(self, frame: pd.DataFrame):
        return frame["label"]

    def fit(self, data: pd.DataFrame, oversample=None) -> None:
        """Fix the label order from the training data; warn about rare classes.

        Raises:
            InputError: a single class, training labels missing from ``labels``.
        """
        seen = sorted(data["label"].unique().tolist())
        self.labels = _label_order(self.labels, seen)
        if len(seen) < 2:
            raise InputError(
                f"the training data has only one class ({seen[0]!r}) after removing missing "
                "labels; a classifier needs documents of at least two classes: code documents "
                "of at least one other class, or check --label-col")
        counts = data["label"].value_counts()
        singles = sorted(counts[counts == 1].index.tolist())
        if singles:
            warnings.warn(f"class(es) {', '.join(map(repr, singles))} have a single training "
                          "example; the classifier will hardly learn them. Code more examples",
                          TrainingWarning, stacklevel=4)
        self.counts = {lab: int(counts.get(lab, 0)) for lab in self.labels}

    def oversample_labels(self, data: pd.DataFrame) -> np.ndarray:
        return data["label"].to_numpy()

    def targets(self, data: pd.DataFrame) -> np.ndarray:
        label2id = {lab: i for i, lab in enumerate(self.labels)}
        return data["label"].map(label2id).to_numpy(dtype=np.int64)

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
        out = {"predicted": pd.Series(predicted, dtype="string").to_numpy()}
        out.update({f"prob_{lab}": probs[:, j] for j, lab in enumerate(self.labels)})
        return out

    def score(self, valid: pd.DataFrame, pred: pd.DataFrame) -> dict:
        from ..score.evaluate import evaluate

        rep = evaluate(valid["label"], pred["predicted"], labels=self.labels)
        return {"n": rep.n, "accuracy": rep.accuracy, "macro_f1": rep.macro_f1,
                "per_class": rep.to_dict()["per_class"]}

    def say(self, result: dict) -> str:
        return f"accuracy {result['accuracy']:.4f}, macro-F1 {result['macro_f1']:.4f}"


def _label_order(given, seen: list) -> list:
    if given is None:
        return seen
    order = list(given)
    if len(set(order)) != len(order):
        raise InputError(f"--labels repeats a label: {', '.join(order)}")
    missing = sorted(set(seen) - set(order))
    if missing:
        raise InputError(f"training labels {', '.join(map(repr, missing))} are not in "
                         f"--labels ({', '.join(order)}); add them")
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

    def __init__(self, mean: float = 0.0, scale: float = 1.0, target: str = "label"):
        self.mean, self.scale, self.target = float(mean), float(scale), target
        self.labels: list = []  # one output, no classes
        self.n = 0

    def missing_labels(self, frame: pd.DataFrame, what: str) -> np.ndarray:
        if "label" not in frame.columns:
            raise InputError(f"the {what} data has no 'label' column (the numeric outcome); "
                             "name it with --label-col")
        return _missing(frame["label"])

    def clean(self, kept: pd.DataFrame, frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
        kept["label"] = as_numbers(frame["label"][mask].to_numpy())
        return kept

    def strata(self, frame: pd.DataFrame):
        return None

    def fit(self, data: pd.DataFrame, oversample=None) -> None:
        """Standardise: record the training mean and standard deviation.

        Raises:
            InputError: every training value is the same; oversampling was asked for.
        """
        if oversample is not None:
            raise InputError("--oversample balances classes and has no meaning for --task "
                             "regression; leave it out")
        y = data["label"].to_numpy(dtype=np.float64)
        if len(np.unique(y)) < 2:
            raise InputError(f"every training value of the label column is {y[0]:g}; a "
                             "regression needs at least two different values")
        self.mean, self.scale, self.n = float(y.mean()), float(y.std()), len(y)

    def targets(self, data: pd.DataFrame) -> np.ndarray:
        return ((data["label"].to_numpy(dtype=np.float64) - self.mean) / self.scale
                ).astype(np.float32)

    def head(self) -> dict:
        return {"num_labels": 1, "problem_type": self.problem_type,
                "id2label": {0: "predicted"}, "label2id": {"predicted": 0}}

    def describe(self) -> str:
        return f"mean {self.mean:.4g}, standard deviation {self.scale:.4g}"

    def record(self) -> dict:
        return {"task": self.name, "labels": [], "label_counts": {},
                "target_mean": self.mean, "target_scale": self.scale}

    def activation(self, logits):
        return logits.float()[:, :1] * self.scale + self.mean

    def columns(self, probs: np.ndarray, missing: np.ndarray) -> dict:
        values = probs[:, 0].astype(np.float64) if len(probs) else np.zeros(0)
        return {"predicted": np.where(missing, np.nan, values)}

    def score(self, valid: pd.DataFrame, pred: pd.DataFrame) -> dict:
        from ..score.metrics import regression_metrics

        return regression_metrics(valid["label"], pred["predicted"])

    def say(self, result: dict) -> str:
        return f"RMSE {result['rmse']:.4g}, Pearson r {result['pearson']:.4f}"


def as_numbers(values) -> np.ndarray:
    """Float64 array from label values; InputError naming the first value that is no number."""
    out = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
    bad = out.isna().to_numpy() & ~pd.isna(pd.Series(values, dtype=object)).to_numpy()
    if bad.any():
        first = values[int(np.flatnonzero(bad)[0])]
        raise InputError(f"--task regression needs a numeric label column, but {first!r} is not "
                         "a number; fix or blank that value, or use --task classification")
    return out.to_numpy(dtype=np.float64)


def from_record(record: dict):
    """The task of a saved model, from its ``quantformer.json`` record (old records:
    classification)."""
    kind = record.get("task", "classification")
    if kind == "regression":
        return Regression(record.get("target_mean", 0.0), record.get("target_scale", 1.0))
    if kind == "multilabel":
        from .multilabel import Multilabel

        return Multilabel(record["labels"], thresholds=record.get("thresholds"),
                          label_cols=record.get("label_cols"), label_sep=record.get("label_sep"))
    return Classification(record["labels"])


def make_task(task: str, labels=None, label_cols=None, label_sep=None):
    """A task object for training (see :data:`quantformer.train.arguments.TASKS`).

    Raises:
        InputError: options that do not fit the task.
    """
    if task == "multilabel":
        from .multilabel import Multilabel

        return Multilabel.for_training(labels, label_cols, label_sep)
    if label_cols is not None or label_sep is not None:
        raise InputError("--label-cols and --label-sep are for --task multilabel; add "
                         "--task multilabel or leave them out")
    if task == "regression":
        if labels is not None:
            raise InputError("--labels orders classes and has no meaning for --task "
                             "regression; leave it out")
        return Regression()
    return Classification(labels)
