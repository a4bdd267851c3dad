"""How ``tune`` and ``compare`` score each task: the selection metric, the folds and the samples.

==============  ========================  ================================  ===================
task            selects by                also reported                     folds and samples
==============  ========================  ================================  ===================
classification  macro-F1 (higher)         accuracy (compare)                stratified by class
regression      RMSE (lower is better)    Pearson r (tune); MAE, Pearson,   shuffled, plain
                                          Spearman, R^2 (compare)
multilabel      macro-F1 over the labels  micro-F1 (tune); micro-F1,        shuffled, plain
                                          subset accuracy, Hamming loss,
                                          per-label F1 (compare)
==============  ========================  ================================  ===================

Classification keeps the paper's macro-F1 (Wankmüller 2022, section 6.5). Regression selects by
root mean squared error, the loss the head minimises (as grafzahl and text report it), and
reports Pearson's r, the usual validity measure for continuous scores. Multi-label selects by
macro-F1 over labels, which weighs rare labels as much as frequent ones (Tsoumakas & Katakis
2007). Regression and multi-label folds are plain shuffled k-folds (scikit-learn ``KFold``):
classes to stratify by are not defined for numbers or label sets.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from ..models.tasks import check_label_columns, make_task
from ..score.metrics import macro_f1, predicted_labels
from ..models.arguments import check_arguments
from ..train.baselines import check_folds, stratified_folds, training_rows
from ..train.data import prepare


class ClassificationScoring:
    """Classification: the code paths of tune and compare as they were (macro-F1)."""

    task = "classification"
    metric, higher_is_better, also = "macro_f1", True, ()

    def rows(self, frame: pd.DataFrame, what: str = "training data",
             left_out: str = "left out") -> pd.DataFrame:
        return training_rows(frame, what, left_out)

    def check(self, rows: pd.DataFrame, folds: int, oversample=None,
              where: str = "the training data") -> None:
        check_folds(rows[LABEL_COLUMN], folds, where)

    def splits(self, rows: pd.DataFrame, folds: int, seed: int) -> list:
        splitter = stratified_folds(rows[LABEL_COLUMN], folds, seed)
        return list(splitter.split(np.zeros(len(rows)), rows[LABEL_COLUMN].to_numpy()))

    def labels(self, rows: pd.DataFrame) -> list:
        return sorted(rows[LABEL_COLUMN].astype(str).unique().tolist())

    def fit_kwargs(self) -> dict:
        return {}

    def fit_frame(self, rows: pd.DataFrame) -> pd.DataFrame:
        return rows

    def score(self, clf, rows: pd.DataFrame, labels: list) -> dict:
        return {"macro_f1": macro_f1(rows[LABEL_COLUMN].astype(str), predicted_labels(clf, rows),
                                     labels)}


class TaskScoring(ClassificationScoring):
    """Regression and multi-label (see the module table)."""

    def __init__(self, task: str, label_cols=None, label_sep=None):
        self.kind = make_task(task, None, label_cols, label_sep)
        self.task, self.label_cols, self.label_sep = task, label_cols, label_sep
        self.metric, self.higher_is_better = self.kind.metric, self.kind.higher_is_better
        self.also = ("pearson",) if task == "regression" else ("micro_f1",)

    def rows(self, frame: pd.DataFrame, what: str = "training data",
             left_out: str = "left out") -> pd.DataFrame:
        """The usable rows, with ``label`` cleaned by the task (numbers, or label tuples).

        Raises:
            InputError: no label column (or --label-cols column), bad label values, no usable
                document.
        """
        rows, n_label, n_text = prepare(frame, what, self.kind)
        if n_label or n_text:
            warnings.warn(f"{n_label + n_text} document(s) of the {what} {left_out}: {n_label} "
                          f"without a label, {n_text} with a missing or empty text",
                          stacklevel=3)
        if len(rows) == 0:
            raise InputError(f"the {what} has no document with both a text and a label; give "
                             "coded documents (or name the columns with {text_col}/{label_col})",
                             params=["text_col", "label_col"])
        return rows

    def fitted(self, rows: pd.DataFrame, oversample=None, where: str = "the training data"):
        """A copy of the task fitted on ``rows`` (label order; checks each label has two
        values, or the outcome two different numbers).

        Raises:
            InputError: as the task's ``fit``, saying which data it was.
        """
        import copy

        kind = copy.deepcopy(self.kind)
        try:
            kind.fit(rows, oversample=oversample)
        except InputError as exc:
            raise InputError(f"{where}: {exc.args[0]}", params=exc.params) from None
        return kind

    def check(self, rows: pd.DataFrame, folds: int, oversample=None,
              where: str = "the training data") -> None:
        if not isinstance(folds, (int, np.integer)) or isinstance(folds, bool) or folds < 2:
            raise InputError(f"{{folds}} must be a whole number of at least 2, not {folds}",
                             params=["folds"])
        if folds > len(rows):
            raise InputError(f"{where} has {len(rows)} documents, fewer than the {folds} "
                             f"cross-validation folds; use {{folds}} {max(2, len(rows))} or "
                             "fewer", params=["folds"])
        self.fitted(rows, oversample, where)

    def splits(self, rows: pd.DataFrame, folds: int, seed: int) -> list:
        from sklearn.model_selection import KFold

        splitter = KFold(n_splits=int(folds), shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(len(rows))))

    def labels(self, rows: pd.DataFrame) -> list:
        return list(self.fitted(rows).labels)

    def fit_kwargs(self) -> dict:
        return {"task": self.task, "label_cols": self.label_cols, "label_sep": self.label_sep}

    def fit_frame(self, rows: pd.DataFrame) -> pd.DataFrame:
        """``rows`` as fine-tuning reads them: label sets joined back with ``label_sep``."""
        if self.task == "multilabel" and self.label_cols is None:
            joined = [self.label_sep.join(labs) for labs in rows[LABEL_COLUMN]]
            return rows.assign(**{LABEL_COLUMN: joined})
        return rows

    def score(self, clf, rows: pd.DataFrame, labels=None) -> dict:
        """The task's metrics of ``clf`` (a fine-tuned model or a task baseline: anything
        with ``task`` and ``predict(frame)``) on ``rows`` (from :meth:`rows`)."""
        pred = clf.predict(self.fit_frame(rows), warn=False)
        return clf.task.score(rows, pred)


def make_scoring(task: str = "classification", label_cols=None, label_sep=None):
    """The scoring of ``task`` for tune and compare.

    Raises:
        InputError: an unknown task; ``label_cols``/``label_sep`` without ``multilabel``.
    """
    check_arguments(task=task)
    if task == "classification":
        check_label_columns(task, label_cols, label_sep)
        return ClassificationScoring()
    return TaskScoring(task, label_cols, label_sep)


def summary_of(metrics: dict, keys) -> dict:
    """The ``keys`` of a task's metrics, plus ``f1_<label>`` per label for multi-label."""
    out = {k: metrics[k] for k in keys}
    out.update({f"f1_{lab}": v["f1"] for lab, v in metrics.get("per_label", {}).items()})
    return out
