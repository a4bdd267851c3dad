"""``annotate``: a large language model codes documents from the codebook.

The codebook (the coding room's format: ``label``, ``description``, ``examples``; see
docs/contract.md) is rendered into one documented prompt (:func:`build_messages`): a system
message naming the task and each label with its description and examples, optional k-shot
examples drawn from human codes (user: the document, assistant: its label; never one of the
documents being coded), then the document. The model answers with one label. Locally each
label is scored (:class:`~quantformer.models.llm.LocalLM`); through an endpoint the label
comes from structured output (:class:`~quantformer.models.llm.EndpointLM`) and an answer that
does not parse is marked ``unparsed`` (counted and warned, never guessed).

Validating an LLM against human codes as one more coder, and correcting estimates built on its
codes with a gold sample, follow Ziems et al. (2024, Computational Linguistics), Bucher &
Martini (2024) and Egami et al. (2023, NeurIPS).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed

import pandas as pd

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN, prob_column
from ..io.llm_cache import CodeCache, text_hash
from ..models.llm import DOC_SLOT, normalise
from ..models.llm_probs import REASONS
from ..models.tokenize import is_missing

INSTRUCTION = ("You code documents for a research project. Read the codebook, then answer "
               "with exactly one label from it and nothing else.")


def build_messages(codebook: list[dict], shots: list[tuple[str, str]] = ()) -> list[dict]:
    """The chat messages of the prompt, the document left as :data:`DOC_SLOT`.

    Args:
        codebook: entries ``{"label", "description"?, "examples"?}``, in order.
        shots: ``(text, label)`` pairs shown as earlier turns (k-shot).
    """
    lines = [INSTRUCTION, "", "Codebook:"]
    for e in codebook:
        line = f"- {e[LABEL_COLUMN]}"
        if e.get("description"):
            line += f": {e['description']}"
        lines.append(line)
        for ex in e.get("examples") or []:
            lines.append(f"  Example: {ex}")
    lines += ["", "Labels: " + ", ".join(e[LABEL_COLUMN] for e in codebook)]
    messages = [{"role": "system", "content": "\n".join(lines)}]
    for text, label in shots:
        messages += [{"role": "user", "content": f"Document:\n{text}"},
                     {"role": "assistant", "content": label}]
    messages.append({"role": "user", "content": f"Document:\n{DOC_SLOT}"})
    return messages


def prompt_hash(messages: list[dict]) -> str:
    """SHA-256 of the prompt's messages (JSON, keys sorted), hex: the cache's prompt key."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode("utf-8")).hexdigest()


def check_codebook_labels(codebook: list[dict]) -> list[str]:
    """The labels, checked: at least two, none repeated.

    Raises:
        InputError: fewer than two labels or a repeated one.
    """
    labels = [str(e[LABEL_COLUMN]) for e in codebook]
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise InputError(f"{{codebook}} needs at least two different labels, not "
                         f"{labels}", params=["codebook"])
    return labels


def check_shots(n, shots_from=None) -> int:
    """``n`` k-shot examples as a whole number, checked before any file is read: at least 0,
    and human codes (``shots_from``, a file or frame) only with ``n`` above 0, where they are
    used.

    Raises:
        InputError: ``n`` not a whole number of at least 0; ``shots_from`` with ``n`` 0.
    """
    if isinstance(n, bool) or not float(n) == int(n) or int(n) < 0:
        raise InputError(f"{{shots}} must be a whole number of at least 0, not {n!r}",
                         params=["shots"])
    if int(n) == 0 and shots_from is not None:
        raise InputError("{shots_from} gives the human codes the k-shot examples are drawn "
                         "from, and {shots} is 0 (zero-shot): add {shots} K or leave "
                         "{shots_from} out", params=["shots_from", "shots"])
    return int(n)


