"""The coding room's links across restarts (the project's port), a chunked request body, and
the export: a comment typed before an undo, an existing file."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import json
from pathlib import Path

import numpy as np
import pandas as pd

from quantformer.cli.main import main
from quantformer.io.codebook import make_codebook
from quantformer.room.export import export_codes
from quantformer.room.loop import Room
from quantformer.room.server import RoomServer
from quantformer.room.store import Store

REPO = Path(__file__).resolve().parents[3]


def frame(n: int = 12) -> pd.DataFrame:
    return pd.DataFrame({"doc_id": [f"d{i:02d}" for i in range(n)],
                         "text": [f"document number {i} about {'tax' if i % 2 else 'sport'}"
                                  for i in range(n)]})


def start(corpus: Path, project: Path, model: Path, *extra: str):
    """``quantformer code`` as a child process: (process, its link)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "quantformer", "code", "--input", str(corpus), "--labels",
         "a,b", "--project", str(project), "--no-browser", "--embed-model", str(model),
         *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    link = proc.stdout.readline().strip()
    assert link.startswith("http://127.0.0.1:"), proc.stderr.read()
    return proc, link


def stop(proc) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return err


def port_of(link: str) -> int:
    return int(link.split("/?")[0].rsplit(":", 1)[1])


def test_a_restart_keeps_the_projects_port_and_says_when_it_cannot(tmp_path, tiny_bert_dir):
    """Before, --port 0 (the default) picked a new port at each start: the printed links
    were dead after a restart though their tokens were kept."""
    corpus = tmp_path / "c.csv"
    frame().to_csv(corpus, index=False)
    project = tmp_path / "p.sqlite"
    proc, first = start(corpus, project, tiny_bert_dir)
    stop(proc)
    proc, second = start(corpus, project, tiny_bert_dir)
    err = stop(proc)
    assert second == first.replace(first.split("token=")[1], second.split("token=")[1])
    assert port_of(second) == port_of(first) and "no longer work" not in err
    with socket.socket() as taken:  # the project's port is in use now
        taken.bind(("127.0.0.1", port_of(first)))
        taken.listen()
        proc, third = start(corpus, project, tiny_bert_dir)
        err = stop(proc)
    old, new = port_of(first), port_of(third)
    assert new != old
    assert f"served on port {old} and is now on port {new}" in err
    assert "links printed at earlier starts" in err and "no longer work" in err


def small_room(tmp_path, coder="ann"):
    f = frame()
    vecs = np.random.default_rng(0).normal(size=(len(f), 4)).astype(np.float32)
    store = Store(tmp_path / "p.sqlite")
    store.bind_corpus(f, "c")
    room = Room(f, vecs, store, make_codebook("a,b"))
    room.step()
    server = RoomServer(room, "127.0.0.1", 0, coder=coder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return room, server


def test_a_chunked_post_body_is_read(tmp_path):
    """Before, a body sent with Transfer-Encoding: chunked was read as a new request: 400."""
    room, server = small_room(tmp_path)
    try:
        doc = room.next_for("ann")[0]
        body = json.dumps({"doc_id": doc, "label": "b"}).encode()
        head = (f"POST /api/code HTTP/1.1\r\nHost: x\r\nX-Token: {server.token}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                "Connection: close\r\n\r\n").encode()
        chunked = b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n"
                           for c in (body[:7], body[7:])) + b"0\r\n\r\n"
        with socket.create_connection(server.server_address, timeout=10) as sock:
            sock.sendall(head + chunked)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert room.store.current_codes()[["doc_id", "label"]].values.tolist() == [[doc, "b"]]
    finally:
        server.shutdown()
        server.server_close()


def test_a_comment_typed_before_an_undo_reaches_the_export(tmp_path):
    """Before, the comment was in the project but missing from --export: its document had
    no current code of the coder."""
    room, server = small_room(tmp_path)
    server.shutdown()
    server.server_close()
    first = room.next_for("ann")[0]
    room.code("ann", first, "a")
    second = room.next_for("ann")[0]
    room.store.add_comment(second, "ann", "sarcastic, read twice")  # typed on the next one
    assert room.undo("ann") == first  # then back
    room.store.close()
    out = export_codes(tmp_path / "p.sqlite", tmp_path / "codes.csv")
    row = out.set_index("doc_id").loc[second]
    assert (row["coder"], row["status"], row["comment"]) == ("ann", "uncoded",
                                                             "sarcastic, read twice")
    assert pd.isna(row["label"]) and first not in set(out["doc_id"])


def test_export_refuses_an_existing_file_unless_overwrite(tmp_path, capsys):
    room, server = small_room(tmp_path)
    server.shutdown()
    server.server_close()
    doc = room.next_for("ann")[0]
    room.code("ann", doc, "a")
    room.store.close()
    out = tmp_path / "codes.csv"
    out.write_text("keep me\n")
    args = ["code", "--project", str(tmp_path / "p.sqlite"), "--export", str(out)]
    assert main(args) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert out.read_text() == "keep me\n"
    assert main(args + ["--overwrite"]) == 0
    assert "replaced the file that was there" in capsys.readouterr().err
    assert pd.read_csv(out)["doc_id"].tolist() == [doc]
    assert main(["code", "--project", "p.sqlite", "--input", "x.csv", "--labels", "a,b",
                 "--overwrite"]) == 2
    assert "--overwrite applies to --export only" in capsys.readouterr().err
