"""The corpus-frame contract: read, validate and write document tables.

A *corpus frame* is a :class:`pandas.DataFrame` with

``doc_id``
    string, unique, never missing (quanteda's docnames). Defaults to ``text1 .. textN`` when the
    file has no id column, as ``quanteda::corpus()`` does, with one warning a run that says so
    (:func:`warn_numbered`).
``text``
    string; may be empty or missing (``None``). Such documents are kept everywhere and get a
    missing prediction, never silently dropped.
``label`` (optional)
    string; missing values allowed (those documents are left out of training).
any further columns
    docvars, carried through unchanged to every output, in their original order.

Readers accept ``.parquet``, ``.csv``, ``.tsv``, ``.txt`` (one document a line, or delimited text
with a header, sniffed), ``.jsonl`` and ``.rds`` (an R data frame, read with pyreadr). CSV/TSV
may have quoted fields with embedded newlines, CR, CRLF or LF line ends, and any encoding:
UTF-8 is tried first, then the encoding detected by charset-normalizer, with a warning naming
the file and the encoding. Line ends are normalised to ``\\n`` as ``quanteda::corpus()`` does.
TSVs are read with RFC 4180 quoting unless ``quoting="none"`` (every line one row, quotes are
text); a TSV in which a stray quote would merge lines into one document is refused, one where
quotes would only be removed gets a warning. Labels may come from a file of their own
(``labels_file``, one a line), and a text column of numbers gets a warning.

Writers produce ``.parquet``, ``.csv``, ``.tsv``, ``.jsonl`` and ``.rds`` (a plain R data frame
with ``doc_id``, ``text`` and docvars, so ``quanteda::corpus(readRDS(f))`` works). Every write
is atomic: a temporary file in the target folder is renamed over the target at the end, so an
interrupted run never leaves a half-written file.

The columns' names and the checks of what they hold live in :mod:`quantformer.io.columns`
(re-exported here).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError
from .columns import (  # noqa: F401  (re-exported: quantformer.io.frames stays importable)
    ID_COLUMN,
    ID_LIKE,
    LABEL_COLUMN,
    TEXT_COLUMN,
    SeenIds,
    as_str_series,
    check_text_type,
    choose_column,
    duplicate_ids_error,
    looks_like_file,
    numbered,
    numeric_strings,
    warn_numbered,
    warn_text_type,
    zero_one,
)
from .formats import (  # noqa: F401  (re-exported: quantformer.io.frames stays importable)
    EXTENSIONS,
    QUOTINGS,
    READ_FORMATS,
    WRITE_FORMATS,
    FrameWarning,
    check_quoting,
    check_text_bytes,
    detect_format,
    read_raw,
    read_table_file,
    read_text_file,
)
from .writing import (  # noqa: F401  (re-exported: quantformer.io.frames stays importable)
    FrameWriter,
    write_figure,
    write_frame,
)
from .streamed import STREAMED, TextChunks
from .writable import check_output_file  # noqa: F401  (re-exported as above)


def to_frame(
    df: pd.DataFrame,
    *,
    text_col: str | None = None,
    label_col: str | None = None,
    id_col: str | None = None,
    source: str = "the input",
    require_label: bool = False,
    id_offset: int = 0,
    warn_label: bool = True,
) -> pd.DataFrame:
    """Apply the corpus-frame contract to a DataFrame.

    Args:
        df: any table with a text column.
        text_col, label_col, id_col: column names; default ``text``, ``label``, ``doc_id`` when
            those exist. Without an id column, ids are ``text1 .. textN`` (offset by
            ``id_offset`` for chunked reading).
        source: name used in error messages (a file path).
        require_label: raise when there is no label column or every label is missing.
        warn_label: warn when ``label_col`` is named but every label is missing, or when the
            text column holds numbers (off for chunks of a larger file).

    Returns:
        A new DataFrame: ``doc_id``, ``text``, [``label``], docvars (other columns, in order).

    Raises:
        InputError: unknown column (the message lists the columns), duplicate or missing
            doc_ids, a required label column missing or with all values missing.
    """
    columns = [str(c) for c in df.columns]
    df = df.copy()
    df.columns = columns
    tcol = choose_column(columns, text_col, TEXT_COLUMN, "text", "text_col", source, required=True)
    lcol = choose_column(columns, label_col, LABEL_COLUMN, LABEL_COLUMN, "label_col", source,
                   required=require_label)
    icol = choose_column(columns, id_col, ID_COLUMN, "id", "id_col", source, required=False)
    n = len(df)
    if icol is not None:
        ids = as_str_series(df[icol])
        missing = ids.isna()
        if missing.any():
            first = np.flatnonzero(missing.to_numpy())[:5] + 1
            raise InputError(
                f"{int(missing.sum())} document(s) in {source} have no id in column '{icol}' "
                f"(rows {', '.join(map(str, first))}); fill them in or drop {{id_col}} to use "
                "text1..textN", params=["id_col"]
            )
    else:
        ids = pd.Series([f"text{i}" for i in range(id_offset + 1, id_offset + n + 1)],
                        index=df.index, dtype=object)
    dup = ids[ids.duplicated(keep="first")]
    if len(dup):
        raise duplicate_ids_error(source, dup.tolist())
    if warn_label and n:
        check_text_type(df[tcol], tcol, source)
    out = {ID_COLUMN: ids, TEXT_COLUMN: as_str_series(df[tcol])}
    if lcol is not None:
        labels = as_str_series(df[lcol])
        if labels.isna().all():
            msg = (f"every value of the label column '{lcol}' in {source} is missing; "
                   "code some documents or name another column with {label_col}")
            if require_label:
                raise InputError(msg, params=["label_col"])
            if label_col is not None and n and warn_label:
                warnings.warn(msg.replace("{label_col}", "--label-col"), FrameWarning,
                              stacklevel=3)
        out[LABEL_COLUMN] = labels
    used = {tcol, lcol, icol}
    reserved = {ID_COLUMN, TEXT_COLUMN, LABEL_COLUMN}
    for c in columns:
        if c in used:
            continue
        name = c if c not in reserved else f"{c}_orig"
        out[name] = df[c]
    frame = pd.DataFrame(out)
    frame.index = pd.RangeIndex(n)
    return frame


def read_frame(
    path: str | os.PathLike,
    *,
    text_col: str | None = None,
    label_col: str | None = None,
    id_col: str | None = None,
    fmt: str | None = None,
    require_label: bool = False,
    quoting: str = "auto",
    labels_file: str | os.PathLike | None = None,
) -> pd.DataFrame:
    """Read a corpus file into a corpus frame (see the module docstring for the contract).

    Args:
        path: a ``.parquet``, ``.csv``, ``.tsv``, ``.txt``, ``.jsonl`` or ``.rds`` file.
        text_col, label_col, id_col: column names (defaults ``text``, ``label``, ``doc_id``).
        fmt: override the format detected from the extension (also ``lines``: one document a
            line, no sniffing).
        require_label: the file must have a label column with at least one value.
        quoting: for CSV/TSV: ``auto`` (default: RFC 4180 quoting, but a TSV where a quote
            would merge lines into one document is refused and one where quotes would be
            removed gets a warning), ``csv`` (RFC 4180) or ``none`` (every line is one row;
            quotes are text, as in files made with ``paste`` or exported unquoted).
        labels_file: a text file with one label a line, in document order (e.g.
            ``train_labels.txt`` next to ``train_text.txt``); becomes the ``label`` column.

    Warns:
        ParamWarning: the file has no id column: its documents are named ``text1..N``
            (:func:`warn_numbered`).

    Raises:
        InputError: missing, empty or unparsable file, unknown extension, unknown column,
            duplicate ids, all labels missing, an ambiguous quoted TSV, a labels file whose
            line count differs from the number of documents.
    """
    p, kind = check_input(path, fmt)
    df = read_whole(p, kind, text_col, id_col, quoting)
    lines = _one_text_a_line(kind, df.columns)
    if labels_file is not None:
        _check_labels_file_use(label_col)
        df = _with_labels(df, read_labels_file(labels_file, len(df), path))
        label_col = _LABELS_FILE_COL
    frame = to_frame(df, text_col=text_col, label_col=label_col, id_col=id_col,
                     source=f"'{path}'", require_label=require_label)
    if numbered(df.columns, id_col):
        warn_numbered(f"'{path}'", len(frame), df.columns, lines=lines)
    return frame


def _one_text_a_line(kind: str, columns) -> bool:
    """Whether a file read as ``kind`` with ``columns`` is a text file of one document a line
    (no place for ids: :func:`warn_numbered` gives the fix that fits it)."""
    return kind in ("txt", "lines") and len(columns) == 1


_LABELS_FILE_COL = LABEL_COLUMN


def read_labels_file(path: str | os.PathLike, n_docs: int, corpus) -> list[str | None]:
    """Read a labels file: one label a line, in document order; empty lines are missing labels.

    Args:
        path: the labels file (any text encoding :func:`read_text_file` reads).
        n_docs: the number of documents it must label.
        corpus: the corpus file, named in messages.

    Raises:
        InputError: the file is missing, or has a different number of lines than documents.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"{{labels_file}} '{path}' is not a file; it takes a text file with one label a "
            "line" + (f". To use the column '{path}' of the corpus, pass {{label_col}} {path}"
                      if not looks_like_file(str(path)) else ""),
            params=["labels_file", "label_col"])
    lines = read_text_file(p).split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    if len(lines) != n_docs:
        header = " (if its first line is a header, remove it)" if len(lines) == n_docs + 1 \
            else ""
        raise InputError(
            f"{{labels_file}} '{path}' has {len(lines)} lines but '{corpus}' has {n_docs} "
            f"documents; give one label a line, in the order of the documents{header}",
            params=["labels_file"])
    return [ln.strip() or None for ln in lines]


