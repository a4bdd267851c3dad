"""int8 prediction with an fp32 recheck of near-ties (issue 16).

Dynamic int8 quantization perturbs a classifier's probabilities a little (on the Abortion
pool tweets by at most 0.07, 99 % of documents by under 0.05), so the labels it changes are
mostly those of documents near a decision boundary (not all: on the Abortion test tweets two
of the four it changed had int8 margins of 0.11 and 0.18). :class:`Recheck` predicts every document with the
int8 graph, then predicts again with the fp32 graph only the documents whose int8 top-two
probability margin is below :data:`RECHECK_MARGIN`, and keeps the fp32 probabilities for
them. This is a confidence cascade (the cheap model first, the exact one where the cheap one
is unsure: Viola & Jones 2001; for quantized networks, e.g. the "big-little" scheme of
Park et al. 2015, "Big/little deep neural network for ultra low power inference").

The margin 0.05 was chosen on the 653 Abortion *training* tweets (not on a test set): there
it caught all 5 labels int8 changed, rechecking 1.1 % of the documents. Rows rechecked carry
the backend ``onnx fp32 recheck`` in the output's ``backend`` column, the others ``onnx
int8``. ``bench/RESULTS.md`` ("ONNX Runtime and int8 inference") has the agreement and speed.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from ..._core.errors import InputError

__all__ = ["RECHECK_MARGIN", "RECHECK_LABEL", "Recheck", "check_margin", "near_ties"]

#: int8 top-two probability margin under which a document is predicted again in fp32
RECHECK_MARGIN = 0.05
#: the ``backend`` value of rows whose probabilities come from the fp32 recheck
RECHECK_LABEL = "onnx fp32 recheck"


def check_margin(margin) -> float:
    """``margin`` as a float in [0, 1) (0 turns the recheck off).

    Raises:
        InputError: not a number in [0, 1).
    """
    try:
        value = float("nan") if isinstance(margin, (str, bool)) else float(margin)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0 <= value < 1:
        raise InputError(f"recheck_margin must be a number from 0 (no recheck) to below 1, "
                         f"not {margin!r}; the default is {RECHECK_MARGIN}")
    return value


def near_ties(probs: np.ndarray, margin: float) -> np.ndarray:
    """Boolean mask of the rows whose top-two probability margin is below ``margin``
    (rows of NaN, i.e. missing texts, are never near ties)."""
    if probs.shape[1] < 2 or margin <= 0:
        return np.zeros(len(probs), dtype=bool)
    top2 = np.sort(np.nan_to_num(probs, nan=0.0), axis=1)[:, -2:]
    return ~np.isnan(probs).any(axis=1) & (top2[:, 1] - top2[:, 0] < margin)


class Recheck:
    """The fp32 second pass of an int8 classifier.

    Args:
        margin: see :data:`RECHECK_MARGIN` (float in [0, 1); 0: no recheck).
        load_fp32: returns the fp32 ONNX model; called on the first near tie only.
    """

    def __init__(self, margin: float, load_fp32: Callable):
        self.margin = check_margin(margin)
        self._load = load_fp32
        self._fp32 = None
        self._lock = threading.Lock()  # Dask worker threads may share one classifier

    def __call__(self, proba: Callable, texts: list, probs: np.ndarray) -> np.ndarray:
        """Replace, in place, the near ties' rows of ``probs`` with fp32 probabilities
        (``proba(model, texts) -> probs``); returns the mask of the rows replaced."""
        mask = near_ties(probs, self.margin)
        if mask.any():
            with self._lock:
                if self._fp32 is None:
                    self._fp32 = self._load()
            idx = np.flatnonzero(mask)
            probs[idx] = proba(self._fp32, [texts[i] for i in idx])
        return mask
