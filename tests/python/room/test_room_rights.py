"""The coding room with more than one coder, over HTTP against a real server: the blind
overlap holds when a second coder starts the room under another name, reconciliation shows a
coder only the documents they coded, resolving and the strategy are rights, and one link is
one person."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import numpy as np
import pandas as pd
import pytest

from quantformer.io.codebook import make_codebook
from quantformer.room.export import export_codes
from quantformer.room.loop import Room, in_overlap
from quantformer.room.server import RoomServer
from quantformer.room.store import Store

OVERLAP = 0.5


def corpus(n: int = 60, seed: int = 0):
    """Documents whose overlap share (by the hash of their id) forms a cluster of its own;
    the others are two clusters, true labels a and b."""
    rng = np.random.default_rng(seed)
    ids = [f"d{i:03d}" for i in range(n)]
    blind = np.array([in_overlap(d, OVERLAP) for d in ids])
    centre = np.where(blind, 3, np.arange(n) % 2)
    vecs = np.eye(8)[centre] * 5 + rng.normal(0, 0.3, (n, 8))
    frame = pd.DataFrame({"doc_id": ids, "text": [f"document {i}" for i in range(n)]})
    truth = np.where(np.arange(n) % 2, "b", "a")
    return frame, vecs.astype(np.float32), truth, blind


class Served:
    """A RoomServer in a thread over a project, with the coders' tokens."""

    def __init__(self, room: Room, **kw):
        self.server = RoomServer(room, "127.0.0.1", 0, **kw)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.tokens = {c or "": t for t, c in self.server.tokens.items()}

    def call(self, path: str, token: str, body: dict | None = None):
        """(status, answer) of a GET (body None) or a POST with ``token``."""
        req = urllib.request.Request(self.base + path, headers={
            "X-Token": token, "Content-Type": "application/json"},
            data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def open_room(path, **kw):
    frame, vecs, truth, blind = corpus()
    store = Store(path)
    store.bind_corpus(frame, "blobs")
    room = Room(frame, vecs, store, make_codebook("a,b,c"), overlap=OVERLAP,
                retrain_every=2, **kw)
    room.step()
    return room, truth, blind


def code_over_http(served, token, room, truth, blind, n, wrong_overlap=None):
    """Code ``n`` documents as the page does; overlap documents get ``wrong_overlap`` when
    given (a deliberately wrong code), the others their true label. Returns {doc: label}."""
    done = {}
    for _ in range(n):
        _, state = served.call("/api/state?guess=1", token)
        doc = state["doc"]["doc_id"]
        i = room.pos[doc]
        label = wrong_overlap if wrong_overlap and blind[i] else str(truth[i])
        status, _ = served.call("/api/code", token, {"doc_id": doc, "label": label,
                                                      "version": state["doc"]["version"]})
        assert status == 200
        done[doc] = label
        room.step()  # the learner's pass (the background thread's, run here)
    return done


def test_a_second_coder_starting_the_room_under_another_name_gets_no_guess_from_the_first(
        tmp_path):
    """The vignette's setup: alice codes alone (overlap codes deliberately "c"), then the
    room is started again by bob (one link, his name). Before the fix the model had learnt
    alice's overlap codes, and bob's guess on every overlap document was alice's "c"."""
    room, truth, blind = open_room(tmp_path / "p.sqlite")
    alice = Served(room, coder="alice")
    try:
        coded = code_over_http(alice, alice.tokens[""], room, truth, blind, 24,
                               wrong_overlap="c")
    finally:
        alice.close()
    overlap = {d for d, lab in coded.items() if lab == "c"}
    assert len(overlap) >= 4
    room.store.close()
    again, truth, blind = open_room(tmp_path / "p.sqlite")  # bob's start: one link, his name
    bob = Served(again, coder="bob")
    try:
        guesses = {}
        for _ in range(len(overlap)):
            _, state = bob.call("/api/state?guess=1", bob.tokens[""])
            doc = state["doc"]["doc_id"]
            assert state["coder"] == "bob" and doc in overlap
            guesses[doc] = state["guess"]
            again.step()
            _, state = bob.call("/api/state?guess=1", bob.tokens[""])  # after a refit
            guesses[doc + "+"] = state["guess"]
            bob.call("/api/code", bob.tokens[""], {"doc_id": doc, "label": str(
                truth[again.pos[doc]]), "version": state["doc"]["version"]})
        assert set(d.rstrip("+") for d in guesses) == overlap  # every overlap doc shown
        assert not [g for g in guesses.values() if g is not None and g["label"] == "c"]
        assert any(g is not None for g in guesses.values())  # a guess there is, not alice's
    finally:
        bob.close()


def test_one_link_is_one_person(tmp_path):
    """A single link's token names its coder: another name on it is refused (403), so a
    second coder cannot code through the first one's link with the owner's powers."""
    room, truth, blind = open_room(tmp_path / "p.sqlite")
    s = Served(room, coder="alice")
    token = s.tokens[""]
    try:
        status, state = s.call("/api/state?coder=alice", token)
        assert status == 200 and state["coder"] == "alice" and state["owner"] is True
        status, answer = s.call("/api/state?coder=bob", token)
        assert status == 403
        assert "alice's alone" in answer["error"] and "{coders}" not in answer["error"]
        doc = state["doc"]["doc_id"]
        for path, body in (("/api/code", {"coder": "bob", "doc_id": doc, "label": "a"}),
                           ("/api/done", {"coder": "bob", "stop": True}),
                           ("/api/finetune", {"coder": "bob"})):
            status, answer = s.call(path, token, body)
            assert status == 403, path
        assert room.store.current_codes().empty and s.thread.is_alive()
    finally:
        s.close()


def team_room(tmp_path):
    room, truth, blind = open_room(tmp_path / "p.sqlite", team=2)
    s = Served(room, coders=["alice", "bob"])
    return room, truth, blind, s


def test_reconciliation_shows_a_coder_only_the_documents_they_coded(tmp_path):
    """Before the fix bob's GET /api/reconcile listed documents only alice (and a machine
    coder) coded, with alice's code and the text: the overlap was no longer blind."""
    room, truth, blind = open_room(tmp_path / "p.sqlite", team=2)
    frame = room.frame
    # a machine coder that is wrong everywhere (imported as --add-coder does)
    room.store.replace_machine_coder("llm", [(d, "c") for d in frame["doc_id"]])
    room.load_codes()
    s = Served(room, coders=["alice", "bob"])
    try:
        alice = code_over_http(s, s.tokens["alice"], room, truth, blind, 16, wrong_overlap="c")
        status, listed = s.call("/api/reconcile", s.tokens["bob"])
        assert status == 200 and listed["disagreements"] == []  # bob coded nothing yet
        status, listed = s.call("/api/reconcile", s.tokens["alice"])
        mine = {d["doc_id"] for d in listed["disagreements"]}
        assert mine == {d for d, lab in alice.items() if lab != "c"}  # alice vs the machine
        bob = code_over_http(s, s.tokens["bob"], room, truth, blind, 6)
        shared = set(alice) & set(bob)
        assert shared and shared <= {d for d in alice if blind[room.pos[d]]}
        _, listed = s.call("/api/reconcile", s.tokens["bob"])
        seen = {d["doc_id"]: d for d in listed["disagreements"]}
        assert set(seen) == set(bob)  # every one of bob's differs from alice or the machine
        assert all(seen[d]["codes"]["alice"] == "c" for d in shared)
        assert not set(seen) - set(bob)
    finally:
        s.close()


def test_resolving_is_for_the_coders_of_the_document_and_strategy_for_the_owner(tmp_path):
    """Before the fix bob resolved a document only alice coded (200, and --final took it)
    and changed the strategy for everyone (200)."""
    room, truth, blind, s = team_room(tmp_path)
    try:
        alice = code_over_http(s, s.tokens["alice"], room, truth, blind, 10, wrong_overlap="c")
        bob = code_over_http(s, s.tokens["bob"], room, truth, blind, 4)
        shared = sorted(set(alice) & set(bob))
        only_alice = sorted(set(alice) - set(bob))
        assert shared and only_alice
        status, answer = s.call("/api/resolve", s.tokens["bob"],
                                {"doc_id": only_alice[0], "label": "b"})
        assert status == 403 and "did not code" in answer["error"]
        status, answer = s.call("/api/strategy", s.tokens["bob"], {"strategy": "random"})
        assert status == 403 and "only alice" in answer["error"]
        assert room.strategy == "margin" and room.store.resolutions().empty
        status, answer = s.call("/api/resolve", s.tokens["bob"],
                                {"doc_id": shared[0], "label": "a"})
        assert status == 200
        status, _ = s.call("/api/strategy", s.tokens["alice"], {"strategy": "random"})
        assert status == 200 and room.strategy == "random"
    finally:
        s.close()
    room.store.close()
    final = export_codes(tmp_path / "p.sqlite", tmp_path / "final.csv", final=True)
    row = final.set_index("doc_id").loc[shared[0]]
    assert (row["label"], row["source"], row["resolved_by"]) == ("a", "resolved", "bob")
    assert final.set_index("doc_id").loc[only_alice[0], "resolved_by"] is None or pd.isna(
        final.set_index("doc_id").loc[only_alice[0], "resolved_by"])
