"""The unlabelled corpus of ``quantformer pretrain``, streamed, so that a corpus larger than
memory can be used.

The corpus is read in chunks (:func:`quantformer.io.frames.iter_frames`: a Parquet file one
record batch at a time, a CSV, TSV, text or JSON-lines file one chunk at a time; only an
``.rds`` file, which pyreadr reads whole, is held) every time it is needed, and never held
whole: a first pass counts the documents with text, hashes every text in order and counts
their tokens; the held-out documents are then drawn by the seed from their positions (one byte
per document). Training
reads the other documents into buffers of ``buffer_docs`` (in file order), shuffles and
length-groups each buffer with a generator seeded by (seed, epoch, buffer), and yields its
batches; evaluation reads the held-out documents the same way, sorted by length within each
buffer. So peak memory grows with the buffer, not with the corpus, and the same seed gives
the same batches in the same order every time, which a resumed run relies on: it skips the
batches it has trained on without tokenising whole buffers it has passed. A corpus no larger
than one buffer is shuffled as a whole (the in-memory case).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.frames import iter_frames
from .data import MEGABATCH, length_grouped_batches

MIN_DOCS = 100
BUFFER_DOCS = 10_000


def _texts(corpus, corpus_kw: dict, quiet: bool = False) -> Iterator[str]:
    """Every document's text in file order ("" for a missing one). A file without an id
    column is read without the notice that its documents are named ``text1..N``: unlabelled
    pretraining never uses the ids. ``quiet``: without the reader's warnings (an encoding, a
    text column of numbers), for the reads after the first, which showed them once."""
    if isinstance(corpus, pd.DataFrame):
        chunks = iter([corpus])
    else:
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore")
            chunks = iter(iter_frames(corpus, **corpus_kw, warn_ids=False))
    while True:
        with warnings.catch_warnings():  # not held across a yield: only the reading is quiet
            if quiet:
                warnings.simplefilter("ignore")
            chunk = next(chunks, None)
        if chunk is None:
            return
        for t in chunk["text"]:
            yield "" if t is None or (isinstance(t, float) and math.isnan(t)) else str(t)


def n_batches(n_docs: int, batch_size: int) -> int:
    """How many batches :func:`length_grouped_batches` makes of ``n_docs`` documents."""
    mega = batch_size * MEGABATCH
    full, rest = divmod(n_docs, mega)
    return full * MEGABATCH + math.ceil(rest / batch_size)


@dataclass
class Corpus:
    """A corpus file or frame as :func:`scan` found it, read again in buffers on demand."""
    source: object
    corpus_kw: dict
    n_docs: int
    n_empty: int
    n_tokens: int
    sha256: str
    valid: np.ndarray  # bool per document with text: held out
    buffer_docs: int
    lengths: Callable  # texts -> token counts (truncated)
    n_cut: int = 0  # documents with text longer than the token limit (read up to it)

    @property
    def n_valid(self) -> int:
        return int(self.valid.sum())

    @property
    def n_train(self) -> int:
        return self.n_docs - self.n_valid

    def describe(self) -> dict:
        return {"n_docs": self.n_docs, "n_empty": self.n_empty, "sha256": self.sha256,
                "source": None if isinstance(self.source, pd.DataFrame) else str(self.source),
                "n_tokens": self.n_tokens, "n_truncated": self.n_cut, "n_train": self.n_train,
                "n_valid": self.n_valid, "buffer_docs": self.buffer_docs}

    def buffers(self, held_out: bool) -> Iterator[list[str]]:
        """The training (or held-out) texts in file order, ``buffer_docs`` at a time."""
        buf, i = [], 0
        for t in _texts(self.source, self.corpus_kw, quiet=True):
            if not t.strip():
                continue
            if self.valid[i] == held_out:
                buf.append(t)
                if len(buf) == self.buffer_docs:
                    yield buf
                    buf = []
            i += 1
        if buf:
            yield buf

    def steps_per_epoch(self, batch_size: int) -> int:
        """Batches of ``batch_size`` in one pass over the training documents."""
        full, rest = divmod(self.n_train, self.buffer_docs)
        return full * n_batches(self.buffer_docs, batch_size) + n_batches(rest, batch_size)

    def epoch(self, epoch: int, batch_size: int, seed: int, skip: int = 0) -> Iterator[list]:
        """The training batches (lists of texts) of one epoch, after the first ``skip``."""
        for number, buf in enumerate(self.buffers(held_out=False)):
            k = n_batches(len(buf), batch_size)
            if skip >= k:  # passed already: not tokenised
                skip -= k
                continue
            rng = np.random.default_rng([seed, epoch, number])
            for b in length_grouped_batches(self.lengths(buf), batch_size, rng)[skip:]:
                yield [buf[i] for i in b]
            skip = 0

    def held_out(self, batch_size: int) -> Iterator[list]:
        """The held-out texts in batches, longest first within each buffer."""
        for buf in self.buffers(held_out=True):
            order = np.argsort(-np.asarray(self.lengths(buf)), kind="stable")
            for s in range(0, len(order), batch_size):
                yield [buf[i] for i in order[s:s + batch_size]]


@dataclass
class TokenCounter:
    """The token counts (special tokens included, truncated at ``max_length``) of a list of
    texts when called; :meth:`counts` also says which texts were longer than ``max_length``
    (tokenised to one token more, so in the same single pass)."""
    tokenizer: object
    max_length: int

    def counts(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(counts truncated at max_length, longer than max_length)``, one each per text."""
        enc = self.tokenizer(texts, truncation=True, max_length=self.max_length + 1)
        n = np.array([len(x) for x in enc["input_ids"]], dtype=np.int64)
        return np.minimum(n, self.max_length), n > self.max_length

    def __call__(self, texts: list[str]) -> np.ndarray:
        return self.counts(texts)[0]


