"""The corpus-frame contract: readers, writers, atomic writes, bad input, R interoperability."""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings

import numpy as np
import pandas as pd
import pytest

from quantformer._core.errors import InputError
from quantformer.io.frames import (
    FrameWarning,
    FrameWriter,
    detect_format,
    iter_frames,
    read_frame,
    to_frame,
    write_frame,
)
from quantformer.io.writable import check_output_file

CSV_BODY = ('doc_id,text,label,year\n'
            'a,"first line\nsecond line",1.0,2001\n'
            'b,"He said ""hi"", then left",0.0,2002\n'
            'c,NA,,2003\n'
            'd,,1.0,\n')


def _expected_csv_frame(frame):
    assert list(frame.columns) == ["doc_id", "text", "label", "year"]
    assert frame["doc_id"].tolist() == ["a", "b", "c", "d"]
    assert frame["text"].tolist() == ["first line\nsecond line", 'He said "hi", then left',
                                      "NA", None]
    assert frame["label"].tolist() == ["1", "0", None, "1"]
    assert frame["year"].iloc[:3].tolist() == [2001, 2002, 2003]
    assert pd.isna(frame["year"].iloc[3])


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_csv_line_ends_and_embedded_newlines(tmp_path, newline):
    f = tmp_path / "c.csv"
    f.write_bytes(CSV_BODY.replace("\n", newline).encode())
    _expected_csv_frame(read_frame(f))


def test_tsv_and_sniffed_txt(tmp_path):
    body = "doc_id\ttext\tparty\nx1\tfirst doc\tDem\nx2\t\"quoted \"\"twice\"\"\"\tRep\n"
    for name in ("t.tsv", "t.txt"):
        (tmp_path / name).write_text(body, encoding="utf-8")
        frame = read_frame(tmp_path / name)
        assert frame.to_dict("list") == {"doc_id": ["x1", "x2"],
                                         "text": ["first doc", 'quoted "twice"'],
                                         "party": ["Dem", "Rep"]}


def test_txt_one_document_a_line(tmp_path):
    f = tmp_path / "lines.txt"
    f.write_bytes("first, with a comma\r\n\r\nthird\tline with one tab\r\n".encode())
    frame = read_frame(f)
    assert frame["doc_id"].tolist() == ["text1", "text2", "text3"]
    assert frame["text"].tolist() == ["first, with a comma", None, "third\tline with one tab"]
    # a tab-separated .txt with a header is sniffed as TSV; --format lines turns that off
    g = tmp_path / "tabs.txt"
    g.write_text("speech\tparty\nwe will\tDem\nwe shall\tRep\n", encoding="utf-8")
    assert read_frame(g, text_col="speech")["party"].tolist() == ["Dem", "Rep"]
    plain = read_frame(g, fmt="lines")
    assert plain["text"].tolist() == ["speech\tparty", "we will\tDem", "we shall\tRep"]


def test_jsonl_parquet_rds_readers(tmp_path):
    import pyreadr

    df = pd.DataFrame({"id": [3, 1, 2], "body": ["drei", "eins", None],
                       "score": [1.5, np.nan, 2.0], "code": [1.0, 2.0, np.nan]})
    (tmp_path / "d.jsonl").write_text(
        "\n".join(json.dumps(r) for r in df.replace({np.nan: None}).to_dict("records")) + "\n\n",
        encoding="utf-8")
    df.to_parquet(tmp_path / "d.parquet")
    pyreadr.write_rds(str(tmp_path / "d.rds"), df)
    for name in ("d.jsonl", "d.parquet", "d.rds"):
        frame = read_frame(tmp_path / name, text_col="body", id_col="id", label_col="code")
        assert list(frame.columns) == ["doc_id", "text", "label", "score"], name
        assert frame["doc_id"].tolist() == ["3", "1", "2"], name
        assert frame["text"].tolist() == ["drei", "eins", None], name
        assert frame["label"].tolist() == ["1", "2", None], name  # 1.0 -> "1"
        assert frame["score"].iloc[0] == 1.5 and pd.isna(frame["score"].iloc[1]), name


