"""The coding room's project file: one SQLite database (Python's ``sqlite3``, write-ahead log).

Every code is one row, committed (``synchronous=FULL``) before the request that made it
returns, so closing the browser, killing the server or losing power loses nothing that the
page showed as coded. Nothing is ever overwritten: "back" marks the coder's last code as
undone, a new code of the same document is a new row, and a document's current code for a
coder is their latest row that is not undone. Tables:

``meta``      key/value: corpus fingerprint and size, codebook (JSON), strategy, created.
``codes``     doc_id, coder, label (None for skip / not applicable), status (``code``,
              ``skip``, ``not_applicable``), strategy that showed the document, the model's
              guess when it was accepted, time (UTC, ISO 8601), undone (0/1).
``comments``  doc_id, coder, text, time.
``resolved``  doc_id, label, coder, time: the reconciled code of a disagreement.
``rounds``    one row per retraining: n_codes, cross-validated macro-F1, agreement (Cohen's
              kappa) of the predictions with the previous round's, time.

A project belongs to one corpus: its fingerprint (SHA-256 over the sorted doc_ids and texts)
is stored at creation, and opening it with another corpus is refused.

A project file is marked as one: SQLite's ``application_id`` is ``APPLICATION_ID`` ("QFCO")
and ``user_version`` the schema version. A file without the mark (another application's
database) is refused before anything is written into it; a project made before the mark
(exactly the tables above, a corpus fingerprint in ``meta``) gets the mark when opened for
writing. A coding room holds an exclusive lock (``flock``) on its project file while it
serves, so a second server on the same file is refused (several coders share one server
with a link each).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..._core.errors import InputError
from ...io.writing import write_frame
from ...io.writable import check_output_file, check_project_file

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS codes (
  id INTEGER PRIMARY KEY AUTOINCREMENT, doc_id TEXT NOT NULL, coder TEXT NOT NULL,
  label TEXT, status TEXT NOT NULL, strategy TEXT, guess_accepted INTEGER NOT NULL DEFAULT 0,
  time TEXT NOT NULL, undone INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS codes_coder ON codes (coder, undone, id);
CREATE TABLE IF NOT EXISTS comments (
  id INTEGER PRIMARY KEY AUTOINCREMENT, doc_id TEXT NOT NULL, coder TEXT NOT NULL,
  text TEXT NOT NULL, time TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS resolved (
  doc_id TEXT PRIMARY KEY, label TEXT NOT NULL, coder TEXT NOT NULL, time TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rounds (
  id INTEGER PRIMARY KEY AUTOINCREMENT, n_codes INTEGER NOT NULL, macro_f1 REAL,
  stability REAL, time TEXT NOT NULL);
"""
APPLICATION_ID = 0x5146434F  # "QFCO" (SQLite PRAGMA application_id, a signed 32-bit int)
SCHEMA_VERSION = 1
TABLES = {"meta", "codes", "comments", "resolved", "rounds", "sqlite_sequence"}
STATUSES = ("code", "skip", "not_applicable")
EXPORT_COLUMNS = ["doc_id", "label", "coder", "status", "time", "strategy", "guess_accepted",
                  "comment"]


