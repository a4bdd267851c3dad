"""The response cache of ``annotate``: one SQLite row per (run, prompt hash, text hash).

The run (the ``model`` column) is the coder's identity: a local model's folder, or an
endpoint's URL, model and the settings that change an answer
(:attr:`quantformer.models.llm_endpoint.EndpointLM.identity`); the prompt hash covers the
codebook and the k-shot examples. The output file's name is no part of the key, so the same
run written to another file reads every code from the cache. Every finished code (coded or
unparsed, never failed) is committed as soon as it is computed, so a rerun, or a run resumed
after Ctrl-C, a killed process or a failed endpoint, costs only the documents still missing.
The cache holds codes, raw answers and the reasons of unparsed ones, never an API key.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

from .._core.errors import InputError

_SCHEMA = """CREATE TABLE IF NOT EXISTS codes (
    model TEXT NOT NULL, prompt_hash TEXT NOT NULL, text_hash TEXT NOT NULL,
    label TEXT, probs TEXT, raw TEXT,
    PRIMARY KEY (model, prompt_hash, text_hash))"""


def text_hash(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8), hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CodeCache:
    """A SQLite file of finished codes (see the module docstring).

    Args:
        path: the cache file (created when missing).

    Raises:
        InputError: the file cannot be opened or is not a SQLite database.
    """

    def __init__(self, path: str | os.PathLike):
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
            self.db.execute(_SCHEMA)
            self.db.commit()
        except (sqlite3.Error, OSError) as exc:
            raise InputError(f"{{cache}} '{path}' cannot be used as a SQLite cache ({exc})",
                             params=["cache"]) from None

    def get(self, model: str, prompt_hash: str, thash: str) -> tuple | None:
        """``(label, probs or None, raw, why, reason)`` of a finished code (``why``: the key of
        the reason its probabilities are missing, or None; ``reason``: why it is unparsed, or
        None), or None."""
        row = self.db.execute("SELECT label, probs, raw FROM codes WHERE model=? AND "
                              "prompt_hash=? AND text_hash=?",
                              (model, prompt_hash, thash)).fetchone()
        if row is None:
            return None
        probs = json.loads(row[1]) if row[1] else None
        if isinstance(probs, dict):  # no probabilities, and why
            return row[0], None, row[2], probs.get("why"), probs.get("reason")
        return row[0], probs, row[2], None, None

    def put(self, model: str, prompt_hash: str, thash: str, label: str | None,
            probs: list | None, raw: str | None, why: str | None = None,
            reason: str | None = None) -> None:
        """Store one finished code (``why``: the key of the reason ``probs`` is None;
        ``reason``: why the code is unparsed) and commit it."""
        stored = json.dumps(probs) if probs is not None else (
            json.dumps({"why": why, "reason": reason}) if why or reason else None)
        self.db.execute("INSERT OR REPLACE INTO codes VALUES (?,?,?,?,?,?)",
                        (model, prompt_hash, thash, label, stored, raw))
        self.db.commit()

    def close(self) -> None:
        self.db.close()
