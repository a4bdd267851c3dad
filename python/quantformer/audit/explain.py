"""Word attributions of a fine-tuned model's predictions by Integrated Gradients: the verb,
which checks its arguments, runs the integration engine and frames the words and documents.

Integrated Gradients (Sundararajan et al. 2017) through Captum's ``LayerIntegratedGradients``
(Kokhlikyan et al. 2020) over the model's input (word) embeddings; the baseline (pad tokens,
special tokens and positions kept), the path rules (adaptive nested trapezoid rules, or
Gauss-Legendre on fixed ``steps``) and the batching of steps are the engine's
(:mod:`quantformer.audit.integrate`).

* **Target**: the logit of the predicted class, or of a class chosen with ``target``; a
  regression model's output; for a multi-label model every label (one target per label).
* **Model kinds** (:mod:`quantformer.audit.explain_forward`): a standard model's logits; an
  NLI model's entailment logit of the target class's (document, hypothesis) pair, with only
  the document (premise) attributed; a SetFit model's logistic head score (log-odds for two
  classes). Encoder-decoder models are refused.
* **Units**: attributions are in logit units and never normalised per document, so two
  documents compare. By completeness, a document's attributions add up to the difference of
  the target logit between input and baseline; ``completeness_gap`` says by how much they
  miss (:func:`~quantformer.audit.integrate.completeness_gap`).
* **Words, not subwords**: subword attributions are summed into the words of the original text
  (:func:`words_of`), located by the fast tokenizer's character offsets, so
  ``text[start:end] == word`` for any tokenizer (WordPiece, BPE, SentencePiece), emoji and
  accents included.
* **Long documents**: each document is explained in the window prediction uses
  (:func:`quantformer.models.tokenize.encode` with the model's ``max_length`` and
  ``truncation``); words outside it get a missing attribution (not seen by the model).
* **Documents read in windows** (``truncation="chunks"``, from the model's record or
  ``chunking``): every window of every document is explained for the document's target (the
  windows batched like documents), and a word's attribution is the mean of its sums over the
  windows that read it (:func:`quantformer.audit.explain_words.averaged_word_rows`), so every
  word has one. The document's score is the aggregate ``F`` of its ``n`` window logits
  ``f_w`` (:mod:`quantformer.models.chunks`):

  - ``mean``: ``F = (1/n) sum_w f_w``. Integrated Gradients of ``F`` along one path for all
    windows are each window's own attributions divided by ``n`` (they are linear in the
    function, Sundararajan et al. 2017, and each ``f_w`` reads its own window), so
    completeness is checked for the document: ``logit`` = ``F`` of the input,
    ``baseline_logit`` = the mean of the windows' baseline logits (each window's pad-token
    baseline), ``attribution_sum`` = the mean over windows of each window's attribution sum.
  - ``max``: ``F = max_w f_w``; the gradient of ``F`` reaches only the window with the
    largest logit, so completeness is that window's: ``logit`` = ``F`` of the input (that
    window's logit), ``baseline_logit`` = that window's baseline logit (not the largest of
    the windows' baseline logits), ``attribution_sum`` = that window's attribution sum. The
    other windows are explained by their own logits and averaged into the words as above.

  A word's attribution is thus in the units of a window's logit (what the word moves in a
  window that reads it), comparable with documents read in one window; with several windows
  the words' attributions do not add up to ``attribution_sum`` (with ``mean`` a word's part
  of it is its attribution times ``word_windows / n_windows``). Adaptive steps refine a
  window while its own gap or its document's exceeds :data:`GAP_TOLERANCE`; a document's
  ``steps`` is the most points any of its windows used.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..infer.chunked import with_chunking
from ..infer.classifier import Classifier, PredictionWarning
from ..infer.load import load_model
from ..io.modeldir import read_record
from ..models.chunks import aggregate_windows, check_not_longformer
from ..models.hub import load_tokenizer
from ..models.precision import TorchPrecision, choose_precision, kept_fp32
from ..models.reading import CHUNKS, DEFAULT_TRUNCATION, WINDOW_FIELDS, Reading
from ..models.tokenize import special_template, warn_truncated
from .explain_forward import check_architecture
from .explain_frames import Explanation, explanation_frames, target_names
from .explain_words import (  # noqa: F401 (words_of, Window, windows: this module's API)
    Chunks, Window, averaged_word_rows, chunk_windows, windows, word_index, word_rows, words_of)
from .integrate import (  # noqa: F401 (the engine's names, importable from here as before)
    ADAPTIVE_STEPS, DIFF_FLOOR, GAP_TOLERANCE, TOKEN_BUDGET, CompletenessWarning, Integrator,
    completeness_gap, integrate, nested_schedule, refine_trapezoid, trapezoid_rule, warn_gaps,
    warn_result_gaps, window_totals)

METHODS = ("standard", "nli", "setfit")

#: why ``precision="auto"`` keeps explain in fp32 (the record's reason; bench/RESULTS.md,
#: "Precision"); plain words, shown as they are on the command line and in R
AUTO_REASON = ("fp32 for attributions: Integrated Gradients needs accurate gradients; "
               "bf16 on request")


def explain_precision(precision: str = "auto", device: str = "cpu") -> TorchPrecision:
    """The precision of the forward and backward passes of :func:`explain`: ``auto`` keeps
    fp32 (:data:`AUTO_REASON`), ``fp32``, or ``bf16`` autocast (warned where the hardware
    only emulates it).

    Raises:
        InputError: a value other than auto, fp32 or bf16.
    """
    kept = kept_fp32(precision, AUTO_REASON)
    return kept if kept is not None else TorchPrecision(choose_precision(precision, device))


def warn_unknown_only(n: int, total: int, example: str | None = None,
                      stacklevel: int = 3) -> None:
    """Warn (UserWarning) that ``n`` of ``total`` documents have no token the model knows
    (:func:`unknown_only_mask`); ``example``: one of their doc_ids."""
    if n:
        eg = f", e.g. '{example}'" if example is not None else ""
        warnings.warn(f"{n} of {total} document(s) consist only of tokens the model does not "
                      f"know (unknown or special tokens{eg}: emoji-only texts, for a vocabulary "
                      "without emoji); their attributions say nothing about their words",
                      UserWarning, stacklevel=stacklevel + 1)


def check_steps(steps) -> int | None:
    """``steps`` as an int, or None (adaptive).

    Raises:
        InputError: not a whole number of at least 1.
    """
    if steps is None:
        return None
    if isinstance(steps, bool) or not float(steps).is_integer() or int(steps) < 1:
        raise InputError(f"{{steps}} must be a whole number of at least 1, not {steps}; leave "
                         "it out for adaptive steps", params=["steps"])
    return int(steps)


def check_model(path, backend: str = "torch", target: str | None = None,
                chunking: dict | None = None) -> dict:
    """Check, before any model is loaded, that ``path`` is a model ``explain`` serves, that
    ``target`` is one of its classes and that ``chunking`` fits it; returns its record.

    Raises:
        ModelDirError: not a model directory. InputError: ``backend`` other than torch, a
        method other than standard, NLI or SetFit, an encoder-decoder model (its
        ``config.json``), a ``target`` that is not a class of the model, or bad ``chunking``
        (:func:`check_chunking`).
    """
    if backend != "torch":
        raise InputError(f"explain needs gradients and runs on torch only, not {{backend}} "
                         f"'{backend}'; leave it out (torch)", params=["backend"])
    record = read_record(path)
    method = record.get("method", "standard")
    if method not in METHODS:
        raise InputError(f"explain supports models fine-tuned with method standard, nli or "
                         f"setfit; '{path}' was fine-tuned with method '{method}'")
    config = _check_config(path)
    check_chunking(path, record, config, chunking)
    if target is not None:
        labels = [str(x) for x in record.get("labels") or []]
        if record.get("task") == "regression":
            raise InputError(f"{{target}} picks a class, but '{path}' is a regression model: "
                             "its output is explained; leave it out", params=["target"])
        if str(target) not in labels:
            raise InputError(f"{{target}} '{target}' is not a class of the model; its classes "
                             f"are: {', '.join(labels)}", params=["target"])
    return record


def check_chunking(path, record: dict, config, chunking: dict | None) -> None:
    """Check the window settings ``chunking`` (``truncation``, ``stride``, ``max_chunks``,
    ``aggregate``; None: as the model was fine-tuned) against a model's record and config,
    before its weights load (only its tokenizer is read, for the window's size).

    Raises:
        InputError: an unknown ``truncation`` or ``aggregate``; ``stride``, ``max_chunks`` or
            ``aggregate`` without chunks; chunks with an NLI or SetFit model or a Longformer;
            a ``stride`` not smaller than the window, ``max_chunks`` < 1.
    """
    reading = asked_reading(record, chunking)
    if not reading.chunks:
        reading.check()
        return
    # the window's numbers are checked against the model's window (check_window names its size)
    reading.replace(stride=None, max_chunks=None).check()
    if record.get("method", "standard") != "standard":
        raise InputError(_NOT_STANDARD.format(method=record.get("method")),
                         params=["truncation"])
    if config is not None:
        check_not_longformer(config, CHUNKS)
    n_special = special_template(load_tokenizer(str(path))).n_single
    reading.check_window(reading.max_length - n_special, model_window=True)


def asked_reading(record: dict, chunking: dict | None) -> Reading:
    """The :class:`~quantformer.models.reading.Reading` ``explain`` reads a model's documents
    with: the settings of ``chunking`` given (not None) over those of the model's ``record``
    (its window settings only while windows are read as it was fine-tuned to)."""
    given = {k: v for k, v in (chunking or {}).items() if v is not None}
    trained = Reading.from_record(record)
    truncation = given.get("truncation", trained.truncation)
    kept = trained.window_settings() if truncation == trained.truncation == CHUNKS else {}
    return Reading(truncation=truncation, max_length=trained.max_length,
                   **{k: given.get(k, kept.get(k)) for k in WINDOW_FIELDS})


_NOT_STANDARD = ("explain reads documents in windows for models fine-tuned the standard way "
                 "only, not yet for method '{method}'; explain it in one window with "
                 "{{truncation}} " + DEFAULT_TRUNCATION)


def _check_config(path):
    """The model's ``config.json`` as a namespace (None when unreadable: the loader names what
    is wrong with the directory), after refusing an encoder-decoder model (no weights read)."""
    import json
    from pathlib import Path
    from types import SimpleNamespace

    cfg = Path(path) / "config.json"
    try:
        config = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    config = SimpleNamespace(**config)
    check_architecture(config, path)
    return config


def load_explainable(path, device: str = "auto", backend: str = "torch",
                     target: str | None = None, record: dict | None = None,
                     chunking: dict | None = None) -> Classifier:
    """A model directory as a :class:`~quantformer.infer.classifier.Classifier`, after
    :func:`check_model` (skipped when the caller passes the ``record`` that check returned),
    through the process's model cache (so the worker keeps it); the record is read once.
    ``chunking``: how it reads documents (:func:`quantformer.infer.chunked.with_chunking`;
    None: as fine-tuned)."""
    if record is None:
        record = check_model(path, backend, target, chunking)
    return with_chunking(load_model(path, device=device, precision="fp32", record=record),
                         **(chunking or {}))


def unknown_only_mask(clf: Classifier, wins: list) -> np.ndarray:
    """For each :class:`Window` (None: a missing text), whether every text token the model
    sees is the tokenizer's unknown token or a special token (or there is none), e.g. an
    emoji-only text for a vocabulary without emoji: its attributions are alike under any model
    and say nothing about its words."""
    tok = clf.tokenizer
    special = set(getattr(tok, "all_special_ids", None) or [])
    if getattr(tok, "unk_token_id", None) is not None:
        special.add(tok.unk_token_id)
    return np.array([w is not None and all(w.input_ids[p] in special for p in w.positions)
                     for w in wins], dtype=bool)


def unknown_only(clf: Classifier, texts: dict) -> list[str]:
    """The doc_ids of ``texts`` (``{doc_id: text}``) that consist only of tokens the model
    does not know (:func:`unknown_only_mask`)."""
    ids = list(texts)
    wins, _ = doc_windows(clf, [texts[d] for d in ids])
    return [d for d, m in zip(ids, unknown_only_mask(clf, wins[0])) if m]


def _items(clf: Classifier, logits: np.ndarray, target: str | None) -> tuple:
    """(item documents, item target indices) for documents with these logits: the predicted
    class (or ``target``); every label of a multi-label model (or ``target``); a regression
    model's one output."""
    n = len(logits)
    task = clf.task.name
    if task == "regression":
        return np.arange(n), np.zeros(n, dtype=np.int64)
    if target is not None:
        return np.arange(n), np.full(n, clf.labels.index(str(target)), dtype=np.int64)
    if task == "multilabel":
        k = len(clf.labels)
        return np.repeat(np.arange(n), k), np.tile(np.arange(k), n)
    return np.arange(n), logits.argmax(axis=1)


