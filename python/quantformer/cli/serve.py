"""``quantformer serve``: one long-lived core process that runs CLI verbs on request.

R starts one such worker per session (``R/worker.R``) so that torch and transformers are
imported once and a model loaded by one ``predict()`` stays in memory for the next. A request
is the same verb with the same flags as the one-off CLI, run through the same argparse parser
and verb function (:func:`quantformer.cli.main`), so every verb works both ways.

Protocol (JSON lines; the reply channel is kept apart from the verbs' own output, as callr's
``r_session`` does, so progress bars and warnings still stream on stderr):

* request, one line on stdin: ``{"id": 1, "verb": "predict", "args": ["--model", "m", ...],
  "cwd": "/abs/dir", "debug": false}`` (``cwd`` and ``debug`` optional);
* reply, one line on the reply channel (``--reply-fd``; default 1, stdout, in which case the
  verbs' stdout is sent to stderr): ``{"id": 1, "status": 0, "error": null}``; ``status`` is the
  CLI's exit status (0, 1, 2, 130) and ``error`` its ``quantformer <verb>: error: ...`` line;
* the first line on the reply channel says the worker is ready:
  ``{"id": null, "status": 0, "ready": true, "version": "...", "pid": ...}``;
* end of file on stdin ends the worker (exit status 0).

Models are kept in the process's least-recently-used model cache
(:data:`quantformer.infer.cache.MODELS`, ``--cache-size``, default 2 models), keyed by the
folder, the device and the modification times of its files, so a model folder written again is
reloaded.
"""

from __future__ import annotations

import io
import json
import os
import sys

from .._core.errors import InputError
from .._core.version import __version__
from ..infer.cache import MODELS, ModelCache
from .main import main

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent() -> bool:
    """Ask Linux to end this process when the R process that started it dies.

    R sets ``QUANTFORMER_PARENT_PID`` to its own pid in the child's environment. When this
    process's parent is that pid, ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` makes the kernel send
    SIGTERM on the parent's death (also when R itself is killed by a signal and cannot clean
    up); a parent that died before the call (the parent pid is no longer R's, and R's pid is
    gone) ends this process at once.
    Elsewhere (macOS, Windows, no variable, another parent) nothing is done: the worker still
    ends at end of file on stdin.

    Returns:
        ``True`` when the parent-death signal was set.
    """
    want = os.environ.get("QUANTFORMER_PARENT_PID", "")
    if not sys.platform.startswith("linux") or not want.isdigit():
        return False
    if os.getppid() != int(want):
        if _pid_exists(int(want)):  # a grandchild that inherited the variable: not ours
            return False
        os._exit(143)  # R died before this process got here
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
        return False
    if os.getppid() != int(want):  # the parent died before prctl took effect
        os._exit(143)
    return True