def now() -> str:
    """The current time in UTC, ISO 8601 with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def corpus_fingerprint(frame: pd.DataFrame) -> str:
    """SHA-256 (hex) over the corpus' doc_ids and texts, sorted by doc_id: the same documents
    in another order give the same fingerprint, an edited text another one."""
    h = hashlib.sha256()
    texts = frame["text"].where(frame["text"].notna(), "")
    for doc_id, text in sorted(zip(frame["doc_id"].astype(str), texts.astype(str))):
        h.update(doc_id.encode() + b"\x1f" + text.encode() + b"\x1e")
    return h.hexdigest()


def check_mark(path: Path, stamp: bool) -> None:
    """Refuse an existing file that is not a coding-room project, reading it only.

    A file with the mark passes; one without it passes only when it holds exactly the
    project's tables and a corpus fingerprint (a project made before the mark; ``stamp``:
    it is then marked by the caller).

    Raises:
        InputError: not an SQLite file, or another application's database.
    """
    fix = ("it is not a coding-room project, and nothing was written into it; give the "
           "project file that `quantformer code` made, or a new file name")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            legacy = app_id == 0 and "meta" in tables and tables <= TABLES and db.execute(
                "SELECT 1 FROM meta WHERE key = 'fingerprint'").fetchone() is not None
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{{project}} '{path}' is not an SQLite file ({exc}); {fix}",
                         params=["project"]) from None
    if app_id != APPLICATION_ID and not legacy:
        what = (f"an SQLite database of another application (application_id {app_id})"
                if app_id else "an SQLite database with other tables ("
                + ", ".join(sorted(tables - TABLES)[:5] or ["none"]) + ")")
        raise InputError(f"{{project}} '{path}' is {what}; {fix}", params=["project"])


def hold(path: Path) -> int | None:
    """An exclusive, non-blocking ``flock`` on the project file (a file descriptor to keep
    open while serving; None where ``flock`` does not exist, on Windows).

    Raises:
        InputError: another coding room serves this project.
    """
    if sys.platform == "win32":
        return None
    import fcntl

    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise InputError(f"{{project}} '{path}' is open in another coding room; one server "
                         "serves a project: stop that one, or code on it through a "
                         "per-coder link of that server (start it with {coders})",
                         params=["project", "coders"]) from None
    return fd


class Store:
    """The project file. Thread-safe: one connection behind a lock (writes take a few
    milliseconds, and every one is committed before the call returns).

    Args:
        path: the ``.sqlite`` file (created when absent).
        create: create the file when it is absent; False for reading (export) only.

    Raises:
        InputError: a read-only file or folder, a file that is not a coding-room project,
            or (``create=False``) a missing file.
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = True,
                 exclusive: bool = False):
        self.path = Path(path)
        self.held = None
        if not create and not self.path.is_file():
            raise InputError(f"{{project}} '{path}' does not exist; start coding with "
                             "`quantformer code --input CORPUS --labels ... --project "
                             f"{path}` first", params=["project"])
        if create:
            check_project_file(self.path)
        new = not self.path.is_file() or self.path.stat().st_size == 0
        if not new:
            check_mark(self.path, stamp=create)
        if exclusive:
            self.held = hold(self.path)
        self.lock = threading.Lock()
        try:
            self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
            if new or create:
                self.db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            self.release()
            raise InputError(f"{{project}} '{path}' is not a coding-room project ({exc}); "
                             "give a new file name", params=["project"]) from None

    def release(self) -> None:
        if self.held is not None:
            os.close(self.held)
            self.held = None

    def close(self) -> None:
        with self.lock:
            self.db.close()
        self.release()

    # -- meta --------------------------------------------------------------------------

    def get(self, key: str, default=None):
        """A ``meta`` value (JSON-decoded), or ``default``."""
        with self.lock:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def put(self, key: str, value) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def bind_corpus(self, frame: pd.DataFrame, source: str) -> None:
        """Record the corpus of a new project; refuse another corpus for an existing one.

        Raises:
            InputError: the project was made for a corpus with another fingerprint.
        """
        fingerprint = corpus_fingerprint(frame)
        known = self.get("fingerprint")
        if known is None:
            self.put("fingerprint", fingerprint)
            self.put("n_docs", len(frame))
            self.put("created", now())
            return
        if known != fingerprint:
            raise InputError(
                f"{{project}} '{self.path}' was made for another corpus ({self.get('n_docs')} "
                f"documents, fingerprint {known[:12]}); {{input}} '{source}' has {len(frame)} "
                f"documents (fingerprint {fingerprint[:12]}). Give the corpus the project was "
                "made with (same doc_ids and texts), or a new project file",
                params=["project", "input"])

    # -- codes -------------------------------------------------------------------------

    def add_code(self, doc_id: str, coder: str, label: str | None, status: str = "code",
                 strategy: str | None = None, guess_accepted: bool = False) -> int:
        """Commit one code (or skip / not applicable); returns its row id."""
        if status not in STATUSES:
            raise InputError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        with self.lock:
            cur = self.db.execute(
                "INSERT INTO codes (doc_id, coder, label, status, strategy, guess_accepted, "
                "time) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (doc_id, coder, label, status, strategy, int(guess_accepted), now()))
            return int(cur.lastrowid)

    def undo(self, coder: str) -> str | None:
        """Mark ``coder``'s last code as undone; returns its doc_id (None: nothing to undo)."""
        with self.lock:
            row = self.db.execute(
                "SELECT id, doc_id FROM codes WHERE coder = ? AND undone = 0 "
                "ORDER BY id DESC LIMIT 1", (coder,)).fetchone()
            if row is None:
                return None
            self.db.execute("UPDATE codes SET undone = 1 WHERE id = ?", (row[0],))
            return str(row[1])

    def add_comment(self, doc_id: str, coder: str, text: str) -> None:
        with self.lock:
            self.db.execute("INSERT INTO comments (doc_id, coder, text, time) VALUES "
                            "(?, ?, ?, ?)", (doc_id, coder, text, now()))

    def resolve(self, doc_id: str, label: str, coder: str) -> None:
        """Record the reconciled code of a document (replaces an earlier resolution)."""
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO resolved VALUES (?, ?, ?, ?)",
                            (doc_id, label, coder, now()))

    def add_round(self, n_codes: int, macro_f1: float | None, stability: float | None) -> None:
        with self.lock:
            self.db.execute("INSERT INTO rounds (n_codes, macro_f1, stability, time) VALUES "
                            "(?, ?, ?, ?)", (n_codes, macro_f1, stability, now()))

    # -- reading -----------------------------------------------------------------------

    def query(self, sql: str, params=()) -> pd.DataFrame:
        with self.lock:
            cur = self.db.execute(sql, params)
            cols = [d[0] for d in cur.description]
            return pd.DataFrame(cur.fetchall(), columns=cols)

    def current_codes(self) -> pd.DataFrame:
        """Every coder's current code of every document they handled (latest row not
        undone), with their latest comment on it: the export's columns, in coding order."""
        return self.query(
            "SELECT c.doc_id, c.label, c.coder, c.status, c.time, c.strategy, "
            "c.guess_accepted, (SELECT m.text FROM comments m WHERE m.doc_id = c.doc_id AND "
            "m.coder = c.coder ORDER BY m.id DESC LIMIT 1) AS comment FROM codes c "
            "WHERE c.id IN (SELECT MAX(id) FROM codes WHERE undone = 0 "
            "GROUP BY doc_id, coder) ORDER BY c.id")

    def resolutions(self) -> pd.DataFrame:
        return self.query("SELECT doc_id, label, coder, time FROM resolved")

    def rounds(self) -> pd.DataFrame:
        return self.query("SELECT n_codes, macro_f1, stability, time FROM rounds ORDER BY id")


