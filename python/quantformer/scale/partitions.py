"""Partitions of a corpus and the output folder of a partitioned run: listing a folder, a glob or
a list of files, output names, and the scan that counts rows and checks doc_id uniqueness
across partitions before any work (see :mod:`quantformer.scale.dask`).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from .._core.errors import InputError
from ..io.frames import (
    SeenIds,
    check_input,
    duplicate_ids_error,
    read_whole,
    to_frame,
    warn_numbered,
)
from ..io.formats import detect_format


_GLOB_CHARS = "*?["



# ------------------------------------------------------------------------------------------
# partitions and the output folder


def is_partitioned(inputs, scheduler=None, resume: bool = False, out=None) -> bool:
    """True when ``inputs`` (str or list) names a folder, a glob or several files, when a
    ``scheduler`` or ``resume`` asks for a partitioned run, or when ``out`` is an existing
    folder or a name without an extension; False for one corpus file into one output file."""
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if scheduler or resume or len(items) != 1:
        return True
    if out is not None and (Path(out).is_dir() or not Path(out).suffix):
        return True
    item = str(items[0])
    return Path(item).is_dir() or any(c in item for c in _GLOB_CHARS)


def list_partitions(inputs) -> list[Path]:
    """The partition files of ``inputs``: a folder (its files, sorted, hidden ones left out),
    a glob (sorted matches) or a list of files and globs (in the order given).

    Raises:
        InputError: nothing matches, a file does not exist, a file is listed twice.
    """
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    parts: list[Path] = []
    for item in map(str, items):
        p = Path(item)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        elif any(c in item for c in _GLOB_CHARS):
            found = sorted(Path(f) for f in glob.glob(item) if Path(f).is_file())
        elif p.is_file():
            found = [p]
        else:
            raise InputError(f"{{inputs}} '{item}' is neither a file, a folder nor a glob that "
                             "matches files; check the path", params=["inputs"])
        if not found:
            raise InputError(f"{{inputs}} '{item}' matches no files; check the path or "
                             "pattern", params=["inputs"])
        parts.extend(found)
    seen = [str(p.resolve()) for p in parts]
    dup = sorted({s for s in seen if seen.count(s) > 1})
    if dup:
        raise InputError(f"{{inputs}} lists {dup[0]} more than once; give each partition once",
                         params=["inputs"])
    return parts


def output_names(parts: list[Path]) -> list[str]:
    """One output file name per partition: its name with the extension replaced by
    ``.parquet``. Raises InputError when two partitions would get the same output name."""
    names = [p.stem + ".parquet" for p in parts]
    clash = [n for n in dict.fromkeys(names) if names.count(n) > 1]
    if clash:
        who = [str(p) for p, n in zip(parts, names) if n == clash[0]]
        raise InputError(f"partitions {who[0]} and {who[1]} would both be written to "
                         f"'{clash[0]}'; rename one (outputs are named after their input)")
    return names


# ------------------------------------------------------------------------------------------
# the scan: rows, default-id offsets and doc_id uniqueness across partitions


def _parquet_ids(path: Path, id_col: str | None, text_col: str | None):
    """(row count, ids or None) from a Parquet file's schema, metadata and id column only."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        raise InputError(f"cannot read partition '{path}' as Parquet: {exc}") from exc
    names = pf.schema_arrow.names
    text = text_col or "text"
    if text not in names:
        raise InputError(f"partition '{path}' has no text column '{text}' (columns: "
                         f"{', '.join(names)}); name it with {{text_col}}", params=["text_col"])
    icol = id_col or ("doc_id" if "doc_id" in names else None)
    if icol is not None and icol not in names:
        raise InputError(f"partition '{path}' has no id column '{icol}' (columns: "
                         f"{', '.join(names)}); name it with {{id_col}}", params=["id_col"])
    if pf.metadata.num_rows == 0:
        raise InputError(f"partition '{path}' is empty: it has no documents")
    if icol is None:
        return pf.metadata.num_rows, None
    import pandas as pd

    ids = pf.read(columns=[icol]).column(0).to_pandas()
    ids = ids.astype(object).where(ids.notna(), None)
    if ids.isna().any():
        raise InputError(f"partition '{path}' has documents without an id in '{icol}'; fill "
                         "them in or drop {id_col}", params=["id_col"])
    ids = pd.Series([str(v) for v in ids], dtype=object)
    dup = ids[ids.duplicated()]
    if len(dup):
        raise duplicate_ids_error(f"partition '{path}'", dup.tolist())
    return len(ids), ids


def _frame_ids(path: Path, corpus: dict):
    """(row count, ids or None) of a non-Parquet partition, read whole and validated."""
    p, kind = check_input(path, corpus.get("fmt"))
    raw = read_whole(p, kind, corpus.get("text_col"), corpus.get("id_col"),
                      corpus.get("quoting", "auto"))
    frame = to_frame(raw, text_col=corpus.get("text_col"), id_col=corpus.get("id_col"),
                     label_col=corpus.get("label_col"), source=f"partition '{path}'",
                     warn_label=False)
    has_ids = corpus.get("id_col") is not None or "doc_id" in [str(c) for c in raw.columns]
    return len(frame), frame["doc_id"] if has_ids else None


def scan_partitions(parts: list[Path], corpus: dict) -> tuple[list[int], list[int]]:
    """Rows of every partition and the offset of its default ids; checks doc_id uniqueness
    across partitions (see the module docstring).

    Returns:
        ``(rows, id_offsets)``, one entry per partition.

    Raises:
        InputError: an unreadable or empty partition, a missing column, or a doc_id found in
            two partitions (the id and the later partition named).
    """
    seen = SeenIds()
    rows, offsets, total, numbered = [], [], 0, {}
    for p in parts:
        kind = detect_format(p, corpus.get("fmt"))
        if kind == "parquet":
            n, ids = _parquet_ids(p, corpus.get("id_col"), corpus.get("text_col"))
        else:
            n, ids = _frame_ids(p, corpus)
        if ids is None:
            ids, numbered[p] = _default_ids(total, n), n
        dup = seen.add(ids)
        if dup:
            raise InputError(f"doc_ids must be unique across partitions, but '{dup[0]}' of "
                             f"'{p}' is also in an earlier partition; make ids unique or "
                             "pass another {id_col}", params=["id_col"])
        rows.append(n)
        offsets.append(total)
        total += n
    if numbered:  # one warning for the run, not one per partition
        first = next(iter(numbered))
        more = f" (and {len(numbered) - 1} more)" if len(numbered) > 1 else ""
        warn_numbered(f"partition '{first}'{more}", sum(numbered.values()))
    return rows, offsets


def _default_ids(offset: int, n: int):
    import pandas as pd

    return pd.Series([f"text{i}" for i in range(offset + 1, offset + n + 1)], dtype=object)


