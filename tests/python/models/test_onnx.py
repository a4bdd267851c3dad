"""ONNX Runtime backend (issue 16): same outputs as torch, cache reuse/rebuild, no torch import.

Each export takes tens of seconds on a busy machine, so the exports are module fixtures on
copies of the tiny models (the shared session fixtures are never written into).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.models.onnx import backend as onnx_backend
from quantformer.cli.main import main
from quantformer.infer.embed import embed, load_encoder
from quantformer._core.errors import InputError
from quantformer.infer.classifier import Classifier, PredictionWarning
from quantformer.models.tokenize import encode
from quantformer.infer.zeroshot import zeroshot

#: ONNX Runtime runs fp32 (or int8): the torch references are fp32 (auto runs fp32 here)
pytestmark = pytest.mark.usefixtures("fp32_auto")

LONG = " ".join(toy_frame(40)["text"])  # far above max_length 64: head+tail truncation


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTFORMER_CACHE", str(tmp_path / "cache"))


def _copy(src: Path, root: Path, name: str) -> Path:
    dst = root / name
    shutil.copytree(src, dst)
    return dst


def _docs(n: int = 40) -> pd.DataFrame:
    f = toy_frame(n).drop(columns="label")
    f["doc_id"] = [f"z{(i * 7) % n:03d}" for i in range(n)]  # ids not in sorted order
    f.loc[[2, 11], "text"] = None
    f.loc[5, "text"] = "   "
    f.loc[[7, 9], "text"] = [LONG, "Grüße, Übermut 😀 " + LONG[::-1]]
    return f


def _classifier_dir(src: Path, root: Path) -> Path:
    from quantformer.train.finetune import finetune

    clf = finetune(toy_frame(32), model=str(src), epochs=1, lr=1e-3, quiet=True,
                   device="cpu", max_length=64)
    return clf.save(root / f"clf_{src.name}")


@pytest.fixture(scope="module", params=["tiny_bert", "tiny_roberta"])
def clf_dir(request, tmp_path_factory):
    src = request.getfixturevalue(f"{request.param}_dir")
    return _classifier_dir(src, tmp_path_factory.mktemp("onnx_clf"))


@pytest.fixture(scope="module")
def bert_copy(tiny_bert_dir, tmp_path_factory):
    return _copy(tiny_bert_dir, tmp_path_factory.mktemp("onnx_enc"), "bert")


# ------------------------------------------------------------------------------------------
# options


def test_backend_options_are_checked():
    assert onnx_backend.check_backend("onnx", "int8", "cpu") == "onnx"
    with pytest.raises(InputError, match="^quantize int8 needs backend onnx"):
        onnx_backend.check_backend("torch", "int8")
    with pytest.raises(InputError, match="runs on the CPU, not on device cuda"):
        onnx_backend.check_backend("onnx", "none", "cuda")
    with pytest.raises(InputError, match="unknown backend 'tf'"):
        onnx_backend.check_backend("tf")
    assert [onnx_backend.backend_label(*a) for a in
            [("torch", "none"), ("onnx", "none"), ("onnx", "int8")]] == [
        "torch", "onnx fp32", "onnx int8"]


def test_cache_location(tmp_path, default_model_dir):
    model = tmp_path / "m"
    model.mkdir()
    assert onnx_backend.cache_dir(str(model), str(model), "proba", "int8") == (
        model / "onnx" / "proba-int8")
    # the bundled default model (and hub ids) go to the user cache
    got = onnx_backend.cache_dir(None, str(default_model_dir), "mean_pool", "none")
    assert got.parent.parent.parent == tmp_path / "cache"
    assert got.name == "mean_pool-fp32"
    # an unwritable model folder: the user cache instead (root writes through chmod, not
    # through the immutable attribute)
    with unwritable(model):
        ro = onnx_backend.cache_dir(str(model), str(model), "proba", "none")
    assert str(ro).startswith(str(tmp_path / "cache"))


@contextlib.contextmanager
def unwritable(folder):
    """``folder`` made unwritable for this process: ``chattr +i`` as root, else mode 555."""
    root = os.geteuid() == 0
    if root:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
    try:
        with pytest.raises(OSError):
            (folder / "probe").mkdir()
        yield folder
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        else:
            folder.chmod(0o755)


def test_longformer_is_refused_clearly(tiny_longformer_dir):
    with pytest.raises(InputError, match="longformer models are not supported with backend onnx"):
        embed(["a text"], str(tiny_longformer_dir), backend="onnx", quiet=True)


# ------------------------------------------------------------------------------------------
# predict


def test_predict_onnx_equals_torch(clf_dir):
    docs = _docs()
    with pytest.warns(PredictionWarning, match="3 of 40"):
        ref = Classifier.from_dir(clf_dir, device="cpu").predict(docs)
    with pytest.warns(PredictionWarning, match="3 of 40"):
        got = Classifier.from_dir(clf_dir, backend="onnx").predict(docs)
    assert got.columns.tolist() == ref.columns.tolist() and ref.columns[-1] == "backend"
    assert set(got["backend"]) == {"onnx fp32"} and set(ref["backend"]) == {"torch"}
    assert got["doc_id"].tolist() == docs["doc_id"].tolist()
    assert got["year"].tolist() == docs["year"].tolist()
    assert got["predicted"].isna().tolist() == [i in (2, 5, 11) for i in range(40)]
    probs = ref.filter(like="prob_").to_numpy()
    np.testing.assert_allclose(got.filter(like="prob_").to_numpy(), probs, atol=1e-4)
    assert got["predicted"].fillna("-").tolist() == ref["predicted"].fillna("-").tolist()
    with pytest.warns(PredictionWarning):  # pure int8: no fp32 recheck
        q = Classifier.from_dir(clf_dir, backend="onnx", quantize="int8",
                                recheck_margin=0).predict(docs)
    assert set(q["backend"]) == {"onnx int8"}
    scored = ref["predicted"].notna()
    assert q["predicted"].notna().tolist() == scored.tolist()
    assert (q["predicted"][scored] == ref["predicted"][scored]).mean() >= 0.99
    assert np.nanmax(np.abs(q.filter(like="prob_").to_numpy() - probs)) < 0.02
    assert (clf_dir / "onnx" / "proba-fp32" / "model.onnx").is_file()


def test_int8_near_ties_are_rechecked_in_fp32(clf_dir):
    """Rows whose int8 top-two margin is under recheck_margin carry fp32's probabilities
    and the backend 'onnx fp32 recheck'; the others int8's; missing texts are not rechecked."""
    from quantformer.models.onnx.recheck import RECHECK_LABEL, near_ties

    docs = _docs()
    with pytest.warns(PredictionWarning):
        fp32 = Classifier.from_dir(clf_dir, backend="onnx").predict(docs)
    with pytest.warns(PredictionWarning):
        pure = Classifier.from_dir(clf_dir, backend="onnx", quantize="int8",
                                   recheck_margin=0).predict(docs)
    p32, p8 = fp32.filter(like="prob_").to_numpy(), pure.filter(like="prob_").to_numpy()
    scored = fp32["predicted"].notna().to_numpy()
    # a margin between the smallest and the largest int8 margin: some rows rechecked, not all
    top2 = np.sort(p8[scored], axis=1)[:, -2:]
    margin = float(np.median(top2[:, 1] - top2[:, 0]))
    with pytest.warns(PredictionWarning):
        got = Classifier.from_dir(clf_dir, backend="onnx", quantize="int8",
                                  recheck_margin=margin).predict(docs)
    again = near_ties(p8, margin)
    assert 0 < again.sum() < scored.sum()
    assert (got["backend"] == RECHECK_LABEL).tolist() == again.tolist()
    assert set(got["backend"][~again]) == {"onnx int8"}
    pg = got.filter(like="prob_").to_numpy()
    np.testing.assert_allclose(pg[again], p32[again], atol=1e-6)
    np.testing.assert_allclose(pg[~again & scored], p8[~again & scored], atol=1e-6)
    assert got["predicted"].isna().tolist() == fp32["predicted"].isna().tolist()
    # a margin of (almost) 1 rechecks every scored row: fp32's labels exactly
    with pytest.warns(PredictionWarning):
        every = Classifier.from_dir(clf_dir, backend="onnx", quantize="int8",
                                    recheck_margin=0.999999).predict(docs)
    assert (every["backend"] == RECHECK_LABEL).tolist() == scored.tolist()
    assert every["predicted"].fillna("-").tolist() == fp32["predicted"].fillna("-").tolist()
    texts = toy_frame(12)["text"]
    proba = Classifier.from_dir(clf_dir, backend="onnx", quantize="int8",
                                recheck_margin=0.999999).predict_proba(texts)
    np.testing.assert_allclose(proba, Classifier.from_dir(clf_dir, backend="onnx")
                               .predict_proba(texts), atol=1e-6)