def final_codes(current: pd.DataFrame, resolved: pd.DataFrame) -> pd.DataFrame:
    """One code per document, to train on: the reconciled code where there is one, else the
    code all its coders gave; documents the coders disagree on without a reconciliation, and
    skipped or not applicable ones, are left out.

    Returns:
        ``doc_id``, ``label``, ``n_coders``, ``source`` (``resolved``, ``agreed`` or
        ``single``), in coding order.
    """
    codes = current[current["status"] == "code"]
    fixed = dict(zip(resolved["doc_id"], resolved["label"]))
    rows = []
    for doc, group in codes.groupby("doc_id", sort=False):
        labels = set(group["label"])
        if doc in fixed:
            rows.append((doc, fixed[doc], len(group), "resolved"))
        elif len(labels) == 1:
            rows.append((doc, labels.pop(), len(group), "single" if len(group) == 1
                         else "agreed"))
    return pd.DataFrame(rows, columns=["doc_id", "label", "n_coders", "source"])


def export_codes(project: str | os.PathLike, out: str | os.PathLike,
                 final: bool = False) -> pd.DataFrame:
    """Write a project's codes to ``out`` (``.csv``, ``.parquet``, ``.rds``, ... by its
    extension; atomically).

    Args:
        project: the project file.
        out: the output file.
        final: one code per document (:func:`final_codes`) instead of every coder's current
            code with its status, time, strategy and comment (``EXPORT_COLUMNS``).

    Returns:
        The frame written.

    Raises:
        InputError: a missing project file, an unknown output format.
    """
    check_output_file(out)
    store = Store(project, create=False)
    try:
        current = store.current_codes()
        table = final_codes(current, store.resolutions()) if final else current
    finally:
        store.close()
    if not final:
        table["guess_accepted"] = table["guess_accepted"].astype(bool)
    write_frame(table, out)
    return table
