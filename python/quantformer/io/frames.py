"""The corpus-frame contract: read, validate and write document tables.

A *corpus frame* is a :class:`pandas.DataFrame` with

``doc_id``
    string, unique, never missing (quanteda's docnames). Defaults to ``text1 .. textN`` when the
    file has no id column, as ``quanteda::corpus()`` does.
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
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.atomic import atomic_file, temporary_sibling
from .._core.errors import InputError
from .writable import check_writable

READ_FORMATS = ("parquet", "csv", "tsv", "txt", "lines", "jsonl", "rds")
WRITE_FORMATS = ("parquet", "csv", "tsv", "jsonl", "rds")
_EXT = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".txt": "txt",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".rds": "rds",
}
# Values read as missing in every column except the text column, where only an empty field is
# missing (a tweet that says "NA" or "null" stays text).
_NA_VALUES = ["", "NA", "N/A", "NaN", "nan", "NULL", "null", "None", "<NA>", "#N/A", "n/a"]




class FrameWarning(UserWarning):
    """A problem in the input that quantformer repaired or worked around (e.g. an encoding)."""


# --------------------------------------------------------------------------------------------
# format detection and decoding


def detect_format(path: str | os.PathLike, fmt: str | None = None, *, write: bool = False) -> str:
    """Return the format of ``path`` from ``fmt`` or its extension.

    Raises:
        InputError: unknown extension or ``fmt`` value (the message lists the known ones).
    """
    allowed = WRITE_FORMATS if write else READ_FORMATS
    if fmt:
        fmt = fmt.lower().lstrip(".")
        if fmt not in allowed:
            raise InputError(f"unknown format '{fmt}'; use one of: {', '.join(allowed)}")
        return fmt
    ext = Path(path).suffix.lower()
    found = _EXT.get(ext)
    if found is None or found not in allowed:
        kinds = ", ".join(sorted(e for e, f in _EXT.items() if f in allowed))
        if write:
            raise InputError(
                f"cannot write '{path}': its extension '{ext or '(none)'}' is not an output "
                f"format; name the output file with one of {kinds}"
            )
        raise InputError(
            f"cannot tell the format of '{path}' from its extension '{ext or '(none)'}'; "
            f"use one of {kinds}, or pass {{fmt}}", params=["fmt"]
        )
    return found


# Western single-byte code pages that charset-normalizer cannot tell from cp1252 on short
# texts (it picks mac_iceland for "Grüße"); real files in these are rare, cp1252 (Excel and
# Windows exports) is common, so cp1252 wins whenever it decodes the bytes.
_WESTERN_LEGACY = {"mac_roman", "mac_iceland", "mac_turkish", "hp_roman8", "cp437", "cp850",
                   "cp858", "cp860", "cp861", "cp863", "cp865", "latin_1", "iso8859_1",
                   "iso8859_15"}


def _guess_legacy_encoding(raw: bytes) -> str:
    """The encoding of non-UTF-8 bytes: charset-normalizer's guess, with cp1252 preferred
    when it fits as well (ties between code pages), when the guess is a rarer Western code
    page, or when the guess decodes the bytes to the same text as cp1252."""
    from charset_normalizer import from_bytes

    results = list(from_bytes(raw))
    if not results:
        return "cp1252"
    best = results[0]
    tied = [r.encoding for r in results if (r.chaos, r.coherence) == (best.chaos, best.coherence)]
    if "cp1252" in tied:
        return "cp1252"
    try:
        as_cp1252 = raw.decode("cp1252")
    except UnicodeDecodeError:
        return best.encoding
    if best.encoding in _WESTERN_LEGACY or as_cp1252 == raw.decode(best.encoding, "replace"):
        return "cp1252"  # a rarer Western code page, or one that reads the same as cp1252
    return best.encoding


#: how binary and compressed files begin (their magic bytes), and what to do with each
_MAGIC = (
    (b"PAR1", "a Parquet file", "rename it to .parquet or pass --format parquet"),
    (b"\x1f\x8b", "a gzip-compressed file (R's saveRDS() writes these too)",
     "decompress it (gunzip), or rename an R data file to .rds"),
    (b"\xfd7zXZ\x00", "an xz-compressed file (R's saveRDS(compress = \"xz\") writes these)",
     "decompress it (unxz), or rename an R data file to .rds"),
    (b"BZh", "a bzip2-compressed file (R's saveRDS(compress = \"bzip2\") writes these)",
     "decompress it (bunzip2), or rename an R data file to .rds"),
    (b"PK\x03\x04", "a zip archive or an Excel workbook (.xlsx)",
     "unzip it, or save the sheet as CSV (UTF-8)"),
    (b"RDX2\n", "an R data file", "rename it to .rds, or save it with saveRDS()"),
    (b"RDX3\n", "an R data file", "rename it to .rds, or save it with saveRDS()"),
    (b"X\n\x00\x00", "an R data file (uncompressed)", "rename it to .rds"),
)


def check_text_bytes(path: str | os.PathLike, raw: bytes) -> None:
    """Refuse a binary or compressed file read as text, naming the format it looks like
    (from its first bytes, :data:`_MAGIC`) instead of a parser's error.

    Raises:
        InputError: the file starts like Parquet, gzip, xz, bzip2, zip/xlsx or an R data file,
            or has NUL bytes in its first 8 KB (another binary format).
    """
    for magic, what, fix in _MAGIC:
        if raw.startswith(magic):
            raise InputError(f"'{path}' does not look like text: it starts like {what}; {fix}")
    head = raw[:8192]
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"'{path}' does not look like text (it has NUL bytes): a binary file; "
                         "save it as CSV (UTF-8), or give a .parquet or .rds file with its "
                         "extension")


def read_text_file(path: str | os.PathLike) -> str:
    """Decode a text file: UTF-8 (BOM stripped) first, else the detected encoding (with a warning).

    Line ends (CRLF, CR) are normalised to LF.

    Raises:
        InputError: a binary or compressed file (:func:`check_text_bytes`).
    """
    raw = Path(path).read_bytes()
    check_text_bytes(path, raw)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        encoding = _guess_legacy_encoding(raw)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            encoding = "latin-1"
            text = raw.decode(encoding)
        warnings.warn(
            f"{path} is not valid UTF-8; read it as {encoding}. Save it as UTF-8 to silence this.",
            FrameWarning,
            stacklevel=3,
        )
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _sniff_delimited_txt(text: str) -> str | None:
    """Return the delimiter when a .txt file is delimited text with a header, else None.

    Only tabs are sniffed: commas are common in plain one-document-a-line files. A file counts as
    tab-separated when its first line has a tab and most of the following lines have the same
    number of fields.
    """
    lines = [ln for ln in text.split("\n", 60)[:60] if ln.strip()]
    if not lines or "\t" not in lines[0]:
        return None
    n = lines[0].count("\t")
    rest = lines[1:]
    if not rest:
        return "\t"
    same = sum(1 for ln in rest if ln.count("\t") == n)
    return "\t" if same >= 0.8 * len(rest) else None


# --------------------------------------------------------------------------------------------
# reading


def _read_raw(path: Path, fmt: str, text_col: str | None,
              id_col: str | None = None, quoting: str = "auto") -> pd.DataFrame:
    """Read a file into a DataFrame with its own columns (no contract applied yet)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pandas()
        except Exception as exc:  # pyarrow raises several types for corrupt files
            raise InputError(f"cannot read '{path}' as Parquet: {exc}") from exc
    if fmt == "rds":
        import pyreadr

        try:
            result = pyreadr.read_r(str(path))
        except Exception as exc:
            raise InputError(
                f"cannot read '{path}' as an R data file: {exc}. Save a data frame with saveRDS()."
            ) from exc
        obj = next(iter(result.values()), None)
        if not isinstance(obj, pd.DataFrame) or list(obj.columns) == [None]:
            # pyreadr reads a bare vector (a quanteda corpus is a named character vector) as a
            # one-column frame named None: names and docvars are lost, so refuse it
            raise InputError(
                f"'{path}' does not hold an R data frame (a quanteda corpus or a character "
                "vector cannot be read here); in R save a data frame instead, e.g. "
                "saveRDS(convert(corp, to = \"data.frame\"), f) or "
                "saveRDS(data.frame(doc_id = names(x), text = x), f)"
            )
        return obj
    if fmt == "jsonl":
        rows = []
        for i, line in enumerate(read_text_file(path).split("\n"), start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}, line {i}: not valid JSON ({exc.msg})") from exc
                if not isinstance(row, dict):
                    raise InputError(f"{path}, line {i}: a JSON {type(row).__name__}, not an "
                                     'object; write one object a line, e.g. {"text": "..."}')
                rows.append(row)
        return pd.DataFrame(rows)
    text = read_text_file(path)
    if not text.strip():
        raise InputError(f"'{path}' is empty: it has no documents")
    sep = {"csv": ",", "tsv": "\t"}.get(fmt)
    if fmt == "txt":
        sep = _sniff_delimited_txt(text)
    if fmt == "lines" or sep is None:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]
        return pd.DataFrame({text_col or "text": [ln if ln != "" else None for ln in lines]})
    return _read_delimited(path, text, sep, fmt, text_col, id_col, quoting)


