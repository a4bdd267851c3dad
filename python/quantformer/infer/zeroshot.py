"""Zero-shot classification: NLI entailment, or embedding similarity for encoders without NLI.

Researchers without coded documents classify with label descriptions only (Wankmüller 2022,
Appendix J; Yin et al. 2019). Each label is filled into a hypothesis template, e.g.
``"The text is {} legalization of abortion."`` with ``in favor of``, ``neutral toward``,
``against``. Two different methods score the labels, and every output names the one used:

**NLI entailment** (``method="nli"``; the paper's method)
    The document is the premise, each filled template a hypothesis; a model fine-tuned on
    natural language inference (e.g. ``facebook/bart-large-mnli``) scores every
    (premise, hypothesis) pair. Single-label: softmax of the entailment logits across the
    labels. Multi-label: for each label on its own, softmax over (contradiction, entailment).
    These are the semantics and the scores (to 1e-5) of Hugging Face's
    ``pipeline("zero-shot-classification")``, but the pairs of all documents and labels are
    batched together, sorted by length, with dynamic padding; the premise is truncated
    (``head_tail`` by default, section 6.3), the hypothesis never is. The entailment and
    contradiction outputs are found by name in the config's ``id2label`` (case-insensitive).

**Embedding similarity** (``method="embedding"``; works with any encoder, offline, and is
what the bundled all-MiniLM-L6-v2 uses)
    Cosine similarity between the mean-pooled embedding of the document and of each filled
    hypothesis (:mod:`quantformer.infer.embed`). Sentence embeddings capture topic more than stance,
    and some label phrases are closer to every document than others, so by default each
    label's similarities are *standardised over the corpus* (``calibration="standardise"``:
    minus the label's mean, divided by its standard deviation across the input's documents)
    before the softmax. This removes the label's prior pull, so a document gets the label it is
    unusually close to. It makes each document's scores depend on the other documents in the
    input (classify the whole corpus at once, not one document at a time); ``"centre"``
    subtracts the mean only, ``"none"`` uses plain cosines. Probabilities are
    ``softmax(score / temperature)`` (multi-label: ``sigmoid(score / temperature)`` of the
    calibrated score, so above 0.5 means closer than the label's corpus average). Default
    temperature: 1 for standardised scores (z units), 0.05 for raw or centred cosines (the
    scale 20 that all-MiniLM-L6-v2 was trained with in sentence-transformers'
    MultipleNegativesRankingLoss). ``bench/RESULTS.md`` reports each variant on the paper's
    Abortion and Toxic tasks.

``method="auto"`` picks NLI when the model's config has an entailment label, else embedding.

``truncation="chunks"`` reads long documents whole: the embedding method compares the mean of
a document's window embeddings (:func:`quantformer.infer.embed.embed_windows`); NLI pairs every
window with every hypothesis and aggregates the windows' logits per document and label
(:func:`nli_window_logits`), as a fine-tuned classifier aggregates its window logits.

For stance the embedding method is weak: with the paper's Abortion templates it stays below
chance even when calibrated (``bench/RESULTS.md``), because "in favor of X" and "against X"
embed close together. Prefer an NLI model for stance; the embedding method suits topics.
"""

from __future__ import annotations

import string
import warnings
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError, unused_error
from ..io.formats import read_text_file
from ..io.modeldir import hf_quiet
from ..models.arguments import check_arguments
from ..models.batching import PerGroup, run_batches
from ..models.hub import (check_max_length, load_config, load_network, load_tokenizer, max_positions, model_label, resolve_device, resolve_model)
from ..models.onnx.backend import backend_label, check_backend, open_model, read_config
from ..io.writing import write_frame
from ..models.chunks import DEFAULT_AGGREGATE, aggregate_windows
from ..models.precision import Precision, TorchPrecision, check_precision, check_with_backend
from ..models.precision import record as precision_of
from ..models.precision import torch_precision
from ..models.tokenize import (
    CHUNKS,
    ChunkWarning,
    encode,
    encode_window_pairs,
    is_missing,
)
from .cache import MODELS
from .chunked import check_chunk_request
from .embed import as_frame, check_length, embed_any, embed_texts, load_encoder, missing_warning

