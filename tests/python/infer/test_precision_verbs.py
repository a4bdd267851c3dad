"""Numeric precision on the verbs besides predict (issue 37): zeroshot (NLI and embedding),
embed, explain, suggest, the coding room's learner and the worker. bf16 against fp32 on tiny
models: top-1 agreement (with the fp32 recheck of near ties), cosine similarity of
embeddings, attribution agreement; the precision and its reason recorded; bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from toydata import toy_frame

from quantformer._core.errors import InputError
from quantformer.cli import main as cli
from quantformer.infer.embed import embed
from quantformer.audit.explain import AUTO_REASON, explain
from quantformer.infer.zeroshot import zeroshot
from quantformer.label.suggest import suggest_round
from quantformer.models import precision as prec
from quantformer.models.onnx.recheck import near_ties

LABELS = ["in favor of", "neutral toward", "against"]
TEMPLATE = "The text is {} legalization of abortion."


def _docs(n=40) -> pd.DataFrame:
    return toy_frame(n).drop(columns="label")


def _probs(res, labels=LABELS) -> np.ndarray:
    return res[[f"prob_{x}" for x in labels]].to_numpy()


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


# ------------------------------------------------------------------------------------------
# embed


@pytest.mark.parametrize("fixture,least", [("tiny_bert_dir", 0.99), ("tiny_roberta_dir", 0.99),
                                           ("default_model_dir", 0.9999)])
def test_embed_bf16_vectors_keep_fp32_direction(request, fixture, least):
    """Cosine similarity of bf16 and fp32 embeddings of 40 toy documents: tiny random models,
    and the bundled all-MiniLM-L6-v2 (measured: at least 0.99997)."""
    model = str(request.getfixturevalue(fixture))
    docs = _docs()
    v32 = embed(docs, model, device="cpu", quiet=True, precision="fp32")
    v16 = embed(docs, model, device="cpu", quiet=True, precision="bf16")
    cos = _cosines(v16.astype(np.float64), v32.astype(np.float64))
    assert not np.array_equal(v16, v32)  # bf16 did run
    assert cos.min() > least, cos.min()


def test_cli_embed_records_the_precision(tiny_bert_dir, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    _docs(6).to_parquet(src)
    out = tmp_path / "e.parquet"
    base = ["embed", "--input", str(src), "--out", str(out), "--model", str(tiny_bert_dir),
            "--device", "cpu", "--quiet"]
    assert cli.main([*base, "--precision", "fp32"]) == 0
    assert "precision: fp32 (fp32 asked for)" in capsys.readouterr().out
    assert set(pd.read_parquet(out)["backend"]) == {"torch"}
    assert cli.main([*base, "--precision", "bf16"]) == 0
    assert "precision: bf16 (bf16 asked for; " in capsys.readouterr().out
    assert set(pd.read_parquet(out)["backend"]) == {"torch bf16"}
    assert cli.main([*base, "--precision", "bf16", "--backend", "onnx"]) == 2
    err = capsys.readouterr().err
    assert "--precision bf16 applies to the torch backend" in err and "--quantize" in err


def test_partitioned_embed_runs_in_the_precision_asked(tiny_bert_dir, tmp_path):
    from quantformer.scale.dask import embed_partitions

    parts = tmp_path / "parts"
    parts.mkdir()
    _docs(6).iloc[:3].to_parquet(parts / "a.parquet")
    _docs(6).iloc[3:].to_parquet(parts / "b.parquet")
    embed_partitions(parts, tmp_path / "out", str(tiny_bert_dir), device="cpu", quiet=True,
                     precision="bf16")
    got = pd.concat([pd.read_parquet(f) for f in sorted((tmp_path / "out").glob("*.parquet"))])
    assert set(got["backend"]) == {"torch bf16"} and len(got) == 6


# ------------------------------------------------------------------------------------------
# zeroshot


def _zeroshot_runs(monkeypatch, model: str, docs, method: str, margin: float = 0.05):
    """(fp32 result, pure bf16 result, bf16 with the recheck at ``margin``)."""
    kw = dict(model=model, method=method, device="cpu", quiet=True)
    ref = zeroshot(docs, LABELS, TEMPLATE, precision="fp32", **kw)
    monkeypatch.setattr(prec, "BF16_RECHECK_MARGIN", 0.0)
    raw = zeroshot(docs, LABELS, TEMPLATE, precision="bf16", **kw)
    monkeypatch.setattr(prec, "BF16_RECHECK_MARGIN", margin)
    got = zeroshot(docs, LABELS, TEMPLATE, precision="bf16", **kw)
    return ref, raw, got


def _middle_margin(p: np.ndarray) -> float:
    """A margin between two observed top-two margins: some rows on each side."""
    top2 = np.sort(p, axis=1)[:, -2:]
    distinct = np.unique(np.round(top2[:, 1] - top2[:, 0], 9))
    mid = len(distinct) // 2
    return float((distinct[mid - 1] + distinct[mid]) / 2)


def _assert_ties_rechecked(ref, raw, got, margin: float) -> np.ndarray:
    """The rows of ``raw`` (pure bf16) within ``margin`` of a tie are ``ref``'s (fp32) in
    ``got`` (bf16 with the recheck) and marked so; the others are ``raw``'s; ``got``'s labels
    are all ``ref``'s. Returns the mask of those rows."""
    p_ref, p_raw, p_got = _probs(ref), _probs(raw), _probs(got)
    ties = near_ties(p_raw, margin)
    assert 0 < ties.sum() < len(ties)
    assert got["backend"].tolist() == np.where(ties, "torch fp32 recheck",
                                               "torch bf16").tolist()
    np.testing.assert_allclose(p_got[ties], p_ref[ties], atol=1e-6)  # computed in fp32
    np.testing.assert_array_equal(p_got[~ties], p_raw[~ties])
    assert got["predicted"].tolist() == ref["predicted"].tolist()  # top-1 agreement 100 %
    return ties


