"""Model resolution (offline default, local folders, hub ids), position limits, devices."""

from __future__ import annotations

from pathlib import Path

import pytest

from quantformer._core.errors import InputError
from quantformer.models.hub import (DEFAULT_MODEL_NAME, check_max_length, default_model_path,
                                load_config, load_tokenizer, max_positions, model_label,
                                resolve_device, resolve_model)


@pytest.mark.parametrize("name", [None, "", "default", "all-MiniLM-L6-v2",
                                  "sentence-transformers/all-MiniLM-L6-v2"])
def test_default_model_resolves_offline(name, default_model_dir):
    path = resolve_model(name)
    assert path == default_model_path() == str(default_model_dir)
    assert (Path(path) / "config.json").exists()
    assert model_label(name) == DEFAULT_MODEL_NAME


def test_default_model_is_minilm(default_model_dir):
    cfg = load_config(None)
    assert (cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size) == ("bert", 6, 384)
    assert max_positions(cfg) == 512
    assert load_tokenizer(None).is_fast


def test_local_folder(tiny_bert_dir, tmp_path, monkeypatch):
    assert resolve_model(str(tiny_bert_dir)) == str(tiny_bert_dir.resolve())
    monkeypatch.chdir(tiny_bert_dir.parent)
    assert resolve_model(f"./{tiny_bert_dir.name}") == str(tiny_bert_dir.resolve())
    assert model_label(str(tiny_bert_dir)) == str(tiny_bert_dir)
    (tmp_path / "noconfig").mkdir()
    with pytest.raises(InputError, match="has no config.json; give a folder saved with"):
        resolve_model(str(tmp_path / "noconfig"))
    (tmp_path / "weights.bin").write_text("x")
    with pytest.raises(InputError, match="is a file; give a model folder or a hub id"):
        resolve_model(str(tmp_path / "weights.bin"))


@pytest.mark.parametrize("name", ["./no/such/model", "/no/such/model", "a/b/c"])
def test_missing_path(name):
    with pytest.raises(InputError, match=f"model folder not found: '{name}'; check the path, "
                       "or give a hub id .* or leave model out for the bundled default"):
        resolve_model(name)


def test_uncached_hub_id_fails_fast_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    resolve_model.cache_clear()
    import socket

    tried = []  # offline: no connection is even tried (so it fails at once)

    def connect(*args, **kwargs):
        tried.append(args)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket, "create_connection", connect)
    with pytest.raises(InputError) as info:
        resolve_model("someorg/not-a-cached-model")
    assert tried == []
    msg = str(info.value)
    assert "not in the Hugging Face cache" in msg and "cannot be reached" in msg
    assert "pass its local folder with model" in msg
    assert "leave model out to use the bundled all-MiniLM-L6-v2" in msg


def test_hub_probe_has_a_hard_timeout(monkeypatch):
    import socket
    import threading

    from quantformer.models import hub as models

    release = threading.Event()

    def stalled(*args, **kwargs):  # a resolver that does not answer
        release.wait(60)
        raise OSError("released")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(socket, "create_connection", stalled)
    got = []
    probe = threading.Thread(target=lambda: got.append(models._hub_reachable(timeout=0.5)))
    probe.start()
    try:
        probe.join(25)  # a deadline: without the timeout the probe waits for the release
        assert not probe.is_alive() and got == [False]
    finally:
        release.set()  # let the probe thread finish quietly


def test_max_positions_per_architecture():
    from transformers import (BartConfig, BertConfig, DistilBertConfig, LongformerConfig,
                              RobertaConfig, XLMRobertaConfig)

    assert max_positions(BertConfig()) == 512
    assert max_positions(DistilBertConfig()) == 512
    assert max_positions(RobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512
    assert max_positions(XLMRobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512
    assert max_positions(LongformerConfig(max_position_embeddings=4098, pad_token_id=1)) == 4096
    assert max_positions(BartConfig(max_position_embeddings=1024)) == 1024

    class NoLimit:
        model_type = "custom"

    assert max_positions(NoLimit()) is None


def test_tiny_model_limits(tiny_roberta_dir, tiny_longformer_dir):
    assert max_positions(load_config(str(tiny_roberta_dir))) == 512
    assert max_positions(load_config(str(tiny_longformer_dir))) == 2048


def test_check_max_length():
    from transformers import BertConfig, LongformerConfig

    bert = BertConfig()
    assert check_max_length(512, bert) == 512
    assert check_max_length(8, bert) == 8
    with pytest.raises(InputError, match=r"max_length 513 is above this model's limit of 512 "
                                         r"tokens; use max_length 512 or less \(longer "
                                         r"documents are cut head\+tail, or read whole in "
                                         r"windows with truncation chunks\), or a Longformer"):
        check_max_length(513, bert)
    with pytest.raises(InputError, match=r"at least 8 \(special tokens included\), not 4"):
        check_max_length(4, bert)
    with pytest.raises(InputError, match="whole number"):
        check_max_length(256.0, bert)
    assert check_max_length(4096, LongformerConfig(max_position_embeddings=4098)) == 4096


def test_resolve_device(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None:
        monkeypatch.setattr(mps, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    assert resolve_device(None) == "cpu"
    assert resolve_device("CPU") == "cpu"
    with pytest.raises(InputError, match="^device cuda was asked for but no CUDA GPU"):
        resolve_device("cuda")
    with pytest.raises(InputError, match="no CUDA GPU"):
        resolve_device("cuda:1")
    with pytest.raises(InputError, match="Apple MPS is not available"):
        resolve_device("mps")
    with pytest.raises(InputError, match="unknown device 'tpu'; use auto, cpu, cuda"):
        resolve_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda" and resolve_device("cuda:0") == "cuda:0"
