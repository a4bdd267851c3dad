"""Zero-shot by embedding similarity (``method="embedding"``): works with any encoder,
offline, and is what the bundled all-MiniLM-L6-v2 uses.

The score of a label is the cosine similarity between the mean-pooled embedding of the
document and of the filled hypothesis (:mod:`quantformer.infer.embed`). Sentence embeddings
capture topic more than stance, and some label phrases are closer to every document than
others, so by default each label's similarities are *standardised over the corpus*
(``calibration="standardise"``: minus the label's mean, divided by its standard deviation
across the input's documents) before the softmax. This removes the label's prior pull, so a
document gets the label it is unusually close to. It makes each document's scores depend on
the other documents in the input (classify the whole corpus at once, not one document at a
time); ``"centre"`` subtracts the mean only, ``"none"`` uses plain cosines. Probabilities are
``softmax(score / temperature)`` (multi-label: ``sigmoid(score / temperature)`` of the
calibrated score, so above 0.5 means closer than the label's corpus average). Default
temperature: 1 for standardised scores (z units), 0.05 for raw or centred cosines (the scale 20
that all-MiniLM-L6-v2 was trained with in sentence-transformers' MultipleNegativesRankingLoss).
With ``truncation="chunks"`` a document's embedding is the mean of its window embeddings
(:func:`quantformer.infer.embed.embed_windows`).

For stance the method is weak: "in favor of X" and "against X" embed close together
(``bench/RESULTS.md`` reports each variant on the paper's Abortion and Toxic tasks). Prefer an
NLI model for stance; the embedding method suits topics.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._core.errors import InputError
from ..models.precision import DEFAULT_PRECISION
from ..models.reading import DEFAULT_TRUNCATION, Reading
from ..models.tokenize import ChunkWarning, special_template
from .embed import check_length, embed_any, embed_texts, load_encoder
from .zeroshot_common import (
    CALIBRATIONS,
    DEFAULT_CALIBRATION,
    EMBED_TEMPERATURE,
    ZeroShotMethod,
    ZeroShotWarning,
    run_precision,
    softmax,
    window_rows_of,
)


def calibrate_similarities(sims: np.ndarray, calibration: str = DEFAULT_CALIBRATION,
                           reference: np.ndarray | None = None) -> np.ndarray:
    """Per-label calibration of a (n_docs, n_labels) similarity matrix over its documents.

    ``standardise``: (s - label mean) / label standard deviation; ``centre``: s - label mean;
    ``none``: s unchanged. A label whose similarities do not vary keeps standard deviation 1.
    ``reference``: the similarities the label means and deviations are taken from (default
    ``sims``; the documents' when ``sims`` are their windows', ``truncation="chunks"``).

    Raises:
        InputError: an unknown ``calibration``.
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


def embedding_probabilities(sims: np.ndarray, calibration: str = DEFAULT_CALIBRATION,
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
    return softmax(z, axis=-1) if z.size else z


def _calibration_used(calibration: str, temperature, n_docs: int, multi_label: bool):
    """(calibration, temperature) a run of ``n_docs`` documents uses: plain cosines, with a
    warning, when one document leaves nothing to calibrate over.

    Raises:
        InputError: multi-label with one document (its labels need a calibration).
    """
    if calibration == "none" or n_docs != 1:
        return calibration, temperature
    if multi_label:
        raise InputError("multi-label embedding zero-shot calibrates each label over the "
                         "corpus and needs at least 2 non-empty documents")
    warnings.warn(f"calibration '{calibration}' needs at least 2 documents, got 1; used "
                  "plain cosine similarity", ZeroShotWarning, stacklevel=4)
    return "none", EMBED_TEMPERATURE["none"] if temperature is None else temperature


def embedding_scores(texts, present, labels, hypothesis, *, config, options, model,
                     multi_label, batch_size, reading: Reading, device, progress,
                     backend="torch", quantize="none", precision=DEFAULT_PRECISION):
    """The embedding method's entry of the method table (:class:`ZeroShotMethod` ``score``):
    ``(probabilities (n_present, n_labels), truncated, info)``. ``options``: ``calibration``
    (None: ``standardise``) and ``temperature`` (None: :data:`EMBED_TEMPERATURE` of the
    calibration); ``reading.max_length`` None: the encoder's default length
    (:func:`quantformer.infer.embed.default_max_length`). ``config`` is not used (the encoder
    reads its own)."""
    enc = load_encoder(model, device, backend, quantize)
    length = check_length(enc, reading.max_length)
    reading = reading.replace(max_length=length)
    if reading.chunks:
        reading.check_window(length - special_template(enc.tokenizer).n_single)
    chosen = run_precision(precision, enc.device, multi_label, backend)
    common = {"max_length": length, "truncation": reading.truncation,
              "batch_size": batch_size, "normalize": True, "stride": reading.stride,
              "max_chunks": reading.max_chunks}
    docs, encoded, win_vecs = embed_any(enc, [texts[i] for i in present], progress=progress,
                                        precision=chosen, **common)
    # the few label hypotheses, shared by every document, are embedded in fp32
    hyps, _ = embed_texts(enc, [hypothesis.format(lab) for lab in labels], max_length=length,
                          truncation=DEFAULT_TRUNCATION if reading.chunks else reading.truncation,
                          batch_size=batch_size, normalize=True)
    hyps = hyps.astype(np.float64)
    sims = docs.astype(np.float64) @ hyps.T
    used, temperature = _calibration_used(options.get("calibration") or DEFAULT_CALIBRATION,
                                          options.get("temperature"), len(present), multi_label)
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
            sims[idx] = again.astype(np.float64) @ hyps.T
            probs = embedding_probabilities(sims, used, temperature, multi_label)
            if win_vecs is not None:
                win_vecs[window_rows_of(encoded.doc, idx)] = again_win
    if win_vecs is not None:  # each window scored as its document, against the documents'
        win_sims = win_vecs.astype(np.float64) @ hyps.T  # calibration
        info["windows"] = (encoded, embedding_probabilities(win_sims, used, temperature,
                                                            multi_label, reference=sims))
    return probs, encoded.truncated, info


#: the embedding method's entry of :data:`quantformer.infer.zeroshot.METHODS`
METHOD = ZeroShotMethod(name="embedding", title="embedding similarity", short="embedding",
                        settings=("calibration", "temperature"), score=embedding_scores)