def test_chunked_predict_file_rechecks_as_one_frame(clf_dir, tmp_path, monkeypatch):
    """Near ties in later chunks of a streamed file are rechecked row by row, as in one frame."""
    from quantformer.infer.predict import predict_file

    docs = _docs()
    monkeypatch.setattr("quantformer.models.onnx.recheck.RECHECK_MARGIN", 0.3)
    with pytest.warns(PredictionWarning):
        want = Classifier.from_dir(clf_dir, backend="onnx", quantize="int8").predict(docs)
    docs.to_parquet(tmp_path / "in.parquet", index=False)
    with pytest.warns(PredictionWarning):
        predict_file(clf_dir, tmp_path / "in.parquet", tmp_path / "out.parquet", chunk_rows=7,
                     quiet=True, backend="onnx", quantize="int8")
    got = pd.read_parquet(tmp_path / "out.parquet")
    assert got["doc_id"].tolist() == want["doc_id"].tolist()
    assert got["backend"].tolist() == want["backend"].tolist()
    assert "onnx fp32 recheck" in set(want["backend"][7:])  # a near tie after the first chunk
    np.testing.assert_allclose(got.filter(like="prob_").to_numpy(),
                               want.filter(like="prob_").to_numpy(), atol=1e-6)


@pytest.mark.parametrize("margin", [-0.1, 1, 1.5, "0.1", True, float("nan")])
def test_recheck_margin_is_checked(clf_dir, margin):
    with pytest.raises(InputError, match="recheck_margin must be a number from 0"):
        Classifier.from_dir(clf_dir, backend="onnx", quantize="int8", recheck_margin=margin)