METHODS = ("auto", "nli", "embedding")
CALIBRATIONS = ("standardise", "centre", "none")
DEFAULT_HYPOTHESIS = "This text is about {}."
METHOD_NAMES = {"nli": "NLI entailment", "embedding": "embedding similarity"}
METHOD_COL = "zeroshot_method"
PROB_PREFIX = "prob_"
#: softmax temperatures of the embedding method, by calibration
EMBED_TEMPERATURE = {"standardise": 1.0, "centre": 0.05, "none": 0.05}


class ZeroShotWarning(UserWarning):
    """Something the zero-shot run worked around (e.g. too few documents to calibrate)."""


# ------------------------------------------------------------------------------------------
# validation


def check_hypothesis(hypothesis: str) -> str:
    """Validate a hypothesis template: a string with exactly one ``{}`` placeholder.

    Raises:
        InputError: no placeholder, more than one, a named one (``{label}``), or unbalanced
            braces.
    """
    if not isinstance(hypothesis, str) or not hypothesis.strip():
        raise InputError("the hypothesis template is empty; give one with a {} for the label, "
                         "e.g. {hypothesis} 'This text is about {}.'", params=["hypothesis"])
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(hypothesis) if f is not None]
    except ValueError as exc:
        raise InputError(f"the hypothesis template '{hypothesis}' has unbalanced braces ({exc}); "
                         "write exactly one {} where the label goes, and {{ }} for a literal "
                         "brace") from None
    if not fields:
        raise InputError(f"the hypothesis template '{hypothesis}' has no {{}} placeholder for the "
                         "label; write it like 'This text is about {}.'")
    if len(fields) > 1:
        raise InputError(f"the hypothesis template '{hypothesis}' has {len(fields)} placeholders; "
                         "it needs exactly one {} where the label goes")
    if fields[0] != "":
        raise InputError(f"the hypothesis template '{hypothesis}' has a named placeholder "
                         f"{{{fields[0]}}}; write {{}} where the label goes")
    return hypothesis


def parse_labels(labels) -> list[str]:
    """Labels from a list of strings, or one comma-separated string (``"a,b,c"``).

    Surrounding whitespace is stripped. Use a list (or ``--labels-file``) for labels that
    contain commas.
    """
    if isinstance(labels, str):
        labels = labels.split(",")
    if labels is None:
        return []
    return [str(x).strip() if x is not None else "" for x in labels]


