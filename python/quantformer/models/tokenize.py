"""Subword tokenisation, length statistics and truncation strategies on token ids.

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
    nothing is cut: each document becomes overlapping windows of ``max_length`` tokens
    (special tokens included), neighbours sharing ``stride`` tokens (default a quarter of the
    window's content), each window with its character span in the document (the fast
    tokenizer's offsets); :func:`encode_windows`. The model's outputs for the windows are then
    aggregated into one per document (:mod:`quantformer.models.chunks`), the sliding window of
    Devlin et al. (2019, SQuAD) and Pappagari et al. (2019, "Hierarchical Transformers for long
    document classification").

Tokenisation is batched through the model's fast (Rust) tokenizer; special tokens are added from
a template read off the tokenizer once, so the per-document work in Python is list slicing only.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._core.errors import InputError, ParamWarning
from ..io.modeldir import peek_record
from .reading import (CHUNKS, DEFAULT_MAX_LENGTH, DEFAULT_TRUNCATION, STRATEGIES,  # noqa: F401
                      TRUNCATIONS, check_max_chunks, check_strategy, check_windows,
                      default_stride)

PAPER_HEAD = 128  # first tokens kept at 512 (Wankmüller 2022, section 6.3)
PAPER_BUDGET = 510  # 512 minus [CLS] and [SEP]


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


def truncate_ids(ids: list[int], budget: int, strategy: str = "head_tail") -> list[int]:
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
    if strategy == "head":
        return ids[:budget]
    if strategy == "tail":
        return ids[len(ids) - budget:]
    h = head_size(budget)
    return ids[:h] + ids[len(ids) - (budget - h):]


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
    strategy: str = "head_tail"
    extra: dict = field(default_factory=dict)


def _raw_ids(tokenizer, texts: list[str], chunk: int = 1000) -> list[list[int]]:
    out: list[list[int]] = []
    for start in range(0, len(texts), chunk):
        enc = tokenizer(texts[start:start + chunk], add_special_tokens=False, truncation=False,
                        return_attention_mask=False, return_token_type_ids=False, verbose=False)
        out.extend(enc["input_ids"])
    return out


def encode(
    tokenizer,
    texts,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    truncation: str = "head_tail",
    pairs=None,
) -> Encoded:
    """Tokenise documents (and optional second segments) and truncate them to ``max_length``.

    Args:
        tokenizer: a fast Hugging Face tokenizer.
        texts: sequence of str or None, length n.
        max_length: most tokens per input, special tokens included (default 512).
        truncation: ``head_tail`` (default, paper section 6.3), ``head`` or ``tail``.
        pairs: optional sequence of n second segments (e.g. NLI hypotheses). They are never
            truncated; the first segment (the premise) gives way.

    Returns:
        :class:`Encoded` with n entries in input order.

    Raises:
        InputError: unknown strategy, or a second segment that leaves no room for the text.
    """
    check_strategy(truncation)
    texts = list(texts)
    n = len(texts)
    missing = np.array([is_missing(t) for t in texts], dtype=bool)
    tpl = special_template(tokenizer)
    present = [i for i in range(n) if not missing[i]]
    raw = _raw_ids(tokenizer, [texts[i] for i in present]) if present else []
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
        raw_b = _raw_ids(tokenizer, [p if isinstance(p, str) else "" for p in pairs])
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


def pair_ids(tpl: SpecialTemplate, a: list[int], b: list[int]) -> tuple[list, list]:
    """(ids, token type ids) of the pair ``a``, ``b`` with the template's special tokens."""
    seq = tpl.pair_prefix + a + tpl.pair_middle + b + tpl.pair_suffix
    types = ([tpl.type_a] * (len(tpl.pair_prefix) + len(a))
             + [tpl.type_middle] * len(tpl.pair_middle)
             + [tpl.type_b] * len(b) + [tpl.type_suffix] * len(tpl.pair_suffix))
    return seq, types


