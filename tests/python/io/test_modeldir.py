"""Model directories: atomic writes, the completion record, clear errors for bad folders."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from toydata import toy_frame

import quantformer
from quantformer.cli import main as cli
from quantformer._core.errors import InputError, ModelDirError
from quantformer.train.finetune import finetune
from quantformer.io.modeldir import RECORD, read_record


@pytest.fixture(scope="module")
def clf(tiny_bert_dir):
    return finetune(toy_frame(24), model=str(tiny_bert_dir), epochs=1, quiet=True,
                    device="cpu", max_length=64)


def test_save_and_load_round_trip(clf, tmp_path):
    path = clf.save(tmp_path / "m")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no temporary folder left
    import os
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's private 0700
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", RECORD, "README.md"} <= names
    rec = read_record(path)
    assert rec["complete"] is True and rec["labels"] == clf.labels
    loaded = quantformer.load(path, device="cpu")
    assert isinstance(loaded, quantformer.Classifier)
    assert loaded.labels == clf.labels and loaded.max_length == 64
    texts = toy_frame(10)["text"]
    np.testing.assert_allclose(loaded.predict_proba(texts), clf.predict_proba(texts),
                               atol=1e-6)
    with pytest.raises(InputError, match="exists; pass overwrite or choose another out"):
        clf.save(path)
    clf.save(path, overwrite=True)
    assert read_record(path)["labels"] == clf.labels


def test_interrupted_save_leaves_nothing(clf, tmp_path, monkeypatch):
    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(clf.tokenizer, "save_pretrained", boom)
    with pytest.raises(KeyboardInterrupt):
        clf.save(tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_missing_incomplete_and_non_classifier_dirs(clf, tmp_path, tiny_bert_dir, capsys):
    with pytest.raises(ModelDirError, match="model directory not found"):
        quantformer.load(tmp_path / "nope")
    # a plain pretrained model folder: no completion record
    plain = shutil.copytree(tiny_bert_dir, tmp_path / "plain")
    with pytest.raises(ModelDirError, match="no quantformer.json completion record") as err:
        quantformer.load(plain)
    # a pretrained model folder: fine-tune it first; never a hint to overwrite it
    assert "not one written by `quantformer finetune`. Fine-tune it first" in str(err.value)
    assert "overwrite" not in str(err.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelDirError, match="not a quantformer model directory") as err:
        quantformer.load(empty)
    assert "overwrite" not in str(err.value)
    empty.rmdir()
    good = clf.save(tmp_path / "good")
    # weights removed after training: a clear error, not an internal one
    broken = shutil.copytree(good, tmp_path / "broken")
    (broken / "model.safetensors").unlink()
    with pytest.raises(ModelDirError, match="its model files cannot be loaded"):
        quantformer.load(broken)
    out = tmp_path / "p.parquet"
    toy_frame(3).to_csv(tmp_path / "three.csv", index=False)
    assert cli.main(["predict", "--model", str(broken), "--input", str(tmp_path / "three.csv"),
                     "--out", str(out)]) == 2
    assert "fine-tune again" in capsys.readouterr().err.lower()
    assert not out.exists()
    # truncated weights, an invalid config.json: the same exit-2 kind of error
    shutil.copy(good / "model.safetensors", broken / "model.safetensors")
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelDirError, match="its model files cannot be loaded"):
        quantformer.load(broken)
    shutil.copy(good / "model.safetensors", broken / "model.safetensors")
    (broken / "config.json").write_text("{not json")
    with pytest.raises(ModelDirError, match="config.json' is not valid JSON"):
        quantformer.load(broken)
    shutil.rmtree(broken)
    (tmp_path / "three.csv").unlink()
    # the record present but not marked complete
    inc = shutil.copytree(good, tmp_path / "incomplete")
    rec = json.loads((inc / RECORD).read_text())
    rec["complete"] = False
    (inc / RECORD).write_text(json.dumps(rec))
    with pytest.raises(ModelDirError, match="incomplete"):
        quantformer.load(inc)
    # a complete record over a base (non-classifier) model
    shutil.copy(good / RECORD, plain / RECORD)
    with pytest.raises(ModelDirError, match="not a sequence classifier"):
        quantformer.load(plain)
    # the CLI: exit 2, message, no output file
    data = tmp_path / "docs.csv"
    toy_frame(5).to_csv(data, index=False)
    for bad in (tmp_path / "nope", plain, inc):
        out = tmp_path / "p.parquet"
        assert cli.main(["predict", "--model", str(bad), "--input", str(data), "--out",
                         str(out)]) == 2
        assert "quantformer predict: error:" in capsys.readouterr().err
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.csv", "good", "incomplete",
                                                          "plain"]


def test_model_card_and_record_fields(clf, tmp_path):
    path = clf.save(tmp_path / "m")
    card = (path / "README.md").read_text()
    assert "Wankmüller 2022, section 6.4" in card and "| econ |" in card
    rec = json.loads((path / RECORD).read_text())
    for key in ("labels", "label_counts", "n_train", "n_missing_label", "model",
                "base_model_path", "hyperparameters", "validation", "versions", "created",
                "complete"):
        assert key in rec
    assert set(rec["hyperparameters"]) >= {"epochs", "lr", "batch_size", "max_length",
                                           "truncation", "oversample", "seed"}


def test_info_model_prints_the_checked_record(clf, tmp_path, capsys):
    path = clf.save(tmp_path / "m")
    assert cli.main(["info", "--model", str(path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record == read_record(path)
    assert record["labels"] == clf.labels and record["hyperparameters"]["max_length"] == 64
    assert cli.main(["info", "--model", str(tmp_path / "nothing"), "--json"]) == 2
    err = capsys.readouterr().err
    assert "model directory not found" in err
