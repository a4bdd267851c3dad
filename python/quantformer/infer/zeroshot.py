"""Zero-shot classification, the verb: check the settings, run the method of :data:`METHODS`
(NLI entailment or embedding similarity), frame the result.

Researchers without coded documents classify with label descriptions only (Wankmüller 2022,
Appendix J; Yin et al. 2019). Each label is filled into a hypothesis template, e.g.
``"The text is {} legalization of abortion."`` with ``in favor of``, ``neutral toward``,
``against``. Two methods score the labels, and every output names the one used:

**NLI entailment** (``method="nli"``; the paper's method, :mod:`quantformer.infer.zeroshot_nli`)
    The document is the premise, each filled template a hypothesis, scored by a model
    fine-tuned on natural language inference (e.g. ``facebook/bart-large-mnli``), with the
    semantics and scores of Hugging Face's ``pipeline("zero-shot-classification")``.

**Embedding similarity** (``method="embedding"``; any encoder, offline, the bundled
all-MiniLM-L6-v2; :mod:`quantformer.infer.zeroshot_embed`)
    Cosine similarity between the mean-pooled embeddings of the document and of each filled
    hypothesis, by default standardised per label over the corpus (``calibration``), then a
    softmax at ``temperature``.

``method="auto"`` picks NLI when the model's config has an entailment label, else embedding.
How documents are read (``truncation``, ``max_length``, ``stride``, ``max_chunks``,
``aggregate``) is one :class:`~quantformer.models.reading.Reading`; ``truncation="chunks"``
reads long documents whole in windows. For stance the embedding method is weak
(``bench/RESULTS.md``): prefer an NLI model for stance; the embedding method suits topics.
The labels and the hypothesis rules both methods share are
:mod:`quantformer.infer.zeroshot_common`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._core.errors import InputError, unused_error
from ..io.columns import PREDICTED_COLUMN, PROB_PREFIX, prob_column  # noqa: F401 (re-exported)
from ..io.window_rows import write_window_rows
from ..models.hub import load_config, model_label, resolve_model
from ..models.onnx.backend import backend_label, check_backend, read_config
from ..models.precision import DEFAULT_PRECISION, check_precision, check_with_backend
from ..models.precision import record as precision_of
from ..models.reading import DEFAULT_TRUNCATION, Reading
from ..models.tokenize import is_missing
from .chunked import check_reading_request
from .embed import as_frame, missing_warning
from .zeroshot_common import (  # noqa: F401  (re-exported: the names stay importable here)
    CALIBRATIONS,
    DEFAULT_HYPOTHESIS,
    EMBED_TEMPERATURE,
    METHOD_COL,
    MIN_LABELS,
    MIN_LABELS_MULTI_LABEL,
    ZeroShotMethod,
    ZeroShotWarning,
    check_calibration,
    check_hypothesis,
    check_labels,
    check_temperature,
    label_rules,
    multi_label_precision,
    parse_labels,
    run_precision,
)
from . import zeroshot_embed, zeroshot_nli
from .zeroshot_embed import (  # noqa: F401  (re-exported: the names stay importable here)
    calibrate_similarities,
    embedding_probabilities,
)
from .zeroshot_nli import (  # noqa: F401  (re-exported: the names stay importable here)
    nli_label_ids,
    nli_pair_logits,
    nli_probabilities,
    nli_window_logits,
)

#: the zero-shot methods by ``method`` name
METHODS: dict[str, ZeroShotMethod] = {m.name: m for m in (zeroshot_nli.METHOD,
                                                          zeroshot_embed.METHOD)}
#: what ``method`` takes: ``auto`` (chosen by the model's config), then the methods' names
METHOD_CHOICES = ("auto", *METHODS)
#: the name each output gives a method
METHOD_NAMES = {name: m.title for name, m in METHODS.items()}


# ------------------------------------------------------------------------------------------
# check


def choose_method(method: str, config) -> str:
    """``nli`` or ``embedding`` for ``method`` (``auto`` decides by the config's labels).

    Raises:
        InputError: unknown method, or ``nli`` with a model that has no entailment label.
    """
    if method not in METHOD_CHOICES:
        raise InputError(f"unknown {{method}} '{method}'; use one of: "
                         f"{', '.join(METHOD_CHOICES)}", params=["method"])
    has_nli = nli_label_ids(config) is not None
    if method == "auto":
        return "nli" if has_nli else "embedding"
    if method == "nli" and not has_nli:
        names = ", ".join(map(str, (getattr(config, "id2label", None) or {}).values()))
        raise InputError(
            f"this model has no 'entailment' label (its labels: {names or 'none'}), so it is not "
            "an NLI model; use {method} embedding (cosine similarity of embeddings, works "
            "with any encoder) or an NLI model such as facebook/bart-large-mnli",
            params=["method"])
    return method


def _check_method_settings(chosen: str, **given) -> None:
    """Refuse the settings of the other methods (:attr:`ZeroShotMethod.settings`):
    ``aggregate`` (of the NLI method's window logits) with the embedding method, which
    averages the windows' embeddings; ``calibration`` and ``temperature`` (of the embedding
    method's similarities) with the NLI method, whose probabilities are its entailment softmax.

    Raises:
        InputError: naming the settings and the method chosen.
    """
    owners = [m for name, m in METHODS.items() if name != chosen]
    named = [k for m in owners for k in m.settings if given.get(k) is not None]
    if named:
        owner = next(m for m in owners if named[0] in m.settings)
        method = (f"the {owner.short} method, and this run uses the {METHOD_NAMES[chosen]} "
                  "method")
        raise unused_error(named, f"applies to {method}: leave it out",
                           f"apply to {method}: leave them out")


def method_for(model: str | None, method: str = "auto", backend: str = "torch",
               **given) -> tuple[str, object]:
    """The method :func:`zeroshot` uses for ``model`` (``nli`` or ``embedding``) and the
    model's config, read before any weights load; the other method's settings among ``given``
    (``aggregate``, ``calibration``, ``temperature``; None: not given) are refused.

    Raises:
        InputError: as :func:`choose_method`; a setting of the other method.
    """
    config = _config(model, backend)
    chosen = choose_method(method, config)
    _check_method_settings(chosen, **given)
    return chosen, config


def _config(model, backend: str):
    """The model's config: transformers' ``AutoConfig``, or (onnx) its config.json read
    without importing torch."""
    return read_config(resolve_model(model)) if backend == "onnx" else load_config(model)


def _check_run(hypothesis, labels, *, multi_label, batch_size, reading: Reading,
               calibration, temperature, backend, quantize, device, precision, chunks_out):
    """The checks of a run that need no model, in the order users meet them; returns
    ``(hypothesis, labels)`` checked.

    Raises:
        InputError: as :func:`zeroshot`.
    """
    check_backend(backend, quantize, device)
    check_with_backend(check_precision(precision), backend, quantize)
    if multi_label:  # refused before any model loads
        multi_label_precision(precision)
    hypothesis = check_hypothesis(hypothesis)
    labels = check_labels(labels, multi_label)
    check_reading_request(reading, chunks_out)
    check_calibration(calibration)
    check_temperature(temperature)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"{{batch_size}} must be a whole number of at least 1, not "
                         f"{batch_size}", params=["batch_size"])
    return hypothesis, labels


def zeroshot(
    frame,
    labels,
    hypothesis: str = DEFAULT_HYPOTHESIS,
    *,
    model: str | None = None,
    method: str = "auto",
    multi_label: bool = False,
    batch_size: int = 32,
    max_length: int | None = None,
    truncation: str = DEFAULT_TRUNCATION,
    device: str = "auto",
    quiet: bool = False,
    calibration: str | None = None,
    temperature: float | None = None,
    keep_text: bool = False,
    backend: str = "torch",
    quantize: str = "none",
    stride: int | None = None,
    max_chunks: int | None = None,
    aggregate: str | None = None,
    chunks_out: str | None = None,
    precision: str = DEFAULT_PRECISION,
) -> pd.DataFrame:
    """Classify documents with label descriptions only (no training).

    Args:
        frame: a corpus frame (``doc_id``, ``text``, [``label``], docvars), any DataFrame with
            a ``text`` column, or a list of strings.
        labels: candidate label phrases, a list or one comma-separated string; each is filled
            into ``hypothesis``.
        hypothesis: template with exactly one ``{}`` (default ``"This text is about {}."``;
            the paper's Abortion templates are ``"The text is {} legalization of abortion."``
            and ``"The text expresses a {} stance toward legalization of abortion."``).
        model: hub id or local folder (default: the bundled all-MiniLM-L6-v2, which has no NLI
            head and so uses the embedding method).
        method: ``auto`` (NLI when the config has an entailment label, else embedding),
            ``nli`` or ``embedding``. See the module docstring for both.
        multi_label: score each label independently (probabilities need not sum to 1);
            ``predicted`` is then the highest-scoring label: threshold the ``prob_`` columns
            for several labels per document.
        batch_size: inputs per forward pass (32): (document, label) pairs for NLI, documents
            for embeddings; batches are sorted by length and hold at most
            :data:`quantformer.models.batching.MAX_TOKENS` padded tokens.
        max_length: token limit per input, special tokens included. Default: 512 (or the
            model's limit when lower) for NLI, where it bounds premise + hypothesis; for
            embeddings the model's sentence-transformers ``max_seq_length`` (256 for the
            default model), else 512. Longer documents are truncated by ``truncation``.
        truncation: ``head_tail`` (default; Wankmüller 2022 section 6.3), ``head``, ``tail``
            or ``chunks``: every document read whole in overlapping windows of
            ``max_length`` tokens. Embedding method: the document's embedding is the mean of
            its windows' (:func:`quantformer.infer.embed.embed_windows`), then the same
            similarity. NLI: every window is the premise of every hypothesis and the
            document's logits per label are the ``aggregate`` of its windows'
            (:func:`quantformer.infer.zeroshot_nli.nli_window_logits`).
        stride: chunks only: tokens neighbouring windows share (int; default a quarter of
            the window; NLI: of the premise's window, which leaves room for the hypothesis).
        max_chunks: chunks only: the first windows kept per document at most (int >= 1;
            default all; a warning counts the documents with more).
        aggregate: chunks with NLI only: ``mean`` (default) or ``max`` of the window logits.
        chunks_out: chunks only: a file that receives one row per window: ``doc_id``,
            ``chunk``, ``start``, ``end`` (characters), the window's own ``predicted`` and
            ``prob_<label>`` (embedding method: its similarities calibrated with the
            documents' label means and deviations, at the same temperature).
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        quiet: no progress bar.
        calibration: embedding method only: ``standardise`` (None, the default), ``centre``
            or ``none``.
        temperature: embedding method only: softmax temperature (default 1 for
            ``standardise``, 0.05 otherwise). With the NLI method, whose probabilities are
            its entailment softmax, either one is an error.
        keep_text: keep the ``text`` column in the output.
        backend: ``torch`` (default) or ``onnx`` (ONNX Runtime on the CPU, both methods; the
            export is cached, see :mod:`quantformer.models.onnx.backend`).
        quantize: ``none`` (default) or ``int8`` (onnx only).
        precision: torch backend: ``auto`` (default: bf16 autocast where the CPU has AMX or
            AVX-512 BF16 or the GPU supports bf16, else fp32; multi-label runs stay fp32),
            ``fp32`` or ``bf16`` (:mod:`quantformer.models.precision`). In bf16, documents
            whose top-two label probability margin is under 0.05 are scored again in fp32
            (NLI: their pairs; embedding: their embeddings, after which the per-label
            calibration over the corpus is computed again); the label hypotheses of the
            embedding method are always embedded in fp32. In bf16 probabilities can differ
            in the third decimal with the batch size and the partitioning, and from an fp32
            pipeline (NLI: 0.014 from Hugging Face's); ``fp32`` is the reproducible choice.
            ``attrs["quantformer"]["precision"]`` (and the CLI's record ``OUT.json``) names
            the precision used.

    Returns:
        A DataFrame in input order with ``doc_id``, the input's other columns (``label`` and
        docvars; ``text`` only with ``keep_text``), ``predicted`` (the label phrase; None for
        missing or empty texts, counted in a warning), ``prob_<label>`` for each label (float64,
        NaN for missing texts) and ``zeroshot_method`` ("NLI entailment" or "embedding
        similarity"; None for missing texts), and a last column ``backend`` (``torch``,
        ``torch bf16``, ``torch fp32 recheck`` for bf16 near ties scored again in fp32,
        ``onnx fp32`` or ``onnx int8``). ``result.attrs["quantformer"]`` holds the method,
        model, hypothesis, labels, counts of missing and truncated documents, the method's
        settings and ``precision`` (``precision``, ``requested``, ``reason``).

    Raises:
        InputError: a template without exactly one ``{}``; empty or duplicate labels; fewer
            than two labels without ``multi_label``; ``method="nli"`` with a model that has no
            entailment label; bad ``max_length``, ``truncation``, ``batch_size``, ``device``,
            ``calibration``, ``temperature``, window settings, ``chunks_out`` or
            ``precision``; ``aggregate`` with the embedding method; ``precision`` bf16 with
            ``backend`` onnx or with ``multi_label``.
    """
    reading = Reading(truncation=truncation, max_length=max_length, stride=stride,
                      max_chunks=max_chunks, aggregate=aggregate)  # max_length None: the method's
    hypothesis, labels = _check_run(
        hypothesis, labels, multi_label=multi_label, batch_size=batch_size, reading=reading,
        calibration=calibration, temperature=temperature, backend=backend, quantize=quantize,
        device=device, precision=precision, chunks_out=chunks_out)
    frame = as_frame(frame)
    given = {"aggregate": aggregate, "calibration": calibration, "temperature": temperature}
    chosen, config = method_for(model, method, backend, **given)
    texts = frame["text"].tolist()
    missing = np.array([is_missing(t) for t in texts], dtype=bool)
    present = np.flatnonzero(~missing)
    run = METHODS[chosen]
    probs, truncated, info = run.score(
        texts, present, labels, hypothesis, config=config,
        options={k: given[k] for k in run.settings},
        model=model, multi_label=multi_label, batch_size=batch_size, reading=reading,
        device=device, progress=not quiet, backend=backend, quantize=quantize,
        precision=precision)
    missing_warning(int(missing.sum()), len(frame), "a missing prediction")
    if chunks_out is not None:
        win, win_probs = info.get("windows", (None, None))
        write_window_rows(chunks_out, frame["doc_id"].to_numpy()[present], win, win_probs,
                          labels, [prob_column(lab) for lab in labels])
    out = _result_frame(frame, present, probs, labels, chosen, keep_text)
    out["backend"] = _backend_column(info, backend, quantize, present, len(frame))
    meta = {**_precision_meta(info, backend, quantize),
            "method": METHOD_NAMES[chosen], "model": model_label(model),
            "hypothesis": hypothesis, "labels": labels, "multi_label": multi_label,
            "truncation": reading.truncation, "n_docs": len(frame),
            "n_missing": int(missing.sum()), "n_truncated": int(np.asarray(truncated).sum())}
    if reading.chunks:
        meta.update(_windows_meta(info, reading, "aggregate" in run.settings))
    meta.update({k: v for k, v in info.items()
                 if k not in ("similarity", "windows", "precision", "rechecked")})
    out.attrs["quantformer"] = meta
    return out


# ------------------------------------------------------------------------------------------
# frame


def _windows_meta(info: dict, reading: Reading, aggregates: bool) -> dict:
    """``stride``, ``max_chunks``, ``n_windows`` (and, for a method that aggregates window
    outputs, NLI's, the ``aggregate``) of a run in windows, for the output's ``attrs``."""
    win = info.get("windows", (None,))[0]
    return {"stride": win.stride if win is not None else reading.stride,
            "max_chunks": reading.max_chunks,
            "n_windows": len(win.doc) if win is not None else 0,
            **({"aggregate": reading.aggregate_or_default} if aggregates else {})}


def _result_frame(frame, present, probs, labels, chosen, keep_text) -> pd.DataFrame:
    """The output rows: docvars, ``predicted``, ``prob_<label>``, ``zeroshot_method``."""
    full = np.full((len(frame), len(labels)), np.nan, dtype=np.float64)
    full[present] = probs
    predicted = np.full(len(frame), None, dtype=object)
    if len(present):
        predicted[present] = np.asarray(labels, dtype=object)[probs.argmax(axis=1)]
    cols = [c for c in frame.columns if keep_text or c != "text"]
    out = frame[cols].copy()
    out[PREDICTED_COLUMN] = predicted
    for j, lab in enumerate(labels):
        out[prob_column(lab)] = full[:, j]
    # the method that scored the row; missing for rows without text (nothing was scored)
    method = np.full(len(frame), None, dtype=object)
    method[present] = METHOD_NAMES[chosen]
    out[METHOD_COL] = method
    return out


def _precision_meta(info: dict, backend: str, quantize: str) -> dict:
    """``backend`` (of the run), ``precision`` (its record) and ``n_rechecked`` (bf16 near
    ties scored again in fp32) for the output's ``attrs``."""
    run, rechecked = info["precision"], info.get("rechecked")
    return {"backend": run.label if run is not None else backend_label(backend, quantize),
            "precision": precision_of(run, backend_label(backend, quantize)),
            "n_rechecked": 0 if rechecked is None else int(rechecked.sum())}


def _backend_column(info: dict, backend: str, quantize: str, present, n: int):
    """Each row's ``backend``: the ONNX graph's, or the torch precision's with bf16 near
    ties scored again in fp32 marked ``torch fp32 recheck``."""
    run = info["precision"]
    if run is None:
        return backend_label(backend, quantize)
    rechecked = None
    if info.get("rechecked") is not None:
        rechecked = np.zeros(n, dtype=bool)
        rechecked[present] = info["rechecked"]
    return run.backend_column(n, rechecked)