def _texts_of(frame) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        texts = [frame] if isinstance(frame, str) else list(frame)
        frame = pd.DataFrame({"doc_id": [f"text{i + 1}" for i in range(len(texts))],
                              "text": texts})
    if "text" not in frame.columns:
        raise InputError("the frame has no 'text' column; read it with quantformer.read_frame "
                         "or name the text column")
    if len(frame) == 0:
        raise InputError("the corpus has no documents; give a corpus with at least one text",
                         params=["input"])
    return frame


def explain(model, frame, *, target: str | None = None, steps: int | None = None,
            batch_size: int = 8, device: str = "auto", progress: bool = False,
            chunking: dict | None = None, precision: str = "auto") -> Explanation:
    """Word attributions of a fine-tuned model's predictions (Integrated Gradients).

    Args:
        model: a :class:`~quantformer.infer.classifier.Classifier` (fine-tuned the standard
            way, or its NLI or SetFit subclass) or its model directory.
        frame: a corpus frame (``doc_id``, ``text``) or a sequence of texts.
        target: the class whose score is explained (default: each document's predicted class;
            every label of a multi-label model); not for regression models.
        steps: Gauss-Legendre steps for every document, an int >= 1 (default None:
            adaptive, nested trapezoid rules on :data:`ADAPTIVE_STEPS` = 9, 17, 33, 65 points
            until the completeness gap is within 5 %; see :mod:`quantformer.audit.integrate`).
        batch_size: documents integrated together at most (8).
        device: used when ``model`` is a path.
        progress: show a tqdm bar.
        chunking: how documents are read: ``{"truncation", "stride", "max_chunks",
            "aggregate"}`` (values None or left out: as the model was fine-tuned; see
            :func:`quantformer.infer.chunked.with_chunking`). With ``truncation="chunks"``
            every window of every document is explained and a word's attribution is its mean
            over the windows that read it (see the module's description).
        precision: ``auto`` (default: fp32, whatever the hardware: Integrated Gradients
            needs accurate gradients), ``fp32`` or ``bf16`` (bf16 autocast of the forward and
            backward passes, any model kind, in windows too; warned where the hardware only
            emulates it). How bf16 compares with fp32: see bench/RESULTS.md, "Precision".

    The explained score by kind (:mod:`quantformer.audit.explain_forward`): a standard model's
    logit; an NLI model's entailment logit of the target class's (document, hypothesis) pair,
    attributed to the document's words only (the hypothesis is kept in input and baseline;
    Laurer et al. 2023); a SetFit model's logistic head score (log-odds of the target class for
    two classes, the class's logit for more; Tunstall et al. 2022).

    Returns:
        An :class:`Explanation` (words and documents frames). Documents with a missing or
        empty text are left out (a warning counts them). Documents made only of tokens the
        model does not know (unknown or special tokens, e.g. emoji-only texts) are explained,
        with one warning that counts them (their ``unknown_only`` is True).

    Raises:
        InputError: ``steps`` < 1, ``target`` not a class, an encoder-decoder model, an empty
            corpus or one whose texts are all missing, bad ``chunking``, a bad
            ``precision``. ModelDirError: not a model directory.
    """
    steps = check_steps(steps)
    kept_fp32(precision, AUTO_REASON)  # a bad value fails before the model loads
    frame = _texts_of(frame)
    clf = _classifier(model, device, target, chunking)
    chosen = explain_precision(precision, clf.device)
    if clf.truncation == CHUNKS:
        return explain_chunked(clf, frame, target=target, steps=steps, batch_size=batch_size,
                               progress=progress, precision=chosen)
    texts = frame["text"].tolist()
    engine = Integrator(clf, precision=chosen)
    doc_wins, missing = doc_windows(clf, texts)
    _check_missing(missing)
    cut = np.any([[bool(w and w.truncated) for w in ws] for ws in doc_wins], axis=0)
    warn_truncated(int(cut.sum()), len(texts), clf.max_length, clf.truncation)
    unknown = unknown_only_mask(clf, doc_wins[0])
    _check_unknown(frame, unknown)
    present = np.flatnonzero(~missing)
    scores = class_scores(engine, doc_wins, present)
    item_docs, item_classes = _items(clf, scores[present], target)
    item_docs = present[item_docs]
    item_wins, outputs = item_windows(engine, doc_wins, item_docs, item_classes)
    res = integrate(engine, item_wins, np.arange(len(item_docs)), outputs, steps, batch_size,
                    progress)
    warn_result_gaps(res["gap"], steps)
    parts = [word_rows(texts[d], item_wins[j], res["attr"][j]) for j, d in enumerate(item_docs)]
    stats = {"logit": res["f_in"], "baseline_logit": res["f_base"],
             "attribution_sum": [float(a.sum()) for a in res["attr"]],
             "completeness_gap": res["gap"], "steps": res["steps"],
             "truncated": [w.truncated for w in item_wins]}
    out = explanation_frames(engine, frame, scores, item_docs, item_classes, stats, parts)
    out.documents["unknown_only"] = unknown[item_docs]
    return out


