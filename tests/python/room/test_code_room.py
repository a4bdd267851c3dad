"""The coding room (issue 26) without a browser: the project store, the codebook, the model
in the loop, the server's token rule and the CLI's bad-input checks."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from quantformer._core.errors import InputError
from quantformer.cli.main import main
from quantformer.io.codebook import make_codebook
from quantformer.room.loop import Room, in_overlap
from quantformer.room.progress import prediction_stability, stop_hint
from quantformer.room.server import RoomServer
from quantformer.room.export import export_codes, final_codes
from quantformer.room.store import Conflict, Store


def blobs(n_per: int = 30, seed: int = 0):
    """Three separated clusters of vectors (true labels a, b, c) and their corpus frame."""
    rng = np.random.default_rng(seed)
    vecs = np.concatenate([c + rng.normal(0, 0.3, (n_per, 8)) for c in np.eye(8)[:3] * 5])
    n = len(vecs)
    frame = pd.DataFrame({"doc_id": [f"d{i:03d}" for i in range(n)],
                          "text": [f"document number {i}" for i in range(n)],
                          "party": np.where(np.arange(n) % 2, "x", "y"),
                          "seats": pd.array(([1, None] * n)[:n], dtype="Int64")})
    return frame, vecs.astype(np.float32), np.repeat(["a", "b", "c"], n_per)


def new_room(tmp_path, **kw):
    frame, vecs, truth = blobs()
    store = Store(tmp_path / "p.sqlite")
    store.bind_corpus(frame, "blobs")
    room = Room(frame, vecs, store, make_codebook("a,b,c"), **kw)
    return room, truth


# ------------------------------------------------------------------------------------------
# store


def test_store_keeps_every_code_undo_marks_and_resume_reads_back(tmp_path):
    room, truth = new_room(tmp_path)
    store = room.store
    store.add_code("d000", "ann", "a", strategy="cold")
    store.add_code("d001", "ann", None, status="skip", strategy="margin")
    store.add_code("d002", "ann", "b", strategy="margin")
    assert store.undo("ann") == ("d002", 2)  # its doc_id and new version
    store.add_code("d002", "ann", "c", strategy="back")
    store.add_comment("d002", "ann", "ironic")
    store.close()
    again = Store(tmp_path / "p.sqlite")
    cur = again.current_codes()
    assert cur[["doc_id", "status"]].values.tolist() == [
        ["d000", "code"], ["d001", "skip"], ["d002", "code"]]
    assert cur["label"].fillna("-").tolist() == ["a", "-", "c"]
    assert cur["comment"].fillna("-").tolist() == ["-", "-", "ironic"]
    # every row is kept: 4 inserted, one of them undone
    assert again.query("SELECT COUNT(*) n, SUM(undone) u FROM codes").values.tolist() == [[4, 1]]
    again.close()


def test_project_of_another_corpus_is_refused(tmp_path):
    frame, _, _ = blobs()
    store = Store(tmp_path / "p.sqlite")
    store.bind_corpus(frame, "a.csv")
    store.bind_corpus(frame.sample(frac=1.0, random_state=1), "a.csv")  # same docs, reordered
    other = frame.assign(text=frame["text"].where(frame.index != 3, "edited"))
    with pytest.raises(InputError, match="was made for another corpus"):
        store.bind_corpus(other, "b.csv")


@pytest.mark.skipif(shutil.which("chattr") is None, reason="needs chattr")
def test_read_only_project_file_is_a_clear_error(tmp_path):
    path = tmp_path / "p.sqlite"
    Store(path).close()
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        with pytest.raises(InputError, match="is read-only"):
            Store(path)
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_final_codes_resolved_agreed_single_and_open_disagreement():
    current = pd.DataFrame({
        "doc_id": ["x", "x", "y", "y", "z", "w", "w", "v"],
        "label": ["a", "a", "a", "b", "c", "a", "b", None],
        "coder": ["p", "q", "p", "q", "p", "p", "q", "p"],
        "status": ["code"] * 7 + ["skip"]})
    resolved = pd.DataFrame({"doc_id": ["w"], "label": ["b"], "coder": ["q"]})
    out = final_codes(current, resolved)
    assert out.fillna("-").values.tolist() == [
        ["x", "a", 2, "agreed", "-"], ["z", "c", 1, "single", "-"], ["w", "b", 2, "resolved", "q"]]


# ------------------------------------------------------------------------------------------
# codebook


@pytest.mark.parametrize("labels, message", [
    ("a", "at least two labels"),
    ("a,b,a", "must be distinct"),
    ("toxic,Toxic", "equal up to case"),  # issue 36
    (",".join(f"l{i}" for i in range(10)), "more than the nine digit keys"),
])
def test_bad_codebooks(labels, message):
    with pytest.raises(InputError, match=message):
        make_codebook(labels)


def test_codebook_file_with_keys_descriptions_and_examples(tmp_path):
    entries = [{"label": f"l{i}", "key": k, "description": f"class {i}"}
               for i, k in enumerate("1234567890xyz"[:12]) if k != "0"]
    entries[0]["examples"] = ["first example", "second"]
    (tmp_path / "cb.json").write_text(json.dumps(entries))
    book = make_codebook(path=tmp_path / "cb.json")
    assert [e["key"] for e in book] == list("123456789xyz")[:11]
    assert book[0]["examples"] == ["first example", "second"]
    pd.DataFrame({"label": ["pro", "con"], "key": ["p", "k"],
                  "examples": ["yes | sure", None]}).to_csv(tmp_path / "cb.csv", index=False)
    book = make_codebook(path=tmp_path / "cb.csv")
    assert [(e["label"], e["key"], e["examples"]) for e in book] == [
        ("pro", "p", ["yes", "sure"]), ("con", "k", [])]
    entries = [{"label": "pro", "key": "s"}, {"label": "con", "key": "k"}]
    (tmp_path / "bad.json").write_text(json.dumps(entries))
    with pytest.raises(InputError, match="s = skip"):
        make_codebook(path=tmp_path / "bad.json")


# ------------------------------------------------------------------------------------------
# the loop


def code_until(room, coder, truth, n):
    shown = []
    for _ in range(n):
        doc, why = room.next_for(coder)
        shown.append((doc, why))
        room.code(coder, doc, str(truth[room.pos[doc]]))
        room.step()
    return shown


def test_loop_cold_start_then_margin_learning_curve_and_stop_hint(tmp_path):
    room, truth = new_room(tmp_path, retrain_every=5, random_share=0.0)
    room.step()
    first = [room.next_for("ann")]
    assert first[0][1] == "cold"  # no codes yet: k-means medoids
    room.shown.clear()
    shown = code_until(room, "ann", truth, 30)
    whys = [w for _, w in shown]
    assert whys[0] == "cold" and "margin" in whys[5:]
    rounds = room.store.rounds()
    # a round at the first two classes, then every 5 codes
    assert rounds["n_codes"].diff().dropna().ge(5).all() and len(rounds) >= 5
    # three separated clusters: cross-validated macro-F1 reaches 1 and predictions stabilise
    assert rounds["macro_f1"].iloc[-1] == pytest.approx(1.0)
    assert room.model_state()["stop_hint"]
    assert stop_hint([None, 0.5, 1.0, 1.0, 0.98]) and not stop_hint([1.0, 1.0])
    assert prediction_stability(np.array(["a", "b"]), np.array(["a", "b"])) == 1.0
    assert len({d for d, _ in shown}) == 30  # never the same document twice


def test_restart_refits_without_a_second_point_on_the_learning_curve(tmp_path):
    room, truth = new_room(tmp_path, retrain_every=5)
    room.step()
    code_until(room, "ann", truth, 12)
    before = room.store.rounds()["n_codes"].tolist()
    again = Room(room.frame, room.vectors, room.store, room.codebook, retrain_every=5)
    again.step()  # what a restart does before serving
    assert again.probs is not None and again.model_state()["strategy"] == "margin"
    assert room.store.rounds()["n_codes"].tolist() == before
    assert len(again.model_state()["rounds"]) == len(before)


def test_undo_shows_the_document_again_and_skips_are_not_shown_again(tmp_path):
    room, truth = new_room(tmp_path)
    room.step()
    d1, _ = room.next_for("ann")
    room.code("ann", d1, "a")
    d2, _ = room.next_for("ann")
    room.code("ann", d2, None, status="skip")
    assert room.undo("ann") == d2
    assert room.next_for("ann") == (d2, "back")
    room.code("ann", d2, "b")
    d3, _ = room.next_for("ann")
    assert d3 not in (d1, d2)
    assert room.progress("ann")["per_label"] == {"a": 1, "b": 1, "c": 0}


def test_two_coders_overlap_is_shown_to_both_blind_and_agreement(tmp_path):
    room, truth = new_room(tmp_path, overlap=0.5)
    room.step()
    ann = code_until(room, "ann", truth, 12)
    bob = code_until(room, "bob", truth, 12)
    ann_docs, bob_docs = {d for d, _ in ann}, {d for d, _ in bob}
    shared = ann_docs & bob_docs
    assert shared == {d for d in ann_docs if in_overlap(d, 0.5)}
    assert all(w == "overlap" for d, w in bob if d in shared)
    agree = room.agreement(n_boot=50)
    assert agree["n"] == len(shared) and agree["percent"] == 1.0
    # disagree on one overlap document: it is listed until reconciled
    doc = sorted(shared)[0]
    other = "b" if truth[room.pos[doc]] != "b" else "c"
    room.shown["bob"] = (doc, "requested")
    room.code("bob", doc, other)
    assert [d["doc_id"] for d in room.disagreements()] == [doc]
    assert doc not in room.training_codes()[0]
    room.resolve(doc, other, "ann")
    assert room.disagreements()[0]["resolved"] == other
    assert dict(zip(*room.training_codes()))[doc] == other
    out = export_codes(room.store.path, tmp_path / "final.csv", final=True)
    assert out.set_index("doc_id").loc[doc, "source"] == "resolved"


def test_blind_overlap_trains_nobody_until_two_coders_coded_it(tmp_path):
    """Issue 36: the second coder's guess on an overlap document came from a model trained on
    the first coder's code of it, and the page said the document was chosen by "overlap"."""
    from quantformer.room.server import doc_state

    room, truth = new_room(tmp_path, overlap=0.5, team=2)
    room.step()
    ann = code_until(room, "ann", truth, 12)
    overlap = [d for d, _ in ann if in_overlap(d, 0.5)]
    assert overlap
    trained = set(room.training_codes()[0])
    assert not trained & set(overlap)  # ann's codes of the overlap train nobody yet
    assert trained == {d for d, _ in ann} - set(overlap)
    state = doc_state(room, "bob", True)
    assert state["doc"]["doc_id"] in overlap
    assert state["doc"]["strategy"] == "chosen at random"  # not "overlap"
    room.code("bob", state["doc"]["doc_id"], truth[room.pos[state["doc"]["doc_id"]]])
    assert state["doc"]["doc_id"] in room.training_codes()[0]  # both coded: it trains now
    assert room.store.current_codes().query("coder == 'bob'")["strategy"].tolist() == [
        "overlap"]  # the project keeps why
    # one coder alone: the overlap is not held back
    (tmp_path / "alone").mkdir()
    alone, truth = new_room(tmp_path / "alone", overlap=0.5)
    alone.step()
    solo = code_until(alone, "ann", truth, 6)
    assert set(alone.training_codes()[0]) == {d for d, _ in solo}


