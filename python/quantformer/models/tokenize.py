"""Subword tokenisation, truncation strategies on token ids and length statistics.

Documents longer than a model's limit are cut on *token ids*, never on characters:

``head_tail`` (default)
    keep the first ``h`` and the last ``budget - h`` tokens, where ``budget`` is ``max_length``
    minus the special tokens. ``h = round(budget * 128 / 510)``: at ``max_length = 512`` this is
    the paper's 128 + 382 (Wankmüller 2022, section 6.3, after Sun et al. 2019).
``head``
    the first ``budget`` tokens (what ``truncation=True`` does in Hugging Face).
``tail``
    the last ``budget`` tokens.
``chunks``
    nothing is cut: each document is read whole as overlapping windows
    (:mod:`quantformer.models.windows`, Devlin et al. 2019; Pappagari et al. 2019).

How a document is read is one value, :class:`~quantformer.models.reading.Reading`;
:func:`encode_reading` reads documents as it says. Tokenisation is batched through the model's
fast (Rust) tokenizer; special tokens are added from a template read off the tokenizer once
(:mod:`quantformer.models.template`), so the per-document work in Python is list slicing only.
The names of :mod:`~quantformer.models.template`, :mod:`~quantformer.models.windows` and
:mod:`~quantformer.models.reading` that callers import from here stay importable here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._core.errors import InputError, ParamWarning
from ..io.columns import with_docvars
from ..io.modeldir import peek_record
from .reading import (CHUNKS, DEFAULT_MAX_LENGTH, DEFAULT_TRUNCATION, STRATEGIES,  # noqa: F401
                      TRUNCATIONS, Reading, check_max_chunks, check_strategy, check_windows,
                      default_stride)
from .template import (SpecialTemplate, count_subwords, is_missing,  # noqa: F401
                       longest_hypothesis, pair_ids, raw_ids, special_template)
from .windows import (ChunkWarning, Windows, dropped_counted, encode_window_pairs,  # noqa: F401
                      encode_windows, warn_dropped, window_starts)

PAPER_HEAD = 128  # first tokens kept at 512 (Wankmüller 2022, section 6.3)
PAPER_BUDGET = 510  # 512 minus [CLS] and [SEP]
_, HEAD, TAIL = STRATEGIES  # head_tail, then the first or the last tokens only


class TruncationWarning(ParamWarning):
    """Documents longer than ``max_length`` were cut."""


def warn_truncated(n_truncated: int, n: int, max_length: int, strategy: str) -> None:
    """Warn that ``n_truncated`` of ``n`` documents were cut to ``max_length`` tokens.

    The wording is the one every verb uses (``predict``, ``zeroshot``, ``evaluate --model``):
    ``"3 of 120 document(s) truncated to 256 tokens (head_tail), 2.5% of the documents"``,
    then where to see which: ``quantformer tokenize`` on the command line,
    ``textstat_subwords(x, model = fit)`` when R called (the CLI's ``--r-names``).
    """
    if n_truncated:
        import warnings

        share = 100 * n_truncated / n
        head = (f"{n_truncated} of {n} document(s) truncated to {max_length} tokens "
                f"({strategy}), {share:.{0 if share >= 1 else 1}f}% of the documents")
        warnings.warn(TruncationWarning(
            f"{head}; `quantformer tokenize --model M --input F --out G` shows which",
            r_message=f"{head}; textstat_subwords(x, model = fit) shows which"), stacklevel=3)


def head_size(budget: int) -> int:
    """Tokens kept from the start by ``head_tail`` for a content budget of ``budget`` tokens."""
    return max(0, min(budget, round(budget * PAPER_HEAD / PAPER_BUDGET)))


def truncate_ids(ids: list[int], budget: int, strategy: str = DEFAULT_TRUNCATION) -> list[int]:
    """Cut a list of token ids (without special tokens) to at most ``budget`` ids.

    Args:
        ids: token ids of one document, no special tokens.
        budget: the most ids to keep (``max_length`` minus special tokens).
        strategy: ``head_tail``, ``head`` or ``tail``.

    Returns:
        ``ids`` itself when short enough, else the kept ids in document order.
    """
    if len(ids) <= budget:
        return ids
    if budget <= 0:
        return []
    if strategy == HEAD:
        return ids[:budget]
    if strategy == TAIL:
        return ids[len(ids) - budget:]
    h = head_size(budget)
    return ids[:h] + ids[len(ids) - (budget - h):]


@dataclass
class Encoded:
    """Token ids of a batch of documents, with special tokens, after truncation.

    Attributes:
        input_ids: one list of ids per document (special tokens only for missing documents).
        token_type_ids: one list per document, or None when the model has no segment embeddings.
        n_tokens: subword count per document *before* truncation, special tokens included;
            0 for a missing or empty document. Shape (n_docs,), int64.
        truncated: whether the document was cut. Shape (n_docs,), bool.
        missing: the text was missing or empty (whitespace only). Shape (n_docs,), bool.
    """

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    n_tokens: np.ndarray
    truncated: np.ndarray
    missing: np.ndarray
    max_length: int = DEFAULT_MAX_LENGTH
    strategy: str = DEFAULT_TRUNCATION
    extra: dict = field(default_factory=dict)


def encode(
    tokenizer,
    texts,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    truncation: str = DEFAULT_TRUNCATION,
    pairs=None,
    reading: Reading | None = None,
) -> Encoded:
    """Tokenise documents (and optional second segments) and truncate them to ``max_length``.

    Args:
        tokenizer: a fast Hugging Face tokenizer.
        texts: sequence of str or None, length n.
        max_length: most tokens per input, special tokens included (default 512).
        truncation: ``head_tail`` (default, paper section 6.3), ``head`` or ``tail``.
        pairs: optional sequence of n second segments (e.g. NLI hypotheses). They are never
            truncated; the first segment (the premise) gives way.
        reading: how documents are read (:class:`~quantformer.models.reading.Reading`); when
            given, its ``max_length`` and ``truncation`` replace the two keywords.

    Returns:
        :class:`Encoded` with n entries in input order.

    Raises:
        InputError: unknown strategy, or a second segment that leaves no room for the text.
    """
    if reading is not None:
        max_length, truncation = reading.max_length, reading.truncation
    check_strategy(truncation)
    texts = list(texts)
    n = len(texts)
    missing = np.array([is_missing(t) for t in texts], dtype=bool)
    tpl = special_template(tokenizer)
    present = [i for i in range(n) if not missing[i]]
    raw = raw_ids(tokenizer, [texts[i] for i in present]) if present else []
    ids_a: list[list[int]] = [[] for _ in range(n)]
    for i, ids in zip(present, raw):
        ids_a[i] = ids
    n_tokens = np.zeros(n, dtype=np.int64)
    truncated = np.zeros(n, dtype=bool)
    input_ids: list[list[int]] = []
    type_ids: list[list[int]] | None = [] if tpl.uses_token_types else None
    if pairs is None:
        budget = max_length - tpl.n_single
        for i in range(n):
            a = ids_a[i]
            if not missing[i]:
                n_tokens[i] = len(a) + tpl.n_single
            cut = truncate_ids(a, budget, truncation)
            truncated[i] = len(cut) < len(a)
            seq = tpl.prefix + cut + tpl.suffix
            input_ids.append(seq)
            if type_ids is not None:
                type_ids.append([tpl.type_a] * len(seq))
    else:
        pairs = list(pairs)
        if len(pairs) != n:
            raise InputError(f"got {len(pairs)} second segments for {n} texts")
        raw_b = raw_ids(tokenizer, [p if isinstance(p, str) else "" for p in pairs])
        for i in range(n):
            a, b = ids_a[i], raw_b[i]
            budget = max_length - tpl.n_pair - len(b)
            if budget < 1:
                raise InputError(
                    f"the hypothesis '{pairs[i]}' takes {len(b)} tokens and leaves no room for "
                    f"the text within {{max_length}} {max_length}; shorten it",
                    params=["max_length"])
            if not missing[i]:
                n_tokens[i] = len(a) + len(b) + tpl.n_pair
            cut = truncate_ids(a, budget, truncation)
            truncated[i] = len(cut) < len(a)
            seq, types = pair_ids(tpl, cut, b)
            input_ids.append(seq)
            if type_ids is not None:
                type_ids.append(types)
    return Encoded(input_ids=input_ids, token_type_ids=type_ids, n_tokens=n_tokens,
                   truncated=truncated, missing=missing, max_length=max_length,
                   strategy=truncation)


def token_stats(frame: pd.DataFrame, tokenizer, *, max_length: int = DEFAULT_MAX_LENGTH,
                truncation: str = DEFAULT_TRUNCATION, with_ids: bool = False,
                hypotheses: list[str] | None = None, stride: int | None = None,
                max_chunks: int | None = None, reading: Reading | None = None) -> pd.DataFrame:
    """Per-document subword counts of a corpus frame.

    Args:
        max_length, truncation, stride, max_chunks: how documents are read (defaults 512,
            ``head_tail``, None, None); ``reading``, when given, replaces the four.
        hypotheses: for an NLI model, the filled hypothesis of every class: each document is
            then counted as the premise of its longest hypothesis (in tokens), the pair that
            truncation cuts first, since prediction pairs every document with every hypothesis
            and cuts each pair's premise to fit ``max_length`` (Laurer et al. 2023;
            :mod:`quantformer.train.nli`). Default: each document alone.

    Returns:
        A frame with ``doc_id``, ``n_tokens`` (special tokens included, with ``hypotheses`` the
        longest pair's tokens; 0 for missing/empty texts), ``truncated`` (bool: longer than
        ``max_length``; with ``hypotheses``: cut in at least one of its pairs), optionally
        ``input_ids`` (the ids after truncation, a list per document; with ``hypotheses``
        those of the longest pair), then the docvars. Row order = input order. With
        ``truncation="chunks"`` (``stride``, ``max_chunks`` as in :func:`encode_windows`) a
        column ``n_windows`` follows ``n_tokens``, the windows each document is read in
        (with ``hypotheses``: the premise's windows, which leave room for the longest
        hypothesis; ``n_tokens`` then counts the document alone), and ``truncated`` marks the
        documents whose windows ``max_chunks`` dropped.

    Raises:
        InputError: an unknown strategy, or a hypothesis that leaves no room for the text
            within ``max_length``; chunks with ``with_ids``.
    """
    reading = reading or Reading(truncation, max_length, stride, max_chunks)
    if reading.chunks:
        return _window_stats(frame, tokenizer, reading, with_ids, hypotheses)
    pairs = [longest_hypothesis(tokenizer, hypotheses)] * len(frame) if hypotheses else None
    enc = encode(tokenizer, frame["text"].tolist(), reading=reading, pairs=pairs)
    out = pd.DataFrame({"doc_id": frame["doc_id"].to_numpy(), "n_tokens": enc.n_tokens,
                        "truncated": enc.truncated})
    if with_ids:
        out["input_ids"] = [ids if not m else [] for ids, m in zip(enc.input_ids, enc.missing)]
    return with_docvars(out, frame)


def _window_stats(frame, tokenizer, reading: Reading, refused: bool,
                  hypotheses=None) -> pd.DataFrame:
    """:func:`token_stats` with chunks: windows per document (NLI: of the premise, the
    window that leaves room for the longest hypothesis, :func:`encode_window_pairs`)."""
    if refused:
        raise InputError("{truncation} chunks counts windows per document; token ids are not "
                         "offered with it yet", params=["truncation"])
    texts = frame["text"].tolist()
    w = (encode_window_pairs(tokenizer, texts, hypotheses, reading=reading)[0] if hypotheses
         else encode_windows(tokenizer, texts, reading=reading))
    out = pd.DataFrame({"doc_id": frame["doc_id"].to_numpy(), "n_tokens": w.n_tokens,
                        "n_windows": w.n_windows, "truncated": w.truncated})
    return with_docvars(out, frame)


def corpus_token_stats(frame: pd.DataFrame, tokenizer, *, reading: Reading,
                       with_ids: bool = False,
                       hypotheses: list[str] | None = None) -> pd.DataFrame:
    """:func:`token_stats` of documents read as ``reading`` says, with a warning that counts
    the documents with missing or empty text (they are kept, with 0 tokens)."""
    stats = token_stats(frame, tokenizer, reading=reading, with_ids=with_ids,
                        hypotheses=hypotheses)
    n_missing = int((stats["n_tokens"] == 0).sum())
    if n_missing:
        import warnings

        warnings.warn(f"{n_missing} of {len(stats)} documents have missing or empty text; "
                      "they are kept, with 0 tokens", UserWarning, stacklevel=2)
    return stats


def summarise(stats: pd.DataFrame, max_length: int) -> pd.DataFrame:
    """A one-column summary table of :func:`token_stats` output (what the CLI prints)."""
    counts = stats["n_tokens"].to_numpy()
    present = counts[counts > 0]
    q = np.quantile(present, [0, 0.25, 0.5, 0.75, 0.9, 1]) if present.size else [np.nan] * 6
    rows = [
        ("documents", len(stats)),
        ("missing or empty", int((counts == 0).sum())),
        ("min", q[0]),
        ("25%", q[1]),
        ("median", q[2]),
        ("75%", q[3]),
        ("90%", q[4]),
        ("max", q[5]),
        *([("windows", int(stats["n_windows"].sum())),
           ("documents over max_chunks", int(stats["truncated"].sum()))]
          if "n_windows" in stats else
          [(f"over {max_length} (truncated)", int(stats["truncated"].sum()))]),
        ("share truncated", round(float(stats["truncated"].mean()) if len(stats) else 0.0, 4)),
    ]
    def fmt(v):
        v = float(v)
        return "NA" if np.isnan(v) else (f"{int(v)}" if v == int(v) else f"{v:.4g}")

    return pd.DataFrame({"value": [fmt(v) for _, v in rows]}, index=[r[0] for r in rows])


def model_record(model: str | None) -> dict:
    """A quantformer model directory's record; ``{}`` for other models."""
    return peek_record(model)


def encode_reading(tokenizer, texts, reading: Reading) -> Encoded | Windows:
    """Documents as ``reading`` reads them: whole in windows with ``chunks``
    (:func:`~quantformer.models.windows.encode_windows`), else cut (:func:`encode`).

    Raises:
        InputError: as :func:`encode` or :func:`~quantformer.models.windows.encode_windows`.
    """
    if reading.chunks:
        return encode_windows(tokenizer, texts, reading=reading)
    return encode(tokenizer, texts, reading=reading)
