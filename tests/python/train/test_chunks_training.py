"""Fine-tuning on documents read whole in windows (issue 34): the loss on the aggregate of a
document's windows, or each window with its document's label; the record keeps the chunking
and prediction reads documents the same way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from toydata import regression_frame, toy_frame

from quantformer._core.errors import InputError
from quantformer.models.chunks import aggregate_windows
from quantformer.train.finetune import finetune


def _long(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    out["text"] = [" ".join([t] * 6) for t in out["text"]]  # several windows at 24 tokens
    return out


@pytest.fixture(scope="module")
def chunked(tiny_bert_dir):
    return finetune(_long(toy_frame(16)), model=str(tiny_bert_dir), epochs=1, quiet=True,
                    device="cpu", max_length=24, truncation="chunks", stride=4,
                    aggregate="max", precision="fp32")


def test_record_keeps_the_chunking_and_predict_aggregates_windows(chunked):
    hp = chunked.record["hyperparameters"]
    assert (hp["truncation"], hp["stride"], hp["aggregate"], hp["chunk_training"]) == \
        ("chunks", 4, "max", "aggregate")
    frame = _long(toy_frame(4))
    probs = chunked.predict_proba(frame)
    # by hand: the windows' logits, their max per document, softmax
    import torch

    w = chunked.encoded(frame["text"].tolist())
    assert (w.n_windows > 1).all()
    with torch.inference_mode():
        logits = np.concatenate([
            chunked.model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor(
                [w.token_type_ids[j]])).logits.numpy() for j, ids in enumerate(w.input_ids)])
    agg = aggregate_windows(logits, w.doc, len(frame), "max")
    expect = np.exp(agg) / np.exp(agg).sum(1, keepdims=True)
    assert np.allclose(probs, expect, atol=1e-5)


def test_loss_on_the_aggregate_differs_from_window_labels(tiny_bert_dir):
    kw = dict(model=str(tiny_bert_dir), epochs=1, quiet=True, device="cpu", max_length=24,
              truncation="chunks", stride=4, precision="fp32", seed=3)
    frame = _long(toy_frame(12))
    agg = finetune(frame, **kw)
    lab = finetune(frame, chunk_training="labels", **kw)
    assert lab.record["hyperparameters"]["chunk_training"] == "labels"
    a, b = agg.predict_proba(frame), lab.predict_proba(frame)
    assert a.shape == b.shape == (12, 2) and not np.allclose(a, b)


def test_regression_with_chunks_predicts_the_mean_output(tiny_bert_dir):
    clf = finetune(_long(regression_frame(12)), model=str(tiny_bert_dir), epochs=1,
                   quiet=True, device="cpu", max_length=24, truncation="chunks",
                   task="regression", precision="fp32")
    out = clf.predict(_long(regression_frame(4)))
    assert out["predicted"].notna().all()


@pytest.mark.parametrize("kw, msg", [
    ({"stride": 3}, "stride applies to truncation chunks only"),
    ({"truncation": "chunks", "stride": 22}, "stride 22 must be at least 0 and smaller"),
    ({"truncation": "chunks", "max_chunks": 0}, "max_chunks must be at least 1"),
    ({"truncation": "chunks", "aggregate": "median"}, "unknown aggregate 'median'"),
    ({"truncation": "chunks", "chunk_training": "x"}, "unknown chunk_training 'x'"),
    ({"truncation": "chunks", "method": "setfit", "aggregate": "max"},
     "aggregate does not apply to method setfit"),
    ({"truncation": "chunks", "method": "nli", "chunk_training": "labels"},
     "chunk_training applies to the standard method"),
])
def test_bad_chunk_settings_fail_before_training(kw, msg):
    with pytest.raises(InputError, match=msg):
        finetune(toy_frame(8), model="no-such-model-folder", max_length=24, **kw)


def test_chunks_refused_with_longformer(tiny_longformer_dir):
    with pytest.raises(InputError, match="head_tail with max_length 4096"):
        finetune(toy_frame(8), model=str(tiny_longformer_dir), max_length=64,
                 truncation="chunks", quiet=True, device="cpu", epochs=1)


def _window_batches(tiny_bert_dir, aggregate, windows_per_pass):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from quantformer.models.tokenize import encode_windows
    from quantformer.train.chunks import WindowBatches

    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    frame = _long(toy_frame(6))
    enc = encode_windows(tok, frame["text"].tolist(), max_length=16, stride=2)
    targets = np.array([i % 2 for i in range(len(frame))])
    batches = WindowBatches(enc, np.arange(len(frame)), targets, tok.pad_token_id,
                            aggregate=aggregate, windows_per_pass=windows_per_pass)
    import torch

    torch.manual_seed(0)  # the same new head every time
    net = AutoModelForSequenceClassification.from_pretrained(tiny_bert_dir, num_labels=2)
    return batches, net


@pytest.mark.parametrize("aggregate", ["mean", "max"])
def test_windows_in_passes_give_the_one_pass_gradient(tiny_bert_dir, aggregate):
    """A batch with more windows than ``windows_per_pass`` is trained in passes of at most
    that many windows (a forward hook counts them), with the gradient of the one-pass loss."""
    import torch

    grads, sizes = [], []
    for per_pass in (None, 3):
        batches, net = _window_batches(tiny_bert_dir, aggregate, per_pass)
        net.eval()  # no dropout: the two ways must agree to float precision
        hook = net.bert.embeddings.register_forward_hook(
            lambda m, i, o, seen=[]: sizes.append((per_pass, o.shape[0])))
        batch, target = batches.tensors(np.arange(len(batches.rows)), "cpu")
        n_windows = int(batch["input_ids"].shape[0])
        loss = batches.backward(net, batch, target, precision="fp32", device="cpu",
                                scale=lambda x: x / 2)
        hook.remove()
        grads.append({k: p.grad.clone() for k, p in net.named_parameters()
                      if p.grad is not None})
        if per_pass is None:
            one_loss = float(loss)
        else:
            assert float(loss) == pytest.approx(one_loss, abs=1e-6)
    assert n_windows > 6  # several windows a document: the split is real
    assert [s for p, s in sizes if p is None] == [n_windows]
    assert max(s for p, s in sizes if p == 3) == 3
    assert sum(s for p, s in sizes if p == 3) == 2 * n_windows  # each window twice
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for k in grads[0]:
        assert torch.allclose(grads[0][k], grads[1][k], atol=1e-6), k


def test_windows_in_passes_replay_dropout_and_train_as_the_seed_says(tiny_bert_dir):
    """With dropout on, the second pass draws the first pass's masks: the gradient equals the
    one that back-propagating the first pass's graph would give, and the same seed trains the
    same model."""
    import torch

    batches, net = _window_batches(tiny_bert_dir, "mean", 4)
    net.train()
    net.config.hidden_dropout_prob = 0.5
    batch, target = batches.tensors(np.arange(len(batches.rows)), "cpu")
    torch.manual_seed(0)
    batches.backward(net, dict(batch), target, precision="fp32", device="cpu",
                     scale=lambda x: x)
    passes = {k: p.grad.clone() for k, p in net.named_parameters() if p.grad is not None}
    net.zero_grad()
    # the same draws, by hand: per pass of 4 windows, the graph kept this time
    torch.manual_seed(0)
    doc = batch["_doc"]
    from quantformer.models.chunks import aggregate_torch
    from quantformer.train.chunks import head_loss

    n = int(batch["input_ids"].shape[0])
    logits = torch.cat([net(**{k: v[s:s + 4] for k, v in batch.items() if k != "_doc"})
                        .logits for s in range(0, n, 4)])
    head_loss("single_label_classification", aggregate_torch(logits, doc, len(target)),
              target).backward()
    for k, p in net.named_parameters():
        if p.grad is not None:
            assert torch.allclose(passes[k], p.grad, atol=1e-5), k
    kw = dict(model=str(tiny_bert_dir), epochs=1, quiet=True, device="cpu", max_length=16,
              truncation="chunks", stride=2, precision="fp32", seed=5, batch_size=2)
    frame = _long(toy_frame(12))
    a, b = finetune(frame, **kw), finetune(frame, **kw)  # 2 x 4 = 8 windows a pass
    assert np.array_equal(a.predict_proba(frame), b.predict_proba(frame))
