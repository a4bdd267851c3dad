"""Prevalence: the share of documents in each class, with a valid confidence interval.

Plugging a classifier's predicted labels into a share is biased even at 80-90 % accuracy, and
its textbook interval does not cover the truth (Egami, Hinck, Stewart & Wei 2023, "Using
imperfect surrogates for downstream inference: design-based supervised learning for social
science applications of large language models", NeurIPS). Prediction-powered inference
(Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023, "Prediction-powered inference",
Science 382) fixes this with a random sample of hand-coded ("gold") documents: the mean
prediction over the corpus, corrected by the mean error on the gold sample. Its power-tuned
form PPI++ (Angelopoulos, Duchi & Zrnic 2023, "PPI++: efficient prediction-powered
inference", arXiv:2311.01453) weights the predictions by how well they track the codes, so its
interval is never much wider than the gold sample's alone. The estimators are ppi-python's
``ppi_mean_ci`` / ``classical_mean_ci`` and statsmodels' ``proportion_confint``.

Methods (``method=``):

* ``ppi`` (default): PPI++ on ``prob_<class>`` (the predicted probability; the 0/1 predicted
  label when the file has no probabilities), with the whole predicted corpus as the unlabelled
  set, so the estimate is the corpus's prevalence (the gold documents' own predictions included).
* ``naive``: the share of predicted labels with the Wald interval ``p ± z sqrt(p(1-p)/N)`` (what
  users do without a gold sample; shown for contrast; it ignores classification error).
* ``gold``: the gold sample alone (its (weighted) mean with a normal interval).
* ``dsl``: design-based supervised learning (Egami et al. 2023, section 3): each document's
  pseudo-outcome is its prediction plus, for a gold document, its error divided by the known
  probability that it was drawn into the gold sample (``weight_col``; for a simple random
  sample n_gold / N); the estimate is the mean pseudo-outcome with a normal interval. It is
  unbiased whatever the classifier's errors when the sampling probabilities are known, also
  for unequal ones (e.g. the planner's stratified draw). Surrogate codes from a language model
  (``quantformer annotate``) are predictions like any other: ``prob_<class>`` where a document
  has them, else the 0/1 indicator of its label (the ``note`` column says which was used).

With ``by``, each group of the docvars gets its own estimate from its own gold documents. A group
without gold documents gets, for ``ppi``, the pooled correction (the mean error over all gold
documents, assuming the classifier errs alike in every group; the ``note`` column says so) and,
for ``gold``, no estimate (missing, with a note). Intervals are clipped to [0, 1].

When the gold documents used for a class (those of the group, or all of them when pooled) all
agree (every one in the class or none, e.g. a group with 3 gold documents), the variance
estimate of ``ppi`` and ``gold`` is zero and their interval would have zero width, such as
[1, 1]: certain-looking and wrong. The interval is then widened to contain the exact
Clopper-Pearson interval of the gold share (k of n; Clopper & Pearson 1934, "The use of
confidence or fiducial limits illustrated in the case of the binomial", Biometrika 26,
unweighted even for a weighted sample) and the ``note`` says so; the estimate is kept.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._core.checks import check_level
from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from ..io.gold import MIN_GOLD, GoldPair, GoldWarning, join_gold
from .planner import add_gold_needed
from .ppi import ppi_py

METHODS = ("ppi", "naive", "gold", "dsl")
COLUMNS = ["class", "estimate", "ci_low", "ci_high", "method", "n_gold", "n_total", "note"]
POOLED = "no gold documents in this group: the PPI correction is pooled over all groups"
EXACT = ("its {n} gold document(s) agree ({k} of {n} in this class): the variance estimate is "
         "zero, so the interval is widened to the exact Clopper-Pearson interval of the gold "
         "share")


def check_method(method: str) -> str:
    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}, not '{method}'")
    return method


def parse_by(by, columns) -> list:
    """``by`` as a list of docvar names (a comma-separated string or a list); checks them."""
    if by is None or by == "" or by == []:
        return []
    names = [b.strip() for b in by.split(",")] if isinstance(by, str) else list(by)
    unknown = [b for b in names if b not in columns]
    if unknown:
        raise InputError(f"{{by}} column(s) {', '.join(unknown)} are not in the prediction "
                         f"file (its columns: {', '.join(columns)}); predict a corpus with "
                         "these docvars or name existing ones", params=["by"])
    return names


def _ppi(pair: GoldPair, rows: np.ndarray, gold: np.ndarray, cls: str, alpha: float):
    ppi = ppi_py()
    y = pair.indicator(cls)[gold]
    yhat_all = pair.column(cls)
    yhat, unlabelled, w = yhat_all[pair.gold_rows[gold]], yhat_all[rows], pair.gold_weights[gold]
    lam = None if np.var(unlabelled) > 0 and np.var(yhat) > 0 else 1.0
    point = ppi.ppi_mean_pointestimate(y, yhat, unlabelled, lam=lam, w=w)
    low, high = ppi.ppi_mean_ci(y, yhat, unlabelled, alpha=alpha, lam=lam, w=w)
    return float(np.ravel(point)[0]), float(np.ravel(low)[0]), float(np.ravel(high)[0])


def dsl_pseudo_outcomes(pair: GoldPair, cls: str) -> np.ndarray:
    """The design-based pseudo-outcome of every document for class ``cls`` (Egami et al. 2023,
    section 3): ``yhat + R (y - yhat) / pi``, with ``yhat`` the prediction (``prob_<class>`` or
    the 0/1 label), ``R`` 1 for a gold document and ``pi`` its known inclusion probability (1 /
    its weight; a simple random sample of the whole corpus: n_gold / N)."""
    pseudo = pair.column(cls).astype(float).copy()
    weights = pair.gold_weights
    if np.all(weights == 1.0):  # a simple random sample of the whole corpus
        weights = np.full(len(weights), pair.n_total / max(len(weights), 1))
    at = pair.gold_rows
    pseudo[at] += (pair.indicator(cls) - pseudo[at]) * weights
    return pseudo


def _dsl(pair: GoldPair, rows: np.ndarray, cls: str, alpha: float):
    """Design-based supervised learning (Egami et al. 2023): the mean over ``rows`` of the
    pseudo-outcomes (:func:`dsl_pseudo_outcomes`) with a normal interval."""
    from scipy.stats import norm

    values = dsl_pseudo_outcomes(pair, cls)[rows]
    est = float(values.mean())
    half = float(norm.ppf(1 - alpha / 2) * values.std(ddof=1) / np.sqrt(len(values)))
    return est, est - half, est + half


def _naive(pair: GoldPair, rows: np.ndarray, cls: str, alpha: float):
    from statsmodels.stats.proportion import proportion_confint

    count, n = int((pair.predicted[rows] == cls).sum()), len(rows)
    low, high = proportion_confint(count, n, alpha=alpha, method="normal")
    return count / n, float(low), float(high)


def _gold_only(pair: GoldPair, gold: np.ndarray, cls: str, alpha: float):
    y, w = pair.indicator(cls)[gold], pair.gold_weights[gold]
    if len(y) < 2:
        return np.nan, np.nan, np.nan
    low, high = ppi_py().classical_mean_ci(y, w=w, alpha=alpha)
    return float(np.average(y, weights=w)), float(np.ravel(low)[0]), float(np.ravel(high)[0])


def _exact_if_degenerate(pair, used, cls, alpha, point):
    """``point`` with its interval widened to Clopper-Pearson when the used gold codes agree."""
    from statsmodels.stats.proportion import proportion_confint

    y = pair.indicator(cls)[used]
    est, low, high = point
    if not len(y) or np.isnan(est) or (y.min() != y.max() and high > low):
        return point, ""
    k, n = int(y.sum()), len(y)
    exact = proportion_confint(k, n, alpha=alpha, method="beta")
    return (est, min(low, float(exact[0])), max(high, float(exact[1]))), EXACT.format(n=n, k=k)


def _one_class(pair, method, rows, gold, cls, alpha):
    """(estimate, low, high, n_gold, note) for one class within one group of rows."""
    note, used = "", gold
    if method == "naive":
        point = _naive(pair, rows, cls, alpha)
    elif method == "gold":
        point = _gold_only(pair, gold, cls, alpha)
        note = "" if gold.sum() else "no gold documents in this group: no gold-only estimate"
    elif method == "dsl":
        point = _dsl(pair, rows, cls, alpha)
    elif gold.sum():
        point = _ppi(pair, rows, gold, cls, alpha)
    else:
        used = np.ones_like(gold)
        point, note = _ppi(pair, rows, used, cls, alpha), POOLED
    if method != "naive":
        point, exact = _exact_if_degenerate(pair, used, cls, alpha, point)
        note = "; ".join(filter(None, [note, exact]))
    est, low, high = point
    return est, max(low, 0.0), min(high, 1.0), int(gold.sum()), len(rows), note


def prediction_note(pair: GoldPair, note: str = "") -> str:
    """``note`` with, when some document's prediction is its hard label (a machine coder's
    output without probabilities, e.g. an endpoint that gave no token log-probabilities),
    which prediction was used (:attr:`quantformer.io.codes.MachineCodes.source`)."""
    if pair.prediction == "probabilities":
        return note
    return "; ".join(filter(None, [note, f"predictions: {pair.prediction}"]))


def _groups(pair: GoldPair, by: list):
    """(key dict, document rows, gold mask) per group of the ``by`` docvars (all: one group)."""
    if not by:
        yield {}, np.arange(pair.n_total), np.ones(len(pair.gold_rows), bool)
        return
    for key, rows in pair.frame.groupby(by, sort=True, dropna=False).indices.items():
        key = key if isinstance(key, tuple) else (key,)
        yield dict(zip(by, key)), np.asarray(rows), np.isin(pair.gold_rows, rows)


def _warn_groups(table: pd.DataFrame, by: list, method: str) -> None:
    if not by or method == "naive":
        return
    first = table.drop_duplicates(by)
    for n_gold, what in ((0, "no gold documents"), (MIN_GOLD, f"fewer than {MIN_GOLD}")):
        bad = first[(first["n_gold"] == 0) if n_gold == 0 else first["n_gold"].between(1, 9)]
        if len(bad):
            names = "; ".join(", ".join(f"{b}={r[b]}" for b in by) for _, r in bad.iterrows())
            fix = (" (PPI with the correction pooled over all groups)" if method == "ppi" and
                   n_gold == 0 else "")
            warnings.warn(f"group(s) with {what}: {names}{fix}; code more documents there",
                          GoldWarning, stacklevel=3)


def estimate(pred, gold, by=None, method: str = "ppi", level: float = 0.95, *,
             label_col: str = LABEL_COLUMN, weight_col: str | None = None,
             id_col: str | None = None, target_halfwidth: float | None = None) -> pd.DataFrame:
    """Prevalence of each class (per group of docvars) with a confidence interval.

    Args:
        pred: prediction DataFrame or file of the whole corpus: ``predict``'s or
            ``zeroshot``'s output (``doc_id``, docvars, ``predicted``, ``prob_<class>``) or
            ``annotate``'s codes (``doc_id``, ``label``, ``prob_<label>``, which may be
            missing); see :mod:`quantformer.io.codes`. A document without probabilities is
            predicted by its hard label (the ``note`` says so).
        gold: hand-coded documents, DataFrame or file (``doc_id``, ``label_col``): a random
            sample of ``pred``'s documents.
        by: docvar name(s) (a list or ``"party,decade"``) to estimate within each group.
        method: ``"ppi"`` (prediction-powered inference, PPI++; default), ``"naive"`` (share of
            predicted labels), ``"gold"`` (gold sample alone) or ``"dsl"`` (design-based
            supervised learning, Egami et al. 2023). See the module docstring.
        level: confidence level in (0, 1) (default 0.95).
        label_col: gold label column (default ``label``).
        weight_col: gold column of known inclusion probabilities in (0, 1] when the sample was
            drawn with unequal probabilities (e.g. stratified); documents are weighted by their
            inverse. Default: a simple random sample.
        id_col: document id column of both files (default ``doc_id``).
        target_halfwidth: when given, add ``n_gold_needed`` (hand-coded documents for this
            interval half-width, see :func:`quantformer.measure.planner.gold_needed`).

    Returns:
        DataFrame, one row per group and class: the ``by`` columns, ``class``, ``estimate``,
        ``ci_low``, ``ci_high``, ``method``, ``n_gold``, ``n_total``, ``note`` (which
        predictions were used when some are hard labels, not probabilities; why a row is
        pooled or missing, why its interval is the exact one of agreeing gold codes, why
        ``n_gold_needed`` exceeds the group; empty otherwise), [``n_gold_needed``].

    Raises:
        InputError: bad ``method``/``level``/``by``; see :func:`quantformer.io.gold.join_gold`.

    Warns:
        GoldWarning: groups with no or fewer than 10 gold documents, documents left out.
    """
    method, level = check_method(method), check_level(level)
    pair = join_gold(pred, gold, label_col=label_col, weight_col=weight_col, id_col=id_col)
    by = parse_by(by, list(pair.frame.columns))
    alpha = 1 - level
    records = []
    for key, rows, gold_mask in _groups(pair, by):
        for cls in pair.classes:
            values = _one_class(pair, method, rows, gold_mask, cls, alpha)
            records.append({**key, **dict(zip(["class", "estimate", "ci_low", "ci_high",
                                                "n_gold", "n_total", "note"], (cls, *values)))})
    table = pd.DataFrame(records).assign(method=method)
    table["note"] = [prediction_note(pair, note) for note in table["note"]]
    _warn_groups(table, by, method)
    table = table[by + COLUMNS]
    if target_halfwidth is not None:
        table = add_gold_needed(table, pair, list(_groups(pair, by)), by, target_halfwidth,
                                level, method)
    return table.reset_index(drop=True)


# ------------------------------------------------------------------------------------------
# CLI


