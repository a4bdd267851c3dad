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
     "aggregate does not apply to setfit"),
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
