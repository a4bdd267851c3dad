"""finetune --method nli (issue 13; Laurer et al. 2023): the training pairs, the model directory,
predict / load / CLI on it, seeding, and bad input. The tiny NLI models of tiny_models.py have
random weights: they test the code path, not accuracy (no real NLI model is available offline).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.cli.main import main
from quantformer._core.errors import InputError
from quantformer.train.finetune import finetune
from quantformer.infer.load import load_model
from quantformer.infer.nli import NLIClassifier
from quantformer.train.nli import (parse_label_phrases, phrases_for,
                                      training_pairs)

PHRASES = {"econ": "money and taxes", "other": "something else"}
TEMPLATE = "The text is about {}."
FAST = {"epochs": 1, "lr": 1e-3, "quiet": True, "device": "cpu"}


def _train(model_dir, frame=None, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return finetune(toy_frame(16) if frame is None else frame, model=str(model_dir),
                        method="nli", hypothesis=TEMPLATE, label_phrases=PHRASES,
                        **{**FAST, **kwargs})


# ------------------------------------------------------------------------------------------
# pairs and phrases (no model)


def test_balanced_pairs_follow_laurer_et_al():
    targets = np.array([0, 0, 0, 0, 0, 1, 1, 2])  # 5 / 2 / 1 documents
    docs, classes, entail = training_pairs(targets, 3, "balanced", np.random.default_rng(1))
    for c, n_c in enumerate((5, 2, 1)):
        mine = classes == c
        # every document of the class with its hypothesis: entailment
        assert sorted(docs[mine & entail]) == np.flatnonzero(targets == c).tolist()
        # as many documents of other classes (at most all of them): not entailment
        others = docs[mine & ~entail]
        assert len(others) == min(n_c, 8 - n_c) and len(set(others)) == len(others)
        assert (targets[others] != c).all()
    assert len(docs) == 5 + 3 + 2 + 2 + 1 + 1
    again = training_pairs(targets, 3, "balanced", np.random.default_rng(1))
    assert all((a == b).all() for a, b in zip((docs, classes, entail), again))


def test_all_pairs_give_every_document_every_hypothesis():
    targets = np.array([1, 0, 2])
    docs, classes, entail = training_pairs(targets, 3, "all", np.random.default_rng(1))
    assert docs.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert classes.tolist() == [0, 1, 2] * 3
    assert entail.tolist() == [False, True, False, True, False, False, False, False, True]


def test_label_phrases_parse_and_cover_every_class():
    assert parse_label_phrases("pro=in favor of, con = against") == {"pro": "in favor of",
                                                                     "con": "against"}
    assert parse_label_phrases(["a=x, y", "b=c=d"]) == {"a": "x, y", "b": "c=d"}
    assert phrases_for(["a", "b"], {}) == {"a": "a", "b": "b"}  # the class names themselves
    assert phrases_for(["b", "a"], {"a": "x", "b": "y"}) == {"b": "y", "a": "x"}


@pytest.mark.parametrize("value, message", [
    ("pro:in favor of", "has no '='"),
    ("pro=", "empty class or phrase"),
    (["a=x", "a=y"], "two label phrases"),
])
def test_bad_label_phrases(value, message):
    with pytest.raises(InputError, match=message):
        parse_label_phrases(value)


def test_a_class_without_a_phrase_and_an_unknown_class():
    with pytest.raises(InputError, match=r"class\(es\) 'other' have no label phrase.*"
                                         r"other=PHRASE"):
        phrases_for(["econ", "other"], {"econ": "money"})
    with pytest.raises(InputError, match=r"'ecno'.*not among the classes"):
        phrases_for(["econ", "other"], {"ecno": "money", "other": "x"})


# ------------------------------------------------------------------------------------------
# training, the model directory, predict


@pytest.fixture(scope="module")
def nli_model(tiny_roberta_nli_dir, tmp_path_factory):
    """A tiny RoBERTa NLI model fine-tuned with --method nli (one epoch), and its folder."""
    clf = _train(tiny_roberta_nli_dir, seed=3)
    return clf, clf.save(tmp_path_factory.mktemp("nli") / "model")  # save returns the folder


def test_record_and_model_directory(nli_model, tiny_roberta_nli_dir):
    clf, out = nli_model
    record = json.loads((out / "quantformer.json").read_text())
    assert record["method"] == "nli" and record["complete"] is True
    assert record["labels"] == ["econ", "other"] and record["label_phrases"] == PHRASES
    assert record["hypothesis"] == TEMPLATE and record["nli_pairs"] == "balanced"
    assert (record["entailment_id"], record["contradiction_id"]) == (2, 0)
    counts = toy_frame(16)["label"].value_counts()
    assert record["n_pairs_entailment"] == 16
    assert record["n_pairs"] == 16 + sum(min(n, 16 - n) for n in counts)
    assert record["hyperparameters"]["epochs"] == 1 and record["model"] == str(
        tiny_roberta_nli_dir)
    # a plain Hugging Face NLI model: its NLI labels are kept, not replaced by the classes
    card = (out / "README.md").read_text()
    assert 'template "The text is about {}."' in card and 'econ: "money and taxes"' in card
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "contradiction", "1": "neutral", "2": "entailment"}


def test_load_round_trip_and_predict_columns(nli_model):
    import quantformer

    clf, out = nli_model
    docs = toy_frame(10)
    docs.loc[4, "text"] = ""
    loaded = quantformer.load(out)
    assert isinstance(loaded, NLIClassifier) and loaded.labels == ["econ", "other"]
    assert loaded.hypotheses() == [TEMPLATE.format(PHRASES["econ"]),
                                   TEMPLATE.format(PHRASES["other"])]
    with pytest.warns(UserWarning, match="1 of 10 document"):
        pred = loaded.predict(docs)
    assert list(pred.columns) == ["doc_id", "label", "year", "predicted", "prob_econ",
                                  "prob_other", "backend"]
    assert pred["doc_id"].tolist() == docs["doc_id"].tolist()
    assert pd.isna(pred.loc[4, "predicted"])
    assert pred.loc[4, ["prob_econ", "prob_other"]].isna().all()
    probs = pred[["prob_econ", "prob_other"]].drop(index=4).to_numpy()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)
    assert (pred["predicted"].drop(index=4) == np.where(probs[:, 0] >= probs[:, 1], "econ",
                                                        "other")).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(clf.predict_proba(docs.drop(index=4)), probs, atol=1e-6)


def test_predictions_are_zero_shot_nli_with_the_fine_tuned_model(nli_model):
    """predict = the softmax of the entailment logits across the class hypotheses, i.e.
    zero-shot NLI (itself equal to Hugging Face's pipeline) run on the fine-tuned folder."""
    from quantformer.infer.zeroshot import zeroshot

    _, out = nli_model
    docs = toy_frame(8)
    pred = NLIClassifier.from_dir(out).predict(docs)
    # both in fp32: the identity is exact there (bf16 would differ by rounding)
    zs = zeroshot(docs, list(PHRASES.values()), TEMPLATE, model=str(out), method="nli",
                  quiet=True, precision="fp32")
    np.testing.assert_allclose(pred[["prob_econ", "prob_other"]].to_numpy(),
                               zs[[f"prob_{p}" for p in PHRASES.values()]].to_numpy(),
                               atol=1e-6)


def test_training_pairs_reach_the_network(tiny_roberta_nli_dir, monkeypatch):
    """Every pair the loop sees is (document text, its class's filled hypothesis) with target
    entailment, or another class's hypothesis with target contradiction."""
    import quantformer.train.nli as nli_module
    from quantformer.models.hub import load_tokenizer

    seen = {}
    real = nli_module.train_epochs

    def spy(clf, batches, *args):
        seen["batches"] = batches
        return real(clf, batches, *args)

    monkeypatch.setattr(nli_module, "train_epochs", spy)
    frame = toy_frame(12)
    _train(tiny_roberta_nli_dir, frame=frame, nli_pairs="all")
    batches, tok = seen["batches"], load_tokenizer(str(tiny_roberta_nli_dir))
    hyps = {TEMPLATE.format(p): c for c, p in PHRASES.items()}
    labels_of = dict(zip(frame["text"].str.strip(), frame["label"]))
    assert len(batches.rows) == 12 * 2
    for i in batches.rows:
        premise, hypothesis = [s.strip() for s in tok.decode(
            batches.encodings.input_ids[i], skip_special_tokens=False).replace(
            "<s>", "").split("</s>") if s.strip()]
        own = hyps[hypothesis] == labels_of[premise]
        assert batches.targets[i] == (2 if own else 0)


def test_seeded_runs_are_identical(tiny_bart_nli_dir):
    docs = toy_frame(8)
    a = _train(tiny_bart_nli_dir, seed=7).predict_proba(docs)
    b = _train(tiny_bart_nli_dir, seed=7).predict_proba(docs)
    c = _train(tiny_bart_nli_dir, seed=8).predict_proba(docs)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-6


def test_class_order_and_default_phrases(tiny_roberta_nli_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = finetune(toy_frame(12), model=str(tiny_roberta_nli_dir), method="nli",
                       labels=["other", "econ"], **FAST)
    assert clf.labels == ["other", "econ"]
    assert clf.record["label_phrases"] == {"other": "other", "econ": "econ"}
    assert clf.hypotheses() == ["This text is about other.", "This text is about econ."]
    assert list(clf.predict(toy_frame(3)).columns)[-3:] == ["prob_other", "prob_econ", "backend"]


def test_validation_fraction_scores_the_held_out_documents(tiny_roberta_nli_dir):
    clf = _train(tiny_roberta_nli_dir, frame=toy_frame(20), valid_fraction=0.25)
    assert clf.record["validation"]["n"] == 5 and clf.record["n_train"] == 15
    # the held-out documents (the split of seed 1, stratified by label), scored here
    from sklearn.metrics import f1_score
    from quantformer.train.data import split_valid

    frame = toy_frame(20)
    _, held_out = split_valid(frame, 0.25, 1, frame["label"])
    pred = clf.predict(held_out, warn=False)["predicted"]
    assert clf.record["validation"]["macro_f1"] == pytest.approx(f1_score(
        held_out["label"], pred, average="macro", zero_division=0, labels=clf.labels))
    assert len(clf.record["validation_curve"]["per_epoch"]) == 1


# ------------------------------------------------------------------------------------------
# bad input


def test_a_model_without_entailment_label_is_refused(tiny_bert_dir):
    with pytest.raises(InputError, match=r"needs an NLI model.*pass model with an NLI model such "
                                         r"as MoritzLaurer"):
        finetune(toy_frame(8), model=str(tiny_bert_dir), method="nli")
    with pytest.raises(InputError, match="all-MiniLM-L6-v2 has labels"):
        finetune(toy_frame(8), method="nli")  # the bundled default is no NLI model


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "nli", "oversample": 0.5}, "oversample cannot be used with method nli"),
    ({"method": "nli", "nli_pairs": "some"}, "nli_pairs must be one of balanced, all"),
    ({"method": "nli", "hypothesis": "About it."}, "no {} placeholder"),
    ({"method": "nli", "task": "regression"}, "trains classifiers only"),
    ({"method": "nli", "epochs": 0}, "epochs must be a whole number greater than 0"),
    ({"hypothesis": "About {}."}, "hypothesis is for method nli"),
    ({"method": "setfit", "label_phrases": {"econ": "x"}}, "label_phrases is for method"),
])
def test_bad_nli_arguments(tiny_roberta_nli_dir, kwargs, message):
    with pytest.raises(InputError, match=message):
        finetune(toy_frame(8), model=str(tiny_roberta_nli_dir), **kwargs)


