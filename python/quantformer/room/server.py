"""The coding room's local web server: the standard library's ``ThreadingHTTPServer``.

Security (the page shows documents that may be confidential): the server binds to
127.0.0.1 by default, on a free port; every request must carry a random token of this
start (``?token=`` in a page or file URL, the ``X-Token`` header in the page's API calls),
else it is answered 403. One coder (the default): one link is one person, the coder who
started the room (``coder``); a request naming another coder on that link is answered 403
(a second coder needs a link of their own: ``coders``). Several coders on a shared server (``coders``): each coder has a token of
their own, and a request that acts as another coder than its token's is answered 403; requests that change anything are POSTs with a JSON body, which a
page of another origin cannot send with that header without a CORS preflight, which this
server never grants. The request log names the method, path and status only (no query
string, so neither the token nor any document text); a malformed request is logged as
"bad request" without its text. Every request body is read (up to 1 MiB) before any answer,
refused requests included, and a connection is closed after any error answer, so a body
never stays on a keep-alive connection to be read as the next request.

Routes (all need the token):

``GET /``                      the page (``static/index.html``)
``GET /static/<file>``         its script and style
``GET /api/state``             the coder's current document, progress, model, codebook
``GET /api/agreement``         Krippendorff's alpha and Cohen's kappa on the overlap (cached
                               per state of the overlap; ``updating: true`` while a changed
                               overlap is computed in the background: ask again)
``GET /api/reconcile``         documents the coders coded differently, among those the asking
                               coder coded (a document they have yet to code stays blind)
``POST /api/code``             ``{coder, doc_id, label | status, version}``: commit, return the
                               next state
``POST /api/undo``             ``{coder, last}``: undo the coder's last code (``last``: that
                               code as the page last saw it, ``{doc_id, version}`` or null)
``POST /api/comment``          ``{coder, doc_id, text}``
``POST /api/strategy``         ``{strategy}`` (the owner only, else 403)
``POST /api/resolve``          ``{coder, doc_id, label}`` (a coder of that document only, else
                               403; the project records who resolved it)
``GET /api/finetune``          the last "fine-tune now" run: state, model folder, macro-F1
``POST /api/finetune``         start one in the background (the owner only, else 403; 409:
                               one is running; 400: too few codes of some label)
``POST /api/done``             end the coder's session; ``{stop: true}`` from the owner (the
                               coder who started the room, the first link) stops the server
                               (the page asks for a confirmation first); the codes are
                               already in the project file

One coder in two tabs or windows: the state gives the shown document's ``version`` and the
coder's ``last`` code (``{doc_id, version}``, what "back" undoes). A code sends the version of
the document its page last saw, an undo the ``last`` code its page last saw. When the coder's
code changed in another tab since, nothing is written and the answer is 409 with ``conflict``
(``doc_id``, its current ``version``, ``status`` and ``label``) and the current ``state``; the
page says so and offers to keep that code or to replace it (the code sent again with that
version). Without ``version`` (``last``) a code (an undo) is written without the check.

A GET to a POST route is answered 405; ``GET /favicon.ico`` is answered 204 without the token
(a browser asks for it on its own).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

from .._core.atomic import json_default
from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from .finetune_now import Busy, FinetuneNow
from .loop import Room
from .ports import port_error
from .store import Conflict

STATIC = Path(__file__).with_name("static")
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8"}
MAX_BODY = 1 << 20
POST_ROUTES = {"/api/code", "/api/undo", "/api/comment", "/api/strategy", "/api/resolve",
               "/api/done"}


def missing(value) -> bool:
    """None, NaN, pd.NA or NaT (a scalar docvar value)."""
    import pandas as pd

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array value: shown as it is
        return False


# why a document is shown, in plain words on the coder's page (explained in its codebook
# panel); a document of the blind overlap reads as a random one (the overlap is a random,
# hash-chosen sample), so that a coder does not learn it is in the reliability sample
SHOWN_WHY = {"margin": "the model is unsure", "least_confidence": "the model is unsure",
             "entropy": "the model is unsure", "cold": "a typical document",
             "random": "chosen at random", "overlap": "chosen at random",
             "back": "you went back to it", "requested": "requested"}


def doc_state(room: Room, coder: str, show_guess: bool, owner: bool = True) -> dict:
    """What the page shows ``coder`` now (see :meth:`Room.next_for`); ``owner``: whether the
    coder started the room (may stop it and start a fine-tune)."""
    pick = room.next_for(coder)
    doc = guess = None
    if pick is not None:
        doc_id, why = pick
        row = room.frame.iloc[room.pos[doc_id]]
        docvars = {str(k): (None if missing(v) else v) for k, v in row.items()
                   if k not in ("doc_id", "text", LABEL_COLUMN)}
        text = row["text"]
        doc = {"doc_id": doc_id, "text": "" if missing(text) else str(text),
               "docvars": docvars, "strategy": SHOWN_WHY.get(why, why),
               "version": room.version(doc_id, coder)}
        guess = room.guess(doc_id, coder) if show_guess else None
    return {"coder": coder, "owner": owner, "doc": doc, "guess": guess,
            "last": room.last_code(coder), "progress": room.progress(coder),
            "model": room.model_state(), "codebook": room.codebook}


def version_of(data: dict) -> int | None:
    """The ``version`` a request sent (None when absent).

    Raises:
        InputError: not a whole number.
    """
    value = data.get("version")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"version must be a whole number, not {value!r}")
    return value


def seen_last(data: dict) -> dict | None | bool:
    """The ``last`` code an undo request saw: ``{doc_id, version}``, None (no code), or False
    when the request did not say (no check).

    Raises:
        InputError: ``last`` is neither null nor ``{doc_id, version}``.
    """
    if "last" not in data:
        return False
    seen = data["last"]
    if seen is None:
        return None
    if not isinstance(seen, dict) or "doc_id" not in seen:
        raise InputError("last must be null or {doc_id, version}, not " + repr(seen))
    return {"doc_id": str(seen["doc_id"]), "version": version_of(seen) or 0}


def conflict_answer(exc: Conflict, room: Room, coder: str, data: dict, owner: bool) -> dict:
    """The 409 answer to a code or undo against a version another tab or window changed:
    ``error`` in a coder's words, ``conflict`` (the document, its current version and code)
    and the coder's current ``state``."""
    now = {"code": f"coded as “{exc.label}”", "skip": "skipped",
           "not_applicable": "marked not applicable"}.get(exc.status, "left uncoded (undone)")
    return {"error": f"Document {exc.doc_id} was {now} in another tab or window of yours "
                     "after this page showed it; nothing was changed here.",
            "conflict": {"doc_id": exc.doc_id, "version": exc.version, "status": exc.status,
                         LABEL_COLUMN: exc.label},
            "state": doc_state(room, coder, bool(data.get("guess")), owner)}


