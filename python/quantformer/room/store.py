"""The coding room's project file: one SQLite database (Python's ``sqlite3``, write-ahead log).

Every code is one row, committed (``synchronous=FULL``) before the request that made it
returns, so closing the browser, killing the server or losing power loses nothing that the
page showed as coded. Nothing is ever overwritten: "back" marks the coder's last code as
undone, a new code of the same document is a new row, and a document's current code for a
coder is their latest row that is not undone. Tables:

``meta``      key/value: corpus fingerprint and size, codebook (JSON), strategy, created,
              ``machine_coders`` (names of coders whose codes were imported from a
              language model, :mod:`quantformer.room.machine`).
``codes``     doc_id, coder, label (None for skip / not applicable), status (``code``,
              ``skip``, ``not_applicable``), strategy that showed the document, the model's
              guess when it was accepted, time (UTC, ISO 8601), undone (0/1).
``comments``  doc_id, coder, text, time.
``resolved``  doc_id, label, coder, time: the reconciled code of a disagreement.
``rounds``    one row per retraining: n_codes, cross-validated macro-F1, agreement (Cohen's
              kappa) of the predictions with the previous round's, time.
``versions``  doc_id, coder, version: how many times the coder's code of the document
              changed (a code, a skip or an undo each add one; 0: never coded).

A coder may code in two tabs or windows of one link. Each write carries the version of the
document the page last saw; a write against an older version is refused (:class:`Conflict`,
the server's 409 answer) with the code the other tab wrote, so that no code is replaced
silently and "back" never takes back a code the page did not show. The check and the write
are one transaction (a primary-key look-up of ``versions``).

A project belongs to one corpus: its fingerprint (SHA-256 over the sorted doc_ids and texts)
is stored at creation, and opening it with another corpus is refused.

A project file is marked as one: SQLite's ``application_id`` is ``APPLICATION_ID`` ("QFCO")
and ``user_version`` the schema version (``SCHEMA_VERSION``, 2; version 1 had no ``versions``
table). A project of an earlier version is read as it is, and migrated in place when opened
for writing: ``versions`` is filled from the codes (one per code row and one per undone row,
the count every write since would have made), in one transaction. A project of a later
version (a newer quantformer) is refused, untouched. A file without the mark (another
application's database) is refused before anything is written into it; a project made before
the mark (exactly the tables above, a corpus fingerprint in ``meta``) gets the mark when opened
for writing. A coding room holds an exclusive lock (``flock``) on its project file while it
serves, so a second server on the same file is refused (several coders share one server
with a link each).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from ..io.writable import check_project_file

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
CREATE TABLE IF NOT EXISTS versions (
  doc_id TEXT NOT NULL, coder TEXT NOT NULL, version INTEGER NOT NULL,
  PRIMARY KEY (doc_id, coder)) WITHOUT ROWID;
"""
# schema 1 -> 2: the versions every write since the start would have made
MIGRATE_VERSIONS = """
DELETE FROM versions;
INSERT INTO versions SELECT doc_id, coder, COUNT(*) + SUM(undone) FROM codes
  GROUP BY doc_id, coder;
"""
BUMP = ("INSERT INTO versions VALUES (?, ?, 1) ON CONFLICT (doc_id, coder) "
        "DO UPDATE SET version = version + 1")
APPLICATION_ID = 0x5146434F  # "QFCO" (SQLite PRAGMA application_id, a signed 32-bit int)
SCHEMA_VERSION = 2
TABLES = {"meta", "codes", "comments", "resolved", "rounds", "versions", "sqlite_sequence"}
STATUSES = ("code", "skip", "not_applicable")