def test_default_ids_docvar_order_and_reserved_names():
    df = pd.DataFrame({"z": [1, 2], "text": ["a", "b"], "a": ["x", "y"], "label": [0.0, 1.0],
                       "doc_id": ["d1", "d2"]})
    frame = to_frame(df, id_col="z", label_col="a")
    assert frame.columns.tolist() == ["doc_id", "text", "label", "label_orig", "doc_id_orig"]
    assert frame["doc_id"].tolist() == ["1", "2"]
    assert frame["label"].tolist() == ["x", "y"]
    plain = to_frame(pd.DataFrame({"text": ["a", "b", "c"], "k": [1, 2, 3]}))
    assert plain["doc_id"].tolist() == ["text1", "text2", "text3"]
    assert plain.columns.tolist() == ["doc_id", "text", "k"]


def test_csv_keeps_text_na_and_id_zeros(tmp_path):
    f = tmp_path / "z.csv"
    f.write_text("doc_id,text,note\n007,NA,NA\n010,null,kept\n", encoding="utf-8")
    frame = read_frame(f)
    assert frame["doc_id"].tolist() == ["007", "010"]
    assert frame["text"].tolist() == ["NA", "null"]  # a tweet may say "NA"
    assert pd.isna(frame["note"].iloc[0]) and frame["note"].iloc[1] == "kept"