QUOTINGS = ("auto", "csv", "none")


def read_table_file(path: str | os.PathLike, fmt: str | None = None) -> pd.DataFrame:
    """A file's table with its own columns (any frame format, no corpus contract applied).

    Raises:
        InputError: the file does not exist, or cannot be read as ``fmt`` (default: from its
            extension).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"file not found: '{path}'")
    return _read_raw(p, detect_format(p, fmt), None)


def check_quoting(quoting: str) -> str:
    """Validate a ``quoting`` value: ``auto``, ``csv`` or ``none``.

    Raises:
        InputError: any other value.
    """
    if quoting not in QUOTINGS:
        raise InputError(f"unknown quoting '{quoting}'; use one of: {', '.join(QUOTINGS)}")
    return quoting


def _data_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the non-blank lines after the header; numbers are 1-based."""
    return [(i, ln) for i, ln in enumerate(text.split("\n")[1:], start=2) if ln.strip()]


_WELL_QUOTED = re.compile(r'"(?:[^"]|"")*"\Z')


def _stray_quote(line: str, sep: str) -> bool:
    """A field of ``line`` begins with a quote but is not one well-formed quoted field
    (``"..."`` with inner quotes doubled), so CSV quoting would change or join it."""
    return any(f.startswith('"') and not _WELL_QUOTED.match(f) for f in line.split(sep))


