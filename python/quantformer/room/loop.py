"""The model in the loop: which document a coder sees next, and the light classifier that
learns from the codes in a background thread.

Next documents come from a queue filled by :func:`quantformer.label.suggest.suggest` (a cold
start while fewer than two classes are coded, then the chosen uncertainty strategy with its
diversity guard and a random share, or random order), so showing the next document is a
dictionary look-up, never a model fit. A cold start clusters a random sample of at most
5,000 uncoded documents (k-means over a 100,000-document corpus takes minutes on two cores;
the medoids of a random sample of that size are typical documents all the same). A background
thread retrains the light classifier (logistic regression over the cached embeddings,
:func:`~quantformer.label.strategies.light_classifier`) every ``retrain_every`` codes,
refills the queue from its probabilities and records:

* the cross-validated macro-F1 of the classifier on the codes so far: the page's learning
  curve;
* the stability of its predictions: Cohen's kappa between this round's and the previous
  round's predictions on a fixed random "stop set" of documents, and the stopping hint of
  Bloodgood & Vijay-Shanker (2009) (:mod:`quantformer.room.progress`).

Two coders: a share ``overlap`` of the documents (chosen by a hash of the doc_id, so the same
at every start) is shown to every coder, blind (no coder sees another's code, nor a guess
of a model that learnt it); every other document is coded once. A document of the overlap
trains the model only once two coders coded it (or it was reconciled) whenever the project has
more than one human coder: coders of its codes, the coders named at this start (``coders``)
and any coder who asked for a document (:meth:`Room.join`). A coder who joins after the model
learnt a single code of an overlap document sees no guess on it until the model is refit
without it (the learner is woken at once). Agreement on the overlap (Krippendorff's alpha and Cohen's kappa with
bootstrap intervals, :func:`quantformer.room.progress.pair_agreement`) is computed on request,
once per state of the overlap, in a thread of its own for the server.

A machine coder (a language model's codes imported with
:func:`~quantformer.room.machine.add_machine_coder`) is kept apart from the human
coders: its codes neither train the classifier nor take a document off the humans' queues;
the agreement gives each human coder's alpha and kappa with it on the documents both coded,
and the reconciliation lists the documents where it differs from the humans.
"""

from __future__ import annotations

import hashlib
import sys
import threading

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from ..label.strategies import STRATEGIES, UNCERTAINTY, light_classifier
from ..label.suggest import suggest
from .agreement import Agreement
from .progress import cv_macro_f1, prediction_stability, stop_hint
from .store import Store

STOP_SET = 2000    # documents in the stop set (at most)
SWITCH_INTERVAL = 0.001  # seconds: how long the learner may hold the interpreter at a time
COLD_SAMPLE = 5000  # a cold start clusters a random sample of at most this many documents


def in_overlap(doc_id: str, share: float) -> bool:
    """Whether a document belongs to the overlap coded by every coder (a hash of its id, so
    the overlap is the same at every start and independent of coding order)."""
    h = int(hashlib.sha256(str(doc_id).encode()).hexdigest()[:8], 16)
    return h % 10000 < round(share * 10000)


