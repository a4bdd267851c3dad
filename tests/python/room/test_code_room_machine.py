"""A machine coder in the coding room (issue 35): a language model's codes imported as one
coder, validated against the human coders (agreement panel, reconciliation), never learnt
from; import refusals that write nothing; the export names it."""

from __future__ import annotations

import json
import threading
import urllib.request

import krippendorff
import numpy as np
import pandas as pd
import pytest
from quantformer._core.errors import InputError
from quantformer.cli.main import main
from quantformer.io.codebook import make_codebook
from quantformer.room.loop import Room, in_overlap
from quantformer.room.server import RoomServer
from quantformer.room.store import Store


def blobs(n_per: int = 20, seed: int = 0):
    rng = np.random.default_rng(seed)
    vecs = np.concatenate([c + rng.normal(0, 0.3, (n_per, 8)) for c in np.eye(8)[:3] * 5])
    n = len(vecs)
    frame = pd.DataFrame({"doc_id": [f"d{i:03d}" for i in range(n)],
                          "text": [f"document number {i}" for i in range(n)]})
    return frame, vecs.astype(np.float32), np.repeat(["a", "b", "c"], n_per)


def machine_file(tmp_path, frame, truth, name="tiny-llm", wrong=(), unparsed=(), **extra):
    """An annotate-shaped codes frame: the truth, except ``wrong`` documents coded "c"
    (or "a" where the truth is "c") and ``unparsed`` ones without a label."""
    labels = [(("a" if t == "c" else "c") if d in wrong else t)
              for d, t in zip(frame["doc_id"], truth)]
    codes = pd.DataFrame({"doc_id": frame["doc_id"], "label": labels,
                          "prob_a": 0.5, "unparsed": frame["doc_id"].isin(unparsed),
                          "coder": name, **extra})
    codes.loc[codes["unparsed"], "label"] = None
    path = tmp_path / f"{name}.parquet"
    codes.to_parquet(path)
    return path


@pytest.fixture()
def corpus(tmp_path):
    frame, vecs, truth = blobs()
    path = tmp_path / "corpus.parquet"
    frame.to_parquet(path)
    return frame, vecs, truth, str(path)


def add(project, corpus_path, codes, *more):
    return main(["code", "--project", str(project), "--input", corpus_path, "--add-coder",
                 str(codes), "--quiet", *more])


def test_import_refused_for_unknown_ids_labels_and_names_writes_nothing(tmp_path, corpus,
                                                                        capsys):
    frame, _, truth, path = corpus
    project = tmp_path / "p.sqlite"
    bad = pd.read_parquet(machine_file(tmp_path, frame, truth))
    bad.loc[[0, 1], "doc_id"] = ["zz1", "zz2"]
    bad.to_parquet(tmp_path / "bad.parquet")
    bad = tmp_path / "bad.parquet"
    # a new project: refused before the project file exists
    assert add(project, path, bad, "--labels", "a,b,c") == 2
    err = capsys.readouterr().err
    assert "2 doc_id(s) the project's corpus lacks: zz1, zz2" in err and "--add-coder" in err
    assert not project.exists()
    assert add(project, path, machine_file(tmp_path, frame, truth)) == 2  # no codebook
    assert "--labels" in capsys.readouterr().err and not project.exists()
    # an existing project with human codes: a refusal leaves every row as it was
    assert add(project, path, machine_file(tmp_path, frame, truth, name="m1"),
               "--labels", "a,b,c") == 0
    store = Store(project)
    store.add_code("d000", "ann", "a")
    store.close()
    before = Store(project).query("SELECT * FROM codes").to_dict("records")
    odd = pd.read_parquet(machine_file(tmp_path, frame, truth, name="m2"))
    odd.loc[3, "label"] = "zebra"
    odd.to_parquet(tmp_path / "odd.parquet")
    assert add(project, path, tmp_path / "odd.parquet") == 2
    assert "label(s) zebra, which the project's codebook lacks" in capsys.readouterr().err
    assert add(project, path, bad) == 2
    assert "lacks: zz1, zz2" in capsys.readouterr().err
    assert add(project, path, machine_file(tmp_path, frame, truth), "--coder-name",
               "ann") == 2
    assert "'ann' is a human coder" in capsys.readouterr().err
    two = pd.read_parquet(machine_file(tmp_path, frame, truth, name="m3"))
    two.loc[0, "coder"] = "m4"
    two.to_parquet(tmp_path / "two.parquet")
    assert add(project, path, tmp_path / "two.parquet") == 2
    assert "several coders (m3, m4)" in capsys.readouterr().err
    assert main(["code", "--project", str(project), "--input", path, "--coder-name", "x"]) == 2
    assert "--coder-name applies to --add-coder only" in capsys.readouterr().err
    assert main(["code", "--project", str(project), "--export", str(tmp_path / "x.csv"),
                 "--add-coder", str(bad)]) == 2
    assert "leave out --add-coder" in capsys.readouterr().err
    after = Store(project)
    assert after.query("SELECT * FROM codes").to_dict("records") == before
    assert after.machine_coders() == ["m1"]
    after.close()


