"""Evaluation: metrics equal scikit-learn's, unseen labels, label maps, the evaluate verb."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score
from toydata import toy_frame

import quantformer
from quantformer.cli import main as cli
from quantformer._core.errors import InputError
from quantformer.score.evaluate import EvaluationWarning, apply_label_map, evaluate, parse_label_map

TRUTH = ["a", "a", "a", "b", "b", "c", "c", "c", "c", "a"]
PRED = ["a", "b", "a", "b", "b", "c", "a", "c", "b", "a"]


def test_metrics_match_hand_counts():
    rep = evaluate(TRUTH, PRED)
    assert rep.labels == ["a", "b", "c"]
    assert rep.accuracy == pytest.approx(7 / 10)
    assert rep.macro_f1 == pytest.approx(f1_score(TRUTH, PRED, average="macro"))
    # a: tp 3, fp 1 (c->a), fn 1 (a->b): P 0.75 R 0.75
    assert rep.per_class.loc["a", "precision"] == pytest.approx(0.75)
    assert rep.per_class.loc["a", "recall"] == pytest.approx(0.75)
    assert rep.per_class.loc["c", "recall"] == pytest.approx(0.5)
    assert rep.per_class["support"].tolist() == [4, 2, 4]
    assert rep.confusion.to_numpy().tolist() == [[3, 1, 0], [0, 2, 0], [1, 1, 2]]
    d = rep.to_dict()
    assert rep["macro_f1"] == d["macro_f1"] and d["confusion_matrix"][2] == [1, 1, 2]
    json.dumps(d)  # JSON-ready
    assert quantformer.evaluate(TRUTH, PRED).accuracy == rep.accuracy
    summary = rep.summary()
    assert summary.loc["accuracy", "f1"] == pytest.approx(0.7)
    assert summary.loc["macro avg", "support"] == 10


def test_unseen_and_missing_labels_are_reported():
    truth = ["a", "b", "z", "a", None, "b"]
    pred = ["a", "b", "a", None, "a", "b"]
    with pytest.warns(EvaluationWarning) as rec:
        rep = evaluate(truth, pred, labels=["a", "b"])
    msgs = " ".join(str(w.message) for w in rec)
    assert "'z' are not among the model's labels" in msgs
    assert "1 document(s) have no true label" in msgs and "1 document(s) have no prediction" \
        in msgs
    assert rep.unseen_labels == ["z"] and rep.labels == ["a", "b", "z"]
    assert rep.n == 4 and rep.n_missing_truth == 1 and rep.n_missing_pred == 1
    assert rep.per_class.loc["z", "recall"] == 0 and rep.per_class.loc["z", "support"] == 1
    assert rep.accuracy == pytest.approx(3 / 4)
    with pytest.warns(EvaluationWarning), pytest.raises(InputError, match="nothing to eval"):
        evaluate([None, "a"], ["a", None])
    with pytest.raises(InputError, match="2 true labels but 1 predictions"):
        evaluate(["a", "b"], ["a"])
    # numbers and strings compare as strings (1.0 from a CSV is "1")
    assert evaluate(pd.Series([1.0, 0.0, 2.0]), ["1", "0", "2"]).accuracy == 1.0


def test_label_map(tmp_path):
    m = parse_label_map("in favor of=2, against=1,neutral toward=0")
    assert m == {"in favor of": "2", "against": "1", "neutral toward": "0"}
    f = tmp_path / "map.json"
    f.write_text(json.dumps({"pro": 2, "contra": 1}))
    assert parse_label_map(str(f)) == {"pro": "2", "contra": "1"}
    with pytest.warns(EvaluationWarning, match="does not map 'other'"):
        assert apply_label_map(["pro", "other", None], {"pro": "2"}) == ["2", "other", None]
    for bad, msg in [("a=1,b", "has no '='"), ("=1", "empty on one side"),
                     (str(tmp_path / "none.json"), "not found")]:
        with pytest.raises(InputError, match=msg):
            parse_label_map(bad)
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="must be a JSON object"):
        parse_label_map(str(tmp_path / "bad.json"))


def test_plot_writes_png(tmp_path):
    path = evaluate(TRUTH, PRED).plot(tmp_path / "cm.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["cm.png"]


def _pred_file(tmp_path):
    df = pd.DataFrame({"doc_id": [f"d{i}" for i in range(10)], "label": TRUTH,
                       "predicted": PRED, "prob_a": 0.5, "prob_b": 0.3, "prob_c": 0.2})
    p = tmp_path / "pred.parquet"
    df.to_parquet(p)
    return p


def test_cli_evaluate_pred_with_truth_col_and_file(tmp_path, capsys):
    pred = _pred_file(tmp_path)
    out, png = tmp_path / "r.json", tmp_path / "cm.png"
    assert cli.main(["evaluate", "--pred", str(pred), "--truth-col", "label", "--out", str(out),
                     "--plot", str(png)]) == 0
    printed = capsys.readouterr().out
    assert "macro avg" in printed and "confusion matrix" in printed
    assert "nan" not in printed.lower()  # blank precision/recall cells in the accuracy row
    acc_row = next(line for line in printed.splitlines() if line.startswith("accuracy"))
    assert acc_row.split() == ["accuracy", "0.7000", "10"]
    rep = json.loads(out.read_text())
    assert rep["accuracy"] == pytest.approx(0.7) and rep["n"] == 10
    assert png.read_bytes()[:4] == b"\x89PNG"
    # truth in another file, joined on doc_id, in another order and with an unseen label
    truth = pd.DataFrame({"doc_id": [f"d{i}" for i in range(10)][::-1],
                          "code": (TRUTH[:-1] + ["q"])[::-1]})
    tf = tmp_path / "truth.csv"
    truth.to_csv(tf, index=False)
    assert cli.main(["evaluate", "--pred", str(pred), "--truth", str(tf), "--label-col",
                     "code", "--out", str(out)]) == 0
    err = capsys.readouterr()
    assert "'q' are not among the model's labels" in err.err
    rep = json.loads(out.read_text())
    assert rep["unseen_labels"] == ["q"] and rep["accuracy"] == pytest.approx(0.6)


def test_cli_evaluate_label_map_for_zero_shot_output(tmp_path):
    phrases = {"a": "in favor of", "b": "against", "c": "neutral toward"}
    df = pd.DataFrame({"doc_id": [f"d{i}" for i in range(10)],
                       "label": [{"a": "2", "b": "1", "c": "0"}[t] for t in TRUTH],
                       "predicted": [phrases[p] for p in PRED],
                       **{f"prob_{v}": 1 / 3 for v in phrases.values()}})
    p = tmp_path / "zs.csv"
    df.to_csv(p, index=False)
    out = tmp_path / "r.json"
    assert cli.main(["evaluate", "--pred", str(p), "--truth-col", "label", "--label-map",
                     "in favor of=2,against=1,neutral toward=0", "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["accuracy"] == pytest.approx(0.7)
    assert rep["labels"] == ["2", "1", "0"]


def test_cli_evaluate_model_on_test_file(tmp_path, tiny_bert_dir, capsys):
    clf = quantformer.finetune(toy_frame(24), model=str(tiny_bert_dir), epochs=1, quiet=True,
                               device="cpu", max_length=64)
    mdir = clf.save(tmp_path / "m")
    test = toy_frame(12)
    test.loc[0, "label"] = "brand-new"
    tf = tmp_path / "test.csv"
    test.to_csv(tf, index=False)
    out = tmp_path / "r.json"
    assert cli.main(["evaluate", "--model", str(mdir), "--input", str(tf), "--out", str(out),
                     "--quiet", "--device", "cpu"]) == 0
    rep = json.loads(out.read_text())
    assert rep["n"] == 12 and rep["unseen_labels"] == ["brand-new"]
    assert rep["per_class"]["brand-new"]["recall"] == 0
    pred = clf.predict(test)
    truth_ok = test["label"] != "brand-new"
    assert rep["accuracy"] == pytest.approx(
        float(np.mean((pred["predicted"] == test["label"]).to_numpy())))
    assert truth_ok.sum() == 11


@pytest.mark.parametrize("args, msg", [
    (["--pred", "PRED"], "exactly one of --truth"),
    (["--pred", "PRED", "--truth-col", "nope"], "no 'nope' column"),
    (["--pred", "PRED", "--truth-col", "label", "--plot", "cm.pdf"], "must end in .png"),
    (["--model", "MDIR"], "--model and --input go together"),
    (["--pred", "missing.parquet", "--truth-col", "label"], "file not found"),
    ([], "give --pred"),
    (["--pred", "PRED", "--truth-col", "label", "--label-map", "a=1,b"], "has no '='"),
])
def test_cli_evaluate_bad_input(tmp_path, capsys, args, msg):
    pred = _pred_file(tmp_path)
    args = [str(pred) if a == "PRED" else str(tmp_path / "m") if a == "MDIR" else
            (str(tmp_path / a) if a.endswith((".pdf", ".parquet")) else a) for a in args]
    assert cli.main(["evaluate", *args, "--out", str(tmp_path / "r.json")]) == 2
    assert msg in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pred.parquet"]
