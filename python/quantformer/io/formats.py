"""Reading document files: the format from the extension or the content, the encoding (UTF-8,
else the one charset-normalizer detects, with a warning), and delimited text with RFC 4180 or
no quoting. :mod:`quantformer.io.frames` turns what is read here into a corpus frame.
"""


from __future__ import annotations

import codecs
import csv
import io
import json
import os
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

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
        text = raw.decode(_legacy_encoding(path, raw))
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _legacy_encoding(path, raw: bytes) -> str:
    """The encoding of bytes that are not UTF-8 (:func:`_guess_legacy_encoding`, latin-1 when
    the guess does not decode them), with the warning that names it."""
    encoding = _guess_legacy_encoding(raw)
    try:
        _check_decodes(raw, encoding)
    except (UnicodeDecodeError, LookupError):
        encoding = "latin-1"
    warnings.warn(
        f"{path} is not valid UTF-8; read it as {encoding}. Save it as UTF-8 to silence this.",
        FrameWarning,
        stacklevel=4,
    )
    return encoding


_BLOCK = 1 << 20  # bytes decoded at a time by the streamed checks


def _check_decodes(raw, encoding: str) -> None:
    """Raise UnicodeDecodeError (LookupError: unknown encoding) unless ``raw`` (bytes, or a
    binary file) decodes as ``encoding``; one block at a time, so no copy of a file is held."""
    decoder = codecs.getincrementaldecoder(encoding)()
    if isinstance(raw, (bytes, bytearray)):
        view = memoryview(raw)
        blocks = (view[i:i + _BLOCK] for i in range(0, len(view), _BLOCK))
    else:
        blocks = iter(lambda: raw.read(_BLOCK), b"")
    for block in blocks:
        decoder.decode(block)
    decoder.decode(b"", final=True)


def text_encoding(path: str | os.PathLike) -> str:
    """The encoding :func:`read_text_file` reads ``path`` with, found without holding a UTF-8
    file in memory: ``utf-8-sig`` when the bytes are UTF-8 (checked one block at a time), else
    the encoding detected on the whole bytes, with the same warning (a file that is not UTF-8
    is held once while its encoding is guessed). Open the file with
    ``open(path, encoding=..., newline=None)`` to read the text :func:`read_text_file` gives.

    Raises:
        InputError: a binary or compressed file (:func:`check_text_bytes`).
    """
    with open(path, "rb") as f:
        check_text_bytes(path, f.read(8192))
        f.seek(0)
        try:
            _check_decodes(f, "utf-8")
            return "utf-8-sig"
        except UnicodeDecodeError:
            pass
    return _legacy_encoding(path, Path(path).read_bytes())


def sniff_delimiter(open_text: Callable[[], TextIO]) -> str | None:
    """Return the delimiter when a .txt file is delimited text with a header, else None.

    Only tabs are sniffed: commas are common in plain one-document-a-line files. A file counts as
    tab-separated when its first line has a tab and most of the following lines have the same
    number of fields. Only the first 60 lines are read.
    """
    with open_text() as f:
        lines = [ln for ln in (_chomp(f.readline()) for _ in range(60)) if ln.strip()]
    if not lines or "\t" not in lines[0]:
        return None
    n = lines[0].count("\t")
    rest = lines[1:]
    if not rest:
        return "\t"
    same = sum(1 for ln in rest if ln.count("\t") == n)
    return "\t" if same >= 0.8 * len(rest) else None


def json_rows(path, lines) -> Iterator[dict]:
    """The objects of the JSON lines ``lines`` (an iterable of lines, with or without their
    line end), blank lines skipped.

    Raises:
        InputError: a line that is not valid JSON or not an object (its number named).
    """
    for i, line in enumerate(lines, start=1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}, line {i}: not valid JSON ({exc.msg})") from exc
            if not isinstance(row, dict):
                raise InputError(f"{path}, line {i}: a JSON {type(row).__name__}, not an "
                                 'object; write one object a line, e.g. {"text": "..."}')
            yield row