def read_label_descriptions(path: str | Path) -> list[str]:
    """Labels from a UTF-8 text file, one a line; blank lines are skipped.

    Raises:
        InputError: the file is missing.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"labels file not found: '{path}'")
    return [ln.strip() for ln in read_text_file(p).split("\n") if ln.strip()]


#: the fewest candidate labels: single-label zero-shot chooses between at least two; with
#: ``multi_label`` each label is scored on its own, so one is enough
MIN_LABELS = 2
MIN_LABELS_MULTI_LABEL = 1


def label_rules() -> dict:
    """What :func:`check_labels` requires of candidate labels, for callers that check them
    before a run (R's ``textmodel_zeroshot()``, through ``quantformer info --verbs --json``):
    the fewest labels without and with ``multi_label``, and that labels are stripped of
    surrounding whitespace, non-empty, distinct and on one line (a labels file holds one a
    line)."""
    return {"min_labels": MIN_LABELS, "min_labels_multi_label": MIN_LABELS_MULTI_LABEL,
            "strip": True, "nonempty": True, "distinct": True, "one_line": True}


def check_labels(labels, multi_label: bool = False) -> list[str]:
    """Validate candidate labels.

    Raises:
        InputError: an empty label, a duplicate, or fewer than two labels in single-label
            mode (one label is allowed with ``multi_label``).
    """
    labels = parse_labels(labels)
    empty = [i + 1 for i, x in enumerate(labels) if x == ""]
    if empty:
        raise InputError(f"label {', '.join(map(str, empty))} of {len(labels)} is empty; give "
                         "each label as a phrase, e.g. {labels} 'in favor of,against' (no empty "
                         "items or trailing commas)", params=["labels"])
    seen, dups = set(), []
    for x in labels:
        if x in seen and x not in dups:
            dups.append(x)
        seen.add(x)
    if dups:
        raise InputError(f"duplicate label(s): {', '.join(map(repr, dups))}; give each label once "
                         "(zeroshot's labels are the candidate class descriptions, one per "
                         "line in {labels_file}, not one label per document)",
                         params=["labels_file"])
    if not labels:
        raise InputError("no labels given; pass {labels} 'a,b' or {labels_file}",
                         params=["labels", "labels_file"])
    if len(labels) < (MIN_LABELS_MULTI_LABEL if multi_label else MIN_LABELS):
        raise InputError(f"single-label zero-shot needs at least two labels to choose between, "
                         f"got only {labels[0]!r}; add labels, or pass {{multi_label}} to "
                         "score each label on its own", params=["multi_label"])
    return labels


def nli_label_ids(config) -> tuple[int, int] | None:
    """(entailment index, contradiction index) from a config's ``id2label``, or None.

    The entailment output is the label whose name starts with ``entail`` (case-insensitive);
    the contradiction output the one starting with ``contradict``, else (two-way heads) the
    other output, else the rule of Hugging Face's pipeline (index 0, or the last when
    entailment is 0).
    """
    id2label = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
    entail = [i for i, name in id2label.items() if name.lower().startswith("entail")]
    if not entail:
        return None
    e = entail[0]
    contra = [i for i, name in id2label.items() if name.lower().startswith("contradict")]
    if contra:
        c = contra[0]
    elif len(id2label) == 2:
        c = next(i for i in id2label if i != e)
    else:
        c = max(id2label) if e == 0 else 0
    return e, c


def choose_method(method: str, config) -> str:
    """``nli`` or ``embedding`` for ``method`` (``auto`` decides by the config's labels).

    Raises:
        InputError: unknown method, or ``nli`` with a model that has no entailment label.
    """
    if method not in METHODS:
        raise InputError(f"unknown {{method}} '{method}'; use one of: {', '.join(METHODS)}",
                         params=["method"])
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


# ------------------------------------------------------------------------------------------
# scoring


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def nli_probabilities(logits: np.ndarray, entail: int, contra: int,
                      multi_label: bool = False) -> np.ndarray:
    """Label probabilities from NLI logits of shape (n_docs, n_labels, n_outputs).

    Single-label: softmax of the entailment logits across labels (rows sum to 1).
    Multi-label: per label, softmax over (contradiction, entailment), entailment share.

    Returns:
        float64 array (n_docs, n_labels).
    """
    logits = np.asarray(logits, dtype=np.float64)
    if multi_label or logits.shape[1] == 1:
        return _softmax(logits[..., [contra, entail]], axis=-1)[..., 1]
    return _softmax(logits[..., entail], axis=-1)


def calibrate_similarities(sims: np.ndarray, calibration: str = "standardise",
                           reference: np.ndarray | None = None) -> np.ndarray:
    """Per-label calibration of a (n_docs, n_labels) similarity matrix over its documents.

    ``standardise``: (s - label mean) / label standard deviation; ``centre``: s - label mean;
    ``none``: s unchanged. A label whose similarities do not vary keeps standard deviation 1.
    ``reference``: the similarities the label means and deviations are taken from (default
    ``sims``; the documents' when ``sims`` are their windows', ``truncation="chunks"``).
    """
    if calibration is not None and calibration not in CALIBRATIONS:
        raise InputError(f"unknown calibration '{calibration}'; use one of: "
                         f"{', '.join(CALIBRATIONS)}")
    sims = np.asarray(sims, dtype=np.float64)
    ref = sims if reference is None else np.asarray(reference, dtype=np.float64)
    if calibration == "none" or sims.shape[0] == 0:
        return sims
    out = sims - ref.mean(axis=0, keepdims=True)
    if calibration == "standardise":
        sd = ref.std(axis=0, keepdims=True)
        out = out / np.where(sd > 1e-12, sd, 1.0)
    return out


def embedding_probabilities(sims: np.ndarray, calibration: str = "standardise",
                            temperature: float | None = None,
                            multi_label: bool = False,
                            reference: np.ndarray | None = None) -> np.ndarray:
    """Label probabilities from cosine similarities (n_docs, n_labels).

    ``softmax(calibrate_similarities(sims) / temperature)`` across labels, or with ``multi_label`` an
    independent ``sigmoid`` per label (which needs a calibration: a raw cosine has no
    natural zero). ``temperature`` defaults to :data:`EMBED_TEMPERATURE` for the calibration;
    ``reference`` as in :func:`calibrate_similarities`.

    Raises:
        InputError: a temperature <= 0, or multi-label without calibration.
    """
    t = EMBED_TEMPERATURE[calibration] if temperature is None else float(temperature)
    if not t > 0:
        raise InputError(f"{{temperature}} must be greater than 0, not {temperature}",
                         params=["temperature"])
    if multi_label and calibration == "none":
        raise InputError("multi-label embedding zero-shot needs a calibration (standardise or "
                         "centre): a raw cosine has no natural threshold")
    z = calibrate_similarities(sims, calibration, reference) / t
    if multi_label:
        return 1.0 / (1.0 + np.exp(-z))
    return _softmax(z, axis=-1) if z.size else z


# ------------------------------------------------------------------------------------------
# the two methods


def _load_nli(path):
    """(sequence-classification model in eval mode, fast tokenizer) of an NLI model."""
    with hf_quiet():
        net = load_network(path, "classification")
    return net.eval(), load_tokenizer(path)


def _nli_model(model, device, backend, quantize):
    """(network, tokenizer, device) for NLI scoring, through the process's model cache."""
    return MODELS.get("zeroshot-nli", model, device,
                      lambda: _read_nli_model(model, device, backend, quantize),
                      backend=backend, quantize=quantize)


def _read_nli_model(model, device, backend, quantize):
    """(network, tokenizer, device) for NLI scoring: a torch module or an ONNX export."""
    if backend == "onnx":
        net = open_model(model, use="logits", fn=_logits, loader=_load_nli, quantize=quantize)
        return net, net.tokenizer, "cpu"

    dev = resolve_device(device)
    net, tok = _load_nli(resolve_model(model))
    return net.to(dev), tok, dev


def run_precision(precision: str, device: str, multi_label: bool,
                  backend: str) -> TorchPrecision | None:
    """The precision of a zero-shot run on a resolved ``device``: as predict's
    (:func:`quantformer.models.precision.torch_precision`; single-label near ties computed
    again in fp32; ``auto`` keeps multi-label runs in fp32, which have no top-two margin), or
    None with ONNX Runtime (``quantize`` sets it)."""
    if backend == "onnx":
        return None
    if multi_label:
        return multi_label_precision(precision)
    return torch_precision(precision, device)


def multi_label_precision(precision: str) -> TorchPrecision:
    """fp32 for multi-label scoring: each label's probability stands alone, with no top-two
    margin whose near ties bf16 could have computed again in fp32.

    Raises:
        InputError: a bad ``precision``, or ``bf16`` (naming ``multi_label``).
    """
    if check_precision(precision) == "bf16":
        raise InputError("{precision} bf16 with {multi_label} has no fp32 recheck: use auto "
                         "or fp32", params=["precision", "multi_label"])
    return TorchPrecision(Precision("fp32", precision,
                                    "fp32 for multi-label scoring (no near-tie recheck)"))


def _nli_scores(texts, present, labels, hypothesis, *, model, multi_label, batch_size,
                max_length, truncation, device, progress, config, backend="torch",
                quantize="none", chunking=None, precision="auto"):
    length = (min(512, max_positions(config) or 512) if max_length is None
              else check_max_length(max_length, config))
    net, tok, dev = _nli_model(model, device, backend, quantize)
    chosen = run_precision(precision, dev, multi_label, backend)
    entail, contra = nli_label_ids(config)
    k = len(labels)
    info = {"max_length": length, "n_pairs": len(present) * k,
            "entailment_id": entail, "contradiction_id": contra, "precision": chosen}
    if not len(present):  # every document missing or empty
        return np.zeros((0, k)), np.zeros(0, dtype=bool), info
    premises = [texts[i] for i in present]
    hyps = [hypothesis.format(lab) for lab in labels]

    def probabilities(docs, cast=True, bar=False):
        """(probabilities, truncated, (windows, window probabilities) or None) of ``docs``,
        in bf16 autocast when ``chosen`` is bf16 and ``cast``."""
        with chosen.context(dev, cast) if chosen is not None else nullcontext():
            if truncation == CHUNKS:
                logits, win, win_logits = nli_window_logits(
                    net, tok, docs, hyps, max_length=length, batch_size=batch_size,
                    device=dev, progress=bar, **chunking)
                return (nli_probabilities(logits, entail, contra, multi_label), win.truncated,
                        (win, nli_probabilities(win_logits, entail, contra, multi_label)))
            logits, cut = nli_pair_logits(net, tok, docs, hyps, max_length=length,
                                          truncation=truncation, batch_size=batch_size,
                                          device=dev, progress=bar)
        return nli_probabilities(logits, entail, contra, multi_label), cut, None

    probs, truncated, windows = probabilities(premises, bar=progress)
    if windows is not None:
        info.update(n_pairs=len(windows[0].doc) * k, windows=windows)
    if chosen is not None:  # bf16 near ties computed again in fp32, through the same windows
        info["rechecked"] = ties = chosen.ties(probs)
        if ties is not None and ties.any():
            idx = np.flatnonzero(ties)
            with warnings.catch_warnings():  # max_chunks warned once, by the first pass
                warnings.simplefilter("ignore", ChunkWarning)
                again, _, again_win = probabilities([premises[i] for i in idx], cast=False)
            probs[idx] = again
            if windows is not None:
                windows[1][window_rows_of(windows[0].doc, idx)] = again_win[1]
    return probs, truncated, info


def window_rows_of(doc: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The rows of the windows of documents ``idx`` (sorted) among windows whose documents are
    ``doc`` (grouped by document, in order): where the windows of the documents ``idx`` read
    again on their own go."""
    return np.flatnonzero(np.isin(doc, idx))


def nli_pair_logits(net, tokenizer, texts: list, hypotheses: list, *, max_length: int,
                    truncation: str, batch_size: int, device: str, progress: bool,
                    desc: str = "zero-shot NLI") -> tuple[np.ndarray, np.ndarray]:
    """Logits of every (text, hypothesis) pair: each text is the premise of every hypothesis.

    The premise is truncated (``truncation``) and gives way to the hypothesis, which is never
    cut (:func:`quantformer.models.tokenize.encode`); pairs run in length-sorted batches.

    Args:
        net: an NLI sequence-classification model on ``device`` (or an ONNX export of it).
        texts: the premises (no missing texts).
        hypotheses: the filled hypothesis templates, one per label.

    Returns:
        (float array (n_texts, n_hypotheses, n_outputs), bool array (n_texts,): the texts cut
        in at least one of their pairs).
    """
    k = len(hypotheses)
    enc = encode(tokenizer, [t for t in texts for _ in range(k)], max_length=max_length,
                 truncation=truncation, pairs=list(hypotheses) * len(texts))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if hasattr(progress, "update"):  # a caller's bar over documents: k pairs each
        progress = PerGroup(progress, k)
    logits = run_batches(net, enc.input_ids, enc.token_type_ids, fn=_logits,
                         batch_size=batch_size, device=device, pad_id=pad, progress=progress,
                         desc=desc)
    return (logits.reshape(len(texts), k, -1),
            enc.truncated.reshape(len(texts), k).any(axis=1))


def _logits(model, batch):
    return model(**batch).logits


def nli_window_logits(net, tokenizer, texts: list, hypotheses: list, *, max_length: int,
                      stride: int | None, max_chunks: int | None, aggregate: str,
                      batch_size: int, device: str, progress,
                      desc: str = "zero-shot NLI") -> tuple:
    """NLI logits of documents read whole in windows (``truncation="chunks"``): every window
    the premise of every hypothesis (:func:`quantformer.models.tokenize.encode_window_pairs`),
    all pairs in length-sorted batches, then each document's logits per hypothesis the
    ``aggregate`` (``mean`` or ``max``) over its windows
    (:func:`quantformer.models.chunks.aggregate_windows`), as a fine-tuned classifier's window
    logits are aggregated.

    Args:
        texts: the premises (str or None; a missing one has no windows and NaN logits).
        hypotheses: the k filled hypothesis templates.
        progress: bool, or a caller's bar over documents (advanced once by the documents).

    Returns:
        (float (n_texts, k, n_outputs) aggregated logits, the premises'
        :class:`~quantformer.models.tokenize.Windows`, float (n_windows, k, n_outputs) the
        windows' own logits).

    Raises:
        InputError: a hypothesis that leaves no room for a window; a bad ``stride`` or
            ``max_chunks``.
    """
    win, ids, types = encode_window_pairs(tokenizer, texts, hypotheses, max_length=max_length,
                                          stride=stride, max_chunks=max_chunks)
    k, n, n_win = len(hypotheses), len(win.missing), len(win.doc)
    out = len(getattr(net.config, "id2label", None) or {}) or 3
    if not ids:
        return np.full((n, k, out), np.nan), win, np.zeros((0, k, out))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    bar = progress if hasattr(progress, "update") else None
    logits = run_batches(net, ids, types, fn=_logits, batch_size=batch_size, device=device,
                         pad_id=pad, progress=False if bar else progress, desc=desc)
    if bar is not None:
        bar.update(int((~win.missing).sum()))
    logits = logits.reshape(n_win, k, -1).astype(np.float64)
    docs = aggregate_windows(logits.reshape(n_win, -1), win.doc, n, aggregate)
    return docs.reshape(n, k, -1), win, logits


def _embedding_scores(texts, present, labels, hypothesis, *, model, multi_label, batch_size,
                      max_length, truncation, device, progress, calibration, temperature,
                      backend="torch", quantize="none", chunking=None, precision="auto"):
    enc = load_encoder(model, device, backend, quantize)
    length = check_length(enc, max_length)
    chosen = run_precision(precision, enc.device, multi_label, backend)
    common = {"max_length": length, "truncation": truncation, "batch_size": batch_size,
              "normalize": True,
              **{k: v for k, v in (chunking or {}).items() if k != "aggregate"}}
    docs, encoded, win_vecs = embed_any(enc, [texts[i] for i in present], progress=progress,
                                        precision=chosen, **common)
    # the few label hypotheses, shared by every document, are embedded in fp32
    hyps, _ = embed_texts(enc, [hypothesis.format(lab) for lab in labels], max_length=length,
                          truncation="head_tail" if truncation == CHUNKS else truncation,
                          batch_size=batch_size, normalize=True)
    sims = docs.astype(np.float64) @ hyps.astype(np.float64).T
    used = calibration
    if calibration != "none" and len(present) == 1:
        if multi_label:
            raise InputError("multi-label embedding zero-shot calibrates each label over the "
                             "corpus and needs at least 2 non-empty documents")
        warnings.warn(f"calibration '{calibration}' needs at least 2 documents, got 1; used "
                      "plain cosine similarity", ZeroShotWarning, stacklevel=3)
        used = "none"
        if temperature is None:
            temperature = EMBED_TEMPERATURE["none"]
    probs = embedding_probabilities(sims, used, temperature, multi_label)
    info = {"max_length": length, "calibration": used, "similarity": sims,
            "temperature": EMBED_TEMPERATURE[used] if temperature is None else float(temperature),
            "precision": chosen}
    if chosen is not None:
        info["rechecked"] = ties = chosen.ties(probs)
        if ties is not None and ties.any():  # bf16 near ties: their documents again in fp32
            idx = np.flatnonzero(ties)
            with warnings.catch_warnings():  # max_chunks warned once, by the first pass
                warnings.simplefilter("ignore", ChunkWarning)
                again, _, again_win = embed_any(enc, [texts[present[i]] for i in idx], **common)
            sims[idx] = again.astype(np.float64) @ hyps.astype(np.float64).T
            probs = embedding_probabilities(sims, used, temperature, multi_label)
            if win_vecs is not None:
                win_vecs[window_rows_of(encoded.doc, idx)] = again_win
    if win_vecs is not None:  # each window scored as its document, against the documents'
        win_sims = win_vecs.astype(np.float64) @ hyps.astype(np.float64).T  # calibration
        info["windows"] = (encoded, embedding_probabilities(win_sims, used, temperature,
                                                            multi_label, reference=sims))
    return probs, encoded.truncated, info


def _check_method_settings(chosen: str, **given) -> None:
    """Refuse the settings of the other method: ``aggregate`` (of the NLI method's window
    logits) with the embedding method, which averages the windows' embeddings;
    ``calibration`` and ``temperature`` (of the embedding method's similarities) with the NLI
    method, whose probabilities are its entailment softmax.

    Raises:
        InputError: naming the settings and the method chosen.
    """
    other = ("aggregate",) if chosen == "embedding" else ("calibration", "temperature")
    named = [k for k in other if given.get(k) is not None]
    if named:
        method = ("the NLI method" if chosen == "embedding" else "the embedding method") + \
            f", and this run uses the {METHOD_NAMES[chosen]} method"
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
    truncation: str = "head_tail",
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
    precision: str = "auto",
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
            (:func:`nli_window_logits`).
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
            embedding method are always embedded in fp32.

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
    check_backend(backend, quantize, device)
    check_with_backend(check_precision(precision), backend, quantize)
    if multi_label:  # refused before any model loads
        multi_label_precision(precision)
    hypothesis = check_hypothesis(hypothesis)
    labels = check_labels(labels, multi_label)
    check_chunk_request(truncation, stride, max_chunks, aggregate, chunks_out)
    if calibration is not None and calibration not in CALIBRATIONS:
        raise InputError(f"unknown {{calibration}} '{calibration}'; use one of: "
                         f"{', '.join(CALIBRATIONS)}", params=["calibration"])
    if temperature is not None and not float(temperature) > 0:
        raise InputError(f"{{temperature}} must be greater than 0, not {temperature}",
                         params=["temperature"])
    check_arguments(batch_size=batch_size)
    frame = as_frame(frame)
    chosen, config = method_for(model, method, backend, aggregate=aggregate,
                                calibration=calibration, temperature=temperature)
    texts = frame["text"].tolist()
    missing = np.array([is_missing(t) for t in texts], dtype=bool)
    present = np.flatnonzero(~missing)
    chunking = {"stride": stride, "max_chunks": max_chunks,
                "aggregate": aggregate or DEFAULT_AGGREGATE}
    common = dict(model=model, multi_label=multi_label, batch_size=batch_size,
                  max_length=max_length, truncation=truncation, device=device,
                  progress=not quiet, backend=backend, quantize=quantize, chunking=chunking,
                  precision=precision)
    if chosen == "nli":
        probs, truncated, info = _nli_scores(texts, present, labels, hypothesis, config=config,
                                             **common)
    else:
        probs, truncated, info = _embedding_scores(texts, present, labels, hypothesis,
                                                   calibration=calibration or "standardise",
                                                   temperature=temperature, **common)
    missing_warning(int(missing.sum()), len(frame), "a missing prediction")
    if chunks_out is not None:
        win, win_probs = info.get("windows", (None, None))
        write_frame(window_rows(frame.iloc[present], win, win_probs, labels), chunks_out)
    out = _result_frame(frame, present, probs, labels, chosen, keep_text)
    out["backend"] = _backend_column(info, backend, quantize, present, len(frame))
    meta = {**_precision_meta(info, backend, quantize),
            "method": METHOD_NAMES[chosen], "model": model_label(model),
            "hypothesis": hypothesis, "labels": labels, "multi_label": multi_label,
            "truncation": truncation, "n_docs": len(frame), "n_missing": int(missing.sum()),
            "n_truncated": int(np.asarray(truncated).sum())}
    if truncation == CHUNKS:
        meta.update(_windows_meta(info, chunking, chosen == "nli"))
    meta.update({k: v for k, v in info.items()
                 if k not in ("similarity", "windows", "precision", "rechecked")})
    out.attrs["quantformer"] = meta
    return out


def _windows_meta(info: dict, chunking: dict, nli: bool) -> dict:
    """``stride``, ``max_chunks``, ``n_windows`` (and NLI's ``aggregate``) of a run in
    windows, for the output's ``attrs``."""
    win = info.get("windows", (None,))[0]
    return {"stride": win.stride if win is not None else chunking["stride"],
            "max_chunks": chunking["max_chunks"],
            "n_windows": len(win.doc) if win is not None else 0,
            **({"aggregate": chunking["aggregate"]} if nli else {})}


def _result_frame(frame, present, probs, labels, chosen, keep_text) -> pd.DataFrame:
    """The output rows: docvars, ``predicted``, ``prob_<label>``, ``zeroshot_method``."""
    full = np.full((len(frame), len(labels)), np.nan, dtype=np.float64)
    full[present] = probs
    predicted = np.full(len(frame), None, dtype=object)
    if len(present):
        predicted[present] = np.asarray(labels, dtype=object)[probs.argmax(axis=1)]
    cols = [c for c in frame.columns if keep_text or c != "text"]
    out = frame[cols].copy()
    out["predicted"] = predicted
    for j, lab in enumerate(labels):
        out[f"{PROB_PREFIX}{lab}"] = full[:, j]
    # the method that scored the row; missing for rows without text (nothing was scored)
    method = np.full(len(frame), None, dtype=object)
    method[present] = METHOD_NAMES[chosen]
    out[METHOD_COL] = method
    return out


def window_rows(frame: pd.DataFrame, windows, probs: np.ndarray, labels) -> pd.DataFrame:
    """One row per window of ``frame``'s documents (``chunks_out``): ``doc_id``, ``chunk``,
    ``start``, ``end`` (characters), ``predicted`` and ``prob_<label>`` of the window alone."""
    if windows is None:  # no document had a text
        return pd.DataFrame(columns=["doc_id", "chunk", "start", "end", "predicted",
                                     *(f"{PROB_PREFIX}{lab}" for lab in labels)])
    out = pd.DataFrame({"doc_id": frame["doc_id"].to_numpy()[windows.doc],
                        "chunk": windows.chunk, "start": windows.start, "end": windows.end})
    out["predicted"] = (np.asarray(labels, dtype=object)[probs.argmax(axis=1)] if len(probs)
                        else np.zeros(0, dtype=object))
    for j, lab in enumerate(labels):
        out[f"{PROB_PREFIX}{lab}"] = probs[:, j] if len(probs) else np.zeros(0)
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


def _config(model, backend: str):
    """The model's config: transformers' ``AutoConfig``, or (onnx) its config.json read
    without importing torch."""
    return read_config(resolve_model(model)) if backend == "onnx" else load_config(model)


def describe(meta: dict) -> str:
    """One line naming the method and its settings (what the CLI prints)."""
    if meta["method"] == METHOD_NAMES["nli"]:
        how = (f"{meta['method']} ({meta['n_pairs']} premise-hypothesis pairs, "
               f"{'independent entailment vs contradiction per label' if meta['multi_label'] else 'softmax of entailment across labels'})")
    else:
        how = (f"{meta['method']} (cosine of mean-pooled embeddings, calibration "
               f"{meta['calibration']}, {'sigmoid' if meta['multi_label'] else 'softmax'} at "
               f"temperature {meta['temperature']:g})")
    return (f"zero-shot by {how} with {meta['model']}: {meta['n_docs']} documents x "
            f"{len(meta['labels'])} labels, hypothesis '{meta['hypothesis']}'; "
            f"{meta['n_missing']} missing or empty (no prediction), "
            + (f"read in {meta['n_windows']} windows of {meta['max_length']} tokens"
               + (f" ({meta['aggregate']} of the window logits)" if "aggregate" in meta else
                  " (mean of the window embeddings)")
               if meta["truncation"] == CHUNKS else
               f"{meta['n_truncated']} truncated to {meta['max_length']} tokens "
               f"({meta['truncation']})")
            + (f"; backend {meta['backend']}" if meta.get("backend", "torch") != "torch" else ""))