def token_counter(tokenizer, max_length: int) -> TokenCounter:
    """The :class:`TokenCounter` of ``tokenizer`` at ``max_length`` tokens."""
    return TokenCounter(tokenizer, max_length)


def _count(lengths: Callable, texts: list[str]) -> tuple[int, int]:
    """(tokens, documents cut) of ``texts``; a plain ``lengths`` function cuts none."""
    if isinstance(lengths, TokenCounter):
        n, cut = lengths.counts(texts)
        return int(n.sum()), int(cut.sum())
    return int(np.asarray(lengths(texts)).sum()), 0


def scan(corpus, corpus_kw: dict, *, lengths: Callable, valid_fraction: float, seed: int,
         buffer_docs: int = BUFFER_DOCS) -> Corpus:
    """Read the corpus once: count, hash and hold out documents.

    Returns:
        A :class:`Corpus`; its hash covers every text in order (empty ones too), so it names
        the corpus; with a :class:`TokenCounter` as ``lengths`` it counts the documents
        longer than its ``max_length`` (``n_cut``).

    Raises:
        InputError: fewer than 100 documents with text (the count named).
    """
    digest, n_docs, n_empty, pending = hashlib.sha256(), 0, 0, []
    n_tokens = n_cut = 0
    for t in _texts(corpus, corpus_kw):
        digest.update(t.encode("utf-8") + b"\0")
        if not t.strip():
            n_empty += 1
            continue
        n_docs += 1
        pending.append(t)
        if len(pending) == 1024:
            tokens, cut = _count(lengths, pending)
            n_tokens, n_cut, pending = n_tokens + tokens, n_cut + cut, []
    if pending:
        tokens, cut = _count(lengths, pending)
        n_tokens, n_cut = n_tokens + tokens, n_cut + cut
    if n_docs < MIN_DOCS:
        n = n_docs + n_empty
        what = (f"has {n} documents and every text is empty" if not n_docs
                else f"has only {n_docs} documents with text (of {n})")
        raise InputError(f"{{corpus}} {what}; further pretraining needs at least {MIN_DOCS} "
                         "documents with text (thousands help)", params=["corpus"])
    return Corpus(source=corpus, corpus_kw=corpus_kw, n_docs=n_docs, n_empty=n_empty,
                  n_tokens=n_tokens, sha256=digest.hexdigest(),
                  valid=held_out_mask(n_docs, valid_fraction, seed), buffer_docs=buffer_docs,
                  lengths=lengths, n_cut=n_cut)


def held_out_mask(n: int, fraction: float, seed: int) -> np.ndarray:
    """Random held-out documents (at least one) as a boolean mask."""
    k = max(1, int(round(n * fraction)))
    mask = np.zeros(n, dtype=bool)
    mask[np.random.default_rng(seed).permutation(n)[:k]] = True
    return mask


def split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train, held_out)`` document positions, as :func:`held_out_mask` draws them."""
    mask = held_out_mask(n, fraction, seed)
    return np.flatnonzero(~mask), np.flatnonzero(mask)