def _pid_exists(pid: int) -> bool:
    """A running process has this pid (a zombie, dead but not yet reaped, does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    except OSError:  # pragma: no cover - no /proc
        return True


# ------------------------------------------------------------------------------------------
# requests


def _argv(request: dict) -> list[str]:
    """The CLI argument vector of a request; raises ValueError for a malformed one."""
    verb, args = request.get("verb"), request.get("args", [])
    if not isinstance(verb, str) or not verb:
        raise ValueError("a request needs \"verb\", a CLI verb such as \"predict\"")
    if verb == "serve":
        raise ValueError("'serve' cannot be run inside the worker")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError("\"args\" must be a list of strings (the verb's CLI flags)")
    names = request.get("r_names")
    if names is not None and not isinstance(names, str):
        raise ValueError("\"r_names\" must be a string: the calling R function's arguments, "
                         "comma-separated")
    return (["--debug"] if request.get("debug") else []) + \
        (["--r-names", names] if names else []) + [verb] + args


class _Tee(io.TextIOBase):
    """A text stream that writes through to ``stream`` and remembers the last line written."""

    def __init__(self, stream):
        self.stream = stream
        self.last = ""

    def write(self, s):
        lines = [x for x in s.splitlines() if x.strip()]
        if lines:
            self.last = lines[-1]
        return self.stream.write(s)

    def flush(self):
        self.stream.flush()


def run_request(request: dict, verb_stdout, cache: ModelCache | None = None) -> dict:
    """Run one request through :func:`quantformer.cli.main`; return its reply.

    Args:
        request: the decoded request line (see the module docstring).
        verb_stdout: where the verb's stdout goes (``sys.stdout``, or ``sys.stderr`` when the
            replies use stdout).
        cache: the worker's model cache, whose counts go into the reply.

    Returns:
        ``{"id", "status", "error", "models_loaded", "cache_hits"}``: the exit status, the last
        line the verb wrote on stderr when it failed (the CLI's one-line error message, else
        ``None``), and how many models the worker has read from disk / found in its cache.
    """
    rid = request.get("id")
    try:
        argv = _argv(request)
        if request.get("cwd"):
            os.chdir(request["cwd"])
    except (ValueError, OSError) as exc:
        msg = f"quantformer serve: error: bad request: {exc}"
        print(msg, file=sys.stderr, flush=True)
        return {"id": rid, "status": 2, "error": msg}
    err = _Tee(sys.stderr)
    old_out, old_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = verb_stdout, err
    try:
        status = main(argv)
    except SystemExit as exc:  # a verb calling sys.exit()
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print(f"quantformer {argv[-1]}: interrupted", file=sys.stderr)
        status = 130
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = old_out, old_err
    return {"id": rid, "status": int(status), "error": err.last if status else None,
            "models_loaded": cache.loads if cache else 0, "cache_hits": cache.hits if cache else 0}


def serve(stdin=None, reply=None, cache_size: int = 2) -> int:
    """Answer requests from ``stdin`` until end of file.

    Args:
        stdin: text stream of request lines (default ``sys.stdin``).
        reply: binary or text stream for the replies (default stdout).
        cache_size: fine-tuned models kept loaded (default 2).

    Returns:
        0 (end of file on stdin).
    """
    stdin = stdin or sys.stdin
    reply = reply or sys.stdout
    verb_stdout = sys.stderr if reply is sys.stdout else sys.stdout
    cache = MODELS
    cache.resize(cache_size)

    def send(obj: dict) -> None:
        line = json.dumps(obj) + "\n"
        reply.write(line.encode("utf-8") if "b" in getattr(reply, "mode", "") else line)
        reply.flush()

    send({"id": None, "status": 0, "ready": True, "version": __version__, "pid": os.getpid()})
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            msg = f"quantformer serve: error: a request line is not JSON ({exc}): {line[:80]!r}"
            print(msg, file=sys.stderr, flush=True)
            send({"id": None, "status": 2, "error": msg})
            continue
        send(run_request(request, verb_stdout, cache))
    return 0


# ------------------------------------------------------------------------------------------
# CLI


def add_cli(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="a long-lived worker: run verbs sent as JSON lines on stdin (used by R)",
        description="Read requests {\"id\", \"verb\", \"args\": [CLI flags], \"cwd\"} as JSON "
                    "lines on stdin, run each exactly as `quantformer <verb> <args>` would, and "
                    "write one reply line {\"id\", \"status\", \"error\"} per request on the "
                    "reply channel. The verbs' progress and warnings go to stderr as usual. "
                    "Fine-tuned models stay loaded between requests. Ends at end of file.",
    )
    p.add_argument("--reply-fd", type=int, default=1,
                   help="file descriptor for replies (1 = stdout, then the verbs' stdout goes "
                        "to stderr; R uses 3)")
    p.add_argument("--cache-size", type=int, default=2,
                   help="fine-tuned models kept loaded between requests (2; 0 = none)")
    p.set_defaults(func=_run_serve)


def _run_serve(args) -> int:
    if args.cache_size < 0:
        raise InputError(f"--cache-size must be 0 or more, not {args.cache_size}")
    if args.reply_fd == 1:
        return serve(cache_size=args.cache_size)
    try:
        reply = os.fdopen(args.reply_fd, "wb", buffering=0)
    except OSError as exc:
        raise InputError(f"--reply-fd {args.reply_fd} is not an open file descriptor ({exc}); "
                         "give one the parent opened for writing, or 1 for stdout") from None
    return serve(reply=reply, cache_size=args.cache_size)
