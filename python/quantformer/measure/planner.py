"""Sample-size planning: how many hand-coded documents give a chosen interval half-width.

From a pilot gold sample, as ``dsl::power_dsl()`` does for design-based supervised learning
(Egami et al. 2023): the variance of the estimator is estimated on the pilot and solved for the
gold sample size ``n`` that makes the normal interval's half-width ``z * se`` equal the target.

* ``gold``: ``se^2 = Var(Y) / n`` (Y the 0/1 code; weighted when the pilot is weighted).
* ``ppi``: PPI++ with its power-tuning parameter (Angelopoulos, Duchi & Zrnic 2023, eq. 4 for
  the mean) ``se^2 = Var(Y - lam * f) / n + lam^2 Var(f) / N`` with ``f`` the prediction and
  ``N`` the corpus size, ``lam = Cov(Y, f) / ((1 + n/N) Var(f))`` estimated on the pilot. When
  the second term alone exceeds the target, no ``n`` reaches it (missing).
* ``naive``: not planned (its interval does not depend on the gold sample).

The answer is the total gold sample size (pilot included); subtract ``n_gold`` for "how many
more". It is a plan, as good as the pilot's variance estimates. When it exceeds the documents
of the corpus (or group), the row's ``note`` says that the corpus has only that many: coding
all of them is the most one can do (their share is then known without sampling error).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._core.errors import InputError


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1 - (1 - level) / 2))


def _wvar(x: np.ndarray, w: np.ndarray) -> float:
    mean = np.average(x, weights=w)
    return float(np.average((x - mean) ** 2, weights=w))


def gold_needed(y: np.ndarray, f_gold: np.ndarray, f_all: np.ndarray, w: np.ndarray,
                halfwidth: float, level: float = 0.95, method: str = "ppi") -> float:
    """Gold documents for an interval of half-width ``halfwidth`` (NaN when unreachable).

    Args:
        y: pilot codes (0/1) of one class; ``f_gold``: the predictions of those documents;
        f_all: the predictions of every document of the (group of the) corpus.
        w: pilot weights (1 / inclusion probability).
        halfwidth: target half-width, in proportion units (0.02 = 2 percentage points).
        level: confidence level; method: ``ppi`` or ``gold``.
    """
    if not 0 < halfwidth < 1:
        raise InputError(f"target half-width must be in (0, 1) such as 0.02, not {halfwidth}")
    z2h = (_z(level) / halfwidth) ** 2
    if len(y) < 2:
        return math.nan
    if method == "gold" or np.var(f_all) == 0:
        return float(math.ceil(max(z2h * _wvar(y, w), 1)))
    n, big_n = len(y), len(f_all)
    cov = np.cov(y, f_gold, aweights=w)[0, 1]
    lam = cov / ((1 + n / big_n) * np.var(f_all))
    left = 1 / z2h - lam ** 2 * np.var(f_all) / big_n
    if left <= 0:
        return math.nan
    return float(math.ceil(max(_wvar(y - lam * f_gold, w) / left, 1)))


def add_gold_needed(table: pd.DataFrame, pair, groups: list, by: list, halfwidth: float,
                    level: float, method: str) -> pd.DataFrame:
    """Add ``n_gold_needed`` to an :func:`quantformer.measure.prevalence` table (NaN for ``naive``).

    A row whose ``n_gold_needed`` exceeds its group's documents gets a ``note`` saying so.
    """
    needed, notes = [], []
    whose = "this group" if by else "the corpus"
    for _key, rows, gold in groups:
        for cls in pair.classes:
            if method == "naive" or not gold.any():
                needed.append(math.nan)
                notes.append("")
                continue
            f = pair.column(cls)
            needed.append(gold_needed(pair.indicator(cls)[gold], f[pair.gold_rows[gold]],
                                      f[rows], pair.gold_weights[gold], halfwidth, level,
                                      method))
            notes.append(f"n_gold_needed ({needed[-1]:.0f}) is more than the {len(rows)} "
                         f"documents {whose} has: coding all "
                         "of them is the most one can do"
                         if needed[-1] > len(rows) else "")
    note = ["; ".join(filter(None, pair_)) for pair_ in zip(table["note"], notes)]
    return table.assign(n_gold_needed=needed, note=note)
