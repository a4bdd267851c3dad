"""Issue 15, second pass: tune and compare for regression and multi-label tasks (tiny models,
one epoch), their baselines and their refusals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from toydata import multilabel_frame, regression_frame

import quantformer
from quantformer.cli import main as cli
from quantformer._core.errors import InputError
from quantformer.select.tune import summarise_cv, tune

FT = {"epochs": 1, "lr": 1e-3, "max_length": 32, "device": "cpu"}


def test_summarise_cv_ranks_rmse_lowest_first_and_keeps_the_other_mean():
    cv = pd.DataFrame({"lr": [1e-4, 1e-4, 5e-5, 5e-5], "epochs": [2, 2, 2, 2], "fold": [1, 2] * 2,
                       "rmse": [3.0, 5.0, 2.0, 2.0], "pearson": [0.1, 0.3, 0.5, 0.7]})
    s = summarise_cv(cv, "rmse", higher_is_better=False, also=("pearson",))
    assert s.columns.tolist() == ["lr", "epochs", "mean_rmse", "sd_rmse", "mean_pearson",
                                  "folds", "rank"]
    assert s["lr"].tolist() == [5e-5, 1e-4] and s["mean_rmse"].tolist() == [2.0, 4.0]
    assert s["mean_pearson"].tolist() == pytest.approx([0.6, 0.2])
    assert s["sd_rmse"].tolist() == pytest.approx([0.0, np.sqrt(2)])


def test_tune_regression_selects_by_rmse_and_scores_the_test_set(tiny_bert_dir, tmp_path):
    frame = regression_frame(30)
    res = tune(frame.iloc[:22], frame.iloc[22:], model=str(tiny_bert_dir), lrs=[1e-3, 1e-4],
               epochs_grid=[1], folds=2, task="regression", max_length=32, device="cpu",
               quiet=True)  # with the time estimate (one timed training step)
    assert res.cv_results.columns.tolist() == ["lr", "epochs", "fold", "rmse", "pearson",
                                               "seconds"]
    summ = res.cv_summary
    assert summ["mean_rmse"].is_monotonic_increasing and summ["rank"].tolist() == [1, 2]
    assert res.best["lr"] == summ["lr"][0] and res.best["mean_rmse"] == summ["mean_rmse"][0]
    assert "mean_pearson" in res.best
    assert res.model.record["task"] == "regression"
    pred = res.test_predictions
    assert pred["doc_id"].tolist() == frame["doc_id"].iloc[22:].tolist()
    truth = frame["label"].iloc[22:].astype(float).to_numpy()
    rmse = float(np.sqrt(np.mean((pred["predicted"].to_numpy() - truth) ** 2)))
    assert res.test_report["rmse"] == pytest.approx(rmse) and res.test_report["n"] == 8
    out = res.save(tmp_path / "tuned")
    best = json.loads((out / "best.json").read_text())
    assert best["task"] == "regression" and best["metric"] == "rmse"
    assert best["test"]["rmse"] == pytest.approx(rmse)
    assert json.loads((out / "test_report.json").read_text())["task"] == "regression"
    assert quantformer.load(out / "model").record["task"] == "regression"


def test_tune_multilabel_label_sep_uses_plain_folds_and_macro_f1(tiny_bert_dir):
    frame = multilabel_frame(24)
    frame["label"] = ["|".join(lab for lab, v in (("econ", e), ("long", g)) if v)
                      for e, g in zip(frame["econ"], frame["long"])]
    frame = frame.drop(columns=["econ", "long"])
    res = tune(frame, model=str(tiny_bert_dir), lrs=[1e-3], epochs_grid=[1], folds=3,
               task="multilabel", label_sep="|", max_length=32, device="cpu", quiet=True,
               estimate=False)
    assert res.cv_results.columns.tolist() == ["lr", "epochs", "fold", "macro_f1", "micro_f1",
                                               "seconds"]
    assert len(res.cv_results) == 3
    assert res.best["mean_macro_f1"] == pytest.approx(res.cv_results["macro_f1"].mean())
    assert res.info["labels"] == ["econ", "long"] and res.info["metric"] == "macro_f1"
    assert res.model.record["labels"] == ["econ", "long"]


@pytest.mark.parametrize("kw, msg", [
    ({"task": "regression", "oversample": 0.5}, "no meaning for task regression"),
    ({"task": "multilabel", "label_cols": ["econ", "long"], "oversample": 0.5},
     "not defined: leave it out"),
    ({"task": "multilabel", "label_cols": ["econ", "nope"]}, "no column 'nope'"),
    ({"task": "regression", "folds": 40}, "fewer than the 40 cross-validation folds"),
    ({"task": "classification", "label_sep": "|"},
     "label_sep is for task multilabel; add task multilabel or leave it out"),
])
def test_tune_task_bad_input_is_refused_before_any_run(kw, msg):
    frame = multilabel_frame(24).assign(label=[str(i) for i in range(24)])
    calls = []

    def fit(*a, **k):  # pragma: no cover - must not be reached
        calls.append(1)

    with pytest.raises(InputError, match=msg):
        tune(frame, fit_fn=fit, lrs=[1e-3], epochs_grid=[1], folds=kw.pop("folds", 2),
             quiet=True, estimate=False, **kw)
    assert calls == []


def test_tune_multilabel_label_with_one_value_in_the_data_is_refused():
    frame = multilabel_frame(24).assign(long=0)
    with pytest.raises(InputError, match="'long' is present in no training document"):
        tune(frame, fit_fn=lambda *a, **k: None, lrs=[1e-3], epochs_grid=[1], folds=2,
             task="multilabel", label_cols=["econ", "long"], quiet=True, estimate=False)


# --------------------------------------------------------------------------------------------
# compare


def test_ridge_baseline_recovers_a_linear_outcome():
    from quantformer.train.task_baselines import fit_task_baseline
    from quantformer.select.scoring import TaskScoring

    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(20)]
    texts = [" ".join(rng.choice(words, size=8)) for _ in range(200)]
    y = [3.0 * t.split().count("w1") - 2.0 * t.split().count("w2") + 10 for t in texts]
    frame = pd.DataFrame({"doc_id": [f"d{i}" for i in range(200)], "text": texts, "label": y})
    scoring = TaskScoring("regression")
    rows = scoring.rows(frame.iloc[:150])
    base = fit_task_baseline(rows, "ridge-bow", scoring.fitted(rows))
    m = scoring.score(base, scoring.rows(frame.iloc[150:]))
    # binary bag-of-words sees presence, not counts: a good but not perfect fit
    assert m["pearson"] > 0.8 and m["n"] == 50
    assert base.params["alpha"] in [pytest.approx(a) for a in np.logspace(-2, 3, 11)]


def test_compare_multilabel_baselines_and_per_label_columns(tmp_path):
    from quantformer.select.compare import compare

    frame = multilabel_frame(60)
    frame["text"] = [t + (" money" if e else "") + (" lengthy" if g else "")
                     for t, e, g in zip(frame["text"], frame["econ"], frame["long"])]
    res = compare(frame.iloc[:40], frame.iloc[40:], models="logit-bow,svm-bow",
                  task="multilabel", label_cols=["econ", "long"], repeats=2,
                  train_sizes=[30, 40], folds=2, quiet=True)
    assert res.results.columns.tolist() == [
        "model", "train_size", "repeat", "macro_f1", "micro_f1", "subset_accuracy",
        "hamming_loss", "f1_econ", "f1_long", "seconds"]
    assert len(res.results) == 8
    # the marker words make both labels learnable by a linear bag-of-words model
    assert (res.results["macro_f1"] >= 0.8).all() and res.results["macro_f1"].max() == 1.0
    assert res.results["macro_f1"].tolist() == pytest.approx(
        ((res.results["f1_econ"] + res.results["f1_long"]) / 2).tolist())
    assert res.summary["metric"] == "macro_f1" and res.summary["labels"] == ["econ", "long"]
    assert res.table.columns.tolist()[:5] == ["model", "description", "f1_mean_30",
                                              "f1_min_30", "f1_max_30"]
    assert res.summary["by_size"]["40"]["transformer_margin"] is None
    out = res.save(tmp_path / "cmp")
    assert "macro-F1 on the test set" in (out / "table.md").read_text()
    assert (out / "figure10.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_compare_regression_with_the_tiny_transformer(tmp_path, tiny_bert_dir, capsys):
    import pyreadr

    frame = regression_frame(40)
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    frame.iloc[:28].to_csv(train, index=False)
    frame.iloc[28:].to_csv(test, index=False)
    out = tmp_path / "cmp"
    assert cli.main(["compare", "--train", str(train), "--test", str(test), "--task",
                     "regression", "--model", str(tiny_bert_dir), "--repeats", "1",
                     "--folds", "2", "--epochs", "1", "--lr", "1e-3", "--max-length", "32",
                     "--device", "cpu", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "compare --task regression: 2 model(s) x 1 size(s) x 1 repeat(s) = 2 runs" in printed
    assert "RMSE on the test set" in printed
    res = pyreadr.read_r(str(out / "results.rds"))[None]
    assert res.columns.tolist() == ["model", "train_size", "repeat", "rmse", "mae", "pearson",
                                    "spearman", "r2", "seconds"]
    assert res["model"].tolist() == ["default", "ridge-bow"]
    # RMSE >= MAE for any errors (equal only when all errors are equal): swapped or mislabelled
    # columns would fail
    assert (res["rmse"] >= res["mae"] - 1e-12).all() and (res["mae"] > 0).all()
    tab = pyreadr.read_r(str(out / "table.rds"))[None]
    assert "rmse_mean_28" in tab.columns
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == "regression" and summary["higher_is_better"] is False
    assert summary["runs"][0] == {"model": "default", "train_size": 28, "repeat": 1,
                                  "lr": 1e-3, "epochs": 1}
    by = summary["by_size"]["28"]
    assert by["best_conventional"] == "ridge-bow"
    assert by["transformer_margin"] == pytest.approx(
        by["mean_rmse"]["ridge-bow"] - by["mean_rmse"]["default"])


@pytest.mark.parametrize("args, msg", [
    (["--task", "regression", "--models", "default,xgb-bow"],
     "xgb-bow cannot run with --task regression"),
    (["--task", "multilabel", "--label-cols", "econ,long", "--models", "svm-vec"],
     "use: default, logit-bow, svm-bow"),
    (["--task", "multilabel", "--label-cols", "econ,long", "--models", "svm-bow"],
     "sample of 24 documents (repeat 1): label 'long' is present in every"),
])
def test_cli_compare_task_bad_input_exit_2(tmp_path, capsys, args, msg):
    frame = multilabel_frame(24).assign(label=[str(i) for i in range(24)])
    if "svm-bow" in args:
        frame["long"] = 1
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "cmp"
    code = cli.main(["compare", "--train", str(path), "--test", str(path), "--out", str(out),
                     "--repeats", "1", "--folds", "2", *args])
    assert code == 2 and msg in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("verb", ["compare", "tune", "finetune"])
def test_cli_multilabel_without_label_cols_names_label_cols_not_label_col(tmp_path, capsys,
                                                                         verb):
    """Review finding: a multi-label file without a `label` column and without --label-cols
    said "Name the label column with --label-col"; the fix is --label-cols (or --label-sep)."""
    path = tmp_path / "d.csv"
    multilabel_frame(24).drop(columns="label").to_csv(path, index=False)
    out = tmp_path / "out"
    test = ["--test", str(path)] if verb != "finetune" else []
    code = cli.main([verb, "--task", "multilabel", "--train", str(path), *test,
                     "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "--label-col " not in err and "--label-col)" not in err
    assert f"quantformer {verb}: error: --task multilabel needs either --label-cols A,B,C" in err
    assert "--label-sep '|'" in err and not out.exists()


def test_cli_tune_multilabel_label_cols_with_a_test_set(tmp_path, tiny_bert_dir, capsys):
    import pickle

    from quantformer.select.scoring import make_scoring

    # the scoring travels to Dask workers with each run
    scoring = pickle.loads(pickle.dumps(make_scoring("multilabel", ["econ", "long"])))
    assert scoring.metric == "macro_f1" and scoring.fit_kwargs()["label_cols"] == ["econ", "long"]
    frame = multilabel_frame(32).drop(columns="label")
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    frame.iloc[:24].to_csv(train, index=False)
    frame.iloc[24:].to_csv(test, index=False)
    out = tmp_path / "tuned"
    assert cli.main(["tune", "--train", str(train), "--test", str(test), "--task", "multilabel",
                     "--label-cols", "econ,long", "--model", str(tiny_bert_dir), "--lrs", "1e-3",
                     "--epochs-grid", "1", "--folds", "2", "--max-length", "32", "--device",
                     "cpu", "--out", str(out)]) == 0
    assert "cross-validated macro-F1 per configuration" in capsys.readouterr().out
    summ = pd.read_csv(out / "cv_summary.csv")
    assert summ.columns.tolist() == ["lr", "epochs", "mean_macro_f1", "sd_macro_f1",
                                     "mean_micro_f1", "folds", "rank"]
    preds = pd.read_csv(out / "test_predictions.csv")
    assert preds["doc_id"].tolist() == frame["doc_id"].iloc[24:].tolist()
    assert {"predicted_econ", "predicted_long", "prob_econ"} <= set(preds.columns)
    best = json.loads((out / "best.json").read_text())
    rep = json.loads((out / "test_report.json").read_text())
    assert best["test"]["macro_f1"] == pytest.approx(rep["macro_f1"]) and rep["n"] == 8
    assert set(rep["per_label"]) == {"econ", "long"}
