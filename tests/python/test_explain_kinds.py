"""quantformer explain for every kind of model predict serves: NLI and SetFit models, RoBERTa
position ids, encoder-decoder models refused."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from toydata import toy_frame

from quantformer._core.errors import InputError
from quantformer.cli.main import main
from quantformer.infer.embed import embed_texts
from quantformer.infer.explain import Integrator, explain, windows, words_of
from quantformer.infer.explain_forward import ClassifierForward, position_ids
from quantformer.infer.setfit import SetFitClassifier
from quantformer.infer.zeroshot import nli_pair_logits
from quantformer.train.finetune import finetune
from quantformer.train.setfit import setfit_finetune

PHRASES = {"econ": "money and taxes", "other": "something else"}
TEMPLATE = "The text is about {}."
LONG = " ".join(f"word{i % 7} tax" for i in range(60)) + " final."
TEXTS = ["We must cut taxes and the deficit.", "Thank you for the kind reply!", LONG]
GAP = 0.02  # completeness gap every kind reaches at 64 Gauss-Legendre steps on tiny models


@pytest.fixture(scope="module")
def nli(tiny_roberta_nli_dir, tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = finetune(toy_frame(16), model=str(tiny_roberta_nli_dir), method="nli",
                       hypothesis=TEMPLATE, label_phrases=PHRASES, epochs=1, lr=1e-3,
                       quiet=True, device="cpu", max_length=48, seed=3)
    return clf, clf.save(tmp_path_factory.mktemp("explain-nli") / "model")


@pytest.fixture(scope="module")
def setfit(tiny_bert_dir, tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = setfit_finetune(toy_frame(8).assign(label=["econ"] * 4 + ["other"] * 4),
                              model=str(tiny_bert_dir), num_iterations=1, seed=3, quiet=True,
                              device="cpu", max_length=48)
    return clf, clf.save(tmp_path_factory.mktemp("explain-setfit") / "model")


def _explain(clf, texts, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return explain(clf, texts, **kw)


def test_nli_explains_the_entailment_logit_of_the_targets_pair_over_the_premise(nli):
    clf, _ = nli
    res = _explain(clf, TEXTS, steps=64)
    d = res.documents
    probs = clf.predict_proba(TEXTS)
    assert d["target"].tolist() == [clf.labels[i] for i in probs.argmax(axis=1)]
    np.testing.assert_allclose(d[[f"prob_{c}" for c in clf.labels]].to_numpy(), probs,
                               atol=1e-5)
    # the explained logit is the entailment logit of the target class's pair, as predict
    # scores it (same premise window, long document included)
    pairs, cut = nli_pair_logits(clf.model, clf.tokenizer, TEXTS, clf.hypotheses(),
                                 max_length=clf.max_length, truncation=clf.truncation,
                                 batch_size=8, device="cpu", progress=False)
    t = probs.argmax(axis=1)
    np.testing.assert_allclose(d["logit"], pairs[np.arange(3), t, clf.entailment_id],
                               atol=1e-4)
    assert d["truncated"].tolist() == cut.tolist() == [False, False, True]
    # completeness, and only the premise's words carry attributions
    assert (d["completeness_gap"] < GAP).all()
    np.testing.assert_allclose(d["attribution_sum"], d["logit"] - d["baseline_logit"],
                               atol=GAP * np.abs(d["logit"] - d["baseline_logit"]).max())
    for i, text in enumerate(TEXTS):
        w = res.words[res.words["doc_id"] == f"text{i + 1}"]
        assert w["word"].tolist() == [x[0] for x in words_of(text)]
        assert np.isclose(w["attribution"].sum(), d["attribution_sum"].iloc[i], atol=1e-6)
    assert res.words.loc[res.words["doc_id"] == "text3", "attribution"].isna().any()
    # the baseline keeps the hypothesis: input and baseline differ in the premise only
    win = windows(clf, TEXTS[:1], clf.hypotheses()[t[0]])[0][0]
    ids, base, _, _ = Integrator(clf).tensors([win])
    changed = np.flatnonzero((ids != base).numpy()[0])
    assert changed.tolist() == win.positions.tolist()


def test_nli_target_and_its_errors(nli, tmp_path, capsys):
    clf, path = nli
    res = _explain(clf, TEXTS[:2], target="other", steps=8)
    assert (res.documents["target"] == "other").all()
    with pytest.raises(InputError, match="'nope' is not a class"):
        explain(path, TEXTS, target="nope")
    toy_frame(3).to_csv(tmp_path / "c.csv", index=False)
    code = main(["explain", "--model", str(path), "--input", str(tmp_path / "c.csv"),
                 "--out", str(tmp_path / "w.parquet"), "--target", "nope"])
    assert code == 2 and "--target 'nope' is not a class" in capsys.readouterr().err
    assert not (tmp_path / "w.parquet").exists()


def test_setfit_binary_explains_the_log_odds_of_the_target(setfit, tmp_path):
    clf, path = setfit
    res = _explain(clf, TEXTS, steps=64)
    d = res.documents
    probs = clf.predict_proba(TEXTS)
    t = probs.argmax(axis=1)
    assert d["target"].tolist() == [clf.labels[i] for i in t]
    np.testing.assert_allclose(d[["prob_econ", "prob_other"]].to_numpy(), probs, atol=1e-5)
    p = probs[np.arange(3), t]
    np.testing.assert_allclose(d["logit"], np.log(p / (1 - p)), atol=1e-4)
    assert (d["completeness_gap"] < GAP).all()
    # the other class's score is the same log-odds with the other sign
    other = _explain(clf, TEXTS, target=clf.labels[1 - t[0]], steps=8).documents
    assert other["logit"].iloc[0] == pytest.approx(-d["logit"].iloc[0], abs=1e-5)
    # the CLI reads the SetFit directory
    toy_frame(3).to_csv(tmp_path / "c.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["explain", "--model", str(path), "--input", str(tmp_path / "c.csv"),
                     "--out", str(tmp_path / "w.csv"), "--steps", "4", "--check", "--quiet"])
    assert code == 0
    check = json.loads((tmp_path / "w.check.json").read_text())
    assert isinstance(check["randomisation_spearman"], float)


def test_setfit_multiclass_explains_the_class_logit(setfit):
    clf, _ = setfit
    rng = np.random.default_rng(0)
    hidden = clf.coef.shape[1]
    three = SetFitClassifier(clf.encoder, rng.normal(size=(3, hidden)), rng.normal(size=3),
                             ["a", "b", "c"], normalize=True, max_length=clf.max_length,
                             truncation=clf.truncation)
    res = _explain(three, TEXTS, steps=64)
    vecs, _ = embed_texts(three.encoder, TEXTS, max_length=three.max_length,
                          truncation=three.truncation, normalize=True)
    z = vecs.astype(np.float64) @ three.coef.T + three.intercept
    d = res.documents
    assert d["target"].tolist() == [three.labels[i] for i in z.argmax(axis=1)]
    np.testing.assert_allclose(d["logit"], z.max(axis=1), atol=1e-4)
    assert (d["completeness_gap"] < GAP).all()


def test_roberta_baseline_positions_are_the_inputs(tiny_roberta_dir):
    """RoBERTa numbers positions from input_ids != pad: a baseline of pad tokens would get
    other positions; the forward passes the input's positions explicitly."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(tiny_roberta_dir), num_labels=2).eval()
    tok = AutoTokenizer.from_pretrained(str(tiny_roberta_dir))
    batch = tok(["the economy and taxes", "war"], padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    base = ids.clone()
    words = (mask == 1) & ~torch.isin(ids, torch.tensor(tok.all_special_ids))
    base[words] = tok.pad_token_id
    fwd = ClassifierForward(model)
    pos = position_ids(mask, model.config.pad_token_id)
    with torch.no_grad():
        # explicit positions equal RoBERTa's own for the input (padding included)
        np.testing.assert_allclose(fwd(ids, mask).numpy(),
                                   model(input_ids=ids, attention_mask=mask).logits.numpy(),
                                   atol=1e-6)
        got = fwd(base, mask).numpy()
        want = model(input_ids=base, attention_mask=mask, position_ids=pos).logits.numpy()
        implicit = model(input_ids=base, attention_mask=mask).logits.numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.abs(implicit - want).max() > 1e-4  # what the fix is about


def test_encoder_decoder_models_are_refused(tiny_bart_nli_dir, tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = finetune(toy_frame(8).assign(label=["econ"] * 4 + ["other"] * 4),
                       model=str(tiny_bart_nli_dir), epochs=1, quiet=True,
                       device="cpu", max_length=32)
    path = clf.save(tmp_path / "bart")
    toy_frame(3).to_csv(tmp_path / "c.csv", index=False)
    code = main(["explain", "--model", str(path), "--input", str(tmp_path / "c.csv"),
                 "--out", str(tmp_path / "w.parquet")])
    err = capsys.readouterr().err
    assert code == 2 and "encoder-decoder model (bart)" in err
    assert not (tmp_path / "w.parquet").exists()
    with pytest.raises(InputError, match="encoder-decoder"):
        explain(clf, ["a text"])  # a loaded model: refused from its config