def test_import_skips_unparsed_replaces_on_reimport_and_export_names_it(tmp_path, corpus,
                                                                      capsys):
    frame, _, truth, path = corpus
    project = tmp_path / "p.sqlite"
    codes = machine_file(tmp_path, frame, truth, unparsed={"d001", "d002"})
    assert main(["code", "--project", str(project), "--input", path, "--labels", "a,b,c",
                 "--add-coder", str(codes)]) == 0
    assert "tiny-llm: 58 code(s)" in capsys.readouterr().err.replace("\n", " ")
    store = Store(project)
    assert store.machine_coders() == ["tiny-llm"]
    assert len(store.current_codes()) == len(frame) - 2
    store.add_code("d000", "ann", "a")
    store.close()
    again = machine_file(tmp_path, frame, truth, wrong={"d000"})  # a re-import replaces it
    assert add(project, path, again) == 0
    out = tmp_path / "all.csv"
    assert main(["code", "--project", str(project), "--export", str(out), "--quiet"]) == 0
    table = pd.read_csv(out)
    mine = table[table["coder"] == "tiny-llm"]
    assert len(mine) == len(frame) and set(mine["strategy"]) == {"machine"}
    assert mine.set_index("doc_id").loc["d000", "label"] == "c"
    assert table[table["coder"] == "ann"]["doc_id"].tolist() == ["d000"]
    final = tmp_path / "final.csv"  # the machine never makes a final code
    assert main(["code", "--project", str(project), "--export", str(final), "--final",
                 "--quiet"]) == 0
    assert pd.read_csv(final)[["doc_id", "label", "source"]].values.tolist() == [
        ["d000", "a", "single"]]


def served_room(tmp_path, corpus, wrong):
    frame, vecs, truth, path = corpus
    project = tmp_path / "p.sqlite"
    assert add(project, path, machine_file(tmp_path, frame, truth, wrong=wrong),
               "--labels", "a,b,c") == 0
    store = Store(project)
    room = Room(frame, vecs, store, make_codebook("a,b,c"), overlap=0.5, team=2)
    room.step()
    return room, truth


def code_until(room, coder, truth, n):
    for _ in range(n):
        doc, _ = room.next_for(coder)
        room.code(coder, doc, str(truth[room.pos[doc]]))
        room.step()


def test_machine_codes_never_train_nor_leave_the_queues(tmp_path, corpus):
    frame, vecs, truth, _ = corpus
    room, _ = served_room(tmp_path, corpus, wrong=set(frame["doc_id"][::3]))
    (tmp_path / "humans").mkdir()
    alone = Store(tmp_path / "humans" / "p.sqlite")
    alone.bind_corpus(frame, "blobs")
    humans = Room(frame, vecs, alone, make_codebook("a,b,c"), overlap=0.5, team=2)
    humans.step()
    assert room.training_codes() == ([], []) and room.handled == {}
    for r in (room, humans):
        code_until(r, "ann", truth, 12)
        code_until(r, "bob", truth, 12)
    assert room.training_codes() == humans.training_codes()  # the same codes, same order
    assert [r["n_codes"] for r in room.rounds] == [r["n_codes"] for r in humans.rounds]
    assert np.array_equal(room.probs, humans.probs)
    assert room.progress("ann")["machine_coders"] == ["tiny-llm"]
    assert room.progress("ann")["coded"] == humans.progress("ann")["coded"]
    for act in (lambda: room.code("tiny-llm", "d000", "a"), lambda: room.undo("tiny-llm")):
        with pytest.raises(InputError, match="tiny-llm is a machine coder"):
            act()
    assert len(room.store.current_codes().query("coder == 'tiny-llm'")) == len(frame)


def test_panel_gives_human_vs_machine_alpha_and_reconciliation_lists_it(tmp_path, corpus):
    frame, _, truth, _ = corpus
    wrong = set(frame["doc_id"][::4])
    room, _ = served_room(tmp_path, corpus, wrong)
    code_until(room, "ann", truth, 14)
    code_until(room, "bob", truth, 14)
    server = RoomServer(room, "127.0.0.1", 0, coders=["ann", "bob"])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/api/"
    get = lambda what: json.loads(urllib.request.urlopen(
        urllib.request.Request(base + what, headers={"X-Token": server.token}),
        timeout=10).read())  # ann's link: the reconciliation lists what ann coded
    try:
        first = get("agreement")
        assert first["updating"] is True
        room.agreeing.join(60)
        panel = get("agreement")
        assert panel["coders"] == ["ann", "bob"] and panel["percent"] == 1.0
        machine = {(m["coder"], m["machine"]): m for m in panel["machine"]}
        assert set(machine) == {("ann", "tiny-llm"), ("bob", "tiny-llm")}
        codes = room.store.current_codes()
        bot = codes[codes["coder"] == "tiny-llm"].set_index("doc_id")["label"]
        for human in ("ann", "bob"):
            mine = codes[codes["coder"] == human].set_index("doc_id")["label"].sort_index()
            pair = np.array([mine.tolist(), bot.loc[mine.index].tolist()])
            index = {lab: i for i, lab in enumerate(sorted(set(pair.ravel())))}
            data = np.vectorize(index.get)(pair).astype(float)
            expected = krippendorff.alpha(reliability_data=data,
                                          level_of_measurement="nominal")
            got = machine[(human, "tiny-llm")]
            assert got["n"] == len(mine)
            assert got["krippendorff_alpha"]["estimate"] == pytest.approx(expected, abs=1e-12)
            assert got["percent"] == pytest.approx(float(np.mean(pair[0] == pair[1])))
        listed = get("reconcile")["disagreements"]
        coded = set(codes[codes["coder"] == "ann"]["doc_id"])
        assert {d["doc_id"] for d in listed} == coded & wrong
        assert all(d["with_machine"] and d["machine"] == {"tiny-llm": bot[d["doc_id"]]}
                   for d in listed)
        assert any(in_overlap(d["doc_id"], 0.5) and len(d["codes"]) == 2 for d in listed)
    finally:
        server.shutdown()
        server.server_close()
