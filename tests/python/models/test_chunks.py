"""Long documents as overlapping windows (issue 34): exact window ids, offsets, stride,
max_chunks, and the aggregation of window outputs into one per document."""

from __future__ import annotations

import numpy as np
import pytest

from quantformer._core.errors import InputError
from quantformer.models.chunks import (aggregate_torch, aggregate_windows, check_aggregate,
                                       check_not_longformer)
from quantformer.models.tokenize import encode
from quantformer.models.windows import ChunkWarning, encode_windows, window_starts

LONG = " ".join(f"item {i} of the list, number{i}" for i in range(60))


@pytest.fixture(scope="module")
def bert_tok(tiny_bert_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert_dir)


def test_window_starts_cover_the_document_with_the_stride():
    assert window_starts(5, 8, 2) == [0]
    assert window_starts(20, 8, 2) == [0, 6, 12]  # 12 + 8 = 20: the last reaches the end
    assert window_starts(21, 8, 2) == [0, 6, 12, 13]


def test_windows_hold_every_token_with_specials_and_offsets(bert_tok):
    texts = [LONG, "short text", None]
    raw = bert_tok(LONG, add_special_tokens=False)["input_ids"]
    w = encode_windows(bert_tok, texts, max_length=32, stride=6)
    budget = 30
    starts = window_starts(len(raw), budget, 6)
    assert w.n_windows.tolist() == [len(starts), 1, 0]
    assert w.doc.tolist() == [0] * len(starts) + [1]
    assert w.chunk.tolist() == list(range(len(starts))) + [0]
    cls, sep = bert_tok.cls_token_id, bert_tok.sep_token_id
    for j, s in enumerate(starts):
        assert w.input_ids[j] == [cls] + raw[s:s + budget] + [sep]
        assert len(w.input_ids[j]) <= 32
    # neighbours share exactly `stride` tokens (all but the last pair)
    assert w.input_ids[0][1:][-7:-1] == w.input_ids[1][1:7]
    # the character span runs from the window's first token's start to its last token's end
    off = bert_tok(LONG, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert (w.start[1], w.end[1]) == (off[starts[1]][0], off[starts[1] + budget - 1][1])
    assert w.start[0] == 0 and w.end[len(starts) - 1] == len(LONG)
    assert w.n_tokens[0] == len(raw) + 2 and w.missing.tolist() == [False, False, True]
    assert w.stride == 6


def test_default_stride_is_a_quarter_and_max_chunks_warns(bert_tok):
    w = encode_windows(bert_tok, [LONG], max_length=34)
    assert w.stride == 8
    with pytest.warns(ChunkWarning, match="1 of 2 document.*more than max_chunks 2"):
        w2 = encode_windows(bert_tok, [LONG, "short"], max_length=34, max_chunks=2)
    assert w2.n_windows.tolist() == [2, 1] and w2.truncated.tolist() == [True, False]


@pytest.mark.parametrize("kw, msg", [
    ({"stride": 30}, "stride 30 must be at least 0 and smaller than the window"),
    ({"stride": -1}, "stride -1 must"),
    ({"max_chunks": 0}, "max_chunks must be at least 1"),
])
def test_bad_window_settings(bert_tok, kw, msg):
    with pytest.raises(InputError, match=msg):
        encode_windows(bert_tok, [LONG], max_length=32, **kw)


def test_encode_refuses_chunks_where_not_offered(bert_tok):
    with pytest.raises(InputError, match="chunks is not offered yet"):
        encode(bert_tok, ["a"], truncation="chunks")


def test_aggregate_mean_and_max():
    v = np.array([[1.0, 0.0], [3.0, -2.0], [5.0, 5.0]])
    doc = np.array([0, 0, 2])
    mean = aggregate_windows(v, doc, 3, "mean")
    assert mean[0].tolist() == [2.0, -1.0] and np.isnan(mean[1]).all()
    assert mean[2].tolist() == [5.0, 5.0]
    mx = aggregate_windows(v, doc, 3, "max")
    assert mx[0].tolist() == [3.0, 0.0] and np.isnan(mx[1]).all()


def test_aggregate_torch_matches_numpy_and_passes_gradients():
    import torch

    v = torch.tensor([[1.0, 0.0], [3.0, -2.0], [5.0, 5.0]], requires_grad=True)
    doc = torch.tensor([0, 0, 1])
    for how in ("mean", "max"):
        out = aggregate_torch(v, doc, 2, how)
        assert np.allclose(out.detach().numpy(),
                           aggregate_windows(v.detach().numpy(), doc.numpy(), 2, how))
    aggregate_torch(v, doc, 2, "mean").sum().backward()
    assert v.grad[:2].tolist() == [[0.5, 0.5], [0.5, 0.5]]


def test_bad_aggregate_and_longformer():
    with pytest.raises(InputError, match="unknown aggregate 'median'; use mean or max"):
        check_aggregate("median")

    class Config:
        model_type = "longformer"

    with pytest.raises(InputError, match="head_tail with max_length 4096.*BERT-size"):
        check_not_longformer(Config(), "chunks")
    check_not_longformer(Config(), "head_tail")
