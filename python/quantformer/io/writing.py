"""Writing frames and figures: Parquet, CSV, TSV, JSONL and RDS (a plain R data frame that
``quanteda::corpus(readRDS(f))`` accepts), every write atomic (a temporary file renamed over
the target), whole or streamed in chunks (:class:`FrameWriter`).
"""


from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.atomic import atomic_file, temporary_sibling, write_json
from .._core.errors import InputError
from .._core.version import __version__
from .formats import detect_format

#: the record of a run is written beside its output file under the output's full name plus
#: this suffix (``--out preds.parquet`` -> ``preds.parquet.json``), as ``annotate`` does
RECORD_SUFFIX = ".json"


# --------------------------------------------------------------------------------------------
# writing


def output_record_path(out: str | os.PathLike) -> Path:
    """Where the record of the output file ``out`` goes (:data:`RECORD_SUFFIX`)."""
    return Path(str(out) + RECORD_SUFFIX)


def write_output_record(out: str | os.PathLike, verb: str, precision: dict, **fields) -> Path:
    """Write the record of a run beside its output file ``out`` (atomically; an earlier
    record of the same file is replaced): ``verb``, the caller's ``fields`` (model, input,
    counts), ``precision`` (the precision used: ``precision`` -- ``fp32``, ``bf16``, ``fp16``,
    ``onnx fp32`` or ``onnx int8``, never ``auto`` --, ``requested`` and ``reason``; see
    :func:`quantformer.models.precision.record`) and the ``quantformer`` version.

    Returns:
        The record's path (:func:`output_record_path`).
    """
    return write_json({"verb": verb, "output": str(out), **fields, "precision": precision,
                       "quantformer": __version__}, output_record_path(out))


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


