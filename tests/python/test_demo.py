"""The demo verb (the README's main job), run small: tiny model, a few dozen paragraphs."""

from __future__ import annotations

import json

import pandas as pd
import pyreadr
import pytest

from quantformer import cli


def test_demo_writes_predictions_and_report(tmp_path, tiny_bert_dir, capsys):
    out = tmp_path / "demo"
    code = cli.main(["demo", "--out", str(out), "--model", str(tiny_bert_dir), "--train-docs",
                     "40", "--test-docs", "30", "--epochs", "1", "--max-length", "64",
                     "--device", "cpu", "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "split by address" in printed and "random sample of 40 training" in printed
    assert "macro avg" in printed and "confusion matrix" in printed
    assert "for comparison, always answering" in printed and "macro-F1 is the measure" in printed
    preds = pd.read_parquet(out / "predictions.parquet")
    assert len(preds) == 30
    assert {"doc_id", "label", "address", "predicted", "prob_Democratic",
            "prob_Republican"} <= set(preds.columns)
    assert set(preds["label"]) <= {"Democratic", "Republican"}
    rds = pyreadr.read_r(str(out / "predictions.rds"))[None]
    assert rds["doc_id"].tolist() == preds["doc_id"].tolist()
    report = json.loads((out / "evaluation.json").read_text())
    assert report["n"] == 30 and 0 <= report["macro_f1"] <= 1
    assert (out / "confusion.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rec = json.loads((out / "model" / "quantformer.json").read_text())
    assert rec["n_train"] == 40 and rec["labels"] == ["Democratic", "Republican"]
    # no held-out address was seen in training: the split is by address
    from quantformer.datasets import sotu, split_by_group

    frame = sotu(since=1913, parties=("Democratic", "Republican"), label="party")
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


def test_majority_baseline_matches_sklearn():
    import pandas as pd
    from sklearn.metrics import f1_score

    from quantformer.demo import majority_macro_f1

    truth = ["D"] * 1848 + ["R"] * 884
    counts = pd.Series(truth).value_counts()
    expected = f1_score(truth, ["D"] * len(truth), average="macro", zero_division=0)
    assert majority_macro_f1(counts) == pytest.approx(expected)
    assert majority_macro_f1(counts) == pytest.approx(0.4034, abs=1e-4)