# ------------------------------------------------------------------------------------------
# CLI


def cli_nli(verb: str, model_dir, tmp_path, *extra) -> int:
    """Run ``<verb> --method nli`` quietly on ``tmp_path/train.csv`` with TEMPLATE and a label
    phrases file (econ=money, taxes and jobs; other=something else); returns the exit code."""
    (tmp_path / "phrases.txt").write_text("econ=money, taxes and jobs\n\nother=something else\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return main([verb, "--method", "nli", "--model", str(model_dir),
                     "--train", str(tmp_path / "train.csv"), "--hypothesis", TEMPLATE,
                     "--label-phrases-file", str(tmp_path / "phrases.txt"), *extra, "--quiet"])


def test_cli_finetune_nli_then_predict(tiny_roberta_nli_dir, tmp_path, capsys):
    train, docs = toy_frame(16), toy_frame(20).iloc[12:].reset_index(drop=True)
    train.to_csv(tmp_path / "train.csv", index=False)
    docs.loc[2, "text"] = None
    docs.to_csv(tmp_path / "docs.csv", index=False)
    out = tmp_path / "m"
    code = cli_nli("finetune", tiny_roberta_nli_dir, tmp_path, "--epochs", "1", "--seed", "2",
                   "--out", str(out))
    assert code == 0
    record = json.loads((out / "quantformer.json").read_text())
    assert record["label_phrases"] == {"econ": "money, taxes and jobs", "other": "something else"}
    assert record["hyperparameters"]["lr"] == 2e-5 and record["hyperparameters"]["seed"] == 2
    assert main(["predict", "--model", str(out), "--input", str(tmp_path / "docs.csv"),
                 "--out", str(tmp_path / "p.csv"), "--quiet"]) == 0
    assert "1 of 8 document(s) have a missing or empty text" in capsys.readouterr().err
    got = pd.read_csv(tmp_path / "p.csv")
    assert got["doc_id"].tolist() == docs["doc_id"].tolist()
    assert list(got.columns) == ["doc_id", "label", "year", "predicted", "prob_econ",
                                 "prob_other", "backend"]
    want = NLIClassifier.from_dir(out).predict(docs.drop(index=2))
    np.testing.assert_allclose(got[["prob_econ", "prob_other"]].drop(index=2).to_numpy(),
                               want[["prob_econ", "prob_other"]].to_numpy(), atol=1e-6)


