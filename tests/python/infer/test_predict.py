"""Prediction: input order and ids kept, missing texts kept, streaming equals in-memory, CLI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyreadr
import pytest
from toydata import toy_frame

import quantformer
from quantformer.cli import main as cli
from quantformer.train.finetune import finetune
from quantformer.infer.classifier import PredictionWarning
from quantformer.infer.predict import predict_file


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir, tmp_path_factory):
    clf = finetune(toy_frame(32), model=str(tiny_bert_dir), epochs=1, lr=1e-3, quiet=True,
                   device="cpu", max_length=64)
    return clf.save(tmp_path_factory.mktemp("pred") / "model")


def _docs(n=50):
    f = toy_frame(n).drop(columns="label")
    f["doc_id"] = [f"z{(i * 7) % n:03d}" for i in range(n)]  # ids not in sorted order
    f.loc[[2, 11], "text"] = None
    f.loc[5, "text"] = "   "
    return f


def test_predict_keeps_order_ids_and_missing(model_dir, fp32_auto):
    clf = quantformer.load(model_dir, device="cpu")
    docs = _docs()
    with pytest.warns(PredictionWarning, match="3 of 50 document\\(s\\) have a missing or empty"):
        out = clf.predict(docs)
    assert out["doc_id"].tolist() == docs["doc_id"].tolist()
    assert list(out.columns) == ["doc_id", "year", "predicted", "prob_econ", "prob_other",
                                 "backend"]
    assert out["backend"].tolist() == ["torch"] * 50  # which backend produced them (issue 16)
    assert out["year"].tolist() == docs["year"].tolist()
    assert out["predicted"].isna().tolist() == [i in (2, 5, 11) for i in range(50)]
    probs = out[["prob_econ", "prob_other"]].to_numpy()
    assert np.isnan(probs[[2, 5, 11]]).all()
    ok = np.delete(probs, [2, 5, 11], axis=0)
    np.testing.assert_allclose(ok.sum(axis=1), 1.0, atol=1e-5)
    top = np.array(clf.labels)[ok.argmax(axis=1)]
    assert top.tolist() == out["predicted"].drop(index=[2, 5, 11]).tolist()
    # the order of the batch does not change a document's probabilities
    with pytest.warns(PredictionWarning):
        rev = clf.predict_proba(docs["text"].iloc[::-1].tolist())
    np.testing.assert_allclose(rev[::-1], probs, atol=1e-5)
    with_text = clf.predict(docs.head(3), keep_text=True, warn=False)
    assert with_text["text"].tolist()[:2] == docs["text"].tolist()[:2]
    # the function form, with a model path
    with pytest.warns(PredictionWarning, match="1 of 4"):
        same = quantformer.predict(model_dir, docs.head(4), device="cpu")
    assert same["doc_id"].tolist() == docs["doc_id"].head(4).tolist()


@pytest.mark.parametrize("ext", ["parquet", "csv", "rds"])
def test_streaming_equals_in_memory(model_dir, tmp_path, ext):
    docs = _docs(60)
    src = tmp_path / "in.parquet"
    docs.to_parquet(src, row_group_size=7)
    out = tmp_path / f"out.{ext}"
    with pytest.warns(PredictionWarning, match="3 of 60"):
        n = predict_file(str(model_dir), src, out, chunk_rows=16, quiet=True, device="cpu")
    assert n == 60
    got = (pd.read_parquet(out) if ext == "parquet" else pd.read_csv(out) if ext == "csv"
           else pyreadr.read_r(str(out))[None])
    with pytest.warns(PredictionWarning):
        ref = quantformer.load(model_dir, device="cpu").predict(docs)
    assert got["doc_id"].tolist() == ref["doc_id"].tolist()
    assert got["predicted"].isna().tolist() == ref["predicted"].isna().tolist()
    np.testing.assert_allclose(got["prob_econ"].to_numpy(dtype=float),
                               ref["prob_econ"].to_numpy(dtype=float), atol=1e-5)
    assert [x for x in tmp_path.iterdir() if x.name.startswith(".")] == []


def test_streaming_progress_bar_knows_the_total(model_dir, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    _docs(60).to_parquet(src, row_group_size=7)
    with pytest.warns(PredictionWarning):
        predict_file(str(model_dir), src, tmp_path / "out.csv", chunk_rows=16, device="cpu")
    err = capsys.readouterr().err
    assert "predicting: 100%" in err and "60/60" in err  # a total, so an ETA


def test_streaming_progress_bar_advances_per_batch(model_dir, tmp_path, monkeypatch):
    """Issue 27, points 1 and 9: one bar over all documents, advanced after every batch (not
    once per chunk), missing documents counted once per chunk."""
    import tqdm.auto

    updates = []

    class Recording(tqdm.auto.tqdm):
        def update(self, n=1):
            if self.desc == "predicting":
                updates.append(n)
            return super().update(n)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    src = tmp_path / "in.csv"
    docs = _docs(30)  # 3 missing or empty: 27 documents to score
    docs.to_csv(src, index=False)
    with pytest.warns(PredictionWarning):
        predict_file(str(model_dir), src, tmp_path / "out.csv", chunk_rows=16, batch_size=4,
                     device="cpu")
    # chunk 1: 16 rows, 3 missing -> 13 scored in 4,4,4,1 then 3; chunk 2: 14 in 4,4,4,2 then 0
    assert updates == [4, 4, 4, 1, 3, 4, 4, 4, 2, 0]
    assert sum(updates) == 30


def test_cli_predict(model_dir, tmp_path, capsys):
    docs = toy_frame(20).rename(columns={"text": "body", "doc_id": "key"})
    src = tmp_path / "in.csv"
    docs.to_csv(src, index=False)
    out = tmp_path / "p.parquet"
    assert cli.main(["predict", "--model", str(model_dir), "--input", str(src), "--text-col",
                     "body", "--id-col", "key", "--out", str(out), "--keep-text",
                     "--batch-size", "4", "--device", "cpu", "--quiet"]) == 0
    got = pd.read_parquet(out)
    assert got["doc_id"].tolist() == docs["key"].tolist()
    # the label column travels through (evaluate --truth-col label uses it)
    assert list(got.columns) == ["doc_id", "text", "label", "year", "predicted", "prob_econ",
                                 "prob_other", "backend"]
    assert got["text"].tolist() == docs["body"].tolist()
    assert "wrote predictions for 20 documents" in capsys.readouterr().out
    # bad input: unknown column -> exit 2, no output
    out2 = tmp_path / "q.parquet"
    assert cli.main(["predict", "--model", str(model_dir), "--input", str(src), "--out",
                     str(out2)]) == 2
    assert "no 'text' column" in capsys.readouterr().err
    assert not out2.exists()
    assert cli.main(["predict", "--model", str(model_dir), "--input", str(src), "--text-col",
                     "body", "--out", str(tmp_path / "p.xlsx")]) == 2
    assert not (tmp_path / "p.xlsx").exists()


# issue 17: predict said nothing about documents cut at max_length (zeroshot did)
def _long_docs():
    docs = toy_frame(6).drop(columns="label")
    docs.loc[[1, 4], "text"] = " ".join(["taxes and jobs"] * 60)  # far over 64 tokens
    return docs


def test_predict_reports_truncated_documents_everywhere(model_dir, tmp_path, capsys):
    from quantformer.models.tokenize import TruncationWarning

    docs = _long_docs()
    clf = quantformer.load(model_dir, device="cpu")
    wording = r"2 of 6 document\(s\) truncated to 64 tokens \(head_tail\)"
    with pytest.warns(TruncationWarning, match=wording):
        clf.predict(docs)
    with pytest.warns(TruncationWarning, match=wording):
        clf.predict_proba(docs)
    src = tmp_path / "long.parquet"
    docs.to_parquet(src)
    with pytest.warns(TruncationWarning, match=wording):  # once, summed over the chunks
        predict_file(str(model_dir), src, tmp_path / "p.csv", chunk_rows=4, quiet=True,
                     device="cpu")
    assert cli.main(["predict", "--model", str(model_dir), "--input", str(src), "--out",
                     str(tmp_path / "q.csv"), "--device", "cpu", "--quiet"]) == 0
    err = capsys.readouterr().err
    head = "2 of 6 document(s) truncated to 64 tokens (head_tail), 33% of the documents; "
    assert f"quantformer: warning: {head}`quantformer tokenize --model M" in err
    assert err.count("truncated to") == 1
    # called from R (--r-names): once, in R terms, no command line (issue 27, point 3)
    assert cli.main(["--r-names", "object,newdata,type", "predict", "--model", str(model_dir),
                     "--input", str(src), "--out", str(tmp_path / "r.csv"), "--device", "cpu",
                     "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"quantformer: warning: {head}textstat_subwords(x, model = fit) shows which\n" in err
    assert err.count("truncated to") == 1 and "quantformer tokenize" not in err
    # `tokenize` with the model directory marks the same documents, at the model's max_length
    assert cli.main(["tokenize", "--input", str(src), "--model", str(model_dir), "--out",
                     str(tmp_path / "t.csv")]) == 0
    stats = pd.read_csv(tmp_path / "t.csv")
    assert stats["truncated"].tolist() == [False, True, False, False, True, False]
    assert "over 64 (truncated)" in capsys.readouterr().out


def test_predict_is_silent_when_nothing_is_cut(model_dir):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quantformer.load(model_dir, device="cpu").predict(toy_frame(6))


def test_cli_predict_with_labels_file(model_dir, tmp_path, capsys):
    (tmp_path / "text.txt").write_text("taxes and jobs\nthe weather today\n")
    (tmp_path / "labels.txt").write_text("econ\nother\n")
    out = tmp_path / "p.csv"
    assert cli.main(["predict", "--model", str(model_dir), "--input", str(tmp_path / "text.txt"),
                     "--labels-file", str(tmp_path / "labels.txt"), "--out", str(out),
                     "--device", "cpu", "--quiet"]) == 0
    assert pd.read_csv(out)["label"].tolist() == ["econ", "other"]
    # the documents are named text1..N, and the run says so once (issue 36)
    notices = [line for line in capsys.readouterr().err.splitlines() if "text1..textN" in line]
    assert len(notices) == 1 and notices[0].startswith(
        f"quantformer: warning: '{tmp_path / 'text.txt'}' is one document a line, without "
        "ids: its 2 documents are named text1..textN by their line")
    assert pd.read_csv(out)["doc_id"].tolist() == ["text1", "text2"]


def test_cli_finetune_and_evaluate_take_a_labels_file(tiny_bert_dir, model_dir, tmp_path, capsys):
    docs = toy_frame(16)
    (tmp_path / "train_text.txt").write_text("\n".join(docs["text"]) + "\n")
    (tmp_path / "train_labels.txt").write_text("\n".join(docs["label"]) + "\n")
    out = tmp_path / "m"
    assert cli.main(["finetune", "--train", str(tmp_path / "train_text.txt"), "--labels-file",
                     str(tmp_path / "train_labels.txt"), "--model", str(tiny_bert_dir),
                     "--epochs", "1", "--max-length", "32", "--device", "cpu", "--quiet",
                     "--out", str(out)]) == 0
    assert quantformer.load(out, device="cpu").labels == ["econ", "other"]
    assert cli.main(["evaluate", "--model", str(model_dir), "--input",
                     str(tmp_path / "train_text.txt"), "--labels-file",
                     str(tmp_path / "train_labels.txt"), "--device", "cpu", "--quiet"]) == 0
    assert "macro avg" in capsys.readouterr().out


def test_nli_pairs_advance_a_document_bar_by_whole_documents():
    """Zero-shot/NLI batches hold (document, hypothesis) pairs: a caller's bar over documents
    advances by the documents whose every pair is done."""
    from quantformer.models.batching import PerGroup

    class Bar:
        n = 0

        def update(self, k):
            self.n += k

    bar = Bar()
    per = PerGroup(bar, 3)  # 3 hypotheses per document
    seen = []
    for pairs in (4, 4, 1, 6):  # 15 pairs = 5 documents
        per.update(pairs)
        seen.append(bar.n)
    assert seen == [1, 2, 3, 5]
