"""One output per document from the outputs of its windows (``truncation="chunks"``).

A document longer than the window is read as overlapping windows
(:func:`quantformer.models.windows.encode_windows`); the model's logits for its windows are
aggregated into the document's logits, then the task's activation applies (softmax, sigmoid,
or for regression the mean output): ``mean`` (default, the mean of the window logits, as in
Pappagari et al. 2019 and Sun et al. 2019's long-text experiments) or ``max`` (the largest
logit of each output over the windows, the strongest window carrying the class).
Training puts the loss on the same aggregate, so the gradient reaches every window of a
document in one step; ``chunk_training="labels"`` instead lets each window inherit its
document's label (simpletransformers' sliding window), the simpler alternative.
"""

from __future__ import annotations

import numpy as np

from .._core.errors import InputError
from .reading import (AGGREGATES, CHUNKS, DEFAULT_AGGREGATE, check_aggregate,  # noqa: F401
                      check_chunk_options, refuse_without_chunks)

CHUNK_TRAINING = ("aggregate", "labels")


def check_chunk_training(chunk_training: str) -> str:
    """Raises: InputError: ``chunk_training`` is not ``aggregate`` or ``labels``."""
    if chunk_training not in CHUNK_TRAINING:
        raise InputError(f"unknown {{chunk_training}} '{chunk_training}'; use aggregate or "
                         "labels", params=["chunk_training"])
    return chunk_training


def check_not_longformer(config, truncation: str) -> None:
    """Refuse chunks with a Longformer (its global attention reads 4,096 tokens at once).

    Raises:
        InputError: ``truncation`` is ``chunks`` and the model is a Longformer or LED.
    """
    if truncation == CHUNKS and getattr(config, "model_type", "") in ("longformer", "led"):
        raise InputError("{truncation} chunks does not go with a Longformer's global "
                         "attention; use {truncation} head_tail with {max_length} 4096 on this "
                         "model, or chunks with a BERT-size model", params=["truncation",
                                                                           "max_length"])


def aggregate_windows(values: np.ndarray, doc: np.ndarray, n_docs: int,
                      how: str = DEFAULT_AGGREGATE) -> np.ndarray:
    """Aggregate window rows into document rows.

    Args:
        values: float array (n_windows, k), e.g. logits.
        doc: the document index of each window, shape (n_windows,), int.
        n_docs: number of documents; a document without windows gets a row of NaN.
        how: ``mean`` or ``max``.

    Returns:
        float64 array (n_docs, k).
    """
    values = np.asarray(values, dtype=np.float64)
    k = values.shape[1] if values.ndim == 2 else 1
    values = values.reshape(len(values), k)
    out = np.full((n_docs, k), np.nan if how == "mean" else -np.inf)
    if how == "mean":
        sums = np.zeros((n_docs, k))
        np.add.at(sums, doc, values)
        counts = np.bincount(doc, minlength=n_docs)[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            out = sums / counts
    else:
        np.maximum.at(out, doc, values)
    out[np.bincount(doc, minlength=n_docs) == 0] = np.nan
    return out


def aggregate_torch(logits, doc, n_docs: int, how: str = DEFAULT_AGGREGATE):
    """:func:`aggregate_windows` on torch tensors, differentiable (for the training loss):
    ``logits`` (n_windows, k), ``doc`` a LongTensor (n_windows,) with values in
    ``range(n_docs)``, every document with at least one window."""
    import torch

    k = logits.shape[1]
    index = doc.unsqueeze(1).expand(-1, k)
    init = torch.zeros(n_docs, k, dtype=logits.dtype, device=logits.device)
    reduce = "mean" if how == "mean" else "amax"
    return init.scatter_reduce(0, index, logits, reduce=reduce, include_self=False)
