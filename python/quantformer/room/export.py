"""A coding room project's codes as a table (``quantformer code --export``): every coder's
current code with its status, time, strategy and comment, or one final code per document to
train on (the reconciled code, else the code all its coders gave).
"""

from __future__ import annotations

import os

import pandas as pd

from ..io.columns import LABEL_COLUMN
from ..io.writable import check_output_file
from ..io.writing import write_frame
from .store import Store

EXPORT_COLUMNS = ["doc_id", LABEL_COLUMN, "coder", "status", "time", "strategy", "guess_accepted",
                  "comment"]


def final_codes(current: pd.DataFrame, resolved: pd.DataFrame) -> pd.DataFrame:
    """One code per document, to train on: the reconciled code where there is one, else the
    code all its coders gave; documents the coders disagree on without a reconciliation, and
    skipped or not applicable ones, are left out.

    Returns:
        ``doc_id``, ``label``, ``n_coders``, ``source`` (``resolved``, ``agreed`` or
        ``single``) and ``resolved_by`` (the coder who reconciled it; None unless
        ``resolved``), in coding order.
    """
    codes = current[current["status"] == "code"]
    fixed = dict(zip(resolved["doc_id"], resolved[LABEL_COLUMN]))
    by = dict(zip(resolved["doc_id"], resolved["coder"])) if "coder" in resolved else {}
    rows = []
    for doc, group in codes.groupby("doc_id", sort=False):
        labels = set(group[LABEL_COLUMN])
        if doc in fixed:
            rows.append((doc, fixed[doc], len(group), "resolved", by.get(doc)))
        elif len(labels) == 1:
            rows.append((doc, labels.pop(), len(group), "single" if len(group) == 1
                         else "agreed", None))
    return pd.DataFrame(rows, columns=["doc_id", LABEL_COLUMN, "n_coders", "source",
                                       "resolved_by"])


def comments_only(store: Store, current: pd.DataFrame) -> pd.DataFrame:
    """Rows of status ``uncoded`` for each coder's latest comment on a document they have no
    current code of (a comment typed on a document, then "back" before coding it)."""
    rows = store.query(
        "SELECT m.doc_id, NULL AS label, m.coder, 'uncoded' AS status, m.time, NULL AS "
        "strategy, 0 AS guess_accepted, m.text AS comment FROM comments m WHERE m.id IN "
        "(SELECT MAX(id) FROM comments GROUP BY doc_id, coder) ORDER BY m.id")
    have = set(zip(current["doc_id"], current["coder"]))
    keep = [(d, c) not in have for d, c in zip(rows["doc_id"], rows["coder"])]
    return rows[keep].reset_index(drop=True)


def export_codes(project: str | os.PathLike, out: str | os.PathLike,
                 final: bool = False, overwrite: bool = False) -> pd.DataFrame:
    """Write a project's codes to ``out`` (``.csv``, ``.parquet``, ``.rds``, ... by its
    extension; atomically).

    Args:
        project: the project file.
        out: the output file.
        final: one code per document (:func:`final_codes`, from the human coders' codes
            only) instead of every coder's current code with its status, time, strategy and
            comment (``EXPORT_COLUMNS``; a machine coder's rows have strategy ``machine``; a
            comment on a document its coder has no code of, e.g. typed before an undo, is a
            row of status ``uncoded``).
        overwrite: replace an existing ``out`` (default False: refused).

    Returns:
        The frame written.

    Raises:
        InputError: a missing project file, an unknown output format, ``out`` exists
            (without ``overwrite``).
    """
    check_output_file(out, overwrite=overwrite, param="export")
    store = Store(project, create=False)
    try:
        current = store.current_codes()
        if final:  # a machine coder's codes never make a final code
            current = current[~current["coder"].isin(store.machine_coders())]
        extra = None if final else comments_only(store, current)
        table = final_codes(current, store.resolutions()) if final else current if \
            extra.empty else pd.concat([current, extra], ignore_index=True)
    finally:
        store.close()
    if not final:
        table["guess_accepted"] = table["guess_accepted"].astype(bool)
    write_frame(table, out)
    return table
