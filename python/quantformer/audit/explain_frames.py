"""What :func:`quantformer.audit.explain.explain` returns: the :class:`Explanation`, its words
and documents frames made from each explained item's words and completeness figures."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..infer.classifier import Classifier
from ..io.columns import PREDICTED_COLUMN, prob_column
from ..models.precision import record as precision_of
from .explain_forward import class_probabilities


def target_names(clf: Classifier) -> list[str]:
    """The name of each model output as written in the ``target`` column."""
    return [PREDICTED_COLUMN] if clf.task.name == "regression" else list(clf.labels)


@dataclass
class Explanation:
    """What :func:`quantformer.audit.explain.explain` returns.

    Attributes:
        words: one row per word and target: ``doc_id, word_id, word, start, end, attribution,
            target, completeness_gap`` (``start``/``end``: character offsets, 0-based,
            end-exclusive, into the document's text; ``attribution`` in logit units, NaN
            for words outside the window the model saw), then the document's ``steps``,
            ``predicted`` (not for multi-label) and ``probability``. Documents read in
            windows (``truncation="chunks"``) add ``word_windows`` (after
            ``completeness_gap``: the windows that read the word, whose sums it averages; 0
            for a word in windows dropped by ``max_chunks``) and, last, the document's
            ``n_windows``.
        documents: one row per document and target: ``doc_id, target, predicted``, the
            model's outputs (``prob_<label>`` or the regression value), ``logit``,
            ``baseline_logit``, ``attribution_sum``, ``completeness_gap``, ``steps``,
            ``truncated``, ``n_words``, ``n_unseen``, ``unknown_only`` (the document
            consists only of tokens the model does not know, :func:`quantformer.audit.explain.unknown_only_mask`); in
            windows, ``n_windows`` before ``n_words``, ``truncated`` then meaning windows
            dropped by ``max_chunks`` (:mod:`quantformer.audit.explain` says what ``logit``,
            ``baseline_logit`` and ``attribution_sum`` are for each aggregate).
        Both have a ``backend`` column: ``torch`` (fp32) or ``torch bf16``.
        precision: the precision used and why (``precision``, ``requested``, ``reason``).
    """

    words: pd.DataFrame
    documents: pd.DataFrame
    precision: dict | None = None


def explanation_frames(engine, frame, scores, item_docs, item_targets, stats: dict,
                       parts: list) -> Explanation:
    """The :class:`Explanation` of explained items (item ``j``: document ``item_docs[j]`` of
    ``frame``, output ``item_targets[j]``) from each item's words frame (``parts``) and its
    ``stats`` (the documents frame's columns from ``logit`` on); ``engine`` (an
    :class:`~quantformer.audit.integrate.Integrator`) gives the classifier, its forward and
    the precision, ``scores`` (n_docs, n_outputs) the model's scores of every document."""
    clf = engine.clf
    names = np.asarray(target_names(clf), dtype=object)
    doc_ids = frame["doc_id"].astype(str).to_numpy()
    for j, d in enumerate(item_docs):
        parts[j].insert(0, "doc_id", doc_ids[d])
        parts[j]["target"] = names[item_targets[j]]
        parts[j]["completeness_gap"] = stats["completeness_gap"][j]
    words = pd.concat(parts, ignore_index=True)
    words["doc_id"] = words["doc_id"].astype("string")
    words["target"] = words["target"].astype("string")
    if "word_windows" in words.columns:  # after the word's other columns
        words["word_windows"] = words.pop("word_windows")
    missing = np.isnan(scores).any(axis=1)
    probs = class_probabilities(engine.fwd, clf, scores)
    pred = pd.DataFrame(clf.task.columns(probs, missing)).iloc[item_docs].reset_index(drop=True)
    n_words = words.groupby(["doc_id", "target"], sort=False)["attribution"]
    docs = pd.DataFrame({
        "doc_id": pd.array(doc_ids[item_docs], dtype="string"),
        "target": pd.array(names[item_targets], dtype="string"),
    })
    docs = pd.concat([docs, pred], axis=1)
    for col, values in stats.items():
        docs[col] = values
    docs["n_words"] = n_words.size().to_numpy()
    docs["n_unseen"] = n_words.apply(lambda a: int(a.isna().sum())).to_numpy()
    words = _with_prediction(words, docs)
    words["backend"] = docs["backend"] = engine.precision.label
    return Explanation(words=words, documents=docs, precision=precision_of(engine.precision))


def _with_prediction(words: pd.DataFrame, docs: pd.DataFrame) -> pd.DataFrame:
    """The words with their document's ``steps`` (integration points used), ``predicted``
    class (or value) and ``probability`` (of the predicted class; NaN for a regression); a
    multi-label model has no single prediction: the words get ``steps`` and the ``target``'s
    ``probability``."""
    prob = pd.Series(np.nan, index=docs.index, dtype="float64")
    if PREDICTED_COLUMN not in docs.columns:  # multi-label
        for lab in docs["target"].dropna().unique():
            pick = docs["target"] == lab
            prob[pick] = docs.loc[pick, prob_column(lab)].astype("float64")
        extra = docs[["doc_id", "target", "steps"]].assign(probability=prob)
        extra = extra.join(docs[_windows(docs)])
        return words.merge(extra, on=["doc_id", "target"], how="left", sort=False)
    for lab in docs[PREDICTED_COLUMN].dropna().unique():
        col = prob_column(lab)
        if col in docs.columns:
            pick = docs[PREDICTED_COLUMN] == lab
            prob[pick] = docs.loc[pick, col].astype("float64")
    extra = docs[["doc_id", "target", "steps", PREDICTED_COLUMN]].assign(probability=prob)
    extra = extra.join(docs[_windows(docs)])
    return words.merge(extra, on=["doc_id", "target"], how="left", sort=False)


def _windows(docs: pd.DataFrame) -> list:
    """``["n_windows"]`` for documents read in windows, else ``[]``."""
    return ["n_windows"] if "n_windows" in docs.columns else []
