"""Documents read whole as overlapping windows (``truncation="chunks"``).

Nothing is cut: each document becomes overlapping windows of ``max_length`` tokens (special
tokens included), neighbours sharing ``stride`` tokens (default a quarter of the window's
content), each window with its character span in the document (the fast tokenizer's offsets).
The model's outputs for the windows are then aggregated into one per document
(:mod:`quantformer.models.chunks`): the sliding window of Devlin et al. (2019, SQuAD) and
Pappagari et al. (2019, "Hierarchical Transformers for long document classification").
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from .._core.errors import InputError, ParamWarning
from .reading import CHUNKS, DEFAULT_MAX_LENGTH, Reading, default_stride
from .template import is_missing, pair_ids, raw_ids, special_template


class ChunkWarning(ParamWarning):
    """Documents had more windows than ``max_chunks``; their later windows were dropped."""


@dataclass
class Windows:
    """Documents cut into overlapping windows (``truncation="chunks"``), one row per window.

    Attributes:
        input_ids, token_type_ids: per window, special tokens included (as in :class:`Encoded`).
        doc: index of the window's document in the input. Shape (n_windows,), int64.
        chunk: the window's number within its document, from 0. Shape (n_windows,), int64.
        start, end: the window's characters in the document text, ``text[start:end]``.
        n_tokens: subword count per document, special tokens included once (0: missing).
        n_windows: windows per document after ``max_chunks`` (0 for a missing document).
        truncated: per document, windows were dropped by ``max_chunks``.
        missing: per document, the text was missing or empty.
    """

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    doc: np.ndarray
    chunk: np.ndarray
    start: np.ndarray
    end: np.ndarray
    n_tokens: np.ndarray
    n_windows: np.ndarray
    truncated: np.ndarray
    missing: np.ndarray
    max_length: int = DEFAULT_MAX_LENGTH
    stride: int = 0
    strategy: str = CHUNKS


def window_starts(n: int, budget: int, stride: int) -> list[int]:
    """First token of each window over ``n`` content tokens: windows of ``budget`` tokens, each
    starting ``budget - stride`` after the previous, the last one reaching the end."""
    if n <= budget:
        return [0]
    step = budget - stride
    starts = list(range(0, n - budget, step))
    return starts + [n - budget] if starts[-1] + budget < n else starts


def _ids_offsets(tokenizer, texts: list[str], chunk: int = 1000):
    ids, offs = [], []
    for start in range(0, len(texts), chunk):
        enc = tokenizer(texts[start:start + chunk], add_special_tokens=False, truncation=False,
                        return_attention_mask=False, return_token_type_ids=False,
                        return_offsets_mapping=True, verbose=False)
        ids.extend(enc["input_ids"])
        offs.extend(enc["offset_mapping"])
    return ids, offs


def encode_windows(tokenizer, texts, *, max_length: int = DEFAULT_MAX_LENGTH,
                   stride: int | None = None, max_chunks: int | None = None,
                   reading: Reading | None = None) -> Windows:
    """Cut every document into overlapping windows of ``max_length`` tokens.

    Args:
        tokenizer: a fast Hugging Face tokenizer (its offsets give the character spans).
        texts: sequence of str or None, length n.
        max_length: tokens per window, special tokens included (default 512).
        stride: content tokens shared by neighbouring windows (default: a quarter of the
            window's content, :func:`default_stride`); must be smaller than the content.
        max_chunks: the first windows kept per document at most (default None: all); a
            :class:`ChunkWarning` counts the documents that had more.
        reading: how documents are read (:class:`~quantformer.models.reading.Reading`); when
            given, its ``max_length``, ``stride`` and ``max_chunks`` replace the keywords.

    Returns:
        :class:`Windows`, windows in document order; a missing document has none.

    Raises:
        InputError: ``stride`` not smaller than the window's content, ``max_chunks`` < 1.
    """
    reading = reading or Reading(CHUNKS, max_length, stride, max_chunks)
    max_length, max_chunks = reading.max_length, reading.max_chunks
    tpl = special_template(tokenizer)
    budget = max_length - tpl.n_single
    stride = (default_stride(max_length, tpl.n_single) if reading.stride is None
              else int(reading.stride))
    reading.replace(stride=stride).check_window(budget)
    texts = list(texts)
    n = len(texts)
    missing = np.array([is_missing(t) for t in texts], dtype=bool)
    present = [i for i in range(n) if not missing[i]]
    raw, offs = _ids_offsets(tokenizer, [texts[i] for i in present]) if present else ([], [])
    cols = {k: [] for k in ("ids", "doc", "chunk", "start", "end")}
    n_tokens, n_windows = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    truncated = np.zeros(n, dtype=bool)
    for i, ids, off in zip(present, raw, offs):
        n_tokens[i] = len(ids) + tpl.n_single
        starts = window_starts(len(ids), budget, stride)
        truncated[i] = max_chunks is not None and len(starts) > max_chunks
        starts = starts[:max_chunks] if max_chunks is not None else starts
        n_windows[i] = len(starts)
        for j, s in enumerate(starts):
            piece = ids[s:s + budget]
            cols["ids"].append(tpl.prefix + piece + tpl.suffix)
            cols["doc"].append(i)
            cols["chunk"].append(j)
            cols["start"].append(off[s][0] if piece else 0)
            cols["end"].append(off[s + len(piece) - 1][1] if piece else 0)
    types = ([[tpl.type_a] * len(x) for x in cols["ids"]] if tpl.uses_token_types else None)
    if truncated.any():
        warn_dropped(int(truncated.sum()), n, max_chunks, stacklevel=3)
    as_int = lambda k: np.asarray(cols[k], dtype=np.int64)  # noqa: E731
    return Windows(input_ids=cols["ids"], token_type_ids=types, doc=as_int("doc"),
                   chunk=as_int("chunk"), start=as_int("start"), end=as_int("end"),
                   n_tokens=n_tokens, n_windows=n_windows, truncated=truncated,
                   missing=missing, max_length=max_length, stride=stride)


def warn_dropped(n_dropped: int, n: int, max_chunks, stacklevel: int = 2) -> None:
    """A :class:`ChunkWarning`: ``n_dropped`` of ``n`` documents had more than ``max_chunks``
    windows, and their later windows were dropped."""
    import warnings

    warnings.warn(ChunkWarning(
        f"{n_dropped} of {n} document(s) need more than {{max_chunks}} {max_chunks} windows; "
        f"only their first {max_chunks} are read (the later ones are dropped)",
        params=["max_chunks"]),
        stacklevel=stacklevel + 1)


@contextlib.contextmanager
def dropped_counted():
    """Within: no :class:`ChunkWarning` from :func:`encode_windows` (the caller reads a corpus
    in several calls, adds up :attr:`Windows.truncated` and warns once for all of its
    documents with :func:`warn_dropped`). Filters are process-wide: the threads that tokenise
    ahead of the forward passes are silenced too."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ChunkWarning)
        yield


def encode_window_pairs(tokenizer, texts, hypotheses: list[str], *,
                        max_length: int = DEFAULT_MAX_LENGTH, stride: int | None = None,
                        max_chunks: int | None = None, reading: Reading | None = None
                        ) -> tuple[Windows, list, list | None]:
    """Every window of every document paired with each hypothesis (NLI with
    ``truncation="chunks"``): the premise is cut into windows (:func:`encode_windows`) whose
    content leaves room, within ``max_length``, for the pair's special tokens and the longest
    hypothesis, which is never cut.

    Args:
        hypotheses: the k filled hypotheses.
        max_length, stride, max_chunks, reading: as in :func:`encode_windows`; ``stride``
            counts premise tokens and defaults to a quarter of the premise's window.

    Returns:
        (:class:`Windows` of the premises, with ``max_length`` the premise window and
        ``input_ids`` the single-sequence windows; the pair ids, window-major: window w with
        hypothesis j at ``w * k + j``; their token type ids or None).

    Raises:
        InputError: a hypothesis that leaves no room for the text; a bad ``stride`` or
            ``max_chunks``.
    """
    reading = reading or Reading(CHUNKS, max_length, stride, max_chunks)
    tpl = special_template(tokenizer)
    hyp = raw_ids(tokenizer, list(hypotheses))
    longest = max((len(h) for h in hyp), default=0)
    budget = reading.max_length - tpl.n_pair - longest
    if budget < 1:
        raise InputError(f"the longest hypothesis takes {longest} tokens and leaves no room for "
                         f"the text within {{max_length}} {reading.max_length}; shorten it",
                         params=["max_length"])
    reading.check_window(budget)  # worded with the caller's length
    win = encode_windows(tokenizer, texts,
                         reading=reading.replace(max_length=budget + tpl.n_single))
    ids, types = [], [] if tpl.uses_token_types else None
    cut = slice(len(tpl.prefix), -len(tpl.suffix) if tpl.suffix else None)
    for window in win.input_ids:
        for b in hyp:
            seq, t = pair_ids(tpl, window[cut], b)
            ids.append(seq)
            if types is not None:
                types.append(t)
    return win, ids, types
