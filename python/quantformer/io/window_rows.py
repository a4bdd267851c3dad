"""The one-row-per-window file of documents read whole in windows (``truncation="chunks"``,
``chunks_out``): each window's character span and its own scores, written atomically in the
format of the path's extension (:func:`quantformer.io.writing.write_frame`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from .columns import PREDICTED_COLUMN
from .writing import write_frame

#: the columns that place a window: its document, its number (from 0) and its characters
WINDOW_COLUMNS = ("doc_id", "chunk", "start", "end")


def window_rows(doc_ids, windows, probs: np.ndarray, labels, columns) -> pd.DataFrame:
    """One row per window: ``doc_id``, ``chunk``, ``start``, ``end`` (characters of the
    document's text, ``text[start:end]``), ``predicted`` (the label of the window's highest
    score) and the window's score of each label.

    Args:
        doc_ids: the documents' ids, indexed by the windows' ``doc``.
        windows: the :class:`~quantformer.models.tokenize.Windows` (``doc``, ``chunk``,
            ``start``, ``end``), or None when no document had a text.
        probs: float (n_windows, n_labels).
        labels: the label names, in column order.
        columns: the score columns' names, one per label (``prob_<label>``).
    """
    columns = list(columns)
    if windows is None:
        return pd.DataFrame(columns=[*WINDOW_COLUMNS, PREDICTED_COLUMN, *columns])
    out = pd.DataFrame({"doc_id": np.asarray(doc_ids)[windows.doc], "chunk": windows.chunk,
                        "start": windows.start, "end": windows.end})
    out[PREDICTED_COLUMN] = (np.asarray(labels, dtype=object)[probs.argmax(axis=1)] if len(probs)
                        else np.zeros(0, dtype=object))
    for j, col in enumerate(columns):
        out[col] = probs[:, j] if len(probs) else np.zeros(0)
    return out


def write_window_rows(path: str | os.PathLike, doc_ids, windows, probs: np.ndarray, labels,
                      columns) -> Path:
    """Write :func:`window_rows` to ``path`` (format from the extension).

    Returns:
        The path written.

    Raises:
        InputError: an unknown output format.
    """
    return write_frame(window_rows(doc_ids, windows, probs, labels, columns), path)