# ------------------------------------------------------------------------------------------
# the server


@pytest.fixture()
def served(tmp_path):
    room, truth = new_room(tmp_path)
    room.step()
    server = RoomServer(room, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, truth
    server.shutdown()
    server.server_close()


def request(url, body=None, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["X-Token"] = token
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers=headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, json.loads(r.read() or b"{}")


def test_every_request_needs_the_token(served):
    server, _ = served
    base = f"http://127.0.0.1:{server.server_address[1]}"
    for path in ("/", "/static/app.js", "/api/state"):
        with pytest.raises(urllib.error.HTTPError) as err:
            request(base + path)
        assert err.value.code == 403
    with pytest.raises(urllib.error.HTTPError) as err:  # token in the URL is not enough
        request(f"{base}/api/code?token={server.token}", {"doc_id": "d000", "label": "a"})
    assert err.value.code == 403
    assert server.room.store.current_codes().empty
    status, state = request(f"{base}/api/state?token={server.token}")
    doc = state["doc"]["doc_id"]
    assert state["doc"]["docvars"]["seats"] in (1, None)  # pd.NA shown as missing
    status, after = request(base + "/api/code", {"doc_id": doc, "label": "a"}, server.token)
    assert status == 200 and after["doc"]["doc_id"] != doc
    assert server.room.store.current_codes()["doc_id"].tolist() == [doc]


def test_links_per_coder_carry_the_token(served):
    server, _ = served
    port = server.server_address[1]
    assert server.url() == f"http://127.0.0.1:{port}/?token={server.token}"
    assert server.url("ann b") == f"http://127.0.0.1:{port}/?token={server.token}&coder=ann%20b"
    assert len(server.token) >= 32


def test_request_log_has_no_token_and_no_text(served, capfd):
    server, _ = served
    server.quiet = False
    base = f"http://127.0.0.1:{server.server_address[1]}"
    _, state = request(f"{base}/api/state?token={server.token}")
    request(base + "/api/code", {"doc_id": state["doc"]["doc_id"], "label": "b"}, server.token)
    err = capfd.readouterr().err
    assert "POST /api/code 200" in err
    assert server.token not in err and "document number" not in err


def raw_exchange(port, data: bytes) -> bytes:
    """Send raw bytes on one connection and read what comes back until it closes."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
    return b"".join(chunks)


def test_refused_post_body_is_read_and_the_log_never_shows_it(served, capfd):
    """Issue 36: a 403 left its body on a keep-alive connection; the next request got 400
    and the log printed the body's text and the next request's token."""
    server, _ = served
    server.quiet = False
    port = server.server_address[1]
    secret = b'{"doc_id": "d000", "text": "document number SECRET"}'
    refused = (b"POST /api/comment HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"X-Token: wrong\r\nContent-Length: " + str(len(secret)).encode() +
               b"\r\n\r\n" + secret)
    good = (f"GET /api/agreement HTTP/1.1\r\nHost: x\r\nX-Token: {server.token}\r\n"
            "Connection: close\r\n\r\n").encode()
    reply = raw_exchange(port, refused + good)
    assert reply.startswith(b"HTTP/1.1 403")
    # the connection is either answered (body read) or closed; never a 400 on the next one
    assert b"HTTP/1.1 400" not in reply
    # a malformed request line carrying a token: logged without it
    raw_exchange(port, f"GARBAGE {server.token} document number x\r\n\r\n".encode())
    err = capfd.readouterr().err
    assert "SECRET" not in err and server.token not in err and "document number" not in err
    assert "POST /api/comment 403" in err


def test_get_to_a_post_endpoint_is_405_and_favicon_is_not_403(served):
    server, _ = served
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with pytest.raises(urllib.error.HTTPError) as err:
        request(f"{base}/api/code?token={server.token}")
    assert err.value.code == 405 and err.value.headers["Allow"] == "POST"
    with urllib.request.urlopen(base + "/favicon.ico", timeout=10) as r:
        assert r.status == 204 and r.read() == b""


def refused(url, body, token):
    """The status and JSON answer of a request answered with an error."""
    with pytest.raises(urllib.error.HTTPError) as err:
        request(url, body, token)
    return err.value.code, json.loads(err.value.read())


def test_one_coder_in_two_tabs_is_told_and_undo_never_takes_back_the_other_tab(served):
    """Issue 36: one coder in two tabs: the later code won silently, and undo then restored
    the other tab's code."""
    server, _ = served
    base, token = f"http://127.0.0.1:{server.server_address[1]}", server.token
    codes = lambda: server.room.store.current_codes().set_index("doc_id")["label"].to_dict()
    _, tab1 = request(f"{base}/api/state", token=token)
    _, tab2 = request(f"{base}/api/state", token=token)
    doc = tab1["doc"]["doc_id"]
    assert tab2["doc"]["doc_id"] == doc and tab1["doc"]["version"] == 0
    assert tab1["last"] is None
    _, tab1 = request(base + "/api/code", {"doc_id": doc, "label": "a", "version": 0}, token)
    assert tab1["last"] == {"doc_id": doc, "version": 1} and tab1["doc"]["doc_id"] != doc
    # the second tab still shows the document uncoded: its code is refused, nothing written
    status, answer = refused(base + "/api/code", {"doc_id": doc, "label": "b", "version": 0},
                             token)
    assert status == 409 and codes() == {doc: "a"}
    assert answer["conflict"] == {"doc_id": doc, "version": 1, "status": "code", "label": "a"}
    assert answer["error"].startswith(f"Document {doc} was coded as “a” in another tab")
    assert answer["state"]["doc"]["doc_id"] == tab1["doc"]["doc_id"]  # where tab 1 is
    # its "back" saw no code: refused too, nothing undone
    status, answer = refused(base + "/api/undo", {"last": None}, token)
    assert status == 409 and answer["conflict"]["label"] == "a" and codes() == {doc: "a"}
    # the coder replaces the code knowingly (the version the 409 gave)
    _, tab2 = request(base + "/api/code", {"doc_id": doc, "label": "b", "version": 1}, token)
    assert codes() == {doc: "b"} and tab2["last"] == {"doc_id": doc, "version": 2}
    # tab 1's "back" would restore "a" over tab 2's "b": refused
    status, answer = refused(base + "/api/undo", {"last": {"doc_id": doc, "version": 1}},
                             token)
    assert status == 409 and codes() == {doc: "b"}
    assert answer["conflict"] == {"doc_id": doc, "version": 2, "status": "code", "label": "b"}
    # with the last code it now saw, the undo goes through: "b" taken back, "a" current
    _, state = request(base + "/api/undo", {"last": answer["state"]["last"]}, token)
    assert state["undone"] == doc and state["doc"] == {**state["doc"], "doc_id": doc,
                                                        "version": 3}
    assert codes() == {doc: "a"}
    rows = server.room.store.query("SELECT label, undone FROM codes ORDER BY id")
    assert rows.values.tolist() == [["a", 0], ["b", 1]]  # nothing lost
    # a stale version of a document coded elsewhere and then undone there: 409, uncoded
    _, state = request(base + "/api/undo", {"last": state["last"]}, token)
    status, answer = refused(base + "/api/code", {"doc_id": doc, "label": "c", "version": 3},
                             token)
    assert status == 409 and answer["conflict"]["status"] is None and codes() == {}
    assert "left uncoded" in answer["error"]
    # without a version (a script), a code is written as before
    request(base + "/api/code", {"doc_id": doc, "label": "c"}, token)
    assert codes() == {doc: "c"} and server.room.version(doc, "coder1") == 5
    status, answer = refused(base + "/api/code", {"doc_id": doc, "label": "c",
                                                  "version": "5"}, token)
    assert status == 400 and "whole number" in answer["error"]


# ------------------------------------------------------------------------------------------
# the CLI's bad input (all refused before anything is embedded or served)


def write_corpus(path, frame):
    frame.to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("case, message", [
    ("empty", "no documents"),
    ("duplicates", "duplicate"),
    ("one_label", "at least two labels"),
    ("ten_labels", "more than the nine digit keys"),
    ("no_input", "give the corpus to code with --input"),
    ("read_only", "is read-only"),
])
def test_cli_bad_input(tmp_path, capsys, case, message):
    frame, _, _ = blobs(3)
    corpus = write_corpus(tmp_path / "c.csv", frame)
    args = ["code", "--input", corpus, "--labels", "a,b", "--project",
            str(tmp_path / "p.sqlite"), "--no-browser"]
    if case == "empty":
        (tmp_path / "c.csv").write_text("doc_id,text\n")
    elif case == "duplicates":
        write_corpus(tmp_path / "c.csv", pd.concat([frame, frame.head(2)]))
    elif case in ("one_label", "ten_labels"):
        args[4] = "a" if case == "one_label" else ",".join(f"l{i}" for i in range(10))
    elif case == "no_input":
        args = args[:1] + args[3:]
    if case == "read_only":  # chattr +i: root ignores chmod
        if shutil.which("chattr") is None:
            pytest.skip("needs chattr")
        Store(tmp_path / "p.sqlite").close()
        subprocess.run(["chattr", "+i", str(tmp_path / "p.sqlite")], check=True)
        try:
            assert main(args) == 2
        finally:
            subprocess.run(["chattr", "-i", str(tmp_path / "p.sqlite")], check=True)
        assert message in capsys.readouterr().err
        return
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "p.sqlite").exists()  # nothing half-written


def test_cli_refuses_project_of_another_corpus(tmp_path, capsys):
    frame, _, _ = blobs(3)
    store = Store(tmp_path / "p.sqlite")
    store.bind_corpus(frame, "first")
    store.close()
    corpus = write_corpus(tmp_path / "other.csv", frame.assign(text="something else"))
    assert main(["code", "--input", corpus, "--labels", "a,b", "--project",
                 str(tmp_path / "p.sqlite"), "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "was made for another corpus" in err and "--project" in err


def test_a_port_in_use_is_refused_before_any_work(tmp_path, capsys):
    """Issue 36: the port was found in use only after embedding and writing the project."""
    import socket

    frame, _, _ = blobs(3)
    corpus = write_corpus(tmp_path / "c.csv", frame)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["code", "--input", corpus, "--labels", "a,b", "--project",
                     str(tmp_path / "p.sqlite"), "--no-browser", "--port", str(port),
                     "--embed-model", str(tmp_path / "no-such-model")]) == 2
    err = capsys.readouterr().err
    assert f"cannot serve on 127.0.0.1:{port}" in err and "--port" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv"]  # nothing written


def test_a_second_server_on_one_project_is_refused(tmp_path, capsys):
    """Issue 36: two servers on one project file showed both coders the same documents."""
    import sys

    frame, _, _ = blobs(3)
    corpus = write_corpus(tmp_path / "c.csv", frame)
    project = tmp_path / "p.sqlite"
    Store(project).bind_corpus(frame, corpus)
    holder = subprocess.Popen(  # the first server's hold, in another process
        [sys.executable, "-c", "import sys; from quantformer.room.store import Store; "
         f"s = Store({str(project)!r}, exclusive=True); print('held', flush=True); "
         "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["code", "--input", corpus, "--labels", "a,b", "--project", str(project),
                     "--no-browser", "--embed-model", str(tmp_path / "no-such-model")]) == 2
        err = capsys.readouterr().err
        assert "is open in another coding room" in err and "per-coder link" in err
        assert "--coders" in err
        # reading the codes while it serves is fine
        assert main(["code", "--project", str(project), "--export",
                     str(tmp_path / "c.parquet"), "--quiet"]) == 0
    finally:
        holder.communicate("", timeout=10)
    Store(project, exclusive=True).close()  # released when its server ends


def test_a_file_without_the_project_mark_is_refused_untouched(tmp_path, capsys):
    """Issue 36: --export on another application's database exited 0 and added tables."""
    import hashlib
    import sqlite3

    foreign = tmp_path / "other.sqlite"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE people (name TEXT)")
    db.execute("INSERT INTO people VALUES ('x')")
    db.commit()
    db.close()
    before = hashlib.sha256(foreign.read_bytes()).hexdigest()
    frame, _, _ = blobs(3)
    corpus = write_corpus(tmp_path / "c.csv", frame)
    for args in (["--export", str(tmp_path / "codes.csv")],
                 ["--input", corpus, "--labels", "a,b", "--no-browser"]):
        assert main(["code", "--project", str(foreign), *args]) == 2
        err = capsys.readouterr().err
        assert "other tables (people)" in err and "nothing was written" in err
    assert hashlib.sha256(foreign.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "other.sqlite"]
    # a project is marked; one made before the mark is marked when opened to code
    store = Store(tmp_path / "p.sqlite")
    store.bind_corpus(frame, corpus)
    assert store.db.execute("PRAGMA application_id").fetchone()[0] == 0x5146434F
    store.db.execute("PRAGMA application_id=0")
    store.close()
    Store(tmp_path / "p.sqlite", create=False).close()
    store = Store(tmp_path / "p.sqlite")
    assert store.db.execute("PRAGMA application_id").fetchone()[0] == 0x5146434F
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == 2
    store.close()


def test_a_project_of_schema_1_is_read_and_migrated_a_newer_one_refused(tmp_path, capsys):
    """A project made before the versions of issue 36 (user_version 1) is exported as it is
    and gets its versions when opened to code; one of a newer quantformer is left alone."""
    import hashlib

    path = tmp_path / "p.sqlite"
    store = Store(path)
    store.add_code("d000", "ann", "a")
    store.add_code("d000", "ann", "b")
    store.undo("ann")
    store.add_code("d001", "ann", "c")
    store.add_code("d000", "bob", "a")
    store.db.execute("DROP TABLE versions")  # as schema 1 made it
    store.db.execute("PRAGMA user_version=1")
    store.close()
    out = export_codes(path, tmp_path / "codes.csv")
    assert out[["doc_id", "coder", "label"]].values.tolist() == [
        ["d000", "ann", "a"], ["d001", "ann", "c"], ["d000", "bob", "a"]]
    store = Store(path)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert store.versions() == {("d000", "ann"): 3, ("d001", "ann"): 1, ("d000", "bob"): 1}
    with pytest.raises(Conflict):  # the page of before the migration saw version 2
        store.add_code("d000", "ann", "c", version=2)
    store.db.execute("PRAGMA user_version=3")
    store.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    for create in (False, True):
        with pytest.raises(InputError, match="made by a newer quantformer"):
            Store(path, create=create)
    assert main(["code", "--project", str(path), "--export", str(tmp_path / "x.csv")]) == 2
    assert "update quantformer" in capsys.readouterr().err
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_cli_export_refuses_corpus_flags_and_needs_the_project(tmp_path, capsys):
    assert main(["code", "--project", str(tmp_path / "none.sqlite"), "--export",
                 str(tmp_path / "c.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    Store(tmp_path / "p.sqlite").close()
    assert main(["code", "--project", str(tmp_path / "p.sqlite"), "--labels", "a,b",
                 "--export", str(tmp_path / "c.csv")]) == 2
    assert "leave out --labels" in capsys.readouterr().err
    time.sleep(0)


# ------------------------------------------------------------------------------------------
# fine-tune now: a real `quantformer finetune` child process on a tiny model


def code_true(room, truth, n_per):
    """Commit ``n_per`` true codes of each label as coder ann."""
    for lab in ("a", "b", "c"):
        for i in np.flatnonzero(truth == lab)[:n_per]:
            room.code("ann", room.ids[i], lab)


def wait_state(server, states, timeout=300):
    base = f"http://127.0.0.1:{server.server_address[1]}"
    deadline = time.time() + timeout
    while time.time() < deadline:
        _, state = request(f"{base}/api/finetune?token={server.token}")
        if state["state"] in states:
            return state
        time.sleep(0.5)
    raise AssertionError(f"fine-tune still {state['state']} after {timeout} s")


def finetune_served(tmp_path, model_dir, min_codes=5):
    from quantformer.room.finetune_now import FinetuneNow

    room, truth = new_room(tmp_path)
    runner = FinetuneNow(room.store, tmp_path / "models", model=str(model_dir), epochs=1,
                         valid_fraction=0.25, min_codes=min_codes, device="cpu")
    server = RoomServer(room, "127.0.0.1", 0, coder="ann", finetune=runner)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, room, truth, runner


def test_finetune_now_runs_a_child_409_while_running_and_a_restart_shows_it(
        tmp_path, tiny_bert_dir):
    server, room, truth, runner = finetune_served(tmp_path, tiny_bert_dir)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert request(f"{base}/api/finetune?token={server.token}")[1] == {"state": "none"}
        code_true(room, truth, 3)
        with pytest.raises(urllib.error.HTTPError) as err:  # too few codes: 400, which ones
            request(base + "/api/finetune", {}, server.token)
        assert err.value.code == 400
        message = json.loads(err.value.read())["error"]
        assert "at least 5 codes" in message and "a (3), b (3), c (3)" in message
        assert not (tmp_path / "models").exists()  # nothing written
        code_true(room, truth, 6)
        status, started = request(base + "/api/finetune", {}, server.token)
        assert status == 200 and started["state"] == "running" and started["n_codes"] == 18
        assert started["label_counts"] == {"a": 6, "b": 6, "c": 6}
        with pytest.raises(urllib.error.HTTPError) as err:  # one at a time
            request(base + "/api/finetune", {}, server.token)
        assert err.value.code == 409
        # coding goes on while it runs
        _, state = request(f"{base}/api/state?token={server.token}&coder=ann")
        t0 = time.perf_counter()
        request(base + "/api/code", {"coder": "ann", "doc_id": state["doc"]["doc_id"],
                                     "label": "a"}, server.token)
        assert time.perf_counter() - t0 < 2.0
        done = wait_state(server, ("done", "failed"))
        assert done["state"] == "done", done["error"]
        model = json.loads((tmp_path / "models" / done["model"].split("/")[-1]
                            / "quantformer.json").read_text())
        assert model["labels"] == ["a", "b", "c"] and model["n_train"] == 14  # 18 - 4 held out
        assert done["macro_f1"] == pytest.approx(model["validation"]["macro_f1"])
        assert [p.name for p in (tmp_path / "models").iterdir()] == [Path(done["model"]).name]
    finally:
        server.shutdown()
        server.server_close()
        runner.stop()
        room.store.close()
    # a restart shows the last run
    from quantformer.room.finetune_now import FinetuneNow

    again = Store(tmp_path / "p.sqlite")
    assert FinetuneNow(again, tmp_path / "models").state()["state"] == "done"
    again.close()


def test_finetune_now_failed_and_stopped_states(tmp_path, tiny_bert_dir):
    from quantformer.room.finetune_now import FinetuneNow

    room, truth = new_room(tmp_path)
    code_true(room, truth, 2)
    ids, labels = room.training_codes()
    (tmp_path / "not-a-model").mkdir()  # a folder without a model: the child fails
    bad = FinetuneNow(room.store, tmp_path / "models", model=str(tmp_path / "not-a-model"),
                      min_codes=2, device="cpu")
    bad.start(room.frame, ids, labels, room.labels)
    bad.proc.wait(timeout=120)
    deadline = time.time() + 20
    while bad.state()["state"] == "running" and time.time() < deadline:
        time.sleep(0.2)
    failed = bad.state()
    assert failed["state"] == "failed" and "not-a-model" in failed["error"]
    assert list((tmp_path / "models").iterdir()) == []  # training file removed
    runner = FinetuneNow(room.store, tmp_path / "models", model=str(tiny_bert_dir),
                         epochs=1, min_codes=2, device="cpu")
    runner.start(room.frame, ids, labels, room.labels)
    runner.stop()
    assert runner.state()["state"] == "stopped"
    # a server killed while a run was going: the next start stops the orphaned child and
    # shows the run as stopped
    runner.start(room.frame, ids, labels, room.labels)
    runner.stopping = True  # (its watcher stands for the dead server: records nothing new)
    assert FinetuneNow(room.store, tmp_path / "models").state()["state"] == "stopped"
    assert runner.proc.wait(timeout=30) == -signal.SIGTERM
    room.store.close()


# ------------------------------------------------------------------------------------------
# several coders on one server: a token each


def test_coders_tokens_are_bound_to_their_coder(tmp_path):
    room, _ = new_room(tmp_path)
    room.step()
    server = RoomServer(room, "127.0.0.1", 0, coders=["alice", "bob"])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        links = {c: server.url(c) for c in ("alice", "bob")}
        tokens = {c: u.split("token=")[1].split("&")[0] for c, u in links.items()}
        assert tokens["alice"] != tokens["bob"] and links["bob"].endswith("&coder=bob")
        # alice's link, asking as alice or as nobody: alice's document
        _, state = request(f"{base}/api/state?token={tokens['alice']}")
        assert state["coder"] == "alice"
        _, state = request(f"{base}/api/state?token={tokens['alice']}&coder=alice")
        doc = state["doc"]["doc_id"]
        for url, body in ((f"{base}/api/state?token={tokens['alice']}&coder=bob", None),
                          (base + "/api/code", {"coder": "bob", "doc_id": doc, "label": "a"}),
                          (base + "/api/undo", {"coder": "bob"})):
            with pytest.raises(urllib.error.HTTPError) as err:
                request(url, body, tokens["alice"] if body is not None else None)
            assert err.value.code == 403
            assert "alice's" in json.loads(err.value.read())["error"]
        assert room.store.current_codes().empty
        request(base + "/api/code", {"doc_id": doc, "label": "a"}, tokens["alice"])
        assert room.store.current_codes()[["doc_id", "coder"]].values.tolist() == [
            [doc, "alice"]]
        with pytest.raises(urllib.error.HTTPError) as err:  # not a token of this server
            request(f"{base}/api/state?token=x{tokens['alice']}")
        assert err.value.code == 403
    finally:
        server.shutdown()
        server.server_close()


def test_agreement_is_computed_once_per_overlap_in_the_background(tmp_path):
    """Issue 36: agreement (500 bootstrap draws) was recomputed on every request."""
    room, truth = new_room(tmp_path, overlap=0.5, team=2)
    room.step()
    code_until(room, "ann", truth, 12)
    code_until(room, "bob", truth, 12)
    server = RoomServer(room, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api/agreement?token={server.token}"
    try:
        _, first = request(url)
        assert first["updating"] is True and first["n"] == 0  # nothing computed yet
        room.agreeing.join(60)
        _, done = request(url)
        assert "updating" not in done and done["n"] > 0 and done["percent"] == 1.0
        assert done == json.loads(json.dumps(room.agreement(), default=float))
        computing = room.agreeing
        _, again = request(url)  # nothing changed: the cached result, no new computation
        assert again == done and room.agreeing is computing
        doc = next(d for d in room.pos if d not in room.handled and not in_overlap(d, 0.5))
        room.code("ann", doc, "a")  # outside the overlap: the overlap is unchanged
        assert request(url)[1] == done and room.agreeing is computing
    finally:
        server.shutdown()
        server.server_close()


def test_links_survive_a_restart_and_new_links_revokes_them(tmp_path):
    """Issue 36: after a restart every coder needed a new link (open tabs got 403)."""
    room, _ = new_room(tmp_path)
    room.step()

    def start(**kw):
        server = RoomServer(room, "127.0.0.1", 0, coders=["alice", "bob"], **kw)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def status(server, token):
        url = f"http://127.0.0.1:{server.server_address[1]}/api/state?token={token}"
        try:
            return request(url)[1]["coder"]
        except urllib.error.HTTPError as err:
            return err.code

    first = start()
    old = {c: first.url(c).split("token=")[1].split("&")[0] for c in ("alice", "bob")}
    first.shutdown()
    first.server_close()
    second = start()
    try:
        assert status(second, old["bob"]) == "bob" and status(second, old["alice"]) == "alice"
    finally:
        second.shutdown()
        second.server_close()
    raw = (tmp_path / "p.sqlite").read_bytes() + (tmp_path / "p.sqlite-wal").read_bytes()
    assert old["bob"].encode() not in raw  # only its hash is kept
    third = start(new_links=True)
    try:
        assert status(third, old["bob"]) == 403
        assert status(third, third.url("bob").split("token=")[1].split("&")[0]) == "bob"
    finally:
        third.shutdown()
        third.server_close()


def test_only_the_owner_stops_the_room_and_starts_a_fine_tune(tmp_path):
    """Issue 36: one coder's "done" stopped the room for everyone."""
    room, _ = new_room(tmp_path)
    room.step()
    server = RoomServer(room, "127.0.0.1", 0, coders=["alice", "bob"])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    tokens = {c: server.url(c).split("token=")[1].split("&")[0] for c in ("alice", "bob")}
    try:
        _, state = request(f"{base}/api/state?token={tokens['bob']}")
        assert state["owner"] is False
        _, state = request(f"{base}/api/state?token={tokens['alice']}")
        assert state["owner"] is True
        for path in ("/api/finetune", "/api/done"):
            with pytest.raises(urllib.error.HTTPError) as err:
                request(base + path, {"stop": True}, tokens["bob"])
            assert err.value.code == 403
            assert "only alice, who started the room" in json.loads(err.value.read())["error"]
        assert request(base + "/api/done", {}, tokens["bob"])[1]["stopped"] is False
        assert request(base + "/api/done", {}, tokens["alice"])[1]["stopped"] is False
        time.sleep(0.3)
        assert thread.is_alive()  # bob's and alice's own sessions ended, the room runs on
        assert request(f"{base}/api/state?token={tokens['bob']}")[0] == 200
        assert request(base + "/api/done", {"stop": True}, tokens["alice"])[1]["stopped"]
        thread.join(10)
        assert not thread.is_alive()
    finally:
        if thread.is_alive():
            server.shutdown()
        server.server_close()


def test_cli_coders_and_finetune_flags_bad_input(tmp_path, capsys):
    frame, _, _ = blobs(3)
    corpus = write_corpus(tmp_path / "c.csv", frame)
    base = ["code", "--input", corpus, "--labels", "a,b", "--project",
            str(tmp_path / "p.sqlite"), "--no-browser"]
    assert main(base + ["--coders", "ann,ann"]) == 2
    assert "--coders must be distinct" in capsys.readouterr().err
    assert main(base + ["--coders", "ann,bob", "--coder", "zed"]) == 2
    assert "--coder 'zed' is not one of --coders (ann,bob)" in capsys.readouterr().err
    assert main(base + ["--finetune-valid-fraction", "1"]) == 2
    assert "--finetune-valid-fraction must be a share" in capsys.readouterr().err
    assert main(base + ["--finetune-min-codes", "0"]) == 2
    assert "--finetune-min-codes" in capsys.readouterr().err
    assert not (tmp_path / "p.sqlite").exists()


def test_a_host_other_than_this_computer_is_warned_about():
    from quantformer.cli.code import warn_if_shared

    with pytest.warns(UserWarning, match="reachable from the network"):
        warn_if_shared("0.0.0.0")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_shared("127.0.0.1")


def test_a_room_started_by_the_cli_names_its_flags_on_the_page(tmp_path, tiny_bert_dir):
    """Issue 36: the page's answer named the R argument finetune_min_codes to a CLI user."""
    import os
    import sys

    frame, _, _ = blobs(3)
    corpus = write_corpus(tmp_path / "c.csv", frame)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "python")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "quantformer", "code", "--input", corpus, "--labels", "a,b",
         "--project", str(tmp_path / "p.sqlite"), "--no-browser", "--port", "0", "--quiet",
         "--embed-model", str(tiny_bert_dir)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        base, token = url.split("/?")[0], url.split("token=")[1]
        with pytest.raises(urllib.error.HTTPError) as err:
            request(base + "/api/finetune", {}, token)
        assert err.value.code == 400
        message = json.loads(err.value.read())["error"]
        assert "lower --finetune-min-codes" in message and "finetune_min_codes" not in message
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
