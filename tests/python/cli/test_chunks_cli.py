"""``--truncation chunks`` on the command line (issue 34): finetune records it, predict reads
documents in windows as trained and writes one row per window with --chunks-out; bad window
settings exit 2 before any work."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.cli.main import main


def _long(n):
    f = toy_frame(n)
    f["text"] = [" ".join([t] * 6) for t in f["text"]]
    return f


@pytest.fixture(scope="module")
def chunk_model(tiny_bert_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("chunks-cli")
    _long(12).to_csv(d / "train.csv", index=False)
    code = main(["finetune", "--train", str(d / "train.csv"), "--model", str(tiny_bert_dir),
                 "--epochs", "1", "--max-length", "24", "--truncation", "chunks",
                 "--stride", "4", "--device", "cpu", "--quiet", "--precision", "fp32",
                 "--out", str(d / "m")])
    assert code == 0
    return d


def test_predict_as_trained_with_chunks_out(chunk_model, capsys):
    d = chunk_model
    _long(3).drop(columns="label").to_csv(d / "new.csv", index=False)
    assert main(["predict", "--model", str(d / "m"), "--input", str(d / "new.csv"),
                 "--out", str(d / "p.parquet"), "--chunks-out", str(d / "w.parquet"),
                 "--device", "cpu", "--quiet", "--precision", "fp32"]) == 0
    docs = pd.read_parquet(d / "p.parquet")
    win = pd.read_parquet(d / "w.parquet")
    assert len(docs) == 3 and list(win.columns[:4]) == ["doc_id", "chunk", "start", "end"]
    assert set(win["doc_id"]) == set(docs["doc_id"])
    text = _long(3).set_index("doc_id")["text"]
    first = win[win["chunk"] == 0].set_index("doc_id")
    assert (first["start"] == 0).all()
    last = win.groupby("doc_id")["end"].max()
    assert all(last[i] == len(text[i]) for i in last.index)
    probs = [c for c in win.columns if c.startswith("prob_")]
    # the document's probability is the softmax of the mean window logits: between the
    # smallest and the largest window probability
    for doc_id, g in win.groupby("doc_id"):
        p = docs.set_index("doc_id").loc[doc_id, probs[0]]
        assert g[probs[0]].min() - 1e-6 <= p <= g[probs[0]].max() + 1e-6


def test_predict_other_truncation_warns_naming_both(chunk_model, capsys):
    d = chunk_model
    _long(2).drop(columns="label").to_csv(d / "new2.csv", index=False)
    assert main(["predict", "--model", str(d / "m"), "--input", str(d / "new2.csv"),
                 "--out", str(d / "p2.csv"), "--truncation", "head_tail", "--device", "cpu",
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "fine-tuned with --truncation chunks and predicts with head_tail" in err


@pytest.mark.parametrize("extra, msg", [
    (["--truncation", "chunks", "--stride", "22"], "--stride 22 must be at least 0"),
    (["--truncation", "chunks", "--aggregate", "median"], "unknown --aggregate 'median'"),
    (["--truncation", "chunks", "--max-chunks", "0"], "--max-chunks must be at least 1"),
    (["--stride", "3"], "--stride applies to --truncation chunks only"),
])
def test_bad_window_flags_exit_2(tmp_path, capsys, extra, msg):
    _long(6).to_csv(tmp_path / "t.csv", index=False)
    code = main(["finetune", "--train", str(tmp_path / "t.csv"), "--max-length", "24",
                 "--out", str(tmp_path / "m"), "--quiet", *extra])
    assert code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_predict_bad_aggregate_and_chunks_out_without_chunks(chunk_model, tmp_path, capsys):
    d = chunk_model
    _long(2).to_csv(tmp_path / "x.csv", index=False)
    base = ["predict", "--model", str(d / "m"), "--input", str(tmp_path / "x.csv"),
            "--out", str(tmp_path / "o.csv"), "--device", "cpu", "--quiet"]
    assert main([*base, "--aggregate", "median"]) == 2
    assert "unknown --aggregate 'median'" in capsys.readouterr().err
    assert main([*base, "--truncation", "head", "--chunks-out", str(tmp_path / "w.csv")]) == 2
    assert "--chunks-out needs documents read in windows" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_embed_chunks_is_the_mean_of_the_window_rows(tiny_bert_dir, tmp_path, capsys):
    """issue 34: a long document's embedding is the mean of its windows' embeddings, which
    --chunks-out writes one a row with their character spans."""
    f = _long(3)
    f.loc[2, "text"] = ""
    f.to_csv(tmp_path / "x.csv", index=False)
    assert main(["embed", "--input", str(tmp_path / "x.csv"), "--out",
                 str(tmp_path / "e.parquet"), "--model", str(tiny_bert_dir), "--truncation",
                 "chunks", "--max-length", "16", "--stride", "3", "--chunks-out",
                 str(tmp_path / "w.parquet"), "--quiet", "--device", "cpu"]) == 0
    docs = pd.read_parquet(tmp_path / "e.parquet").set_index("doc_id")
    win = pd.read_parquet(tmp_path / "w.parquet")
    assert list(win.columns) == ["doc_id", "chunk", "start", "end", "embedding"]
    assert win.groupby("doc_id").size().min() > 1 and f.loc[2, "doc_id"] not in set(win.doc_id)
    for doc_id, g in win.groupby("doc_id"):
        mean = np.mean(np.stack(g["embedding"].to_numpy()), axis=0)
        np.testing.assert_allclose(docs.loc[doc_id, "embedding"], mean, rtol=1e-5, atol=1e-6)
    text = f.set_index("doc_id")["text"]
    assert all(win.groupby("doc_id")["end"].max()[i] == len(text[i])
               for i in win["doc_id"].unique())
    assert "windows of 16 tokens" in capsys.readouterr().out
    from quantformer.infer.embed import embed

    # the library agrees with the file, and head_tail on the same window differs
    lib = embed(f, str(tiny_bert_dir), truncation="chunks", max_length=16, stride=3,
                quiet=True, device="cpu")
    np.testing.assert_allclose(lib[0], docs.loc[f.doc_id[0], "embedding"], rtol=1e-5)
    cut = embed(f, str(tiny_bert_dir), max_length=16, quiet=True, device="cpu")
    assert not np.allclose(cut[0], lib[0], atol=1e-3)


@pytest.mark.parametrize("verb, extra, msg", [
    ("embed", ["--stride", "3"], "--stride applies to --truncation chunks only (documents read "
                                 "whole as windows): add --truncation chunks or leave it out"),
    ("embed", ["--truncation", "chunks", "--max-chunks", "0"], "--max-chunks must be at least 1"),
    ("embed", ["--chunks-out", "w.csv"], "--chunks-out writes one row per window"),
    ("zeroshot", ["--truncation", "chunks", "--aggregate", "median", "--labels", "a,b"],
     "unknown --aggregate 'median'"),
    ("zeroshot", ["--truncation", "chunks", "--aggregate", "max", "--labels", "a,b"],
     "--aggregate applies to the NLI method"),
])
def test_embed_zeroshot_bad_window_flags_exit_2(tmp_path, capsys, verb, extra, msg,
                                                monkeypatch):
    monkeypatch.chdir(tmp_path)
    _long(2).to_csv(tmp_path / "x.csv", index=False)
    code = main([verb, "--input", "x.csv", "--out", "o.csv", "--quiet", *extra])
    assert code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_tokenize_counts_windows_of_a_chunks_model(chunk_model, capsys):
    d = chunk_model
    _long(3).to_csv(d / "t3.csv", index=False)
    assert main(["tokenize", "--model", str(d / "m"), "--input", str(d / "t3.csv"),
                 "--out", str(d / "tok.csv")]) == 0
    stats = pd.read_csv(d / "tok.csv")
    from quantformer.models.windows import window_starts

    # 24 tokens a window, 22 of content, stride 4 as trained
    expect = [len(window_starts(n - 2, 22, 4)) for n in stats["n_tokens"]]
    assert stats["n_windows"].tolist() == expect and max(expect) > 1
    assert "windows" in capsys.readouterr().out


def test_tokenize_windows_with_a_given_stride_and_max_chunks(tiny_bert_dir, tmp_path,
                                                             capsys):
    _long(3).to_csv(tmp_path / "t.csv", index=False)
    assert main(["tokenize", "--model", str(tiny_bert_dir), "--input", str(tmp_path / "t.csv"),
                 "--max-length", "16", "--truncation", "chunks", "--stride", "2",
                 "--max-chunks", "2", "--out", str(tmp_path / "tok.csv")]) == 0
    stats = pd.read_csv(tmp_path / "tok.csv")
    from quantformer.models.windows import window_starts

    # 14 tokens of content a window, stride 2 given; the first 2 windows at most are kept
    full = [len(window_starts(n - 2, 14, 2)) for n in stats["n_tokens"]]
    assert stats["n_windows"].tolist() == [min(k, 2) for k in full] and max(full) > 2
    assert stats["truncated"].tolist() == [k > 2 for k in full]


@pytest.mark.parametrize("extra, msg", [
    (["--stride", "4"], "--stride applies to --truncation chunks only"),
    (["--truncation", "chunks", "--max-length", "16", "--stride", "14"], "--stride"),
    (["--truncation", "chunks", "--max-chunks", "0"], "--max-chunks"),
])
def test_tokenize_bad_window_settings_exit_2_before_reading(tiny_bert_dir, tmp_path, capsys,
                                                            extra, msg):
    out = tmp_path / "tok.csv"
    code = main(["tokenize", "--model", str(tiny_bert_dir), "--input",
                 str(tmp_path / "absent.csv"), "--out", str(out), *extra])
    assert code == 2 and msg in capsys.readouterr().err
    assert not out.exists()


def test_explain_a_chunks_model_every_word_with_page_figure_terms_and_checks(chunk_model,
                                                                           tmp_path, capsys):
    d = chunk_model
    _long(3).to_csv(tmp_path / "x.csv", index=False)
    out = tmp_path / "a.parquet"
    code = main(["explain", "--model", str(d / "m"), "--input", str(tmp_path / "x.csv"),
                 "--out", str(out), "--steps", "4", "--html", str(tmp_path / "p.html"),
                 "--png", str(tmp_path / "f.png"), "--by-term", str(tmp_path / "t.csv"),
                 "--check", "--quiet", "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    words = pd.read_parquet(out)
    assert not words["attribution"].isna().any()
    assert (words["n_windows"] > 1).all() and words["word_windows"].max() == 2
    assert {"steps", "predicted", "probability"} <= set(words.columns)
    text = _long(3).set_index("doc_id")["text"]
    last = words.groupby("doc_id")["end"].max()
    assert all(last[i] == len(text[i]) for i in last.index)  # words to the end of the text
    page = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert words["word"].iloc[-1] in page
    assert (tmp_path / "f.png").stat().st_size > 1000
    assert len(pd.read_csv(tmp_path / "t.csv")) > 0
    import json

    checks = json.loads((tmp_path / "a.check.json").read_text())
    assert checks["aopc_n_docs"] == 3 and checks["randomisation_n_docs"] == 3
    assert -1 <= checks["randomisation_spearman"] <= 1


@pytest.mark.parametrize("extra, msg", [
    (["--aggregate", "median"], "unknown --aggregate 'median'"),
    (["--truncation", "chunks", "--stride", "22"], "--stride 22 must be at least 0"),
    (["--truncation", "head", "--max-chunks", "2"], "--max-chunks applies to --truncation chunks only"),
])
def test_explain_bad_window_flags_exit_2(chunk_model, tmp_path, capsys, monkeypatch, extra,
                                        msg):
    import quantformer.audit.explain as explain_module

    def no_load(*a, **k):
        raise AssertionError("the model was loaded before the flags were checked")

    monkeypatch.setattr(explain_module, "load_model", no_load)
    d = chunk_model
    _long(2).to_csv(tmp_path / "x.csv", index=False)
    code = main(["explain", "--model", str(d / "m"), "--input", str(tmp_path / "x.csv"),
                 "--out", str(tmp_path / "a.parquet"), "--quiet", *extra])
    assert code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "a.parquet").exists()


def test_explain_partitioned_input_with_window_flags(chunk_model, tmp_path, capsys):
    d = chunk_model
    parts = tmp_path / "parts"
    parts.mkdir()
    docs = _long(4).drop(columns="label")
    docs.iloc[:2].to_csv(parts / "a.csv", index=False)
    docs.iloc[2:].to_csv(parts / "b.csv", index=False)
    docs.to_csv(tmp_path / "all.csv", index=False)
    common = ["--model", str(d / "m"), "--steps", "4", "--aggregate", "max", "--stride", "6",
              "--quiet", "--device", "cpu"]
    assert main(["explain", *common, "--input", str(parts), "--out", str(tmp_path / "o")]) == 0
    assert main(["explain", *common, "--input", str(tmp_path / "all.csv"),
                 "--out", str(tmp_path / "one.parquet")]) == 0
    from quantformer.scale.explain import read_explanation

    got, want = read_explanation(tmp_path / "o"), pd.read_parquet(tmp_path / "one.parquet")
    assert not got["attribution"].isna().any()
    assert got["n_windows"].tolist() == want["n_windows"].tolist()
    assert abs(got["attribution"] - want["attribution"]).max() < 1e-4


def test_predict_warns_once_of_windows_over_max_chunks(chunk_model, tmp_path, capsys):
    d = chunk_model
    f = _long(3).drop(columns="label")
    f.loc[1, "text"] = "short"
    f.to_csv(tmp_path / "new.csv", index=False)
    assert main(["predict", "--model", str(d / "m"), "--input", str(tmp_path / "new.csv"),
                 "--out", str(tmp_path / "p.csv"), "--max-chunks", "1", "--device", "cpu",
                 "--quiet", "--precision", "fp32"]) == 0
    err = capsys.readouterr().err
    assert err.count("need more than") == 1
    assert ("2 of 3 document(s) need more than --max-chunks 1 windows; only their first 1 "
            "are read (the later ones are dropped)") in err


@pytest.mark.parametrize("stride", ["-1", "22"])
def test_predict_bad_stride_names_the_window_as_the_other_verbs(chunk_model, tmp_path, capsys,
                                                                stride):
    _long(2).to_csv(tmp_path / "x.csv", index=False)
    assert main(["predict", "--model", str(chunk_model / "m"), "--input",
                 str(tmp_path / "x.csv"), "--out", str(tmp_path / "o.csv"), "--device", "cpu",
                 "--quiet", "--truncation", "chunks", "--stride", stride]) == 2
    # predict has no --max-length: the window is the model's
    assert (f"--stride {stride} must be at least 0 and smaller than the window (22 content "
            "tokens at the model's window of 24 tokens); the default is a quarter of it"
            in capsys.readouterr().err)
    assert not (tmp_path / "o.csv").exists()
