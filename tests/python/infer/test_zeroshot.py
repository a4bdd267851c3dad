"""Zero-shot classification: NLI equals the HF pipeline, embedding similarity, CLI, bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from quantformer.cli.main import main
from quantformer._core.errors import InputError
from quantformer.cli.zeroshot import describe
from quantformer.infer.zeroshot import zeroshot
from quantformer.infer.zeroshot_common import check_hypothesis, check_labels, parse_labels
from quantformer.infer.zeroshot_embed import calibrate_similarities, embedding_probabilities
from quantformer.infer.zeroshot_nli import nli_label_ids, nli_probabilities

#: fp32 references (sentence-transformers, the pipeline): auto runs fp32 here
pytestmark = pytest.mark.usefixtures("fp32_auto")

DOCS = [
    "Abortion should be legal; women have the right to decide for themselves.",
    "Every life is sacred and the unborn child deserves protection under the law.",
    "The government will invest in schools, roads and hospitals.",
    "This comment is rude and toxic, you idiot.",
    "Thank you for the thoughtful reply.",
]
LABELS = ["in favor of", "neutral toward", "against"]
TEMPLATE = "The text is {} legalization of abortion."


def corpus(texts=DOCS) -> pd.DataFrame:
    n = len(texts)
    return pd.DataFrame({"doc_id": [f"d{i}" for i in range(n)], "text": texts,
                         "label": ["favor", "against", "none", "none", "none"][:n],
                         "year": list(range(2000, 2000 + n))})


def pipeline_scores(model_dir, texts, labels, template, multi_label=False, tokenizer=None):
    from transformers import pipeline

    clf = pipeline("zero-shot-classification", model=str(model_dir), tokenizer=tokenizer,
                   device="cpu")
    out = clf(list(texts), candidate_labels=labels, hypothesis_template=template,
              multi_label=multi_label)
    return np.array([[dict(zip(r["labels"], r["scores"]))[x] for x in labels] for r in out])


def probs_of(result, labels) -> np.ndarray:
    return result[[f"prob_{x}" for x in labels]].to_numpy()


# ------------------------------------------------------------------------------------------
# NLI equals transformers.pipeline("zero-shot-classification")


@pytest.mark.parametrize("fixture", ["tiny_bart_nli_dir", "tiny_roberta_nli_dir"])
@pytest.mark.parametrize("multi_label", [False, True])
def test_nli_matches_hf_pipeline(request, fixture, multi_label):
    model_dir = request.getfixturevalue(fixture)
    res = zeroshot(corpus(), LABELS, TEMPLATE, model=str(model_dir), multi_label=multi_label,
                   batch_size=4, device="cpu", quiet=True)
    ref = pipeline_scores(model_dir, DOCS, LABELS, TEMPLATE, multi_label)
    mine = probs_of(res, LABELS)
    np.testing.assert_allclose(mine, ref, atol=1e-5, rtol=0)
    assert (res["zeroshot_method"] == "NLI entailment").all()
    assert res.attrs["quantformer"]["method"] == "NLI entailment"
    assert res["predicted"].tolist() == [LABELS[i] for i in ref.argmax(1)]
    if not multi_label:
        np.testing.assert_allclose(mine.sum(1), 1.0, atol=1e-9)
    else:  # independent per label: the random model's rows do not sum to 1
        assert not np.allclose(mine.sum(1), 1.0, atol=1e-3)


def test_nli_truncates_premise_never_hypothesis(tiny_roberta_nli_dir):
    from transformers import AutoTokenizer

    long_doc = " ".join(DOCS * 12)  # far beyond 64 tokens
    texts = [long_doc, DOCS[0]]
    res = zeroshot(texts, LABELS, TEMPLATE, model=str(tiny_roberta_nli_dir), max_length=64,
                   truncation="head", device="cpu", quiet=True)
    assert res.attrs["quantformer"]["n_truncated"] == 1
    assert res.attrs["quantformer"]["max_length"] == 64
    # the pipeline truncates the premise only ("only_first") at the tokenizer's limit: the same
    # as head truncation, so with a 64-token limit the scores agree
    tok = AutoTokenizer.from_pretrained(str(tiny_roberta_nli_dir), model_max_length=64)
    ref = pipeline_scores(tiny_roberta_nli_dir, texts, LABELS, TEMPLATE, tokenizer=tok)
    np.testing.assert_allclose(probs_of(res, LABELS), ref, atol=1e-5, rtol=0)
    # head_tail (the default) keeps the end of the document too: other scores for doc 1 only
    ht = zeroshot(texts, LABELS, TEMPLATE, model=str(tiny_roberta_nli_dir), max_length=64,
                  device="cpu", quiet=True)
    assert not np.allclose(probs_of(ht, LABELS)[0], ref[0], atol=1e-6)
    np.testing.assert_allclose(probs_of(ht, LABELS)[1], ref[1], atol=1e-5)


def test_nli_probabilities_formulas():
    logits = np.array([[[0.0, 1.0, 2.0], [1.0, 0.0, -1.0]]])  # 1 doc, 2 labels, (c, n, e)
    single = nli_probabilities(logits, entail=2, contra=0)
    e = np.exp([2.0, -1.0])
    np.testing.assert_allclose(single[0], e / e.sum())
    multi = nli_probabilities(logits, entail=2, contra=0, multi_label=True)
    np.testing.assert_allclose(multi[0], [np.exp(2) / (np.exp(2) + 1),
                                          np.exp(-1) / (np.exp(-1) + np.exp(1))])


def test_nli_label_ids_from_config():
    from types import SimpleNamespace as NS

    assert nli_label_ids(NS(id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})) == (2, 0)
    assert nli_label_ids(NS(id2label={"0": "entailment", "1": "neutral",
                                      "2": "contradiction"})) == (0, 2)
    assert nli_label_ids(NS(id2label={0: "entailment", 1: "not_entailment"})) == (0, 1)
    assert nli_label_ids(NS(id2label={0: "LABEL_0", 1: "LABEL_1"})) is None


def test_auto_method_and_nli_without_entailment(tiny_bert_dir, tiny_bart_nli_dir):
    res = zeroshot(DOCS[:3], ["schools", "abortion"], model=str(tiny_bert_dir), device="cpu",
                   quiet=True)
    assert (res["zeroshot_method"] == "embedding similarity").all()
    res = zeroshot(DOCS[:3], ["schools", "abortion"], model=str(tiny_bart_nli_dir),
                   device="cpu", quiet=True)
    assert (res["zeroshot_method"] == "NLI entailment").all()
    with pytest.raises(InputError, match="no 'entailment' label.*method embedding"):
        zeroshot(DOCS[:3], ["schools", "abortion"], model=str(tiny_bert_dir), method="nli",
                 device="cpu", quiet=True)
    with pytest.raises(InputError, match="unknown method 'bayes'"):
        zeroshot(DOCS[:3], ["schools", "abortion"], model=str(tiny_bert_dir), method="bayes")


# ------------------------------------------------------------------------------------------
# embedding similarity


def test_embedding_method_equals_sentence_transformers_cosine(default_model_dir):
    from sentence_transformers import SentenceTransformer

    res = zeroshot(corpus(), LABELS, TEMPLATE, device="cpu", quiet=True)
    st = SentenceTransformer(str(default_model_dir), device="cpu")
    d = st.encode(DOCS, normalize_embeddings=True).astype(np.float64)
    h = st.encode([TEMPLATE.format(x) for x in LABELS], normalize_embeddings=True)
    sims = d @ h.astype(np.float64).T
    z = (sims - sims.mean(0)) / sims.std(0)
    expect = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    np.testing.assert_allclose(probs_of(res, LABELS), expect, atol=1e-5)
    meta = res.attrs["quantformer"]
    assert meta["method"] == "embedding similarity"
    assert meta["calibration"] == "standardise" and meta["temperature"] == 1.0
    assert meta["max_length"] == 256  # all-MiniLM-L6-v2's sentence-transformers limit
    assert (res["zeroshot_method"] == "embedding similarity").all()
    # plain cosine at temperature 0.05 is the other documented variant
    plain = zeroshot(corpus(), LABELS, TEMPLATE, calibration="none", device="cpu", quiet=True)
    e = np.exp(sims / 0.05)
    np.testing.assert_allclose(probs_of(plain, LABELS), e / e.sum(1, keepdims=True), atol=1e-4)
    assert plain["predicted"].tolist() == [LABELS[i] for i in sims.argmax(1)]


def test_calibrations_and_temperature():
    sims = np.array([[0.5, 0.1], [0.3, 0.2], [0.1, 0.3]])
    np.testing.assert_allclose(calibrate_similarities(sims, "none"), sims)
    np.testing.assert_allclose(calibrate_similarities(sims, "centre"), sims - sims.mean(0))
    z = calibrate_similarities(sims, "standardise")
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(z.std(0), 1)
    p = embedding_probabilities(sims, "standardise", temperature=2.0)
    e = np.exp(z / 2)
    np.testing.assert_allclose(p, e / e.sum(1, keepdims=True))
    multi = embedding_probabilities(sims, "centre", multi_label=True)
    np.testing.assert_allclose(multi, 1 / (1 + np.exp(-(sims - sims.mean(0)) / 0.05)))
    const = calibrate_similarities(np.array([[0.2, 0.1], [0.2, 0.3]]), "standardise")
    np.testing.assert_allclose(const[:, 0], 0)  # a constant label: centred, not divided by 0
    with pytest.raises(InputError, match="multi-label embedding zero-shot needs a calibration"):
        embedding_probabilities(sims, "none", multi_label=True)
    with pytest.raises(InputError, match="temperature must be greater than 0"):
        embedding_probabilities(sims, "none", temperature=0)
    with pytest.raises(InputError, match="unknown calibration 'zscore'"):
        calibrate_similarities(sims, "zscore")


def test_embedding_single_document_falls_back_to_cosine(tiny_bert_dir):
    with pytest.warns(UserWarning, match="needs at least 2 documents, got 1; used plain cosine"):
        res = zeroshot([DOCS[0]], ["schools", "abortion"], model=str(tiny_bert_dir),
                       device="cpu", quiet=True)
    assert res.attrs["quantformer"]["calibration"] == "none"
    assert res["predicted"].iloc[0] in ("schools", "abortion")
    np.testing.assert_allclose(probs_of(res, ["schools", "abortion"]).sum(), 1.0)
    with pytest.raises(InputError, match="needs at least 2 non-empty documents"):
        zeroshot([DOCS[0], None], ["abortion"], model=str(tiny_bert_dir), multi_label=True,
                 device="cpu", quiet=True)


def test_multi_label_embedding_allows_one_label(tiny_bert_dir):
    res = zeroshot(DOCS, ["abortion"], model=str(tiny_bert_dir), multi_label=True,
                   device="cpu", quiet=True)
    p = res["prob_abortion"].to_numpy()
    assert ((p > 0) & (p < 1)).all() and (p > 0.5).any() and (p < 0.5).any()
    assert (res["predicted"] == "abortion").all()


# ------------------------------------------------------------------------------------------
# output contract and bad input


def test_missing_documents_kept_with_counted_warning(tiny_bart_nli_dir):
    texts = [DOCS[0], None, "   ", DOCS[1], ""]
    frame = corpus(texts)
    with pytest.warns(UserWarning, match=r"3 of 5 document\(s\) have missing or empty text"):
        res = zeroshot(frame, LABELS, TEMPLATE, model=str(tiny_bart_nli_dir), device="cpu",
                       quiet=True)
    assert res["doc_id"].tolist() == frame["doc_id"].tolist()
    assert list(res.columns) == ["doc_id", "label", "year", "predicted", *[
        f"prob_{x}" for x in LABELS], "zeroshot_method", "backend"]
    assert res["backend"].tolist() == ["torch"] * 5  # which backend produced them (issue 16)
    assert res["year"].tolist() == frame["year"].tolist()
    assert res["label"].tolist() == frame["label"].tolist()
    assert res["predicted"].isna().tolist() == [False, True, True, False, True]
    assert res["zeroshot_method"].isna().tolist() == [False, True, True, False, True]
    assert res["zeroshot_method"].dropna().tolist() == ["NLI entailment"] * 2
    assert np.isnan(probs_of(res, LABELS)[[1, 2, 4]]).all()
    ref = pipeline_scores(tiny_bart_nli_dir, [DOCS[0], DOCS[1]], LABELS, TEMPLATE)
    np.testing.assert_allclose(probs_of(res, LABELS)[[0, 3]], ref, atol=1e-5)
    assert res.attrs["quantformer"]["n_missing"] == 3
    with pytest.warns(UserWarning, match="3 of 5"):
        kept = zeroshot(frame, LABELS, TEMPLATE, model=str(tiny_bart_nli_dir), device="cpu",
                        quiet=True, keep_text=True)
    assert kept.columns[1] == "text"


@pytest.mark.parametrize("fixture", ["tiny_bart_nli_dir", "tiny_bert_dir"])
def test_all_documents_missing(request, fixture):
    model_dir = str(request.getfixturevalue(fixture))
    with pytest.warns(UserWarning, match=r"2 of 2 document\(s\) have missing or empty text"):
        res = zeroshot([None, ""], LABELS, TEMPLATE, model=model_dir, device="cpu", quiet=True)
    assert res["predicted"].isna().all() and np.isnan(probs_of(res, LABELS)).all()
    assert res.attrs["quantformer"]["n_missing"] == 2


@pytest.mark.parametrize("template,message", [
    ("The text is about abortion.", "no {} placeholder"),
    ("{} is {}.", "has 2 placeholders; it needs exactly one {}"),
    ("This is {label}.", "named placeholder {label}"),
    ("This is {.", "unbalanced braces"),
    ("  ", "template is empty"),
])
def test_bad_templates(template, message):
    with pytest.raises(InputError, match=message.replace("{", r"\{").replace("}", r"\}")):
        check_hypothesis(template)


def test_template_with_literal_braces_is_fine():
    assert check_hypothesis("{{Stance}}: {}") == "{{Stance}}: {}"


@pytest.mark.parametrize("labels,multi,message", [
    (["toxic"], False, "needs at least two labels.*got only 'toxic'.*multi_label"),
    (["toxic", "toxic", "fine"], False, "duplicate label\\(s\\): 'toxic'"),
    ("toxic,,fine", False, "label 2 of 3 is empty"),
    ("toxic,fine,", False, "label 3 of 3 is empty"),
    (["", "fine"], True, "label 1 of 2 is empty"),
    ([], True, "no labels given"),
])
def test_bad_labels(labels, multi, message):
    with pytest.raises(InputError, match=message):
        check_labels(labels, multi)


def test_labels_parsing():
    assert parse_labels(" in favor of , against ") == ["in favor of", "against"]
    assert check_labels(["toxic"], multi_label=True) == ["toxic"]


# ------------------------------------------------------------------------------------------
# CLI


def test_cli_zeroshot_end_to_end(tmp_path, tiny_roberta_nli_dir, capsys):
    from quantformer.io.frames import read_frame, write_frame

    inp = tmp_path / "in.parquet"
    write_frame(corpus([DOCS[0] * 40, *DOCS[1:]]), inp)
    out = tmp_path / "zs.parquet"
    code = main(["zeroshot", "--input", str(inp), "--labels", ",".join(LABELS),
                 "--hypothesis", TEMPLATE, "--model", str(tiny_roberta_nli_dir),
                 "--batch-size", "3", "--max-length", "128", "--device", "cpu", "--quiet",
                 "--out", str(out)])
    captured = capsys.readouterr()
    text = captured.out
    assert code == 0
    assert "zero-shot by NLI entailment" in text
    assert "1 truncated to 128 tokens (head_tail)" in text
    # issue 17: also a warning (R shows it), in predict's words
    assert ("quantformer: warning: 1 of 5 document(s) truncated to 128 tokens (head_tail)"
            in captured.err)
    assert "0 missing or empty" in text
    res = pd.read_parquet(out)
    assert res["doc_id"].tolist() == [f"d{i}" for i in range(5)]
    assert set(res["predicted"]) <= set(LABELS)
    assert res["zeroshot_method"].unique().tolist() == ["NLI entailment"]
    # the same through the Python API, and .rds output for R
    api = zeroshot(read_frame(inp), LABELS, TEMPLATE, model=str(tiny_roberta_nli_dir),
                   batch_size=3, max_length=128, device="cpu", quiet=True)
    np.testing.assert_allclose(probs_of(res, LABELS), probs_of(api, LABELS), atol=1e-6)
    labels_file = tmp_path / "labels.txt"
    labels_file.write_text("\n".join(LABELS) + "\n\n", encoding="utf-8")
    rds = tmp_path / "zs.rds"
    assert main(["zeroshot", "--input", str(inp), "--labels-file", str(labels_file),
                 "--hypothesis", TEMPLATE, "--model", str(tiny_roberta_nli_dir), "--quiet",
                 "--device", "cpu", "--max-length", "128", "--out", str(rds)]) == 0
    import pyreadr

    back = pyreadr.read_r(str(rds))[None]
    np.testing.assert_allclose(back[[f"prob_{x}" for x in LABELS]].to_numpy(),
                               probs_of(res, LABELS), atol=1e-6)


def test_cli_zeroshot_output_evaluates(tmp_path, tiny_bart_nli_dir, capsys):
    from quantformer.io.frames import write_frame

    inp = tmp_path / "in.csv"
    write_frame(corpus(), inp)
    out = tmp_path / "zs.parquet"
    assert main(["zeroshot", "--input", str(inp), "--labels", ",".join(LABELS),
                 "--hypothesis", TEMPLATE, "--model", str(tiny_bart_nli_dir), "--quiet",
                 "--device", "cpu", "--out", str(out)]) == 0
    report = tmp_path / "report.json"
    code = main(["evaluate", "--pred", str(out), "--truth-col", "label", "--label-map",
                 "in favor of=favor,neutral toward=none,against=against", "--out", str(report)])
    assert code == 0
    rep = json.loads(report.read_text())
    res = pd.read_parquet(out)
    mapped = res["predicted"].map({"in favor of": "favor", "neutral toward": "none",
                                   "against": "against"})
    acc = float((mapped == res["label"]).mean())
    assert abs(rep["accuracy"] - acc) < 1e-9


@pytest.mark.parametrize("extra,message", [
    (["--labels", "a"], "needs at least two labels"),
    (["--labels", "a,a"], "duplicate label"),
    (["--labels", "a,,b"], "label 2 of 3 is empty"),
    (["--labels", "a,b", "--hypothesis", "no placeholder"], "no {} placeholder"),
    (["--labels", "a,b", "--hypothesis", "{} and {}"], "has 2 placeholders"),
    (["--labels", "a,b", "--method", "nli"], "no 'entailment' label"),
    (["--labels-file", "nowhere.txt"], "labels file not found"),
    (["--labels", "a,b", "--max-length", "4096"], "above this model's limit"),
])
def test_cli_bad_input_exits_2_and_leaves_no_file(tmp_path, tiny_bert_dir, capsys, extra,
                                                   message):
    from quantformer.io.frames import write_frame

    inp = tmp_path / "in.parquet"
    write_frame(corpus(), inp)
    out = tmp_path / "zs.parquet"
    code = main(["zeroshot", "--input", str(inp), "--model", str(tiny_bert_dir), "--quiet",
                 "--device", "cpu", "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["in.parquet"]


def test_cli_embedding_method_counts_missing(tmp_path, tiny_bert_dir, capsys):
    from quantformer.io.frames import write_frame

    inp = tmp_path / "in.parquet"
    write_frame(corpus([DOCS[0], None, DOCS[2], "", DOCS[4]]), inp)
    out = tmp_path / "zs.csv"
    code = main(["zeroshot", "--input", str(inp), "--labels", "schools,abortion",
                 "--model", str(tiny_bert_dir), "--quiet", "--device", "cpu",
                 "--out", str(out)])
    cap = capsys.readouterr()
    assert code == 0
    assert "zero-shot by embedding similarity (cosine of mean-pooled embeddings, calibration " \
           "standardise, softmax at temperature 1)" in cap.out
    assert "2 missing or empty (no prediction)" in cap.out
    assert "2 of 5 document(s) have missing or empty text" in cap.err
    res = pd.read_csv(out)
    assert res["predicted"].isna().tolist() == [False, True, False, True, False]
    assert res["zeroshot_method"].isna().tolist() == [False, True, False, True, False]
    assert res["zeroshot_method"].dropna().unique().tolist() == ["embedding similarity"]


def test_public_api_is_callable_as_module_and_function(tiny_bert_dir):
    import quantformer
    import quantformer.infer.embed
    import quantformer.infer.zeroshot  # binds the submodules to the package attributes

    res = quantformer.zeroshot(DOCS[:2], ["schools", "abortion"], model=str(tiny_bert_dir),
                               device="cpu", quiet=True)
    assert res["doc_id"].tolist() == ["text1", "text2"]
    assert quantformer.embed(DOCS[:2], model=str(tiny_bert_dir), quiet=True).shape == (2, 32)
    assert quantformer.infer.zeroshot.DEFAULT_HYPOTHESIS == "This text is about {}."


def test_describe_names_the_method():
    meta = {"method": "embedding similarity", "calibration": "standardise", "temperature": 1.0,
            "multi_label": False, "model": "m", "n_docs": 3, "labels": ["a", "b"],
            "hypothesis": "{}", "n_missing": 1, "n_truncated": 2, "max_length": 256,
            "truncation": "head_tail"}
    line = describe(meta)
    assert line.startswith("zero-shot by embedding similarity (cosine of mean-pooled")
    assert "1 missing or empty (no prediction), 2 truncated to 256 tokens" in line
