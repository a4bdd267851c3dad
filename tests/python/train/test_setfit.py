"""Few-shot fine-tuning with SetFit (issue 13): the model directory, loading and predicting
through the usual verbs, the head's algebra, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
import warnings

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.cli.main import main
from quantformer._core.errors import InputError, ModelDirError
from quantformer.infer.setfit import SetFitClassifier, head_proba
from quantformer.train.setfit import head_in_order, setfit_finetune


def test_head_matches_sklearn_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 5))
    for k in (2, 3):
        y = np.array(["c", "a", "b"][:k])[rng.integers(0, k, 60)]
        lr = LogisticRegression().fit(x, y)
        order = sorted(set(y), reverse=True)  # another order than sklearn's
        coef, intercept = head_in_order(lr, order)
        want = pd.DataFrame(lr.predict_proba(x), columns=lr.classes_)[order].to_numpy()
        np.testing.assert_allclose(head_proba(x, coef, intercept), want, atol=1e-10)


@pytest.fixture(scope="module")
def setfit_dir(tmp_path_factory):
    """A SetFit model on the bundled MiniLM, 8 examples, 1 pair iteration (seconds)."""
    clf = setfit_finetune(toy_frame(8).assign(label=["econ"] * 4 + ["other"] * 4),
                          num_iterations=1, seed=3, quiet=True, device="cpu")
    out = tmp_path_factory.mktemp("setfit") / "model"
    clf.save(out)
    return clf, out


def test_setfit_directory_loads_and_predicts_as_any_model(setfit_dir, tmp_path):
    import quantformer

    clf, out = setfit_dir
    record = json.loads((out / "quantformer.json").read_text())
    assert record["method"] == "setfit" and record["labels"] == ["econ", "other"]
    assert record["complete"] is True and (out / "head.json").is_file()
    loaded = quantformer.load(out)
    assert isinstance(loaded, SetFitClassifier) and loaded.labels == ["econ", "other"]
    docs = toy_frame(12)
    docs.loc[3, "text"] = None
    with pytest.warns(UserWarning, match="missing"):
        pred = loaded.predict(docs)
    assert list(pred["doc_id"]) == list(docs["doc_id"]) and pd.isna(pred["predicted"][3])
    probs = pred[["prob_econ", "prob_other"]].drop(index=3).to_numpy()
    np.testing.assert_allclose(probs.sum(axis=1), 1, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(clf.predict_proba(docs.drop(index=3)), probs, atol=1e-6)
    # the body is the sentence-transformer: equal to its own pipeline + the head
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(out), device="cpu")
    emb = st.encode(docs["text"].drop(index=3).tolist())
    np.testing.assert_allclose(head_proba(emb.astype(float), loaded.coef, loaded.intercept),
                               probs, atol=1e-4)
    # the predict verb reads it as any model directory
    docs.to_csv(tmp_path / "docs.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["predict", "--model", str(out), "--input", str(tmp_path / "docs.csv"),
                     "--out", str(tmp_path / "p.csv"), "--quiet"]) == 0
    got = pd.read_csv(tmp_path / "p.csv")
    np.testing.assert_allclose(got["prob_econ"].drop(index=3), probs[:, 0], atol=1e-6)


def test_setfit_is_seeded():
    frame = toy_frame(8).assign(label=["econ"] * 4 + ["other"] * 4)
    a = setfit_finetune(frame, num_iterations=1, seed=5, quiet=True, device="cpu")
    b = setfit_finetune(frame, num_iterations=1, seed=5, quiet=True, device="cpu")
    np.testing.assert_allclose(a.coef, b.coef, atol=1e-6)


def test_setfit_leaves_no_scratch_folders(tmp_path, monkeypatch):
    """The Trainer's output folder is removed after training (57 empty folders had piled up
    in /tmp over a benchmark); the body's copy goes when the classifier is collected."""
    import gc
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    clf = setfit_finetune(toy_frame(8).assign(label=["econ"] * 4 + ["other"] * 4),
                          num_iterations=1, seed=5, quiet=True, device="cpu")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 1 and left[0].startswith("quantformer-setfit-body-")
    del clf
    gc.collect()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kwargs, message", [
    ({"epochs": 0}, "epochs must be a positive number"),
    ({"lr": -1.0}, "lr must be a positive number"),
    ({"labels": ["econ"]}, "not in labels"),
])
def test_setfit_bad_arguments(kwargs, message):
    with pytest.raises(InputError, match=message):
        setfit_finetune(toy_frame(20), **kwargs)


def test_setfit_refuses_one_class_and_unsupported_options():
    from quantformer.train.finetune import finetune

    with pytest.raises(InputError, match="at least two classes"):
        setfit_finetune(toy_frame(8).assign(label="econ"))
    with pytest.raises(InputError,
                       match=r"^oversample cannot be used with method setfit \(not yet\); leave it"):
        finetune(toy_frame(8), method="setfit", oversample=0.25)
    with pytest.raises(InputError, match="unknown method"):
        finetune(toy_frame(8), method="bogus")


