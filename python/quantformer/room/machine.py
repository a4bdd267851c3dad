"""A machine coder in the coding room: a language model's codes (``quantformer annotate``'s
output), a classifier's predictions (``predict``'s or ``zeroshot``'s, ``predicted``) or any
codes frame with ``doc_id``, ``label`` and optionally ``coder`` (read as
:func:`quantformer.io.codes.read_machine_codes` reads every machine coder's output) imported
into a project as one coder, to be validated against the human coders, not trusted.

The field's advice (Ziems et al. 2024, "Can large language models transform computational
social science?", Computational Linguistics; Bucher & Martini 2024) is to treat a language
model as one coder in a team and to check it against human codes on the same documents.
So a machine coder's codes:

* never train the room's light classifier and never count in a final code (``--final``);
* never make a document "coded" for the humans' queues, and are never shown to a coder
  (every human code is therefore blind to them);
* are compared with each human coder's codes on the documents both coded (Krippendorff's
  alpha and Cohen's kappa in the agreement panel), and where they differ the document is
  listed in the reconciliation view, marked as a disagreement with the machine.

The import is one transaction: every check passes before anything is written, and a
re-import of the same coder replaces their codes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from .._core.errors import InputError
from ..io.codes import CODER_COLUMN, read_machine_codes
from ..io.columns import ID_COLUMN, LABEL_COLUMN
from .store import Store, check_codebook_change

SHOW = 5  # doc_ids or labels named in an error


def _named(values) -> str:
    values = sorted({str(v) for v in values})
    more = f" (and {len(values) - SHOW} more)" if len(values) > SHOW else ""
    return ", ".join(values[:SHOW]) + more


def machine_codes(codes: pd.DataFrame, ids, labels: list[str], coder: str | None = None,
                  source: str = "codes") -> tuple[str, pd.DataFrame, int]:
    """Check a machine coder's codes frame against a project's documents and labels.

    Args:
        codes: ``doc_id``, ``label``, optional ``coder`` (one name) and ``unparsed``.
        ids: the project corpus' doc_ids.
        labels: the project's labels (its codebook).
        coder: the coder's name (default: the frame's ``coder`` value).
        source: the frame's file, for messages.

    Returns:
        ``(name, frame of doc_id and label, rows skipped)``: rows marked ``unparsed`` or
        without a label are skipped and counted.

    Raises:
        InputError: missing columns, no or several coder names, duplicate doc_ids, doc_ids
            the corpus lacks, labels the codebook lacks, no code left.
    """
    missing = [c for c in (ID_COLUMN, LABEL_COLUMN) if c not in codes.columns]
    if missing:
        raise InputError(f"{{add_coder}} '{source}' lacks column(s) {', '.join(missing)}; "
                         "give a codes file with doc_id and label (as `quantformer annotate` "
                         "writes)", params=["add_coder"])
    name = coder if coder is not None else _coder_name(codes, source)
    if not str(name).strip():
        raise InputError("{coder_name} must be a non-empty name", params=["coder_name"])
    skip = codes[LABEL_COLUMN].isna()
    if "unparsed" in codes.columns:
        skip |= codes["unparsed"].fillna(False).astype(bool)
    kept = pd.DataFrame({ID_COLUMN: codes.loc[~skip, ID_COLUMN].astype(str),
                         LABEL_COLUMN: codes.loc[~skip, LABEL_COLUMN].astype(str)})
    twice = kept[ID_COLUMN][kept[ID_COLUMN].duplicated()]
    if len(twice):
        raise InputError(f"{{add_coder}} '{source}' codes document(s) {_named(twice)} more "
                         "than once; give one code per document", params=["add_coder"])
    unknown = set(kept[ID_COLUMN]) - {str(i) for i in ids}
    if unknown:
        raise InputError(f"{{add_coder}} '{source}' has {len(unknown)} doc_id(s) the "
                         f"project's corpus lacks: {_named(unknown)}; code the project's "
                         "corpus (the same {input})", params=["add_coder", "input"])
    strange = set(kept[LABEL_COLUMN]) - set(labels)
    if strange:
        raise InputError(f"{{add_coder}} '{source}' has label(s) {_named(strange)}, which the "
                         f"project's codebook lacks ({', '.join(labels)}); code with the "
                         "project's codebook", params=["add_coder"])
    if kept.empty:
        raise InputError(f"{{add_coder}} '{source}' has no parsed code", params=["add_coder"])
    return str(name).strip(), kept, int(skip.sum())


def machine_table(codes: str | os.PathLike) -> pd.DataFrame:
    """A machine coder's file as ``doc_id``, ``label`` (the hard labels: ``predicted``, else
    ``label``; None where unparsed) and, when the file has it, ``coder``."""
    read = read_machine_codes(codes, f"machine coder's codes file '{codes}'", probabilities=False)
    table = pd.DataFrame({ID_COLUMN: read.frame[ID_COLUMN], LABEL_COLUMN: read.label})
    if CODER_COLUMN in read.frame.columns:
        table[CODER_COLUMN] = read.frame[CODER_COLUMN].to_numpy()
    return table


def _coder_name(codes: pd.DataFrame, source: str) -> str:
    names = codes[CODER_COLUMN].dropna().astype(str).unique() if CODER_COLUMN in codes.columns else []
    if len(names) != 1:
        what = "no coder column" if len(names) == 0 else f"several coders ({_named(names)})"
        raise InputError(f"{{add_coder}} '{source}' has {what}; name the machine coder with "
                         "{coder_name}", params=["add_coder", "coder_name"])
    return names[0]


def add_machine_coder(project: str | os.PathLike, frame: pd.DataFrame, source: str,
                      codes: str | os.PathLike, coder: str | None = None,
                      codebook: list[dict] | None = None) -> dict:
    """Import a machine coder's codes file into a project: every check first, then one
    transaction replacing that coder's codes (a refused import writes nothing, and creates
    no project file).

    Args:
        project: the project file (created when absent; then ``codebook`` is needed).
        frame: the project's corpus frame (checked against the project's fingerprint).
        source: the corpus' file, for messages.
        codes: the codes file (``.parquet``, ``.csv``, ``.rds``, ...): annotate's codes
            (``label``) or predict's / zeroshot's predictions (``predicted``).
        coder: the coder's name (default: the file's ``coder`` value).
        codebook: the project's codebook (default: the one stored in the project).

    Returns:
        ``{"coder", "n_codes", "n_skipped"}``.

    Raises:
        InputError: see :func:`machine_codes`; no codebook; another corpus; a codebook
            without labels already used; a name a human coder of the project codes under.
    """
    table = machine_table(codes)
    exists = Path(project).is_file() and Path(project).stat().st_size > 0
    if codebook is None and not exists:
        raise InputError(f"{{project}} '{project}' does not exist yet; give its codebook "
                         "with {labels} or {codebook}", params=["project", "labels",
                                                                "codebook"])
    store = Store(project, exclusive=True) if exists else None
    try:
        if store is not None:
            store.bind_corpus(frame, source)  # an existing project: checks, writes nothing
        book = codebook or (store.get("codebook") if store is not None else None)
        if not book:
            raise InputError(f"{{project}} '{project}' has no codebook yet; give it with "
                             "{labels} or {codebook}", params=["project", "labels", "codebook"])
        name, kept, skipped = machine_codes(table, frame[ID_COLUMN],
                                            [e[LABEL_COLUMN] for e in book], coder, str(codes))
        if store is None:
            store = Store(project, exclusive=True)
            store.bind_corpus(frame, source)
        if codebook is not None:
            check_codebook_change(store, codebook)
            store.put("codebook", codebook)
        store.replace_machine_coder(name, list(kept.itertuples(index=False, name=None)))
    finally:
        if store is not None:
            store.close()
    return {"coder": name, "n_codes": len(kept), "n_skipped": skipped}