@pytest.mark.parametrize("extra, message", [
    (["--method", "nli"], "needs an NLI model"),
    (["--method", "nli", "--label-phrases", "econ=money"], "'other' have no label phrase"),
    (["--label-phrases", "econ=money,other=x"], "--label-phrases is for --method nli"),
])
def test_cli_bad_nli_input_exit_2_and_no_output(tiny_bert_dir, tiny_roberta_nli_dir, tmp_path,
                                                capsys, extra, message):
    toy_frame(16).to_csv(tmp_path / "train.csv", index=False)
    model = tiny_bert_dir if "needs" in message else tiny_roberta_nli_dir
    assert main(["finetune", "--train", str(tmp_path / "train.csv"), "--model", str(model),
                 *extra, "--epochs", "1", "--out", str(tmp_path / "m"), "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_onnx_backend_matches_torch(nli_model, tmp_path):
    import shutil

    from quantformer.infer.classifier import Classifier

    _, out = nli_model
    copy = tmp_path / "m"
    shutil.copytree(out, copy)  # the export is cached inside the model folder
    docs = toy_frame(6)
    torch_pred = load_model(copy).predict(docs)
    onnx_pred = load_model(copy, backend="onnx").predict(docs)
    assert onnx_pred["backend"].unique().tolist() == ["onnx fp32"]
    np.testing.assert_allclose(onnx_pred[["prob_econ", "prob_other"]].to_numpy(),
                               torch_pred[["prob_econ", "prob_other"]].to_numpy(), atol=1e-4)
    with pytest.raises(InputError, match="an NLI model's int8 has no fp32 recheck"):
        load_model(copy, backend="onnx", quantize="int8", recheck_margin=0.1)
    with pytest.raises(InputError, match=r"method 'nli'; load it with quantformer.load"):
        Classifier.from_dir(copy)  # the standard loader knows one method


def test_compare_knows_nli(tiny_roberta_nli_dir):
    from quantformer.select.compare import compare, parse_models

    assert parse_models("nli,default") == ["nli", "default"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = compare(toy_frame(16), toy_frame(24).iloc[16:], models="nli",
                      model=str(tiny_roberta_nli_dir), repeats=1, quiet=True,
                      finetune_kwargs={"epochs": 1, "device": "cpu"})
    assert list(res.table["model"]) == ["nli"]
    assert "Laurer et al. 2023" in res.table["description"].iloc[0]
    # one run: the table's mean is that run's score
    assert res.table.filter(like="f1_mean").iloc[0, 0] == res.results["macro_f1"].iloc[0]
    assert res.runs[0]["epochs"] == 1


def test_compare_passes_the_nli_options_to_every_nli_run(tiny_roberta_nli_dir, monkeypatch):
    import quantformer.select.compare as compare_module
    from quantformer.select.compare import compare

    records, real = [], compare_module.finetune_spec

    def spy(*args, **kwargs):
        clf = real(*args, **kwargs)
        records.append(clf.record)
        return clf

    monkeypatch.setattr(compare_module, "finetune_spec", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = compare(toy_frame(16), toy_frame(24).iloc[16:], models="nli",
                      model=str(tiny_roberta_nli_dir), train_sizes=[10, 16], repeats=1,
                      quiet=True, finetune_kwargs={"epochs": 1, "device": "cpu"},
                      hypothesis=TEMPLATE, label_phrases="econ=money and taxes,"
                      "other=something else", nli_pairs="all")
    assert [r["train_size"] for r in res.runs] == [10, 16]
    assert [r["n_pairs"] for r in records] == [10 * 2, 16 * 2]  # "all": both hypotheses
    for record in records:
        assert record["method"] == "nli" and record["hypothesis"] == TEMPLATE
        assert record["label_phrases"] == PHRASES and record["nli_pairs"] == "all"
    assert res.summary["nli"] == {"hypothesis": TEMPLATE, "label_phrases": PHRASES,
                                  "nli_pairs": "all"}
    assert ("nli: hypothesis template 'The text is about {}.', class hypotheses econ: 'The "
            "text is about money and taxes.'; other: 'The text is about something else.'; "
            "training pairs all.") in res.markdown()


def test_compare_nli_options_belong_to_compare_not_finetune_kwargs(tiny_roberta_nli_dir):
    from quantformer.select.compare import compare

    with pytest.raises(InputError, match="give hypothesis, nli_pairs to compare itself, "
                       "not in finetune_kwargs"):
        compare(toy_frame(16), toy_frame(8), models="nli", model=str(tiny_roberta_nli_dir),
                finetune_kwargs={"hypothesis": TEMPLATE, "nli_pairs": "all"})


def test_nli_label_phrases_follow_the_compare_sample():
    from quantformer.select.methods import sample_kwargs

    kwargs = {"method": "nli", "label_phrases": {"a": "x", "b": "y", "c": "z"}}
    assert sample_kwargs(kwargs, ["c", "a"])["label_phrases"] == {"a": "x", "c": "z"}
    assert kwargs["label_phrases"] == {"a": "x", "b": "y", "c": "z"}  # not changed
    assert sample_kwargs({"method": "setfit"}, ["a"]) == {"method": "setfit"}


def test_cli_compare_nli_writes_its_settings(tiny_roberta_nli_dir, tmp_path):
    toy_frame(16).to_csv(tmp_path / "train.csv", index=False)
    toy_frame(24).iloc[16:].to_csv(tmp_path / "test.csv", index=False)
    (tmp_path / "phrases.txt").write_text("econ=money, taxes and jobs\n\nother=something else\n")
    args = ["compare", "--models", "nli", "--model", str(tiny_roberta_nli_dir), "--train",
            str(tmp_path / "train.csv"), "--test", str(tmp_path / "test.csv"), "--repeats", "1",
            "--epochs", "1", "--quiet"]
    assert main([*args, "--hypothesis", TEMPLATE, "--label-phrases-file",
                 str(tmp_path / "phrases.txt"), "--out", str(tmp_path / "c")]) == 0
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    phrases = {"econ": "money, taxes and jobs", "other": "something else"}
    assert summary["nli"] == {"hypothesis": TEMPLATE, "label_phrases": phrases,
                              "nli_pairs": "balanced"}
    assert "class hypotheses econ: 'The text is about money, taxes and jobs.'" in \
        (tmp_path / "c" / "table.md").read_text()
    # without options: the default template and the class names, recorded too
    assert main([*args, "--out", str(tmp_path / "d")]) == 0
    summary = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert summary["nli"] == {"hypothesis": "This text is about {}.", "nli_pairs": "balanced",
                              "label_phrases": {"econ": "econ", "other": "other"}}


@pytest.mark.parametrize("extra, message", [
    (["--models", "default,svm-bow", "--hypothesis", TEMPLATE],
     "--hypothesis is for compare's nli model; add nli to --models"),
    (["--models", "default,svm-bow", "--label-phrases", "econ=x,other=y", "--nli-pairs", "all"],
     "--label-phrases, --nli-pairs is for compare's nli model"),
    (["--models", "default,ridge-bow", "--task", "regression", "--nli-pairs", "all"],
     "--nli-pairs is for compare's nli model"),
    (["--models", "nli"], "needs an NLI model"),
    (["--models", "svm-bow,nli", "--label-phrases", "econ=money"],
     "'other' have no label phrase"),
    (["--models", "nli", "--label-phrases", "econ=x,other=y,tax=z"],
     "names class(es) 'tax' that are not among the classes"),
    (["--models", "nli", "--hypothesis", "no placeholder"], "{}"),
    (["--models", "nli", "--label-phrases-file", "absent.txt"],
     "label phrases file not found: 'absent.txt'"),
])
def test_cli_compare_bad_nli_input_exit_2_before_any_run(tiny_bert_dir, tiny_roberta_nli_dir,
                                                         tmp_path, capsys, extra, message):
    toy_frame(16).to_csv(tmp_path / "train.csv", index=False)
    model = tiny_bert_dir if "needs" in message else tiny_roberta_nli_dir
    out = tmp_path / "c"
    assert main(["compare", "--train", str(tmp_path / "train.csv"), "--test",
                 str(tmp_path / "train.csv"), "--model", str(model), *extra, "--repeats", "1",
                 "--folds", "2", "--epochs", "1", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "compare:" not in captured.out
    assert not out.exists()


def test_evaluate_calibrate_and_predict_calibrated_on_an_nli_model(nli_model, tmp_path,
                                                                   capsys):
    import shutil

    from quantformer.score.calibration import apply_temperature

    _, out = nli_model
    model = tmp_path / "m"
    shutil.copytree(out, model)  # calibrate writes into the folder
    toy_frame(24).to_csv(tmp_path / "valid.csv", index=False)
    assert main(["evaluate", "--model", str(model), "--input", str(tmp_path / "valid.csv")]) == 0
    assert "macro" in capsys.readouterr().out.lower()
    args = ["predict", "--model", str(model), "--input", str(tmp_path / "valid.csv"), "--quiet"]
    assert main([*args, "--out", str(tmp_path / "p.csv")]) == 0
    assert main(["calibrate", "--model", str(model), "--pred", str(tmp_path / "p.csv")]) == 0
    record = json.loads((model / "quantformer.json").read_text())
    assert record["method"] == "nli" and record["calibration"]["n"] == 24
    assert main([*args, "--calibrated", "--out", str(tmp_path / "c.csv")]) == 0
    raw = pd.read_csv(tmp_path / "p.csv")[["prob_econ", "prob_other"]].to_numpy()
    np.testing.assert_allclose(pd.read_csv(tmp_path / "c.csv")[["prob_econ", "prob_other"]],
                               apply_temperature(raw, record["calibration"]["temperature"]),
                               atol=1e-6)


# ------------------------------------------------------------------------------------------
# tune --method nli (issue 13: "compare and tune know it as a model")


def test_tune_method_nli_grids_rates_and_passes_the_hypotheses(tiny_roberta_nli_dir):
    from quantformer.select.tune import default_grid, tune
    from quantformer.select.methods import GRID_NLI

    assert default_grid(str(tiny_roberta_nli_dir), "nli") == ([1e-5, 2e-5, 5e-5], [7, 10])
    assert GRID_NLI == ((1e-5, 2e-5, 5e-5), (7, 10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tune(toy_frame(12), toy_frame(20).iloc[12:], model=str(tiny_roberta_nli_dir),
                   method="nli", hypothesis=TEMPLATE, label_phrases="econ=money and taxes,"
                   "other=something else", nli_pairs="all", lrs=[1e-3, 1e-4], epochs_grid=[1],
                   folds=2, device="cpu", quiet=True)
    assert len(res.cv_results) == 4 and set(res.cv_results["lr"]) == {1e-3, 1e-4}
    # the best rate has the highest mean fold score (ties: the lower rate)
    assert res.best["lr"] == res.cv_results.groupby("lr")["macro_f1"].mean().idxmax()
    assert isinstance(res.model, NLIClassifier)
    record = res.model.record
    assert record["method"] == "nli" and record["hypothesis"] == TEMPLATE
    assert record["label_phrases"] == PHRASES and record["nli_pairs"] == "all"
    assert record["hyperparameters"]["lr"] == res.best["lr"]
    assert record["n_pairs"] == 12 * 2  # "all": every document with both hypotheses
    assert res.info["method"] == "nli" and res.info["hypothesis"] == TEMPLATE
    assert res.info["label_phrases"] == PHRASES and res.test_report.n == 8
    assert res.test_predictions["doc_id"].tolist() == toy_frame(20).iloc[12:]["doc_id"].tolist()


def test_cli_tune_method_nli_writes_its_settings(tiny_roberta_nli_dir, tmp_path, capsys):
    toy_frame(12).to_csv(tmp_path / "train.csv", index=False)
    out = tmp_path / "t"
    code = cli_nli("tune", tiny_roberta_nli_dir, tmp_path, "--lrs", "1e-3", "--epochs-grid", "1",
                   "--folds", "2", "--out", str(out))
    assert code == 0
    best = json.loads((out / "best.json").read_text())
    assert best["method"] == "nli" and best["lr"] == 1e-3 and best["epochs"] == 1
    assert best["hypothesis"] == TEMPLATE and best["nli_pairs"] == "balanced"
    assert best["label_phrases"] == {"econ": "money, taxes and jobs", "other": "something else"}
    record = json.loads((out / "model" / "quantformer.json").read_text())
    assert record["method"] == "nli" and record["label_phrases"] == best["label_phrases"]


@pytest.mark.parametrize("extra, message", [
    (["--method", "nli"], "needs an NLI model"),
    (["--method", "nli", "--label-phrases", "econ=money"], "'other' have no label phrase"),
    (["--method", "nli", "--oversample", "0.5"], "--oversample cannot be used with --method nli"),
    (["--method", "nli", "--hypothesis", "no placeholder"], "{}"),
    (["--method", "nli", "--setfit-iterations", "2"], "--setfit-iterations is for --method setfit"),
    (["--label-phrases", "econ=money,other=x"], "--label-phrases is for --method nli"),
    (["--method", "setfit", "--nli-pairs", "all"], "--nli-pairs is for --method nli"),
])
def test_cli_tune_bad_nli_input_exit_2_before_any_run(tiny_bert_dir, tiny_roberta_nli_dir,
                                                      tmp_path, capsys, extra, message):
    toy_frame(12).to_csv(tmp_path / "train.csv", index=False)
    model = tiny_bert_dir if "needs" in message else tiny_roberta_nli_dir
    out = tmp_path / "t"
    assert main(["tune", "--train", str(tmp_path / "train.csv"), "--model", str(model), *extra,
                 "--epochs-grid", "1", "--folds", "2", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "run 1/" not in captured.out
    assert not out.exists()


# ------------------------------------------------------------------------------------------
# tokenize --model on an NLI model: documents with their hypotheses


def test_cli_tokenize_counts_the_pairs_prediction_cuts(nli_model, tiny_roberta_nli_dir, tmp_path,
                                                       capsys):
    import shutil

    from quantformer.infer.zeroshot_nli import nli_pair_logits

    _, out = nli_model
    model = tmp_path / "m"
    shutil.copytree(out, model)
    record = json.loads((model / "quantformer.json").read_text())
    record["hyperparameters"]["max_length"] = 64  # what predict then uses too
    (model / "quantformer.json").write_text(json.dumps(record))
    docs = toy_frame(20)
    docs.loc[3, "text"] = None
    docs.to_csv(tmp_path / "docs.csv", index=False)
    assert main(["tokenize", "--model", str(model), "--input", str(tmp_path / "docs.csv"),
                 "--ids", "--out", str(tmp_path / "n.parquet")]) == 0
    hyps = [TEMPLATE.format(PHRASES["econ"]), TEMPLATE.format(PHRASES["other"])]
    assert (f"each document is counted with its longest class hypothesis, '{hyps[1]}' (14 "
            "tokens)") in capsys.readouterr().out
    stats = pd.read_parquet(tmp_path / "n.parquet")
    assert stats["doc_id"].tolist() == docs["doc_id"].tolist()
    clf = NLIClassifier.from_dir(model)
    texts = docs["text"].drop(index=3).tolist()
    # n_tokens: the longest (document, hypothesis) pair, special tokens included
    want = [max(len(clf.tokenizer(t, h)["input_ids"]) for h in hyps) for t in texts]
    assert stats["n_tokens"].drop(index=3).tolist() == want and stats.loc[3, "n_tokens"] == 0
    # truncated: exactly the documents prediction cuts in one of their pairs
    _, cut = nli_pair_logits(clf.model, clf.tokenizer, texts, clf.hypotheses(), max_length=64,
                             truncation=clf.truncation, batch_size=8, device="cpu",
                             progress=False)
    assert stats["truncated"].drop(index=3).tolist() == cut.tolist()
    assert 0 < cut.sum() < len(texts) and not stats.loc[3, "truncated"]
    # the longer hypothesis decides: some documents fit beside the shorter one
    short = [len(clf.tokenizer(t, hyps[0])["input_ids"]) > 64 for t in texts]
    assert sum(short) < cut.sum()
    assert stats["input_ids"].drop(index=3).map(len).max() == 64
    # alone (the base NLI model has no hypotheses), every document fits in 64 tokens
    assert main(["tokenize", "--model", str(tiny_roberta_nli_dir), "--input",
                 str(tmp_path / "docs.csv"), "--max-length", "64", "--out",
                 str(tmp_path / "alone.csv")]) == 0
    assert "hypothesis" not in capsys.readouterr().out
    assert pd.read_csv(tmp_path / "alone.csv")["truncated"].sum() == 0
