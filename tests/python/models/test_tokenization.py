"""Tokenisation: exact token positions of head/tail/head_tail truncation, pairs, templates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantformer._core.errors import InputError
from quantformer.models.template import special_template
from quantformer.models.tokenize import encode, head_size, summarise, token_stats, truncate_ids

LONG = " ".join(f"item {i} of the list, number{i}" for i in range(400))


@pytest.fixture(scope="module")
def bert_tok(tiny_bert_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert_dir)


@pytest.fixture(scope="module")
def roberta_tok(tiny_roberta_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_roberta_dir)


@pytest.fixture(scope="module")
def minilm_tok(default_model_dir):
    from quantformer.models.hub import load_tokenizer

    return load_tokenizer(str(default_model_dir))


def _raw(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_head_size_is_the_papers_128_at_512_and_scales():
    assert head_size(510) == 128 and 510 - head_size(510) == 382
    assert head_size(254) == 64  # max_length 256
    assert head_size(126) == 32  # max_length 128
    assert head_size(1022) == 257  # max_length 1024 (Longformer)
    assert head_size(0) == 0 and head_size(1) == 0
    ids = list(range(20))
    assert truncate_ids(ids, 20) is ids
    assert truncate_ids(ids, 10, "head") == list(range(10))
    assert truncate_ids(ids, 10, "tail") == list(range(10, 20))
    assert truncate_ids(ids, 10, "head_tail") == [0, 1, 2] + list(range(13, 20))
    assert truncate_ids(ids, 0) == []


@pytest.mark.parametrize("tok_name", ["bert_tok", "roberta_tok", "minilm_tok"])
@pytest.mark.parametrize("max_length", [512, 256, 128])
def test_exact_positions_of_each_strategy(request, tok_name, max_length):
    tok = request.getfixturevalue(tok_name)
    raw = _raw(tok, LONG)
    assert len(raw) > 2 * max_length
    cls, sep = tok.cls_token_id, tok.sep_token_id
    budget = max_length - 2
    h = head_size(budget)
    want = {
        "head_tail": [cls] + raw[:h] + raw[len(raw) - (budget - h):] + [sep],
        "head": [cls] + raw[:budget] + [sep],
        "tail": [cls] + raw[len(raw) - budget:] + [sep],
    }
    if max_length == 512:
        assert (h, budget - h) == (128, 382)
    for strategy, ids in want.items():
        enc = encode(tok, [LONG, "short text"], max_length=max_length, truncation=strategy)
        assert enc.input_ids[0] == ids, strategy
        assert len(enc.input_ids[0]) == max_length
        assert enc.n_tokens.tolist() == [len(raw) + 2, len(_raw(tok, "short text")) + 2]
        assert enc.truncated.tolist() == [True, False]
        # what the tokenizer itself does: head = truncation=True; short texts untouched
        assert enc.input_ids[1] == tok("short text")["input_ids"]
    head = tok(LONG, truncation=True, max_length=max_length)["input_ids"]
    assert encode(tok, [LONG], max_length=max_length, truncation="head").input_ids[0] == head


def test_longformer_limit_and_head_tail(tiny_longformer_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_longformer_dir)
    text = LONG + " " + LONG
    raw = _raw(tok, text)
    assert len(raw) > 2048
    enc = encode(tok, [text], max_length=2048)
    h = head_size(2046)
    assert enc.input_ids[0] == [0] + raw[:h] + raw[len(raw) - (2046 - h):] + [2]


def test_special_token_templates(bert_tok, roberta_tok, minilm_tok):
    for tok in (bert_tok, minilm_tok):
        tpl = special_template(tok)
        assert (tpl.prefix, tpl.suffix) == ([tok.cls_token_id], [tok.sep_token_id])
        assert (tpl.pair_prefix, tpl.pair_middle, tpl.pair_suffix) == (
            [tok.cls_token_id], [tok.sep_token_id], [tok.sep_token_id])
        assert tpl.uses_token_types and (tpl.type_a, tpl.type_b, tpl.type_suffix) == (0, 1, 1)
    tpl = special_template(roberta_tok)
    assert (tpl.prefix, tpl.suffix) == ([0], [2])
    assert (tpl.pair_prefix, tpl.pair_middle, tpl.pair_suffix) == ([0], [2, 2], [2])
    assert not tpl.uses_token_types
    assert special_template(roberta_tok) is tpl  # cached on the tokenizer


@pytest.mark.parametrize("tok_name", ["bert_tok", "roberta_tok"])
def test_pairs_never_cut_the_hypothesis(request, tok_name):
    tok = request.getfixturevalue(tok_name)
    hyp = "This text is about the economy."
    texts = [LONG, "The president spoke.", None]
    enc = encode(tok, texts, pairs=[hyp] * 3, max_length=64, truncation="head")
    for i in (0, 1):
        ref = tok(texts[i], hyp, truncation="only_first", max_length=64,
                  return_token_type_ids=True)
        assert enc.input_ids[i] == ref["input_ids"]
        if enc.token_type_ids is not None:
            assert enc.token_type_ids[i] == ref["token_type_ids"]
    assert len(enc.input_ids[0]) == 64
    hyp_ids = _raw(tok, hyp)
    tpl = special_template(tok)
    assert enc.input_ids[0][-(len(hyp_ids) + len(tpl.pair_suffix)):] == hyp_ids + tpl.pair_suffix
    assert enc.truncated.tolist() == [True, False, False]
    assert enc.missing.tolist() == [False, False, True] and enc.n_tokens[2] == 0
    # head_tail keeps the end of the premise too
    ht = encode(tok, [LONG], pairs=[hyp], max_length=64).input_ids[0]
    budget = 64 - tpl.n_pair - len(hyp_ids)
    raw = _raw(tok, LONG)
    h = head_size(budget)
    assert ht == (tpl.pair_prefix + raw[:h] + raw[len(raw) - (budget - h):] + tpl.pair_middle
                  + hyp_ids + tpl.pair_suffix)


def test_pair_errors(bert_tok):
    with pytest.raises(InputError, match="leaves no room for the text within max_length 16"):
        encode(bert_tok, ["a"], pairs=[LONG[:200]], max_length=16)
    with pytest.raises(InputError, match="got 1 second segments for 2 texts"):
        encode(bert_tok, ["a", "b"], pairs=["x"])
    with pytest.raises(InputError, match="unknown truncation 'middle'; use one of: head_tail"):
        encode(bert_tok, ["a"], truncation="middle")


def test_missing_and_empty_texts(bert_tok):
    texts = ["some words here", None, "", "   ", np.nan, pd.NA, "NA"]
    enc = encode(bert_tok, texts)
    assert enc.missing.tolist() == [False, True, True, True, True, True, False]
    assert enc.n_tokens[1:6].tolist() == [0] * 5 and enc.n_tokens[0] > 2 and enc.n_tokens[6] > 2
    specials = [bert_tok.cls_token_id, bert_tok.sep_token_id]
    assert all(enc.input_ids[i] == specials for i in range(1, 6))
    assert len(enc.input_ids) == len(texts)
    assert encode(bert_tok, []).input_ids == []


def test_token_stats_and_summary(bert_tok):
    texts = ["one two", None, LONG, "three four five"]
    frame = pd.DataFrame({"doc_id": ["a", "b", "c", "d"], "text": texts,
                          "label": ["x", "y", None, "x"], "year": [1, 2, 3, 4],
                          "party": pd.Categorical(["D", "R", "D", None])}, index=[5, 6, 7, 8])
    stats = token_stats(frame, bert_tok, max_length=128, with_ids=True)
    assert stats.columns.tolist() == ["doc_id", "n_tokens", "truncated", "input_ids", "label",
                                      "year", "party"]
    assert isinstance(stats["party"].dtype, pd.CategoricalDtype)  # docvars keep their dtype
    assert stats["year"].tolist() == [1, 2, 3, 4] and stats["doc_id"].tolist() == list("abcd")
    n = [len(_raw(bert_tok, t)) + 2 if t else 0 for t in texts]
    assert stats["n_tokens"].tolist() == n
    assert stats["truncated"].tolist() == [False, False, True, False]
    assert stats["input_ids"][1] == [] and len(stats["input_ids"][2]) == 128
    assert stats["input_ids"][0] == bert_tok("one two")["input_ids"]
    summary = summarise(stats, 128)["value"]
    present = sorted(x for x in n if x)
    assert summary["documents"] == "4" and summary["missing or empty"] == "1"
    assert summary["min"] == str(present[0]) and summary["max"] == str(present[-1])
    assert summary["median"] == str(present[1])
    assert summary["over 128 (truncated)"] == "1" and summary["share truncated"] == "0.25"
    empty = summarise(stats.iloc[[1]], 128)["value"]
    assert empty["missing or empty"] == "1" and empty["median"] == "NA"


def test_truncation_warning_gives_the_share_and_speaks_r_when_r_called():
    import warnings

    from quantformer.cli.main import warning_text
    from quantformer.models.tokenize import TruncationWarning, warn_truncated

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_truncated(3, 1000, 256, "head_tail")
        warn_truncated(0, 10, 256, "head")  # nothing cut: no warning
    assert [w.category for w in caught] == [TruncationWarning]
    head = "3 of 1000 document(s) truncated to 256 tokens (head_tail), 0.3% of the documents; "
    assert warning_text(caught[0].message, None) == \
        head + "`quantformer tokenize --model M --input F --out G` shows which"
    assert warning_text(caught[0].message, ["x", "model"]) == \
        head + "textstat_subwords(x, model = fit) shows which"
