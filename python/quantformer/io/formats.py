"""Reading document files: the format from the extension or the content, the encoding (UTF-8,
else the one charset-normalizer detects, with a warning), and delimited text with RFC 4180 or
no quoting. :mod:`quantformer.io.frames` turns what is read here into a corpus frame.
"""


from __future__ import annotations

import csv
import io
import json
import os
import re
import warnings
from pathlib import Path

import pandas as pd

from .._core.errors import InputError

READ_FORMATS = ("parquet", "csv", "tsv", "txt", "lines", "jsonl", "rds")
WRITE_FORMATS = ("parquet", "csv", "tsv", "jsonl", "rds")
EXTENSIONS = {
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
    found = EXTENSIONS.get(ext)
    if found is None or found not in allowed:
        kinds = ", ".join(sorted(e for e, f in EXTENSIONS.items() if f in allowed))
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


def read_raw(path: Path, fmt: str, text_col: str | None,
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
    return read_raw(p, detect_format(p, fmt), None)


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


