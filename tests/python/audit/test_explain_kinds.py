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
from quantformer.audit.explain import explain, windows, words_of
from quantformer.audit.explain_forward import ClassifierForward, position_ids
from quantformer.audit.integrate import Integrator
from quantformer.infer.setfit import SetFitClassifier
from quantformer.infer.zeroshot_nli import nli_pair_logits
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


def _randomisation_spearman(clf, frame, ex):
    """Adebayo et al.'s (2018) model randomisation by hand: explain the same documents and
    targets with a fully re-initialised copy of the model, then the mean per-document Spearman
    correlation (scipy) of the two attributions, over the words both saw."""
    from scipy.stats import spearmanr

    from quantformer.audit.explain_check import randomised

    import pandas as pd

    other_model, docs = randomised(clf), ex.documents
    theirs = pd.concat([_explain(other_model, frame[frame["doc_id"].isin(group["doc_id"])],
                                 target=target).words
                        for target, group in docs.groupby("target")])
    values = []
    for (doc_id, target), mine in ex.words.groupby(["doc_id", "target"], sort=False):
        other = theirs[(theirs["doc_id"] == doc_id) & (theirs["target"] == target)]
        a, b = mine["attribution"].to_numpy(), other["attribution"].to_numpy()
        ok = ~np.isnan(a) & ~np.isnan(b)
        rho = spearmanr(a[ok], b[ok]).statistic
        if not np.isnan(rho):
            values.append(rho)
    return float(np.mean(values))


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


def test_nli_target_checks_and_errors(nli, tmp_path, capsys):
    from quantformer.audit.explain_check import check

    clf, path = nli
    res = _explain(clf, TEXTS[:2], target="other", steps=8)
    assert (res.documents["target"] == "other").all()
    frame = toy_frame(6)
    ex = _explain(clf, frame, steps=4)
    checks = check(clf, frame, ex)
    assert checks["aopc_n_docs"] == 6 and checks["randomisation_n_docs"] == 6
    assert checks["randomisation_spearman"] == pytest.approx(
        _randomisation_spearman(clf, frame, ex), abs=1e-6)
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
    frame = toy_frame(3)
    assert check["randomisation_spearman"] == pytest.approx(
        _randomisation_spearman(clf, frame, _explain(clf, frame, steps=4)), abs=1e-6)


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


# ------------------------------------------------------------------------------------------
# partitioned corpora and Dask


@pytest.fixture(scope="module")
def bert(toy_model_dir):
    return toy_model_dir


def _corpus(tmp_path):
    """12 documents (one without text, one truncated) in one CSV and in 3 Parquet partitions."""
    f = toy_frame(12).drop(columns="label")
    f["doc_id"] = [f"d{(i * 5) % 12:02d}" for i in range(12)]  # ids not in sorted order
    f.loc[4, "text"] = None
    f.loc[7, "text"] = LONG
    f.to_csv(tmp_path / "one.csv", index=False)
    (tmp_path / "parts").mkdir()
    for j, rows in enumerate(np.array_split(np.arange(12), 3)):
        f.iloc[rows].to_parquet(tmp_path / "parts" / f"p-{j}.parquet", index=False)
    return f


def _cli(*args) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return main(["explain", *map(str, args), "--steps", "16", "--device", "cpu",
                     "--quiet"])


def _assert_same_words(got, want) -> None:
    assert got.columns.tolist() == want.columns.tolist()
    for c in ("doc_id", "word", "target", "word_id", "start", "end"):
        assert got[c].astype(str).tolist() == want[c].astype(str).tolist()
    np.testing.assert_allclose(got["attribution"], want["attribution"], atol=1e-6)
    np.testing.assert_allclose(got["completeness_gap"], want["completeness_gap"], atol=1e-5)


def test_partitioned_on_a_local_cluster_equals_one_file_and_resume_skips(bert, tmp_path,
                                                                         capsys):
    import pandas as pd

    from quantformer.scale.explain import read_explanation

    _corpus(tmp_path)
    assert _cli("--model", bert, "--input", tmp_path / "one.csv", "--out",
                tmp_path / "one.parquet") == 0
    want = pd.read_parquet(tmp_path / "one.parquet")
    assert "d08" not in set(want["doc_id"])  # the document without text (row 4) has no rows
    out = tmp_path / "out"
    assert _cli("--model", bert, "--input", tmp_path / "parts", "--out", out,
                "--scheduler", "local:2") == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["job"]["verb"] == "explain" and len(manifest["partitions"]) == 3
    assert sum(e["missing"] for e in manifest["partitions"].values()) == 1
    assert sum(e["truncated"] for e in manifest["partitions"].values()) == 1
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "p-0.parquet",
                                                     "p-1.parquet", "p-2.parquet"]
    _assert_same_words(read_explanation(out), want)
    # resume: only the deleted partition is explained again
    (out / "p-1.parquet").unlink()
    capsys.readouterr()
    assert _cli("--model", bert, "--input", tmp_path / "parts", "--out", out, "--resume") == 0
    assert "wrote 1 partition(s)" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert [e["run"] for _, e in sorted(manifest["partitions"].items())] == [1, 2, 1]
    _assert_same_words(read_explanation(out), want)


def test_one_file_with_a_scheduler_gives_the_same_outputs(bert, tmp_path):
    import pandas as pd

    _corpus(tmp_path)
    common = ["--model", bert, "--input", tmp_path / "one.csv", "--by-term"]
    assert _cli(*common, tmp_path / "t1.csv", "--out", tmp_path / "w1.parquet") == 0
    assert _cli(*common, tmp_path / "t2.csv", "--out", tmp_path / "w2.parquet",
                "--scheduler", "local:1") == 0
    _assert_same_words(pd.read_parquet(tmp_path / "w2.parquet"),
                       pd.read_parquet(tmp_path / "w1.parquet"))
    t1, t2 = pd.read_csv(tmp_path / "t1.csv"), pd.read_csv(tmp_path / "t2.csv")
    assert t1["term"].tolist() == t2["term"].tolist()


@pytest.mark.parametrize("flag", [["--html", "p.html"], ["--by-term", "t.csv"], ["--check"],
                                  ["--png", "f.png"], ["--bow-data", "train.csv"]])
def test_partitioned_input_refuses_whole_corpus_outputs(bert, tmp_path, capsys, flag):
    _corpus(tmp_path)
    code = main(["explain", "--model", str(bert), "--input", str(tmp_path / "parts"),
                 "--out", str(tmp_path / "out"), *flag])
    err = capsys.readouterr().err
    assert code == 2 and f"{flag[0]} needs the whole corpus" in err
    assert "read_explanation" in err and not (tmp_path / "out").exists()


def test_read_explanation_refuses_other_folders(tmp_path):
    from quantformer.scale.explain import read_explanation

    with pytest.raises(InputError, match="no manifest.json"):
        read_explanation(tmp_path)
