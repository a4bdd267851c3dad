"""Tests of quantformer.tune: stratified k-fold grid search for fine-tuning."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

import quantformer
from quantformer.io.modeldir import read_record
from quantformer.cli import main as cli
from quantformer._core.errors import InputError
from quantformer.select.tune import default_grid, estimate_seconds, summarise_cv, tune


class FakeClassifier:
    """Predicts the majority label of its training frame; records what it is asked."""

    def __init__(self, frame, log, lr, epochs, score_of=None):
        self.labels = sorted(frame["label"].unique())
        self.top = frame["label"].value_counts().idxmax()
        self.log, self.lr, self.epochs, self.score_of = log, lr, epochs, score_of

    def predict_proba(self, frame):
        self.log.append(("predict", frame["doc_id"].tolist()))
        p = np.zeros((len(frame), len(self.labels)))
        if self.score_of is None or self.score_of(self.lr, self.epochs):
            # the config is "good": predict the truth
            for i, lab in enumerate(frame["label"]):
                p[i, self.labels.index(lab if lab in self.labels else self.top)] = 1
        else:
            p[:, self.labels.index(self.top)] = 1
        return p


def fake_fit(log, score_of=None):
    from quantformer.train.finetune import oversample_indices

    def fit(frame, *, lr, epochs, oversample=None, seed=1, **kw):
        if oversample:  # what finetune does with the frame it is given
            idx = oversample_indices(frame["label"].to_numpy(), oversample,
                                     np.random.default_rng(seed))
            frame = frame.iloc[idx].reset_index(drop=True)
        log.append(("fit", frame["doc_id"].tolist(), lr, epochs))
        return FakeClassifier(frame, log, lr, epochs, score_of)

    return fit


def imbalanced(n_major=24, n_minor=6):
    return pd.DataFrame({"doc_id": [f"d{i}" for i in range(n_major + n_minor)],
                         "text": [f"text {i}" for i in range(n_major + n_minor)],
                         "label": ["major"] * n_major + ["minor"] * n_minor})


def test_folds_are_disjoint_and_oversampling_touches_training_folds_only():
    data = imbalanced()
    log = []
    res = tune(data, lrs=[1e-4], epochs_grid=[2], folds=3, oversample=1.0, quiet=True,
               fit_fn=fake_fit(log))
    fits = [e for e in log if e[0] == "fit"]
    preds = [e for e in log if e[0] == "predict"]
    assert len(fits) == 4 and len(preds) == 3  # 3 folds + refit; refit is not scored
    seen = []
    for (_, train_ids, _, _), (_, valid_ids) in zip(fits[:3], preds):
        # the training fold was oversampled: minority duplicated up to the majority
        assert len(train_ids) > len(set(train_ids)) and len(train_ids) == 2 * 16
        # the validation fold is scored as it is: no duplicates, nothing from training
        assert len(valid_ids) == len(set(valid_ids)) == 10
        assert not set(valid_ids) & set(train_ids)
        seen += valid_ids
    assert sorted(seen) == sorted(data["doc_id"])  # every document validated exactly once
    assert len(set(fits[3][1])) == 30  # refit on all training data
    assert res.cv_results["fold"].tolist() == [1, 2, 3]


def test_best_config_and_ties_go_to_fewer_epochs_then_lower_lr():
    data = imbalanced()
    # every configuration scores the same: fewest epochs, then the lowest rate wins
    res = tune(data, lrs=[3e-5, 1e-5, 2e-5], epochs_grid=[4, 2], folds=2, quiet=True,
               fit_fn=fake_fit([]))
    assert (res.best["lr"], res.best["epochs"]) == (1e-5, 2)
    assert len(res.cv_results) == 12 and len(res.cv_summary) == 6
    assert res.cv_summary["rank"].tolist() == [1, 2, 3, 4, 5, 6]
    assert res.cv_summary[["lr", "epochs"]].values.tolist()[:3] == [[1e-5, 2], [2e-5, 2],
                                                                    [3e-5, 2]]
    # only lr 3e-5 x 4 epochs predicts well: it wins despite more epochs
    res = tune(data, lrs=[1e-5, 3e-5], epochs_grid=[2, 4], folds=2, quiet=True,
               fit_fn=fake_fit([], score_of=lambda lr, ep: (lr, ep) == (3e-5, 4)))
    assert (res.best["lr"], res.best["epochs"]) == (3e-5, 4)
    assert res.best["mean_macro_f1"] == 1.0
    assert res.cv_summary.iloc[1]["mean_macro_f1"] == pytest.approx(0.4444, abs=1e-4)


def test_summarise_cv_mean_sd_and_ranking():
    cv = pd.DataFrame({"lr": [1e-5, 1e-5, 2e-5, 2e-5], "epochs": [3, 3, 2, 2],
                       "fold": [1, 2, 1, 2], "macro_f1": [0.5, 0.7, 0.6, 0.6]})
    s = summarise_cv(cv)
    assert s[["lr", "epochs"]].values.tolist() == [[2e-5, 2], [1e-5, 3]]  # tie -> 2 epochs
    assert s["mean_macro_f1"].tolist() == pytest.approx([0.6, 0.6])
    assert s["sd_macro_f1"].tolist() == pytest.approx([0.0, np.std([0.5, 0.7], ddof=1)])


def test_default_grid_depends_on_model_size(tiny_bert_dir, tmp_path):
    from transformers import BertConfig

    assert default_grid(str(tiny_bert_dir)) == ([5e-5, 8e-5, 1e-4], [3, 4, 5])
    assert default_grid(None) == ([5e-5, 8e-5, 1e-4], [3, 4, 5])  # MiniLM, 384 hidden
    BertConfig(hidden_size=768, num_attention_heads=12).save_pretrained(tmp_path / "base")
    assert default_grid(str(tmp_path / "base")) == ([1e-5, 2e-5, 3e-5], [2, 3, 4])


def test_estimate_counts_steps():
    # 2 runs of 32 docs x 2 epochs at 1 s/step, batch 16: 2 x (4 train + 2/3 x 1/4 predict)
    assert estimate_seconds([(32, 2), (32, 2)], 1.0, 16) == pytest.approx(2 * (4 + 2 / 12))


def test_max_runs_and_small_classes_are_refused():
    with pytest.raises(InputError) as e:
        tune(imbalanced(), lrs=[1e-5, 2e-5], epochs_grid=[2, 3], folds=3, max_runs=10,
             quiet=True, fit_fn=fake_fit([]))
    assert "needs 13 fine-tuning runs" in str(e.value) and "max_runs 10" in str(e.value)
    with pytest.raises(InputError) as e:
        tune(imbalanced(n_minor=3), folds=5, lrs=[1e-5], epochs_grid=[2], quiet=True,
             fit_fn=fake_fit([]))
    assert "class 'minor' has only 3" in str(e.value) and "folds 3 or fewer" in str(e.value)
    with pytest.raises(InputError, match="^lrs must be comma-separated numbers"):
        tune(imbalanced(), lrs=[-1e-5], epochs_grid=[2], folds=2, fit_fn=fake_fit([]))


def _csv(tmp_path, frame, name):
    p = tmp_path / name
    frame.to_csv(p, index=False)
    return str(p)


@pytest.mark.parametrize("extra, msg", [
    (["--folds", "5"], "class 'minor' has only 3 document(s)"),
    (["--max-runs", "2"], "needs 5 fine-tuning runs"),
    (["--epochs-grid", "2,x"], "--epochs-grid must be comma-separated whole numbers"),
])
def test_cli_bad_input_exit_2_and_no_output(tmp_path, capsys, extra, msg):
    train = _csv(tmp_path, imbalanced(n_minor=3), "train.csv")
    out = tmp_path / "out"
    args = ["tune", "--train", train, "--lrs", "1e-3,2e-3", "--epochs-grid", "1", "--folds",
            "2", "--device", "cpu", "--out", str(out)]
    assert cli.main(args + extra) == 2
    assert msg in capsys.readouterr().err
    assert not out.exists()


def test_real_tiny_finetune_through_cli(tmp_path, tiny_bert_dir, capsys, monkeypatch):
    import quantformer.train.standard as ft

    sizes = []
    real = ft.oversample_indices

    def spy(labels, ratio, rng):
        sizes.append(len(labels))
        return real(labels, ratio, rng)

    monkeypatch.setattr(ft, "oversample_indices", spy)
    frame = toy_frame(40)
    train = _csv(tmp_path, frame.iloc[:28], "train.csv")
    test = _csv(tmp_path, frame.iloc[28:], "test.csv")
    out = tmp_path / "tuned"
    args = ["tune", "--train", train, "--test", test, "--model", str(tiny_bert_dir),
            "--lrs", "1e-3,5e-4", "--epochs-grid", "1", "--folds", "2", "--oversample",
            "0.8", "--max-length", "64", "--device", "cpu", "--out", str(out),
            "--record", str(tmp_path / "record.json")]
    assert cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "= 5 fine-tuning runs" in printed and "estimated" in printed
    # oversampling saw only training folds (14 documents) and the refit (28), never 40
    assert sorted(set(s for s in sizes if s > 1)) == [14, 28]
    cv = pd.read_csv(out / "cv_results.csv")
    assert cv.columns[:4].tolist() == ["lr", "epochs", "fold", "macro_f1"] and len(cv) == 4
    summ = pd.read_csv(out / "cv_summary.csv")
    assert len(summ) == 2 and summ["rank"].tolist() == [1, 2]
    # the summary is the mean of the folds, ranked by it
    means = cv.groupby("lr")["macro_f1"].mean()
    np.testing.assert_allclose(summ["mean_macro_f1"], means[summ["lr"]].to_numpy())
    assert summ["mean_macro_f1"].is_monotonic_decreasing
    best = json.loads((out / "best.json").read_text())
    assert (best["lr"], best["epochs"]) == (summ["lr"][0], 1)
    assert best["runs"] == 5 and best["folds"] == 2 and best["oversample"] == 0.8
    assert best["test"]["n"] == 12
    clf = quantformer.load(out / "model")
    assert clf.record["hyperparameters"]["lr"] == best["lr"]
    # --record: the refit model's checked record, as `info --model` would give it
    assert json.loads((tmp_path / "record.json").read_text()) == json.loads(
        json.dumps(read_record(out / "model")))
    preds = pd.read_csv(out / "test_predictions.csv")
    assert preds["doc_id"].tolist() == frame["doc_id"].iloc[28:].tolist()
    assert set(preds["predicted"]) <= {"econ", "other"}
    from sklearn.metrics import f1_score

    assert best["test"]["macro_f1"] == pytest.approx(f1_score(
        frame["label"].iloc[28:], preds["predicted"], average="macro", zero_division=0,
        labels=["econ", "other"]))
    rep = json.loads((out / "test_report.json").read_text())
    assert rep["macro_f1"] == pytest.approx(best["test"]["macro_f1"])
    import pyreadr

    assert pyreadr.read_r(str(out / "cv_results.rds"))[None]["fold"].tolist() == \
        cv["fold"].tolist()


# --------------------------------------------------------------------------------------------
# the results folder, the test set and the printed summary (CLI with a fake fine-tuning)


@pytest.fixture
def fake_cli(monkeypatch):
    """Make the tune CLI fine-tune with :func:`fake_fit` (no model, no time estimate)."""
    import quantformer.select.tune as tune_mod

    log = []
    monkeypatch.setattr(tune_mod, "_finetune_fit", fake_fit(log))
    monkeypatch.setattr(tune_mod, "step_seconds", lambda *a, **k: 0.01)
    return log


def with_gaps(frame):
    """The frame with rows 2, 5, 9 given an empty/missing text and row 7 no label."""
    f = frame.copy()
    f["text"] = f["text"].astype(object)
    f.loc[2, "text"], f.loc[5, "text"], f.loc[9, "text"] = "", None, "   "
    f.loc[7, "label"] = None
    return f


def _tune_args(train, out, *extra):
    return ["tune", "--train", train, "--lrs", "5e-5,1e-4", "--epochs-grid", "2", "--folds",
            "2", "--device", "cpu", *extra, "--out", str(out)]


def test_test_documents_without_text_are_kept_and_counted():
    test = with_gaps(imbalanced(8, 4))  # 12 rows: 3 without text, 1 without a label
    with pytest.warns(UserWarning) as rec:
        res = tune(imbalanced(), test, lrs=[1e-4], epochs_grid=[2], folds=2, quiet=True,
                   fit_fn=fake_fit([], score_of=lambda lr, ep: True))
    msg = " ".join(str(w.message) for w in rec)
    assert "of the 12 test document(s), 3 have a missing or empty text and are kept in " \
           "test_predictions with a missing prediction" in msg
    assert "4 (1 without a label, 3 labelled but without a text) are left out of the test " \
           "report, which scores the other 8" in msg
    pred = res.test_predictions
    assert pred["doc_id"].tolist() == test["doc_id"].tolist()  # every row, in order
    assert pred["predicted"].isna().tolist() == [i in (2, 5, 9) for i in range(12)]
    assert pred["label"].isna().sum() == 1
    # the fake predicts the truth: the 8 scorable documents are all right
    assert res.test_report.n == 8 and res.test_report.macro_f1 == 1.0
    assert res.info["n_test"] == 12
    with pytest.raises(InputError, match="test data has no document with both a text and a "
                                         "label"):
        tune(imbalanced(), test.assign(label=None), lrs=[1e-4], epochs_grid=[2], folds=2,
             quiet=True, fit_fn=fake_fit([]))


def test_cli_out_refused_overwrite_replaces_stale_files(tmp_path, capsys, fake_cli):
    train = _csv(tmp_path, imbalanced(), "train.csv")
    test = _csv(tmp_path, with_gaps(imbalanced(8, 4)), "test.csv")
    out = tmp_path / "out"
    out.mkdir()  # an empty folder is fine
    assert cli.main(_tune_args(train, out, "--test", test, "--quiet")) == 0
    printed = capsys.readouterr()
    assert printed.out.strip() == (
        f"wrote best.json, cv_results.csv, cv_results.rds, cv_summary.csv, cv_summary.rds, "
        f"test_predictions.csv, test_predictions.rds and test_report.json to {out}")
    assert "3 have a missing or empty text" in printed.err
    preds = pd.read_csv(out / "test_predictions.csv", keep_default_na=False, na_values=[""])
    assert len(preds) == 12 and preds["predicted"].isna().sum() == 3
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # a second run into the same folder is refused before any work, the folder untouched
    fake_cli.clear()
    assert cli.main(_tune_args(train, out)) == 2
    err = capsys.readouterr().err
    assert f"'{out}' exists and is not empty; pass --overwrite" in err
    assert "or choose another --out" in err
    assert fake_cli == [] and {p.name: p.read_bytes() for p in out.iterdir()} == before
    # --overwrite replaces it: no test_* file of the earlier run survives
    assert cli.main(_tune_args(train, out, "--overwrite", "--quiet")) == 0
    assert capsys.readouterr().out.strip() == (
        f"wrote best.json, cv_results.csv, cv_results.rds, cv_summary.csv and cv_summary.rds "
        f"to {out}")
    assert sorted(p.name for p in out.iterdir()) == [
        "best.json", "cv_results.csv", "cv_results.rds", "cv_summary.csv", "cv_summary.rds"]
    assert "test" not in json.loads((out / "best.json").read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "test.csv", "train.csv"]
    # a file is never replaced
    assert cli.main(_tune_args(train, tmp_path / "train.csv", "--overwrite")) == 2
    assert "is a file, not a folder; choose another --out" in capsys.readouterr().err


def test_cli_error_mid_run_leaves_the_old_folder_or_nothing(tmp_path, capsys, monkeypatch,
                                                            fake_cli):
    import quantformer.select.tune as tune_mod

    train = _csv(tmp_path, imbalanced(), "train.csv")
    old = tmp_path / "old"
    old.mkdir()
    (old / "stale.txt").write_text("earlier run")

    def broken(*a, **k):
        raise RuntimeError("disk full")

    # an error while the folder is written (after some files are): exit 1, nothing changed
    monkeypatch.setattr(tune_mod, "write_json", broken)
    assert cli.main(_tune_args(train, old, "--overwrite", "--quiet")) == 1
    assert "disk full" in capsys.readouterr().err
    assert [p.name for p in old.iterdir()] == ["stale.txt"]
    assert cli.main(_tune_args(train, tmp_path / "new", "--quiet")) == 1
    # a user error detected late (here by the first fine-tuning run): exit 2
    monkeypatch.undo()
    monkeypatch.setattr(tune_mod, "step_seconds", lambda *a, **k: 0.01)

    def refuses(frame, **kw):
        raise InputError("--max-length 9999 is longer than the model's limit")

    monkeypatch.setattr(tune_mod, "_finetune_fit", refuses)
    assert cli.main(_tune_args(train, tmp_path / "new", "--quiet")) == 2
    assert "longer than the model's limit" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old", "train.csv"]


def test_cli_table_prints_learning_rates_as_given(tmp_path, capsys, fake_cli):
    train = _csv(tmp_path, imbalanced(), "train.csv")
    assert cli.main(_tune_args(train, tmp_path / "out")) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("cross-validated macro-F1 per configuration")
    rows = [ln.split() for ln in lines[start + 3:start + 5]]
    assert sorted(r[0] for r in rows) == ["0.0001", "5e-05"]
    assert all(r[1] == "2" for r in rows)
    assert any(ln.startswith("best: lr 5e-05, 2 epochs") for ln in lines)
