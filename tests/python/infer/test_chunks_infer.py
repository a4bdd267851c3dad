"""Long documents read whole in windows beyond ``predict`` (issue 34): zero-shot (NLI and
embedding), SetFit and NLI fine-tuned models, the ONNX backend and the partitioned path on a
real Dask LocalCluster. Each test checks a value derived from the windows' own outputs."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.infer.embed import embed, embed_windows, load_encoder
from quantformer.infer.load import load_model
from quantformer.infer.predict import predict_file
from quantformer.infer.zeroshot import zeroshot
from quantformer.models.windows import ChunkWarning
from quantformer.scale.dask import embed_partitions, local_cluster, predict_partitions
from quantformer.train.finetune import finetune

# references are fp32 (one file, ONNX Runtime fp32); bf16 in windows: test_precision_verbs.py
pytestmark = pytest.mark.usefixtures("fp32_auto")


def _long(n: int) -> pd.DataFrame:
    f = toy_frame(n)
    f["text"] = [" ".join([t] * 6) for t in f["text"]]
    return f


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


@pytest.fixture(scope="module")
def chunk_model(tiny_bert_dir, tmp_path_factory):
    clf = finetune(_long(12), model=str(tiny_bert_dir), epochs=1, quiet=True, device="cpu",
                   max_length=24, truncation="chunks", stride=4, precision="fp32")
    return clf.save(tmp_path_factory.mktemp("chunks-infer") / "m")


def test_zeroshot_nli_document_logit_is_the_mean_of_its_windows(tiny_roberta_nli_dir,
                                                                 tmp_path):
    f = _long(3).drop(columns="label")
    f.loc[1, "text"] = None
    out = zeroshot(f, ["economy", "war"], model=str(tiny_roberta_nli_dir), truncation="chunks",
                   max_length=40, stride=5, chunks_out=str(tmp_path / "w.parquet"),
                   quiet=True, device="cpu")
    win = pd.read_parquet(tmp_path / "w.parquet")
    assert list(win.columns) == ["doc_id", "chunk", "start", "end", "predicted",
                                 "prob_economy", "prob_war"]
    assert out.attrs["quantformer"]["n_windows"] == len(win) and len(win) > 4
    # two labels: logit(p_economy) = entailment(economy) - entailment(war), so the mean of
    # the windows' entailment logits gives the mean of their logit(p)
    for doc_id, g in win.groupby("doc_id"):
        p = out.set_index("doc_id").loc[doc_id, "prob_economy"]
        assert _logit(p) == pytest.approx(_logit(g["prob_economy"].to_numpy()).mean(), abs=1e-5)
    assert f.loc[1, "doc_id"] not in set(win["doc_id"])
    mx = zeroshot(f, ["economy", "war"], model=str(tiny_roberta_nli_dir), truncation="chunks",
                  max_length=40, stride=5, aggregate="max", quiet=True, device="cpu")
    assert not np.allclose(mx["prob_economy"].dropna(), out["prob_economy"].dropna())


def test_zeroshot_embedding_uses_the_mean_window_embedding(tiny_bert_dir):
    f = _long(4).drop(columns="label")
    labels = ["economy", "war"]
    out = zeroshot(f, labels, model=str(tiny_bert_dir), method="embedding",
                   truncation="chunks", max_length=16, stride=3, calibration="none",
                   quiet=True, device="cpu")
    docs = embed(f, str(tiny_bert_dir), truncation="chunks", max_length=16, stride=3,
                 normalize=True, quiet=True, device="cpu").astype(np.float64)
    hyps = embed([f"This text is about {lab}." for lab in labels], str(tiny_bert_dir),
                 max_length=16, normalize=True, quiet=True, device="cpu").astype(np.float64)
    z = docs @ hyps.T / 0.05
    want = np.exp(z - z.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    np.testing.assert_allclose(out[["prob_economy", "prob_war"]].to_numpy(), want, atol=1e-5)


def test_setfit_model_reads_windows_into_its_head(tiny_bert_dir, tmp_path):
    from quantformer.infer.setfit import head_proba

    clf = finetune(_long(12), model=str(tiny_bert_dir), method="setfit", truncation="chunks",
                   max_length=24, stride=4, epochs=1, quiet=True, device="cpu")
    hp = clf.record["hyperparameters"]
    assert (hp["truncation"], hp["chunk_training"], hp["stride"]) == ("chunks", "head_tail", 4)
    path = clf.save(tmp_path / "sf")
    new = _long(3).drop(columns="label")
    new.to_csv(tmp_path / "new.csv", index=False)
    predict_file(path, tmp_path / "new.csv", tmp_path / "p.parquet",
                 chunks_out=str(tmp_path / "w.parquet"), quiet=True, device="cpu")
    got = pd.read_parquet(tmp_path / "p.parquet")
    loaded = load_model(path, device="cpu")
    vecs, win, _ = embed_windows(loaded.encoder, new["text"].tolist(), max_length=24,
                                 stride=4, normalize=loaded.normalize)
    want = head_proba(vecs.astype(np.float64), loaded.coef, loaded.intercept)
    probs = [f"prob_{c}" for c in loaded.labels]
    np.testing.assert_allclose(got[probs].to_numpy(), want, atol=1e-5)
    assert len(pd.read_parquet(tmp_path / "w.parquet")) == len(win.doc) > 3


def test_nli_model_aggregates_entailment_over_windows(tiny_roberta_nli_dir, tmp_path):
    clf = finetune(_long(12), model=str(tiny_roberta_nli_dir), method="nli",
                   truncation="chunks", max_length=40, stride=4, epochs=1, quiet=True,
                   device="cpu", precision="fp32")
    assert clf.record["hyperparameters"]["aggregate"] == "mean"
    path = clf.save(tmp_path / "nli")
    new = _long(3).drop(columns="label")
    new.to_csv(tmp_path / "new.csv", index=False)
    predict_file(path, tmp_path / "new.csv", tmp_path / "p.parquet",
                 chunks_out=str(tmp_path / "w.parquet"), quiet=True, device="cpu")
    got = pd.read_parquet(tmp_path / "p.parquet").set_index("doc_id")
    win = pd.read_parquet(tmp_path / "w.parquet")
    col = f"prob_{clf.labels[0]}"
    for doc_id, g in win.groupby("doc_id"):
        assert _logit(got.loc[doc_id, col]) == pytest.approx(
            _logit(g[col].to_numpy()).mean(), abs=1e-5)
    # tokenize counts the windows prediction read (the premise's, beside the hypothesis)
    from quantformer.cli.main import main

    assert main(["tokenize", "--model", str(path), "--input", str(tmp_path / "new.csv"),
                 "--out", str(tmp_path / "tok.csv")]) == 0
    tok = pd.read_csv(tmp_path / "tok.csv").set_index("doc_id")["n_windows"]
    assert tok.to_dict() == win.groupby("doc_id").size().to_dict()


@pytest.mark.parametrize("aggregate", ["mean", "max"])
def test_onnx_reads_windows_as_torch(chunk_model, tmp_path, monkeypatch, aggregate):
    monkeypatch.setenv("QUANTFORMER_CACHE", str(tmp_path / "cache"))
    model = shutil.copytree(chunk_model, tmp_path / "m")  # the export is written into it
    new = _long(5).drop(columns="label")
    new.loc[2, "text"] = None
    new.to_csv(tmp_path / "new.csv", index=False)
    runs = {}
    for backend in ("torch", "onnx"):
        predict_file(model, tmp_path / "new.csv", tmp_path / f"{backend}.parquet",
                     chunks_out=str(tmp_path / f"w-{backend}.parquet"), quiet=True,
                     device="cpu", backend=backend, precision="fp32" if backend == "torch"
                     else "auto", chunking={"aggregate": aggregate})
        runs[backend] = (pd.read_parquet(tmp_path / f"{backend}.parquet"),
                         pd.read_parquet(tmp_path / f"w-{backend}.parquet"))
    (t, tw), (o, ow) = runs["torch"], runs["onnx"]
    probs = [c for c in t.columns if c.startswith("prob_")]
    assert set(o["backend"]) == {"onnx fp32"}
    assert t["predicted"].tolist() == o["predicted"].tolist()
    np.testing.assert_allclose(o[probs].to_numpy(), t[probs].to_numpy(), atol=1e-5)
    np.testing.assert_allclose(ow[probs].to_numpy(), tw[probs].to_numpy(), atol=1e-5)
    assert (ow[["doc_id", "chunk", "start", "end"]] == tw[["doc_id", "chunk", "start",
                                                           "end"]]).all().all()


def test_onnx_embed_and_nli_zeroshot_read_the_same_windows(tiny_bert_dir,
                                                           tiny_roberta_nli_dir, tmp_path,
                                                           monkeypatch):
    """The ONNX tokenizer gives the character spans of the fast tokenizer, and embed and NLI
    zero-shot read the same windows on both backends."""
    monkeypatch.setenv("QUANTFORMER_CACHE", str(tmp_path / "cache"))
    enc = shutil.copytree(tiny_bert_dir, tmp_path / "bert")
    nli = shutil.copytree(tiny_roberta_nli_dir, tmp_path / "nli")
    f = _long(3).drop(columns="label")
    kw = {"truncation": "chunks", "max_length": 24, "stride": 4, "quiet": True}
    t, o = (embed(f, str(enc), backend=b, **kw) for b in ("torch", "onnx"))
    np.testing.assert_allclose(o, t, atol=1e-5)
    runs = {}
    for b in ("torch", "onnx"):
        out = zeroshot(f, ["economy", "war"], model=str(nli), backend=b,
                       chunks_out=str(tmp_path / f"w-{b}.parquet"), **kw)
        runs[b] = (out, pd.read_parquet(tmp_path / f"w-{b}.parquet"))
    np.testing.assert_allclose(runs["onnx"][0]["prob_war"], runs["torch"][0]["prob_war"],
                               atol=1e-5)
    spans = ["doc_id", "chunk", "start", "end"]
    assert runs["onnx"][1][spans].equals(runs["torch"][1][spans])


def test_partitioned_chunks_on_local_cluster_equal_one_file(chunk_model, tiny_bert_dir,
                                                            tmp_path):
    f = _long(30).drop(columns="label")
    f.loc[4, "text"] = None
    f.to_parquet(tmp_path / "all.parquet", index=False)
    (tmp_path / "in").mkdir()
    for k in range(3):
        f.iloc[k * 10:(k + 1) * 10].to_parquet(tmp_path / "in" / f"part-{k}.parquet",
                                               index=False)
    chunking = {"aggregate": "max", "max_chunks": 3}
    predict_file(chunk_model, tmp_path / "all.parquet", tmp_path / "want.parquet",
                 quiet=True, device="cpu", precision="fp32", chunking=chunking)
    from distributed import Client

    lc = local_cluster(2)
    try:
        with Client(lc), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            predict_partitions(chunk_model, str(tmp_path / "in"), tmp_path / "out",
                               scheduler=lc.scheduler_address, device="cpu", quiet=True,
                               precision="fp32", chunking=chunking)
            embed_partitions(str(tmp_path / "in"), tmp_path / "emb", str(tiny_bert_dir),
                             scheduler=lc.scheduler_address, device="cpu", quiet=True,
                             truncation="chunks", max_length=16, stride=3,
                             precision="fp32")  # workers choose auto on their own CPUs
    finally:
        lc.close()
    assert [str(w.message) for w in caught if issubclass(w.category, ChunkWarning)] == [
        "29 of 30 document(s) need more than max_chunks 3 windows; only their first 3 are "
        "read (the later ones are dropped)"]
    want = pd.read_parquet(tmp_path / "want.parquet")
    got = pd.concat([pd.read_parquet(p) for p in sorted((tmp_path / "out").glob("*.parquet"))],
                    ignore_index=True)
    probs = [c for c in want.columns if c.startswith("prob_")]
    assert got["doc_id"].tolist() == want["doc_id"].tolist()
    assert got["predicted"].tolist() == want["predicted"].tolist()
    np.testing.assert_allclose(got[probs].to_numpy(), want[probs].to_numpy(), atol=1e-5)
    emb = pd.concat([pd.read_parquet(p) for p in sorted((tmp_path / "emb").glob("*.parquet"))],
                    ignore_index=True)
    ref = embed(f, str(tiny_bert_dir), truncation="chunks", max_length=16, stride=3,
                quiet=True, device="cpu")
    np.testing.assert_allclose(np.stack(emb["embedding"].dropna().to_numpy()),
                               np.delete(ref, 4, axis=0), atol=1e-5)


def test_partitioned_zeroshot_nli_chunks_equal_one_frame(tiny_roberta_nli_dir, tmp_path,
                                                          capsys):
    from quantformer.cli.main import main
    from quantformer.scale.dask import zeroshot_partitions

    f = _long(8).drop(columns="label")
    (tmp_path / "in").mkdir()
    f.iloc[:4].to_parquet(tmp_path / "in" / "a.parquet", index=False)
    f.iloc[4:].to_parquet(tmp_path / "in" / "b.parquet", index=False)
    kw = {"model": str(tiny_roberta_nli_dir), "truncation": "chunks", "max_length": 40,
          "stride": 5, "aggregate": "max", "quiet": True, "device": "cpu"}
    zeroshot_partitions(str(tmp_path / "in"), tmp_path / "out", ["economy", "war"], **kw)
    got = pd.concat([pd.read_parquet(tmp_path / "out" / n) for n in ("a.parquet", "b.parquet")],
                    ignore_index=True)
    want = zeroshot(f, ["economy", "war"], **kw)
    np.testing.assert_allclose(got["prob_war"], want["prob_war"], atol=1e-6)
    # one file of windows does not go with a folder of partitions
    code = main(["zeroshot", "--input", str(tmp_path / "in"), "--out", str(tmp_path / "o2"),
                 "--labels", "economy,war", "--truncation", "chunks", "--chunks-out",
                 str(tmp_path / "w.parquet"), "--quiet"])
    assert code == 2 and "--chunks-out is not supported with a partitioned --input" in \
        capsys.readouterr().err
    assert not (tmp_path / "o2").exists()


def test_predict_file_warns_once_for_the_corpus_of_windows_over_max_chunks(chunk_model,
                                                                            tmp_path):
    f = _long(5).drop(columns="label")
    f.loc[2, "text"] = "short"
    f.to_csv(tmp_path / "in.csv", index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predict_file(chunk_model, tmp_path / "in.csv", tmp_path / "out.csv", quiet=True,
                     device="cpu", precision="fp32", chunk_rows=2,
                     chunking={"max_chunks": 1})
    # three chunks of the file, one warning counting all five documents
    assert [str(w.message) for w in caught if issubclass(w.category, ChunkWarning)] == [
        "4 of 5 document(s) need more than max_chunks 1 windows; only their first 1 are "
        "read (the later ones are dropped)"]
    assert len(pd.read_csv(tmp_path / "out.csv")) == 5
