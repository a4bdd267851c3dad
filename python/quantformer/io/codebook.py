"""The codebook: the researcher's categories, as labels with their keys, descriptions and
examples. The coding room (:mod:`quantformer.room`) shows it, and a language model codes from
it (``annotate``, ``compare``'s LLM).

From ``labels`` (names only) or a file: JSON (a list of objects with ``label`` and optional
``description``, ``examples`` (a list) and ``key``) or CSV/TSV (columns ``label``
and optional ``description``, ``examples`` (several separated by ``|``) and ``key``). The k-th
label is coded with the digit key k (1-9); a codebook of more than nine labels names a key of
one character for each label. The keys of the coding room's own actions are reserved.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .._core.errors import InputError
from .columns import LABEL_COLUMN

# the coding room page's own keys (see room/static/app.js): skip, not applicable, back,
# comment, guess, reconcile, fine-tune now, done
RESERVED_KEYS = {"s": "skip", "n": "not applicable", "b": "back", "c": "comment",
                 "g": "show the model's guess", "a": "accept the guess",
                 "r": "reconciliation view", "f": "fine-tune now", "q": "done",
                 "0": "(unused)"}


def make_codebook(labels=None, path: str | os.PathLike | None = None) -> list[dict]:
    """The codebook as a list of ``{"label", "key", "description", "examples"}``.

    Args:
        labels: label names (a list, or one comma-separated string).
        path: a codebook file (see the module docstring); exactly one of the two.

    Raises:
        InputError: neither or both given, an entry without a label (its number named: a
            JSON entry, a CSV/TSV row), fewer than two labels, duplicate labels or labels
            equal up to case (``toxic,Toxic``), more
            than nine labels without a key each, a key that is not one character, taken twice
            or reserved for an action of the page.
    """
    if (labels is None) == (path is None):
        raise InputError("give the labels with {labels} (e.g. a,b,c) or a codebook file with "
                         "{codebook}, one of the two", params=["labels", "codebook"])
    if path is not None:
        entries = read_codebook_file(path)
        noun = "entry" if Path(path).suffix.lower() == ".json" else "row"
        return check_codebook(entries, source=f"'{path}'", noun=noun)
    if isinstance(labels, str):
        labels = labels.split(",")
    entries = [{LABEL_COLUMN: str(x).strip()} for x in labels if str(x).strip()]
    return check_codebook(entries)


def read_codebook_file(path: str | os.PathLike) -> list[dict]:
    """Entries of a JSON or tabular codebook file.

    Raises:
        InputError: missing or unreadable file, no ``label`` column / key.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{{codebook}} '{path}' does not exist", params=["codebook"])
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"{{codebook}} '{path}' is not valid JSON ({exc})",
                             params=["codebook"]) from None
        if not isinstance(data, list) or not all(isinstance(e, dict) and LABEL_COLUMN in e
                                                 for e in data):
            raise InputError(f"{{codebook}} '{path}' must be a JSON list of objects with a "
                             "'label' (and optional 'description', 'examples', 'key')",
                             params=["codebook"])
        return data
    import pandas as pd

    if p.suffix.lower() not in (".csv", ".tsv"):
        raise InputError(f"{{codebook}} '{path}': give a .json, .csv or .tsv file",
                         params=["codebook"])
    df = pd.read_csv(p, sep="\t" if p.suffix.lower() == ".tsv" else ",", dtype=str)
    if LABEL_COLUMN not in df.columns:
        raise InputError(f"{{codebook}} '{path}' has no 'label' column; its columns are: "
                         f"{', '.join(map(str, df.columns))}", params=["codebook"])
    entries = []
    for row in df.to_dict("records"):
        ex = row.get("examples")
        row["examples"] = [e.strip() for e in str(ex).split("|") if e.strip()] \
            if isinstance(ex, str) else []
        entries.append({k: v for k, v in row.items() if k in
                        (LABEL_COLUMN, "description", "examples", "key")
                        and (v == v or k == LABEL_COLUMN)})  # an empty label: checked
    return entries