def token_stats(frame: pd.DataFrame, tokenizer, *, max_length: int = DEFAULT_MAX_LENGTH,
                truncation: str = "head_tail", with_ids: bool = False,
                hypotheses: list[str] | None = None, stride: int | None = None,
                max_chunks: int | None = None) -> pd.DataFrame:
    """Per-document subword counts of a corpus frame.

    Args:
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
    if truncation == CHUNKS:
        return _window_stats(frame, tokenizer, max_length, with_ids, stride, max_chunks,
                             hypotheses)
    pairs = [longest_hypothesis(tokenizer, hypotheses)] * len(frame) if hypotheses else None
    enc = encode(tokenizer, frame["text"].tolist(), max_length=max_length, truncation=truncation,
                 pairs=pairs)
    out = pd.DataFrame({"doc_id": frame["doc_id"].to_numpy(), "n_tokens": enc.n_tokens,
                        "truncated": enc.truncated})
    if with_ids:
        out["input_ids"] = [ids if not m else [] for ids, m in zip(enc.input_ids, enc.missing)]
    return _with_docvars(out, frame)


def _with_docvars(out: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    for c in frame.columns:
        if c not in ("doc_id", "text"):
            out[c] = frame[c].array  # keeps dtypes (categories, nullable ints)
    return out


def _window_stats(frame, tokenizer, max_length, refused, stride, max_chunks,
                  hypotheses=None) -> pd.DataFrame:
    """:func:`token_stats` with chunks: windows per document (NLI: of the premise, the
    window that leaves room for the longest hypothesis, :func:`encode_window_pairs`)."""
    if refused:
        raise InputError("{truncation} chunks counts windows per document; token ids are not "
                         "offered with it yet", params=["truncation"])
    texts = frame["text"].tolist()
    w = (encode_window_pairs(tokenizer, texts, hypotheses, max_length=max_length,
                             stride=stride, max_chunks=max_chunks)[0] if hypotheses else
         encode_windows(tokenizer, texts, max_length=max_length, stride=stride,
                        max_chunks=max_chunks))
    out = pd.DataFrame({"doc_id": frame["doc_id"].to_numpy(), "n_tokens": w.n_tokens,
                        "n_windows": w.n_windows, "truncated": w.truncated})
    return _with_docvars(out, frame)


def longest_hypothesis(tokenizer, hypotheses: list[str]) -> str:
    """The hypothesis with the most subword tokens (the first of equally long ones)."""
    return hypotheses[int(np.argmax(count_subwords(tokenizer, hypotheses)))]


def count_subwords(tokenizer, texts: list[str]) -> list[int]:
    """Subword tokens of each text, special tokens left out."""
    return [len(ids) for ids in _raw_ids(tokenizer, list(texts))]


def corpus_token_stats(frame: pd.DataFrame, tokenizer, *, max_length: int = DEFAULT_MAX_LENGTH,
                       truncation: str = "head_tail", with_ids: bool = False,
                       hypotheses: list[str] | None = None, stride: int | None = None,
                       max_chunks: int | None = None) -> pd.DataFrame:
    """:func:`token_stats`, with a warning that counts the documents with missing or empty
    text (they are kept, with 0 tokens)."""
    stats = token_stats(frame, tokenizer, max_length=max_length, truncation=truncation,
                        with_ids=with_ids, hypotheses=hypotheses, stride=stride,
                        max_chunks=max_chunks)
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


def model_truncation(model: str | None) -> tuple[int, str]:
    """``(max_length, truncation)`` a model cuts documents with: those recorded in a
    quantformer model directory's ``quantformer.json`` (what ``predict`` uses), else
    ``(512, "head_tail")``."""
    hp = model_record(model).get("hyperparameters", {})
    return (int(hp.get("max_length", DEFAULT_MAX_LENGTH)),
            str(hp.get("truncation", DEFAULT_TRUNCATION)))


def model_record(model: str | None) -> dict:
    """A quantformer model directory's record; ``{}`` for other models."""
    return peek_record(model)



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
                   stride: int | None = None, max_chunks: int | None = None) -> Windows:
    """Cut every document into overlapping windows of ``max_length`` tokens.

    Args:
        tokenizer: a fast Hugging Face tokenizer (its offsets give the character spans).
        texts: sequence of str or None, length n.
        max_length: tokens per window, special tokens included (default 512).
        stride: content tokens shared by neighbouring windows (default: a quarter of the
            window's content, :func:`default_stride`); must be smaller than the content.
        max_chunks: the first windows kept per document at most (default None: all); a
            :class:`ChunkWarning` counts the documents that had more.

    Returns:
        :class:`Windows`, windows in document order; a missing document has none.

    Raises:
        InputError: ``stride`` not smaller than the window's content, ``max_chunks`` < 1.
    """
    tpl = special_template(tokenizer)
    budget = max_length - tpl.n_single
    stride = default_stride(max_length, tpl.n_single) if stride is None else int(stride)
    check_windows(budget, stride, max_chunks, max_length)
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
                        max_chunks: int | None = None) -> tuple[Windows, list, list | None]:
    """Every window of every document paired with each hypothesis (NLI with
    ``truncation="chunks"``): the premise is cut into windows (:func:`encode_windows`) whose
    content leaves room, within ``max_length``, for the pair's special tokens and the longest
    hypothesis, which is never cut.

    Args:
        hypotheses: the k filled hypotheses.
        max_length, stride, max_chunks: as in :func:`encode_windows`; ``stride`` counts
            premise tokens and defaults to a quarter of the premise's window.

    Returns:
        (:class:`Windows` of the premises, with ``max_length`` the premise window and
        ``input_ids`` the single-sequence windows; the pair ids, window-major: window w with
        hypothesis j at ``w * k + j``; their token type ids or None).

    Raises:
        InputError: a hypothesis that leaves no room for the text; a bad ``stride`` or
            ``max_chunks``.
    """
    tpl = special_template(tokenizer)
    hyp = _raw_ids(tokenizer, list(hypotheses))
    longest = max((len(h) for h in hyp), default=0)
    budget = max_length - tpl.n_pair - longest
    if budget < 1:
        raise InputError(f"the longest hypothesis takes {longest} tokens and leaves no room for "
                         f"the text within {{max_length}} {max_length}; shorten it",
                         params=["max_length"])
    check_windows(budget, stride, max_chunks, max_length)  # worded with the caller's length
    win = encode_windows(tokenizer, texts, max_length=budget + tpl.n_single, stride=stride,
                         max_chunks=max_chunks)
    ids, types = [], [] if tpl.uses_token_types else None
    cut = slice(len(tpl.prefix), -len(tpl.suffix) if tpl.suffix else None)
    for window in win.input_ids:
        for b in hyp:
            seq, t = pair_ids(tpl, window[cut], b)
            ids.append(seq)
            if types is not None:
                types.append(t)
    return win, ids, types
