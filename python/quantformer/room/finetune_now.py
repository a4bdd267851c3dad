""""Fine-tune now" in the coding room: ``quantformer finetune`` on the project's current codes,
run in the background as a child process while coding goes on.

The engine is a plain child process (``python -m quantformer.train SPEC OUT``, the library's
entry point), not the persistent worker nor a Dask cluster: the fine-tune needs its own interpreter (the server's
stays free to answer the page within milliseconds), it may take minutes to hours, and one
process is all a coding project needs. The codes (one per document, as
:meth:`~quantformer.room.loop.Room.training_codes` gives them: a reconciled code, else
the code all its coders gave) are written to a temporary training file (``doc_id``,
``text``, ``label``) in the run's folder, which is removed when the child ends; the model
goes to ``<models>/finetune-<UTC time>/``, written atomically by ``finetune`` itself.

The run's state lives in the project file (``meta`` key ``finetune``), so that a restart
shows the last run: ``running``, ``done`` (with the model folder and its validation
macro-F1), ``failed`` (with the last lines of the child's messages) or ``stopped`` (the
server stopped, or was killed, while it ran).

The child runs in a session of its own (a Ctrl-C in the terminal reaches the server, which
then stops the child and records ``stopped``) at a lower scheduling priority (nice 10 on
POSIX), so that the page keeps answering while it trains. A child left running by a server
killed outright (``kill -9``) is stopped at the project's next start.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pandas as pd

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from ..io.modeldir import peek_record
from .store import Store, now

STATE_KEY = "finetune"
ERROR_TAIL = 2000  # characters of the child's messages kept when it fails
DEFAULT_MIN_CODES = 5
DEFAULT_VALID_FRACTION = 0.2
NICE = 10  # the child's scheduling priority (POSIX): below the server's


class Busy(Exception):
    """A fine-tune is already running (the server answers 409)."""


def package_root() -> str:
    """The folder that holds the ``quantformer`` package: the child imports the same code."""
    return str(Path(__file__).resolve().parents[3])


def check_options(valid_fraction: float, min_codes: int) -> None:
    """Refuse a ``valid_fraction`` outside [0, 1) or a ``min_codes`` below 1 (before the
    room starts: no fine-tune is run with them).

    Raises:
        InputError: naming the option and its allowed range.
    """
    if int(min_codes) < 1:
        raise InputError(f"{{finetune_min_codes}} must be at least 1, not {min_codes!r}",
                         params=["finetune_min_codes"])
    if not 0.0 <= valid_fraction < 1.0:
        raise InputError("{finetune_valid_fraction} must be a share from 0 to below 1, "
                         f"not {valid_fraction!r}", params=["finetune_valid_fraction"])


class FinetuneNow:
    """Start, watch and stop the project's background fine-tune.

    Args:
        store: the project file; the state is kept in it.
        models: folder for the models (created on the first run).
        model: the pretrained model to fine-tune (hub id or folder; None: the bundled
            all-MiniLM-L6-v2).
        epochs: passes over the codes (None: ``finetune``'s default by model size).
        valid_fraction: share of the codes held out for the validation macro-F1 (0.2;
            0 reports none).
        min_codes: the fewest codes every label of the codebook needs before a run (5).
        device: ``auto``, ``cpu``, ``cuda``, ... passed to ``finetune``.
        seed: random seed of the split and the training.

    Raises:
        InputError: ``min_codes`` below 1 or ``valid_fraction`` outside [0, 1).
    """

    def __init__(self, store: Store, models: str | os.PathLike, *, model: str | None = None,
                 epochs: int | None = None, valid_fraction: float = DEFAULT_VALID_FRACTION,
                 min_codes: int = DEFAULT_MIN_CODES, device: str = "auto", seed: int = 1):
        check_options(valid_fraction, min_codes)
        self.store, self.models = store, Path(models)
        self.model, self.epochs, self.valid_fraction = model, epochs, valid_fraction
        self.min_codes, self.device, self.seed = int(min_codes), device, seed
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.stopping = False
        last = store.get(STATE_KEY)
        if last and last.get("state") == "running":  # the server ended while it ran
            stop_orphan(last.get("pid"), last.get("model"))
            self._save({**last, "state": "stopped", "finished": now(),
                        "error": "the coding room stopped before the fine-tune ended"})

    def state(self) -> dict:
        """The last run: ``{"state": "none"}`` before the first one, else ``state``,
        ``started``, ``finished``, ``n_codes``, ``label_counts``, ``model`` (the folder),
        ``macro_f1`` (validation, when done with ``valid_fraction`` > 0) and ``error``."""
        return self.store.get(STATE_KEY) or {"state": "none"}

    def _save(self, state: dict) -> None:
        self.store.put(STATE_KEY, state)

    def check_codes(self, labels: list[str], codebook: list[str]) -> dict:
        """Codes per label of the codebook; refuse a run while one has too few.

        Raises:
            InputError: a label with fewer than ``min_codes`` codes (named, with its count).
        """
        counts = {lab: labels.count(lab) for lab in codebook}
        short = [f"{lab} ({n})" for lab, n in counts.items() if n < self.min_codes]
        if short:
            raise InputError(f"fine-tuning needs at least {self.min_codes} codes of every "
                             f"label; too few so far: {', '.join(short)}. Code more documents "
                             "of these labels, or lower {finetune_min_codes}",
                             params=["finetune_min_codes"])
        return counts

    def start(self, frame: pd.DataFrame, ids: list[str], labels: list[str],
              codebook: list[str]) -> dict:
        """Write the codes to a training file and start the child; returns the new state.

        Args:
            frame: the corpus (``doc_id``, ``text``).
            ids, labels: the documents' codes (:meth:`Room.training_codes`).
            codebook: the labels of the codebook, in order.

        Raises:
            Busy: a fine-tune is running.
            InputError: too few codes of some label (:meth:`check_codes`), or a models
                folder that cannot be created.
        """
        with self.lock:
            if self.proc is not None and self.proc.poll() is None:
                raise Busy("a fine-tune is already running; wait until it ends")
            counts = self.check_codes(labels, codebook)
            try:
                self.models.mkdir(parents=True, exist_ok=True)
                work = Path(tempfile.mkdtemp(prefix=".finetune-", dir=self.models))
            except OSError as exc:
                raise InputError(f"cannot write the models folder {{models}} '{self.models}' "
                                 f"({exc.strerror}); give another one",
                                 params=["models"]) from None
            text = frame.set_index(frame["doc_id"].astype(str))["text"]
            train = pd.DataFrame({"doc_id": ids, "text": text.loc[ids].to_numpy(),
                                  LABEL_COLUMN: labels})
            train.to_parquet(work / "train.parquet", index=False)
            out = self.models / ("finetune-" + now()[:19].replace(":", "").replace("-", ""))
            spec = {"train": str(work / "train.parquet"), "overwrite": True,
                    "finetune": {"labels": list(codebook), "valid_fraction": self.valid_fraction,
                                 "seed": self.seed, "device": self.device, "quiet": True,
                                 "model": str(self.model) if self.model else None,
                                 "epochs": self.epochs or None}}
            (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
            args = [sys.executable, "-m", "quantformer.train", str(work / "spec.json"), str(out)]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [package_root(), *filter(None, [os.environ.get("PYTHONPATH")])])}
            log = open(work / "messages.log", "w+b")
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=log, env=env,
                                         start_new_session=True)
            try:  # before torch starts its threads, which inherit the priority
                os.setpriority(os.PRIO_PROCESS, self.proc.pid, NICE)
            except (AttributeError, OSError):  # not POSIX, or not allowed: same priority
                pass
            self.stopping = False
            state = {"state": "running", "started": now(), "finished": None,
                     "n_codes": len(ids), "label_counts": counts, "model": str(out),
                     "macro_f1": None, "error": None, "pid": self.proc.pid}
            self._save(state)
            threading.Thread(target=self._watch, args=(self.proc, log, work, state),
                             name="quantformer-finetune", daemon=True).start()
            return state

    def _watch(self, proc: subprocess.Popen, log, work: Path, state: dict) -> None:
        """Wait for the child; record done (with its validation macro-F1), failed or
        stopped; remove the training file."""
        code = proc.wait()
        log.seek(0)
        messages = log.read().decode("utf-8", "replace")
        log.close()
        shutil.rmtree(work, ignore_errors=True)
        state = {**state, "finished": now()}
        if self.stopping:
            state.update(state="stopped", error="stopped with the coding room")
        elif code == 0:
            state.update(state="done", macro_f1=validation_macro_f1(Path(state["model"])))
        else:
            state.update(state="failed", error=messages[-ERROR_TAIL:].strip()
                         or f"exit status {code}")
        try:
            self._save(state)
        except Exception:  # the project file was closed first: nothing left to record in
            pass

    def stop(self, timeout: float = 20.0) -> None:
        """Stop a running child (state ``stopped``) and wait until that is recorded."""
        with self.lock:
            proc = self.proc
            if proc is None or proc.poll() is not None:
                return
            self.stopping = True
            proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for thread in threading.enumerate():
            if thread.name == "quantformer-finetune":
                thread.join(timeout=5.0)


def stop_orphan(pid, model) -> None:
    """Terminate a fine-tune child that outlived its server (Linux: only a process whose
    command line is this run's ``python -m quantformer.train SPEC MODEL``)."""
    try:
        cmdline = Path(f"/proc/{int(pid)}/cmdline").read_bytes().split(b"\0")
    except (OSError, TypeError, ValueError):
        return
    if b"quantformer.train" in cmdline and str(model).encode() in cmdline:
        try:
            os.kill(int(pid), signal.SIGTERM)
        except OSError:
            pass


def validation_macro_f1(model_dir: Path) -> float | None:
    """The validation macro-F1 in a model folder's ``quantformer.json`` (None: no
    validation set, or not a classification)."""
    record = peek_record(model_dir)
    value = (record.get("validation") or {}).get("macro_f1")
    return None if value is None else float(value)
