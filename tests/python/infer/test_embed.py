"""Mean-pooled document embeddings: equality with sentence-transformers, shapes, CLI layouts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from quantformer.cli.main import main
from quantformer.infer.embed import embed
from quantformer._core.errors import InputError

#: fp32 references (sentence-transformers, the pipeline): auto runs fp32 here
pytestmark = pytest.mark.usefixtures("fp32_auto")

DOCS = [
    "The President spoke to the Congress about the economy, taxes and the war.",
    "We must reduce the deficit and protect the jobs of working families.",
    "Climate change is real and we have to act before it is too late!",
    "Thank you for the thoughtful reply, I learned something today.",
]


def frame(texts=DOCS) -> pd.DataFrame:
    return pd.DataFrame({"doc_id": [f"p{i}" for i in range(len(texts))], "text": texts,
                         "party": ["D", "R", "D", "R", "D", "R"][:len(texts)]})


def test_default_model_equals_sentence_transformers(default_model_dir):
    from sentence_transformers import SentenceTransformer

    vecs = embed(DOCS, normalize=True, device="cpu", quiet=True)
    assert vecs.shape == (4, 384) and vecs.dtype == np.float32
    st = SentenceTransformer(str(default_model_dir), device="cpu")
    ref = st.encode(DOCS)  # Transformer -> mean Pooling -> Normalize, max_seq_length 256
    np.testing.assert_allclose(vecs, ref, atol=1e-5)
    raw = embed(frame(), device="cpu", quiet=True)  # not normalised: same direction
    norms = np.linalg.norm(raw, axis=1)
    assert (np.abs(norms - 1) > 1e-3).all()
    np.testing.assert_allclose(raw / norms[:, None], ref, atol=1e-5)


def test_mean_pooling_and_truncation_on_tiny_bert(tiny_bert_dir):
    import torch
    from transformers import AutoModel, AutoTokenizer

    long = " ".join(DOCS * 5)
    texts = [long, "Thank you for the reply."]  # the second fits in 16 tokens
    head = embed(texts, model=str(tiny_bert_dir), max_length=16, truncation="head",
                 device="cpu", quiet=True)
    tail = embed(texts, model=str(tiny_bert_dir), max_length=16, truncation="tail",
                 device="cpu", quiet=True)
    tok = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    net = AutoModel.from_pretrained(str(tiny_bert_dir)).eval()
    with torch.no_grad():
        for i, text in enumerate(texts):
            b = tok(text, truncation=True, max_length=16, return_tensors="pt")
            ref = net(**b).last_hidden_state[0].mean(0).numpy()
            np.testing.assert_allclose(head[i], ref, atol=1e-5)
    assert not np.allclose(head[0], tail[0], atol=1e-4)  # the long document was cut
    np.testing.assert_allclose(head[1], tail[1], atol=1e-6)  # the short one was not
    # batch size and length sorting do not change the vectors
    one = embed(texts, model=str(tiny_bert_dir), max_length=16, truncation="head",
                batch_size=1, device="cpu", quiet=True)
    np.testing.assert_allclose(one, head, atol=1e-5)


def test_missing_documents_are_nan_rows_with_warning(tiny_bert_dir):
    texts = [DOCS[0], None, "  ", DOCS[1]]
    with pytest.warns(UserWarning, match=r"2 of 4 document\(s\) have missing or empty text; "
                                         "they are kept with an embedding of NaN"):
        vecs = embed(frame(texts), model=str(tiny_bert_dir), device="cpu", quiet=True)
    assert vecs.shape == (4, 32)
    assert np.isnan(vecs[[1, 2]]).all() and not np.isnan(vecs[[0, 3]]).any()
    alone = embed([DOCS[1]], model=str(tiny_bert_dir), device="cpu", quiet=True)
    np.testing.assert_allclose(vecs[3], alone[0], atol=1e-5)


def test_encoder_decoder_models_pool_their_encoder(tiny_bart_nli_dir):
    import torch
    from transformers import AutoModel, AutoTokenizer

    vecs = embed(DOCS[:2], model=str(tiny_bart_nli_dir), device="cpu", quiet=True)
    # the mean of the encoder's last hidden states over each document's own tokens
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bart_nli_dir))
    encoder = AutoModel.from_pretrained(str(tiny_bart_nli_dir)).get_encoder().eval()
    for i, doc in enumerate(DOCS[:2]):
        with torch.no_grad():
            hidden = encoder(**tokenizer(doc, return_tensors="pt")).last_hidden_state[0]
        np.testing.assert_allclose(vecs[i], hidden.mean(0).numpy(), atol=1e-5)


def test_python_api_bad_input(tiny_bert_dir):
    with pytest.raises(InputError, match="not a single string"):
        embed("just one string", model=str(tiny_bert_dir))
    with pytest.raises(InputError, match="above this model's limit of 512"):
        embed(DOCS, model=str(tiny_bert_dir), max_length=1000)
    with pytest.raises(InputError, match="unknown truncation 'middle'"):
        embed(DOCS, model=str(tiny_bert_dir), truncation="middle")


def test_cli_embed_layouts(tmp_path, tiny_bert_dir, capsys):
    from quantformer.io.frames import write_frame

    inp = tmp_path / "in.csv"
    write_frame(frame([DOCS[0], None, DOCS[2]]), inp)
    with pytest.warns(UserWarning, match="1 of 3"):
        ref = embed([DOCS[0], None, DOCS[2]], model=str(tiny_bert_dir), device="cpu",
                    quiet=True)

    pq = tmp_path / "emb.parquet"
    args = ["embed", "--input", str(inp), "--model", str(tiny_bert_dir), "--quiet",
            "--device", "cpu"]
    assert main([*args, "--out", str(pq)]) == 0
    cap = capsys.readouterr()
    assert "embedded 3 documents" in cap.out and "32 dimensions" in cap.out
    assert "1 missing or empty" in cap.out
    assert "1 of 3 document(s) have missing or empty text" in cap.err
    got = pd.read_parquet(pq)
    assert list(got.columns) == ["doc_id", "party", "backend", "embedding"]
    assert got["backend"].tolist() == ["torch"] * 3  # which backend produced them (issue 16)
    assert got["doc_id"].tolist() == ["p0", "p1", "p2"]
    assert got["embedding"].iloc[1] is None
    np.testing.assert_allclose(np.stack(got["embedding"].iloc[[0, 2]]), ref[[0, 2]], atol=1e-6)

    csv = tmp_path / "emb.csv"
    assert main([*args, "--out", str(csv), "--keep-text"]) == 0
    wide = pd.read_csv(csv)
    assert list(wide.columns[:4]) == ["doc_id", "text", "party", "backend"]
    dims = [f"dim_{j}" for j in range(1, 33)]
    assert list(wide.columns[4:]) == dims
    np.testing.assert_allclose(wide[dims].to_numpy()[[0, 2]], ref[[0, 2]], atol=1e-5)
    assert wide[dims].iloc[1].isna().all()

    rds = tmp_path / "emb.rds"
    assert main([*args, "--out", str(rds), "--normalize"]) == 0
    import pyreadr

    back = pyreadr.read_r(str(rds))[None]
    norms = np.linalg.norm(back[dims].to_numpy()[[0, 2]], axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)

    jl = tmp_path / "emb.jsonl"
    assert main([*args, "--out", str(jl), "--layout", "wide"]) == 0
    first = json.loads(jl.read_text().splitlines()[0])
    assert abs(first["dim_1"] - float(ref[0, 0])) < 1e-5


@pytest.mark.parametrize("out_name", ["emb.parquet", "emb.csv"])
def test_cli_embed_streams_in_chunks(tmp_path, tiny_bert_dir, monkeypatch, capsys, out_name):
    import quantformer.infer.embed as qe
    from quantformer.io.frames import write_frame

    texts = [DOCS[0], DOCS[1], None, "", DOCS[2], DOCS[3], DOCS[0]]
    inp = tmp_path / "in.parquet"
    write_frame(pd.DataFrame({"text": texts}), inp)
    with pytest.warns(UserWarning, match="2 of 7"):
        ref = embed(texts, model=str(tiny_bert_dir), device="cpu", quiet=True)
    monkeypatch.setattr(qe, "CHUNK_ROWS", 2)  # 4 chunks, the second all missing
    out = tmp_path / out_name
    assert main(["embed", "--input", str(inp), "--model", str(tiny_bert_dir), "--quiet",
                 "--device", "cpu", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert "embedded 7 documents" in cap.out and "2 missing or empty" in cap.out
    assert "2 of 7 document(s)" in cap.err
    if out_name.endswith(".parquet"):
        got = pd.read_parquet(out)
        assert got["doc_id"].tolist() == [f"text{i}" for i in range(1, 8)]
        assert got["embedding"].isna().tolist() == [t in (None, "") for t in texts]
        vecs = np.stack([v for v in got["embedding"] if v is not None])
    else:
        got = pd.read_csv(out)
        vecs = got[[f"dim_{j}" for j in range(1, 33)]].dropna().to_numpy()
    np.testing.assert_allclose(vecs, ref[[0, 1, 4, 5, 6]], atol=1e-5)


@pytest.mark.parametrize("extra,out_name,message", [
    (["--max-length", "4096"], "e.parquet", "above this model's limit of 512"),
    (["--max-length", "4"], "e.parquet", "at least 8"),
    ([], "e.xlsx", "is not an output format"),
    (["--layout", "list"], "e.csv", "--layout list cannot be written to CSV"),
    (["--text-col", "body"], "e.parquet", "text column 'body' is not in"),
])
def test_cli_embed_bad_input_exits_2(tmp_path, tiny_bert_dir, capsys, extra, out_name, message):
    from quantformer.io.frames import write_frame

    inp = tmp_path / "in.parquet"
    write_frame(frame(), inp)
    out = tmp_path / out_name
    code = main(["embed", "--input", str(inp), "--model", str(tiny_bert_dir), "--quiet",
                 "--device", "cpu", "--out", str(out), *extra])
    assert code == 2
    assert message in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["in.parquet"]