def _tsv_quoting(path: Path, text: str, sep: str) -> str:
    """``auto`` quoting of a tab-separated file: ``csv`` unless reading quotes as CSV quoting
    would change or merge rows of a file whose lines are all complete without quoting.

    Files whose lines are incomplete without quoting, and fields quoted as RFC 4180 writes
    them, read as CSV silently. In a file whose lines all have the header's number of fields,
    a field that begins with a stray ``"`` (as in unquoted exports and ``paste`` output) is
    refused when CSV quoting would merge lines into one row, and warned about when it would
    only remove the quotes.

    Raises:
        InputError: a quoted field would span lines of an otherwise complete file.
    """
    if '"' not in text:
        return "csv"
    n_sep = text.split("\n", 1)[0].count(sep)
    lines = _data_lines(text)
    if any(ln.count(sep) != n_sep for _, ln in lines):
        return "csv"  # some lines are incomplete without quoting: the file is quoted
    quoted = [(i, ln) for i, ln in lines if _stray_quote(ln, sep)]
    if not quoted:
        return "csv"  # quotes only inside fields, or well-formed quoted fields
    n_rows = sum(1 for row in csv.reader(io.StringIO(text), delimiter=sep) if any(row)) - 1
    first = quoted[0][0]
    if n_rows != len(lines):
        raise InputError(
            f"'{path}' has {len(lines)} lines of data, but reading quotes as CSV quoting "
            f"would give {n_rows} rows: the quote opening a field on line {first} runs on into "
            "later lines and would merge them into one document. If the file has no quoting "
            "(made with paste or exported unquoted), pass {quoting} none to read every line as "
            "it is; if its quoted fields really span lines, pass {quoting} csv",
            params=["quoting"]
        )
    warnings.warn(
        f"{len(quoted)} line(s) of '{path}' have a field that begins with a quote (first: "
        f"line {first}); they are read as CSV quoting, which removes the quotes. If the quotes "
        "are part of the text, pass --quoting none; --quoting csv silences this",
        FrameWarning, stacklevel=5)
    return "csv"


