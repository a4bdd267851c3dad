"""``annotate``: a large language model codes documents from the codebook.

The codebook (the coding room's format: ``label``, ``description``, ``examples``; see
docs/contract.md) is rendered into one documented prompt (:func:`build_messages`): a system
message naming the task and each label with its description and examples, optional k-shot
examples drawn from human codes (user: the document, assistant: its label; never one of the
documents being coded), then the document. The model answers with one label. Locally each
label is scored (:class:`~quantformer.models.llm.LocalLM`); through an endpoint the label
comes from structured output (:class:`~quantformer.models.llm_endpoint.EndpointLM`) and an
answer that does not parse, or a body that cannot be read, is marked ``unparsed`` with the
reason (counted and warned, never guessed); a document past its retries is ``failed`` with the
reason, the others go on (the ``status`` and ``reason`` columns say which).

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
from ..io.columns import (
    ID_COLUMN,
    LABEL_COLUMN,
    REASON_COLUMN,
    STATUS_COLUMN,
    prob_column,
    with_docvars,
)
from ..io.llm_cache import CodeCache, text_hash
from ..models.llm import DOC_SLOT, normalise
from ..models.llm_endpoint import Answer
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
             concurrency: int = 4, progress=True, gate=None,
             retry_unparsed: bool = False) -> tuple[pd.DataFrame, dict]:
    """Code every document of ``frame`` (``doc_id``, ``text``) with ``llm``.

    No document's failure stops the others: an answer that cannot be read is that document's
    ``unparsed`` code, with the reason; a document whose requests fail past their retries is
    ``failed``, with the reason, and is not cached (a rerun asks for it again).

    Args:
        frame: the corpus frame.
        codebook: the codebook entries (checked by :func:`check_codebook_labels`).
        llm: a :class:`~quantformer.models.llm.LocalLM` or
            :class:`~quantformer.models.llm_endpoint.EndpointLM`.
        cache: finished codes (coded or unparsed) are read from and written to it one by one
            (resumable), keyed on the run (the coder's ``identity``, the prompt, the text).
        shots: k-shot ``(text, label)`` pairs (:func:`draw_shots`).
        keep_raw: add the endpoint's raw answer as ``raw``.
        concurrency: requests in flight to an endpoint (default 4).
        progress: stream for the documents-per-second line, with the retries and failures so
            far (``True``, the default: the standard error stream at the time of the call;
            None: silent).
        gate: None, or a context manager held around each endpoint request (a
            ``distributed.Semaphore`` bounds the requests in flight across Dask workers).
        retry_unparsed: ask again for documents whose cached code is unparsed (default False:
            an unparsed code is finished).

    Returns:
        The codes frame (``doc_id``, ``label``, ``prob_<label>``, ``unparsed``, ``coder``,
        ``status``: ``coded``, ``unparsed``, ``failed`` or ``empty``, ``reason``: why it is
        not coded, optional ``raw``, then the corpus's docvars) and the record (prompt,
        prompt hash, model, counts, ``failed`` and ``failed_documents``, ``retries`` and ``last_retry_reason``,
        ``probabilities``: ``label scores`` (local) or ``token logprobs`` (endpoint), and
        ``probabilities_missing``: rows without probabilities by reason, each reason
        explained in ``probabilities_missing_reasons``; see
        :mod:`quantformer.models.llm_probs`).
    """
    labels = check_codebook_labels(codebook)
    messages = build_messages(codebook, shots)
    phash, key = prompt_hash(messages), getattr(llm, "identity", llm.name)
    texts = ["" if is_missing(t) else str(t) for t in frame["text"]]
    results: list = [None] * len(texts)
    todo = []
    for i, t in enumerate(texts):
        if not t.strip():  # no text, no code (as predict leaves such documents unlabelled)
            results[i] = Answer(None, None, None, None, "empty")
            continue
        hit = cache.get(key, phash, text_hash(t)) if cache else None
        if hit is None or (retry_unparsed and hit[0] is None):
            todo.append(i)
        else:
            results[i] = Answer(hit[0], hit[2], hit[1], hit[3],
                                "coded" if hit[0] is not None else "unparsed", hit[4])
    n_cached = len(texts) - len(todo)
    progress = sys.stderr if progress is True else progress
    tally = _Tally(len(todo), progress)
    for i, ans in _run(llm, messages, labels, texts, todo, concurrency,
                       gate or contextlib.nullcontext()):
        results[i] = ans
        if cache and ans.status != "failed":
            cache.put(key, phash, text_hash(texts[i]), ans.label, ans.probs, ans.raw, ans.why,
                      ans.reason)
        tally.add(ans)
    empty = [r.status == "empty" for r in results]
    if any(empty):
        warnings.warn(f"{sum(empty)} of {len(texts)} document(s) have a missing or empty text "
                      "and get no code (label and probabilities missing)", stacklevel=2)
    record = _record(llm, messages, phash, labels, shots, results, empty, n_cached)
    failed = [str(d) for d, r in zip(frame["doc_id"], results) if r.status == "failed"]
    record.update(failed=len(failed), failed_documents=failed, retries=tally.retries,
                  last_retry_reason=tally.last, retry_unparsed=bool(retry_unparsed))
    return _frame(frame, labels, results, llm.name, keep_raw), record


class _Tally:
    """The progress line: documents done, their rate, retries (count and last reason) and
    failures so far, printed every 10 documents and at the end."""

    def __init__(self, n: int, stream):
        self.n, self.stream, self.start = n, stream, time.monotonic()
        self.done = self.retries = self.failed = 0
        self.last = None

    def add(self, ans) -> None:
        self.done += 1
        self.retries += ans.retries
        self.last = ans.last_retry or self.last
        self.failed += ans.status == "failed"
        if self.stream is None or not (self.done % 10 == 0 or self.done == self.n):
            return
        rate = self.done / max(time.monotonic() - self.start, 1e-9)
        line = f"\rannotate: {self.done}/{self.n} documents, {rate:.1f} docs/s"
        if self.retries:
            line += f", {self.retries} retries (last: {self.last})"
        if self.failed:
            line += f", {self.failed} failed"
        print(line, end="\n" if self.done == self.n else "", file=self.stream, flush=True)


def _record(llm, messages, phash, labels, shots, results, empty, n_cached) -> dict:
    """What annotate did: the prompt, its hash, the model, the counts, where the
    probabilities come from and why some are missing (:data:`REASONS`)."""
    why: dict[str, int] = {}
    for r, e in zip(results, empty):
        if not e and r.why is not None:
            why[r.why] = why.get(r.why, 0) + 1
    return {"prompt": messages, "prompt_hash": phash, "model": llm.name,
            "coder": getattr(llm, "identity", llm.name), "labels": labels,
            "shots": len(shots), "documents": len(results), "from_cache": n_cached,
            "unparsed": sum(1 for r in results if r.status == "unparsed"),
            "empty": sum(empty),
            "probabilities": "label scores" if hasattr(llm, "score") else "token logprobs",
            # a local model's weights; an endpoint's precision is the server's, unknown here
            "precision": getattr(llm, "precision", "the endpoint's (not reported)"),
            "probabilities_missing": why,
            "probabilities_missing_reasons": {k: REASONS[k] for k in why}}


def _run(llm, messages, labels, texts, todo, concurrency, gate):
    """Yield ``(index, Answer)`` as each document finishes; no document's error stops the
    others (an error a request did not foresee is that document's ``failed`` answer)."""
    if hasattr(llm, "score"):
        head, tail = llm.split_prompt(messages)
        head_ids, label_ids = llm.ids(head), llm.label_ids(labels)
        for i in todo:
            probs = _local_code(llm, head_ids, label_ids, tail, texts[i])
            yield i, Answer(labels[max(range(len(labels)), key=probs.__getitem__)], None,
                            probs, None, "coded")
        return

    def one(i):
        msgs = [dict(m, content=m["content"].replace(DOC_SLOT, texts[i])) for m in messages]
        try:
            with gate:
                return i, llm.code(msgs, labels)
        except Exception as exc:  # noqa: BLE001 (one document's failure, kept with its reason)
            return i, Answer.failed(f"{type(exc).__name__}: {exc}")

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    try:  # finished codes are yielded (and cached) as they come
        yield from (f.result() for f in as_completed([pool.submit(one, i) for i in todo]))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _frame(frame, labels, results, coder, keep_raw) -> pd.DataFrame:
    out = pd.DataFrame({ID_COLUMN: frame[ID_COLUMN].values,
                        LABEL_COLUMN: [r.label for r in results]})
    for k, lab in enumerate(labels):
        out[prob_column(lab)] = [math.nan if r.probs is None or r.probs[k] is None
                                 else r.probs[k] for r in results]
    out["unparsed"] = [r.status == "unparsed" for r in results]
    out["coder"] = coder
    out[STATUS_COLUMN] = [r.status for r in results]
    out[REASON_COLUMN] = [r.reason for r in results]
    if keep_raw:
        out["raw"] = [r.raw for r in results]
    # the corpus's docvars, after the codes, as predict and zeroshot keep them (estimate --by
    # and regress read them from the codes)
    with_docvars(out, frame)
    n_bad = int(out["unparsed"].sum())
    if n_bad:
        warnings.warn(f"{n_bad} of {len(out)} answers did not parse as a codebook label; "
                      "their rows are marked unparsed and have no label (their reason says "
                      "why; --retry-unparsed asks again)", stacklevel=2)
    return out
