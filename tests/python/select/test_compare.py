"""Tests of quantformer.compare: the Table-1 / Figure-10 comparison."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

import quantformer
from quantformer.cli import main as cli
from quantformer.select.compare import MODELS, check_sizes, compare, draw_sample, parse_models
from quantformer._core.errors import InputError

RESULT_COLS = ["model", "train_size", "repeat", "macro_f1", "accuracy", "seconds"]


class Majority:
    """A fake 'transformer': predicts its training frame's majority label."""

    def __init__(self, frame):
        self.labels = sorted(frame["label"].unique())
        self.top = frame["label"].value_counts().idxmax()
        self.params = {"kind": "majority"}

    def predict_proba(self, frame):
        p = np.zeros((len(frame), len(self.labels)))
        p[:, self.labels.index(self.top)] = 1
        return p


def fake_fitters():
    return {"default": lambda sample, seed: Majority(sample)}


def toy(n=60):
    f = toy_frame(n)
    return f.iloc[: n - 20].reset_index(drop=True), f.iloc[n - 20:].reset_index(drop=True)


def test_api_names_are_callable():
    assert callable(quantformer.compare) and callable(quantformer.tune)
    assert quantformer.train.baselines.BASELINES == ("svm-bow", "svm-vec", "xgb-bow", "xgb-vec")


def test_parse_models_and_sizes():
    assert parse_models("svm-bow, default") == ["svm-bow", "default"]
    with pytest.raises(InputError) as e:
        parse_models("default,bert,svm")
    msg = str(e.value)
    assert "bert, svm" in msg and all(m in msg for m in MODELS)
    with pytest.raises(InputError, match="twice"):
        parse_models(["svm-bow", "svm-bow"])
    assert check_sizes("30,10", 40) == [10, 30] and check_sizes(None, 40) == [40]
    with pytest.raises(InputError) as e:
        check_sizes([10, 500, 2000], 653 - 600)
    assert "500, 2000 are larger than the 53 labelled training documents" in str(e.value)
    assert "use sizes up to 53" in str(e.value)


def test_draw_sample_is_stratified_and_reproducible():
    data = pd.DataFrame({"doc_id": [f"d{i}" for i in range(100)], "text": ["t"] * 100,
                         "label": ["a"] * 80 + ["b"] * 20})
    s1 = draw_sample(data, 50, 1, seed=1)
    assert len(s1) == 50 and (s1["label"] == "b").sum() == 10
    assert s1["doc_id"].tolist() == draw_sample(data, 50, 1, seed=1)["doc_id"].tolist()
    assert s1["doc_id"].tolist() != draw_sample(data, 50, 2, seed=1)["doc_id"].tolist()
    assert draw_sample(data, 100, 3, seed=1)["doc_id"].tolist() == data["doc_id"].tolist()


def test_compare_tables_with_a_fake_transformer(tmp_path):
    train, test = toy()
    res = compare(train, test, models="default,svm-bow", train_sizes=[20, 40], repeats=2,
                  folds=2, quiet=True, fitters=fake_fitters())
    r = res.results
    assert r.columns.tolist() == RESULT_COLS and len(r) == 2 * 2 * 2
    assert r[["model", "train_size", "repeat"]].values.tolist()[:4] == [
        ["default", 20, 1], ["svm-bow", 20, 1], ["default", 20, 2], ["svm-bow", 20, 2]]
    # majority guess on the test set: F1 of the majority class only, halved
    n_other = (test["label"] == "other").sum()
    f1_major = 2 * n_other / (n_other + len(test))
    assert r[r.model == "default"]["macro_f1"].tolist() == pytest.approx([f1_major / 2] * 4)
    t = res.table
    assert t["model"].tolist() == ["default", "svm-bow"]
    assert t.columns.tolist() == ["model", "description", "f1_mean_20", "f1_min_20",
                                  "f1_max_20", "seconds_20", "f1_mean_40", "f1_min_40",
                                  "f1_max_40", "seconds_40"]
    for s in (20, 40):
        assert (t[f"f1_min_{s}"] <= t[f"f1_mean_{s}"]).all()
        assert (t[f"f1_mean_{s}"] <= t[f"f1_max_{s}"]).all()
        sub = r[(r.model == "svm-bow") & (r.train_size == s)]["macro_f1"]
        assert t.loc[1, f"f1_mean_{s}"] == pytest.approx(sub.mean())
    by = res.summary["by_size"]["40"]
    assert by["best_conventional"] == "svm-bow"
    assert by["transformer_margin"] == pytest.approx(
        by["mean_macro_f1"]["default"] - by["mean_macro_f1"]["svm-bow"])
    md = res.markdown()
    assert md.splitlines()[0] == "| model | n = 20 | n = 40 | train s |"
    assert "svm-bow: linear SVM, bag-of-words" in md
    assert len(res.runs) == 8 and {"C", "class_weight"} <= set(res.runs[1])