def _check_unquoted_fields(path: Path, text: str, sep: str, n_fields: int) -> None:
    """With quoting off, every line must have the header's number of fields."""
    for i, ln in _data_lines(text):
        if ln.count(sep) + 1 != n_fields:
            raise InputError(
                f"'{path}', line {i}: {ln.count(sep) + 1} field(s) where the header has "
                f"{n_fields} (read with {{quoting}} none, so every line is one row); remove "
                f"the extra delimiters {sep!r} or add the missing fields", params=["quoting"]
            )


def _read_delimited(path: Path, text: str, sep: str, fmt: str, text_col: str | None,
                    id_col: str | None, quoting: str = "auto") -> pd.DataFrame:
    """Parse delimited text. ``quoting``: ``csv`` (RFC 4180), ``none`` (every line one row,
    quotes are text), ``auto`` (``csv``, with the checks of :func:`_tsv_quoting` for tabs)."""
    if check_quoting(quoting) == "auto":
        quoting = _tsv_quoting(path, text, sep) if sep == "\t" else "csv"
    first_line = text.split("\n", 1)[0]
    if quoting == "none":
        header = first_line.split(sep)
        _check_unquoted_fields(path, text, sep, len(header))
    else:
        header = next(csv.reader(io.StringIO(first_line), delimiter=sep), [])
    tcol = text_col or "text"
    na_values = {c: ([""] if c == tcol else _NA_VALUES) for c in header}
    # the text and id columns stay text ("NA" is a tweet; id "007" keeps its zeros)
    as_text = {c: str for c in (tcol, id_col or "doc_id") if c in header}
    try:
        df = pd.read_csv(
            io.StringIO(text),
            sep=sep,
            dtype=as_text or None,
            keep_default_na=False,
            na_values=na_values,
            engine="c",
            quoting=csv.QUOTE_NONE if quoting == "none" else csv.QUOTE_MINIMAL,
        )
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(f"cannot parse '{path}' as {fmt.upper()}: {exc}") from exc
    if not isinstance(df.index, pd.RangeIndex):
        # every row has more fields than the header: pandas would quietly turn the first
        # field(s) into an index and shift the columns
        raise InputError(
            f"the rows of '{path}' have more fields than its header ({len(header)}); quote "
            f"fields that contain the delimiter {sep!r}, or fix the header"
        )
    return df


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


_as_str_series = as_str_series  # the name modules inside io/ and older callers use


def _choose(columns: list[str], given: str | None, default: str, what: str, param: str,
            path, required: bool) -> str | None:
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


def _looks_like_file(name: str) -> bool:
    return Path(name).suffix.lower() in _EXT or Path(name).is_file()


def _file_for_column_hint(given: str, what: str, param: str) -> tuple[str, list[str]]:
    """The fix when a file name was given to a column parameter (e.g. ``label_col =
    "labels.txt"``): the text (parameters as fields) and the parameters it names."""
    if not _looks_like_file(given):
        return "", []
    if what == "label":
        return ((f". '{given}' looks like a file: {{{param}}} takes a column name; for labels "
                 "in a file of their own (one a line, in document order) pass {labels_file} "
                 f"{given}"), ["labels_file"])
    return ((f". '{given}' looks like a file: {{{param}}} takes a column name; give the corpus "
             "file with {input} (or {train}), and labels in a file of their own with "
             "{labels_file}"), ["input", "train", "labels_file"])


