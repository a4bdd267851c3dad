"""The text formats (CSV, TSV, text, JSON lines) read in chunks, so that memory does not grow
with the file, giving the columns, values and dtypes that reading the file whole gives
(:func:`quantformer.io.formats.read_raw`).

A :class:`TextChunks` reads a file several times, each time holding one block, line or chunk
at a time: the bytes are checked as UTF-8 (else the encoding is detected and warned about, as
for a whole read); a TSV's quoting is checked line by line; a counting pass parses every chunk
(the number of rows, the columns and what each column holds); the chunks are then parsed
again as they are asked for.
Parsing is pandas' own (:func:`pandas.read_csv` with ``chunksize``, the C engine) for
delimited text and :func:`json.loads` for JSON lines.

A column's dtype is inferred over the whole file, as a whole read infers it, not chunk by
chunk, and every chunk gets it: from the dtypes the counting pass saw in the chunks of a
delimited file (numbers and missing values make ``float64``, numbers and words make text, read
as written), and for JSON lines by building each chunk together with a few witness values of
each column (one value of each kind the column holds anywhere, the smallest and largest whole
number), so pandas' own inference sees what it would see in the whole file. One case may
differ: a delimited column with whole numbers beyond the 64-bit range and missing values, which
pandas reads whole as text with empty strings for the missing values (an inconsistency of its
own); streamed, such a column is text with missing values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError
from .columns import TEXT_COLUMN
from .formats import (
    check_index,
    check_not_blank,
    delimited_options,
    json_rows,
    lines_frame,
    parse_error,
    sniff_delimiter,
    text_encoding,
)

#: the formats read in chunks; others (RDS, read through pyreadr) are read whole
STREAMED = ("csv", "tsv", "txt", "lines", "jsonl")


class TextChunks:
    """A CSV, TSV, text or JSON-lines file as raw chunks (the file's own columns, no corpus
    contract applied) of at most ``chunk_rows`` rows, in file order; iterate it to read them.

    Args:
        path: the file; ``fmt`` its format (one of :data:`STREAMED`).
        text_col, id_col, quoting: as in :func:`quantformer.io.formats.read_raw`.
        chunk_rows: rows a chunk.
        visit: called with every chunk of the counting pass (e.g. to check a column over the
            whole file before the first chunk is read).

    Attributes:
        total: the number of rows (documents), counted before the first chunk is read.
        columns: the columns, in the order a whole read gives them.
        dtypes: each column's dtype, the same in every chunk.

    Raises:
        InputError: as :func:`quantformer.io.frames.read_frame` for these formats: an empty
            file, a binary one, a line that is not JSON, a parse error, an ambiguous quoted TSV.
    """

    def __init__(self, path: Path, fmt: str, *, text_col: str | None = None,
                 id_col: str | None = None, quoting: str = "auto", chunk_rows: int = 2048,
                 visit: Callable[[pd.DataFrame], None] | None = None):
        self.path, self.fmt, self.chunk_rows = Path(path), fmt, int(chunk_rows)
        self.text_col = text_col
        encoding = text_encoding(path)
        self._open = lambda: open(path, encoding=encoding, newline=None)
        visit = visit or (lambda chunk: None)
        if fmt == "jsonl":
            self._read = _JsonLines(self)
        else:
            check_not_blank(path, self._open)
            sep = {"csv": ",", "tsv": "\t"}.get(fmt)
            if fmt == "txt":
                sep = sniff_delimiter(self._open)
            if fmt == "lines" or sep is None:
                self._read = _Lines(self)
            else:
                self._read = _Delimited(self, sep, id_col, quoting)
        self.total = self._read.count(visit)
        self.columns = list(self._read.dtypes)
        self.dtypes = dict(self._read.dtypes)
        if self.total == 0 or not self.columns:
            raise InputError(f"'{path}' is empty: it has no documents")

    def __iter__(self) -> Iterator[pd.DataFrame]:
        return self._read.chunks()


def _batched(items: Iterable, n: int) -> Iterator[list]:
    """``items`` in lists of ``n`` (the last one shorter)."""
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


class _Lines:
    """One document a line."""

    def __init__(self, src: TextChunks):
        self.src = src
        self.dtypes: dict = {}

    def _batches(self) -> Iterator[list[str]]:
        with self.src._open() as f:
            lines = (line[:-1] if line.endswith("\n") else line for line in f)
            yield from _batched(lines, self.src.chunk_rows)

    def count(self, visit) -> int:
        n, dtype = 0, np.dtype(object)  # a whole read gives text, or object: every line empty
        for batch in self._batches():
            chunk = lines_frame(batch, self.src.text_col)
            visit(chunk)
            if chunk.iloc[:, 0].dtype != object:
                dtype = chunk.iloc[:, 0].dtype
            n += len(batch)
        self.dtypes = {self.src.text_col or TEXT_COLUMN: dtype}
        return n

    def chunks(self) -> Iterator[pd.DataFrame]:
        for batch in self._batches():
            yield lines_frame(batch, self.src.text_col).astype(self.dtypes)


class _Delimited:
    """Delimited text through :func:`pandas.read_csv` with ``chunksize``."""

    def __init__(self, src: TextChunks, sep: str, id_col: str | None, quoting: str):
        self.src = src
        self.opts = delimited_options(src.path, src._open, sep, src.text_col, id_col, quoting)
        self.header = self.opts.pop("header_names")
        self.sep = sep
        self.dtypes: dict = {}
        self._as_text: list = []

    def _read(self, as_text=()) -> Iterator[pd.DataFrame]:
        opts = dict(self.opts)
        if as_text:
            opts["dtype"] = {**(opts["dtype"] or {}), **{c: str for c in as_text}}
        try:
            with self.src._open() as f, pd.read_csv(f, chunksize=self.src.chunk_rows,
                                                    low_memory=False, **opts) as reader:
                for chunk in reader:
                    check_index(chunk, self.src.path, self.header, self.sep)
                    yield chunk
        except InputError:
            raise
        except (pd.errors.ParserError, ValueError) as exc:
            raise parse_error(self.src.path, self.src.fmt, exc) from exc

    def count(self, visit) -> int:
        n, kinds, seen = 0, {}, {}
        for chunk in self._read():
            visit(chunk)
            n += len(chunk)
            for c in chunk.columns:
                kind = _kind(chunk[c])
                kinds.setdefault(c, set()).add(kind)
                seen.setdefault((c, kind), chunk[c].dtype)
        if n == 0:
            return 0
        final = {c: _final_kind(k) for c, k in kinds.items()}
        # text where some chunks held numbers or true/false: read as written, as whole
        self._as_text = [c for c, k in final.items() if k == "S" and kinds[c] != {"S"}]
        self.dtypes = {c: _FINAL_DTYPES[k] if k in _FINAL_DTYPES
                       else seen.get((c, k), _TEXT_DTYPE) for c, k in final.items()}
        return n

    def chunks(self) -> Iterator[pd.DataFrame]:
        for chunk in self._read(self._as_text):
            changed = {c: d for c, d in self.dtypes.items()
                       if chunk[c].dtype != d and c not in self._as_text}
            yield chunk.astype(changed) if changed else chunk


# what a chunk's column holds: I whole numbers (N when negative ones too), U whole numbers
# beyond int64, F other numbers, B true/false, Bn true/false with missing values, S text,
# E nothing (every value missing)
_FINAL_DTYPES = {"I": np.dtype("int64"), "U": np.dtype("uint64"), "F": np.dtype("float64"),
                 "E": np.dtype("float64"), "B": np.dtype(bool), "Bn": np.dtype(object)}


_TEXT_DTYPE = pd.Series(["x"], dtype=str).dtype


def _kind(s: pd.Series) -> str:
    dtype = s.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "B"
    if pd.api.types.is_unsigned_integer_dtype(dtype):
        return "U"
    if pd.api.types.is_integer_dtype(dtype):
        return "N" if len(s) and s.min() < 0 else "I"
    if pd.api.types.is_float_dtype(dtype):
        return "E" if s.isna().all() else "F"
    if dtype == object and all(isinstance(v, bool) for v in s.dropna()):
        return "Bn"
    return "S"


def _final_kind(kinds: set) -> str:
    """The kind of a column over the whole file from the kinds of its chunks (as pandas'
    C parser infers a column it reads whole)."""
    some = kinds - {"E"}
    missing = "E" in kinds
    if not some:
        return "E"
    if some <= {"I", "N"}:
        return "F" if missing else "I"
    if some <= {"I", "N", "U", "F"}:
        if "F" in some:
            return "F"
        return "U" if some <= {"I", "U"} and not missing else "S"
    if some == {"B"}:
        return "Bn" if missing else "B"
    if some <= {"B", "Bn"}:
        return "Bn"
    return "S"


class _JsonLines:
    """JSON lines, parsed by :func:`json.loads`; each chunk's DataFrame is built together with
    witness rows (one value of every kind each column holds in the whole file) that are then
    dropped, so pandas infers every column's dtype as it does for the whole file."""

    def __init__(self, src: TextChunks):
        self.src = src
        self.dtypes: dict = {}
        self._witnesses: list[dict] = []

    def _batches(self) -> Iterator[list[dict]]:
        with self.src._open() as f:
            yield from _batched(json_rows(self.src.path, f), self.src.chunk_rows)

    def count(self, visit) -> int:
        n, seen = 0, {}  # column -> the kinds of value it holds, in the order first seen
        for batch in self._batches():
            for i, row in enumerate(batch, start=n):
                for c in row:
                    if c not in seen:
                        seen[c] = {"absent": i > 0}
                for c, kinds in seen.items():
                    if c in row:
                        _witness(kinds, row[c])
                    else:
                        kinds["absent"] = True
            n += len(batch)
            visit(pd.DataFrame(batch))
        self._witnesses = _witness_rows(seen)
        self.columns = list(seen)
        self.dtypes = pd.DataFrame(self._witnesses, columns=self.columns).dtypes.to_dict()
        return n

    def chunks(self) -> Iterator[pd.DataFrame]:
        k = len(self._witnesses)
        for batch in self._batches():
            frame = pd.DataFrame(self._witnesses + batch, columns=self.columns)
            yield frame.iloc[k:].reset_index(drop=True)


def _witness(kinds: dict, v) -> None:
    """Note the kind of value ``v`` (and the range of whole numbers) in ``kinds``."""
    if isinstance(v, int) and not isinstance(v, bool):
        lo, hi = kinds.get("int", (v, v))
        kinds["int"] = (min(lo, v), max(hi, v))
    elif isinstance(v, float):
        kinds.setdefault(("float", math.isnan(v)), v)
    else:
        kinds.setdefault(type(v), v)


def _witness_rows(seen: dict) -> list[dict]:
    """Rows that hold, for every column, one value of each kind it holds (no value where some
    rows lack the column), and nothing else."""
    values = {}
    for c, kinds in seen.items():
        vals = []
        for key, v in kinds.items():
            if key == "int":
                vals.extend(v)
            elif key != "absent":
                vals.append(v)
        values[c] = (vals, kinds["absent"])
    rows = []
    for i in range(max(len(v) + a for v, a in values.values())):
        row = {}
        for c, (vals, absent) in values.items():
            if i < len(vals):
                row[c] = vals[i]
            elif not absent:
                row[c] = vals[-1]  # repeat a value the column holds anyway
        rows.append(row)
    return rows