class Room(Agreement):
    """The state of one coding room over a corpus frame, its embeddings and a project store.

    Args:
        frame: corpus frame (``doc_id``, ``text``, docvars).
        vectors: (n_docs, dim) embeddings of ``frame`` (NaN rows for missing texts).
        store: the project (:class:`~quantformer.room.store.Store`).
        codebook: entries from :func:`~quantformer.io.codebook.make_codebook`.
        strategy: ``margin`` (default), ``least_confidence``, ``entropy``, ``random`` or
            ``cold`` (see :mod:`quantformer.label.suggest`).
        random_share: share of an uncertainty batch drawn at random (0.1).
        retrain_every: retrain the light classifier after this many new codes (10).
        overlap: share of documents every coder codes, blind (0.2).
        team: the number of coders named at the start (1: any coder name may join; several
            coders are then known from their codes).
        coders: the coders named at this start (the single link's coder, or every
            ``--coders`` name): a name not among the project's coders makes the overlap
            blind before the first fit.
        batch: documents chosen per refill of the queue (10).
        seed: random seed (1).
        precision: the record of the precision the embeddings were computed in
            (``precision``, ``requested``, ``reason``; shown in :meth:`model_state`).
    """

    def __init__(self, frame: pd.DataFrame, vectors: np.ndarray, store: Store,
                 codebook: list[dict], *, strategy: str = "margin", random_share: float = 0.1,
                 retrain_every: int = 10, overlap: float = 0.2, batch: int = 10,
                 seed: int = 1, team: int = 1, precision: dict | None = None,
                 coders: list[str] | None = None):
        self.precision = precision
        self.frame = frame.reset_index(drop=True)
        self.ids = self.frame["doc_id"].astype(str).to_numpy()
        self.pos = {d: i for i, d in enumerate(self.ids)}
        self.vectors = np.array(vectors, dtype=np.float32)
        self.vectors[np.isnan(self.vectors)] = 0.0  # missing texts: never shown anyway
        text = self.frame["text"].where(self.frame["text"].notna(), "").astype(str)
        self.usable = text.str.strip().ne("").to_numpy()
        self.store, self.codebook = store, codebook
        self.labels = [e[LABEL_COLUMN] for e in codebook]
        self.strategy = store.get("strategy", strategy)
        self.random_share, self.retrain_every = random_share, retrain_every
        self.overlap, self.batch, self.seed, self.team = overlap, batch, seed, team
        self.known: set[str] = set(coders or ())  # coders of this start and who joined
        self.trained: set[str] = set()  # the documents the current model learnt from
        self.lock = threading.RLock()
        self.queue: list[tuple[str, str]] = []  # (doc_id, strategy that chose it)
        self.shown: dict[str, tuple[str, str]] = {}  # coder -> (doc_id, strategy)
        self.handled: dict[str, dict[str, tuple]] = {}  # doc_id -> coder -> (status, label)
        self.versions: dict[tuple[str, str], int] = {}  # (doc_id, coder) -> version
        self.last: dict[str, str] = {}  # coder -> doc_id of their last code (what b undoes)
        self.probs: np.ndarray | None = None
        self.prob_labels: list[str] = []
        self.fitted_at = -1  # number of training codes of the last fit
        self.stop_preds: np.ndarray | None = None
        rng = np.random.default_rng(seed)
        usable = np.flatnonzero(self.usable)
        self.stop_set = rng.choice(usable, size=min(STOP_SET, len(usable)), replace=False)
        self.wake = threading.Event()
        self.stopping = False
        self.busy = threading.Lock()
        self.rounds = store.rounds().to_dict("records")  # the learning curve, kept in memory
        self.load_codes()

    # -- codes -----------------------------------------------------------------------

    def load_codes(self) -> None:
        """Rebuild the in-memory view of the codes from the store (at start: resume)."""
        current = self.store.current_codes()
        versions = self.store.versions()
        machine = set(self.store.machine_coders())
        with self.lock:
            self.handled, self.last, self.versions = {}, {}, versions
            self.machine: dict[str, dict[str, str]] = {}  # doc_id -> machine coder -> label
            self.machine_coders = sorted(machine & set(current["coder"]))
            for row in current.itertuples(index=False):  # in coding order
                if row.coder in machine:  # validated against the humans, never learnt from
                    self.machine.setdefault(row.doc_id, {})[row.coder] = row.label
                    continue
                self.handled.setdefault(row.doc_id, {})[row.coder] = (row.status, row.label)
                self.last[row.coder] = row.doc_id
            resolved = self.store.resolutions()
            self.resolved = dict(zip(resolved["doc_id"], resolved[LABEL_COLUMN]))

    def training_codes(self) -> tuple[list[str], list[str]]:
        """(doc_ids, labels) the model learns from: a resolved code, else the code every
        coder of the document gave (a disagreement waits for its reconciliation). With
        several coders, a document of the blind overlap trains the model only once two
        coders coded it: before, its one code would make the guess another coder of it sees
        (``g``) a copy of the first coder's code."""
        ids, labels = [], []
        with self.lock:
            team = self.team > 1 or len(self.known | {
                c for by in self.handled.values() for c in by}) > 1
            for doc, by in self.handled.items():
                codes = {lab for status, lab in by.values() if status == "code"}
                if team and doc not in self.resolved and self.overlap > 0 and \
                        len(by) < 2 and in_overlap(doc, self.overlap):
                    continue  # blind until a second coder coded it
                label = self.resolved.get(doc) or (codes.pop() if len(codes) == 1 else None)
                if label is not None:
                    ids.append(doc)
                    labels.append(label)
        return ids, labels

    def code(self, coder: str, doc_id: str, label: str | None, status: str = "code",
             guess_accepted: bool = False, version: int | None = None) -> None:
        """Commit a code of the document shown to ``coder``, then wake the learner.

        Args:
            version: the document's version as the coder's page last saw it (None: no
                check; see :class:`~quantformer.room.store.Conflict`).

        Raises:
            Conflict: the coder's code of the document changed in another tab or window.
        """
        self.check_human(coder)
        with self.lock:
            shown = self.shown.get(coder, (None, None))
            strategy = shown[1] if shown[0] == doc_id else "requested"
            self.versions[(doc_id, coder)] = self.store.add_code(
                doc_id, coder, label, status, strategy, guess_accepted, version)
            self.handled.setdefault(doc_id, {})[coder] = (status, label)
            self.last[coder] = doc_id
            if shown[0] == doc_id:  # another tab's document stays shown
                self.shown.pop(coder, None)
        self.wake.set()

    def undo(self, coder: str, seen: dict | None | bool = False) -> str | None:
        """Undo ``coder``'s last code; the document is shown to them again.

        Args:
            seen: the last code as the coder's page last saw it (:meth:`last_code`:
                ``{doc_id, version}``, or None: no code); False: undo without a check.

        Raises:
            Conflict: the coder coded in another tab or window since; nothing is undone.
        """
        self.check_human(coder)
        with self.lock:
            done = self.store.undo(coder, seen is not False, *(
                (str(seen["doc_id"]), int(seen["version"])) if seen else (None, None)))
            if done is None:
                return None
            self.load_codes()
            old = self.shown.pop(coder, None)
            if old is not None:
                self.queue.insert(0, old)
            self.shown[coder] = (done[0], "back")
        return done[0]

    def check_human(self, coder: str) -> None:
        """Refuse a code or an undo under a machine coder's name.

        Raises:
            InputError: ``coder`` is a machine coder of the project.
        """
        if coder in self.machine_coders:
            raise InputError(f"{coder} is a machine coder of this project; code under "
                             "another name")

    def version(self, doc_id: str, coder: str) -> int:
        """The version of ``coder``'s code of a document (0: never coded)."""
        with self.lock:
            return self.versions.get((doc_id, coder), 0)

    def last_code(self, coder: str) -> dict | None:
        """``{doc_id, version}`` of the code "back" undoes now, None when there is none."""
        with self.lock:
            doc = self.last.get(coder)
            return None if doc is None else {"doc_id": doc,
                                             "version": self.versions.get((doc, coder), 0)}

    def join(self, coder: str) -> None:
        """Count ``coder`` among the project's coders (a new one makes the overlap blind:
        the learner is woken to refit without the overlap's single codes)."""
        with self.lock:
            new = coder not in self.known
            self.known.add(coder)
        if new:
            self.wake.set()

    def resolve(self, doc_id: str, label: str, coder: str) -> None:
        """Record ``coder``'s reconciled code of a disagreement.

        Raises:
            PermissionError: ``coder`` did not code the document (a disagreement is resolved
                by the coders of that document: it is shown to them only).
        """
        with self.lock:
            if coder not in self.handled.get(doc_id, {}):
                raise PermissionError(f"{coder} did not code document {doc_id}: a "
                                      "disagreement is resolved by the coders of the document")
        self.store.resolve(doc_id, label, coder)
        with self.lock:
            self.resolved[doc_id] = label
        self.wake.set()

    # -- the next document -------------------------------------------------------------

    def next_for(self, coder: str) -> tuple[str, str] | None:
        """(doc_id, strategy) of the document ``coder`` sees now: the one already shown, an
        overlap document another coder coded, else the head of the queue; None when none is
        left. A dictionary look-up: the model never runs here."""
        self.join(coder)
        with self.lock:
            if coder in self.shown:
                return self.shown[coder]
            pick = self._overlap_doc(coder) or self._queued_doc()
            if pick is None and self._free_docs(limit=1):
                pick = (self._free_docs(limit=1)[0], "random")  # the queue ran dry
            if pick is not None:
                self.shown[coder] = pick
            if len(self.queue) < self.batch // 2 + 1:
                self.wake.set()
            return pick

    def _overlap_doc(self, coder: str) -> tuple[str, str] | None:
        if self.overlap <= 0:
            return None
        for doc, by in self.handled.items():
            if coder not in by and in_overlap(doc, self.overlap) and any(
                    s == "code" for s, _ in by.values()) and not self._shown_to_other(
                    doc, coder):
                return doc, "overlap"
        return None

    def _shown_to_other(self, doc: str, coder: str) -> bool:
        return any(d == doc for c, (d, _) in self.shown.items() if c != coder)

    def _queued_doc(self) -> tuple[str, str] | None:
        while self.queue:
            doc, why = self.queue.pop(0)
            if doc not in self.handled and not self._shown_to_other(doc, ""):
                return doc, why
        return None

    def _free_docs(self, limit: int | None = None) -> list[str]:
        """Usable documents nobody handled, queued or is shown (positions order)."""
        taken = set(self.handled) | {d for d, _ in self.queue} | {
            d for d, _ in self.shown.values()}
        out = []
        for i in np.flatnonzero(self.usable):
            if self.ids[i] not in taken:
                out.append(self.ids[i])
                if limit is not None and len(out) >= limit:
                    break
        return out

    def set_strategy(self, strategy: str) -> None:
        if strategy not in STRATEGIES:
            raise InputError(f"unknown strategy '{strategy}'; use one of: "
                             f"{', '.join(STRATEGIES)}")
        self.store.put("strategy", strategy)
        with self.lock:
            self.strategy = strategy
            self.queue = []
        self.refill()

    # -- the learner (background thread) ----------------------------------------------

    def refill(self, replace: bool = False) -> None:
        """Choose the next ``batch`` documents with suggest's strategy over the free pool."""
        with self.lock:
            free = self._free_docs() if not replace else [
                d for d in self._free_docs() + [d for d, _ in self.queue]]
            probs, labels, strategy = self.probs, self.prob_labels, self.strategy
            n_handled = len(self.handled)
        if not free:
            return
        rows = np.array([self.pos[d] for d in free])
        run = strategy if probs is not None or strategy == "random" else "cold"
        if run == "cold" and len(rows) > COLD_SAMPLE:  # k-means over 100,000 takes minutes
            rng = np.random.default_rng(self.seed + n_handled)
            rows = np.sort(rng.choice(rows, size=COLD_SAMPLE, replace=False))
        out = suggest(self.frame.iloc[rows].drop(columns=[LABEL_COLUMN], errors="ignore"),
                      self.vectors[rows], n=min(self.batch, len(rows)), strategy=run,
                      seed=self.seed + n_handled,
                      probs=probs[rows] if probs is not None and run in UNCERTAINTY else None,
                      prob_labels=labels,
                      random_share=self.random_share if run in UNCERTAINTY else 0.0)
        picked = list(zip(out["doc_id"].astype(str), out["strategy"].astype(str)))
        with self.lock:
            keep = [] if replace else self.queue
            self.queue = keep + [p for p in picked if p[0] not in self.handled
                                 and p[0] not in {d for d, _ in keep}]

    def retrain(self) -> bool:
        """Fit the light classifier on the codes, score it, refresh the probabilities;
        False when there is nothing new to learn from (fewer than two classes)."""
        ids, labels = self.training_codes()
        if len(set(labels)) < 2:
            return False
        rows = np.array([self.pos[d] for d in ids])
        y = np.asarray(labels, dtype=object).astype(str)
        clf = light_classifier(self.vectors[rows], y, self.seed)
        probs = clf.predict_proba(self.vectors)
        f1 = cv_macro_f1(self.vectors[rows], y, self.seed)
        preds = np.asarray(clf.classes_)[probs[self.stop_set].argmax(axis=1)]
        stability = prediction_stability(self.stop_preds, preds)
        resumed = bool(self.rounds) and self.rounds[-1]["n_codes"] == len(ids)
        if not resumed:  # a restart refits on the same codes: no second point on the curve
            self.store.add_round(len(ids), f1, stability)
        with self.lock:
            if not resumed:
                self.rounds.append({"n_codes": len(ids), "macro_f1": f1,
                                    "stability": stability})
            self.probs, self.prob_labels = probs, list(clf.classes_)
            self.stop_preds, self.fitted_at = preds, len(ids)
            self.trained = set(ids)
        return True

    def due(self) -> bool:
        """Whether enough new codes arrived since the last fit, or the model learnt from a
        code it may no longer learn from (an overlap document once a second coder joined)."""
        ids = self.training_codes()[0]
        with self.lock:
            stale = not self.trained <= set(ids)
        return self.fitted_at < 0 or stale or len(ids) - self.fitted_at >= self.retrain_every

    def step(self) -> None:
        """One pass of the background thread: retrain when due, then refill the queue."""
        with self.busy:
            if self.due() and self.retrain():
                self.refill(replace=True)
            elif len(self.queue) < self.batch // 2 + 1:
                self.refill()

    def run_background(self) -> threading.Thread:
        """Start the learner thread (a daemon: it never keeps the server alive).

        The interpreter's switch interval drops from 5 ms to 1 ms, so that a request waiting
        for the interpreter lock while the learner runs Python code waits at most about a
        millisecond each time (measured in bench/bench_code.py)."""
        sys.setswitchinterval(SWITCH_INTERVAL)

        def loop():
            while not self.stopping:
                self.wake.wait(timeout=5.0)
                self.wake.clear()
                if not self.stopping:
                    try:
                        self.step()
                    except Exception as exc:  # the coder keeps coding; the page shows it
                        self.error = f"{type(exc).__name__}: {exc}"

        self.error = None
        thread = threading.Thread(target=loop, name="quantformer-learner", daemon=True)
        thread.start()
        return thread

    # -- what the page shows -------------------------------------------------------------

    def guess(self, doc_id: str, coder: str | None = None) -> dict | None:
        """The model's label and probability for a document; None before the first fit, and
        for ``coder`` on a document the model learnt from another coder's code that
        ``coder`` has not coded (until the learner refits without it)."""
        with self.lock:
            if self.probs is None:
                return None
            if coder is not None and doc_id in self.trained and \
                    coder not in self.handled.get(doc_id, {}):
                return None
            p = self.probs[self.pos[doc_id]]
        best = int(p.argmax())
        return {LABEL_COLUMN: self.prob_labels[best], "prob": float(p[best])}

    def progress(self, coder: str) -> dict:
        ids, labels = self.training_codes()
        per = {lab: labels.count(lab) for lab in self.labels}
        with self.lock:
            mine = sum(1 for by in self.handled.values() if coder in by)
            coders = sorted({c for by in self.handled.values() for c in by})
            handled = len(self.handled)
        return {"per_label": per, "coded": len(ids), "handled": handled, "mine": mine,
                "total": int(self.usable.sum()), "coders": coders,
                "machine_coders": list(self.machine_coders)}

    def model_state(self) -> dict:
        with self.lock:
            rounds = list(self.rounds)
        return {"strategy": self.strategy, "queue": len(self.queue),
                "rounds": [{"n_codes": int(r["n_codes"]), "macro_f1": _num(r["macro_f1"]),
                            "stability": _num(r["stability"])} for r in rounds],
                "stop_hint": stop_hint([r["stability"] for r in rounds]),
                "error": getattr(self, "error", None), "precision": self.precision}

    def disagreements(self, coder: str | None = None) -> list[dict]:
        """Documents two human coders coded differently, then documents a human and a machine
        coder coded differently: doc_id, text, each human coder's code (``codes``), each
        machine coder's (``machine``), ``with_machine`` (True: the humans agree, or one coded
        it, and a machine coder differs) and the resolved code (None until reconciled).

        ``coder``: only the documents ``coder`` coded (what the server shows a coder, so
        that an overlap document they have yet to code stays blind); None: all."""
        humans, machine = [], []
        with self.lock:
            for doc, by in self.handled.items():
                if coder is not None and coder not in by:
                    continue
                codes = {c: lab for c, (s, lab) in by.items() if s == "code"}
                bots = self.machine.get(doc, {})
                differ = len(set(codes.values())) > 1
                if differ or (codes and set(bots.values()) - set(codes.values())):
                    (humans if differ else machine).append(
                        {"doc_id": doc, "codes": codes, "machine": dict(bots),
                         "with_machine": not differ, "resolved": self.resolved.get(doc),
                         "text": str(self.frame["text"].iloc[self.pos[doc]])})
        return humans + machine


def _num(x) -> float | None:
    return None if x is None or x != x else float(x)