def _check_text_type(s: pd.Series, column: str, source: str) -> None:
    """Warn when the text column holds numbers or booleans: usually a wrong ``--text-col``."""
    if pd.api.types.is_bool_dtype(s.dtype) or pd.api.types.is_numeric_dtype(s.dtype):
        kind = f"{s.dtype} values"
    else:
        present = s.dropna()
        present = present[[isinstance(v, str) for v in present]]
        if present.empty or pd.to_numeric(present.head(1000), errors="coerce").isna().any() \
                or pd.to_numeric(present, errors="coerce").isna().any():
            return
        kind = "only numbers"
    warnings.warn(
        f"the text column '{column}' of {source} holds {kind}, not text; they are used as "
        "strings. If it is not the text, name the text column with --text-col",
        FrameWarning, stacklevel=4)


def _duplicate_ids(source: str, dups: list[str]) -> InputError:
    shown = list(dict.fromkeys(dups))[:5]
    return InputError(
        f"doc_ids must be unique, but {source} repeats {len(dups)} id(s), first: "
        f"{', '.join(map(repr, shown))}. Make them unique or pass another {{id_col}}",
        params=["id_col"]
    )


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
    tcol = _choose(columns, text_col, "text", "text", "text_col", source, required=True)
    lcol = _choose(columns, label_col, "label", "label", "label_col", source,
                   required=require_label)
    icol = _choose(columns, id_col, "doc_id", "id", "id_col", source, required=False)
    n = len(df)
    if icol is not None:
        ids = _as_str_series(df[icol])
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
        raise _duplicate_ids(source, dup.tolist())
    if warn_label and n:
        _check_text_type(df[tcol], tcol, source)
    out = {"doc_id": ids, "text": _as_str_series(df[tcol])}
    if lcol is not None:
        labels = _as_str_series(df[lcol])
        if labels.isna().all():
            msg = (f"every value of the label column '{lcol}' in {source} is missing; "
                   "code some documents or name another column with {label_col}")
            if require_label:
                raise InputError(msg, params=["label_col"])
            if label_col is not None and n and warn_label:
                warnings.warn(msg.replace("{label_col}", "--label-col"), FrameWarning,
                              stacklevel=3)
        out["label"] = labels
    used = {tcol, lcol, icol}
    reserved = {"doc_id", "text", "label"}
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

    Raises:
        InputError: missing, empty or unparsable file, unknown extension, unknown column,
            duplicate ids, all labels missing, an ambiguous quoted TSV, a labels file whose
            line count differs from the number of documents.
    """
    p, kind = _check_input(path, fmt)
    df = _read_whole(p, kind, text_col, id_col, quoting)
    if labels_file is not None:
        _check_labels_file_use(label_col)
        df = _with_labels(df, read_labels_file(labels_file, len(df), path))
        label_col = _LABELS_FILE_COL
    return to_frame(df, text_col=text_col, label_col=label_col, id_col=id_col,
                    source=f"'{path}'", require_label=require_label)


_LABELS_FILE_COL = "label"


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
                      if not _looks_like_file(str(path)) else ""),
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


def _check_input(path: str | os.PathLike, fmt: str | None) -> tuple[Path, str]:
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


def _read_whole(p: Path, kind: str, text_col: str | None, id_col: str | None,
                quoting: str = "auto") -> pd.DataFrame:
    df = _read_raw(p, kind, text_col, id_col, quoting)
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
) -> Iterator[pd.DataFrame]:
    """Yield a corpus file as corpus frames of at most ``chunk_rows`` rows, in file order.

    Parquet files are read one record batch at a time, so memory does not grow with the file;
    other formats are read whole and sliced. Default ids (``textN``) and the uniqueness check
    run across chunks; ``id_offset`` starts default ids at ``text<id_offset + 1>`` (one
    partition of a partitioned corpus). The returned iterator's ``total`` attribute is the
    number of documents. ``quoting`` and ``labels_file`` as in :func:`read_frame`.

    Raises:
        InputError: as :func:`read_frame`.
    """
    p, kind = _check_input(path, fmt)
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(p)
        except Exception as exc:  # pyarrow raises several types for corrupt files
            raise InputError(f"cannot read '{path}' as Parquet: {exc}") from exc
        total = pf.metadata.num_rows
        if total == 0:
            raise _no_documents(p)
        chunks = (batch.to_pandas() for batch in pf.iter_batches(batch_size=chunk_rows))
    else:
        whole = _read_whole(p, kind, text_col, id_col, quoting)
        total = len(whole)
        chunks = (whole.iloc[i:i + chunk_rows] for i in range(0, len(whole), chunk_rows))
    if labels_file is not None:
        _check_labels_file_use(label_col)
        labels = read_labels_file(labels_file, total, path)
        chunks = _chunks_with_labels(chunks, labels)
        label_col = _LABELS_FILE_COL
    kw = {"text_col": text_col, "label_col": label_col, "id_col": id_col}
    return FrameChunks(_contract_chunks(chunks, f"'{path}'", kw, id_offset), total)


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


def _contract_chunks(chunks: Iterator[pd.DataFrame], source: str,
                     kw: dict, offset: int = 0) -> Iterator[pd.DataFrame]:
    """Apply :func:`to_frame` chunk by chunk, with default ids and uniqueness across chunks."""
    seen = _SeenIds()
    first = True
    for raw in chunks:
        frame = to_frame(raw, source=source, id_offset=offset, warn_label=False, **kw)
        if first:
            first = False
            _check_text_type(raw[kw["text_col"] or "text"], kw["text_col"] or "text", source)
        offset += len(frame)
        dups = seen.add(frame["doc_id"])
        if dups:
            raise _duplicate_ids(source, dups)
        yield frame


class _SeenIds:
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


# --------------------------------------------------------------------------------------------
# writing


def write_figure(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Save a matplotlib figure as PNG atomically (temporary file, then rename) and close it.

    Returns:
        The path written.
    """
    import matplotlib.pyplot as plt

    target = Path(path)
    try:
        with atomic_file(target) as tmp:
            fig.savefig(tmp, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return target


_R_INT_MAX = 2**31 - 1  # R integers are 32-bit; -2^31 is R's NA_integer_


def _rds_ready(df: pd.DataFrame) -> pd.DataFrame:
    """Columns pyreadr can write: list/array columns become JSON strings; missing numbers
    become R's ``NA`` (not ``NaN``); integer columns within R's 32-bit range are written as R
    integers (pyreadr writes 64-bit integers as doubles)."""
    out = {}
    for c in df.columns:
        s = df[c]
        if (pd.api.types.is_integer_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)
                and (s.dropna().abs() <= _R_INT_MAX).all()):
            s = s.astype("Int32" if isinstance(s.dtype, pd.api.extensions.ExtensionDtype)
                         else "int32")
        elif s.dtype == object and len(s) and any(
            isinstance(v, (list, tuple, np.ndarray)) for v in s.head(50)
        ):
            s = pd.Series([None if v is None else json.dumps(list(map(_py, v))) for v in s],
                          index=s.index, dtype=object)
        elif isinstance(s.dtype, pd.StringDtype) or pd.api.types.is_string_dtype(s.dtype):
            s = pd.Series([None if (v is None or (not isinstance(v, str) and pd.isna(v)))
                           else v for v in s], index=s.index, dtype=object)
        elif pd.api.types.is_float_dtype(s.dtype) and s.isna().any():
            # pyreadr writes NaN as R's NaN; None in an object column becomes R's NA
            s = pd.Series([None if pd.isna(v) else float(v) for v in s], index=s.index,
                          dtype=object)
        out[str(c)] = s
    return pd.DataFrame(out, index=pd.RangeIndex(len(df)))


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


