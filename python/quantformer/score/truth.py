"""Predictions beside the codes they are scored against: a predictions file joined on
``doc_id`` with a file of true codes (or a column of its own), and the truth of multi-label
predictions as 0/1 per label. ``quantformer evaluate`` and the Python API read them here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.columns import ID_COLUMN, LABEL_COLUMN, PREDICTED_COLUMN, PROB_PREFIX
from ..io.formats import read_table_file
from ..io.frames import as_str_series, warn_numbered, zero_one

from .evaluate import EvaluationWarning, apply_label_map


def need_columns(frame: pd.DataFrame, cols: list, path, fix: str = "",
                 params: list | None = None) -> None:
    """Refuse ``frame`` (read from ``path``) without every column of ``cols``.

    Raises:
        InputError: naming the absent columns and the columns there are.
    """
    absent = [c for c in cols if c not in frame.columns]
    if absent:
        raise InputError(f"'{path}' has no column {', '.join(map(repr, absent))}{fix}; its "
                         f"columns are: {', '.join(map(str, frame.columns))}",
                         params=params or [])


def truth_table(path, id_col: str | None = None, label_col: str | None = None,
                fmt: str | None = None) -> pd.DataFrame:
    """``doc_id`` and ``truth`` (strings) from a file of true codes; ids ``text1..N`` when it
    has no id column (as the corpus reader numbers documents, with the same warning).

    Raises:
        InputError: the file has no ``label_col`` (default ``label``) column.
    """
    raw = read_table_file(path, fmt)
    lcol = label_col or LABEL_COLUMN
    icol = id_col or ID_COLUMN
    if lcol not in raw.columns:
        raise InputError(f"truth file '{path}' has no '{lcol}' column; its columns are: "
                         f"{', '.join(map(str, raw.columns))}. Name it with {{label_col}}",
                         params=["label_col"])
    ids = (as_str_series(raw[icol]) if icol in raw.columns
           else pd.Series([f"text{i + 1}" for i in range(len(raw))], dtype=object))
    if icol not in raw.columns and len(raw):
        warn_numbered(f"truth file '{path}'", len(raw), raw.columns)
    return pd.DataFrame({ID_COLUMN: ids.to_numpy(), "truth": as_str_series(raw[lcol]).to_numpy()})


def join_truth_file(pred_df: pd.DataFrame, pred, truth, *, pred_col: str = PREDICTED_COLUMN,
                    mapping: dict | None = None, id_col: str | None = None,
                    label_col: str | None = None, fmt: str | None = None) -> pd.DataFrame:
    """``doc_id``, ``pred`` (relabelled by ``mapping``), the ``prob_`` columns and ``truth``:
    the predictions ``pred_df`` (read from ``pred``) joined one-to-one with the file ``truth``.

    Warns:
        EvaluationWarning: predictions without a row in ``truth`` (left out).

    Raises:
        InputError: no doc_id column in the predictions, no shared doc_id.
    """
    table = truth_table(truth, id_col, label_col, fmt)
    if ID_COLUMN not in pred_df.columns:
        raise InputError(f"'{pred}' has no doc_id column to join {{truth}} on",
                         params=["truth"])
    left = pd.DataFrame({ID_COLUMN: [str(x) for x in pred_df[ID_COLUMN]],
                         "pred": apply_label_map(pred_df[pred_col], mapping),
                         **{c: pred_df[c].to_numpy() for c in pred_df.columns
                            if str(c).startswith(PROB_PREFIX)}})
    joined = left.merge(table, on=ID_COLUMN, how="inner", validate="one_to_one")
    if len(joined) == 0:
        raise InputError(f"no doc_id of '{pred}' is in '{truth}'; check {{id_col}}",
                         params=["id_col"])
    if len(joined) < len(left):
        warnings.warn(f"{len(left) - len(joined)} prediction(s) have no row in "
                      f"'{truth}' and are left out", EvaluationWarning)
    return joined


def pred_with_truth(pred, truth, truth_cols: list, pred_cols: list,
                    id_col: str | None = None) -> pd.DataFrame:
    """The predictions file ``pred``, with ``truth_cols`` from the file ``truth`` joined on
    doc_id when ``truth`` is given (else they must be columns of ``pred``).

    Raises:
        InputError: a missing file or column, no doc_id, no shared doc_id.
    """
    frame = read_table_file(pred)
    if truth:
        table = read_table_file(truth)
        need_columns(table, truth_cols, truth)
        icol = id_col or ID_COLUMN
        need_columns(table, [icol], truth, " (name it with {id_col})", params=["id_col"])
        need_columns(frame, [ID_COLUMN], pred)
        right = table[truth_cols].assign(doc_id=as_str_series(table[icol]).to_numpy())
        left = frame.drop(columns=[c for c in truth_cols if c in frame.columns])
        left = left.assign(doc_id=as_str_series(left[ID_COLUMN]).to_numpy())
        frame = left.merge(right, on=ID_COLUMN, how="inner", validate="one_to_one")
        if len(frame) == 0:
            raise InputError(f"no doc_id of '{pred}' is in '{truth}'; check {{id_col}}",
                             params=["id_col"])
    need_columns(frame, pred_cols + truth_cols, pred)
    return frame


def zero_one_truth(frame: pd.DataFrame, cols: list) -> np.ndarray:
    """Documents x labels of 0/1 from one column per label; NaN rows where one is missing."""
    truth = np.column_stack([zero_one(frame[c].astype(object).where(frame[c].notna(), "0"), c)
                             for c in cols]).astype(float)
    truth[frame[cols].isna().any(axis=1).to_numpy()] = np.nan
    return truth


def delimited_truth(values: pd.Series, labels: list, sep: str) -> np.ndarray:
    """Documents x labels of 0/1 from one column of delimited labels; NaN rows where missing."""
    sets = [None if pd.isna(v) else {x.strip() for x in str(v).split(sep)} for v in values]
    return np.array([[np.nan] * len(labels) if s is None else
                     [float(lab in s) for lab in labels] for s in sets]).reshape(-1, len(labels))


def bool_column(values: pd.Series) -> pd.Series:
    """True/False/missing from a predicted_<label> column (booleans, 0/1 or true/false)."""
    text = values.astype(str).str.strip().str.lower()
    out = pd.Series(np.nan, index=values.index)
    out[text.isin(["true", "1", "1.0"])] = 1.0
    out[text.isin(["false", "0", "0.0"])] = 0.0
    return out