def _check_labels_file_use(label_col: str | None) -> None:
    if label_col is not None:
        raise InputError(f"give either {{label_col}} ({label_col}) or {{labels_file}}, not "
                         "both", params=["label_col", "labels_file"])


def _with_labels(df: pd.DataFrame, labels: list) -> pd.DataFrame:
    """``df`` with the labels of a labels file as its ``label`` column."""
    if _LABELS_FILE_COL in df.columns:
        raise InputError("the corpus has a 'label' column already; drop {labels_file}, or "
                         "rename that column", params=["labels_file"])
    df = df.copy()
    df[_LABELS_FILE_COL] = labels
    return df


def check_input(path: str | os.PathLike, fmt: str | None) -> tuple[Path, str]:
    """Check that ``path`` is a non-empty file of a known format; returns (path, format)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"file not found: '{path}'")
    if p.is_dir():
        raise InputError(f"'{path}' is a folder; give a corpus file")
    kind = detect_format(p, fmt)
    if p.stat().st_size == 0:
        raise _no_documents(p)
    return p, kind


def _no_documents(path: Path) -> InputError:
    return InputError(f"'{path}' is empty: it has no documents")


def read_whole(p: Path, kind: str, text_col: str | None, id_col: str | None,
                quoting: str = "auto") -> pd.DataFrame:
    df = read_raw(p, kind, text_col, id_col, quoting)
    if len(df.columns) == 0 or len(df) == 0:
        raise _no_documents(p)
    return df


def iter_frames(
    path: str | os.PathLike,
    *,
    chunk_rows: int = 2048,
    text_col: str | None = None,
    label_col: str | None = None,
    id_col: str | None = None,
    fmt: str | None = None,
    id_offset: int = 0,
    quoting: str = "auto",
    labels_file: str | os.PathLike | None = None,
    warn_ids: bool = True,
) -> Iterator[pd.DataFrame]:
    """Yield a corpus file as corpus frames of at most ``chunk_rows`` rows, in file order.

    Memory does not grow with the file: Parquet files are read one record batch at a time,
    CSV, TSV, text and JSON-lines files one chunk at a time (:class:`quantformer.io.streamed.
    TextChunks`: pandas' chunked CSV reader, after a counting pass that also holds one chunk
    at a time), with the ids, texts, labels, docvars and dtypes that :func:`read_frame` gives
    (a column's dtype is inferred over the whole file) and its warnings (an encoding, a TSV's
    quotes, a text column of numbers, checked over the whole file). A file that is not UTF-8
    is held once while its encoding is detected. RDS files are read whole (pyreadr reads no
    part of a file) and sliced. Default ids (``textN``) and the uniqueness check run across
    chunks; ``id_offset`` starts default ids at ``text<id_offset + 1>`` (one partition of a
    partitioned corpus). The returned iterator's ``total`` attribute is the number of
    documents, known before the first chunk. ``quoting`` and ``labels_file`` as in
    :func:`read_frame` (a labels file is read whole: one short line a document).
    ``warn_ids``: warn when the ids are ``text1..N`` (:func:`warn_numbered`; off for the
    partitions of a partitioned run, whose scan warns once for the run).

    Raises:
        InputError: as :func:`read_frame`; errors about the file itself (missing, empty,
            unparsable, its encoding or quoting) at the call, column and id errors (a missing
            column, a missing or repeated id) when the chunk that has them is read.
    """
    p, kind = check_input(path, fmt)
    source = f"'{path}'"
    kw = {"text_col": text_col, "label_col": label_col, "id_col": id_col}
    checked = kind in STREAMED  # the text column checked over the whole file
    lines = False
    if kind == "parquet":
        total, chunks = _parquet_chunks(p, path, chunk_rows)
    elif checked:
        total, chunks, lines = _streamed_chunks(p, kind, chunk_rows, kw, quoting, source)
    else:  # RDS: read whole by pyreadr
        whole = read_whole(p, kind, text_col, id_col, quoting)
        total = len(whole)
        chunks = (whole.iloc[i:i + chunk_rows] for i in range(0, len(whole), chunk_rows))
    if labels_file is not None:
        _check_labels_file_use(label_col)
        labels = read_labels_file(labels_file, total, path)
        chunks = _chunks_with_labels(chunks, labels)
        kw["label_col"] = _LABELS_FILE_COL
    return FrameChunks(_contract_chunks(chunks, source, kw, id_offset, warn_ids, total,
                                        check_text=not checked, lines=lines), total)


def _parquet_chunks(p: Path, path, chunk_rows: int) -> tuple[int, Iterator[pd.DataFrame]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(p)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise InputError(f"cannot read '{path}' as Parquet: {exc}") from exc
    total = pf.metadata.num_rows
    if total == 0:
        raise _no_documents(p)
    return total, (batch.to_pandas() for batch in pf.iter_batches(batch_size=chunk_rows))


def _streamed_chunks(p: Path, kind: str, chunk_rows: int, kw: dict, quoting: str,
                     source: str) -> tuple[int, Iterator[pd.DataFrame], bool]:
    """A text format's number of rows, raw chunks (:class:`TextChunks`) and whether it is one
    text a line (:func:`_one_text_a_line`); the counting pass checks the text
    column over the whole file, as :func:`read_frame` does, and notes whether the label
    column has numbers with a fraction anywhere (then every chunk's labels are written as
    :func:`as_str_series` writes the whole column: ``1.0``, not ``1``)."""
    tcol, lcol = kw["text_col"] or TEXT_COLUMN, kw["label_col"] or LABEL_COLUMN
    # the text column: strings that are all numbers, words; the label column: a fraction
    seen = {"numbers": False, "words": False, "fraction": False}

    def visit(chunk: pd.DataFrame) -> None:
        if tcol in chunk.columns and not seen["words"]:  # a chunk of words decides it
            numeric = numeric_strings(chunk[tcol])
            if numeric is not None:
                seen["numbers" if numeric else "words"] = True
        if lcol in chunk.columns and pd.api.types.is_float_dtype(chunk[lcol].dtype):
            v = chunk[lcol].to_numpy(dtype="float64", na_value=np.nan)
            v = v[np.isfinite(v)]
            seen["fraction"] = seen["fraction"] or bool((v != np.round(v)).any())

    stream = TextChunks(p, kind, text_col=kw["text_col"], id_col=kw["id_col"],
                        quoting=quoting, chunk_rows=chunk_rows, visit=visit)
    dtype = stream.dtypes.get(tcol)
    if dtype is not None and (pd.api.types.is_bool_dtype(dtype)
                              or pd.api.types.is_numeric_dtype(dtype)):
        warn_text_type(f"{dtype} values", tcol, source)
    elif dtype is not None and seen["numbers"] and not seen["words"]:
        warn_text_type("only numbers", tcol, source)
    chunks = iter(stream)
    if seen["fraction"] and pd.api.types.is_float_dtype(stream.dtypes.get(lcol, object)):
        chunks = (_labels_as_written(chunk, lcol) for chunk in chunks)
    return stream.total, chunks, _one_text_a_line(kind, stream.columns)


def _labels_as_written(chunk: pd.DataFrame, column: str) -> pd.DataFrame:
    chunk = chunk.copy()
    chunk[column] = pd.Series([None if pd.isna(v) else str(v) for v in chunk[column]],
                              index=chunk.index, dtype=object)
    return chunk


class FrameChunks:
    """The iterator :func:`iter_frames` returns: corpus-frame chunks, plus ``total``, the
    number of documents in the file (for progress bars), known before the first chunk."""

    def __init__(self, chunks: Iterator[pd.DataFrame], total: int):
        self._chunks = chunks
        self.total = int(total)

    def __iter__(self) -> FrameChunks:
        return self

    def __next__(self) -> pd.DataFrame:
        return next(self._chunks)


def _chunks_with_labels(chunks: Iterator[pd.DataFrame], labels: list) -> Iterator[pd.DataFrame]:
    start = 0
    for chunk in chunks:
        yield _with_labels(chunk, labels[start:start + len(chunk)])
        start += len(chunk)


def _contract_chunks(chunks: Iterator[pd.DataFrame], source: str, kw: dict,
                     offset: int = 0, warn_ids: bool = True, total: int | None = None,
                     check_text: bool = True, lines: bool = False
                     ) -> Iterator[pd.DataFrame]:
    """Apply :func:`to_frame` chunk by chunk, with default ids and uniqueness across chunks.
    ``check_text``: check the text column's type on the first chunk (off when the whole file
    was checked)."""
    seen = SeenIds()
    first = True
    for raw in chunks:
        frame = to_frame(raw, source=source, id_offset=offset, warn_label=False, **kw)
        if first:
            first = False
            if check_text:
                tcol = kw["text_col"] or TEXT_COLUMN
                check_text_type(raw[tcol], tcol, source)
            if warn_ids and numbered(raw.columns, kw["id_col"]):
                warn_numbered(source, total, columns=raw.columns, lines=lines)
        offset += len(frame)
        dups = seen.add(frame[ID_COLUMN])
        if dups:
            raise duplicate_ids_error(source, dups)
        yield frame
