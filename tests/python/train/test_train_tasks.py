"""Issue 15: regression and multi-label fine-tuning, early stopping, precision, gradient
accumulation, the train/ parts and their bad inputs (tiny models, one epoch)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from toydata import multilabel_frame, regression_frame, toy_frame

import quantformer
from quantformer.cli import main as cli
from quantformer._core.errors import InputError
from quantformer.models.precision import bf16_support
from quantformer.train.finetune import finetune
from quantformer.train.loop import Batches, train_loop

FAST = {"epochs": 1, "quiet": True, "device": "cpu", "max_length": 32, "lr": 1e-3}


# ---- regression


def test_regression_trains_records_and_round_trips(tmp_path, tiny_bert_dir):
    frame = regression_frame()
    frame.loc[2, "label"] = None
    clf = finetune(frame, model=str(tiny_bert_dir), task="regression", valid_fraction=0.25,
                   **FAST)
    rec = clf.record
    assert rec["task"] == "regression" and rec["n_missing_label"] == 1
    assert 1900 < rec["target_mean"] < 1970 and 10 < rec["target_scale"] < 30
    assert clf.model.config.problem_type == "regression" and clf.model.config.num_labels == 1
    assert set(rec["validation"]) >= {"rmse", "mae", "pearson", "spearman", "r2", "n"}
    assert rec["validation"]["n"] == 6
    pred = clf.predict(frame)
    assert list(pred.columns) == ["doc_id", "label", "year", "predicted", "backend"]
    assert pred["predicted"].dtype == np.float64
    # standardised targets are mapped back: predictions live on the outcome's scale
    assert pred["predicted"].between(1850, 2020).all()
    clf.save(tmp_path / "m")
    again = quantformer.load(tmp_path / "m", device="cpu").predict(frame)
    np.testing.assert_allclose(again["predicted"], pred["predicted"], rtol=1e-6)


@pytest.mark.parametrize("change, msg", [
    ({"label": ["1999"] * 10 + ["about 2001"] + ["2003"] * 13}, "'about 2001' is not a number"),
    ({"label": ["1999"] * 24}, "every training value of the label column is 1999"),
])
def test_regression_bad_labels(tiny_bert_dir, change, msg):
    with pytest.raises(InputError, match=msg):
        finetune(toy_frame(24).assign(**change), model=str(tiny_bert_dir), task="regression",
                 **FAST)


@pytest.mark.parametrize("kw, msg", [
    ({"oversample": 0.5}, "oversample balances classes and has no meaning for task "
                          "regression"),
    ({"labels": ["a", "b"]}, "labels orders classes"),
    ({"label_cols": ["econ"]},
     "label_cols is for task multilabel; add task multilabel or leave it out"),
    ({"tune_thresholds": True, "valid_fraction": 0.2}, "tune_thresholds is for task "
                                                        "multilabel"),
])
def test_regression_refuses_options_of_other_tasks(tiny_bert_dir, kw, msg):
    with pytest.raises(InputError, match=msg):
        finetune(regression_frame(), model=str(tiny_bert_dir), task="regression",
                 **{**FAST, **kw})


def test_cli_regression_finetune_predict_evaluate(tmp_path, tiny_bert_dir, capsys):
    data = tmp_path / "train.csv"
    regression_frame().to_csv(data, index=False)
    out = tmp_path / "model"
    assert cli.main(["finetune", "--train", str(data), "--model", str(tiny_bert_dir),
                     "--task", "regression", "--epochs", "1", "--max-length", "32",
                     "--device", "cpu", "--quiet", "--out", str(out)]) == 0
    assert json.loads((out / "quantformer.json").read_text())["task"] == "regression"
    assert "regression model" in (out / "README.md").read_text()
    preds = tmp_path / "p.parquet"
    assert cli.main(["predict", "--model", str(out), "--input", str(data), "--out", str(preds),
                     "--device", "cpu", "--quiet"]) == 0
    got = pd.read_parquet(preds)
    assert got["predicted"].dtype == np.float64 and len(got) == 24
    capsys.readouterr()
    report, png = tmp_path / "r.json", tmp_path / "scatter.png"
    assert cli.main(["evaluate", "--model", str(out), "--input", str(data), "--out",
                     str(report), "--plot", str(png), "--device", "cpu", "--quiet"]) == 0
    result = json.loads(report.read_text())
    assert result["n"] == 24 and result["task"] == "regression"
    truth = regression_frame()["label"].astype(float).to_numpy()
    rmse = float(np.sqrt(np.mean((got["predicted"].to_numpy() - truth) ** 2)))
    assert result["rmse"] == pytest.approx(rmse, rel=1e-5)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "rmse" in capsys.readouterr().out


def test_regression_metrics_against_hand_computed_values():
    from quantformer.score.metrics import regression_metrics

    m = regression_metrics([1, 2, 3, 4, None], [1.5, 2, 2.5, 5, 3])
    assert m["n"] == 4 and m["n_missing"] == 1
    assert m["rmse"] == pytest.approx(np.sqrt((0.25 + 0 + 0.25 + 1) / 4))
    assert m["mae"] == pytest.approx(0.5)
    assert m["r2"] == pytest.approx(1 - 1.5 / 5)
    assert m["spearman"] == pytest.approx(1.0)
    with pytest.raises(InputError, match="fewer than 2 documents"):
        regression_metrics([1, None], [1, 2])


# ---- multi-label


def test_multilabel_columns_train_predict_round_trip(tmp_path, tiny_bert_dir):
    frame = multilabel_frame()
    clf = finetune(frame, model=str(tiny_bert_dir), task="multilabel",
                   label_cols=["econ", "long"], valid_fraction=0.25, tune_thresholds=True,
                   **FAST)
    rec = clf.record
    assert rec["task"] == "multilabel" and rec["labels"] == ["econ", "long"]
    assert clf.model.config.problem_type == "multi_label_classification"
    assert set(rec["thresholds"]) == {"econ", "long"}
    assert all(0.05 <= t <= 0.95 for t in rec["thresholds"].values())
    assert {"micro_f1", "macro_f1", "subset_accuracy", "hamming_loss"} <= set(rec["validation"])
    pred = clf.predict(frame)
    assert [c for c in pred.columns if c.startswith(("prob_", "predicted_"))] == [
        "prob_econ", "prob_long", "predicted_econ", "predicted_long"]
    probs = pred[["prob_econ", "prob_long"]].to_numpy()
    assert ((probs > 0) & (probs < 1)).all()  # sigmoid per label, not a softmax
    cut = rec["thresholds"]["econ"]
    assert (pred["predicted_econ"].to_numpy(dtype=bool) == (probs[:, 0] >= cut)).all()
    clf.save(tmp_path / "m")
    again = quantformer.load(tmp_path / "m", device="cpu").predict(frame)
    pd.testing.assert_frame_equal(again, pred, rtol=1e-6)


def test_multilabel_separator_and_default_thresholds(tiny_bert_dir):
    frame = toy_frame(24)
    frame["label"] = ["econ|long" if i % 3 == 0 else ("long" if i % 3 == 1 else "")
                      for i in range(24)]
    clf = finetune(frame, model=str(tiny_bert_dir), task="multilabel", label_sep="|", **FAST)
    assert clf.record["labels"] == ["econ", "long"]
    assert clf.record["label_counts"] == {"econ": 8, "long": 16}
    assert clf.record["thresholds"] == {"econ": 0.5, "long": 0.5}
    # a seed gives identical outputs
    again = finetune(frame, model=str(tiny_bert_dir), task="multilabel", label_sep="|", **FAST)
    np.testing.assert_array_equal(again.predict_proba(frame), clf.predict_proba(frame))


def test_multilabel_metrics_against_hand_computed_values():
    from quantformer.score.metrics import multilabel_metrics

    truth = np.array([[1, 0], [1, 1], [0, 1], [0, 0]])
    pred = np.array([[1, 0], [0, 1], [0, 1], [1, 0]])
    m = multilabel_metrics(truth, pred, ["a", "b"])
    assert m["subset_accuracy"] == 0.5
    assert m["hamming_loss"] == pytest.approx(2 / 8)
    assert m["per_label"]["a"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2}
    assert m["per_label"]["b"]["f1"] == 1.0 and m["macro_f1"] == pytest.approx(0.75)
    assert m["micro_f1"] == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))


@pytest.mark.parametrize("change, kw, msg", [
    ({"econ": ["yes"] + [0] * 23}, {},
     "label column 'econ' \\(label_cols\\) must hold 0/1 values, but it has 'yes' \\(row 1\\)"),
    # review finding: a float column (R numbers, or a column with NA) said "2.0"; the row is
    # the file's (R's document number), not the row among the coded documents
    ({"econ": [0.0, 1.0, None, 2.0] + [0.0] * 20}, {},
     "label column 'econ' \\(label_cols\\) must hold 0/1 values, but it has 2 \\(row 4\\); "
     "recode it as 0/1"),
    ({"long": [0] * 24}, {}, "label 'long' is present in no training document"),
    ({}, {"oversample": 0.5}, "oversample balances the classes of a single-label"),
    ({}, {"label_cols": None}, "task multilabel needs either label_cols"),
    ({}, {"label_cols": ["econ", "nope"]}, "no column 'nope' of label_cols"),
])
def test_multilabel_bad_inputs(tiny_bert_dir, change, kw, msg):
    frame = multilabel_frame().assign(**change)
    args = {**FAST, "label_cols": ["econ", "long"], **kw}
    with pytest.raises(InputError, match=msg):
        finetune(frame, model=str(tiny_bert_dir), task="multilabel", **args)


def test_cli_multilabel_and_bad_flags(tmp_path, tiny_bert_dir, capsys):
    data = tmp_path / "train.csv"
    multilabel_frame().drop(columns="label").to_csv(data, index=False)
    out = tmp_path / "model"
    base = ["finetune", "--train", str(data), "--model", str(tiny_bert_dir), "--epochs", "1",
            "--max-length", "32", "--device", "cpu", "--quiet"]
    assert cli.main(base + ["--task", "multilabel", "--label-cols", "econ,long", "--out",
                            str(out)]) == 0
    preds = tmp_path / "p.csv"
    assert cli.main(["predict", "--model", str(out), "--input", str(data), "--out", str(preds),
                     "--device", "cpu", "--quiet"]) == 0
    got = pd.read_csv(preds)
    assert {"prob_econ", "predicted_long"} <= set(got.columns)
    report = tmp_path / "r.json"
    assert cli.main(["evaluate", "--model", str(out), "--input", str(data), "--out",
                     str(report), "--device", "cpu", "--quiet"]) == 0
    assert set(json.loads(report.read_text())["per_label"]) == {"econ", "long"}
    capsys.readouterr()
    bad = cli.main(base + ["--task", "regression", "--label-col", "year", "--oversample", "0.5",
                           "--out",
                           str(tmp_path / "x")])
    assert bad == 2 and not (tmp_path / "x").exists()
    assert "--oversample" in capsys.readouterr().err


# ---- early stopping, precision, gradient accumulation


def test_train_loop_restores_the_best_epoch_on_a_crafted_curve(tiny_bert_dir):
    """Validation scores 0.5, 0.9, 0.6, 0.4, ... with patience 2: the loop runs 4 epochs and
    ends with the weights it had after epoch 2."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from quantformer.models.tokenize import encode

    torch.manual_seed(0)
    network = AutoModelForSequenceClassification.from_pretrained(str(tiny_bert_dir),
                                                                 num_labels=2)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    frame = toy_frame(16)
    enc = encode(tokenizer, frame["text"].tolist(), max_length=32, truncation="head")
    batches = Batches(enc, np.arange(16), (frame["label"] == "econ").to_numpy(np.int64),
                      tokenizer.pad_token_id)
    scores, states = iter([0.5, 0.9, 0.6, 0.4, 0.95, 0.99]), []

    def validate():
        states.append({k: v.clone() for k, v in network.state_dict().items()})
        return next(scores)

    result = train_loop(network, batches, epochs=6, lr=1e-2, batch_size=8, grad_accum=1,
                        precision="fp32", device="cpu", rng=np.random.default_rng(1),
                        validate=validate, early_stopping=2, quiet=True)
    assert result.best_epoch == 2 and len(result.losses) == 4
    assert result.curve == [0.5, 0.9, 0.6, 0.4]
    final = network.state_dict()
    assert all(torch.equal(final[k], states[1][k]) for k in final)
    assert not all(torch.equal(final[k], states[3][k]) for k in final)