class Conflict(Exception):
    """A write against a version of the document older than the project's: the coder's code
    of it changed in another tab or window since the page showed it.

    Attributes:
        doc_id: the document.
        version: its current version (send it back to replace the code anyway).
        status, label: its current code (``status`` None: no code, e.g. undone there).
    """

    def __init__(self, doc_id: str, version: int, status: str | None, label: str | None):
        super().__init__(f"document {doc_id} was changed in another tab or window")
        self.doc_id, self.version, self.status, self.label = doc_id, version, status, label


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
            schema = db.execute("PRAGMA user_version").fetchone()[0]
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
    if app_id == APPLICATION_ID and schema > SCHEMA_VERSION:
        raise InputError(f"{{project}} '{path}' was made by a newer quantformer (project "
                         f"version {schema}; this one knows up to {SCHEMA_VERSION}), and "
                         "nothing was written into it; update quantformer to open it",
                         params=["project"])


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
                self.migrate()
        except sqlite3.DatabaseError as exc:
            self.release()
            raise InputError(f"{{project}} '{path}' is not a coding-room project ({exc}); "
                             "give a new file name", params=["project"]) from None

    def migrate(self) -> None:
        """Mark the file as a project of ``SCHEMA_VERSION``, migrating an earlier one in
        place (one transaction: an interrupted migration leaves the earlier version)."""
        with self.lock, self.transaction():
            if self.db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                for statement in MIGRATE_VERSIONS.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
            self.db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

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
                 strategy: str | None = None, guess_accepted: bool = False,
                 version: int | None = None) -> int:
        """Commit one code (or skip / not applicable); returns the document's new version.

        Args:
            version: the version of the document the coder's page last saw; None: write
                whatever the version (no check).

        Raises:
            Conflict: ``version`` is not the current one (nothing is written).
        """
        if status not in STATUSES:
            raise InputError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        with self.lock, self.transaction():
            current = self._version(doc_id, coder)
            if version is not None and int(version) != current:
                raise self._conflict(doc_id, coder, current)
            self.db.execute(
                "INSERT INTO codes (doc_id, coder, label, status, strategy, guess_accepted, "
                "time) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (doc_id, coder, label, status, strategy, int(guess_accepted), now()))
            self.db.execute(BUMP, (doc_id, coder))
            return current + 1

    def undo(self, coder: str, check: bool = False, doc_id: str | None = None,
             version: int | None = None) -> tuple[str, int] | None:
        """Mark ``coder``'s last code as undone; returns its doc_id and the document's new
        version (None: nothing to undo).

        Args:
            check: undo only the last code the coder's page last saw: ``doc_id`` and
                ``version`` (``doc_id`` None: the page saw no code to undo).

        Raises:
            Conflict: the coder's last code is now another one (coded in another tab or
                window since); nothing is undone.
        """
        with self.lock, self.transaction():
            row = self.db.execute(
                "SELECT id, doc_id FROM codes WHERE coder = ? AND undone = 0 "
                "ORDER BY id DESC LIMIT 1", (coder,)).fetchone()
            last = None if row is None else str(row[1])
            current = 0 if last is None else self._version(last, coder)
            saw = None if doc_id is None else (str(doc_id), version)
            if check and saw != (None if last is None else (last, current)):
                if last is None:  # the code it saw was undone in another tab
                    raise self._conflict(str(doc_id), coder, self._version(str(doc_id), coder))
                raise self._conflict(last, coder, current)
            if row is None:
                return None
            self.db.execute("UPDATE codes SET undone = 1 WHERE id = ?", (row[0],))
            self.db.execute(BUMP, (last, coder))
            return last, current + 1

    @contextlib.contextmanager
    def transaction(self):
        """BEGIN IMMEDIATE, COMMIT at the end of the block, ROLLBACK on an exception (the
        caller holds ``self.lock``)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _version(self, doc_id: str, coder: str) -> int:
        row = self.db.execute("SELECT version FROM versions WHERE doc_id = ? AND coder = ?",
                              (doc_id, coder)).fetchone()
        return 0 if row is None else int(row[0])

    def _conflict(self, doc_id: str, coder: str, version: int) -> Conflict:
        row = self.db.execute(
            "SELECT status, label FROM codes WHERE doc_id = ? AND coder = ? AND undone = 0 "
            "ORDER BY id DESC LIMIT 1", (doc_id, coder)).fetchone()
        return Conflict(doc_id, version, *(row or (None, None)))

    def versions(self) -> dict[tuple[str, str], int]:
        """{(doc_id, coder): version} of every document a coder ever coded."""
        with self.lock:
            return {(str(d), str(c)): int(v) for d, c, v in
                    self.db.execute("SELECT doc_id, coder, version FROM versions")}

    def machine_coders(self) -> list[str]:
        """The names of the project's machine coders (``meta`` ``machine_coders``)."""
        return list(self.get("machine_coders", []))

    def replace_machine_coder(self, coder: str, codes: list[tuple[str, str]]) -> None:
        """Replace every code of machine coder ``coder`` with ``codes`` ((doc_id, label)
        pairs), marking the name as a machine coder: one transaction.

        Raises:
            InputError: a human coder of the project codes under that name (nothing is
                written).
        """
        with self.lock, self.transaction():
            row = self.db.execute("SELECT value FROM meta WHERE key = 'machine_coders'")
            known = json.loads((row.fetchone() or ["[]"])[0])
            if coder not in known and self.db.execute(
                    "SELECT 1 FROM codes WHERE coder = ? LIMIT 1", (coder,)).fetchone():
                raise InputError(f"{{coder_name}} '{coder}' is a human coder of this project; "
                                 "give the machine coder another name", params=["coder_name"])
            self.db.execute("DELETE FROM codes WHERE coder = ?", (coder,))
            self.db.execute("DELETE FROM versions WHERE coder = ?", (coder,))
            time = now()
            self.db.executemany(
                "INSERT INTO codes (doc_id, coder, label, status, strategy, time) "
                "VALUES (?, ?, ?, 'code', 'machine', ?)",
                [(doc, coder, label, time) for doc, label in codes])
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('machine_coders', ?)",
                            (json.dumps(sorted(set(known) | {coder})),))

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


def check_codebook_change(store: Store, codebook: list[dict]) -> None:
    """A resumed project may get a new codebook only if every label already used is in it.

    Raises:
        InputError: a label already used is missing from ``codebook``.
    """
    used = set(store.current_codes().query("status == 'code'")[LABEL_COLUMN])
    missing = sorted(used - {e[LABEL_COLUMN] for e in codebook})
    if missing:
        raise InputError(f"{{project}} '{store.path}' has codes with label(s) "
                         f"{', '.join(missing)}, which the codebook lacks; keep them in "
                         "{labels}", params=["project", "labels"])
