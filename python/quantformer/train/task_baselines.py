"""Bag-of-words baselines for regression and multi-label tasks (``compare --task``).

The bag-of-words is the classification baselines' one (:func:`quantformer.baselines.
bow_vectorizer`: binary unigrams, stemmed, min_df 2, max_df 0.9; paper section 6.2).

``ridge-bow`` (regression)
    ridge regression (scikit-learn ``RidgeCV``), the penalty chosen among 10^-2 ... 10^3 by
    efficient leave-one-out cross-validation: the usual linear text-regression baseline
    (e.g. Lampos et al. 2014; grafzahl's and text's comparisons use the same kind).
``logit-bow``, ``svm-bow`` (multilabel)
    one-vs-rest (binary relevance, Tsoumakas & Katakis 2007) logistic regression or linear
    SVM, one binary model per label; ``C`` and the class weights (none or balanced) chosen by
    shuffled ``folds``-fold cross-validation on macro-F1 over labels, as the classification
    baselines are tuned.

XGBoost and the ``-vec`` baselines are classification only (a clear error names the
alternatives): XGBoost's multi-label and regression tuning would need their own grids, and
the word-vector baselines add little over bag-of-words in the paper's Table 1.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN, PREDICTED_COLUMN
from .baselines import bow_vectorizer, fit_quietly, is_missing_text

TASK_BASELINES = {"regression": ("ridge-bow",), "multilabel": ("logit-bow", "svm-bow")}
C_GRID = {"C": [0.01, 0.1, 1.0, 10.0], "class_weight": [None, "balanced"]}
RIDGE_ALPHAS = tuple(np.logspace(-2, 3, 11))


def check_task_models(names: list[str], task: str) -> None:
    """Raise InputError for a model that ``compare --task`` cannot run, naming the valid ones.
    """
    valid = ("default", *TASK_BASELINES[task])
    bad = [n for n in names if n not in valid]
    if bad:
        raise InputError(f"{{models}} {', '.join(bad)} cannot run with {{task}} {task} "
                         "(XGBoost, the -vec baselines and SetFit are classification only); for "
                         f"this task use: {', '.join(valid)}", params=["models", "task"])


def describe(name: str) -> str:
    return {"ridge-bow": "ridge regression (RidgeCV), bag-of-words",
            "logit-bow": "one-vs-rest logistic regression, bag-of-words",
            "svm-bow": "one-vs-rest linear SVM, bag-of-words"}[name]


@dataclass
class TaskBaseline:
    """A fitted regression or multi-label baseline.

    Attributes:
        name: ``ridge-bow``, ``logit-bow`` or ``svm-bow``.
        task: the fitted task (:mod:`quantformer.models.tasks`): label order, output columns.
        estimator: the scikit-learn pipeline (bag-of-words + model).
        params: the hyperparameters chosen by cross-validation.
        seconds: wall time of tuning and fitting.
    """

    name: str
    task: object
    estimator: object
    params: dict = field(default_factory=dict)
    seconds: float = 0.0

    def predict(self, frame: pd.DataFrame, warn: bool = True) -> pd.DataFrame:
        """``doc_id`` and the task's prediction columns (``predicted``; multilabel
        ``predicted_<label>``), missing for missing or empty texts."""
        texts = frame["text"].tolist()
        miss = is_missing_text(texts)
        k = max(len(self.task.labels), 1)
        scores = np.full((len(texts), k), np.nan)
        if (~miss).any():
            out = self.estimator.predict([t for t, m in zip(texts, miss) if not m])
            scores[~miss] = np.asarray(out, dtype=float).reshape(-1, k)
        if self.task.name == "regression":
            return pd.DataFrame({"doc_id": frame["doc_id"].to_numpy(),
                                 PREDICTED_COLUMN: scores[:, 0]})
        cols = {f"predicted_{lab}": pd.array([None if m else bool(v) for v, m in
                                              zip(scores[:, j], miss)], dtype="boolean")
                for j, lab in enumerate(self.task.labels)}
        return pd.DataFrame({"doc_id": frame["doc_id"].to_numpy(), **cols})


def fit_task_baseline(rows: pd.DataFrame, name: str, task, *, folds: int = 5,
                      seed: int = 1) -> TaskBaseline:
    """Fit a regression or multi-label baseline on prepared rows.

    Args:
        rows: usable rows with ``text`` and the task's cleaned ``label`` (numbers, or label
            tuples), from :meth:`quantformer.select.scoring.TaskScoring.rows`.
        name: one of :data:`TASK_BASELINES` for the task.
        task: the task fitted on ``rows`` (:meth:`~quantformer.select.scoring.TaskScoring.
            fitted`).
        folds: CV folds for the multi-label grid (shuffled with ``seed``).
        seed: CV shuffling and the SVM's seed.

    Raises:
        InputError: an empty vocabulary after the document-frequency filters.
    """
    from sklearn.pipeline import Pipeline

    t0 = time.perf_counter()
    texts = rows["text"].tolist()
    if task.name == "regression":
        from sklearn.linear_model import RidgeCV

        est = Pipeline([("bow", bow_vectorizer()), ("clf", RidgeCV(alphas=RIDGE_ALPHAS))])
        fit_quietly(est, texts, rows[LABEL_COLUMN].to_numpy(dtype=float))
        params = {"alpha": float(est.named_steps["clf"].alpha_)}
    else:
        est, params = _fit_multilabel(texts, task.targets(rows).astype(int), name, folds, seed)
    return TaskBaseline(name=name, task=task, estimator=est, params=params,
                        seconds=time.perf_counter() - t0)


def _fit_multilabel(texts, y, name: str, folds: int, seed: int):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.svm import LinearSVC

    base = (LogisticRegression(max_iter=2000) if name == "logit-bow"
            else LinearSVC(random_state=seed, max_iter=5000))
    pipe = Pipeline([("bow", bow_vectorizer()), ("clf", OneVsRestClassifier(base))])
    grid = {f"clf__estimator__{k}": v for k, v in C_GRID.items()}
    search = GridSearchCV(pipe, grid, scoring="f1_macro", n_jobs=1, error_score="raise",
                          cv=KFold(n_splits=int(folds), shuffle=True, random_state=seed))
    fit_quietly(search, texts, y)
    params = {k.replace("clf__estimator__", ""): v for k, v in search.best_params_.items()}
    return search.best_estimator_, {**params, "cv_macro_f1": float(search.best_score_)}
