"""Splitting one big corpus file into Parquet partitions for the partitioned (Dask) path
(``quantformer partition``, :func:`partition_file`; issue 27, point 10).

The partitions keep the file's columns and row order, ``rows`` rows each (the last fewer), named
``<stem>-00001.parquet``, ... so a sorted listing is the file's order; ``predict``, ``zeroshot``
and ``embed`` with ``--input`` the folder then number default ids (``textN``) across the
partitions as they would in the one file. A Parquet input is read one record batch at a time;
other formats are read whole (see :mod:`quantformer.io.frames`) and cut.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from .._core.atomic import atomic_dir
from .._core.errors import InputError
from ..io.formats import detect_format, read_table_file
from ..io.writing import write_frame
from ..io.writable import check_writable


def partition_file(input_path: str | os.PathLike, out: str | os.PathLike, *, rows: int,
                   fmt: str | None = None, overwrite: bool = False) -> list[Path]:
    """Split a corpus file into Parquet files of at most ``rows`` rows in the folder ``out``.

    Args:
        input_path: the corpus file (any format :func:`quantformer.io.frames.read_frame`
            reads).
        out: the folder to write (new or empty; written whole at the end, so a failed run
            leaves nothing).
        rows: rows per partition (a whole number >= 1; e.g. 100,000).
        fmt: the input's format when its extension does not say (``csv``, ``parquet``, ...).
        overwrite: replace a non-empty ``out``.

    Returns:
        The partition paths, in file order.

    Raises:
        InputError: ``rows`` below 1, an input that is missing, empty or unreadable, ``out`` a
            file, non-empty without ``overwrite``, or not writable.
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise InputError(f"{{rows}} must be a whole number of rows of at least 1, not {rows!r}",
                         params=["rows"])
    src = Path(input_path)
    if not src.is_file():
        raise InputError(f"file not found: '{input_path}'", params=["input"])
    kind = detect_format(src, fmt)
    target = _check_out(out, overwrite)
    total, pieces = _pieces(src, kind, fmt, rows)
    if total == 0:
        raise InputError(f"'{input_path}' is empty: it has no documents", params=["input"])
    width = max(5, len(str(math.ceil(total / rows))))
    names = []
    with atomic_dir(target) as tmp:
        for i, piece in enumerate(pieces, start=1):
            names.append(f"{src.stem}-{i:0{width}d}.parquet")
            write_frame(piece.reset_index(drop=True), Path(tmp) / names[-1])
    return [target / n for n in names]


def _check_out(out, overwrite: bool) -> Path:
    d = Path(out)
    if d.exists() and not d.is_dir():
        raise InputError(f"{{out}} '{out}' is a file; partitions go into a folder",
                         params=["out"])
    if d.is_dir() and any(d.iterdir()) and not overwrite:
        raise InputError(f"{{out}} '{out}' exists and is not empty; pass {{overwrite}} or "
                         "choose another {out}", params=["out", "overwrite"])
    return check_writable(d)


def _pieces(src: Path, kind: str, fmt: str | None,
            rows: int) -> tuple[int, Iterator[pd.DataFrame]]:
    """(number of rows, the partitions as frames in file order)."""
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(src)
        except Exception as exc:  # pyarrow raises several types for corrupt files
            raise InputError(f"cannot read '{src}' as Parquet: {exc}") from exc
        return pf.metadata.num_rows, (b.to_pandas() for b in pf.iter_batches(batch_size=rows))
    whole = read_table_file(src, fmt)
    return len(whole), (whole.iloc[i:i + rows] for i in range(0, len(whole), rows))

