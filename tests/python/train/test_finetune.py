"""Fine-tuning: recipe defaults, oversampling, batching, reproducibility, bad input, CLI."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

import quantformer
from quantformer.cli import main as cli
from quantformer._core.errors import InputError
from quantformer.train.finetune import (TrainingWarning, default_hyperparameters, finetune,
                                  length_grouped_batches, oversample_indices)

FAST = {"epochs": 1, "quiet": True, "device": "cpu", "max_length": 64}


def _write_config(path, hidden):
    from transformers import BertConfig

    BertConfig(hidden_size=hidden, num_attention_heads=4, num_hidden_layers=1,
               intermediate_size=hidden).save_pretrained(path)
    return str(path)


def test_default_hyperparameters_by_model_size(tmp_path, tiny_bert_dir):
    assert default_hyperparameters(None) == {"lr": 8e-5, "epochs": 4, "size": "small"}
    assert default_hyperparameters(str(tiny_bert_dir))["size"] == "small"
    base = default_hyperparameters(_write_config(tmp_path / "base", 768))
    large = default_hyperparameters(_write_config(tmp_path / "large", 1024))
    assert (base["lr"], base["epochs"], base["size"]) == (3e-5, 4, "base")
    assert (large["lr"], large["epochs"], large["size"]) == (1e-5, 4, "large")
    # the package attribute is the module and the function at once
    assert quantformer.train.finetune.default_hyperparameters is default_hyperparameters
    assert callable(quantformer.finetune)


def test_oversample_indices_tops_up_minorities_only():
    labels = np.array(["a"] * 8 + ["b"] * 2 + ["c"])
    idx = oversample_indices(labels, 0.5, np.random.default_rng(1))
    assert list(idx[:11]) == list(range(11))  # originals first, in order
    counts = pd.Series(labels[idx]).value_counts()
    assert counts.to_dict() == {"a": 8, "b": 4, "c": 4}
    assert set(labels[idx[11:]]) == {"b", "c"}
    # ratio 1 balances; a class already above the target is untouched
    idx1 = oversample_indices(labels, 1.0, np.random.default_rng(1))
    assert pd.Series(labels[idx1]).value_counts().to_dict() == {"a": 8, "b": 8, "c": 8}
    assert len(oversample_indices(labels, 0.1, np.random.default_rng(1))) == 11
    for bad in (0, 1.5, -0.2):
        with pytest.raises(InputError, match="ratio in \\(0, 1\\]"):
            oversample_indices(labels, bad, np.random.default_rng(1))


def test_length_grouped_batches_cover_all_and_pad_little():
    rng = np.random.default_rng(3)
    lengths = rng.integers(5, 200, size=1000)
    batches = length_grouped_batches(lengths, 16, np.random.default_rng(1))
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(1000))
    padded = sum(len(b) * lengths[b].max() for b in batches)
    assert padded / lengths.sum() < 1.1  # random batches of 16 pad about 1.7x here
    rand = [np.arange(i, min(i + 16, 1000)) for i in range(0, 1000, 16)]
    assert sum(len(b) * lengths[b].max() for b in rand) / lengths.sum() > 1.4
    again = length_grouped_batches(lengths, 16, np.random.default_rng(1))
    assert all((a == b).all() for a, b in zip(batches, again))


def test_finetune_predicts_and_records(tiny_bert_dir, capsys):
    frame = toy_frame(40)
    frame.loc[[3, 7], "label"] = None
    clf = finetune(frame, model=str(tiny_bert_dir), epochs=2, lr=1e-3, device="cpu",
                   max_length=64)
    out = capsys.readouterr()
    assert "left out 2 document(s) with a missing label" in out.out
    assert "fine-tuning" in out.err  # the tqdm bar with the running loss
    assert "loss=" in out.err
    assert clf.labels == ["econ", "other"]
    rec = clf.record
    assert rec["n_train"] == 38 and rec["n_missing_label"] == 2
    assert rec["label_counts"] == frame["label"].value_counts().to_dict()
    assert rec["hyperparameters"]["epochs"] == 2 and rec["hyperparameters"]["lr"] == 1e-3
    assert rec["device"] == "cpu" and rec["validation"] is None
    assert len(rec["train_loss_per_epoch"]) == 2
    probs = clf.predict_proba(frame)
    assert probs.shape == (40, 2)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)


def test_same_seed_gives_identical_probabilities(tiny_bert_dir):
    frame = toy_frame(32)
    kw = dict(model=str(tiny_bert_dir), lr=5e-4, **FAST)
    p1 = finetune(frame, seed=7, **kw).predict_proba(frame)
    p2 = finetune(frame, seed=7, **kw).predict_proba(frame)
    p3 = finetune(frame, seed=8, **kw).predict_proba(frame)
    np.testing.assert_array_equal(p1, p2)
    assert np.abs(p1 - p3).max() > 1e-6


def test_labels_order_and_validation(tiny_bert_dir):
    frame = toy_frame(40)
    clf = finetune(frame, model=str(tiny_bert_dir), labels=["other", "econ"],
                   valid_fraction=0.25, **FAST)
    assert clf.labels == ["other", "econ"]
    assert clf.model.config.id2label == {0: "other", 1: "econ"}
    assert clf.model.config.label2id == {"other": 0, "econ": 1}
    val = clf.record["validation"]
    assert val["n"] == 10 and clf.record["n_train"] == 30
    # a separate validation frame; oversampling touches the training data only
    clf2 = finetune(frame.iloc[:30], model=str(tiny_bert_dir), valid=frame.iloc[30:],
                    oversample=1.0, **FAST)
    counts = frame.iloc[:30]["label"].value_counts()
    assert clf2.record["n_train"] == 30
    assert clf2.record["n_train_oversampled"] == 2 * counts.max()
    assert clf2.record["validation"]["n"] == 10
    # the recorded validation score is the final model's macro-F1 on the validation frame
    from sklearn.metrics import f1_score

    pred = clf2.predict(frame.iloc[30:], warn=False)["predicted"]
    assert clf2.record["validation"]["macro_f1"] == pytest.approx(f1_score(
        frame["label"].iloc[30:], pred, average="macro", zero_division=0,
        labels=["econ", "other"]))
    with pytest.raises(InputError, match="not in labels"):
        finetune(frame, model=str(tiny_bert_dir), labels=["econ"], **FAST)


def test_bad_training_data(tiny_bert_dir):
    m = str(tiny_bert_dir)
    frame = toy_frame(20)
    one = frame.assign(label=["econ"] * 18 + [None, None])
    with pytest.raises(InputError, match="only one class \\('econ'\\)") as e:
        finetune(one, model=m, **FAST)
    assert "code documents of at least one other class, or check label_col" in str(e.value)
    with pytest.raises(InputError, match="training set is empty"):
        finetune(frame.assign(label=None), model=m, **FAST)
    with pytest.raises(InputError, match="training set is empty"):
        finetune(frame.iloc[:0], model=m, **FAST)
    single = frame.assign(label=["econ"] * 10 + ["other"] * 9 + ["rare"])
    with pytest.warns(TrainingWarning, match="'rare' have a single training example"):
        clf = finetune(single, model=m, **FAST)
    assert clf.labels == ["econ", "other", "rare"]
    empty_text = frame.copy()
    empty_text.loc[0, "text"] = "  "
    with pytest.warns(TrainingWarning, match="1 labelled document"):
        assert finetune(empty_text, model=m, **FAST).record["n_train"] == 19


@pytest.mark.parametrize("kw, msg", [
    ({"epochs": 0}, "^epochs must be a whole number greater than 0"),
    ({"epochs": 1.5}, "^epochs must be a whole number"),
    ({"lr": 0.0}, "^lr must be a number greater than 0"),
    ({"lr": -1e-5}, "^lr must be"),
    ({"batch_size": 0}, "^batch_size must be a whole number greater than 0"),
    ({"max_length": 600}, "above this model's limit of 512 tokens"),
    ({"truncation": "middle"}, "unknown truncation 'middle'"),
    ({"oversample": 2.0}, "^oversample must be a ratio"),
])
def test_bad_arguments(tiny_bert_dir, kw, msg):
    args = {**FAST, **kw}
    with pytest.raises(InputError, match=msg):
        finetune(toy_frame(12), model=str(tiny_bert_dir), **args)


def test_longformer_long_inputs(tiny_longformer_dir):
    frame = toy_frame(16)
    frame.loc[0, "text"] = " ".join(frame["text"]) * 3  # well over 512 tokens
    clf = finetune(frame, model=str(tiny_longformer_dir), epochs=1, quiet=True,
                   device="cpu", max_length=1024)
    assert clf.record["n_truncated"] == 1
    assert clf.predict_proba(frame.head(3)).shape == (3, 2)
    with pytest.raises(InputError, match="limit of 2048 tokens"):
        finetune(frame, model=str(tiny_longformer_dir), max_length=4096, **{
            k: v for k, v in FAST.items() if k != "max_length"})


def _csv(tmp_path, frame, name="train.csv"):
    p = tmp_path / name
    frame.to_csv(p, index=False)
    return str(p)


def test_cli_finetune_writes_model_dir(tmp_path, tiny_bert_dir, capsys):
    from transformers import AutoModelForSequenceClassification

    train = _csv(tmp_path, toy_frame(24).rename(columns={"text": "body", "label": "code"}))
    out = tmp_path / "model"
    args = ["finetune", "--train", train, "--text-col", "body", "--label-col", "code",
            "--model", str(tiny_bert_dir), "--epochs", "1", "--lr", "1e-3", "--max-length",
            "64", "--labels", "other,econ", "--oversample", "0.9", "--seed", "3",
            "--device", "cpu", "--quiet", "--out", str(out)]
    assert cli.main(args) == 0
    rec = json.loads((out / "quantformer.json").read_text())
    assert rec["complete"] is True and rec["labels"] == ["other", "econ"]
    assert rec["data_source"] == train and rec["n_rows_source"] == 24
    assert rec["model"] == str(tiny_bert_dir)
    hp = rec["hyperparameters"]
    assert (hp["epochs"], hp["lr"], hp["batch_size"], hp["max_length"], hp["truncation"],
            hp["oversample"], hp["seed"]) == (1, 1e-3, 16, 64, "head_tail", 0.9, 3)
    assert rec["versions"]["torch"] and rec["created"].endswith("+00:00")
    assert "Fine-tuned classifier: other, econ" in (out / "README.md").read_text()
    net = AutoModelForSequenceClassification.from_pretrained(out)
    assert net.config.id2label == {0: "other", 1: "econ"}
    capsys.readouterr()
    # --out exists without --overwrite: exit 2, the model is untouched
    before = (out / "quantformer.json").read_text()
    assert cli.main(args) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert (out / "quantformer.json").read_text() == before
    assert cli.main(args + ["--overwrite", "--seed", "4"]) == 0
    assert json.loads((out / "quantformer.json").read_text())["hyperparameters"]["seed"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "train.csv"]


@pytest.mark.parametrize("flag, value", [("--epochs", "0"), ("--lr", "-1"),
                                         ("--batch-size", "0"), ("--epochs", "two")])
def test_cli_rejects_non_positive(tmp_path, flag, value, capsys):
    train = _csv(tmp_path, toy_frame(8))
    assert cli.main(["finetune", "--train", train, flag, value,
                     "--out", str(tmp_path / "m")]) == 2
    assert flag in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_cli_bad_input_exit_2_and_no_output(tmp_path, tiny_bert_dir, capsys):
    one = _csv(tmp_path, toy_frame(10).assign(label="econ"))
    base = ["--model", str(tiny_bert_dir), "--epochs", "1", "--quiet", "--device", "cpu"]
    out = tmp_path / "m"
    assert cli.main(["finetune", "--train", one, *base, "--out", str(out)]) == 2
    assert "only one class" in capsys.readouterr().err
    ok = _csv(tmp_path, toy_frame(10), "ok.csv")
    assert cli.main(["finetune", "--train", ok, *base, "--max-length", "1000",
                     "--out", str(out)]) == 2
    assert "limit of 512 tokens" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.csv", "train.csv"]


def test_quiet_prints_nothing(tiny_bert_dir, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finetune(toy_frame(12), model=str(tiny_bert_dir), **FAST)
    out = capsys.readouterr()
    assert out.out == "" and "fine-tuning" not in out.err