def test_damaged_setfit_directory(setfit_dir, tmp_path):
    import shutil

    _, out = setfit_dir
    copy = tmp_path / "m"
    shutil.copytree(out, copy)
    (copy / "head.json").write_text("{}")
    with pytest.raises(ModelDirError, match="head.json"):
        SetFitClassifier.from_dir(copy)


def cli_setfit(tiny_bert_dir, tmp_path, *extra, quiet=True) -> tuple[int, Path]:
    """Write 8 two-class documents to train.csv and run ``finetune --method setfit`` on the
    tiny BERT with ``extra`` options; returns the exit code and the model folder."""
    train = toy_frame(8).assign(label=["econ"] * 4 + ["other"] * 4)
    train.to_csv(tmp_path / "train.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["finetune", "--method", "setfit", "--model", str(tiny_bert_dir),
                     "--train", str(tmp_path / "train.csv"), *extra,
                     "--out", str(tmp_path / "m"), *(["--quiet"] if quiet else [])])
    return code, tmp_path / "m"


def test_cli_setfit_prints_one_readable_line_not_the_trainer_dict(tiny_bert_dir, tmp_path,
                                                                  capsys):
    """Review finding: without --quiet, setfit's trainer printed its runtime dict
    ({'train_runtime': ...}); now one line says what was trained. --quiet prints nothing but
    the closing line."""
    code, _ = cli_setfit(tiny_bert_dir, tmp_path, "--setfit-iterations", "1", quiet=False)
    out = capsys.readouterr()
    assert code == 0
    lines = out.out.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("saved the fine-tuned model to")
    assert re.fullmatch(r"SetFit: body trained in \d+\.\d s \(1 step\(s\), mean contrastive "
                        r"loss \d\.\d{4}\); fitting the logistic-regression head", lines[0])
    assert "train_runtime" not in out.out + out.err and "pin_memory" not in out.err
    code, _ = cli_setfit(tiny_bert_dir, tmp_path, "--setfit-iterations", "1", "--overwrite")
    out = capsys.readouterr()
    assert code == 0 and out.out.strip().splitlines() == [
        f"saved the fine-tuned model to {tmp_path / 'm'}"]
    assert "Writing model shards" not in out.err and "pin_memory" not in out.err


def test_cli_finetune_method_setfit_on_tiny_bert(tiny_bert_dir, tmp_path, capsys):
    code, out = cli_setfit(tiny_bert_dir, tmp_path, "--epochs", "1")
    assert code == 0
    assert json.loads((out / "quantformer.json").read_text())["method"] == "setfit"
    assert main(["finetune", "--method", "setfit", "--train", str(tmp_path / "train.csv"),
                 "--oversample", "0.5", "--out", str(tmp_path / "m2")]) == 2
    assert ("--oversample cannot be used with --method setfit (not yet); leave it out"
            in capsys.readouterr().err)
    assert not (tmp_path / "m2").exists()


def test_compare_knows_setfit(tiny_bert_dir):
    from quantformer.select.compare import compare, parse_models

    assert parse_models("setfit,default") == ["setfit", "default"]
    train = toy_frame(16)
    res = compare(train, toy_frame(24).iloc[16:], models="setfit", model=str(tiny_bert_dir),
                  repeats=1, quiet=True, finetune_kwargs={"epochs": 1, "device": "cpu"})
    assert list(res.table["model"]) == ["setfit"]
    assert "SetFit" in res.table["description"].iloc[0]
    assert res.table.filter(like="f1_mean").iloc[0, 0] == res.results["macro_f1"].iloc[0]


def test_cli_setfit_iterations_reach_the_record_and_need_setfit(tiny_bert_dir, tmp_path, capsys):
    code, out = cli_setfit(tiny_bert_dir, tmp_path, "--setfit-iterations", "2")
    assert code == 0
    hp = json.loads((out / "quantformer.json").read_text())["hyperparameters"]
    assert hp["num_iterations"] == 2 and hp["epochs"] == 1 and hp["body_lr"] == 1e-4
    assert main(["finetune", "--train", str(tmp_path / "train.csv"), "--setfit-iterations",
                 "2", "--out", str(tmp_path / "m2")]) == 2
    assert "--setfit-iterations is for --method setfit only" in capsys.readouterr().err
    assert not (tmp_path / "m2").exists()