def lines_frame(lines: list[str], text_col: str | None) -> pd.DataFrame:
    """One document a line (an empty line is a missing text)."""
    return pd.DataFrame({text_col or "text": [ln if ln != "" else None for ln in lines]})


def check_not_blank(path, open_text: Callable[[], TextIO]) -> None:
    """Refuse a file whose text is empty or only white space (read a block at a time).

    Raises:
        InputError: the file has no documents.
    """
    with open_text() as f:
        for block in iter(lambda: f.read(1 << 16), ""):
            if block.strip():
                return
    raise InputError(f"'{path}' is empty: it has no documents")


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
        return pd.DataFrame(list(json_rows(path, read_text_file(path).split("\n"))))
    text = read_text_file(path)
    check_not_blank(path, text_opener(text))
    sep = {"csv": ",", "tsv": "\t"}.get(fmt)
    if fmt == "txt":
        sep = sniff_delimiter(text_opener(text))
    if fmt == "lines" or sep is None:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]
        return lines_frame(lines, text_col)
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


OpenText = Callable[[], TextIO]  # opens the text of a file (line ends normalised to \n)


def text_opener(text: str) -> OpenText:
    """The :data:`OpenText` of text in memory."""
    return lambda: io.StringIO(text)


def _chomp(line: str) -> str:
    return line[:-1] if line.endswith("\n") else line


def _data_lines(f: TextIO) -> Iterator[tuple[int, str]]:
    """(line number, line) of the non-blank lines after the header of the open text ``f``
    (its first line not yet read); numbers are 1-based."""
    for i, ln in enumerate(f, start=2):
        ln = _chomp(ln)
        if ln.strip():
            yield i, ln


_WELL_QUOTED = re.compile(r'"(?:[^"]|"")*"\Z')


def _stray_quote(line: str, sep: str) -> bool:
    """A field of ``line`` begins with a quote but is not one well-formed quoted field
    (``"..."`` with inner quotes doubled), so CSV quoting would change or join it."""
    return any(f.startswith('"') and not _WELL_QUOTED.match(f) for f in line.split(sep))


def _tsv_quoting(path: Path, open_text: OpenText, sep: str) -> str:
    """``auto`` quoting of a tab-separated file: ``csv`` unless reading quotes as CSV quoting
    would change or merge rows of a file whose lines are all complete without quoting.

    Files whose lines are incomplete without quoting, and fields quoted as RFC 4180 writes
    them, read as CSV silently. In a file whose lines all have the header's number of fields,
    a field that begins with a stray ``"`` (as in unquoted exports and ``paste`` output) is
    refused when CSV quoting would merge lines into one row, and warned about when it would
    only remove the quotes. The text is read line by line (``open_text``), never held whole.

    Raises:
        InputError: a quoted field would span lines of an otherwise complete file.
    """
    n_lines = n_quoted = first = 0
    with open_text() as f:
        n_sep = _chomp(f.readline()).count(sep)
        for i, ln in _data_lines(f):
            if ln.count(sep) != n_sep:
                return "csv"  # some lines are incomplete without quoting: the file is quoted
            n_lines += 1
            if '"' in ln and _stray_quote(ln, sep):
                n_quoted += 1
                first = first or i
    if not n_quoted:
        return "csv"  # no quotes, quotes only inside fields, or well-formed quoted fields
    with open_text() as f:
        n_rows = sum(1 for row in csv.reader(f, delimiter=sep) if any(row)) - 1
    if n_rows != n_lines:
        raise InputError(
            f"'{path}' has {n_lines} lines of data, but reading quotes as CSV quoting "
            f"would give {n_rows} rows: the quote opening a field on line {first} runs on into "
            "later lines and would merge them into one document. If the file has no quoting "
            "(made with paste or exported unquoted), pass {quoting} none to read every line as "
            "it is; if its quoted fields really span lines, pass {quoting} csv",
            params=["quoting"]
        )
    warnings.warn(
        f"{n_quoted} line(s) of '{path}' have a field that begins with a quote (first: "
        f"line {first}); they are read as CSV quoting, which removes the quotes. If the quotes "
        "are part of the text, pass --quoting none; --quoting csv silences this",
        FrameWarning, stacklevel=5)
    return "csv"


