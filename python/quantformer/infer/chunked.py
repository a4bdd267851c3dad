"""Prediction settings of documents read in windows (``truncation="chunks"``): those a model
was fine-tuned with (its record), those a caller asks for at prediction, and the
one-row-per-window output (``chunks_out``). The windows and their aggregation are
:mod:`quantformer.models.windows` and :mod:`quantformer.models.chunks`."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pandas as pd

from .._core.errors import InputError, ParamWarning
from ..io.writable import check_output_file
from ..models.chunks import check_not_longformer
from ..models.reading import CHUNKS, TRUNCATIONS, Reading, check_strategy


class ChunkingWarning(ParamWarning):
    """Prediction reads documents otherwise than the model was fine-tuned to."""


def chunking_of(hp: dict) -> tuple:
    """``(stride, max_chunks, aggregate)`` recorded in a model's hyperparameters (None,
    None, ``mean`` when not recorded): those of
    :meth:`~quantformer.models.reading.Reading.from_record`."""
    reading = Reading.from_record(hp)
    return reading.stride, reading.max_chunks, reading.aggregate_or_default


def with_chunking(clf, truncation: str | None = None, stride: int | None = None,
                  max_chunks: int | None = None, aggregate: str | None = None):
    """A copy of classifier ``clf`` reading documents as asked (None: as trained): its
    :attr:`~quantformer.infer.classifier.Classifier.reading` replaced.

    A ``truncation`` other than the training one warns, naming both.

    Raises:
        InputError: an unknown ``truncation`` or ``aggregate``; ``stride``, ``max_chunks`` or
            ``aggregate`` without chunks; a bad ``stride``/``max_chunks``; chunks with a
            Longformer; chunks with a model that cannot read windows (NLI, SetFit, ONNX).
    """
    if truncation is None and stride is None and max_chunks is None and aggregate is None:
        return clf
    trained = clf.reading
    use = trained.truncation if truncation is None else check_strategy(truncation, TRUNCATIONS)
    asked = trained.replace(truncation=use, stride=stride, max_chunks=max_chunks,
                            aggregate=aggregate)
    if asked.chunks:  # first: its message gives the window's size in tokens
        asked.check_window(clf.window_budget(), model_window=True)
    asked.check()
    if asked.chunks:
        _check_can_window(clf, aggregate)
    same = use == trained.truncation
    if not same:
        warnings.warn(ChunkingWarning(
            f"the model was fine-tuned with {{truncation}} {trained.truncation} and predicts "
            f"with {use}: its outputs may differ from what validation measured",
            params=["truncation"]), stacklevel=2)
    out = copy.copy(clf)
    out.reading = asked.replace(
        stride=stride if stride is not None else (trained.stride if same else None),
        max_chunks=max_chunks if max_chunks is not None else (
            trained.max_chunks if same else None),
        aggregate=aggregate or clf.aggregate)
    return out


def check_reading_request(reading: Reading, chunks_out=None) -> Reading:
    """The reading of ``embed`` and ``zeroshot`` checked before any model loads
    (:meth:`~quantformer.models.reading.Reading.check`), with ``chunks_out``; returns
    ``reading``.

    Raises:
        InputError: an unknown ``truncation`` or ``aggregate``; window settings or
            ``chunks_out`` without chunks; ``stride`` < 0; ``max_chunks`` < 1; an unwritable
            ``chunks_out``.
    """
    reading.check()
    if chunks_out is not None:
        if not reading.chunks:
            raise InputError("{chunks_out} writes one row per window; add {truncation} chunks",
                             params=["chunks_out", "truncation"])
        check_output_file(chunks_out, param="chunks_out")
    return reading


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
