"""Zero-shot by NLI entailment (``method="nli"``): the document is the premise, each filled
hypothesis template a hypothesis, and a model fine-tuned on natural language inference (such as
``facebook/bart-large-mnli``) scores every pair. The method is Yin et al. (2019); Laurer et al.
(2023) use it with NLI models fine-tuned further.

Single-label: softmax of the entailment logits across the labels. Multi-label: for each label
on its own, softmax over (contradiction, entailment). These are the semantics and the scores
(to 1e-5) of Hugging Face's ``pipeline("zero-shot-classification")``, but the pairs of all
documents and labels are batched together, sorted by length, with dynamic padding; the premise
is truncated (``head_tail`` by default, Wankmüller 2022, section 6.3), the hypothesis never
is. The entailment and contradiction outputs are found by name in the config's ``id2label``
(case-insensitive). With ``truncation="chunks"`` every window is the premise of every
hypothesis and a document's logits per label are the aggregate of its windows'
(:func:`nli_window_logits`), as a fine-tuned classifier aggregates its window logits.
"""

from __future__ import annotations

import warnings
from contextlib import nullcontext

import numpy as np

from ..io.modeldir import hf_quiet
from ..models.batching import PerGroup, run_batches
from ..models.chunks import aggregate_windows
from ..models.hub import (
    check_max_length,
    load_network,
    load_tokenizer,
    max_positions,
    resolve_device,
    resolve_model,
)
from ..models.onnx.backend import open_model
from ..models.precision import DEFAULT_PRECISION
from ..models.reading import DEFAULT_MAX_LENGTH, Reading
from ..models.tokenize import (
    ChunkWarning,
    count_subwords,
    encode,
    encode_window_pairs,
    special_template,
)
from .cache import MODELS
from .zeroshot_common import ZeroShotMethod, run_precision, softmax, window_rows_of


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
        return softmax(logits[..., [contra, entail]], axis=-1)[..., 1]
    return softmax(logits[..., entail], axis=-1)


# ------------------------------------------------------------------------------------------
# the model


def _load_nli(path):
    """(sequence-classification model in eval mode, fast tokenizer) of an NLI model."""
    with hf_quiet():
        net = load_network(path, head="classification")
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


def _logits(model, batch):
    return model(**batch).logits


def premise_window(tokenizer, hypotheses: list, max_length: int) -> int:
    """The premise's content tokens in a window of ``max_length`` paired with the longest
    hypothesis (below 1: no room, which :func:`encode_window_pairs` refuses)."""
    longest = max(count_subwords(tokenizer, list(hypotheses)), default=0)
    return max_length - special_template(tokenizer).n_pair - longest


# ------------------------------------------------------------------------------------------
# scoring


def nli_scores(texts, present, labels, hypothesis, *, config, options, model, multi_label,
               batch_size, reading: Reading, device, progress, backend="torch",
               quantize="none", precision=DEFAULT_PRECISION):
    """The NLI method's entry of the method table (:class:`ZeroShotMethod` ``score``):
    ``(probabilities (n_present, n_labels), truncated, info)``. ``reading.max_length`` None:
    512, or the model's limit when lower; ``options`` (``aggregate``) travels in ``reading``."""
    length = (min(DEFAULT_MAX_LENGTH, max_positions(config) or DEFAULT_MAX_LENGTH)
              if reading.max_length is None else check_max_length(reading.max_length, config))
    reading = reading.replace(max_length=length)
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
    if reading.chunks and (budget := premise_window(tok, hyps, length)) >= 1:
        reading.check_window(budget)

    def probabilities(docs, cast=True, bar=False):
        """(probabilities, truncated, (windows, window probabilities) or None) of ``docs``,
        in bf16 autocast when ``chosen`` is bf16 and ``cast``."""
        with chosen.context(dev, cast) if chosen is not None else nullcontext():
            if reading.chunks:
                logits, win, win_logits = nli_window_logits(
                    net, tok, docs, hyps, max_length=length, stride=reading.stride,
                    max_chunks=reading.max_chunks, aggregate=reading.aggregate_or_default,
                    batch_size=batch_size, device=dev, progress=bar)
                return (nli_probabilities(logits, entail, contra, multi_label), win.truncated,
                        (win, nli_probabilities(win_logits, entail, contra, multi_label)))
            logits, cut = nli_pair_logits(net, tok, docs, hyps, max_length=length,
                                          truncation=reading.truncation,
                                          batch_size=batch_size, device=dev, progress=bar)
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


#: the NLI method's entry of :data:`quantformer.infer.zeroshot.METHODS`
METHOD = ZeroShotMethod(name="nli", title="NLI entailment", short="NLI",
                        settings=("aggregate",), score=nli_scores)
