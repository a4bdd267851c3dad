"""tune and compare with ``--truncation chunks`` (issue 34): the window settings reach every
fine-tuned candidate, the baselines are unaffected, bad settings exit 2 before any run."""

from __future__ import annotations

import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.cli import main as cli
from quantformer.select.tune import tune


def _long(n: int) -> pd.DataFrame:
    f = toy_frame(n)
    f["text"] = [" ".join([t] * 5) for t in f["text"]]
    return f


def test_tune_with_chunks_refits_a_model_that_reads_windows(tiny_bert_dir):
    res = tune(_long(16), model=str(tiny_bert_dir), lrs=[1e-3], epochs_grid=[1], folds=2,
               max_length=24, truncation="chunks", stride=4, aggregate="max", device="cpu",
               quiet=True, estimate=False)
    hp = res.model.record["hyperparameters"]
    assert (hp["truncation"], hp["stride"], hp["aggregate"]) == ("chunks", 4, "max")
    assert len(res.cv_results) == 2 and res.cv_results["macro_f1"].between(0, 1).all()


def test_compare_chunks_reach_the_transformer_and_leave_the_baseline(tiny_bert_dir,
                                                                     tmp_path):
    f = _long(44)
    f.iloc[:28].to_csv(tmp_path / "train.csv", index=False)
    f.iloc[28:].to_csv(tmp_path / "test.csv", index=False)
    base = ["compare", "--train", str(tmp_path / "train.csv"), "--test",
            str(tmp_path / "test.csv"), "--models", "default,svm-bow", "--model",
            str(tiny_bert_dir), "--train-sizes", "28", "--repeats", "1", "--folds", "2",
            "--epochs", "1", "--lr", "1e-3", "--max-length", "24", "--device", "cpu",
            "--quiet"]
    assert cli.main([*base, "--out", str(tmp_path / "cut")]) == 0
    assert cli.main([*base, "--truncation", "chunks", "--stride", "4", "--out",
                     str(tmp_path / "win")]) == 0
    cut = pd.read_csv(tmp_path / "cut" / "results.csv").set_index("model")
    win = pd.read_csv(tmp_path / "win" / "results.csv").set_index("model")
    # the bag-of-words baseline reads the whole text either way: the same score
    assert win.loc["svm-bow", "macro_f1"] == cut.loc["svm-bow", "macro_f1"]


@pytest.mark.parametrize("verb, extra, msg", [
    ("tune", ["--stride", "3"], "--stride applies to --truncation chunks only"),
    ("tune", ["--truncation", "chunks", "--max-chunks", "0"], "--max-chunks must be at least 1"),
    ("compare", ["--truncation", "chunks", "--aggregate", "median"],
     "unknown --aggregate 'median'"),
    ("compare", ["--max-chunks", "2"], "--max-chunks applies to --truncation chunks only"),
])
def test_bad_window_flags_exit_2_before_any_run(tmp_path, capsys, verb, extra, msg):
    toy_frame(40).to_csv(tmp_path / "train.csv", index=False)
    args = [verb, "--train", str(tmp_path / "train.csv"), "--out", str(tmp_path / "out"),
            "--device", "cpu", "--quiet"]
    if verb == "tune":
        args += ["--lrs", "1e-3", "--epochs-grid", "1", "--folds", "2"]
    else:
        toy_frame(20).to_csv(tmp_path / "test.csv", index=False)
        args += ["--test", str(tmp_path / "test.csv"), "--models", "default,svm-bow"]
    assert cli.main(args + extra) == 2
    assert msg in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
