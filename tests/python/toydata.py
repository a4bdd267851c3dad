"""A small labelled toy corpus for the fine-tuning, prediction and evaluation tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tiny_models import TINY_CORPUS

_TAX = ("tax", "deficit", "econom", "jobs", "spending", "trade")


def toy_frame(n: int = 48) -> pd.DataFrame:
    """``n`` documents from the tiny corpus; label ``econ`` when the text is about money, else
    ``other``; a docvar ``year``."""
    texts = [TINY_CORPUS[i % len(TINY_CORPUS)] for i in range(n)]
    labels = ["econ" if any(w in t.lower() for w in _TAX) else "other" for t in texts]
    return pd.DataFrame({"doc_id": [f"d{i:03d}" for i in range(n)], "text": texts,
                         "label": labels, "year": list(range(2000, 2000 + n))})


def regression_frame(n: int = 24) -> pd.DataFrame:
    """The toy corpus with a numeric label (a year) for the regression task."""
    frame = toy_frame(n)
    return frame.assign(label=[str(1900 + 3 * i) for i in range(n)])


def multilabel_frame(n: int = 24) -> pd.DataFrame:
    """The toy corpus with two 0/1 labels (``econ``, ``long``) for the multi-label task."""
    frame = toy_frame(n)
    length = frame["text"].str.len()
    return frame.assign(econ=(frame["label"] == "econ").astype(int),
                        long=(length > length.median()).astype(int))


def biased_corpus(n: int = 4000, seed: int = 0):
    """Two parties (R: 22 % toxic, D: 15 %) and a classifier that misses half the toxic ones.

    Returns the prediction frame and the true labels (numpy array of strings).
    """
    rng = np.random.default_rng(seed)
    party = rng.choice(["D", "R"], n)
    truth = rng.random(n) < np.where(party == "R", 0.22, 0.15)
    score = np.where(truth, rng.beta(3, 3, n), rng.beta(1.5, 6, n))
    pred = pd.DataFrame({"doc_id": [f"d{i}" for i in range(n)], "party": party,
                         "predicted": np.where(score > 0.5, "toxic", "ok"),
                         "prob_ok": 1 - score, "prob_toxic": score})
    return pred, np.where(truth, "toxic", "ok")
