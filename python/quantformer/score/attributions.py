"""Summaries of word attributions across a corpus (frames and arrays in, frames and numbers out).

* :func:`by_term`: per target class, the terms with the highest mean attribution across
  documents, with the number of documents they occur in and a percentile bootstrap interval
  over documents (Efron and Tibshirani 1993).
* :func:`aopc`: the area over the perturbation curve of a deletion test (Samek et al. 2017).
* :func:`mean_spearman`: the mean per-document Spearman rank correlation of two attribution
  vectors, as in the model-randomisation sanity check (Adebayo et al. 2018).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._core.errors import InputError


def doc_terms(words: pd.DataFrame, lowercase: bool = True) -> pd.DataFrame:
    """One row per (target, document, term): the term's summed attribution in the document.

    Args:
        words: the words frame of :func:`quantformer.infer.explain.explain` (``doc_id``,
            ``word``, ``attribution``, ``target``); words not seen by the model are left out.
        lowercase: fold case (default True).
    """
    w = words.loc[words["attribution"].notna(), ["target", "doc_id", "word", "attribution"]]
    w = w.assign(term=w["word"].str.lower() if lowercase else w["word"])
    return (w.groupby(["target", "doc_id", "term"], sort=False, observed=True)["attribution"]
            .sum().reset_index())


def by_term(words: pd.DataFrame, *, top: int = 20, min_docs: int = 2, n_boot: int = 1000,
            level: float = 0.95, seed: int = 1, lowercase: bool = True) -> pd.DataFrame:
    """Per target class, the terms with the highest mean attribution across documents.

    A term's attribution in a document is the sum over its occurrences; its mean is taken over
    the documents it occurs in, and the interval is the percentile bootstrap over those
    documents (``n_boot`` resamples, seeded).

    Args:
        words: the words frame of :func:`quantformer.infer.explain.explain`.
        top: terms kept per class (20), highest mean first.
        min_docs: terms in fewer documents are left out (2).
        n_boot: bootstrap resamples (1000). level: interval coverage (0.95).

    Returns:
        A frame ``target, term, mean_attribution, lower, upper, n_docs, rank``.

    Raises:
        InputError: ``top`` or ``min_docs`` below 1.
    """
    if top < 1 or min_docs < 1:
        raise InputError(f"top and min_docs must be at least 1, not {top} and {min_docs}")
    rng = np.random.default_rng(seed)
    dt = doc_terms(words, lowercase)
    rows = []
    for (target, term), g in dt.groupby(["target", "term"], sort=False, observed=True):
        a = g["attribution"].to_numpy(dtype=np.float64)
        if len(a) < min_docs:
            continue
        rows.append((target, term, a.mean(), len(a), a))
    out = []
    for target in dict.fromkeys(r[0] for r in rows):
        best = sorted((r for r in rows if r[0] == target), key=lambda r: -r[2])[:top]
        for rank, (_, term, mean, n, a) in enumerate(best, 1):
            lo, hi = bootstrap_mean(a, n_boot, level, rng)
            out.append({"target": target, "term": term, "mean_attribution": mean,
                        "lower": lo, "upper": hi, "n_docs": n, "rank": rank})
    cols = ["target", "term", "mean_attribution", "lower", "upper", "n_docs", "rank"]
    return pd.DataFrame(out, columns=cols)


def bootstrap_mean(a: np.ndarray, n_boot: int, level: float,
                   rng: np.random.Generator) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``a``."""
    idx = rng.integers(0, len(a), size=(n_boot, len(a)))
    means = a[idx].mean(axis=1)
    alpha = (1 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def aopc(p0: np.ndarray, pk: np.ndarray) -> float:
    """Area over the perturbation curve (Samek et al. 2017):
    ``mean over documents of 1/(K+1) * sum_{k=0..K} (p0 - p_k)``.

    Args:
        p0: (n,) target probability of each original document.
        pk: (n, K) target probability after deleting the first 1..K words.
    """
    p0 = np.asarray(p0, dtype=np.float64)
    pk = np.asarray(pk, dtype=np.float64)
    drops = p0[:, None] - pk
    return float(np.nanmean(drops.sum(axis=1) / (pk.shape[1] + 1)))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation of two vectors (average ranks for ties); NaN when either is
    constant or shorter than 2."""
    a = pd.Series(np.asarray(a, dtype=np.float64)).rank().to_numpy()
    b = pd.Series(np.asarray(b, dtype=np.float64)).rank().to_numpy()
    if len(a) < 2 or a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def mean_spearman(pairs) -> float:
    """Mean of :func:`spearman` over ``(a, b)`` pairs, NaNs left out."""
    vals = [spearman(a, b) for a, b in pairs]
    vals = [v for v in vals if not np.isnan(v)]
    return float(np.mean(vals)) if vals else float("nan")
