"""Prediction settings of documents read in windows (``truncation="chunks"``): those a model
was fine-tuned with (its record), those a caller asks for at prediction, and the
one-row-per-window output (``chunks_out``). The windows and their aggregation are
:mod:`quantformer.models.tokenize` and :mod:`quantformer.models.chunks`."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pandas as pd

from .._core.errors import InputError, ParamWarning
from ..models.chunks import DEFAULT_AGGREGATE, check_aggregate, check_not_longformer
from ..models.tokenize import CHUNKS, TRUNCATIONS, check_strategy, check_windows, special_template


class ChunkingWarning(ParamWarning):
    """Prediction reads documents otherwise than the model was fine-tuned to."""


def chunking_of(hp: dict) -> tuple:
    """``(stride, max_chunks, aggregate)`` recorded in a model's hyperparameters (None,
    None, ``mean`` when not recorded)."""
    return hp.get("stride"), hp.get("max_chunks"), hp.get("aggregate") or DEFAULT_AGGREGATE


def with_chunking(clf, truncation: str | None = None, stride: int | None = None,
                  max_chunks: int | None = None, aggregate: str | None = None):
    """A copy of classifier ``clf`` reading documents as asked (None: as trained).

    A ``truncation`` other than the training one warns, naming both.

    Raises:
        InputError: an unknown ``truncation`` or ``aggregate``; ``stride``, ``max_chunks`` or
            ``aggregate`` without chunks; a bad ``stride``/``max_chunks``; chunks with a
            Longformer; chunks with a model that cannot read windows (NLI, SetFit, ONNX).
    """
    if truncation is None and stride is None and max_chunks is None and aggregate is None:
        return clf
    trained = clf.truncation
    use = trained if truncation is None else check_strategy(truncation, TRUNCATIONS)
    if use != CHUNKS and (stride, max_chunks, aggregate) != (None, None, None):
        raise InputError("{stride}, {max_chunks} and {aggregate} apply to {truncation} chunks "
                         "only; add it or leave them out",
                         params=["stride", "max_chunks", "aggregate", "truncation"])
    if aggregate is not None:
        check_aggregate(aggregate)
    if use == CHUNKS:
        _check_can_window(clf)
        check_windows(clf.max_length - special_template(clf.tokenizer).n_single, stride,
                      max_chunks, clf.max_length)
    if use != trained:
        warnings.warn(ChunkingWarning(
            f"the model was fine-tuned with {{truncation}} {trained} and predicts with "
            f"{use}: its outputs may differ from what validation measured",
            params=["truncation"]), stacklevel=2)
    out = copy.copy(clf)
    out.truncation = use
    out.stride = stride if stride is not None else (clf.stride if use == trained else None)
    out.max_chunks = max_chunks if max_chunks is not None else (
        clf.max_chunks if use == trained else None)
    out.aggregate = aggregate or clf.aggregate
    return out


def _check_can_window(clf) -> None:
    if not clf.reads_windows():
        raise InputError("{truncation} chunks is offered for classifiers fine-tuned the "
                         "standard way only, not yet for NLI or SetFit models",
                         params=["truncation"])
    if getattr(clf.model, "backend", "torch") == "onnx":
        raise InputError("{backend} onnx does not read documents in windows yet; use "
                         "{backend} torch with {truncation} chunks",
                         params=["backend", "truncation"])
    check_not_longformer(clf.model.config, CHUNKS)


def window_frame(frame: pd.DataFrame, enc, probs, task) -> pd.DataFrame:
    """One row per window: ``doc_id``, ``chunk`` (from 0), ``start``, ``end`` (characters of
    the document's text, ``text[start:end]``), then ``task.columns`` of the window alone
    (for classification ``predicted`` and ``prob_<label>``)."""
    if enc is None:
        cols = {"doc_id": [], "chunk": [], "start": [], "end": []}
        return pd.DataFrame(cols)
    out = {"doc_id": frame["doc_id"].to_numpy()[enc.doc], "chunk": enc.chunk,
           "start": enc.start, "end": enc.end}
    out.update(task.columns(probs, np.zeros(len(enc.doc), dtype=bool)))
    return pd.DataFrame(out)