def test_recheck_margin_needs_int8(clf_dir):
    for kw in ({"backend": "onnx"}, {}):
        with pytest.raises(InputError, match="recheck_margin applies to quantize='int8' only"):
            Classifier.from_dir(clf_dir, recheck_margin=0.1, **kw)


def test_near_ties():
    from quantformer.models.onnx.recheck import near_ties

    p = np.array([[0.5, 0.49, 0.01], [0.9, 0.05, 0.05], [np.nan] * 3, [0.3, 0.3, 0.4]])
    assert near_ties(p, 0.05).tolist() == [True, False, False, False]
    assert near_ties(p, 0.11).tolist() == [True, False, False, True]
    assert near_ties(p, 0).tolist() == [False] * 4


def test_rust_tokenizer_gives_the_hugging_face_ids(clf_dir):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(clf_dir))
    rust = Classifier.from_dir(clf_dir, backend="onnx").tokenizer
    texts = _docs()["text"].tolist() + ["  leading spaces", "tab\there", "a\nnew line", "ß"]
    for kw in ({}, {"pairs": ["This text is about {}."] * len(texts)}):
        a = encode(hf, texts, max_length=64, **kw)
        b = encode(rust, texts, max_length=64, **kw)
        assert a.input_ids == b.input_ids
        assert a.token_type_ids == b.token_type_ids
        assert a.truncated.tolist() == b.truncated.tolist() and a.truncated.any()