def _write_to(df: pd.DataFrame, path: Path, kind: str) -> None:
    if kind == "parquet":
        df.to_parquet(path, index=False)
    elif kind == "csv":
        df.to_csv(path, index=False, lineterminator="\n")
    elif kind == "tsv":
        df.to_csv(path, index=False, sep="\t", lineterminator="\n")
    elif kind == "jsonl":
        df.to_json(path, orient="records", lines=True, force_ascii=False)
    elif kind == "rds":
        import pyreadr

        pyreadr.write_rds(str(path), _rds_ready(df))
    else:  # pragma: no cover - detect_format guards this
        raise InputError(f"cannot write format '{kind}'")


def write_frame(df: pd.DataFrame, path: str | os.PathLike, fmt: str | None = None) -> Path:
    """Write ``df`` atomically to ``path`` (format from ``fmt`` or the extension).

    The data go to a temporary file in the same folder, renamed over ``path`` when complete.

    Returns:
        The path written.

    Raises:
        InputError: unknown output format.
    """
    target = Path(path)
    kind = detect_format(target, fmt, write=True)
    with atomic_file(target) as tmp:
        _write_to(df, tmp, kind)
    return target


class FrameWriter:
    """Append corpus-frame chunks to one output file; the file appears only on :meth:`close`.

    Parquet and CSV/TSV/JSONL chunks are streamed to a temporary file (memory stays flat);
    ``.rds`` cannot be appended to, so its chunks are collected and written at the end. Use as a
    context manager: on an exception the temporary file is removed and nothing is left behind.
    """

    def __init__(self, path: str | os.PathLike, fmt: str | None = None):
        self.path = Path(path)
        self.kind = detect_format(self.path, fmt, write=True)
        self._tmp = temporary_sibling(self.path)
        self._writer = None
        self._parts: list[pd.DataFrame] = []
        self._schema = None
        self.rows = 0

    def write(self, df: pd.DataFrame) -> None:
        self.rows += len(df)
        if self.kind == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(df, preserve_index=False)
            if self._writer is None:
                # a column with only missing values in the first chunk has Arrow type null,
                # to which later chunks cannot be cast: make such columns strings
                fields = [f.with_type(pa.string()) if pa.types.is_null(f.type) else f
                          for f in table.schema]
                self._schema = pa.schema(fields, metadata=table.schema.metadata)
                table = table.cast(self._schema)
                self._writer = pq.ParquetWriter(self._tmp, self._schema)
            else:
                table = table.cast(self._schema)
            self._writer.write_table(table)
        elif self.kind in ("csv", "tsv"):
            sep = "," if self.kind == "csv" else "\t"
            df.to_csv(self._tmp, mode="a", header=self._writer is None, index=False, sep=sep,
                      lineterminator="\n")
            self._writer = True
        elif self.kind == "jsonl":
            if len(df):
                body = df.to_json(orient="records", lines=True, force_ascii=False)
                with open(self._tmp, "a", encoding="utf-8") as fh:
                    fh.write(body if body.endswith("\n") else body + "\n")
            self._writer = True
        else:
            self._parts.append(df)

    def close(self) -> Path:
        if self.kind == "parquet" and self._writer is not None:
            self._writer.close()
        if self.kind == "rds" or self._writer is None:
            whole = pd.concat(self._parts, ignore_index=True) if self._parts else pd.DataFrame()
            _write_to(whole, self._tmp, self.kind)
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        if self.kind == "parquet" and self._writer is not None:
            try:
                self._writer.close()
            except Exception:
                pass
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> FrameWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def check_output_path(path: str | os.PathLike, *, overwrite: bool = True,
                      param: str = "out") -> Path:
    """Validate an output file path before any work starts (format known, folder writable).

    ``param``: the library parameter that gave ``path`` (named in the message; default ``out``).

    Raises:
        InputError: unknown format, the file exists and ``overwrite`` is False, or its folder
            cannot be written (:func:`quantformer.io.writable.check_writable`).
    """
    p = Path(path)
    detect_format(p, write=True)
    if p.exists() and not overwrite:
        raise InputError(f"'{path}' exists; pass {{overwrite}} or choose another file name",
                         params=["overwrite"])
    if p.is_dir():
        raise InputError(f"'{path}' is a folder; give a file name such as preds.parquet")
    return check_writable(p, param)