def token_hash(token: str) -> str:
    """SHA-256 (hex) of a token: what the project file keeps, never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()


def check_coders(coders: list[str]) -> list[str]:
    """``coders`` stripped, refused unless distinct and non-empty.

    Raises:
        InputError: an empty or repeated name.
    """
    names = [c.strip() for c in coders]
    if not all(names) or len(set(names)) != len(names):
        raise InputError("{coders} must be distinct, non-empty names separated by commas, "
                         f"not {','.join(coders)!r}", params=["coders"])
    return names


class Handler(BaseHTTPRequestHandler):
    """One request; the room, token and server options are attributes of the server."""

    server_version = "quantformer-code"
    protocol_version = "HTTP/1.1"

    # -- plumbing ----------------------------------------------------------------------

    def log_request(self, code="-", size="-"):  # method, path (no query) and status only
        if self.server.quiet:
            return
        if getattr(self, "command", None) and getattr(self, "path", None) is not None:
            line = f"{self.command} {urlparse(self.path).path}"
        else:  # a malformed request line: its text may hold a token or a document
            line = "bad request"
        sys.stderr.write(f"quantformer code: {line} {int(getattr(code, 'value', code))}\n")

    def log_error(self, fmt, *args):  # the message may quote the request line: not logged
        pass

    def log_message(self, fmt, *args):  # nothing else is logged (see log_request)
        pass

    def send(self, status: int, body: bytes, ctype: str = "application/json",
             headers: dict | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if status >= 400:
            self.close_connection = True
            self.send_header("Connection", "close")
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, obj, status: int = 200, headers: dict | None = None) -> None:
        self.send(status, json.dumps(obj, default=json_default).encode(), headers=headers)

    def authorised(self, query: dict) -> bool:
        """Whether the request carries a token of this start; sets ``self.bound`` to the
        token's coder (None: the single-coder token, any coder name)."""
        given = self.headers.get("X-Token") or (query.get("token") or [""])[0]
        if self.command == "POST":
            given = self.headers.get("X-Token") or ""
        digest = token_hash(given)
        for known, coder in self.server.hashes.items():
            if hmac.compare_digest(digest, known):
                self.bound = coder
                return True
        self.send_json({"error": "forbidden: this page needs the link with its token"}, 403)
        return False

    def is_owner(self) -> bool:
        """Whether the request's token is the owner's: the single-coder token, or the token of
        the coder who started the room (``--coder``, else the first of ``--coders``)."""
        return self.bound is None or self.bound == self.server.coder

    def coder_of(self, asked) -> str | None:
        """The coder a request acts as; None (answered 403) when a token asks to act as
        another coder (the single link is its coder's alone)."""
        if self.bound is None:
            if asked and str(asked) != self.server.coder:
                self.send_json({"error": self.server.say(InputError(
                    f"forbidden: this link is {self.server.coder}'s alone (one link is one "
                    "person); a second coder needs a link of their own: start the room with "
                    f"{{coders}} {self.server.coder},{asked}", params=["coders"]))}, 403)
                return None
            return self.server.coder
        if asked and str(asked) != self.bound:
            self.send_json({"error": f"forbidden: this link is {self.bound}'s; use your own "
                                     "link to code as another coder"}, 403)
            return None
        return self.bound

    def read_body(self) -> bytes:
        """The request's body, read whatever the answer will be (a refused request's
        included), by its ``Content-Length`` or in chunks (``Transfer-Encoding: chunked``);
        over ``MAX_BODY`` it is not read (``self.too_large``) and the connection is
        closed."""
        self.too_large = False
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self.read_chunks()
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = MAX_BODY + 1
        if n > MAX_BODY or n < 0:
            self.close_connection = self.too_large = True
            return b""
        return self.rfile.read(n) if n else b""

    def read_chunks(self) -> bytes:
        """A chunked body (RFC 9112, section 7.1): chunks of a hexadecimal size line, the
        data and CRLF, up to a chunk of size 0 and the trailer lines."""
        parts, total = [], 0
        while True:
            line = self.rfile.readline(1024).split(b";")[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                size = -1
            if size < 0 or total + size > MAX_BODY:
                self.close_connection = self.too_large = True
                return b""
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailer lines, then a blank one
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline(16)  # the CRLF after the data
            total += size

    def body(self, raw: bytes) -> dict:
        if self.too_large:
            raise InputError("request too large (or a malformed chunked body)")
        data = json.loads(raw or b"{}")
        if not isinstance(data, dict):
            raise InputError("the request body must be a JSON object")
        return data

    # -- GET ---------------------------------------------------------------------------

    def do_GET(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        self.read_body()
        if url.path == "/favicon.ico":  # asked for by the browser without the token
            self.send(204, b"", "image/x-icon")
            return
        if not self.authorised(query):
            return
        if url.path in POST_ROUTES:
            self.send_json({"error": f"{url.path} takes a POST"}, 405, {"Allow": "POST"})
            return
        room = self.server.room
        coder = self.coder_of((query.get("coder") or [None])[0])
        if coder is None:
            return
        if url.path in ("/", "/index.html"):
            page = (STATIC / "index.html").read_text(encoding="utf-8")
            token = self.headers.get("X-Token") or (query.get("token") or [""])[0]
            self.send(200, page.replace("__TOKEN__", token).encode(), TYPES[".html"])
        elif url.path.startswith("/static/") and "/" not in url.path[8:] and \
                (STATIC / url.path[8:]).is_file():
            f = STATIC / url.path[8:]
            self.send(200, f.read_bytes(), TYPES.get(f.suffix, "application/octet-stream"))
        elif url.path == "/api/state":
            self.send_json(doc_state(room, coder, (query.get("guess") or ["0"])[0] == "1",
                                     self.is_owner()))
        elif url.path == "/api/agreement":
            self.send_json(room.agreement(wait=False))
        elif url.path == "/api/reconcile":
            self.send_json({"disagreements": room.disagreements(coder)})
        elif url.path == "/api/finetune":
            self.send_json(self.server.finetune.state())
        else:
            self.send_json({"error": "not found"}, 404)

    # -- POST --------------------------------------------------------------------------

    def do_POST(self):
        url = urlparse(self.path)
        raw = self.read_body()
        if not self.authorised({}):
            return
        try:
            data = self.body(raw)
            coder = self.coder_of(data.get("coder"))
            if coder is None:
                return
            reply = self.route_post(url.path, {**data, "coder": coder})
        except PermissionError as exc:
            self.send_json({"error": str(exc)}, 403)
            return
        except Busy as exc:
            self.send_json({"error": str(exc), **self.server.finetune.state()}, 409)
            return
        except Conflict as exc:  # coded in another tab or window: nothing was written
            self.send_json(conflict_answer(exc, self.server.room, coder, data,
                                           self.is_owner()), 409)
            return
        except InputError as exc:  # named as the caller names it (a flag, an R argument)
            self.send_json({"error": self.server.say(exc)}, 400)
            return
        except (ValueError, KeyError) as exc:
            self.send_json({"error": str(exc)}, 400)
            return
        if reply is None:
            self.send_json({"error": "not found"}, 404)
        else:
            self.send_json(reply)

    def route_post(self, path: str, data: dict) -> dict | None:
        room = self.server.room
        coder = str(data.get("coder") or self.server.coder)
        show = bool(data.get("guess"))
        owner = self.is_owner()
        if path == "/api/code":
            doc_id = str(data["doc_id"])
            if doc_id not in room.pos:
                raise InputError(f"unknown doc_id {doc_id!r}")
            status = str(data.get("status") or "code")
            label = data.get(LABEL_COLUMN) if status == "code" else None
            if status == "code" and label not in room.labels:
                raise InputError(f"label {label!r} is not in the codebook")
            room.code(coder, doc_id, label, status, bool(data.get("guess_accepted")),
                      version_of(data))
            return doc_state(room, coder, show, owner)
        if path == "/api/undo":
            undone = room.undo(coder, seen_last(data))
            return {**doc_state(room, coder, show, owner), "undone": undone}
        if path == "/api/comment":
            room.store.add_comment(str(data["doc_id"]), coder, str(data["text"]))
            return {"ok": True}
        if path == "/api/strategy":
            if not owner:
                raise PermissionError(f"only {self.server.coder}, who started the room, "
                                      "changes the strategy (it is every coder's)")
            room.set_strategy(str(data["strategy"]))
            return doc_state(room, coder, show, owner)
        if path == "/api/resolve":
            if data.get(LABEL_COLUMN) not in room.labels:
                raise InputError(f"label {data.get(LABEL_COLUMN)!r} is not in the codebook")
            room.resolve(str(data["doc_id"]), str(data[LABEL_COLUMN]), coder)
            return {"disagreements": room.disagreements(coder)}
        if path in ("/api/finetune", "/api/done") and data.get("stop", path == "/api/finetune") \
                and not owner:
            raise PermissionError(f"only {self.server.coder}, who started the room, "
                                  + ("starts a fine-tune" if path == "/api/finetune" else
                                     "stops it; your codes are saved"))
        if path == "/api/finetune":
            ids, labels = room.training_codes()
            return self.server.finetune.start(room.frame, ids, labels, room.labels)
        if path == "/api/done":
            if data.get("stop"):
                threading.Thread(target=self.server.shutdown, daemon=True).start()
            return {"ok": True, "done": True, "stopped": bool(data.get("stop"))}
        return None


class RoomServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` carrying the room, the tokens, the default coder and the
    "fine-tune now" runner.

    Args:
        room: the model in the loop.
        host: address to serve on (127.0.0.1: this computer only).
        port: port (0: a free one).
        token: the single-coder token (default: random, 32 characters).
        coder: the default coder's name.
        quiet: no request log.
        coders: several coders' names: each gets a random token of their own, bound to
            them (``token`` is then the first coder's).
        finetune: the "fine-tune now" runner (default: models in ``<project>-models``
            next to the project file, the bundled model, its defaults).
        say: an input error's text for the page (default ``str``; the CLI names parameters
            as its flags, or as R's arguments when R started it).
        new_links: revoke the links of earlier starts (their tokens' hashes are kept in the
            project file, so that a coder's open page and link survive a restart).

    Raises:
        InputError: the port cannot be bound; duplicate or empty coder names.
    """

    daemon_threads = True

    def __init__(self, room: Room, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, coder: str = "coder1", quiet: bool = True,
                 coders: list[str] | None = None, finetune: FinetuneNow | None = None,
                 new_links: bool = False, say=str):
        self.room, self.coder, self.quiet, self.say = room, coder, quiet, say
        if coders:
            check_coders(coders)
            self.tokens = {secrets.token_urlsafe(24): c for c in coders}
            self.coder = coders[0]
        else:
            self.tokens = {token or secrets.token_urlsafe(24): None}
        for name in coders or [self.coder]:  # the overlap is blind to a coder new here
            room.join(name)
        self.token = next(iter(self.tokens))
        self.hashes = self.keep_links(room.store, coders, new_links)
        self.finetune = finetune or FinetuneNow(
            room.store, room.store.path.with_name(room.store.path.stem + "-models"))
        try:
            super().__init__((host, port), Handler)
        except OSError as exc:
            raise port_error(host, port, exc) from None

    def keep_links(self, store, coders: list[str] | None, new_links: bool) -> dict:
        """{token hash: coder} accepted by this start: this start's tokens and, unless
        ``new_links``, those of earlier starts for the same coders (single-coder links in a
        single-coder start); the SHA-256 of each token is kept in the project's ``meta``
        ``links``, never the token."""
        fresh = {token_hash(t): c for t, c in self.tokens.items()}
        earlier = {} if new_links else store.get("links", {})
        names = set(coders or [None])
        kept = {h: c for h, c in earlier.items() if c in names}
        store.put("links", {**kept, **fresh})
        return {**kept, **fresh}

    def url(self, coder: str | None = None, host: str | None = None) -> str:
        """The page's address with its token (and ``coder`` when given)."""
        name = host or self.server_address[0]
        if name in ("0.0.0.0", "::", ""):
            import socket

            name = socket.gethostname()
        token = next((t for t, c in self.tokens.items() if c == coder), self.token)
        link = f"http://{name}:{self.server_address[1]}/?token={token}"
        return link + (f"&coder={quote(coder)}" if coder else "")