@pytest.mark.parametrize("fixture", ["tiny_bart_nli_dir", "tiny_roberta_nli_dir"])
def test_zeroshot_nli_bf16_rechecks_near_ties_in_fp32(request, fixture, monkeypatch):
    model = str(request.getfixturevalue(fixture))
    docs = _docs()
    ref, raw, _ = _zeroshot_runs(monkeypatch, model, docs, "nli")
    assert set(raw["backend"]) == {"torch bf16"}
    p_ref, p_raw = _probs(ref), _probs(raw)
    assert 0 < np.abs(p_raw - p_ref).max() < 0.05
    margin = _middle_margin(p_raw)
    _, _, got = _zeroshot_runs(monkeypatch, model, docs, "nli", margin)
    ties = _assert_ties_rechecked(ref, raw, got, margin)
    meta = got.attrs["quantformer"]
    assert meta["precision"]["precision"] == "bf16" and meta["n_rechecked"] == ties.sum()
    assert ref.attrs["quantformer"]["precision"] == {"precision": "fp32", "requested": "fp32",
                                                     "reason": "fp32 asked for"}


def test_zeroshot_embedding_bf16_rechecks_near_ties_in_fp32(tiny_bert_dir, monkeypatch):
    docs = _docs()
    ref, raw, got = _zeroshot_runs(monkeypatch, str(tiny_bert_dir), docs, "embedding")
    assert set(raw["backend"]) == {"torch bf16"}
    p_ref, p_raw = _probs(ref), _probs(raw)
    assert np.abs(p_raw - p_ref).max() > 0
    ties = near_ties(p_raw, 0.05)
    assert got["backend"].tolist() == np.where(ties, "torch fp32 recheck",
                                               "torch bf16").tolist()
    # the documents rechecked get fp32 similarities; the others keep bf16's
    agree = (got["predicted"] == ref["predicted"]).mean()
    assert agree >= (raw["predicted"] == ref["predicted"]).mean() and agree >= 0.95


