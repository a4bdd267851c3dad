"""Batched inference helpers: padding, length-sorted batches, input order out, mean pooling."""

from __future__ import annotations

import numpy as np
import pytest

from quantformer.models.batching import length_batches, mean_pool, pad_batch, run_batches


def test_pad_batch_right_pads_with_mask_and_types():
    batch = pad_batch([[5, 6, 7], [8]], [[0, 0, 1], [0]], pad_id=1)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 1, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 1], [0, 0, 0]]
    assert "token_type_ids" not in pad_batch([[5]], None, pad_id=0)


def test_length_batches_longest_first_and_stable():
    batches = length_batches([3, 10, 3, 7, 1], batch_size=2)
    assert [b.tolist() for b in batches] == [[1, 3], [0, 2], [4]]


def test_length_batches_keep_to_the_token_budget():
    lengths = [512, 40, 500, 30, 300, 35, 20, 10]
    batches = length_batches(lengths, batch_size=4, max_tokens=1024)
    # 1024 // 512 = 2 inputs, then 1024 // 300 = 3, then the last 3 in powers of two
    assert [b.tolist() for b in batches] == [[0, 2], [4, 1, 5], [3, 6], [7]]
    assert all(len(b) * max(lengths[i] for i in b) <= 1024 for b in batches)
    assert [b.tolist() for b in length_batches([2000, 5], 4, max_tokens=1024)] == [[0], [1]]
    no_budget = length_batches(lengths, batch_size=4, max_tokens=None)
    assert [len(b) for b in no_budget] == [4, 4]
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))


def test_length_batches_shapes_do_not_grow_with_the_corpus_issue34():
    # every streamed chunk ended in a batch of a new size, and bf16 kernels keep
    # memory per batch shape; the remainders go in powers of two
    sizes = {len(b) for n in range(1, 400) for b in length_batches([64] * n, 64)}
    assert sizes == {1, 2, 4, 8, 16, 32, 64}
    assert [len(b) for b in length_batches([64] * 141, 64)] == [64, 64, 8, 4, 1]


def test_run_batches_returns_rows_in_input_order():
    import torch

    ids = [[1] * n for n in (4, 1, 9, 2, 6)]
    seen = []

    def fn(model, batch):
        seen.append(batch["input_ids"].shape[1])
        lengths = batch["attention_mask"].sum(1, keepdim=True).float()
        return torch.cat([lengths, lengths * 2], dim=1)

    out = run_batches(None, ids, None, fn=fn, batch_size=2)
    assert out.dtype == np.float32 and out.shape == (5, 2)
    assert out[:, 0].tolist() == [4, 1, 9, 2, 6]
    assert seen == [9, 4, 1]  # dynamic padding: each batch as long as its longest input
    assert run_batches(None, [], None, fn=fn).shape == (0,)


def test_mean_pool_ignores_padding():
    import torch

    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert mean_pool(hidden, mask).tolist() == [[2.0, 3.0]]
    assert mean_pool(hidden, torch.zeros((1, 3))).tolist() == [[0.0, 0.0]]


def test_run_batches_matches_unbatched_forward(tiny_bert_dir):
    import torch
    from transformers import AutoModel, AutoTokenizer

    from quantformer.models.tokenize import encode

    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    model = AutoModel.from_pretrained(tiny_bert_dir).eval()
    texts = ["the president spoke", "war", "the economy and the taxes of working families"]
    enc = encode(tok, texts, max_length=32)
    pooled = run_batches(model, enc.input_ids, enc.token_type_ids, batch_size=2,
                         pad_id=tok.pad_token_id,
                         fn=lambda m, b: mean_pool(m(**b).last_hidden_state,
                                                   b["attention_mask"]))
    for i, t in enumerate(texts):
        with torch.inference_mode():
            one = tok(t, return_tensors="pt")
            ref = model(**one).last_hidden_state.mean(1)[0].numpy()
        assert pooled[i] == pytest.approx(ref, abs=1e-5)


def test_classifier_reading_is_replaced_whole_not_field_by_field(tiny_bert_dir):
    """The reading's fields are read-only attributes: a change replaces the reading."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from quantformer.infer.classifier import Classifier
    from quantformer.models.reading import Reading

    net = AutoModelForSequenceClassification.from_pretrained(tiny_bert_dir, num_labels=2)
    clf = Classifier(net, AutoTokenizer.from_pretrained(tiny_bert_dir), ["a", "b"],
                     max_length=32)
    assert clf.reading == Reading("head_tail", 32)
    for name, value in (("truncation", "chunks"), ("stride", 4), ("max_chunks", 2),
                        ("aggregate", "max"), ("max_length", 16)):
        with pytest.raises(AttributeError):
            setattr(clf, name, value)
    assert clf.reading == Reading("head_tail", 32)
    clf.reading = clf.reading.replace(truncation="chunks", stride=4, max_chunks=2)
    assert (clf.truncation, clf.max_length, clf.stride, clf.max_chunks, clf.aggregate) == (
        "chunks", 32, 4, 2, "mean")
