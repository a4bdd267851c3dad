"""Where a fast tokenizer puts its special tokens, read off one probe encoding, and the raw
subword ids of texts: what cutting (:mod:`quantformer.models.tokenize`) and windows
(:mod:`quantformer.models.windows`) build their inputs from.

The template is read once per tokenizer, so the per-document work in Python is list slicing
only; every model family's own special tokens ([CLS]/[SEP], <s>/</s>, none) are counted, not
guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._core.errors import InputError


@dataclass(frozen=True)
class SpecialTemplate:
    """Where a tokenizer puts its special tokens, read off one probe encoding.

    ``single = prefix + A + suffix``; ``pair = pair_prefix + A + pair_middle + B + pair_suffix``,
    with token type ids for each part (all zeros for models without segment embeddings).
    """

    prefix: list[int]
    suffix: list[int]
    pair_prefix: list[int]
    pair_middle: list[int]
    pair_suffix: list[int]
    type_a: int = 0
    type_b: int = 0
    type_middle: int = 0
    type_suffix: int = 0
    uses_token_types: bool = False

    @property
    def n_single(self) -> int:
        return len(self.prefix) + len(self.suffix)

    @property
    def n_pair(self) -> int:
        return len(self.pair_prefix) + len(self.pair_middle) + len(self.pair_suffix)


def _split_around(full: list[int], parts: list[list[int]]) -> list[list[int]]:
    """Split ``full`` into the pieces before, between and after the given parts, in order."""
    pieces, pos = [], 0
    for part in parts:
        for start in range(pos, len(full) - len(part) + 1):
            if full[start:start + len(part)] == part:
                pieces.append(full[pos:start])
                pos = start + len(part)
                break
        else:  # pragma: no cover - tokenizers that rewrite content while adding specials
            raise InputError("cannot locate the text inside this tokenizer's special-token template")
    pieces.append(full[pos:])
    return pieces


def _read_template(tokenizer) -> SpecialTemplate:
    a_text, b_text = "alpha beta", "gamma delta"
    a = tokenizer(a_text, add_special_tokens=False)["input_ids"]
    b = tokenizer(b_text, add_special_tokens=False)["input_ids"]
    single = tokenizer(a_text)["input_ids"]
    prefix, suffix = _split_around(single, [a])
    enc = tokenizer(a_text, b_text, return_token_type_ids=True)
    pair = enc["input_ids"]
    p_prefix, p_middle, p_suffix = _split_around(pair, [a, b])
    types = enc.get("token_type_ids") or [0] * len(pair)
    i_a = len(p_prefix)
    i_mid = i_a + len(a)
    i_b = i_mid + len(p_middle)
    i_suf = i_b + len(b)
    uses = "token_type_ids" in getattr(tokenizer, "model_input_names", [])
    return SpecialTemplate(
        prefix=prefix, suffix=suffix, pair_prefix=p_prefix, pair_middle=p_middle,
        pair_suffix=p_suffix, type_a=types[i_a] if a else 0,
        type_middle=types[i_mid] if p_middle else 0, type_b=types[i_b] if b else 0,
        type_suffix=types[i_suf] if p_suffix else 0, uses_token_types=uses,
    )


def special_template(tokenizer) -> SpecialTemplate:
    """The :class:`SpecialTemplate` of a fast tokenizer (cached on the tokenizer object)."""
    tpl = tokenizer.__dict__.get("_quantformer_template")
    if tpl is None:
        tpl = _read_template(tokenizer)
        tokenizer.__dict__["_quantformer_template"] = tpl
    return tpl


def is_missing(t) -> bool:
    return t is None or (not isinstance(t, str) and pd.isna(t)) or (isinstance(t, str) and
                                                                     t.strip() == "")


def raw_ids(tokenizer, texts: list[str], chunk: int = 1000) -> list[list[int]]:
    """Subword ids of each text, no special tokens, tokenised ``chunk`` texts at a time."""
    out: list[list[int]] = []
    for start in range(0, len(texts), chunk):
        enc = tokenizer(texts[start:start + chunk], add_special_tokens=False, truncation=False,
                        return_attention_mask=False, return_token_type_ids=False, verbose=False)
        out.extend(enc["input_ids"])
    return out


def pair_ids(tpl: SpecialTemplate, a: list[int], b: list[int]) -> tuple[list, list]:
    """(ids, token type ids) of the pair ``a``, ``b`` with the template's special tokens."""
    seq = tpl.pair_prefix + a + tpl.pair_middle + b + tpl.pair_suffix
    types = ([tpl.type_a] * (len(tpl.pair_prefix) + len(a))
             + [tpl.type_middle] * len(tpl.pair_middle)
             + [tpl.type_b] * len(b) + [tpl.type_suffix] * len(tpl.pair_suffix))
    return seq, types


def longest_hypothesis(tokenizer, hypotheses: list[str]) -> str:
    """The hypothesis with the most subword tokens (the first of equally long ones)."""
    return hypotheses[int(np.argmax(count_subwords(tokenizer, hypotheses)))]


def count_subwords(tokenizer, texts: list[str]) -> list[int]:
    """Subword tokens of each text, special tokens left out."""
    return [len(ids) for ids in raw_ids(tokenizer, list(texts))]