def test_zeroshot_auto_follows_the_decision_and_multilabel_stays_fp32(tiny_bart_nli_dir):
    docs = _docs(6)
    res = zeroshot(docs, LABELS, TEMPLATE, model=str(tiny_bart_nli_dir), device="cpu",
                   quiet=True)
    want = prec.choose_precision("auto", "cpu")
    assert res.attrs["quantformer"]["precision"]["precision"] == want.name
    assert res.attrs["quantformer"]["precision"]["reason"] == want.reason
    multi = zeroshot(docs, LABELS, TEMPLATE, model=str(tiny_bart_nli_dir), device="cpu",
                     quiet=True, multi_label=True)
    assert set(multi["backend"]) == {"torch"}
    assert multi.attrs["quantformer"]["precision"]["reason"] == (
        "fp32 for multi-label scoring (no near-tie recheck)")
    with pytest.raises(InputError) as e:
        zeroshot(docs, LABELS, TEMPLATE, model=str(tiny_bart_nli_dir), device="cpu",
                 multi_label=True, precision="bf16")
    assert e.value.args[0] == ("{precision} bf16 with {multi_label} has no fp32 recheck: use "
                               "auto or fp32")
    assert tuple(e.value.params) == ("precision", "multi_label")
    with pytest.raises(InputError, match="bf16 applies to the torch backend"):
        zeroshot(docs, LABELS, TEMPLATE, model=str(tiny_bart_nli_dir), backend="onnx",
                 precision="bf16")
    with pytest.raises(InputError, match="must be one of auto, fp32, bf16"):
        zeroshot(docs, LABELS, TEMPLATE, model=str(tiny_bart_nli_dir), precision="half")


