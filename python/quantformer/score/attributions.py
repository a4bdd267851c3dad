"""Summaries of word attributions across a corpus (frames and arrays in, frames and numbers out).

* :func:`by_term`: per target class, the terms with the highest mean attribution across
  documents, with the number of documents they occur in and a percentile bootstrap interval
  over documents (Efron and Tibshirani 1993).
* :func:`compare_terms`: the same beside a bag-of-words model's coefficients, with the overlap
  of the two top lists and their Spearman rank correlation per class.
* :func:`aopc`: the area over the perturbation curve of a deletion test (Samek et al. 2017).
* :func:`mean_spearman`: the mean per-document Spearman rank correlation of two attribution
  vectors, as in the model-randomisation sanity check (Adebayo et al. 2018).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.columns import ID_COLUMN


def doc_terms(words: pd.DataFrame, lowercase: bool = True, analyzer=None) -> pd.DataFrame:
    """One row per (target, document, term): the term's summed attribution in the document.

    Args:
        words: the words frame of :func:`quantformer.audit.explain.explain` (``doc_id``,
            ``word``, ``attribution``, ``target``); words not seen by the model are left out.
        lowercase: fold case (default True).
        analyzer: None (a term is the word) or a callable word -> list of terms (e.g. the
            bag-of-words tokenizer: lowercased, stemmed, punctuation dropped); a word's
            attribution is shared equally among its terms, words with none are left out.
    """
    w = words.loc[words["attribution"].notna(), ["target", ID_COLUMN, "word", "attribution"]]
    if analyzer is None:
        w = w.assign(term=w["word"].str.lower() if lowercase else w["word"])
    else:
        vocab = {x: analyzer(str(x)) for x in w["word"].unique()}
        terms = w["word"].map(vocab)
        share = terms.map(len)
        w = w.assign(term=terms, attribution=w["attribution"] / share.where(share > 0))
        w = w.loc[share.to_numpy() > 0].explode("term")
    return (w.groupby(["target", ID_COLUMN, "term"], sort=False, observed=True)["attribution"]
            .sum().reset_index())


def surface_forms(words: pd.DataFrame, lowercase: bool = True, analyzer=None) -> dict:
    """``{term: the most frequent (lowercased) word that gives it}``, so that a stem such as
    ``illeg`` is shown as ``illegal`` (ties: the word seen first)."""
    w = words["word"].dropna().astype(str)
    w = w.str.lower() if lowercase or analyzer is not None else w
    counts: dict = {}
    for word, n in w.value_counts(sort=False).items():
        for term in (analyzer(word) if analyzer is not None else [word]):
            if n > counts.get(term, ("", 0))[1]:
                counts[term] = (word, n)
    return {t: word for t, (word, _) in counts.items()}


def term_means(dt: pd.DataFrame) -> dict:
    """``{target: {term: per-document attributions (array)}}`` of a :func:`doc_terms` frame."""
    out: dict = {}
    for (target, term), g in dt.groupby(["target", "term"], sort=False, observed=True):
        out.setdefault(target, {})[term] = g["attribution"].to_numpy(dtype=np.float64)
    return out


def _ranked(arrays: dict, min_docs: int) -> list:
    """The terms with at least ``min_docs`` documents, highest mean attribution first."""
    ok = [(t, a.mean()) for t, a in arrays.items() if len(a) >= min_docs]
    return [t for t, _ in sorted(ok, key=lambda x: -x[1])]


def _row(target, term, a, rank, n_boot, level, rng) -> dict:
    lo, hi = bootstrap_mean(a, n_boot, level, rng) if len(a) else (np.nan, np.nan)
    return {"target": target, "term": term, "mean_attribution": a.mean() if len(a) else np.nan,
            "lower": lo, "upper": hi, "n_docs": len(a), "rank": rank}


def _check_top(top: int, min_docs: int) -> None:
    if top < 1 or min_docs < 1:
        raise InputError(f"top and min_docs must be at least 1, not {top} and {min_docs}")


def by_term(words: pd.DataFrame, *, top: int = 20, min_docs: int = 2, n_boot: int = 1000,
            level: float = 0.95, seed: int = 1, lowercase: bool = True,
            analyzer=None) -> pd.DataFrame:
    """Per target class, the terms with the highest mean attribution across documents.

    A term's attribution in a document is the sum over its occurrences; its mean is taken over
    the documents it occurs in, and the interval is the percentile bootstrap over those
    documents (``n_boot`` resamples, seeded).

    Args:
        words: the words frame of :func:`quantformer.audit.explain.explain`.
        top: terms kept per class (20), highest mean first.
        min_docs: terms in fewer documents are left out (2).
        n_boot: bootstrap resamples (1000). level: interval coverage (0.95).
        lowercase, analyzer: how words become terms (:func:`doc_terms`).

    Returns:
        A frame ``target, term, word, mean_attribution, lower, upper, n_docs, rank``
        (``word``: the term's most frequent surface form, :func:`surface_forms`).

    Raises:
        InputError: ``top`` or ``min_docs`` below 1.
    """
    _check_top(top, min_docs)
    rng = np.random.default_rng(seed)
    out = []
    for target, arrays in term_means(doc_terms(words, lowercase, analyzer)).items():
        for rank, term in enumerate(_ranked(arrays, min_docs)[:top], 1):
            out.append(_row(target, term, arrays[term], rank, n_boot, level, rng))
    return _with_words(pd.DataFrame(out, columns=TERM_COLUMNS),
                       surface_forms(words, lowercase, analyzer))


def _with_words(f: pd.DataFrame, forms: dict) -> pd.DataFrame:
    """``word`` (the term's most frequent surface form; the term where none) after ``term``."""
    f.insert(f.columns.get_loc("term") + 1, "word",
             [forms.get(t, t) for t in f["term"]])
    return f


TERM_COLUMNS = ["target", "term", "mean_attribution", "lower", "upper", "n_docs", "rank"]
#: the columns :func:`compare_terms` adds to :data:`TERM_COLUMNS`
BOW_COLUMNS = ["bow_coef", "bow_rank", "in_top", "in_bow_top", "top_overlap", "spearman",
               "n_common"]


def compare_terms(words: pd.DataFrame, coefs: pd.DataFrame, analyzer, *, top: int = 20,
                  min_docs: int = 2, n_boot: int = 1000, level: float = 0.95,
                  seed: int = 1) -> pd.DataFrame:
    """What a fine-tuned model keys on beside a bag-of-words model's coefficients, per class.

    Words are mapped onto the bag-of-words terms by ``analyzer`` (:func:`doc_terms`), so both
    lists use one vocabulary. Per class, the rows are the ``top`` terms by mean attribution
    (terms in at least ``min_docs`` documents) and the ``top`` terms by coefficient, attribution
    top first. Agreement per class (the same on each of its rows): ``top_overlap``, the share
    of the attribution top-``top`` that is also in the coefficient top-``top`` (of the shorter
    list when one has fewer terms); ``spearman``, the Spearman rank correlation of mean
    attribution and coefficient over the ``n_common`` terms that have both (a mean over at
    least ``min_docs`` documents and a coefficient). Both are missing for a class that no
    document was explained for.

    Args:
        words: the words frame of :func:`quantformer.audit.explain.explain`.
        coefs: ``target, term, bow_coef, bow_rank`` (see
            :class:`quantformer.train.bow_terms.BowTerms`).
        analyzer: word -> list of bag-of-words terms.
        top, min_docs, n_boot, level, seed: as in :func:`by_term`.

    Returns:
        A frame of :data:`TERM_COLUMNS` + :data:`BOW_COLUMNS`; ``rank`` (attribution rank) is
        missing for terms in fewer than ``min_docs`` documents, ``mean_attribution`` and the
        interval for terms no explained document has, ``bow_coef`` for terms outside the
        bag-of-words vocabulary.

    Raises:
        InputError: ``top`` or ``min_docs`` below 1.
    """
    _check_top(top, min_docs)
    rng = np.random.default_rng(seed)
    means = term_means(doc_terms(words, True, analyzer))
    bow = {t: g.set_index("term") for t, g in coefs.groupby("target", sort=False)}
    frames = []
    for target in dict.fromkeys([*means, *bow]):
        arrays, b = means.get(target, {}), bow.get(target)
        ranked = _ranked(arrays, min_docs)
        rank = {t: i for i, t in enumerate(ranked, 1)}
        bow_top = [] if b is None else b.sort_values("bow_rank").index[:top].tolist()
        rows = [_row(target, t, arrays.get(t, np.array([])), rank.get(t), n_boot, level, rng)
                for t in dict.fromkeys(ranked[:top] + bow_top)]
        f = pd.DataFrame(rows, columns=TERM_COLUMNS)
        f["bow_coef"] = f["term"].map(b["bow_coef"]) if b is not None else np.nan
        f["bow_rank"] = f["term"].map(b["bow_rank"]).astype("Int64") if b is not None else pd.NA
        f["in_top"] = f["term"].isin(ranked[:top])
        f["in_bow_top"] = f["term"].isin(bow_top)
        k = min(top, len(ranked), len(bow_top))
        f["top_overlap"] = (f["in_top"] & f["in_bow_top"]).sum() / k if k else np.nan
        common = [t for t in ranked if b is not None and t in b.index]
        f["spearman"] = spearman([arrays[t].mean() for t in common],
                                 b.loc[common, "bow_coef"]) if common else np.nan
        f["n_common"] = len(common)
        frames.append(f)
    out = pd.concat(frames, ignore_index=True) if frames else \
        pd.DataFrame(columns=TERM_COLUMNS + BOW_COLUMNS)
    out["rank"] = out["rank"].astype("Int64")
    return _with_words(out, surface_forms(words, True, analyzer))


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
