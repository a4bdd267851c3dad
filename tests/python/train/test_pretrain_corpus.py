"""The streamed corpus of further pretraining (issue 33): buffers, batches, held-out documents."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantformer._core.errors import InputError
from quantformer.train.pretrain_corpus import n_batches, scan, token_counter


def _lengths(texts):
    return np.array([len(t.split()) + 2 for t in texts])


@pytest.fixture()
def corpus(tmp_path):
    texts = [("word " * (1 + i % 9)).strip() + f" doc{i}" for i in range(300)]
    texts[5] = texts[77] = "  "  # empty texts are counted, hashed, and never trained on
    path = tmp_path / "c.parquet"
    pd.DataFrame({"text": texts}).to_parquet(path, row_group_size=50)
    return path, [t for t in texts if t.strip()]


def _scan(path, **kw):
    return scan(path, {}, lengths=_lengths, valid_fraction=0.05, seed=3, **kw)


def test_buffers_hold_at_most_buffer_docs_and_cover_the_corpus(corpus):
    path, texts = corpus
    c = _scan(path, buffer_docs=64)
    assert (c.n_docs, c.n_empty, c.n_valid, c.n_train) == (298, 2, 15, 283)
    assert c.n_tokens == int(_lengths(texts).sum())
    train = list(c.buffers(held_out=False))
    assert [len(b) for b in train] == [64, 64, 64, 64, 27]
    held = [t for b in c.buffers(held_out=True) for t in b]
    assert sorted([t for b in train for t in b] + held) == sorted(texts)
    assert set(held) == {t for t, v in zip(texts, c.valid) if v}
    assert _scan(path, buffer_docs=64).sha256 == c.sha256 == _scan(path).sha256


def test_an_epoch_trains_on_every_document_once_in_a_seeded_order(corpus):
    path, _ = corpus
    c = _scan(path, buffer_docs=64)
    batches = list(c.epoch(0, 16, seed=1))
    assert len(batches) == c.steps_per_epoch(16) == 4 * 4 + 2
    seen = [t for b in batches for t in b]
    assert sorted(seen) == sorted(t for b in c.buffers(held_out=False) for t in b)
    assert batches == list(c.epoch(0, 16, seed=1))
    assert batches != list(c.epoch(1, 16, seed=1))
    # a resumed run skips what it trained on, whole buffers untokenised
    assert list(c.epoch(0, 16, seed=1, skip=7)) == batches[7:]
    # length-grouped: a buffer (one megabatch here) is sorted by length, then cut in batches
    first = sorted((_lengths(b) for b in batches[:4]), key=lambda x: -x.max())
    assert [len(b) for b in first] == [16] * 4
    assert all(a.min() >= b.max() for a, b in zip(first, first[1:]))


def test_one_buffer_is_the_whole_corpus_when_it_fits(corpus):
    path, _ = corpus
    c = _scan(path)
    assert [len(b) for b in c.buffers(held_out=False)] == [283]
    assert c.steps_per_epoch(32) == 9 == n_batches(283, 32)


def test_a_frame_and_too_few_documents(corpus):
    path, texts = corpus
    c = scan(pd.DataFrame({"text": texts}), {}, lengths=_lengths, valid_fraction=0.05, seed=3)
    assert c.n_docs == 298 and c.describe()["source"] is None
    with pytest.raises(InputError, match="has only 99 documents with text"):
        scan(pd.DataFrame({"text": texts[:99]}), {}, lengths=_lengths, valid_fraction=0.05,
             seed=3)


@pytest.mark.parametrize("ext", ["csv", "txt", "jsonl"])
def test_a_text_corpus_is_streamed_like_parquet(corpus, tmp_path, ext):
    """Issue 33: a CSV, text or JSON-lines corpus is read a chunk at a time, as Parquet is,
    and gives the same counts, hash, held-out documents and batches."""
    from quantformer.io.frames import write_frame

    path, texts = corpus
    frame = pd.read_parquet(path)
    frame["k"] = range(len(frame))
    if ext == "csv":  # a quoted newline inside a document
        frame.loc[10, "text"] = "first line\nsecond line"
    target = tmp_path / f"c.{ext}"
    if ext == "txt":  # one document a line (an empty text is an empty line)
        target.write_text("\n".join(t if t.strip() else "" for t in frame["text"]) + "\n")
        frame["text"] = [t if t.strip() else "" for t in frame["text"]]
    else:
        write_frame(frame, target)
    frame.to_parquet(tmp_path / "same.parquet", row_group_size=50)
    reference = _scan(tmp_path / "same.parquet", buffer_docs=64)
    c = _scan(target, buffer_docs=64)
    assert (c.n_docs, c.n_empty, c.n_tokens, c.sha256) == (
        reference.n_docs, reference.n_empty, reference.n_tokens, reference.sha256)
    assert (c.valid == reference.valid).all()
    assert list(c.epoch(0, 16, seed=1)) == list(reference.epoch(0, 16, seed=1))
    assert list(c.held_out(16)) == list(reference.held_out(16))


def test_token_counter_counts_as_the_tokenizer_truncates_and_names_the_longer(tiny_bert_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    # 0 to 39 words: with [CLS] and [SEP], lengths 2..41 around the limit of 16 tokens
    texts = [" ".join(["the"] * n) or "." for n in range(40)] * 3
    exact = [len(x) for x in tok(texts)["input_ids"]]
    cut_at = [len(x) for x in tok(texts, truncation=True, max_length=16)["input_ids"]]
    counter = token_counter(tok, 16)
    n, longer = counter.counts(texts)
    assert n.tolist() == cut_at == counter(texts).tolist()
    assert longer.tolist() == [e > 16 for e in exact]
    assert 16 in exact  # a document of exactly the limit is read whole, not counted as cut
    c = scan(pd.DataFrame({"text": texts}), {}, lengths=counter, valid_fraction=0.05, seed=3)
    assert c.n_cut == sum(e > 16 for e in exact) == c.describe()["n_truncated"] > 0
    assert c.n_tokens == sum(cut_at)
    assert scan(pd.DataFrame({"text": texts}), {}, lengths=_lengths, valid_fraction=0.05,
                seed=3).n_cut == 0  # a plain function cuts none
