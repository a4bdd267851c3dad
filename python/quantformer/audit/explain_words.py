"""The windows and words of word attributions (:mod:`quantformer.audit.explain`): which
subwords the model sees, and which words of the text they belong to.

* **Windows**: a document as the model sees it, cut exactly as prediction cuts it: one
  window per document (:func:`windows`, :func:`quantformer.models.tokenize.encode` with the
  model's ``max_length`` and ``truncation``), or with ``truncation="chunks"`` every window
  of every document (:func:`chunk_windows`, :func:`quantformer.models.tokenize.encode_windows`
  with the model's ``stride`` and ``max_chunks``). Each window knows which of the document's
  subwords it holds and their character offsets in the text (the fast tokenizer's offsets).
* **Words**: the words of the original text with character offsets (:func:`words_of`); a
  window's subword attributions are summed into them (:func:`word_index`, :func:`word_rows`).
  With several windows, a word's attribution is the mean of its sums over the windows that
  read at least one of its subwords (:func:`averaged_word_rows`); a word that no window read
  (its windows dropped by ``max_chunks``, or outside a truncated window) has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..models.tokenize import (
    encode,
    encode_windows,
    special_template,
    truncate_ids,
    window_starts,
)
from ..infer.classifier import Classifier

_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
#: a word: letters/digits (with combining accents), joined by inner apostrophes or hyphens;
#: or a run of other non-space characters (punctuation, emoji sequences)
WORD_RE = re.compile(rf"[\w{_MARKS}]+(?:['’\-][\w{_MARKS}]+)*|[^\w\s{_MARKS}]+[{_MARKS}]*")


def words_of(text: str) -> list[tuple[str, int, int]]:
    """The words of ``text`` as ``(word, start, end)`` with ``text[start:end] == word``.

    A word is a run of letters and digits (accents, also combining ones, included) that may
    contain inner apostrophes or hyphens (``don't``, ``well-known``), or a run of other
    non-space characters (``!?``, an emoji with its skin tone).
    """
    return [(m.group(), m.start(), m.end()) for m in WORD_RE.finditer(text)]


@dataclass
class Window:
    """One document as the model sees it.

    Attributes:
        input_ids, token_type_ids: the model input (special tokens included, after truncation).
        positions: input positions of the kept text tokens.
        kept: for each kept text token, its index among all of the document's text tokens.
        offsets: (n_tokens, 2) character offsets of all text tokens (kept or not).
        truncated: whether tokens were cut.
    """

    input_ids: list
    token_type_ids: list | None
    positions: np.ndarray
    kept: np.ndarray
    offsets: np.ndarray
    truncated: bool


def windows(clf: Classifier, texts: list,
            hypothesis: str | None = None) -> tuple[list, np.ndarray]:
    """(:class:`Window` per document, or None for a missing text; the missing mask), cut
    exactly as prediction cuts them (:func:`quantformer.models.tokenize.encode`).

    Args:
        hypothesis: an NLI model's filled hypothesis: each text is the premise of the pair
            (premise, hypothesis), cut to leave room for the whole hypothesis; the window's
            positions are the premise's.
    """
    tok = clf.tokenizer
    enc = encode(tok, texts, max_length=clf.max_length, truncation=clf.truncation,
                 pairs=None if hypothesis is None else [hypothesis] * len(texts))
    tpl = special_template(tok)
    if hypothesis is None:
        prefix, budget = tpl.prefix, clf.max_length - tpl.n_single
    else:
        n_hyp = len(tok(hypothesis, add_special_tokens=False)["input_ids"])
        prefix, budget = tpl.pair_prefix, clf.max_length - tpl.n_pair - n_hyp
    present = [i for i, m in enumerate(enc.missing) if not m]
    raw = _subwords(tok, [texts[i] for i in present])
    out: list = [None] * len(texts)
    for i, ids, offs in zip(present, *raw):
        kept = np.asarray(truncate_ids(list(range(len(ids))), budget, clf.truncation),
                          dtype=np.int64)
        seq = enc.input_ids[i]
        positions = np.arange(len(prefix), len(prefix) + len(kept))
        if [ids[k] for k in kept] != seq[len(prefix):len(prefix) + len(kept)]:
            raise RuntimeError("the explained window differs from the predicted one")
        out[i] = Window(seq, enc.token_type_ids[i] if enc.token_type_ids else None, positions,
                        kept, offs, bool(enc.truncated[i]))
    return out, enc.missing


def _subwords(tok, texts: list) -> tuple[list, list]:
    """(subword ids, (n, 2) int64 character offsets) of each text, without special tokens."""
    if not texts:
        return [], []
    raw = tok(texts, add_special_tokens=False, return_offsets_mapping=True,
              return_attention_mask=False, verbose=False)
    return raw["input_ids"], [np.asarray(o, dtype=np.int64).reshape(-1, 2)
                              for o in raw["offset_mapping"]]


@dataclass
class Chunks:
    """Documents read in windows (``truncation="chunks"``) as the model sees them.

    Attributes:
        wins: one :class:`Window` per window, windows in document order (``truncated``: the
            document had windows dropped by ``max_chunks``).
        doc: the document index of each window, shape (n_windows,), int64.
        n_windows: windows per document (0 for a missing text), shape (n_docs,).
        missing: per document, the text was missing or empty.
    """

    wins: list
    doc: np.ndarray
    n_windows: np.ndarray
    missing: np.ndarray


def chunk_windows(clf: Classifier, texts: list) -> Chunks:
    """Every window of every document, cut exactly as prediction cuts them
    (:func:`quantformer.models.tokenize.encode_windows` with the classifier's ``max_length``,
    ``stride`` and ``max_chunks``; a :class:`~quantformer.models.tokenize.ChunkWarning` counts
    the documents cut by ``max_chunks``)."""
    tok = clf.tokenizer
    enc = encode_windows(tok, texts, max_length=clf.max_length, stride=clf.stride,
                         max_chunks=clf.max_chunks)
    tpl = special_template(tok)
    budget = clf.max_length - tpl.n_single
    present = np.flatnonzero(~enc.missing)
    first = np.concatenate([[0], np.cumsum(enc.n_windows)[:-1]]).astype(np.int64)
    wins: list = [None] * len(enc.doc)
    for i, ids, offs in zip(present, *_subwords(tok, [texts[i] for i in present])):
        starts = window_starts(len(ids), budget, enc.stride)[:enc.n_windows[i]]
        for r, s in zip(range(first[i], first[i] + enc.n_windows[i]), starts):
            kept = np.arange(s, min(s + budget, len(ids)), dtype=np.int64)
            positions = np.arange(len(tpl.prefix), len(tpl.prefix) + len(kept))
            seq = enc.input_ids[r]
            if [ids[k] for k in kept] != seq[len(tpl.prefix):len(tpl.prefix) + len(kept)]:
                raise RuntimeError("the explained window differs from the predicted one")
            wins[r] = Window(seq, enc.token_type_ids[r] if enc.token_type_ids else None,
                             positions, kept, offs, bool(enc.truncated[i]))
    return Chunks(wins=wins, doc=enc.doc, n_windows=enc.n_windows, missing=enc.missing)


def word_index(words: list, offsets: np.ndarray) -> np.ndarray:
    """For each token (its character offsets), the index of the word it belongs to: the word
    it overlaps most, else (a token of spaces or with an empty span) the next word."""
    if not words:
        return np.zeros(len(offsets), dtype=np.int64)
    starts = np.array([w[1] for w in words])
    ends = np.array([w[2] for w in words])
    idx = np.searchsorted(ends, offsets[:, 0], side="right")  # first word ending after start
    out = np.minimum(idx, len(words) - 1)
    for t in np.flatnonzero(idx < len(words) - 1):  # a token reaching into the next word
        a, b = idx[t], idx[t] + 1
        s, e = offsets[t]
        if min(e, ends[b]) - max(s, starts[b]) > min(e, ends[a]) - max(s, starts[a]):
            out[t] = b
    return out


def word_rows(text: str, win: Window, token_attr: np.ndarray) -> pd.DataFrame:
    """The words of one document with their summed attributions (NaN: not seen by the model).

    Args:
        token_attr: attributions per input position of ``win`` (special tokens included).
    """
    return averaged_word_rows(text, [win], [token_attr]).drop(columns="word_windows")


def averaged_word_rows(text: str, wins: list, token_attrs: list) -> pd.DataFrame:
    """The words of one document read in several windows: per window, a word's attribution is
    the sum over its subwords in the window; the word's attribution is the mean of those sums
    over the windows that read at least one of its subwords (``word_windows`` counts them).
    A word no window read has NaN, unless it has no subword at all (a character the tokenizer
    drops) in a document no window of which was dropped.

    Args:
        wins: the document's :class:`Window` objects (all with the document's offsets).
        token_attrs: per window, attributions per input position (special tokens included).

    Returns:
        ``word_id`` (from 1), ``word``, ``start``, ``end``, ``attribution``, ``word_windows``.
    """
    words = words_of(text)
    k = len(words)
    widx = word_index(words, wins[0].offsets)
    total, count = np.zeros(k), np.zeros(k, dtype=np.int64)
    for win, attr in zip(wins, token_attrs):
        np.add.at(total, widx[win.kept], attr[win.positions])
        count += np.bincount(widx[win.kept], minlength=k) > 0
    has_tokens = np.bincount(widx, minlength=k) > 0
    seen = (count > 0) | (~has_tokens & (not wins[0].truncated))
    with np.errstate(invalid="ignore", divide="ignore"):
        attr = np.where(count > 0, total / np.maximum(count, 1), 0.0)
    attr[~seen] = np.nan
    return pd.DataFrame({
        "word_id": np.arange(1, k + 1, dtype=np.int64),
        "word": pd.array([w[0] for w in words], dtype="string"),
        "start": np.array([w[1] for w in words], dtype=np.int64),
        "end": np.array([w[2] for w in words], dtype=np.int64),
        "attribution": attr,
        "word_windows": count,
    })
