"""A prediction file joined with a hand-coded gold sample: what ``estimate`` and ``regress`` read.

The gold sample is a random sample of the predicted corpus whose documents were coded by hand
(``doc_id``, ``label``), optionally drawn with unequal, known inclusion probabilities (a
stratified sample; a column of probabilities in (0, 1], weighted by their inverse as in
Horvitz-Thompson estimation). Every check here refuses bad input with an
:class:`~quantformer._core.errors.InputError` naming the problem and the fix, or warns with a count:
never a silent number.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
import numpy as np
import pandas as pd

from .._core.errors import InputError
from .codes import MachineCodes, read_machine_codes, read_table  # noqa: F401 (read_table: API)
from .columns import ID_COLUMN, LABEL_COLUMN
from .frames import as_str_series

MIN_GOLD = 10  # fewer hand-coded documents than this: no interval is worth printing


class GoldWarning(UserWarning):
    """Documents left out of an estimate, or a group estimated with few or no gold documents."""


@dataclass
class GoldPair:
    """Predictions for a corpus and the hand-coded sample, aligned by row.

    Attributes:
        frame: the prediction frame (``doc_id``, docvars, ``predicted``, ``prob_<class>``),
            documents without a prediction left out.
        classes: the model's classes, in ``prob_*`` column order.
        yhat: float array (n_total, n_classes): ``prob_<class>`` where a document has them,
            else the 0/1 indicator of its hard label (:mod:`quantformer.io.codes`).
        predicted: the hard label of each row (argmax of the probabilities when absent).
        gold_rows: row positions in ``frame`` of the gold documents.
        gold_labels: their hand-coded labels (strings).
        gold_weights: their weights, 1 / inclusion probability (all 1 for a simple random
            sample).
        prediction: which prediction ``yhat`` holds (:attr:`quantformer.io.codes.
            MachineCodes.source`): the probabilities, the hard labels, or both.
    """

    frame: pd.DataFrame
    classes: list
    yhat: np.ndarray
    predicted: np.ndarray
    gold_rows: np.ndarray
    gold_labels: np.ndarray
    gold_weights: np.ndarray
    prediction: str = "probabilities"

    @property
    def n_total(self) -> int:
        return len(self.frame)

    def indicator(self, cls: str) -> np.ndarray:
        """1.0 where a gold document is coded ``cls``, else 0.0 (gold-row order)."""
        return (self.gold_labels == cls).astype(float)

    def column(self, cls: str) -> np.ndarray:
        """The prediction of class ``cls`` for every document (probability or 0/1)."""
        return self.yhat[:, self.classes.index(cls)]


def _with_ids(df: pd.DataFrame, name: str) -> pd.DataFrame:
    if ID_COLUMN not in df.columns:
        raise InputError(f"the {name} file has no doc_id column (it has: "
                         f"{', '.join(df.columns)}); name it with {{id_col}}", params=["id_col"])
    return df.assign(doc_id=np.asarray(as_str_series(df[ID_COLUMN]).to_numpy(), dtype=object))


def _check_ids(pred: pd.DataFrame, gold: pd.DataFrame) -> None:
    dup = gold[ID_COLUMN][gold[ID_COLUMN].duplicated()]
    if len(dup):
        raise InputError(f"the gold sample codes {len(dup)} document(s) twice (e.g. "
                         f"{', '.join(dup.head(3))}); keep one code per document")
    unknown = gold.loc[pd.Index(pred[ID_COLUMN]).get_indexer(gold[ID_COLUMN]) < 0, ID_COLUMN]
    if len(unknown):
        some = f"{len(unknown)} gold document(s) are not in {{pred}} (e.g. " \
            f"{', '.join(unknown.head(5))}); the gold sample must be drawn from the predicted " \
            "corpus: predict those documents too, or check "
        raise InputError(some + "{id_col}", params=["pred", "gold", "id_col"],
                         r_message=some + "that the names of {gold} are docnames of {pred}")


def _weights(gold: pd.DataFrame, weight_col: str | None) -> np.ndarray:
    if weight_col is None:
        return np.ones(len(gold))
    if weight_col not in gold.columns:
        raise InputError(f"the gold sample has no '{weight_col}' column (it has: "
                         f"{', '.join(gold.columns)}); name the inclusion probabilities "
                         "with {weight_col}", params=["weight_col"])
    p = pd.to_numeric(gold[weight_col], errors="coerce").to_numpy(float)
    if np.isnan(p).any() or (p <= 0).any() or (p > 1).any():
        raise InputError(f"the inclusion probabilities in '{weight_col}' must be numbers in "
                         "(0, 1] (the chance that each document was drawn into the gold "
                         "sample), not missing, 0 or above 1")
    return 1.0 / p


def _gold_labels(gold: pd.DataFrame, label_col: str, classes: list) -> pd.DataFrame:
    if label_col not in gold.columns:
        raise InputError(f"the gold sample has no '{label_col}' column (it has: "
                         f"{', '.join(gold.columns)}); name it with {{label_col}}",
                         params=["label_col"])
    labels = as_str_series(gold[label_col])
    if labels.isna().any():
        warnings.warn(f"{int(labels.isna().sum())} gold document(s) have no label and are "
                      "left out", GoldWarning, stacklevel=4)
    unknown = sorted(set(labels.dropna()) - set(classes))
    if unknown:
        raise InputError(
            f"the gold sample has label(s) the model does not know: {', '.join(unknown)} "
            f"(the model's classes: {', '.join(classes)}); recode them to the model's classes "
            "(e.g. with a mapping) or predict with a model trained on them")
    return gold.assign(**{label_col: labels}).loc[labels.notna()]


def _drop_unpredicted(pred: pd.DataFrame, yhat: np.ndarray, predicted: np.ndarray):
    bad = np.isnan(yhat).any(axis=1) | pd.isna(predicted)
    if bad.all():
        raise InputError("no document of {pred} has a prediction (every label and "
                         "probability is missing: empty texts or unparsed answers); give the "
                         "coder's output for the corpus", params=["pred"])
    if bad.any():
        warnings.warn(f"{int(bad.sum())} document(s) have no prediction (an empty text or an "
                      "unparsed answer) and are left out of the estimate", GoldWarning,
                      stacklevel=4)
    keep = ~bad
    return pred.loc[keep].reset_index(drop=True), yhat[keep], predicted[keep]


def join_gold(pred, gold, *, label_col: str = LABEL_COLUMN, weight_col: str | None = None,
              id_col: str | None = None) -> GoldPair:
    """Read and check a prediction frame and a gold sample, and align them.

    Args:
        pred: prediction DataFrame or file: a machine coder's output, ``predict``'s or
            ``zeroshot``'s (``doc_id``, docvars, ``predicted`` and/or ``prob_<class>``) or
            ``annotate``'s codes (``doc_id``, ``label``, ``prob_<label>`` maybe missing); see
            :mod:`quantformer.io.codes`.
        gold: gold DataFrame or file: ``doc_id`` and ``label_col``, a random sample of ``pred``.
        label_col: the hand-coded label column of ``gold`` (default ``label``).
        weight_col: optional column of ``gold`` with each document's inclusion probability.
        id_col: the id column of both (default ``doc_id``).

    Raises:
        InputError: gold doc_ids not in ``pred``, labels the model does not know, fewer than
            10 gold documents, bad inclusion probabilities, missing columns.
    """
    pred = read_table(pred, "prediction")
    gold = read_table(gold, "gold")
    if id_col and id_col != ID_COLUMN:
        pred = pred.rename(columns={id_col: ID_COLUMN})
        gold = gold.rename(columns={id_col: ID_COLUMN})
    codes = read_machine_codes(_with_ids(pred, "prediction"))
    pred, gold = codes.frame, _with_ids(gold, "gold")
    _check_ids(pred, gold)
    classes, yhat, predicted = codes.classes, codes.yhat(), codes.predicted()
    pred, yhat, predicted = _drop_unpredicted(pred, yhat, predicted)
    gold = gold.assign(_w=_weights(gold, weight_col))
    gold = _gold_labels(gold, label_col, classes)
    position = pd.Index(pred[ID_COLUMN]).get_indexer(gold[ID_COLUMN])
    if (position < 0).any():
        warnings.warn(f"{int((position < 0).sum())} gold document(s) have no prediction and "
                      "are left out", GoldWarning, stacklevel=3)
    gold, position = gold[position >= 0], position[position >= 0]
    if len(gold) < MIN_GOLD:
        raise InputError(f"the gold sample has {len(gold)} usable hand-coded document(s); "
                         f"an interval needs at least {MIN_GOLD} (a few hundred for a useful "
                         "one): code more documents")
    coded = pd.unique(gold[label_col].dropna())
    if len(coded) == 1:
        warnings.warn(f"every gold document is coded {coded[0]!r}: the intervals of the shares "
                      "rest on one class and are degenerate (widened to exact Clopper-Pearson "
                      "intervals, see the note column); code a random "
                      "sample of the corpus, which will include the other classes",
                      GoldWarning, stacklevel=3)
    return GoldPair(frame=pred, classes=classes, yhat=yhat, predicted=predicted,
                    gold_rows=position, prediction=codes.source,
                    gold_labels=gold[label_col].to_numpy(dtype=object),
                    gold_weights=gold["_w"].to_numpy(float))