def _check_unknown(frame: pd.DataFrame, unknown: np.ndarray) -> None:
    """Warn how many documents have no token the model knows (``unknown``: per document)."""
    if unknown.any():
        warn_unknown_only(int(unknown.sum()), len(frame),
                          str(frame["doc_id"].iloc[np.flatnonzero(unknown)[0]]), stacklevel=4)


def _check_missing(missing: np.ndarray) -> None:
    """Refuse a corpus whose texts are all missing; warn how many are."""
    n = len(missing)
    if missing.all():
        raise InputError(f"all {n} texts are missing or empty; nothing to explain",
                         params=["input"])
    if missing.any():
        warnings.warn(f"{int(missing.sum())} of {n} document(s) have a missing or empty "
                      "text; they have no words and are left out", PredictionWarning,
                      stacklevel=4)


# ------------------------------------------------------------------------------------------
# documents read in windows (truncation="chunks")


def explain_chunked(clf: Classifier, frame: pd.DataFrame, *, target: str | None = None,
                    steps: int | None = None, batch_size: int = 8,
                    progress: bool = False,
                    precision: TorchPrecision | None = None) -> Explanation:
    """:func:`explain` of a classifier that reads documents in windows: the document's target
    from the aggregate of its window logits, every window explained for it, words averaged
    over the windows that read them, completeness per document against the aggregate (the
    module's description says what is compared for ``mean`` and ``max``); the forward and
    backward passes of every window in ``precision`` (:func:`explain_precision`; None: fp32)."""
    texts = frame["text"].tolist()
    engine = Integrator(clf, precision=precision)
    if engine.fwd.kind != "standard":
        raise InputError(_NOT_STANDARD.format(method=engine.fwd.kind), params=["truncation"])
    chunks = chunk_windows(clf, texts)
    _check_missing(chunks.missing)
    known = np.bincount(chunks.doc, weights=(~unknown_only_mask(clf, chunks.wins)).astype(float),
                        minlength=len(texts))
    unknown = (known == 0) & (chunks.n_windows > 0)  # no window has a known token
    _check_unknown(frame, unknown)
    present = np.flatnonzero(~chunks.missing)
    logits = engine.all_logits(chunks.wins, np.arange(len(chunks.wins)))
    scores = aggregate_windows(logits, chunks.doc, len(texts), clf.aggregate)
    item_docs, item_classes = _items(clf, scores[present], target)
    item_docs = present[item_docs]
    stats, parts = explain_windows(engine, texts, chunks, item_docs, item_classes, steps,
                                   batch_size, progress)
    warn_result_gaps(stats["completeness_gap"], steps)
    out = explanation_frames(engine, frame, scores, item_docs, item_classes, stats, parts)
    out.documents["unknown_only"] = unknown[item_docs]
    return out