def test_cli_predict_onnx_int8(clf_dir, tmp_path, monkeypatch):
    toy_frame(12).to_csv(tmp_path / "in.csv", index=False)
    out = tmp_path / "out.csv"
    rc = main(["predict", "--model", str(clf_dir), "--input", str(tmp_path / "in.csv"),
               "--out", str(out), "--backend", "onnx", "--quantize", "int8", "--quiet"])
    assert rc == 0
    got = pd.read_csv(out)
    assert set(got["backend"]) <= {"onnx int8", "onnx fp32 recheck"} and len(got) == 12
    assert got["doc_id"].tolist() == toy_frame(12)["doc_id"].tolist()
    # the CLI rechecks: with a margin of almost 1, every row comes from fp32
    monkeypatch.setattr("quantformer.models.onnx.recheck.RECHECK_MARGIN", 0.999999)
    rc = main(["predict", "--model", str(clf_dir), "--input", str(tmp_path / "in.csv"),
               "--out", str(tmp_path / "all.csv"), "--backend", "onnx", "--quantize", "int8",
               "--quiet"])
    assert rc == 0
    assert pd.read_csv(tmp_path / "all.csv")["backend"].tolist() == ["onnx fp32 recheck"] * 12
    bad = main(["predict", "--model", str(clf_dir), "--input", str(tmp_path / "in.csv"),
                "--out", str(tmp_path / "b.csv"), "--quantize", "int8"])
    assert bad == 2 and not (tmp_path / "b.csv").exists()