def draw_shots(human: pd.DataFrame | None, n: int, doc_ids, texts, labels: list[str],
               seed: int = 0) -> list[tuple[str, str]]:
    """``n`` k-shot examples from human codes (``doc_id``, ``text``, ``label``), drawn at
    random with ``seed``; none may be a document being coded (same id or same text).

    Raises:
        InputError: ``n`` below 0 (:func:`check_shots`), ``human`` with ``n`` 0, ``n`` above
            the human codes given, shots without ``shots_from``, a human code outside the
            codebook, or a human-coded document among those being coded.
    """
    if check_shots(n, human) == 0:
        return []
    if human is None:
        raise InputError("{shots} needs human codes given with {shots_from}",
                         params=["shots", "shots_from"])
    human = human.dropna(subset=[LABEL_COLUMN])
    if n > len(human):
        raise InputError(f"{{shots}} is {n}, but {{shots_from}} has only {len(human)} coded "
                         "documents; lower it or give more human codes",
                         params=["shots", "shots_from"])
    outside = sorted(set(human[LABEL_COLUMN].astype(str)) - set(labels))
    if outside:
        raise InputError(f"{{shots_from}} has labels the codebook lacks: {outside}",
                         params=["shots_from"])
    check_shots_overlap(human, doc_ids, texts)
    pick = human.sample(n=n, random_state=seed)
    return list(zip(pick["text"].astype(str), pick[LABEL_COLUMN].astype(str)))


def shots_overlap(human: pd.DataFrame, doc_ids, texts) -> pd.Series:
    """Which human codes (``doc_id``, ``text``) are documents being coded (``doc_ids``,
    ``texts``), by id or by text: a boolean Series over the rows of ``human``."""
    return human["doc_id"].astype(str).isin(set(map(str, doc_ids))) | \
        human["text"].isin(set(texts))


def check_shots_overlap(human: pd.DataFrame, doc_ids=(), texts=(), *,
                        shared: pd.Series | None = None) -> None:
    """Refuse human codes (``doc_id``, ``text``) that share a document, by id or by text, with
    the documents being coded (``doc_ids``, ``texts``: one file; or ``shared``, the
    :func:`shots_overlap` of every chunk combined). A document shared by id and by text counts
    once.

    Raises:
        InputError: names ``shots_from`` and ``input``, the number of shared documents and up
            to three of their ids.
    """
    if shared is None:
        shared = shots_overlap(human, doc_ids, texts)
    if shared.any():
        ids = sorted(human.loc[shared, "doc_id"].astype(str).unique())
        raise InputError(f"{{shots_from}} shares {int(shared.sum())} documents with {{input}} "
                         f"(e.g. {ids[:3]}); k-shot examples must never be documents being "
                         "coded: remove them from one of the two", params=["shots_from", "input"])


def _local_code(llm, head_ids, label_ids, tail, text):
    return normalise(llm.score(head_ids, llm.ids(text + tail), label_ids))


def annotate(frame: pd.DataFrame, codebook: list[dict], llm, *, cache: CodeCache | None = None,
             shots: list[tuple[str, str]] = (), keep_raw: bool = False,
             concurrency: int = 4, progress=True, gate=None) -> tuple[pd.DataFrame, dict]:
    """Code every document of ``frame`` (``doc_id``, ``text``) with ``llm``.

    Args:
        frame: the corpus frame.
        codebook: the codebook entries (checked by :func:`check_codebook_labels`).
        llm: a :class:`~quantformer.models.llm.LocalLM` or
            :class:`~quantformer.models.llm.EndpointLM`.
        cache: finished codes are read from and written to it one by one (resumable).
        shots: k-shot ``(text, label)`` pairs (:func:`draw_shots`).
        keep_raw: add the endpoint's raw answer as ``raw``.
        concurrency: requests in flight to an endpoint (default 4).
        progress: stream for the documents-per-second line (``True``, the default: the
            standard error stream at the time of the call; None: silent).
        gate: None, or a context manager held around each endpoint request (a
            ``distributed.Semaphore`` bounds the requests in flight across Dask workers).

    Returns:
        The codes frame (``doc_id``, ``label``, ``prob_<label>``, ``unparsed``, ``coder``,
        optional ``raw``) and the record (prompt, prompt hash, model, counts,
        ``probabilities``: ``label scores`` (local) or ``token logprobs`` (endpoint), and
        ``probabilities_missing``: rows without probabilities by reason, each reason
        explained in ``probabilities_missing_reasons``; see
        :mod:`quantformer.models.llm_probs`).
    """
    labels = check_codebook_labels(codebook)
    messages = build_messages(codebook, shots)
    phash = prompt_hash(messages)
    texts = ["" if is_missing(t) else str(t) for t in frame["text"]]
    results: list = [None] * len(texts)
    todo = []
    for i, t in enumerate(texts):
        if not t.strip():  # no text, no code (as predict leaves such documents unlabelled)
            results[i] = (None, None, None, None)
            continue
        hit = cache.get(llm.name, phash, text_hash(t)) if cache else None
        if hit is None:
            todo.append(i)
        else:
            results[i] = (hit[1], hit[0], hit[2], hit[3])
    n_cached = len(texts) - len(todo)
    progress = sys.stderr if progress is True else progress
    start = time.monotonic()
    for done, (i, res) in enumerate(_run(llm, messages, labels, texts, todo, concurrency,
                                         gate or contextlib.nullcontext()), 1):
        results[i] = res
        if cache:
            cache.put(llm.name, phash, text_hash(texts[i]), res[1], res[0], res[2], res[3])
        if progress is not None and (done % 10 == 0 or done == len(todo)):
            rate = done / max(time.monotonic() - start, 1e-9)
            print(f"\rannotate: {done}/{len(todo)} documents, {rate:.1f} docs/s",
                  end="\n" if done == len(todo) else "", file=progress, flush=True)
    empty = [not t.strip() for t in texts]
    if any(empty):
        warnings.warn(f"{sum(empty)} of {len(texts)} document(s) have a missing or empty text "
                      "and get no code (label and probabilities missing)", stacklevel=2)
    return _frame(frame, labels, results, llm.name, keep_raw, empty), _record(
        llm, messages, phash, labels, shots, results, empty, n_cached)


