"""The demo verb (the README's main job), run small: tiny model, a few dozen paragraphs."""

from __future__ import annotations

import json

import pandas as pd
import pyreadr
import pytest

from quantformer.cli import main as cli


def test_demo_writes_predictions_and_report(tmp_path, tiny_bert_dir, capsys):
    out = tmp_path / "demo"
    code = cli.main(["demo", "--out", str(out), "--model", str(tiny_bert_dir), "--train-docs",
                     "40", "--test-docs", "30", "--epochs", "1", "--max-length", "64",
                     "--device", "cpu", "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "split by address" in printed and "random sample of 40 training" in printed
    assert "macro avg" in printed and "confusion matrix" in printed
    # issue 17: the SVM baseline on the same paragraphs, side by side, the plots, what next
    assert "the same 40 training paragraphs, the same test paragraphs" in printed
    assert "SVM, bag of words" in printed and "always 'Democratic'" in printed
    assert "against the bag-of-words SVM" in printed and "macro-F1 is the measure" in printed
    assert "comparison.png" in printed and "what to try next" in printed
    table = pd.read_csv(out / "comparison.csv")
    assert table["model"].tolist()[:2] == ["fine-tuned Transformer", "SVM, bag of words"]
    assert (out / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    preds = pd.read_parquet(out / "predictions.parquet")
    assert len(preds) == 30
    assert {"doc_id", "label", "address", "predicted", "prob_Democratic",
            "prob_Republican"} <= set(preds.columns)
    assert set(preds["label"]) <= {"Democratic", "Republican"}
    rds = pyreadr.read_r(str(out / "predictions.rds"))[None]
    assert rds["doc_id"].tolist() == preds["doc_id"].tolist()
    report = json.loads((out / "evaluation.json").read_text())
    # the scores, derived here from the written predictions (scikit-learn)
    from sklearn.metrics import f1_score

    def macro_f1(predicted):
        return f1_score(preds["label"], predicted, average="macro", zero_division=0,
                        labels=["Democratic", "Republican"])

    assert report["n"] == 30
    assert report["macro_f1"] == pytest.approx(macro_f1(preds["predicted"]))
    scores = dict(zip(table["model"], table["macro_f1"]))
    assert scores["fine-tuned Transformer"] == pytest.approx(report["macro_f1"])
    assert scores["always 'Democratic'"] == pytest.approx(macro_f1(["Democratic"] * 30))
    assert (out / "confusion.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rec = json.loads((out / "model" / "quantformer.json").read_text())
    assert rec["n_train"] == 40 and rec["labels"] == ["Democratic", "Republican"]
    # no held-out address was seen in training: the split is by address
    from quantformer.io.datasets import sotu, split_by_group

    from quantformer.select.demo import SINCE

    frame = sotu(since=SINCE, parties=("Democratic", "Republican"), label="party")
    train, test = split_by_group(frame, "address", test_share=0.2, seed=1)
    assert set(preds["address"]) <= set(test["address"])
    assert not set(train["address"]) & set(test["address"])


def test_demo_rejects_bad_counts(tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path / "d"), "--train-docs", "1"]) == 2
    assert "at least 2" in capsys.readouterr().err
    f = tmp_path / "file"
    f.write_text("x")
    assert cli.main(["demo", "--out", str(f), "--train-docs", "10"]) == 2
    assert "is a file" in capsys.readouterr().err


def test_comparison_table_and_plot(tmp_path):
    from sklearn.metrics import f1_score

    from quantformer.select.demo import baseline_reports, comparison_table, plot_comparison
    from quantformer.score.evaluate import evaluate

    train = pd.DataFrame({"doc_id": [f"t{i}" for i in range(30)],
                          "text": ["taxes and the budget deficit"] * 20 + ["war and peace"] * 10,
                          "label": ["econ"] * 20 + ["other"] * 10})
    test = pd.DataFrame({"doc_id": ["a", "b", "c", "d"],
                         "text": ["the budget", "peace now", "war", "deficit spending"],
                         "label": ["econ", "other", "other", "econ"]})
    base = baseline_reports(train, test, ["econ", "other"], seed=1)
    ft = evaluate(test["label"], ["econ", "other", "econ", "econ"], labels=["econ", "other"])
    table = comparison_table(ft, 12.3, base)
    assert list(table.index) == ["fine-tuned Transformer", "SVM, bag of words",
                                 "always 'econ'"]
    assert table.loc["SVM, bag of words", "macro_f1"] == 1.0  # separable words
    majority = f1_score(test["label"], ["econ"] * 4, average="macro", zero_division=0)
    assert table.loc["always 'econ'", "macro_f1"] == pytest.approx(majority)
    assert table.loc["always 'econ'", "accuracy"] == 0.5
    assert table.loc["fine-tuned Transformer", "train_seconds"] == 12
    png = plot_comparison(table, tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