def test_compare_rejects_folds_larger_than_a_sample_class():
    train, test = toy()
    with pytest.raises(InputError) as e:
        compare(train, test, models="svm-bow", train_sizes=[10], repeats=1, folds=5,
                quiet=True)
    assert "class 'econ' has only" in str(e.value)
    assert "training sample of 10 documents" in str(e.value) and "use folds" in str(e.value)
    with pytest.raises(InputError, match="^repeats must be"):
        compare(train, test, models="svm-bow", repeats=0, quiet=True)


def _csv(tmp_path, frame, name):
    p = tmp_path / name
    frame.to_csv(p, index=False)
    return str(p)


@pytest.mark.parametrize("extra, msg", [
    (["--models", "default,bert"], "valid names are: default, svm-bow, svm-vec, xgb-bow"),
    (["--train-sizes", "20,400"], "--train-sizes 400 is larger than the 40 labelled"),
    (["--models", "svm-vec", "--vectors", "VEC"], "has 2 values but the first vector has 3"),
    (["--folds", "30"], "use --folds"),
])
def test_cli_bad_input_exit_2_and_no_output(tmp_path, capsys, extra, msg):
    train, test = toy()
    vec = tmp_path / "glove.txt"
    vec.write_text("tax 1 0 0\nwar 0 1\n", encoding="utf-8")
    extra = [str(vec) if a == "VEC" else a for a in extra]
    out = tmp_path / "out"
    args = ["compare", "--train", _csv(tmp_path, train, "train.csv"), "--test",
            _csv(tmp_path, test, "test.csv"), "--models", "svm-bow", "--repeats", "1",
            "--quiet", "--out", str(out)]
    assert cli.main(args + extra) == 2
    assert msg in capsys.readouterr().err
    assert not out.exists()