def _check_unquoted_fields(path: Path, open_text: OpenText, sep: str, n_fields: int) -> None:
    """With quoting off, every line must have the header's number of fields."""
    with open_text() as f:
        f.readline()
        for i, ln in _data_lines(f):
            if ln.count(sep) + 1 != n_fields:
                raise InputError(
                    f"'{path}', line {i}: {ln.count(sep) + 1} field(s) where the header has "
                    f"{n_fields} (read with {{quoting}} none, so every line is one row); "
                    f"remove the extra delimiters {sep!r} or add the missing fields",
                    params=["quoting"]
                )


def delimited_options(path: Path, open_text: OpenText, sep: str, text_col: str | None,
                      id_col: str | None, quoting: str = "auto") -> dict:
    """The :func:`pandas.read_csv` options of delimited text, after the checks its quoting
    needs. ``quoting``: ``csv`` (RFC 4180), ``none`` (every line one row, quotes are text),
    ``auto`` (``csv``, with the checks of :func:`_tsv_quoting` for tabs). The options hold the
    header (``names`` of the columns, not passed to pandas) under ``"header_names"``.

    Raises:
        InputError: an unknown ``quoting``, an ambiguous quoted TSV, a line with another
            number of fields than the header (``quoting="none"``).
    """
    if check_quoting(quoting) == "auto":
        quoting = _tsv_quoting(path, open_text, sep) if sep == "\t" else "csv"
    with open_text() as f:
        first_line = _chomp(f.readline())
    if quoting == "none":
        header = first_line.split(sep)
        _check_unquoted_fields(path, open_text, sep, len(header))
    else:
        header = next(csv.reader(io.StringIO(first_line), delimiter=sep), [])
    tcol = text_col or "text"
    na_values = {c: ([""] if c == tcol else _NA_VALUES) for c in header}
    # the text and id columns stay text ("NA" is a tweet; id "007" keeps its zeros)
    as_text = {c: str for c in (tcol, id_col or "doc_id") if c in header}
    return {"sep": sep, "dtype": as_text or None, "keep_default_na": False,
            "na_values": na_values, "engine": "c", "header_names": header,
            "quoting": csv.QUOTE_NONE if quoting == "none" else csv.QUOTE_MINIMAL}


def parse_error(path: Path, fmt: str, exc: Exception) -> InputError:
    return InputError(f"cannot parse '{path}' as {fmt.upper()}: {exc}")


def check_index(df: pd.DataFrame, path: Path, header: list, sep: str) -> None:
    """Refuse rows with more fields than the header: pandas would quietly turn the first
    field(s) into an index and shift the columns."""
    if not isinstance(df.index, pd.RangeIndex):
        raise InputError(
            f"the rows of '{path}' have more fields than its header ({len(header)}); quote "
            f"fields that contain the delimiter {sep!r}, or fix the header"
        )


def _read_delimited(path: Path, text: str, sep: str, fmt: str, text_col: str | None,
                    id_col: str | None, quoting: str = "auto") -> pd.DataFrame:
    """Parse delimited text (:func:`delimited_options`)."""
    opts = delimited_options(path, text_opener(text), sep, text_col, id_col, quoting)
    header = opts.pop("header_names")
    try:
        df = pd.read_csv(io.StringIO(text), **opts)
    except (pd.errors.ParserError, ValueError) as exc:
        raise parse_error(path, fmt, exc) from exc
    check_index(df, path, header, sep)
    return df