def test_no_torch_import_when_the_export_exists(clf_dir, tmp_path):
    Classifier.from_dir(clf_dir, backend="onnx")  # make sure the export exists
    code = (
        "import sys, quantformer\n"
        f"out = quantformer.predict({str(clf_dir)!r}, ['a text about taxes', 'jobs'], "
        "backend='onnx')\n"
        "print(out['predicted'].notna().sum(), 'torch' in sys.modules, "
        "'transformers' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["2", "False", "False"]


# ------------------------------------------------------------------------------------------
# embeddings and zero-shot


def test_embed_onnx_equals_torch(bert_copy):
    docs = _docs(12)
    with pytest.warns(UserWarning, match="3 of 12"):
        ref = embed(docs, str(bert_copy), max_length=64, device="cpu", quiet=True)
    with pytest.warns(UserWarning, match="3 of 12"):
        got = embed(docs, str(bert_copy), max_length=64, backend="onnx", quiet=True)
    assert got.shape == ref.shape == (12, 32)
    assert np.isnan(got[[2, 5, 11]]).all()
    np.testing.assert_allclose(got, ref, atol=1e-4)
    with pytest.warns(UserWarning):
        q = embed(docs, str(bert_copy), max_length=64, backend="onnx", quantize="int8",
                  quiet=True)
    ok = ~np.isnan(ref).any(axis=1)
    cos = (q[ok] * ref[ok]).sum(1) / np.linalg.norm(q[ok], axis=1) / np.linalg.norm(ref[ok],
                                                                                    axis=1)
    assert cos.min() > 0.99


def test_zeroshot_embedding_onnx_equals_torch(bert_copy):
    docs = toy_frame(10)
    kw = dict(model=str(bert_copy), method="embedding", quiet=True, max_length=64)
    ref = zeroshot(docs, "taxes,schools,war", device="cpu", **kw)
    got = zeroshot(docs, "taxes,schools,war", backend="onnx", **kw)
    assert got.columns.tolist() == ref.columns.tolist() and ref.columns[-1] == "backend"
    assert set(ref["backend"]) == {"torch"} and set(got["backend"]) == {"onnx fp32"}
    np.testing.assert_allclose(got.filter(like="prob_").to_numpy(),
                               ref.filter(like="prob_").to_numpy(), atol=1e-4)
    assert got.attrs["quantformer"]["backend"] == "onnx fp32"


def test_zeroshot_nli_onnx_equals_torch(tiny_roberta_nli_dir, tmp_path):
    nli = _copy(tiny_roberta_nli_dir, tmp_path, "nli")
    docs = toy_frame(8)
    docs.loc[3, "text"] = LONG
    kw = dict(model=str(nli), method="nli", quiet=True, max_length=64)
    for multi in (False, True):
        ref = zeroshot(docs, "taxes,schools", device="cpu", multi_label=multi, **kw)
        got = zeroshot(docs, "taxes,schools", backend="onnx", multi_label=multi, **kw)
        np.testing.assert_allclose(got.filter(like="prob_").to_numpy(),
                                   ref.filter(like="prob_").to_numpy(), atol=1e-4)
        assert got["predicted"].tolist() == ref["predicted"].tolist()


def test_cli_zeroshot_and_embed_name_the_backend(bert_copy, tmp_path, capsys):
    toy_frame(6).to_csv(tmp_path / "in.csv", index=False)
    rc = main(["zeroshot", "--input", str(tmp_path / "in.csv"), "--labels", "taxes,war",
               "--model", str(bert_copy), "--method", "embedding", "--max-length", "64",
               "--backend", "onnx", "--quiet", "--out", str(tmp_path / "zs.csv")])
    assert rc == 0 and "; backend onnx fp32" in capsys.readouterr().out
    assert pd.read_csv(tmp_path / "zs.csv")["backend"].tolist() == ["onnx fp32"] * 6
    rc = main(["embed", "--input", str(tmp_path / "in.csv"), "--model", str(bert_copy),
               "--max-length", "64", "--backend", "onnx", "--quantize", "int8", "--quiet",
               "--out", str(tmp_path / "emb.csv")])
    got = pd.read_csv(tmp_path / "emb.csv")
    assert rc == 0
    assert got.columns.tolist()[:5] == ["doc_id", "label", "year", "backend", "dim_1"]
    assert got["backend"].tolist() == ["onnx int8"] * 6


# ------------------------------------------------------------------------------------------
# the cache


def _never(path):  # a loader that fails: the cached export must be used
    raise AssertionError("the export was rebuilt although the cache is valid")


def test_cache_reused_and_damaged_export_rebuilt(bert_copy):
    from quantformer.infer.embed import _pool

    load_encoder(str(bert_copy), backend="onnx", quantize="int8")  # fp32 + int8 in the cache
    int8 = bert_copy / "onnx" / "mean_pool-int8"
    stamp = (int8 / "manifest.json").stat().st_mtime_ns
    onnx_backend.open_model(str(bert_copy), use="mean_pool", fn=_pool, loader=_never,
                            quantize="int8")
    assert (int8 / "manifest.json").stat().st_mtime_ns == stamp  # reused
    data = bytearray((int8 / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF  # flip one byte in the weights
    (int8 / "model.onnx").write_bytes(bytes(data))
    key, _ = onnx_backend.cache_key(str(bert_copy), "mean_pool", "int8")
    assert not onnx_backend.is_valid(int8, key)
    net = onnx_backend.open_model(str(bert_copy), use="mean_pool", fn=_pool, loader=_never,
                                  quantize="int8")  # rebuilt from the (valid) fp32 export
    assert onnx_backend.is_valid(int8, key) and net.label == "onnx int8"
    (int8 / "manifest.json").write_text("{not json")
    onnx_backend.open_model(str(bert_copy), use="mean_pool", fn=_pool, loader=_never,
                            quantize="int8")
    assert json.loads((int8 / "manifest.json").read_text())["key"] == key
    assert not [p for p in int8.parent.iterdir() if p.name.startswith(".")]  # no leftovers


def test_int8_settings_enter_the_key_and_an_old_int8_cache_is_rebuilt(bert_copy, monkeypatch):
    import onnx

    from quantformer.infer.embed import _pool

    def int8_matmuls(folder):
        return sum(n.op_type == "MatMulInteger"
                   for n in onnx.load(str(folder / "model.onnx")).graph.node)

    key, parts = onnx_backend.cache_key(str(bert_copy), "mean_pool", "int8")
    assert parts["int8_settings"] == onnx_backend.INT8_SETTINGS
    fp32_key = onnx_backend.cache_key(str(bert_copy), "mean_pool", "none")[0]
    net = load_encoder(str(bert_copy), backend="onnx", quantize="int8").model
    # int8 of the fused graph: q, k, v are inside the fp32 Attention node; layer 2's attention
    # output, FFN in and FFN out are int8, layer 1's stay fp32
    assert int8_matmuls(net.folder) == 3
    fp32_model = net.folder.parent / "mean_pool-fp32" / "model.onnx"
    assert len(onnx_backend.first_layer_matmuls(fp32_model)) == 3
    fusion = json.loads((net.folder / "manifest.json").read_text())["fusion"]
    assert fusion["applied"] is True and fusion["fusions"]["attention"] == 2
    # a cache written under other settings (as before a change of them) is stale: rebuilt
    monkeypatch.setitem(onnx_backend.INT8_SETTINGS, "first_layer_fp32", False)
    new_key = onnx_backend.cache_key(str(bert_copy), "mean_pool", "int8")[0]
    assert new_key != key
    assert onnx_backend.cache_key(str(bert_copy), "mean_pool", "none")[0] == fp32_key
    assert not onnx_backend.is_valid(net.folder, new_key)
    again = onnx_backend.open_model(str(bert_copy), use="mean_pool", fn=_pool, loader=_never,
                                    quantize="int8")  # from the cached fp32 export
    assert onnx_backend.is_valid(again.folder, new_key)
    assert int8_matmuls(again.folder) == 3 * 2  # now layer 1's are int8 too


def test_cache_rebuilt_when_the_weights_change(tiny_bert_dir, tmp_path):
    import torch
    from transformers import AutoModel

    model = _copy(tiny_bert_dir, tmp_path, "bert")
    docs = ["taxes and jobs", "schools and roads, hospitals"]
    before = embed(docs, str(model), backend="onnx", quiet=True)
    net = AutoModel.from_pretrained(str(model))
    with torch.no_grad():
        net.embeddings.word_embeddings.weight.mul_(3.0)
    net.save_pretrained(str(model))
    ref = embed(docs, str(model), device="cpu", quiet=True)
    after = embed(docs, str(model), backend="onnx", quiet=True)
    assert np.abs(after - before).max() > 1e-2  # the weights changed the vectors ...
    np.testing.assert_allclose(after, ref, atol=1e-4)  # ... and the export followed them


def _op_types(path: Path) -> set[str]:
    import onnx

    return {n.op_type for n in onnx.load(str(path)).graph.node}


def test_fp32_export_is_fused(bert_copy, tmp_path, monkeypatch):
    enc = load_encoder(str(bert_copy), backend="onnx")
    folder = enc.model.folder
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["fusion"]["applied"] is True and manifest["fuse"] is True
    assert manifest["fusion"]["fusions"]["attention"] == 2  # one per layer of the tiny BERT
    assert manifest["fusion"]["max_abs_diff"] <= 1e-4
    assert {"Attention", "SkipLayerNormalization"} <= _op_types(folder / "model.onnx")
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "model.onnx",
                                                        "tokenizer.json"]
    # FUSE (the benchmarks' switch) is part of the key: the unfused export is another one
    model = _copy(bert_copy, tmp_path, "bert_unfused")
    shutil.rmtree(model / "onnx", ignore_errors=True)
    key = onnx_backend.cache_key(str(model), "mean_pool", "none")[0]
    monkeypatch.setattr(onnx_backend, "FUSE", False)
    assert onnx_backend.cache_key(str(model), "mean_pool", "none")[0] != key
    unfused = load_encoder(str(model), backend="onnx").model.folder
    assert "Attention" not in _op_types(unfused / "model.onnx")
    assert len(onnx_backend.first_layer_matmuls(unfused / "model.onnx")) == 6  # + q, k, v
    assert "turned off" in json.loads((unfused / "manifest.json").read_text())["fusion"]["reason"]


def test_a_fusion_that_changes_the_outputs_is_refused(tiny_bert_dir, tmp_path, monkeypatch):
    from quantformer.models.onnx import fusion as onnx_fusion

    model = _copy(tiny_bert_dir, tmp_path, "bert")
    docs = ["taxes and jobs", "schools and roads, hospitals", None]
    ref = embed(docs, str(model), device="cpu", quiet=True)
    monkeypatch.setattr(onnx_fusion, "TOLERANCE", -1.0)  # every difference is too large
    got = embed(docs, str(model), backend="onnx", quiet=True)
    folder = model / "onnx" / "mean_pool-fp32"
    fusion = json.loads((folder / "manifest.json").read_text())["fusion"]
    assert fusion["applied"] is False and "differed by" in fusion["reason"]
    assert not (folder / "unfused-model.onnx").exists()
    assert "Attention" not in _op_types(folder / "model.onnx")  # the unfused graph is used
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]
    np.testing.assert_allclose(got, ref, atol=1e-4)
