"""CSV, TSV, text and JSON-lines corpora streamed in chunks (issue 33): the chunks together are
what ``read_frame`` reads whole (ids, texts, labels, docvars, dtypes, warnings, errors), and
the file is read a chunk at a time."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pandas as pd
import pytest

from quantformer._core.errors import InputError
from quantformer.io.frames import iter_frames, read_frame


def _messages(caught) -> list:
    return sorted({(w.category.__name__, str(w.message)) for w in caught})


def _same(path, chunk_rows: int = 2, **kw) -> pd.DataFrame:
    """Read ``path`` whole and streamed; assert they agree (warnings too); return the whole
    frame, with the warnings in ``attrs["warned"]``."""
    with warnings.catch_warnings(record=True) as whole_warned:
        warnings.simplefilter("always")
        whole = read_frame(path, **kw)
    with warnings.catch_warnings(record=True) as streamed_warned:
        warnings.simplefilter("always")
        chunks = iter_frames(path, chunk_rows=chunk_rows, **kw)
        total = chunks.total
        chunks = list(chunks)
    assert total == len(whole)
    assert [len(c) for c in chunks] == [min(chunk_rows, len(whole) - i)
                                        for i in range(0, len(whole), chunk_rows)]
    # every chunk has the dtypes of the whole file (a writer appends them to one table)
    assert all(c.dtypes.to_dict() == whole.dtypes.to_dict() for c in chunks)
    streamed = pd.concat(chunks, ignore_index=True)
    pd.testing.assert_frame_equal(streamed, whole)
    for column in whole.columns:  # the same Python values, not only equal ones
        assert [type(v) for v in streamed[column]] == [type(v) for v in whole[column]]
    assert _messages(streamed_warned) == _messages(whole_warned)
    whole.attrs["warned"] = " | ".join(m for _, m in _messages(whole_warned))
    return whole


def test_csv_with_bom_crlf_quoted_newlines_and_docvars_that_change_kind(tmp_path):
    f = tmp_path / "c.csv"
    rows = ['text,year,party,flag,label',
            '"two\r\nlines, quoted",1990,7,True,1',
            'NA,1991,8,False,0',          # NA is a text; 7 and 8 are numbers in this chunk
            ',1992,left,True,1',          # a missing text; words in the party column
            '"say ""hi""",,right,,2.5',   # a missing year and flag; a label with a fraction
            'last,1994,centre,False,']
    f.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(rows).encode() + b"\r\n")
    whole = _same(f)
    assert whole["doc_id"].tolist() == [f"text{i}" for i in range(1, 6)]
    assert whole["text"].tolist() == ["two\nlines, quoted", "NA", None, 'say "hi"', "last"]
    assert whole["label"].tolist() == ["1.0", "0.0", "1.0", "2.5", None]
    assert whole["year"].dtype == "float64" and whole["year"].iloc[4] == 1994.0
    assert whole["party"].tolist() == ["7", "8", "left", "right", "centre"]
    assert whole["flag"].tolist()[:3] == [True, False, True]
    # whole numbers throughout a column stay integers; ids run on across chunk boundaries
    f.write_text("text,n\n" + "".join(f"t{i},{i}\n" for i in range(7)))
    whole = _same(f, chunk_rows=3)
    assert whole["n"].dtype == "int64"
    assert whole["doc_id"].tolist()[-1] == "text7"


def test_a_legacy_encoding_is_detected_and_warned_about_once(tmp_path):
    f = tmp_path / "l.csv"
    f.write_bytes("doc_id,text\na,Grüße aus Zürich\nb,naïve café\nc,plain\n".encode("cp1252"))
    whole = _same(f)
    assert "is not valid UTF-8; read it as cp1252" in whole.attrs["warned"]
    assert whole["text"].tolist() == ["Grüße aus Zürich", "naïve café", "plain"]