def test_early_stopping_record_and_needs_validation(tiny_bert_dir):
    frame = toy_frame(24)
    clf = finetune(frame, model=str(tiny_bert_dir), valid_fraction=0.25, early_stopping=1,
                   **{**FAST, "epochs": 3})
    curve = clf.record["validation_curve"]
    assert curve["metric"] == "macro_f1" and 1 <= curve["kept_epoch"] <= curve["epochs_run"]
    assert len(curve["per_epoch"]) == curve["epochs_run"] == len(
        clf.record["train_loss_per_epoch"])
    assert curve["per_epoch"][curve["kept_epoch"] - 1] == max(curve["per_epoch"])
    # the restored model's validation score is the kept epoch's
    assert clf.record["validation"]["macro_f1"] == pytest.approx(
        curve["per_epoch"][curve["kept_epoch"] - 1], abs=1e-6)
    assert clf.record["hyperparameters"]["early_stopping"] == 1
    with pytest.raises(InputError, match="early_stopping needs validation data: give valid or valid_fraction"):
        finetune(frame, model=str(tiny_bert_dir), early_stopping=2, **FAST)


def test_bf16_on_cpu_trains_and_predicts_and_fp16_is_refused(tiny_bert_dir):
    frame = toy_frame(16)
    clf = finetune(frame, model=str(tiny_bert_dir), precision="bf16", **FAST)
    assert clf.record["hyperparameters"]["precision"] == "bf16"
    probs = clf.predict_proba(frame)
    assert np.isfinite(probs).all() and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    native = bf16_support("cpu")[0]  # auto on CPU: bf16 where native (issue 37), else fp32
    assert finetune(frame, model=str(tiny_bert_dir), **FAST).record[
        "hyperparameters"]["precision"] == ("bf16" if native else "fp32")
    with pytest.raises(InputError, match="^precision fp16 needs a CUDA GPU"):
        finetune(frame, model=str(tiny_bert_dir), precision="fp16", **FAST)
    with pytest.raises(InputError, match="^precision must be one of"):
        finetune(frame, model=str(tiny_bert_dir), precision="fp8", **FAST)


