"""Preparing the training data: missing labels and texts, the validation split, oversampling,
length-grouped batches and seeding.

Batches are length-grouped: indices are shuffled, cut into mega-batches of 50 batches, sorted
by length inside each, cut into batches, and the batch order shuffled; each batch is padded
only to its own longest document (about 2 % padding instead of ~80 % for random batches).
"""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..models.tasks import TrainingWarning
from ..models.tokenize import is_missing
from ..models.arguments import check_ratio

MEGABATCH = 50


def oversample_indices(labels, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Random oversampling: every class smaller than ``ratio`` x the largest class is topped up
    with documents drawn with replacement until it has ``ceil(ratio * largest)`` documents
    (Wankmüller 2022, section 6.4; the paper uses 0.25).

    Args:
        labels: array (n,) of class labels (training data only).
        ratio: target minority:majority ratio in (0, 1].
        rng: NumPy generator (seeded).

    Returns:
        int64 indices into ``labels``: all originals in order, then the added duplicates.

    Raises:
        InputError: ``ratio`` outside (0, 1].
    """
    check_ratio(ratio, "oversample")
    labels = np.asarray(labels, dtype=object)
    classes, counts = np.unique(labels, return_counts=True)
    target = int(math.ceil(ratio * counts.max()))
    extra = []
    for c, n in zip(classes, counts):
        if n < target:
            members = np.flatnonzero(labels == c)
            extra.append(rng.choice(members, size=target - n, replace=True))
    return np.concatenate([np.arange(len(labels)), *extra]).astype(np.int64)


def length_grouped_batches(lengths, batch_size: int, rng: np.random.Generator) -> list:
    """Batches of similar length in a random order (one epoch).

    Returns:
        A list of int64 index arrays.
    """
    lengths = np.asarray(lengths)
    perm = rng.permutation(len(lengths))
    mega = batch_size * MEGABATCH
    batches = []
    for s in range(0, len(perm), mega):
        chunk = perm[s:s + mega]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators."""
    import torch

    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def prepare(frame: pd.DataFrame, what: str, task) -> tuple[pd.DataFrame, int, int]:
    """Drop rows with a missing label or text; return (kept, n_missing_label, n_missing_text).

    Raises:
        InputError: not a corpus frame, no label column (named by the task), bad label values.
    """
    if not isinstance(frame, pd.DataFrame) or "text" not in frame.columns:
        raise InputError(f"the {what} data must be a corpus frame with 'text' and 'label' "
                         "columns (see quantformer.read_frame)")
    no_label = task.missing_labels(frame, what)
    no_text = np.array([is_missing(t) for t in frame["text"]], dtype=bool) & ~no_label
    mask = ~no_label & ~no_text
    kept = task.clean(frame.loc[mask].copy(), frame, mask)
    return kept.reset_index(drop=True), int(no_label.sum()), int(no_text.sum())


def split_valid(frame: pd.DataFrame, fraction: float, seed: int, strata=None):
    """Hold out ``fraction`` of the rows (stratified by ``strata`` when every class has two
    documents); returns (train, valid), each in the original row order."""
    from sklearn.model_selection import train_test_split

    n_valid = max(1, int(round(fraction * len(frame))))
    if n_valid >= len(frame) - 1:
        raise InputError(f"{{valid_fraction}} {fraction} leaves no training data; use a "
                         "smaller fraction", params=["valid_fraction"])
    if strata is not None:
        counts = strata.value_counts()
        if counts.min() < 2 or n_valid < len(counts):
            strata = None
    tr, va = train_test_split(np.arange(len(frame)), test_size=n_valid, random_state=seed,
                              stratify=strata)
    return (frame.iloc[np.sort(tr)].reset_index(drop=True),
            frame.iloc[np.sort(va)].reset_index(drop=True))


def training_data(frame, valid, valid_fraction: float, seed: int, task, say):
    """The prepared training and validation frames (validation ``None`` when there is none).

    Raises:
        InputError: no usable training or validation document, a split leaving nothing.
    """
    data, n_missing_label, n_missing_text = prepare(frame, "training", task)
    if n_missing_label:
        say(f"left out {n_missing_label} document(s) with a missing label")
    if n_missing_text:
        warnings.warn(f"{n_missing_text} labelled document(s) have a missing or empty text and "
                      "are left out of training", TrainingWarning, stacklevel=3)
    if len(data) == 0:
        raise InputError("the training set is empty: no document has both a text and a label")
    valid_data = None
    if valid is None and valid_fraction > 0:
        data, valid_data = split_valid(data, valid_fraction, seed, task.strata(data))
    elif valid is not None:
        valid_data, _, _ = prepare(valid, "validation", task)
        if len(valid_data) == 0:
            raise InputError("the validation set has no document with both a text and a label")
    counts = {"n_missing_label": n_missing_label, "n_missing_text": n_missing_text}
    return data, valid_data, counts