def test_tsv_quoting_checks_and_text_of_numbers(tmp_path):
    f = tmp_path / "q.tsv"
    f.write_text('label\ttext\n0\t"Great" day\n1\tplain\n0\t"ok"\n', encoding="utf-8")
    whole = _same(f)
    assert whole["text"].tolist() == ["Great day", "plain", "ok"]
    assert "1 line(s) of" in whole.attrs["warned"]
    assert _same(f, quoting="none")["text"].tolist() == ['"Great" day', "plain", '"ok"']
    f.write_text('text\tn\n"runs on\t1\nx\t2\ny\t3\n', encoding="utf-8")
    for read in (read_frame, iter_frames):
        with pytest.raises(InputError, match="would merge them into one document"):
            read(f)
    # a text column of numbers is found over the whole file, not only in the first chunk
    f = tmp_path / "n.csv"
    f.write_text("id,n\n1,5\n2,6\n3,7\n")
    whole = _same(f, text_col="n", id_col="id")
    assert whole["text"].tolist() == ["5", "6", "7"] and "holds only numbers" in whole.attrs[
        "warned"]
    f.write_text("id,n\n1,5\n2,6\n3,seven\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(iter_frames(f, text_col="n", id_col="id", chunk_rows=2))


def test_text_files_one_document_a_line_and_tab_separated(tmp_path):
    f = tmp_path / "t.txt"
    f.write_bytes(b"first\r\n\r\nthird, with a comma\rfourth\n")
    whole = _same(f)
    assert whole["text"].tolist() == ["first", None, "third, with a comma", "fourth"]
    f.write_text("doc_id\ttext\tyear\na\tone\t2001\nb\ttwo\t\nc\tthree\t2003\n")
    whole = _same(f)
    assert whole["doc_id"].tolist() == ["a", "b", "c"] and whole["year"].dtype == "float64"


def test_json_lines_with_keys_and_kinds_that_appear_late(tmp_path):
    f = tmp_path / "j.jsonl"
    rows = [{"text": "a", "n": 1}, {"text": None, "n": 2, "tags": ["x"]}, {},
            {"text": "d", "n": 2.5, "ok": True}, {"text": "e", "n": None, "ok": None}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    whole = _same(f)
    assert whole.columns.tolist() == ["doc_id", "text", "n", "tags", "ok"]
    assert whole["n"].dtype == "float64" and whole["ok"].tolist()[3:] == [True, None]
    f.write_text('{"text": "a"}\n{"text": "b"}\n[1]\n')
    for read in (read_frame, iter_frames):  # at the call, before any chunk is read
        with pytest.raises(InputError, match="line 3: a JSON list, not an object"):
            read(f)


@pytest.mark.parametrize("ext", ["csv", "tsv", "jsonl"])
def test_duplicate_ids_in_different_chunks_fail_as_a_whole_read_fails(tmp_path, ext):
    from quantformer.io.frames import write_frame

    f = tmp_path / f"d.{ext}"
    write_frame(pd.DataFrame({"doc_id": ["a", "b", "c", "d", "b"], "text": list("vwxyz")}), f)
    with pytest.raises(InputError) as whole:
        read_frame(f)
    chunks = iter_frames(f, chunk_rows=2)
    assert len(next(chunks)) == 2 and len(next(chunks)) == 2
    with pytest.raises(InputError) as streamed:
        next(chunks)
    assert str(streamed.value) == str(whole.value)
    assert "repeats 1 id(s), first: 'b'" in str(whole.value)


@pytest.mark.parametrize("name,body", [
    ("l.csv", 'text\n"one\nline"\ntwo\nthree\n'),
    ("l.txt", "one\ntwo\nthree\n"),
    ("l.jsonl", '{"text": "one"}\n{"text": "two"}\n{"text": "three"}\n')])
def test_labels_file_beside_a_streamed_corpus(tmp_path, name, body):
    (tmp_path / name).write_text(body)
    (tmp_path / "labels.txt").write_text("pos\n\nneg\n")
    whole = _same(tmp_path / name, labels_file=tmp_path / "labels.txt")
    assert whole["label"].tolist() == ["pos", None, "neg"]
    (tmp_path / "short.txt").write_text("pos\n")
    with pytest.raises(InputError, match="has 1 lines but .* has 3 documents"):
        iter_frames(tmp_path / name, labels_file=tmp_path / "short.txt")


def _read_offset(path: Path) -> list[int]:
    """The file offsets of this process's open descriptors of ``path`` (Linux /proc)."""
    offsets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path.resolve()):
                pos = Path(f"/proc/self/fdinfo/{fd}").read_text().split("\n", 1)[0]
                offsets.append(int(pos.split()[1]))
        except OSError:
            continue
    return offsets


@pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(),
                    reason="needs Linux /proc to see how far a file was read")
@pytest.mark.parametrize("ext", ["csv", "jsonl", "txt"])
def test_the_first_chunk_comes_before_the_file_is_read(tmp_path, ext):
    """A streamed file is read a chunk at a time: after the first chunk the one open
    descriptor of the file stands near its start, and the rest of the file is still to come."""
    from quantformer.io.frames import write_frame

    f = tmp_path / f"big.{ext}"
    n = 30_000
    frame = pd.DataFrame({"text": [f"document {i} " + "word " * 30 for i in range(n)]})
    if ext == "txt":
        f.write_text("\n".join(frame["text"]) + "\n")
    else:
        write_frame(frame, f)
    size = f.stat().st_size
    chunks = iter_frames(f, chunk_rows=100)
    assert chunks.total == n and _read_offset(f) == []  # the counting pass closed the file
    first = next(chunks)
    assert first["doc_id"].tolist()[-1] == "text100"
    [offset] = _read_offset(f)
    assert 0 < offset < size / 4
    assert sum(len(c) for c in chunks) == n - 100 and _read_offset(f) == []


@pytest.mark.parametrize("name,kw", [
    ("semeval2016_raw/semeval2016-task6-trainingdata.txt",  # cp1252, tab-separated, CRLF
     {"text_col": "Tweet", "id_col": "ID", "label_col": "Stance"}),
    ("jigsaw_toxic/jigsaw_5k.csv",  # newlines inside quoted comments, 0/1 docvars
     {"text_col": "comment_text", "id_col": "id", "label_col": "toxic"}),
    ("handeset/HanDeSeT.csv", {"text_col": "utt1", "label_col": "manual speech"}),
    ("tweeteval_abortion/train_text.txt",
     {"labels_file": "tweeteval_abortion/train_labels.txt"})])
def test_the_shared_corpora_stream_as_they_read_whole(shared_data, name, kw):
    if "labels_file" in kw:
        kw = {"labels_file": shared_data / kw["labels_file"]}
    whole = _same(shared_data / name, chunk_rows=333, **kw)
    assert len(whole) in (2814, 5000, 1251, 587)