def test_grad_accum_steps_less_often(tiny_bert_dir):
    frame = toy_frame(32)
    kw = {**FAST, "batch_size": 8, "seed": 3}
    one = finetune(frame, model=str(tiny_bert_dir), **kw)
    four = finetune(frame, model=str(tiny_bert_dir), grad_accum=4, **kw)
    assert four.record["hyperparameters"]["grad_accum"] == 4
    # 4 batches of 8 = one optimisation step instead of four: different weights
    assert np.abs(one.predict_proba(frame) - four.predict_proba(frame)).max() > 1e-6
    with pytest.raises(InputError, match="^grad_accum must be a whole number greater than 0"):
        finetune(frame, model=str(tiny_bert_dir), grad_accum=0, **FAST)


# ---- tune and compare share the parameter table; the task goes to compare itself


def test_tune_and_compare_check_arguments_before_any_work():
    from quantformer.select.compare import compare
    from quantformer.select.tune import tune

    frame = toy_frame(40)
    with pytest.raises(InputError, match="^oversample must be a ratio in \\(0, 1\\]"):
        tune(frame, oversample=2.0, quiet=True)
    with pytest.raises(InputError, match="max_length must be a whole number of tokens of at "
                                         "least 8 \\(special tokens included\\), not 0"):
        tune(frame, max_length=0, quiet=True)
    with pytest.raises(InputError, match="give task to compare itself"):
        compare(frame, frame, models="default", finetune_kwargs={"task": "regression"},
                quiet=True)
    with pytest.raises(InputError, match="^task must be one of"):
        tune(frame, task="ordinal", quiet=True)
    with pytest.raises(InputError, match="lr must be a number greater than 0"):
        compare(frame, frame, models="default", finetune_kwargs={"lr": -1.0}, quiet=True)