def test_tune_method_setfit_grids_body_rates_and_refits(tiny_bert_dir, tmp_path, capsys):
    from quantformer.train.setfit import GRID
    from quantformer.select.tune import default_grid, tune

    assert default_grid(str(tiny_bert_dir), "setfit") == (list(GRID[0]), list(GRID[1]))
    train = toy_frame(12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = tune(train, toy_frame(20).iloc[12:], model=str(tiny_bert_dir), method="setfit",
                   lrs=[1e-5, 5e-5], epochs_grid=[1], folds=2, device="cpu", quiet=True)
    quiet_output = capsys.readouterr()
    assert "embedding_loss" not in quiet_output.out and "Map" not in quiet_output.err
    assert len(res.cv_results) == 4 and set(res.cv_results["lr"]) == {1e-5, 5e-5}
    assert res.best["lr"] == res.cv_results.groupby("lr")["macro_f1"].mean().idxmax()
    assert isinstance(res.model, SetFitClassifier)
    assert res.model.record["hyperparameters"]["body_lr"] == res.best["lr"]
    assert res.info["method"] == "setfit" and res.test_report.n == 8
    out = tmp_path / "t"
    train.to_csv(tmp_path / "train.csv", index=False)
    assert main(["tune", "--method", "setfit", "--train", str(tmp_path / "train.csv"),
                 "--oversample", "0.5", "--folds", "2", "--out", str(out)]) == 2
    assert "--oversample cannot be used with --method setfit" in capsys.readouterr().err
    assert not out.exists()


def test_cli_tune_setfit_iterations_reach_every_run_and_the_record(tiny_bert_dir, tmp_path,
                                                                  capsys, monkeypatch):
    """Review finding: `tune` had no --setfit-iterations (only the Python API's fit_fn)."""
    from quantformer.train import setfit as fewshot

    seen = []
    real = fewshot.setfit_finetune

    def spy(frame, **kwargs):
        seen.append(kwargs["num_iterations"])
        return real(frame, **kwargs)

    monkeypatch.setattr(fewshot, "setfit_finetune", spy)
    toy_frame(12).to_csv(tmp_path / "train.csv", index=False)
    out = tmp_path / "t"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["tune", "--method", "setfit", "--setfit-iterations", "2", "--model",
                     str(tiny_bert_dir), "--train", str(tmp_path / "train.csv"), "--lrs",
                     "1e-4", "--epochs-grid", "1", "--folds", "2", "--device", "cpu",
                     "--out", str(out), "--quiet"])
    assert code == 0 and seen == [2, 2, 2]  # two folds and the refit
    best = json.loads((out / "best.json").read_text())
    assert best["method"] == "setfit" and best["setfit_iterations"] == 2
    record = json.loads((out / "model" / "quantformer.json").read_text())
    assert record["hyperparameters"]["num_iterations"] == 2
    capsys.readouterr()
    assert main(["tune", "--setfit-iterations", "2", "--train", str(tmp_path / "train.csv"),
                 "--out", str(tmp_path / "t2")]) == 2
    assert "--setfit-iterations is for --method setfit" in capsys.readouterr().err
    assert main(["tune", "--method", "setfit", "--setfit-iterations", "0", "--train",
                 str(tmp_path / "train.csv"), "--out", str(tmp_path / "t2")]) == 2
    assert "must be greater than 0" in capsys.readouterr().err
    assert not (tmp_path / "t2").exists()


def test_cli_setfit_takes_max_length_and_truncation(tiny_bert_dir, tmp_path):
    """Issue 27, point 6: ``--max-length`` and ``--truncation`` reach SetFit (training: the
    body's max_seq_length and the cut training texts; prediction: the record), never ignored."""
    code, out = cli_setfit(tiny_bert_dir, tmp_path, "--epochs", "1", "--max-length", "12",
                           "--truncation", "tail")
    assert code == 0
    hp = json.loads((out / "quantformer.json").read_text())["hyperparameters"]
    assert (hp["max_length"], hp["truncation"]) == (12, "tail")
    # the body trained at 12 tokens: sentence-transformers saves its limit with the tokenizer
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 12
    clf = SetFitClassifier.from_dir(out, device="cpu")
    assert (clf.max_length, clf.truncation) == (12, "tail")
    long_text = " ".join(["taxes"] * 40)
    with pytest.warns(Warning, match=r"truncated to 12 tokens \(tail\)"):
        clf.predict([long_text])
    (tmp_path / "d").mkdir()
    code, out = cli_setfit(tiny_bert_dir, tmp_path / "d", "--epochs", "1")
    hp = json.loads((out / "quantformer.json").read_text())["hyperparameters"]
    assert hp["truncation"] == "head"  # SetFit's default: sentence-transformers cuts the head
    assert main(["finetune", "--method", "setfit", "--model", str(tiny_bert_dir), "--train",
                 str(tmp_path / "train.csv"), "--max-length", "600", "--out",
                 str(tmp_path / "m3")]) == 2
    assert not (tmp_path / "m3").exists()