def explain_windows(engine: Integrator, texts: list, chunks: Chunks, item_docs: np.ndarray,
                    item_classes: np.ndarray, steps: int | None = None, batch_size: int = 8,
                    progress: bool = False) -> tuple[dict, list]:
    """Integrated Gradients of each item (document ``item_docs[j]``, output
    ``item_classes[j]``) over every window of its document.

    Returns:
        ``(stats, parts)``: per item ``logit``, ``baseline_logit``, ``attribution_sum``,
        ``completeness_gap`` (of the aggregate,
        :func:`~quantformer.audit.integrate.window_totals`), ``steps``, ``truncated``
        (windows dropped by ``max_chunks``) and ``n_windows``; and per item its words frame
        (:func:`~quantformer.audit.explain_words.averaged_word_rows`).
    """
    first = np.concatenate([[0], np.cumsum(chunks.n_windows)[:-1]]).astype(np.int64)
    item = np.repeat(np.arange(len(item_docs)), chunks.n_windows[item_docs])
    win = np.concatenate([np.arange(first[d], first[d] + chunks.n_windows[d])
                          for d in item_docs]).astype(np.int64)
    how = engine.clf.aggregate

    def refine_gap(r):  # a window's own gap or its document's, whichever is larger
        return np.maximum(r["gap"], window_totals(r, item, len(item_docs), how)
                          ["completeness_gap"][item])

    res = integrate(engine, chunks.wins, win, np.asarray(item_classes)[item], steps,
                    batch_size, progress, refine_gap=refine_gap)
    stats = window_totals(res, item, len(item_docs), how)
    stats["truncated"] = [chunks.wins[first[d]].truncated for d in item_docs]
    stats["n_windows"] = chunks.n_windows[item_docs]
    parts = [averaged_word_rows(texts[d], [chunks.wins[w] for w in win[item == j]],
                                [res["attr"][i] for i in np.flatnonzero(item == j)])
             for j, d in enumerate(item_docs)]
    return stats, parts