def _record(llm, messages, phash, labels, shots, results, empty, n_cached) -> dict:
    """What annotate did: the prompt, its hash, the model, the counts, where the
    probabilities come from and why some are missing (:data:`REASONS`)."""
    why: dict[str, int] = {}
    for r, e in zip(results, empty):
        if not e and r[3] is not None:
            why[r[3]] = why.get(r[3], 0) + 1
    return {"prompt": messages, "prompt_hash": phash, "model": llm.name, "labels": labels,
            "shots": len(shots), "documents": len(results), "from_cache": n_cached,
            "unparsed": sum(1 for r, e in zip(results, empty) if r[1] is None and not e),
            "empty": sum(empty),
            "probabilities": "label scores" if hasattr(llm, "score") else "token logprobs",
            "probabilities_missing": why,
            "probabilities_missing_reasons": {k: REASONS[k] for k in why}}


def _run(llm, messages, labels, texts, todo, concurrency, gate):
    """Yield ``(index, (probs, label, raw))`` as each document finishes."""
    if hasattr(llm, "score"):
        head, tail = llm.split_prompt(messages)
        head_ids, label_ids = llm.ids(head), llm.label_ids(labels)
        for i in todo:
            probs = _local_code(llm, head_ids, label_ids, tail, texts[i])
            yield i, (probs, labels[max(range(len(labels)), key=probs.__getitem__)], None, None)
        return

    def one(i):
        msgs = [dict(m, content=m["content"].replace(DOC_SLOT, texts[i])) for m in messages]
        with gate:
            label, raw, probs, why = llm.code(msgs, labels)
        return i, (probs, label, raw, why)

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    try:  # finished codes are yielded (and cached) as they come; a failure stops the rest
        yield from (f.result() for f in as_completed([pool.submit(one, i) for i in todo]))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _frame(frame, labels, results, coder, keep_raw, empty) -> pd.DataFrame:
    out = pd.DataFrame({"doc_id": frame["doc_id"].values,
                        LABEL_COLUMN: [r[1] for r in results]})
    for k, lab in enumerate(labels):
        out[prob_column(lab)] = [math.nan if r[0] is None or r[0][k] is None else r[0][k]
                              for r in results]
    out["unparsed"] = [r[1] is None and not e for r, e in zip(results, empty)]
    out["coder"] = coder
    if keep_raw:
        out["raw"] = [r[2] for r in results]
    n_bad = int(out["unparsed"].sum())
    if n_bad:
        warnings.warn(f"{n_bad} of {len(out)} answers did not parse as a codebook label; "
                      "their rows are marked unparsed and have no label", stacklevel=2)
    return out
