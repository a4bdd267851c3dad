"""Issue 15, second pass: ``evaluate --pred`` for multi-label predictions files and for
regression with a ``--truth`` file."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from quantformer.cli import main as cli

PRED = pd.DataFrame({"doc_id": ["a", "b", "c", "d"],
                     "prob_econ": [0.9, 0.2, 0.7, None], "prob_health": [0.1, 0.8, 0.6, None],
                     "predicted_econ": [True, False, True, None],
                     "predicted_health": [False, True, True, None],
                     "econ": [1, 0, 0, 1], "health": [0, 1, 1, 0],
                     "topics": ["econ", "health", "health|other", "econ"]})


def _evaluate(tmp_path, *args):
    pred = tmp_path / "pred.csv"
    PRED.to_csv(pred, index=False)
    out = tmp_path / "r.json"
    code = cli.main(["evaluate", "--pred", str(pred), "--task", "multilabel", "--out", str(out),
                     *args])
    return code, (json.loads(out.read_text()) if out.exists() else None)


def test_multilabel_pred_against_label_columns_by_hand(tmp_path):
    code, rep = _evaluate(tmp_path, "--label-cols", "econ,health")
    assert code == 0
    # rows a-c scored (d has no prediction); econ: TP a, FP c -> P 0.5, R 1, F1 2/3;
    # health: TP b, c -> F1 1; micro: TP 3, FP 1, FN 0 -> 6/7
    assert rep["n"] == 3 and rep["n_missing"] == 1
    assert rep["per_label"]["econ"]["f1"] == pytest.approx(2 / 3)
    assert rep["per_label"]["health"]["f1"] == pytest.approx(1.0)
    assert rep["macro_f1"] == pytest.approx(5 / 6) and rep["micro_f1"] == pytest.approx(6 / 7)
    assert rep["subset_accuracy"] == pytest.approx(2 / 3)
    assert rep["hamming_loss"] == pytest.approx(1 / 6) and rep["task"] == "multilabel"


def test_multilabel_pred_with_a_delimited_truth_column_and_a_truth_file(tmp_path):
    code, rep = _evaluate(tmp_path, "--label-sep", "|", "--truth-col", "topics")
    assert code == 0 and rep["macro_f1"] == pytest.approx(5 / 6)  # "other" is not predicted
    truth = tmp_path / "truth.csv"
    PRED[["doc_id", "topics"]].rename(columns={"topics": "label"}).iloc[::-1].to_csv(
        truth, index=False)
    (tmp_path / "r.json").unlink()
    code, rep2 = _evaluate(tmp_path, "--label-sep", "|", "--truth", str(truth))
    assert code == 0 and rep2["per_label"] == rep["per_label"]


@pytest.mark.parametrize("args, msg", [
    ([], "needs either --label-cols A,B"),
    (["--label-cols", "econ,nope"], "has no column 'nope'"),
    (["--label-cols", "econ,topics"], "has no column predicted_topics"),
    (["--label-cols", "econ,health", "--plot", "x.png"], "multi-label predictions have neither"),
])
def test_multilabel_pred_bad_input_exit_2_nothing_written(tmp_path, capsys, args, msg):
    code, rep = _evaluate(tmp_path, *args)
    assert code == 2 and msg in capsys.readouterr().err and rep is None


def test_label_cols_without_multilabel_and_regression_truth_file(tmp_path, capsys):
    pred = tmp_path / "p.csv"
    pd.DataFrame({"doc_id": ["a", "b", "c", "d"], "predicted": [1.5, 2, 2.5, 5]}).to_csv(
        pred, index=False)
    truth = tmp_path / "t.csv"
    pd.DataFrame({"doc_id": ["d", "c", "b", "a", "z"], "label": [4, 3, 2, 1, 9]}).to_csv(
        truth, index=False)
    out = tmp_path / "r.json"
    assert cli.main(["evaluate", "--pred", str(pred), "--truth", str(truth), "--task",
                     "regression", "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["n"] == 4 and rep["mae"] == pytest.approx(0.5)
    assert cli.main(["evaluate", "--pred", str(pred), "--truth-col", "predicted",
                     "--label-cols", "a"]) == 2
    assert ("--label-cols is for --task multilabel; add --task multilabel or leave it out"
            in capsys.readouterr().err)


def test_multilabel_truth_column_that_is_not_zero_one_is_named(tmp_path, capsys):
    pred = tmp_path / "p.csv"
    PRED.assign(health=[0, 2, 1, 0]).to_csv(pred, index=False)
    assert cli.main(["evaluate", "--pred", str(pred), "--task", "multilabel", "--label-cols",
                     "econ,health"]) == 2
    assert "column 'health' (--label-cols) must hold 0/1 values, but it has 2 (row 2)" in \
        capsys.readouterr().err