def test_cli_real_tiny_finetune_writes_every_output(tmp_path, tiny_bert_dir, capsys):
    import pyreadr

    train, test = toy()
    out = tmp_path / "cmp"
    args = ["compare", "--train", _csv(tmp_path, train, "train.csv"), "--test",
            _csv(tmp_path, test, "test.csv"), "--models", "default,svm-bow,xgb-vec",
            "--model", str(tiny_bert_dir), "--train-sizes", "24,40", "--repeats", "1",
            "--folds", "2", "--epochs", "1", "--lr", "1e-3", "--max-length", "64",
            "--device", "cpu", "--out", str(out)]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "3 model(s) x 2 size(s) x 1 repeat(s) = 6 runs" in printed
    assert sorted(p.name for p in out.iterdir()) == [
        "figure10.png", "results.csv", "results.rds", "summary.json", "table.csv",
        "table.md", "table.rds"]
    res = pyreadr.read_r(str(out / "results.rds"))[None]
    assert res.columns.tolist() == RESULT_COLS and len(res) == 6
    tab = pyreadr.read_r(str(out / "table.rds"))[None]
    # the table is the results aggregated (one repeat: mean = min = max = the run's score)
    for size in (24, 40):
        runs = res[res["train_size"] == size].set_index("model").loc[tab["model"]]
        for stat in ("mean", "min", "max"):
            np.testing.assert_allclose(tab[f"f1_{stat}_{size}"], runs["macro_f1"])
    assert tab["model"].tolist() == ["default", "svm-bow", "xgb-vec"]
    assert "averaged MiniLM input embeddings (not GloVe)" in tab["description"].iloc[2]
    assert str(tiny_bert_dir) in tab["description"].iloc[0]
    assert (out / "figure10.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["train_sizes"] == [24, 40] and summary["n_test"] == 20
    assert summary["runs"][0] == {"model": "default", "train_size": 24, "repeat": 1,
                                  "lr": 1e-3, "epochs": 1}
    assert "| default: " in (out / "table.md").read_text()


def test_unscorable_test_documents_are_counted_and_vectors_named_only_when_used():
    train, test = toy()
    test = test.copy()
    test["text"] = test["text"].astype(object)
    test.loc[3, "text"], test.loc[8, "label"] = " ", None
    with pytest.warns(UserWarning, match="2 document\\(s\\) of the test data cannot be scored "
                                         "and are left out of the scores: 1 without a label, "
                                         "1 with a missing or empty text"):
        res = compare(train, test, models="default,svm-bow", repeats=1, folds=2, quiet=True,
                      fitters=fake_fitters())
    assert res.summary["n_test"] == 18 and res.summary["n_test_unscored"] == 2
    assert res.summary["vectors"] is None  # no -vec model ran


def _compare_args(tmp_path, out, *extra):
    train, test = toy()
    return ["compare", "--train", _csv(tmp_path, train, "train.csv"), "--test",
            _csv(tmp_path, test, "test.csv"), "--models", "svm-bow", "--repeats", "1",
            "--folds", "2", *extra, "--out", str(out)]


def test_cli_out_refused_overwrite_replaces_and_errors_leave_the_old_folder(
        tmp_path, capsys, monkeypatch):
    from quantformer.select.compare import CompareResult

    out = tmp_path / "cmp"
    out.mkdir()
    (out / "stale.csv").write_text("from an earlier run")
    assert cli.main(_compare_args(tmp_path, out, "--quiet")) == 2
    err = capsys.readouterr().err
    assert f"'{out}' exists and is not empty; pass --overwrite or choose " \
           "another --out" in err
    assert [p.name for p in out.iterdir()] == ["stale.csv"]

    def broken(self, path, title=None):
        raise RuntimeError("no space left")

    # an error while the folder is written: the old folder stays as it was, no temporary
    monkeypatch.setattr(CompareResult, "plot", broken)
    assert cli.main(_compare_args(tmp_path, out, "--quiet", "--overwrite")) == 1
    assert "no space left" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["stale.csv"]
    monkeypatch.undo()
    assert cli.main(_compare_args(tmp_path, out, "--quiet", "--overwrite")) == 0
    files = ["figure10.png", "results.csv", "results.rds", "summary.json", "table.csv",
             "table.md", "table.rds"]
    assert sorted(p.name for p in out.iterdir()) == files  # stale.csv is gone
    assert capsys.readouterr().out.strip() == (
        f"wrote {', '.join(files[:-1])} and table.rds to {out}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp", "test.csv", "train.csv"]
    with pytest.raises(InputError, match="exists and is not empty"):
        CompareResult(results=pd.DataFrame(), table=pd.DataFrame()).save(out)


@pytest.mark.parametrize("quiet", [True, False])
def test_cli_quiet_prints_only_the_closing_line_and_verbose_no_blank_line(
        tmp_path, capfd, quiet):
    from transformers.utils import logging as hf_logging

    from quantformer.train.baselines import _input_embeddings

    _input_embeddings.cache_clear()  # load the embeddings again: no "Loading weights" bar
    bars = hf_logging.is_progress_bar_enabled()
    out = tmp_path / "cmp"
    args = _compare_args(tmp_path, out, *(["--quiet"] if quiet else []))
    args[args.index("svm-bow")] = "svm-vec"
    assert cli.main(args) == 0
    printed = capfd.readouterr()
    assert "Loading" not in printed.err and "Loading" not in printed.out
    assert hf_logging.is_progress_bar_enabled() == bars  # restored
    lines = printed.out.splitlines()
    assert "" not in lines
    if quiet:
        assert printed.err == "" and lines == [lines[-1]]
    else:
        assert lines[0].startswith("compare: 1 model(s)") and len(lines) > 4
    assert lines[-1].startswith("wrote figure10.png, ")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["vectors"] == "MiniLM input embeddings (all-MiniLM-L6-v2)"


def test_cli_labels_files_equal_label_columns(tmp_path, capsys):
    """Issue 27, point 10: compare (and tune) take --labels-file / --test-labels-file as the
    other verbs take --labels-file; the results equal those of the label columns."""
    train, test = toy()
    with_cols = tmp_path / "cols"
    assert cli.main(_compare_args(tmp_path, with_cols, "--quiet")) == 0
    for name, frame in (("train", train), ("test", test)):
        frame.drop(columns="label").to_csv(tmp_path / f"{name}_text.csv", index=False)
        (tmp_path / f"{name}_labels.txt").write_text("\n".join(frame["label"]) + "\n")
    with_files = tmp_path / "files"
    assert cli.main(["compare", "--train", str(tmp_path / "train_text.csv"), "--labels-file",
                     str(tmp_path / "train_labels.txt"), "--test",
                     str(tmp_path / "test_text.csv"), "--test-labels-file",
                     str(tmp_path / "test_labels.txt"), "--models", "svm-bow", "--repeats",
                     "1", "--folds", "2", "--quiet", "--out", str(with_files)]) == 0
    a = pd.read_csv(with_cols / "results.csv")
    b = pd.read_csv(with_files / "results.csv")
    assert len(a) == 1 and a[["macro_f1", "accuracy"]].equals(b[["macro_f1", "accuracy"]])
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (with_cols, with_files))
    assert (sb["n_train"], sb["n_test"], sb["labels"]) == (len(train), len(test),
                                                           sorted(set(train["label"])))
    assert (sa["n_train"], sa["n_test"], sa["labels"]) == (sb["n_train"], sb["n_test"],
                                                           sb["labels"])