def _missing(value) -> bool:
    """Whether a codebook cell holds no label: None, NaN (an empty CSV field, R's NA) or
    only white space."""
    return value is None or value != value or not str(value).strip()


def check_labels_present(entries: list[dict], source: str | None = None,
                         noun: str = "entry") -> None:
    """Refuse entries without a label (missing, None, NaN, empty or blank), naming each by
    its number (1-based: a JSON entry, or a CSV/TSV row after the header, which is an R
    data frame's row), whatever the codebook's format.

    Raises:
        InputError: naming the numbers and the fix.
    """
    empty = [k for k, e in enumerate(entries, start=1) if _missing(e.get(LABEL_COLUMN))]
    if not empty:
        return
    which = (f"{noun} {empty[0]} has" if len(empty) == 1 else
             f"{'entries' if noun == 'entry' else noun + 's'} "
             f"{', '.join(map(str, empty[:10]))} have")
    fix = (f" no label (an empty or missing '{LABEL_COLUMN}'); give every {noun} a label, or "
           f"remove the {noun}")
    where = f"{{codebook}} {source}: " if source else "{codebook}: "
    # a row of a file is counted after its header: the file's line too (R: a frame's row)
    lines = (f" (line{'s' if len(empty) > 1 else ''} "
             f"{', '.join(str(k + 1) for k in empty[:10])} of the file)" if noun == "row" else "")
    verb = " has" if len(empty) == 1 else " have"
    raise InputError(where + which.removesuffix(verb) + lines + verb + fix, params=["codebook"],
                     r_message="{codebook}: " + which + fix)


def check_codebook(entries: list[dict], source: str | None = None,
                   noun: str = "entry") -> list[dict]:
    """Normalised entries with a key each (see :func:`make_codebook` for the errors; an entry
    without a label: :func:`check_labels_present`, ``source`` and ``noun`` name it)."""
    check_labels_present(entries, source, noun)
    out = [{LABEL_COLUMN: str(e[LABEL_COLUMN]).strip(), "key": str(e.get("key") or "").strip(),
            "description": str(e.get("description") or ""),
            "examples": [str(x) for x in (e.get("examples") or [])]} for e in entries]
    names = [e[LABEL_COLUMN] for e in out]
    if len(names) < 2:
        raise InputError(f"a codebook needs at least two labels, this one has {len(names)} "
                         f"({', '.join(names) or 'none'}); add the other class (e.g. "
                         "'other')", params=["labels"])
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise InputError(f"codebook labels must be distinct; repeated: {', '.join(dup)}",
                         params=["labels"])
    folded = [x.casefold() for x in names]
    same = sorted({x for x in names if folded.count(x.casefold()) > 1})
    if same:
        raise InputError(f"codebook labels must differ by more than case; equal up to case: "
                         f"{', '.join(same)}", params=["labels"])
    if len(out) > 9 and not all(e["key"] for e in out):
        raise InputError(f"the codebook has {len(out)} labels, more than the nine digit keys; "
                         "give every label a one-character 'key' in a codebook file "
                         "({codebook})", params=["codebook"])
    for k, e in enumerate(out, start=1):
        e["key"] = e["key"] or str(k)
    check_keys(out)
    return out


def check_keys(entries: list[dict]) -> None:
    keys = [e["key"] for e in entries]
    bad = [k for k in keys if len(k) != 1]
    taken = sorted({k for k in keys if keys.count(k) > 1})
    reserved = sorted({k.lower() for k in keys} & set(RESERVED_KEYS))
    if bad or taken or reserved:
        what = (f"keys must be one character ({', '.join(map(repr, bad))})" if bad else
                f"key(s) {', '.join(taken)} are given to two labels" if taken else
                f"key(s) {', '.join(reserved)} are the page's own ("
                + ", ".join(f"{k} = {RESERVED_KEYS[k]}" for k in reserved) + ")")
        raise InputError(f"codebook keys: {what}; give each label its own key",
                         params=["codebook"])