def test_non_utf8_falls_back_with_a_warning(tmp_path):
    f = tmp_path / "legacy.csv"
    f.write_bytes('text,who\n"Grüße – “quoted” €5",Müller\n'.encode("cp1252"))
    with pytest.warns(FrameWarning, match=r"legacy\.csv is not valid UTF-8; read it as cp1252"):
        frame = read_frame(f)
    assert frame["text"].tolist() == ["Grüße – “quoted” €5"]
    assert frame["who"].tolist() == ["Müller"]
    g = tmp_path / "bom.csv"
    g.write_bytes("\ufefftext\nÄrger\n".encode("utf-8"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FrameWarning)  # valid UTF-8 (with BOM): no warning
        assert read_frame(g)["text"].tolist() == ["Ärger"]


# ------------------------------------------------------------------------------------------
# bad input


def _raises(match, fn, *args, **kw):
    with pytest.raises(InputError, match=match) as info:
        fn(*args, **kw)
    return str(info.value)


def test_bad_inputs(tmp_path):
    _raises(r"file not found: '.*nope\.csv'", read_frame, tmp_path / "nope.csv")
    (tmp_path / "x.docx").write_text("hi")
    msg = _raises(r"cannot tell the format of .*'\.docx'", read_frame, tmp_path / "x.docx")
    assert ".parquet" in msg and ".rds" in msg and msg.endswith("or pass fmt")
    _raises("unknown format 'xls'", read_frame, tmp_path / "x.docx", fmt="xls")
    (tmp_path / "empty.csv").write_text("")
    _raises("is empty: it has no documents", read_frame, tmp_path / "empty.csv")
    (tmp_path / "blank.txt").write_text("\n \n")
    _raises("is empty: it has no documents", read_frame, tmp_path / "blank.txt")
    (tmp_path / "header.csv").write_text("doc_id,text\n")
    _raises("is empty: it has no documents", read_frame, tmp_path / "header.csv")
    _raises("is a folder", read_frame, tmp_path)


def test_malformed_delimited_and_jsonl(tmp_path):
    f = tmp_path / "shifted.csv"
    f.write_text("doc_id,text\na,hello, world\nb,fine, too\n", encoding="utf-8")
    _raises(r"the rows of .* have more fields than its header \(2\); quote fields that "
            r"contain the delimiter ','", read_frame, f)
    g = tmp_path / "ragged.csv"
    g.write_text("doc_id,text\na,hello\nb,hello, world\n", encoding="utf-8")
    _raises(r"cannot parse .* as CSV: .*Expected 2 fields in line 3, saw 3", read_frame, g)
    j = tmp_path / "s.jsonl"
    j.write_text('{"text": "a"}\n"just a string"\n', encoding="utf-8")
    _raises(r"s\.jsonl, line 2: a JSON str, not an object", read_frame, j)
    j.write_text('{"text": "a"}\n{"text": \n', encoding="utf-8")
    _raises(r"s\.jsonl, line 2: not valid JSON", read_frame, j)


def test_unknown_columns_list_the_columns(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("id,body,stance\n1,hello,FAVOR\n", encoding="utf-8")
    msg = _raises(r"has no 'text' column; its columns are: id, body, stance\. "
                  r"Name the text column with text_col", read_frame, f)
    assert msg.count(str(f)) == 1 and "''" not in msg
    _raises(r"label column 'Stance' is not in .*; its columns are: id, body, stance\. "
            r"Pass the right name with label_col", read_frame, f, text_col="body",
            label_col="Stance")
    _raises(r"id column 'ID' is not in .*with id_col", read_frame, f, text_col="body", id_col="ID")


def test_duplicate_and_missing_ids(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("doc_id,text\na,1\nb,2\na,3\nc,4\nb,5\na,6\n", encoding="utf-8")
    _raises(r"doc_ids must be unique, but .* repeats 3 id\(s\), first: 'a', 'b'", read_frame, f)
    g = tmp_path / "m.csv"
    g.write_text("doc_id,text\na,1\n,2\n", encoding="utf-8")
    _raises(r"1 document\(s\) .* have no id in column 'doc_id' \(rows 2\)", read_frame, g)


def test_label_column_all_missing(tmp_path):
    f = tmp_path / "l.csv"
    f.write_text("text,code\none,\ntwo,NA\n", encoding="utf-8")
    _raises(r"every value of the label column 'code' .* is missing", read_frame, f,
            label_col="code", require_label=True)
    with pytest.warns(FrameWarning, match="every value of the label column 'code'"):
        frame = read_frame(f, label_col="code")
    assert frame["label"].tolist() == [None, None]
    _raises(r"has no 'label' column", read_frame, f, require_label=True)


def test_quanteda_corpus_rds_is_refused_with_the_fix(shared_data):
    f = shared_data / "quanteda" / "ukimmig2010_corpus.rds"
    if not f.exists():
        pytest.skip(f"{f} absent")
    _raises(r"does not hold an R data frame \(a quanteda corpus .*convert\(corp, "
            r"to = \"data.frame\"\)", read_frame, f)


@pytest.mark.parametrize("text, encoding", [
    ("Привет мир, как дела у вас сегодня? Всё хорошо, спасибо.", "cp1251"),
    ("Ärger mit der Größe", "latin-1"),
    ("Hallo Welt, 你好", "utf-16"),
])
def test_other_encodings_decode_to_the_same_text(tmp_path, text, encoding):
    f = tmp_path / "enc.csv"
    f.write_bytes(f'text\n"{text}"\n'.encode(encoding))
    with pytest.warns(FrameWarning, match="is not valid UTF-8; read it as"):
        assert read_frame(f)["text"].tolist() == [text]


# ------------------------------------------------------------------------------------------
# acceptance files in ../shared/data


def test_semeval_raw_training_file(shared_data):
    f = shared_data / "semeval2016_raw" / "semeval2016-task6-trainingdata.txt"
    with pytest.warns(FrameWarning, match="read it as cp1252"):
        frame = read_frame(f, text_col="Tweet", id_col="ID", label_col="Stance")
    assert len(frame) == 2814
    assert frame["Target"].nunique() == 5
    assert set(frame["label"]) == {"AGAINST", "FAVOR", "NONE"}
    texts = frame["text"]
    assert not texts.str.startswith('"').any() and not texts.str.endswith('"').any()
    assert not texts.str.contains('""', regex=False).any()
    assert not texts.str.contains("\r", regex=False).any()
    assert frame["doc_id"].iloc[0] == "101"


def test_jigsaw_keeps_newlines_inside_comments(shared_data):
    frame = read_frame(shared_data / "jigsaw_toxic" / "jigsaw_5k.csv", text_col="comment_text",
                       id_col="id", label_col="toxic")
    assert len(frame) == 5000
    assert frame["text"].str.contains("\n", regex=False).sum() > 100
    assert set(frame["label"]) == {"0", "1"}
    assert frame.columns[3:].tolist() == ["severe_toxic", "obscene", "threat", "insult",
                                          "identity_hate", "is_bad"]


def test_handeset_and_tweeteval(shared_data):
    frame = read_frame(shared_data / "handeset" / "HanDeSeT.csv", text_col="utt1",
                       label_col="manual speech")
    assert len(frame) == 1251 and frame["label"].isin(["0", "1"]).all()
    tweets = read_frame(shared_data / "tweeteval_abortion" / "train_text.txt")
    assert len(tweets) == 587 and tweets["doc_id"].iloc[-1] == "text587"


# ------------------------------------------------------------------------------------------
# writers


def _sample_frame():
    return pd.DataFrame({
        "doc_id": ["d1", "d2", "d3"],
        "text": ["Grüße aus Köln 🎉", 'say "hi",\nthen go', None],
        "label": ["a", None, "b"],
        "year": [2001, 2002, 2003],
        "score": [0.5, np.nan, 1.25],
    })


@pytest.mark.parametrize("ext", ["parquet", "csv", "tsv", "jsonl", "rds"])
def test_writers_round_trip(tmp_path, ext):
    df = _sample_frame()
    out = write_frame(df, tmp_path / f"sub/out.{ext}")
    assert out.exists() and [p.name for p in out.parent.iterdir()] == [f"out.{ext}"]
    back = read_frame(out)
    assert back["doc_id"].tolist() == df["doc_id"].tolist()
    assert back["text"].tolist() == ["Grüße aus Köln 🎉", 'say "hi",\nthen go', None]
    assert back["label"].tolist() == ["a", None, "b"]
    assert back["year"].tolist() == [2001, 2002, 2003]
    assert back["score"].iloc[[0, 2]].tolist() == [0.5, 1.25] and pd.isna(back["score"][1])


def test_rds_is_quanteda_style_with_lists_as_json(tmp_path):
    import pyreadr

    df = _sample_frame().assign(input_ids=[[101, 7], [101], []])
    write_frame(df, tmp_path / "o.rds")
    back = pyreadr.read_r(str(tmp_path / "o.rds"))[None]
    assert back.columns.tolist()[:2] == ["doc_id", "text"]
    assert back["input_ids"].tolist() == ["[101, 7]", "[101]", "[]"]


@pytest.mark.parametrize("ext", ["parquet", "csv", "jsonl", "rds"])
def test_write_is_atomic(tmp_path, monkeypatch, ext):
    import quantformer.io.writing as frames

    real = frames._write_to

    def half_then_fail(df, path, kind):
        real(df.iloc[:1], path, kind)  # part of the data reached the disk
        raise OSError("disk full")

    target = tmp_path / f"o.{ext}"
    monkeypatch.setattr(frames, "_write_to", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_frame(_sample_frame(), target)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(frames, "_write_to", real)
    write_frame(_sample_frame(), target)
    monkeypatch.setattr(frames, "_write_to", half_then_fail)
    with pytest.raises(OSError, match="disk full"):  # an earlier file survives a failed write
        write_frame(_sample_frame().iloc[:1], target)
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    assert len(read_frame(target)) == 3


def test_output_files_have_normal_permissions(tmp_path):
    import os

    out = write_frame(_sample_frame(), tmp_path / "o.csv")
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


def test_check_output_file(tmp_path):
    _raises(r"cannot write .*'\.xlsx' is not an output format", check_output_file, tmp_path / "o.xlsx")
    (tmp_path / "dir.parquet").mkdir()
    _raises(r"is a folder", check_output_file, tmp_path / "dir.parquet")
    (tmp_path / "o.csv").write_text("x")
    _raises(r"exists; pass overwrite or choose another file name", check_output_file,
            tmp_path / "o.csv", overwrite=False)
    assert check_output_file(tmp_path / "o.csv") == tmp_path / "o.csv"
    assert detect_format("x.txt", write=False) == "txt"
    _raises("is not an output format", detect_format, "x.txt", write=True)


@pytest.mark.parametrize("ext", ["parquet", "csv", "jsonl", "rds"])
def test_frame_writer_streams_chunks(tmp_path, ext):
    target = tmp_path / f"s.{ext}"
    with FrameWriter(target) as w:
        # first chunk has only missing predictions (Arrow type null), later ones strings
        w.write(pd.DataFrame({"doc_id": ["a", "b"], "pred": [None, None], "p": [0.1, 0.2]}))
        assert not target.exists()
        w.write(pd.DataFrame({"doc_id": ["c"], "pred": ["yes"], "p": [0.3]}))
        w.write(pd.DataFrame({"doc_id": ["d"], "pred": ["no"], "p": [0.4]}))
    assert w.rows == 4
    back = read_frame(target, text_col="pred")
    assert back["doc_id"].tolist() == ["a", "b", "c", "d"]
    assert back["text"].tolist() == [None, None, "yes", "no"]
    assert back["p"].tolist() == [0.1, 0.2, 0.3, 0.4]
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_frame_writer_leaves_nothing_on_error(tmp_path):
    with pytest.raises(RuntimeError, match="stop"):
        with FrameWriter(tmp_path / "s.parquet") as w:
            w.write(pd.DataFrame({"doc_id": ["a"], "p": [0.1]}))
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_seen_ids_finds_repeats_across_many_chunks():
    from quantformer.io.frames import SeenIds

    seen = SeenIds()
    for k in range(37):  # 37 chunks of 10: runs are merged, at most log2(37) + 1 remain
        assert seen.add(pd.Series([f"id{k * 10 + i}" for i in range(10)])) == []
    assert len(seen._runs) <= 6
    assert sum(len(r) for r in seen._runs) == 370
    assert all((r[1:] >= r[:-1]).all() for r in seen._runs)
    # ids from the first, a middle and the last chunk; new ids are not reported
    assert seen.add(pd.Series(["new1", "id0", "id185", "new2", "id369"])) == [
        "id0", "id185", "id369"]
    assert seen.add(pd.Series(["new1", "new2"])) == []


def test_iter_frames_duplicate_far_apart(tmp_path):
    ids = [f"d{i}" for i in range(1000)] + ["d3"]
    write_frame(pd.DataFrame({"doc_id": ids, "text": ["t"] * len(ids)}), tmp_path / "f.parquet")
    with pytest.raises(InputError, match=r"repeats 1 id\(s\), first: 'd3'"):
        list(iter_frames(tmp_path / "f.parquet", chunk_rows=7))


def test_iter_frames_chunks_ids_and_duplicates(tmp_path):
    df = pd.DataFrame({"text": [f"doc {i}" for i in range(7)], "k": range(7)})
    for ext in ("parquet", "csv"):
        write_frame(df, tmp_path / f"i.{ext}")
        it = iter_frames(tmp_path / f"i.{ext}", chunk_rows=3)
        assert it.total == 7  # known before the first chunk (progress bars)
        chunks = list(it)
        assert [len(c) for c in chunks] == [3, 3, 1]
        whole = pd.concat(chunks, ignore_index=True)
        assert whole["doc_id"].tolist() == [f"text{i}" for i in range(1, 8)]
        assert whole["k"].tolist() == list(range(7))
    dup = pd.DataFrame({"doc_id": ["a", "b", "c", "a"], "text": list("wxyz")})
    write_frame(dup, tmp_path / "dup.parquet")
    with pytest.raises(InputError, match=r"repeats 1 id\(s\), first: 'a'"):
        list(iter_frames(tmp_path / "dup.parquet", chunk_rows=2))
    # errors about the file itself come at the call, before any chunk is consumed
    with pytest.raises(InputError, match="file not found"):
        iter_frames(tmp_path / "nope.parquet")
    (tmp_path / "e.jsonl").write_text("")
    with pytest.raises(InputError, match="is empty"):
        iter_frames(tmp_path / "e.jsonl")
    write_frame(df.iloc[:0], tmp_path / "zero.parquet")
    with pytest.raises(InputError, match="is empty"):
        iter_frames(tmp_path / "zero.parquet")


# ------------------------------------------------------------------------------------------
# R interoperability (needs Rscript)

R_STRINGS = ["Grüße, Zürich", "emoji 🎉👍", "中文 日本語 한국어", 'quotes "double" \'single\'',
             "new\nline\ttab", None, "NA"]


def _rscript(code: str) -> str:
    if shutil.which("Rscript") is None:
        pytest.skip("Rscript not found: R interoperability not tested")
    res = subprocess.run(["Rscript", "-e", code], capture_output=True, text=True, timeout=60,
                         env={"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    return res.stdout


def _hex(s):
    return "NA" if s is None else s.encode("utf-8").hex()


def test_r_reads_our_rds_with_utf8_intact(tmp_path):
    f = tmp_path / "py.rds"
    frame = pd.DataFrame({"doc_id": [f"d{i}" for i in range(len(R_STRINGS))], "text": R_STRINGS,
                          "n": range(len(R_STRINGS)),
                          "p": [0.5, np.nan, 1, 2, 3, np.nan, 4],
                          "k": pd.array([1, None, 3, 4, 5, 6, 7], dtype="Int64"),
                          "big": [2**40] * len(R_STRINGS),
                          "party": pd.Categorical(["D", "R", None, "D", "R", "D", "R"])})
    write_frame(frame, f)
    out = _rscript(
        f'x <- readRDS("{f}"); stopifnot(is.data.frame(x), is.character(x$text)); '
        'h <- vapply(x$text, function(s) if (is.na(s)) "NA" else '
        'paste(as.character(charToRaw(enc2utf8(s))), collapse = ""), ""); '
        'cat(h, sep = "\\n"); cat(class(x$n), class(x$k), class(x$big), "\\n"); '
        'cat(unique(Encoding(x$text[!is.na(x$text)])), "\\n"); '
        'cat(which(is.na(x$p)), "|", any(is.nan(x$p)), "|", which(is.na(x$k)), "|", '
        'class(x$party), levels(x$party), which(is.na(x$party)), "\\n")')
    lines = out.splitlines()
    assert lines[:len(R_STRINGS)] == [_hex(s) for s in R_STRINGS]
    # integers within R's 32-bit range are R integers; larger ones doubles
    assert lines[len(R_STRINGS)].split() == ["integer", "integer", "numeric"]
    assert set(lines[len(R_STRINGS) + 1].split()) <= {"UTF-8", "unknown"}
    # missing numbers are NA in R, not NaN; factors stay factors
    assert lines[len(R_STRINGS) + 2].split() == ["2", "6", "|", "FALSE", "|", "2", "|",
                                                 "factor", "D", "R", "3"]


def test_we_read_an_r_saved_data_frame_the_same(tmp_path):
    f = tmp_path / "r.rds"
    r_vec = ", ".join("NA" if s is None else
                      '"' + "".join(c if c.isascii() and c not in '"\\\n\t' else
                                    f"\\U{{{ord(c):x}}}" for c in s) + '"'
                      for s in R_STRINGS)
    _rscript(f'x <- data.frame(doc_id = paste0("r", 1:{len(R_STRINGS)}), text = c({r_vec}), '
             f'party = factor(c("D", "R", "D", NA, "R", "D", "R")), '
             f'label = c(1, 0, 1, NA, 0, 1, 0), stringsAsFactors = FALSE); saveRDS(x, "{f}")')
    frame = read_frame(f)
    assert frame["text"].tolist() == R_STRINGS
    assert frame["doc_id"].tolist() == [f"r{i}" for i in range(1, 8)]
    assert frame["label"].tolist() == ["1", "0", "1", None, "0", "1", "0"]
    assert frame["party"].astype(object).where(frame["party"].notna(), None).tolist() == \
        ["D", "R", "D", None, "R", "D", "R"]


# --------------------------------------------------------------------------------------------
# issue 17: text changed or lost without a word

# the smallest case: a TSV made without quoting, one text opens a quote on line 3 that
# a later line closes; read with CSV quoting, lines 3-5 became one document ("wrote 3 rows")
UNQUOTED_TSV = 'label\ttext\n0\tfirst\n1\t"he said hi\n0\tthird\n1\tfourth 12" ruler\n0\tfifth\n'


def test_tsv_quote_that_would_merge_lines_is_refused_with_the_fix(tmp_path):
    f = tmp_path / "x.tsv"
    f.write_text(UNQUOTED_TSV, encoding="utf-8")
    with pytest.raises(InputError, match=r"5 lines of data.*3 rows.*line 3.*pass quoting none to"):
        read_frame(f)
    # the same through the CLI: exit 2, nothing written
    from quantformer.cli import main as cli

    out = tmp_path / "t.csv"
    assert cli.main(["tokenize", "--input", str(f), "--out", str(out)]) == 2
    assert not out.exists()


@pytest.mark.parametrize("name", ["x.tsv", "x.txt"])
def test_quoting_none_reads_every_line_exactly(tmp_path, name):
    f = tmp_path / name
    f.write_text(UNQUOTED_TSV, encoding="utf-8")
    frame = read_frame(f, quoting="none")
    assert frame["text"].tolist() == ["first", '"he said hi', "third", 'fourth 12" ruler',
                                      "fifth"]
    assert frame["label"].tolist() == ["0", "1", "0", "1", "0"]
    chunks = list(iter_frames(f, chunk_rows=2, quoting="none"))
    assert pd.concat(chunks)["text"].tolist() == frame["text"].tolist()


def test_quoting_none_refuses_a_line_with_missing_fields(tmp_path):
    f = tmp_path / "x.tsv"
    f.write_text("label\ttext\n0\tfine\n1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 3: 1 field\(s\) where the header has 2"):
        read_frame(f, quoting="none")
    with pytest.raises(InputError, match="unknown quoting 'tsv'"):
        read_frame(f, quoting="tsv")


def test_tsv_leading_quote_warns_and_csv_silences(tmp_path):
    f = tmp_path / "y.tsv"
    f.write_text('label\ttext\n0\t"Great" day\n1\tplain\n', encoding="utf-8")
    with pytest.warns(FrameWarning, match=r"1 line\(s\).*begins with a quote.*line 2"):
        assert read_frame(f)["text"].tolist() == ["Great day", "plain"]
    assert read_frame(f, quoting="none")["text"].tolist() == ['"Great" day', "plain"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FrameWarning)
        read_frame(f, quoting="csv")


def test_tsv_written_by_us_reads_back_silently(tmp_path):
    texts = ['"Hi" she said', 'two\nlines', 'tab\there', 'plain "quoted" words', None]
    frame = pd.DataFrame({"doc_id": [f"d{i}" for i in range(5)], "text": texts})
    write_frame(frame, tmp_path / "w.tsv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = read_frame(tmp_path / "w.tsv")
    assert back["text"].tolist() == texts


def test_labels_in_a_file_of_their_own(tmp_path):
    (tmp_path / "train_text.txt").write_text('"Quoted" tweet\nsecond\n\nfourth\n')
    (tmp_path / "train_labels.txt").write_text("1\n0\n2\n\n")
    frame = read_frame(tmp_path / "train_text.txt",
                       labels_file=tmp_path / "train_labels.txt", require_label=True)
    assert frame.to_dict("list") == {"doc_id": ["text1", "text2", "text3", "text4"],
                                     "text": ['"Quoted" tweet', "second", None, "fourth"],
                                     "label": ["1", "0", "2", None]}
    chunks = list(iter_frames(tmp_path / "train_text.txt", chunk_rows=3,
                              labels_file=tmp_path / "train_labels.txt"))
    assert pd.concat(chunks)["label"].tolist() == ["1", "0", "2", None]


def test_labels_file_errors_say_what_to_do(tmp_path):
    texts = tmp_path / "t.txt"
    texts.write_text("a\nb\n")
    (tmp_path / "short.txt").write_text("1\n")
    (tmp_path / "header.txt").write_text("label\n1\n0\n")
    with pytest.raises(InputError, match="has 1 lines but .* has 2 documents"):
        read_frame(texts, labels_file=tmp_path / "short.txt")
    with pytest.raises(InputError, match="first line is a header"):
        read_frame(texts, labels_file=tmp_path / "header.txt")
    with pytest.raises(InputError, match="not a file.*pass label_col party"):
        read_frame(texts, labels_file="party")
    with pytest.raises(InputError, match="either label_col .* or labels_file"):
        read_frame(texts, labels_file=tmp_path / "short.txt", label_col="x")


@pytest.mark.parametrize("flag,hint", [("label_col", "pass labels_file train_labels.txt"),
                                       ("text_col", "give the corpus file with input")])
def test_file_name_given_to_a_column_flag(tmp_path, flag, hint):
    texts = tmp_path / "t.csv"
    texts.write_text("text,party\na,x\nb,y\n")
    with pytest.raises(InputError, match=f"looks like a file.*{hint}"):
        read_frame(texts, **{flag: "train_labels.txt"})


def test_text_column_of_numbers_warns_naming_column_and_type(tmp_path):
    f = tmp_path / "n.csv"
    f.write_text("id,n,body\n1,5,hello\n2,6,world\n")
    with pytest.warns(FrameWarning, match=r"text column 'n' of .* holds only numbers"):
        read_frame(f, text_col="n")
    p = tmp_path / "n.parquet"
    pd.DataFrame({"year": [2001, 2002], "body": ["a", "b"]}).to_parquet(p)
    with pytest.warns(FrameWarning, match=r"text column 'year' .* holds int64 values"):
        read_frame(p, text_col="year")
    with pytest.warns(FrameWarning, match="holds int64 values"):
        list(iter_frames(p, text_col="year", chunk_rows=1))
    with warnings.catch_warnings():  # real text, even with a few numbers, is silent
        warnings.simplefilter("error", FrameWarning)
        read_frame(f, text_col="body")
        to_frame(pd.DataFrame({"text": ["12", "twelve", None]}))


def test_numbered_ids_are_said_once_across_chunks(tmp_path):
    """Issue 36: a corpus without ids got text1..N silently."""
    from quantformer._core.errors import ParamWarning

    f = tmp_path / "n.parquet"
    pd.DataFrame({"docname": ["x", "y", "z"], "text": ["a", "b", "c"]}).to_parquet(f)
    with pytest.warns(ParamWarning) as seen:
        chunks = list(iter_frames(f, chunk_rows=1))
    assert [c["doc_id"].item() for c in chunks] == ["text1", "text2", "text3"]
    notices = [str(w.message) for w in seen if issubclass(w.category, ParamWarning)]
    assert len(notices) == 1 and "named text1..textN" in notices[0]
    assert "the column 'docname' holds them, pass it as id_col" in notices[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_frame(f, id_col="docname")["doc_id"].tolist() == ["x", "y", "z"]


def test_numbered_lines_file_gives_the_fix_that_fits_it(tmp_path):
    """A text file of one document a line has no place for ids: the notice says so and names
    a file with a doc_id column as the fix, not --id-col (read whole and streamed alike)."""
    from quantformer._core.errors import ParamWarning

    f = tmp_path / "speeches.txt"
    f.write_text("we will\nwe shall\n", encoding="utf-8")
    for read in (lambda: read_frame(f), lambda: pd.concat(iter_frames(f, chunk_rows=1))):
        with pytest.warns(ParamWarning) as seen:
            frame = read()
        assert frame["doc_id"].tolist() == ["text1", "text2"]
        notices = [str(w.message) for w in seen if issubclass(w.category, ParamWarning)]
        assert len(notices) == 1
        assert "is one document a line, without ids: its 2 documents are named" in notices[0]
        assert "a CSV or TSV file with a 'doc_id' column" in notices[0]
        assert "{id_col}" not in notices[0] and "id_col" not in notices[0]