def test_cli_evaluate_pred_regression(tmp_path, capsys):
    pred = tmp_path / "p.csv"
    pd.DataFrame({"doc_id": ["a", "b", "c", "d"], "predicted": [1.5, 2, 2.5, 5],
                  "truth": [1, 2, 3, 4]}).to_csv(pred, index=False)
    out, png = tmp_path / "r.json", tmp_path / "s.png"
    assert cli.main(["evaluate", "--pred", str(pred), "--truth-col", "truth", "--task",
                     "regression", "--out", str(out), "--plot", str(png)]) == 0
    assert json.loads(out.read_text())["mae"] == pytest.approx(0.5)
    assert png.read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert cli.main(["evaluate", "--pred", str(pred), "--truth", str(pred), "--truth-col",
                     "truth", "--task", "regression"]) == 2
    assert "give exactly one of --truth (a file) or --truth-col" in capsys.readouterr().err


# ---- numeric labels read as classes (issue 27, point 2)


def test_numeric_labels_with_many_values_warn_and_name_task_regression():
    from quantformer.models.tasks import NUMERIC_CLASSES_MAX, Classification, TrainingWarning

    years = regression_frame()  # 24 distinct years, 1900 ... 1969
    with pytest.warns(TrainingWarning) as caught:
        Classification().fit(years)
    numeric = [w.message for w in caught if "every label is a number" in str(w.message)]
    assert len(numeric) == 1
    assert str(numeric[0]).startswith(
        "every label is a number and there are 24 distinct ones (1900, 1903, ..., 1969); they "
        "become 24 classes")
    assert cli.warning_text(numeric[0], None).endswith(
        "pass --task regression; to keep them as classes, list them with --labels")
    assert cli.warning_text(numeric[0], ["x", "y", "task"]).endswith(
        'pass `task = "regression"`; to keep them as classes, list them with `y`')
    # at the threshold, with words among the labels, or with the classes listed: no warning
    codes = years.iloc[:NUMERIC_CLASSES_MAX * 2].assign(
        label=[str(i % NUMERIC_CLASSES_MAX) for i in range(NUMERIC_CLASSES_MAX * 2)])
    worded = years.assign(label=years["label"].where(years.index > 0, "none"))
    for frame, kw in ((codes, {}), (worded, {}), (years, {"labels": years["label"]})):
        with warnings.catch_warnings(record=True) as quiet:
            warnings.simplefilter("always")
            Classification(**kw).fit(frame)
        assert [str(w.message) for w in quiet if "is a number" in str(w.message)] == []


def test_cli_finetune_warns_about_numeric_labels_before_training(tmp_path, tiny_bert_dir,
                                                                  capsys):
    data = tmp_path / "years.csv"
    regression_frame().to_csv(data, index=False)
    assert cli.main(["finetune", "--train", str(data), "--model", str(tiny_bert_dir),
                     "--epochs", "1", "--max-length", "32", "--device", "cpu", "--quiet",
                     "--out", str(tmp_path / "model")]) == 0
    err = capsys.readouterr().err
    assert "quantformer: warning: every label is a number and there are 24 distinct ones" in err
    assert "pass --task regression;" in err