def test_cli_zeroshot_prints_the_precision(tiny_roberta_nli_dir, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    _docs(5).to_parquet(src)
    out = tmp_path / "z.parquet"
    assert cli.main(["zeroshot", "--input", str(src), "--labels", ",".join(LABELS),
                     "--model", str(tiny_roberta_nli_dir), "--device", "cpu", "--quiet",
                     "--precision", "bf16", "--out", str(out)]) == 0
    assert "precision: bf16 (bf16 asked for; " in capsys.readouterr().out
    assert set(pd.read_parquet(out)["backend"]) <= {"torch bf16", "torch fp32 recheck"}
    assert cli.main(["zeroshot", "--input", str(src), "--labels", ",".join(LABELS),
                     "--model", str(tiny_roberta_nli_dir), "--device", "cpu", "--quiet",
                     "--precision", "bf16", "--multi-label", "--out",
                     str(tmp_path / "m.parquet")]) == 2
    assert ("zeroshot: error: --precision bf16 with --multi-label has no fp32 recheck: use "
            "auto or fp32") in capsys.readouterr().err
    assert not (tmp_path / "m.parquet").exists()


# ------------------------------------------------------------------------------------------
# explain


def test_explain_auto_keeps_fp32_and_bf16_attributions_agree(toy_model_dir):
    docs = toy_frame(8).drop(columns="label")
    auto = explain(str(toy_model_dir), docs, device="cpu", steps=16)
    assert auto.precision == {"precision": "fp32", "requested": "auto", "reason": AUTO_REASON}
    assert set(auto.words["backend"]) == {"torch"} == set(auto.documents["backend"])
    bf = explain(str(toy_model_dir), docs, device="cpu", steps=16, precision="bf16")
    assert bf.precision["precision"] == "bf16"
    assert set(bf.words["backend"]) == {"torch bf16"}
    assert (bf.documents["target"] == auto.documents["target"]).all()
    rhos = []
    for doc in auto.documents["doc_id"]:
        a = auto.words.loc[auto.words["doc_id"] == doc, "attribution"].to_numpy()
        b = bf.words.loc[bf.words["doc_id"] == doc, "attribution"].to_numpy()
        assert not np.array_equal(a, b)  # bf16 did run
        rhos.append(spearmanr(a, b)[0])
    assert min(rhos) > 0.9, rhos
    with pytest.raises(InputError, match="must be one of auto, fp32, bf16"):
        explain(str(toy_model_dir), docs, precision="fp16")


def test_cli_explain_prints_the_precision(toy_model_dir, tmp_path, capsys):
    src = tmp_path / "in.csv"
    toy_frame(3).drop(columns="label").to_csv(src, index=False)
    out = tmp_path / "w.parquet"
    assert cli.main(["explain", "--model", str(toy_model_dir), "--input", str(src), "--out",
                     str(out), "--steps", "4", "--device", "cpu", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"precision: fp32 ({AUTO_REASON})" in printed
    # the reason names no parameter: the same words on the command line and in R
    assert ("precision: fp32 (fp32 for attributions: Integrated Gradients needs accurate "
            "gradients; bf16 on request)\n") in printed
    assert set(pd.read_parquet(out)["backend"]) == {"torch"}


# ------------------------------------------------------------------------------------------
# suggest and the coding room


def test_suggest_records_both_precisions_and_keys_the_cache_by_it(tiny_bert_dir, toy_model_dir,
                                                                  tmp_path):
    frame = toy_frame(30)
    frame.loc[frame.index % 3 != 0, "label"] = None  # both classes coded
    kw = dict(corpus_path=None, n=5, embed_model=str(tiny_bert_dir), device="cpu", quiet=True)
    src = tmp_path / "corpus.parquet"
    frame.to_parquet(src)
    kw["corpus_path"] = src
    a = suggest_round(frame, precision="fp32", **kw)
    b = suggest_round(frame, precision="bf16", model=str(toy_model_dir), **kw)
    assert a.attrs["quantformer"]["precision"] == {
        "embeddings": {"precision": "fp32", "requested": "fp32", "reason": "fp32 asked for"}}
    used = b.attrs["quantformer"]["precision"]
    assert used["embeddings"]["precision"] == "bf16" and used["model"]["precision"] == "bf16"
    assert len(list(tmp_path.glob(".corpus.parquet.quantformer-embeddings-*.npz"))) == 2
    with pytest.raises(InputError, match="must be one of auto, fp32, bf16"):
        suggest_round(frame, precision="fp16", **kw)


def test_suggest_bf16_embeddings_choose_nearly_the_same_documents(tiny_bert_dir):
    frame = toy_frame(60)
    frame.loc[frame.index % 3 != 0, "label"] = None  # both classes coded
    kw = dict(n=10, embed_model=str(tiny_bert_dir), device="cpu", quiet=True, diversity=False)
    a = suggest_round(frame, precision="fp32", **kw)
    b = suggest_round(frame, precision="bf16", **kw)
    assert set(a["strategy"]) == {"margin"} == set(b["strategy"])
    assert len(set(a["doc_id"]) & set(b["doc_id"])) >= 8  # bf16 reorders near-equal scores


def test_cli_suggest_and_code_room_record_the_precision(tiny_bert_dir, tmp_path, capsys):
    from quantformer.cli.code import open_room
    from quantformer.io.codebook import make_codebook

    frame = toy_frame(12)
    frame.loc[4:, "label"] = None
    src = tmp_path / "c.csv"
    frame.to_csv(src, index=False)
    assert cli.main(["suggest", "--input", str(src), "--n", "3", "--embed-model",
                     str(tiny_bert_dir), "--device", "cpu", "--quiet", "--precision", "bf16",
                     "--out", str(tmp_path / "s.csv")]) == 0
    assert "precision of the embeddings: bf16 (bf16 asked for; " in capsys.readouterr().out
    args = cli.build_parser().parse_args(
        ["code", "--input", str(src), "--labels", "a,b", "--project",
         str(tmp_path / "p.sqlite"), "--embed-model", str(tiny_bert_dir), "--device", "cpu",
         "--no-browser", "--precision", "fp32"])
    room, store = open_room(args, make_codebook("a,b", None))
    try:
        want = {"precision": "fp32", "requested": "fp32", "reason": "fp32 asked for"}
        assert store.get("precision") == want == room.model_state()["precision"]
    finally:
        room.stopping = True
        store.close()
    assert "precision of the embeddings: fp32" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# precision with documents read in windows (truncation="chunks")


def _long_docs(n: int) -> pd.DataFrame:
    f = _docs(n)
    f["text"] = [" ".join([t] * 6) for t in f["text"]]  # several windows per document
    return f


def test_zeroshot_nli_chunks_bf16_rechecks_near_ties_through_the_windows(tiny_roberta_nli_dir,
                                                                          monkeypatch, tmp_path):
    """bf16 with chunks: near-tie documents are read again in fp32 through the same windows,
    so their probabilities (and their windows' rows) equal the fp32 run's."""
    docs = _long_docs(16)
    kw = dict(model=str(tiny_roberta_nli_dir), method="nli", device="cpu", quiet=True,
              truncation="chunks", max_length=40, stride=5)

    def run(precision, name, margin):
        monkeypatch.setattr(prec, "BF16_RECHECK_MARGIN", margin)
        out = tmp_path / f"{name}.parquet"
        res = zeroshot(docs, LABELS, TEMPLATE, precision=precision, chunks_out=str(out), **kw)
        return res, pd.read_parquet(out)

    ref, ref_win = run("fp32", "ref", 0.05)
    raw, raw_win = run("bf16", "raw", 0.0)
    assert set(raw["backend"]) == {"torch bf16"}
    p_ref, p_raw = _probs(ref), _probs(raw)
    assert 0 < np.abs(p_raw - p_ref).max() < 0.05
    margin = _middle_margin(p_raw)
    got, got_win = run("bf16", "got", margin)
    ties = _assert_ties_rechecked(ref, raw, got, margin)  # windows read again in fp32
    again = got_win["doc_id"].isin(docs["doc_id"][ties]).to_numpy()
    assert len(got_win) == len(ref_win) == got.attrs["quantformer"]["n_windows"]
    np.testing.assert_allclose(_probs(got_win)[again], _probs(ref_win)[again], atol=1e-6)
    np.testing.assert_array_equal(_probs(got_win)[~again], _probs(raw_win)[~again])
    assert got.attrs["quantformer"]["n_rechecked"] == ties.sum()


def test_zeroshot_embedding_chunks_bf16_rechecks_in_fp32(tiny_bert_dir, monkeypatch):
    docs = _long_docs(30)
    kw = dict(model=str(tiny_bert_dir), method="embedding", device="cpu", quiet=True,
              truncation="chunks", max_length=16, stride=3)
    ref = zeroshot(docs, LABELS, TEMPLATE, precision="fp32", **kw)
    monkeypatch.setattr(prec, "BF16_RECHECK_MARGIN", 0.0)
    raw = zeroshot(docs, LABELS, TEMPLATE, precision="bf16", **kw)
    assert set(raw["backend"]) == {"torch bf16"}
    assert np.abs(_probs(raw) - _probs(ref)).max() > 0  # bf16 did run in the windows
    monkeypatch.setattr(prec, "BF16_RECHECK_MARGIN", 1.0)  # every document read again
    got = zeroshot(docs, LABELS, TEMPLATE, precision="bf16", **kw)
    assert set(got["backend"]) == {"torch fp32 recheck"}
    np.testing.assert_allclose(_probs(got), _probs(ref), atol=1e-6)


def test_embed_chunks_bf16_vectors_keep_fp32_direction(tiny_bert_dir):
    docs = _long_docs(20)
    kw = dict(device="cpu", quiet=True, truncation="chunks", max_length=16, stride=3)
    v32 = embed(docs, str(tiny_bert_dir), precision="fp32", **kw)
    v16 = embed(docs, str(tiny_bert_dir), precision="bf16", **kw)
    assert not np.array_equal(v16, v32)  # bf16 did run in the windows
    assert _cosines(v16.astype(np.float64), v32.astype(np.float64)).min() >= 0.99


def test_explain_chunks_runs_every_window_in_the_precision_asked(tiny_bert_dir):
    from quantformer.train.finetune import finetune

    clf = finetune(toy_frame(12).assign(text=lambda f: [" ".join([t] * 6) for t in f["text"]]),
                   model=str(tiny_bert_dir), epochs=1, quiet=True, device="cpu",
                   max_length=24, truncation="chunks", stride=4, precision="fp32")
    docs = _long_docs(4)
    auto = explain(clf, docs, steps=8)
    bf = explain(clf, docs, steps=8, precision="bf16")
    assert "n_windows" in bf.documents and (bf.documents["n_windows"] > 1).all()
    assert set(auto.words["backend"]) == {"torch"} and auto.precision["reason"] == AUTO_REASON
    assert set(bf.words["backend"]) == {"torch bf16"} == set(bf.documents["backend"])
    assert bf.precision["precision"] == "bf16"
    assert (bf.documents["target"] == auto.documents["target"]).all()
    a, b = auto.words["attribution"].to_numpy(), bf.words["attribution"].to_numpy()
    assert not np.array_equal(a, b)  # bf16 did run in the windows
    assert spearmanr(a, b)[0] > 0.9


# ------------------------------------------------------------------------------------------
# the record beside every output names the precision used (resolved, never "auto")


def _expected(verb: str, asked: str) -> str:
    """The precision a verb runs in on this machine for ``asked``: ``auto`` is fp32 for
    explain, else the hardware's choice (bf16 on a CPU with AMX or AVX-512 BF16)."""
    if verb == "explain" and asked == "auto":
        return "fp32"
    return prec.choose_precision(asked, "cpu").name


def _verb_args(verb: str, models: dict, src, out) -> list:
    common = ["--input", str(src), "--out", str(out), "--device", "cpu", "--quiet"]
    return {"predict": ["predict", "--model", str(models["classifier"]), *common],
            "zeroshot": ["zeroshot", "--labels", ",".join(LABELS), "--model",
                         str(models["nli"]), *common],
            "embed": ["embed", "--model", str(models["encoder"]), *common],
            "explain": ["explain", "--model", str(models["classifier"]), "--steps", "4",
                        *common]}[verb]


@pytest.mark.parametrize("asked", ["auto", "fp32", "bf16"])
def test_every_verb_records_the_precision_it_used(toy_model_dir, tiny_bert_dir,
                                                  tiny_roberta_nli_dir, tmp_path, capsys,
                                                  asked):
    """predict, zeroshot, embed and explain write ``OUT.json`` beside their output: its
    ``precision`` is the precision the run used (resolved: bf16 or fp32, never auto), the one
    the CLI printed and the one the output's ``backend`` column names."""
    import json

    from quantformer.io.writing import output_record_path

    models = {"classifier": toy_model_dir, "nli": tiny_roberta_nli_dir,
              "encoder": tiny_bert_dir}
    src = tmp_path / "in.parquet"
    _docs(6).to_parquet(src)
    for verb in ("predict", "zeroshot", "embed", "explain"):
        out = tmp_path / f"{verb}.parquet"
        assert cli.main([*_verb_args(verb, models, src, out), "--precision", asked]) == 0
        printed = capsys.readouterr().out
        record = json.loads(output_record_path(out).read_text())
        want = _expected(verb, asked)
        assert output_record_path(out).name == f"{verb}.parquet.json"
        assert record["verb"] == verb and record["input"] == str(src)
        assert record["precision"]["precision"] == want, verb
        assert record["precision"]["requested"] == asked, verb
        assert f"precision: {want} ({record['precision']['reason']})" in printed, verb
        backends = set(pd.read_parquet(out)["backend"])
        assert backends <= ({"torch"} if want == "fp32"
                            else {"torch bf16", "torch fp32 recheck"}), (verb, backends)


def test_every_partitioned_verb_records_the_precision_per_partition(toy_model_dir,
                                                                     tiny_bert_dir, tmp_path):
    """Partitioned runs: every partition's entry in ``manifest.json`` has the precision its
    worker used (a cluster may mix machines), while the job's options keep what was asked."""
    import json
    import warnings

    from quantformer.scale.dask import embed_partitions, predict_partitions, zeroshot_partitions
    from quantformer.scale.explain import explain_partitions

    parts = tmp_path / "parts"
    parts.mkdir()
    _docs(6).iloc[:3].to_parquet(parts / "a.parquet")
    _docs(6).iloc[3:].to_parquet(parts / "b.parquet")
    kw = {"device": "cpu", "quiet": True, "precision": "auto"}
    runs = {"predict": lambda o: predict_partitions(toy_model_dir, parts, o, **kw),
            "embed": lambda o: embed_partitions(parts, o, str(tiny_bert_dir), **kw),
            "zeroshot": lambda o: zeroshot_partitions(parts, o, LABELS, model=str(tiny_bert_dir),
                                                      calibration="none", **kw),
            "explain": lambda o: explain_partitions(toy_model_dir, parts, o, steps=4, **kw)}
    for verb, run in runs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the toy corpus' counts, not this test's subject
            run(tmp_path / verb)
        manifest = json.loads((tmp_path / verb / "manifest.json").read_text())
        assert manifest["job"]["options"]["precision"] == "auto"
        used = [e["precision"] for e in manifest["partitions"].values()]
        assert len(used) == 2 and all(u["precision"] == _expected(verb, "auto") for u in used)
        assert all(u["requested"] == "auto" for u in used), verb

