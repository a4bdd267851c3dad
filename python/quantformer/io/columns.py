"""The corpus frame's columns: their names, and the checks of what a column holds.

The names every layer writes and reads (:data:`ID_COLUMN`, :data:`TEXT_COLUMN`,
:data:`LABEL_COLUMN`; the outputs' :data:`PREDICTED_COLUMN`, :func:`prob_column`,
:data:`PREDICTED_PREFIX` and :data:`BACKEND_COLUMN`) have their one home here, beside the
checks that :mod:`quantformer.io.frames` applies when it reads a table into a corpus frame:
which column is the text, the labels and the ids, ids given by position (``text1..N``, as
``quanteda::corpus()`` names them), ids repeated across chunks, a text column of numbers, 0/1
label columns.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError, ParamWarning
from .formats import EXTENSIONS, FrameWarning

ID_COLUMN = "doc_id"  # the column read as ids unless ``id_col`` names another
#: the column read as the documents' text unless ``text_col`` names another
TEXT_COLUMN = "text"
#: the column of labels (read unless ``label_col`` names another; written by every output)
LABEL_COLUMN = "label"
#: the column of an output's predicted label (or value, for a regression model)
PREDICTED_COLUMN = "predicted"
#: the prefix of an output's probability columns, one a label (:func:`prob_column`)
PROB_PREFIX = "prob_"
#: the prefix of a multi-label output's 0/1 columns, one a label (``predicted_<label>``)
PREDICTED_PREFIX = "predicted_"
#: the column that says which backend and precision computed each output row
BACKEND_COLUMN = "backend"
#: the column of a machine coder's codes that says what became of each document (``coded``,
#: ``unparsed``, ``failed``, ``empty``), and the column saying why when it was not coded
STATUS_COLUMN = "status"
REASON_COLUMN = "reason"


def prob_column(label) -> str:
    """The name of the probability column of ``label`` in an output: ``prob_<label>``."""
    return f"{PROB_PREFIX}{label}"


def with_docvars(out: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """``out`` (an output's rows, in the order of ``frame``) with the docvars of the corpus
    frame ``frame`` after its own columns: every column but the ids and the text, dtypes kept
    (categories, nullable ints); a docvar named like one of ``out``'s columns is left out."""
    for c in frame.columns:
        if c not in (ID_COLUMN, TEXT_COLUMN) and c not in out.columns:
            out[c] = frame[c].array
    return out


def as_str_series(s: pd.Series) -> pd.Series:
    """Strings, with missing values as None; integral floats lose their '.0' (1.0 -> '1')."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    if pd.api.types.is_float_dtype(s.dtype):
        vals = s.to_numpy(dtype="float64", na_value=np.nan)
        finite = vals[~np.isnan(vals)]
        if finite.size and np.all(finite == np.round(finite)):
            s = pd.Series(pd.array(vals, dtype="Int64"), index=s.index)
    out = [None if (v is None or (not isinstance(v, str) and pd.isna(v))) else str(v) for v in s]
    return pd.Series(out, index=s.index, dtype=object)


def numbered(columns, id_col: str | None) -> bool:
    """Whether a table with ``columns`` gets the default ids ``text1..N`` (no ``id_col`` given
    and no ``doc_id`` column)."""
    return id_col is None and ID_COLUMN not in [str(c) for c in columns]


ID_LIKE = ("id", "docid", "doc_id", "docname", "docname_", "document", "document_id")


def warn_numbered(source: str, n: int | None = None, columns=(), lines: bool = False) -> None:
    """Say that the documents of ``source`` are named ``text1..N`` by position: one warning
    a run (Python's default filter shows a text once from this line; the CLI prints it as one
    line, and R as an R warning naming its argument). A column of ``columns`` whose name looks
    like ids (``id``, ``docname``, ...) is named as the likely fix; ``lines``: a text file of
    one document a line, which has no place for ids (the fix is a file with a ``doc_id``
    column)."""
    count = f"its {n} documents are" if n is not None else "its documents are"
    if lines:
        warnings.warn(ParamWarning(
            f"{source} is one document a line, without ids: {count} named text1..textN by "
            "their line, as quanteda names them. To keep ids of your own, give a CSV or TSV "
            f"file with a '{ID_COLUMN}' column and a 'text' column", params=[]), stacklevel=2)
        return
    like = [str(c) for c in columns if str(c).lower() in ID_LIKE]
    fix = (f"; if the column '{like[0]}' holds them, pass it as {{id_col}}" if like else "")
    warnings.warn(ParamWarning(
        f"{source} has no id column ('{ID_COLUMN}', the column read as document ids unless "
        f"{{id_col}} names another): {count} named text1..textN by their position, as "
        "quanteda names them. To keep ids of your own, name their column with {id_col}" + fix,
        params=["id_col"]), stacklevel=2)


def choose_column(columns: list[str], given: str | None, default: str, what: str, param: str,
                  path, required: bool) -> str | None:
    """The column of ``columns`` that holds ``what``: ``given``, else ``default`` when there
    is one (``required``: else an error naming the parameter ``param``).

    Raises:
        InputError: ``given`` is not a column; no ``default`` column where ``required``.
    """
    if given is not None:
        if given not in columns:
            hint, hint_params = _file_for_column_hint(given, what, param)
            raise InputError(
                f"{what} column '{given}' is not in {path}; its columns are: "
                f"{', '.join(map(str, columns))}. Pass the right name with {{{param}}}" + hint,
                params=[param, *hint_params]
            )
        return given
    if default in columns:
        return default
    if required:
        raise InputError(
            f"{path} has no '{default}' column; its columns are: "
            f"{', '.join(map(str, columns))}. Name the {what} column with {{{param}}}",
            params=[param]
        )
    return None


def looks_like_file(name: str) -> bool:
    """Whether a column name given by the user looks like a file (a known extension, or a file)."""
    return Path(name).suffix.lower() in EXTENSIONS or Path(name).is_file()


def _file_for_column_hint(given: str, what: str, param: str) -> tuple[str, list[str]]:
    """The fix when a file name was given to a column parameter (e.g. ``label_col =
    "labels.txt"``): the text (parameters as fields) and the parameters it names."""
    if not looks_like_file(given):
        return "", []
    if param == "label_col":
        return ((f". '{given}' looks like a file: {{{param}}} takes a column name; for labels "
                 "in a file of their own (one a line, in document order) pass {labels_file} "
                 f"{given}"), ["labels_file"])
    return ((f". '{given}' looks like a file: {{{param}}} takes a column name; give the corpus "
             "file with {input} (or {train}), and labels in a file of their own with "
             "{labels_file}"), ["input", "train", "labels_file"])


def check_text_type(s: pd.Series, column: str, source: str) -> None:
    """Warn when the text column holds numbers or booleans: usually a wrong ``--text-col``."""
    if pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_numeric_dtype(s.dtype):
        warn_text_type(f"{s.dtype} values", column, source)
    elif numeric_strings(s):
        warn_text_type("only numbers", column, source)


def numeric_strings(s: pd.Series) -> bool | None:
    """Whether the strings of ``s`` are all numbers (None: it has no strings)."""
    present = s.dropna()
    present = present[[isinstance(v, str) for v in present]]
    if present.empty:
        return None
    return not (pd.to_numeric(present.head(1000), errors="coerce").isna().any()
                or pd.to_numeric(present, errors="coerce").isna().any())


def warn_text_type(kind: str, column: str, source: str) -> None:
    """The warning that the text column of ``source`` holds ``kind``, not text."""
    warnings.warn(
        f"the text column '{column}' of {source} holds {kind}, not text; they are used as "
        "strings. If it is not the text, name the text column with --text-col",
        FrameWarning, stacklevel=5)


def duplicate_ids_error(source: str, dups: list[str]) -> InputError:
    """The error for the ids ``dups`` repeated in ``source`` (the first five shown)."""
    shown = list(dict.fromkeys(dups))[:5]
    return InputError(
        f"doc_ids must be unique, but {source} repeats {len(dups)} id(s), first: "
        f"{', '.join(map(repr, shown))}. Make them unique or pass another {{id_col}}",
        params=["id_col"]
    )


class SeenIds:
    """The doc_ids of the chunks read so far, for the uniqueness check across chunks.

    Stored as 64-bit hashes in sorted NumPy runs: 8 bytes per document instead of about 120
    for a set of strings, so that streaming a corpus of millions of documents does not make
    memory grow with it. A run is merged with the previous one while that one is no longer
    (a binary counter), so there are at most log2(n) runs. Two different ids share a hash with
    probability about n^2 / 2^65 (1e-8 for a million documents); such a pair would be
    reported as a duplicate.
    """

    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []

    def add(self, ids: pd.Series) -> list[str]:
        """Record ``ids`` (unique among themselves); return those seen in an earlier call."""
        h = pd.util.hash_array(np.asarray(ids, dtype=object))
        hit = np.zeros(len(h), dtype=bool)
        for run in self._runs:
            pos = np.minimum(np.searchsorted(run, h), len(run) - 1)
            hit |= run[pos] == h
        if hit.any():
            return [ids.iloc[i] for i in np.flatnonzero(hit)]
        new = np.sort(h)
        while self._runs and len(self._runs[-1]) <= len(new):
            new = np.sort(np.concatenate([self._runs.pop(), new]), kind="mergesort")
        if len(new):
            self._runs.append(new)
        return []


def zero_one(values: pd.Series, column: str, checked: np.ndarray | None = None) -> np.ndarray:
    """Booleans from a 0/1 (or true/false) column; InputError naming the first other value
    among the ``checked`` rows (default: all) and its row, counted 1-based in the whole column
    (the file's row; in R, the document's number)."""
    text = values.astype(str).str.strip().str.lower()
    ok = text.isin(["0", "1", "0.0", "1.0", "true", "false"]).to_numpy()
    if checked is not None:
        ok = ok | ~np.asarray(checked, dtype=bool)
    if not ok.all():
        row = int(np.flatnonzero(~ok)[0])
        raise InputError(f"label column {column!r} ({{label_cols}}) must hold 0/1 values, but "
                         f"it has {_show_cell(values.iloc[row])} (row {row + 1}); recode it as 0/1",
                         params=["label_cols"])
    return text.isin(["1", "1.0", "true"]).to_numpy()


def _show_cell(value) -> str:
    """A cell as the user wrote it: ``2`` for a whole number read as a float (R's numeric
    vectors, or a column with missing values, arrive as floats), ``'yes'`` for text."""
    value = value.item() if hasattr(value, "item") else value  # 2, not np.int64(2)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)
