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
from ..io.writable import check_output_file
from ..models.chunks import DEFAULT_AGGREGATE, check_chunk_options, check_not_longformer
from ..models.tokenize import CHUNKS, TRUNCATIONS, check_strategy, check_windows


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
    if use == CHUNKS:  # first: its message gives the window's size in tokens
        check_windows(clf.window_budget(), stride, max_chunks, clf.max_length,
                      model_window=True)
    check_chunk_options(use, stride, max_chunks, aggregate)
    if use == CHUNKS:
        _check_can_window(clf, aggregate)
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


def check_chunk_request(truncation: str, stride: int | None, max_chunks: int | None,
                        aggregate: str | None, chunks_out) -> None:
    """The window settings of ``embed`` and ``zeroshot`` checked before any model loads.

    Raises:
        InputError: an unknown ``truncation`` or ``aggregate``; window settings or
            ``chunks_out`` without chunks; ``stride`` < 0; ``max_chunks`` < 1; an unwritable
            ``chunks_out``.
    """
    check_strategy(truncation, TRUNCATIONS)
    check_chunk_options(truncation, stride, max_chunks, aggregate)
    if chunks_out is not None:
        if truncation != CHUNKS:
            raise InputError("{chunks_out} writes one row per window; add {truncation} chunks",
                             params=["chunks_out", "truncation"])
        check_output_file(chunks_out, param="chunks_out")


def _check_can_window(clf, aggregate: str | None) -> None:
    if not clf.reads_windows():
        raise InputError("{truncation} chunks is not offered for this kind of model",
                         params=["truncation"])
    if aggregate is not None and clf.record.get("method") == "setfit":
        raise InputError("{aggregate} does not apply to a SetFit model: the mean of its "
                         "windows' embeddings goes into the logistic head; leave it out",
                         params=["aggregate"])
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
