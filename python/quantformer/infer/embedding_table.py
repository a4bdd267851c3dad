"""The tables of embeddings the ``embed`` verb writes: one row per document (or per window,
``chunks_out``), the vector as one list column or one column per dimension."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.formats import detect_format

LAYOUTS = ("auto", "list", "wide")
EMBEDDING_COL = "embedding"
DIM_PREFIX = "dim_"


def embedding_frame(frame: pd.DataFrame, vectors: np.ndarray, layout: str = "list",
                    keep_text: bool = False, backend: str | None = None) -> pd.DataFrame:
    """A table of embeddings: ``doc_id``, [``text``], the other input columns, [``backend``
    (``torch``, ``onnx fp32`` or ``onnx int8``; the CLI always gives it)], then either one
    list column ``embedding`` (``layout="list"``; None for missing documents) or one float32
    column per dimension ``dim_1 .. dim_<hidden>`` (``layout="wide"``; NaN for missing)."""
    if layout not in ("list", "wide"):
        raise InputError(f"unknown {{layout}} '{layout}'; use one of: {', '.join(LAYOUTS)}",
                         params=["layout"])
    cols = [c for c in frame.columns if keep_text or c != "text"]
    out = frame[cols].copy()
    if backend is not None:
        out["backend"] = backend
    if layout == "list":
        out[EMBEDDING_COL] = [None if np.isnan(v).all() else v for v in vectors]
    else:
        wide = pd.DataFrame(vectors, columns=[f"{DIM_PREFIX}{j + 1}"
                                              for j in range(vectors.shape[1])])
        out = pd.concat([out.reset_index(drop=True), wide], axis=1)
    return out


def resolve_layout(layout: str, out_path) -> str:
    """``auto``: a list column for Parquet and JSONL, one column per dimension for CSV, TSV and
    RDS (which have no list columns R reads back as numbers)."""
    if layout not in LAYOUTS:
        raise InputError(f"unknown {{layout}} '{layout}'; use one of: {', '.join(LAYOUTS)}",
                         params=["layout"])

    kind = detect_format(out_path, write=True)
    if layout == "list" and kind in ("csv", "tsv"):
        raise InputError(f"{{layout}} list cannot be written to {kind.upper()} (no list "
                         "columns); use {layout} wide (one column per dimension) or a .parquet "
                         "output", params=["layout"])
    if layout != "auto":
        return layout
    return "list" if kind in ("parquet", "jsonl") else "wide"


def window_embedding_frame(frame: pd.DataFrame, windows, vectors: np.ndarray,
                           layout: str) -> pd.DataFrame:
    """One row per window (``chunks_out``): ``doc_id``, ``chunk`` (from 0), ``start``,
    ``end`` (characters of the document's text, ``text[start:end]``), then the window's own
    embedding as in :func:`embedding_frame` (a list column or ``dim_`` columns)."""
    rows = pd.DataFrame({"doc_id": frame["doc_id"].to_numpy()[windows.doc],
                         "chunk": windows.chunk, "start": windows.start, "end": windows.end})
    return embedding_frame(rows, vectors, layout)