def doc_windows(clf: Classifier, texts: list) -> tuple[list, np.ndarray]:
    """(one list of :class:`Window` per input the model scores a document in, the missing
    mask): the document alone (standard, SetFit), or one (document, hypothesis) pair per class
    of an NLI model, in class order."""
    hyps = clf.hypotheses() if hasattr(clf, "hypotheses") else [None]
    out = [windows(clf, texts, h) for h in hyps]
    return [w for w, _ in out], out[0][1]


def class_scores(engine: Integrator, doc_wins: list, present: np.ndarray) -> np.ndarray:
    """The score of each class the forward explains, (n_docs, n_outputs) with NaN rows for
    missing documents: the logits (standard), the head's scores (SetFit), the entailment logit
    of each class's pair (NLI)."""
    if engine.fwd.kind != "nli":
        return engine.all_logits(doc_wins[0], present)
    e = engine.fwd.entailment_id
    return np.column_stack([engine.all_logits(w, present)[:, e] for w in doc_wins])


def item_windows(engine: Integrator, doc_wins: list, item_docs: np.ndarray,
                 item_classes: np.ndarray) -> tuple[list, np.ndarray]:
    """(the window of each item, the model output integrated for it): the document's window
    and the class (standard, SetFit); the class's pair and the entailment output (NLI)."""
    if engine.fwd.kind != "nli":
        return [doc_wins[0][d] for d in item_docs], np.asarray(item_classes, dtype=np.int64)
    wins = [doc_wins[c][d] for d, c in zip(item_docs, item_classes)]
    return wins, np.full(len(wins), engine.fwd.entailment_id, dtype=np.int64)


def _classifier(model, device: str, target: str | None,
                chunking: dict | None = None) -> Classifier:
    """The model as a checked Classifier (see :func:`check_model`), reading documents as
    ``chunking`` asks (:func:`quantformer.infer.chunked.with_chunking`)."""
    if not isinstance(model, Classifier):
        return load_explainable(model, device=device, target=target, chunking=chunking)
    if target is not None and (model.task.name == "regression"
                               or str(target) not in model.labels):
        raise InputError(f"{{target}} '{target}' is not a class of the model; its classes "
                         f"are: {', '.join(model.labels)}", params=["target"])
    return with_chunking(model, **(chunking or {}))
