"""Mean-pooled document embeddings (the ``embed`` verb), also used by embedding zero-shot.

Each document is tokenised (long documents truncated on token ids, ``head_tail`` by default,
or with ``truncation="chunks"`` read whole as windows whose embeddings are averaged,
:func:`embed_windows`), run through the encoder, and its last-layer token vectors are averaged
over the attention mask:
the pooling of sentence-transformers models such as the bundled all-MiniLM-L6-v2, so the
vectors equal ``SentenceTransformer.encode()`` (with ``normalize=True``, which that model's
pipeline applies). Encoder-decoder models (BART, T5) are pooled over their encoder.

Output shape: ``(n_docs, hidden)`` float32, one row per input document in input order
(hidden = 384 for the default model). Missing or empty documents are kept as rows of NaN and
counted in a warning, never dropped.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.formats import FrameWarning
from ..io.writing import FrameWriter
from ..io.writable import check_output_file
from ..io.frames import iter_frames, to_frame
from ..io.modeldir import hf_quiet
from ..models.arguments import check_arguments
from ..models.batching import mean_pool, run_batches
from ..models.hub import (
    check_max_length,
    load_config,
    load_network,
    load_tokenizer,
    max_positions,
    resolve_device,
    resolve_model,
)
from ..models.onnx.backend import check_backend, open_model
from ..models.chunks import aggregate_windows
from ..models.precision import (
    DEFAULT_PRECISION,
    TorchPrecision,
    check_precision,
    check_with_backend,
    choose_precision,
)
from ..models.precision import record as precision_of
from ..models.reading import DEFAULT_AGGREGATE, DEFAULT_MAX_LENGTH, DEFAULT_TRUNCATION, Reading
from ..models.tokenize import encode, encode_windows
from .cache import MODELS
from .chunked import check_reading_request
from .embedding_table import (DIM_PREFIX, EMBEDDING_COL, LAYOUTS,  # noqa: F401 (re-exported)
                              embedding_frame, resolve_layout, window_embedding_frame)

CHUNK_ROWS = 4096  # documents the embed verb reads, embeds and writes at a time


# ------------------------------------------------------------------------------------------
# inputs


def as_frame(x) -> pd.DataFrame:
    """A corpus frame from a corpus frame, any DataFrame with a ``text`` column, or a sequence
    of strings (ids ``text1..textN``).

    Raises:
        InputError: a single string, or a table without a text column.
    """
    if isinstance(x, str):
        raise InputError("give a list of documents (or a corpus frame), not a single string")
    if isinstance(x, pd.DataFrame):
        if "doc_id" in x.columns and "text" in x.columns:
            return x.reset_index(drop=True)
        return to_frame(x)
    if isinstance(x, pd.Series):
        x = x.tolist()
    return to_frame(pd.DataFrame({"text": list(x)}))


def missing_warning(n_missing: int, n_docs: int, consequence: str) -> None:
    """Warn that ``n_missing`` of ``n_docs`` documents are missing or empty (kept, not dropped)."""
    if n_missing:
        warnings.warn(f"{n_missing} of {n_docs} document(s) have missing or empty text; they are "
                      f"kept with {consequence}", FrameWarning, stacklevel=3)


# ------------------------------------------------------------------------------------------
# the encoder


@dataclass
class Encoder:
    """A loaded encoder: the torch module (in eval mode, on ``device``), its tokenizer, config."""

    model: object
    tokenizer: object
    config: object
    device: str
    path: str


def load_encoder(model: str | None = None, device: str = "auto", backend: str = "torch",
                 quantize: str = "none") -> Encoder:
    """Load a model's encoder (``AutoModel``; any classification head is not used).

    Args:
        backend: ``torch`` or ``onnx`` (ONNX Runtime on the CPU, mean pooling inside the
            exported graph; see :mod:`quantformer.models.onnx.backend` for the cache).
        quantize: ``none`` or ``int8`` (onnx only).

    Raises:
        InputError: the model cannot be resolved, the device is unavailable, or a bad
            backend/quantize combination.
    """
    return MODELS.get("encoder", model, device,
                      lambda: _read_encoder(model, device, backend, quantize),
                      backend=backend, quantize=quantize)


def _read_encoder(model, device: str, backend: str, quantize: str) -> Encoder:
    """The encoder of :func:`load_encoder`, read from disk."""
    path = resolve_model(model)
    if check_backend(backend, quantize, device) == "onnx":
        net = open_model(model, use="mean_pool", fn=_pool, loader=_load_torch_encoder,
                         quantize=quantize)
        return Encoder(model=net, tokenizer=net.tokenizer, config=net.config, device="cpu",
                       path=path)

    dev = resolve_device(device)
    net, tok = _load_torch_encoder(path)
    net.to(dev)
    return Encoder(model=net, tokenizer=tok, config=load_config(model), device=dev, path=path)


def _load_torch_encoder(path: str):
    """(encoder module in eval mode, fast tokenizer); encoder-decoders give their encoder."""
    with hf_quiet():  # "unused weights of the head" is expected here
        net = load_network(path)
    if getattr(net.config, "is_encoder_decoder", False) and hasattr(net, "get_encoder"):
        net = net.get_encoder()
    return net.eval(), load_tokenizer(path)


def default_max_length(enc: Encoder) -> int:
    """The token limit used when none is given: the model's sentence-transformers
    ``max_seq_length`` (256 for all-MiniLM-L6-v2) when it has one, else 512, never above the
    model's position limit. A folder written by sentence-transformers 6 keeps that
    length as its tokenizer's ``model_max_length`` (``sentence_bert_config.json`` without
    ``max_seq_length``), where sentence-transformers itself reads it."""
    limit = max_positions(enc.config) or DEFAULT_MAX_LENGTH
    want = DEFAULT_MAX_LENGTH
    st = Path(enc.path) / "sentence_bert_config.json"
    if st.is_file():
        try:
            given = json.loads(st.read_text()).get("max_seq_length")
            want = int(given) if given else _tokenizer_limit(enc.tokenizer)
        except (ValueError, OSError):
            pass
    return min(want, limit)


def _tokenizer_limit(tokenizer) -> int:
    """The tokenizer's ``model_max_length``, or 512 where it is unset (transformers' huge
    placeholder)."""
    value = getattr(tokenizer, "model_max_length", None)
    return int(value) if isinstance(value, int) and 0 < value < 10 ** 6 else DEFAULT_MAX_LENGTH


def check_length(enc: Encoder, max_length: int | None) -> int:
    """``max_length`` validated against the model (None -> :func:`default_max_length`)."""
    if max_length is None:
        return default_max_length(enc)
    return check_max_length(max_length, enc.config)


def _pool(model, batch):
    return mean_pool(model(**batch).last_hidden_state.float(), batch["attention_mask"])


def encoder_precision(enc: Encoder, precision: str = DEFAULT_PRECISION) -> TorchPrecision | None:
    """The precision an encoder runs in (:func:`quantformer.models.precision.choose_precision`
    on its device), or None for an ONNX Runtime encoder (``quantize`` sets its precision).

    Raises:
        InputError: a value other than auto, fp32 or bf16.

    Warns:
        PrecisionWarning: ``bf16`` on hardware without native bf16.
    """
    if getattr(enc.model, "backend", "torch") == "onnx":
        check_precision(precision)
        return None
    return TorchPrecision(choose_precision(precision, enc.device))


def precision_record(enc: Encoder, chosen: TorchPrecision | None) -> dict:
    """The record of the precision an encoder ran in (``precision``, ``requested``,
    ``reason``; ONNX Runtime: its graph's)."""
    return precision_of(chosen, getattr(enc.model, "label", "onnx fp32"))


def backend_label(enc: Encoder, chosen: TorchPrecision | None) -> str:
    """The ``backend`` value of an encoder's rows: ``torch``, ``torch bf16``, ``onnx fp32``
    or ``onnx int8``."""
    return chosen.label if chosen is not None else enc.model.label


def embed_texts(enc: Encoder, texts, *, max_length: int | None = None,
                truncation: str = DEFAULT_TRUNCATION, batch_size: int = 32,
                normalize: bool = False, progress: bool = False,
                precision: TorchPrecision | None = None, reading: Reading | None = None):
    """Mean-pooled embeddings of a list of texts with a loaded encoder.

    Args:
        texts: sequence of n str or None.
        max_length: token limit, special tokens included.
        truncation: ``head_tail`` (default), ``head`` or ``tail``.
        reading: how documents are read; when given, it replaces ``max_length`` and
            ``truncation`` (one of the two ways is needed).
        normalize: scale each vector to unit length (cosine similarity = dot product).
        precision: a torch encoder's precision (:func:`encoder_precision`; None: fp32): bf16
            runs the forward passes under bf16 autocast, the pooled vectors are fp32.

    Returns:
        ``(vectors, encoded)``: float32 array (n, hidden) with NaN rows for missing/empty
        texts, and the :class:`~quantformer.models.tokenize.Encoded` (``truncated``, ``missing``).
    """
    reading = reading or Reading(truncation, max_length)
    encoded = encode(enc.tokenizer, texts, reading=reading)
    hidden = int(getattr(enc.config, "hidden_size", 0) or getattr(enc.config, "d_model", 0))
    out = np.full((len(encoded.input_ids), hidden), np.nan, dtype=np.float32)
    keep = np.flatnonzero(~encoded.missing)
    if keep.size:
        ids = [encoded.input_ids[i] for i in keep]
        types = [encoded.token_type_ids[i] for i in keep] if encoded.token_type_ids else None
        pad = enc.tokenizer.pad_token_id if enc.tokenizer.pad_token_id is not None else 0
        with _cast(enc, precision):
            vecs = run_batches(enc.model, ids, types, fn=_pool, batch_size=batch_size,
                               device=enc.device, pad_id=pad, progress=progress,
                               desc="embedding")
        if normalize:
            vecs = _unit(vecs)
        out = np.full((len(encoded.input_ids), vecs.shape[1]), np.nan, dtype=np.float32)
        out[keep] = vecs
    return out, encoded


def _cast(enc: Encoder, precision: TorchPrecision | None):
    """The autocast context of ``precision`` on the encoder's device (none for None)."""
    return precision.context(enc.device) if precision is not None else nullcontext()


def _unit(vecs: np.ndarray) -> np.ndarray:
    return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


def embed_windows(enc: Encoder, texts, *, max_length: int | None = None,
                  stride: int | None = None, max_chunks: int | None = None,
                  batch_size: int = 32, normalize: bool = False, progress: bool = False,
                  precision: TorchPrecision | None = None, reading: Reading | None = None):
    """Document embeddings of texts read whole in windows (``truncation="chunks"``).

    Every window of every document (:func:`quantformer.models.tokenize.encode_windows`) is
    mean-pooled like a short document (length-sorted batches across documents); a
    document's embedding is the mean of its windows' embeddings, each window weighing the
    same (the averaging of the ``text`` R package, Kjell et al. 2023, over windows instead of
    sentences). With ``normalize`` each window's vector is scaled to unit length before the
    mean and the mean again after it.

    Args:
        texts: sequence of n str or None.
        max_length: tokens per window, special tokens included.
        stride, max_chunks, reading: as in :func:`quantformer.models.windows.encode_windows`.
        precision: as in :func:`embed_texts` (every window's forward pass under it).

    Returns:
        ``(vectors, windows, window_vectors)``: float32 (n, hidden) with NaN rows for
        missing texts; the :class:`~quantformer.models.tokenize.Windows`; float32
        (n_windows, hidden), the windows' own embeddings (unit length with ``normalize``).

    Raises:
        InputError: a ``stride`` not smaller than the window, ``max_chunks`` < 1.
    """
    win = encode_windows(enc.tokenizer, texts, max_length=max_length, stride=stride,
                         max_chunks=max_chunks, reading=reading)
    hidden = int(getattr(enc.config, "hidden_size", 0) or getattr(enc.config, "d_model", 0))
    n = len(win.missing)
    if not len(win.input_ids):
        return (np.full((n, hidden), np.nan, dtype=np.float32), win,
                np.zeros((0, hidden), dtype=np.float32))
    pad = enc.tokenizer.pad_token_id if enc.tokenizer.pad_token_id is not None else 0
    with _cast(enc, precision):
        vecs = run_batches(enc.model, win.input_ids, win.token_type_ids, fn=_pool,
                           batch_size=batch_size, device=enc.device, pad_id=pad,
                           progress=progress, desc="embedding windows")
    if normalize:
        vecs = _unit(vecs)
    docs = aggregate_windows(vecs, win.doc, n, DEFAULT_AGGREGATE)
    if normalize:
        docs = _unit(docs)
    return docs.astype(np.float32), win, vecs


def embed_any(enc: Encoder, texts, *, max_length: int | None = None,
              truncation: str = DEFAULT_TRUNCATION, stride: int | None = None,
              max_chunks: int | None = None, batch_size: int = 32, normalize: bool = False,
              progress: bool = False, precision: TorchPrecision | None = None,
              reading: Reading | None = None):
    """:func:`embed_windows` with ``truncation="chunks"``, else :func:`embed_texts`, both in
    ``precision``; returns ``(vectors, encoded, window_vectors)`` (``window_vectors`` None
    without chunks). ``reading``, when given, replaces the four settings before it."""
    reading = reading or Reading(truncation, max_length, stride, max_chunks)
    run = {"batch_size": batch_size, "normalize": normalize, "progress": progress,
           "precision": precision, "reading": reading}
    if reading.chunks:
        return embed_windows(enc, texts, **run)
    return (*embed_texts(enc, texts, **run), None)


def embed(frame, model: str | None = None, *, batch_size: int = 32,
          max_length: int | None = None, truncation: str = DEFAULT_TRUNCATION,
          normalize: bool = False, device: str = "auto", quiet: bool = False,
          backend: str = "torch", quantize: str = "none", stride: int | None = None,
          max_chunks: int | None = None, precision: str = DEFAULT_PRECISION) -> np.ndarray:
    """Mean-pooled document embeddings.

    Args:
        frame: a corpus frame (``doc_id``, ``text``, ...), a DataFrame with a ``text`` column,
            or a list of strings.
        model: hub id or local folder (default: the bundled all-MiniLM-L6-v2).
        batch_size: documents per forward pass at most (32); batches are length-sorted and hold
            at most :data:`quantformer.models.batching.MAX_TOKENS` padded tokens.
        max_length: token limit, special tokens included (default: the model's
            sentence-transformers ``max_seq_length``, 256 for the default model, else 512);
            with chunks the tokens of each window.
        truncation: ``head_tail`` (default; Wankmüller 2022 section 6.3), ``head``, ``tail``
            or ``chunks``: every document read whole in overlapping windows, its embedding the
            mean of its windows' embeddings (:func:`embed_windows`).
        normalize: unit-length vectors (what sentence-transformers' all-MiniLM-L6-v2 returns).
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        quiet: no progress bar.
        backend: ``torch`` (default) or ``onnx`` (ONNX Runtime; the bundled model's export is
            cached in ``$XDG_CACHE_HOME/quantformer``, see :mod:`quantformer.models.onnx.backend`).
        quantize: ``none`` (default) or ``int8`` (onnx only).
        stride: chunks only: tokens shared by neighbouring windows (int; default a quarter of
            the window).
        max_chunks: chunks only: the first windows kept per document at most (int >= 1;
            default all; a warning counts the documents with more).
        precision: torch backend: ``auto`` (default: bf16 autocast where the CPU has AMX or
            AVX-512 BF16 or the GPU supports bf16, else fp32), ``fp32`` or ``bf16``
            (:mod:`quantformer.models.precision`); with chunks every window runs in it.
            Embeddings have no labels to recheck: bf16
            vectors keep a cosine similarity with fp32's of at least 0.99997 with the bundled
            all-MiniLM-L6-v2 and above 0.99 with tiny random models (40 toy documents,
            ``tests/python/infer/test_precision_verbs.py``), but their values depend a
            little on the batch (sums in bf16); ``fp32`` is the reproducible choice. The
            ``backend`` column (and the CLI's record ``OUT.json``) names the precision used.

    Returns:
        float32 array of shape (n_docs, hidden), rows in input order; missing or empty texts
        give rows of NaN (counted in a warning). The ``embed`` verb also prints how many
        documents were truncated.

    Raises:
        InputError: bad model, device, truncation, ``max_length``, ``stride``,
            ``max_chunks`` or ``precision``; ``precision`` bf16 with ``backend`` onnx.
    """
    vecs, _ = _embed(frame, model, batch_size=batch_size, max_length=max_length,
                     truncation=truncation, normalize=normalize, device=device, quiet=quiet,
                     backend=backend, quantize=quantize, stride=stride, max_chunks=max_chunks,
                     precision=precision)
    return vecs


def _embed(frame, model, *, batch_size, max_length, truncation, normalize, device, quiet,
           backend="torch", quantize="none", stride=None, max_chunks=None,
           precision=DEFAULT_PRECISION):
    asked = check_reading_request(Reading(truncation, DEFAULT_MAX_LENGTH, stride, max_chunks))
    check_with_backend(check_precision(precision), backend, quantize)
    check_arguments(batch_size=batch_size)
    frame = as_frame(frame)
    enc = load_encoder(model, device, backend, quantize)
    reading = asked.replace(max_length=check_length(enc, max_length))
    chosen = encoder_precision(enc, precision)
    vecs, encoded, _ = embed_any(enc, frame["text"].tolist(), reading=reading,
                                 batch_size=batch_size, normalize=normalize,
                                 progress=not quiet, precision=chosen)
    missing_warning(int(encoded.missing.sum()), len(frame), "an embedding of NaN")
    info = {"model": model, "max_length": reading.max_length, "truncation": truncation,
            "normalize": normalize, "n_docs": len(frame),
            "n_missing": int(encoded.missing.sum()),
            "n_truncated": int(encoded.truncated.sum()), "hidden": int(vecs.shape[1]),
            "backend": backend_label(enc, chosen), "precision": precision_record(enc, chosen)}
    return vecs, info


def embed_file(input_path, out_path, model: str | None = None, *, text_col: str | None = None,
               id_col: str | None = None, fmt: str | None = None, quoting: str = "auto",
               batch_size: int = 32, max_length: int | None = None,
               truncation: str = DEFAULT_TRUNCATION, normalize: bool = False,
               layout: str = "auto",
               keep_text: bool = False, device: str = "auto", quiet: bool = False,
               backend: str = "torch", quantize: str = "none", stride: int | None = None,
               max_chunks: int | None = None, chunks_out=None,
               precision: str = DEFAULT_PRECISION) -> dict:
    """Embed a corpus file into an output file, :data:`CHUNK_ROWS` documents at a time (memory
    stays flat for large corpora), through one encoder.

    Args:
        text_col, id_col, fmt, quoting: how the input is read
            (:func:`quantformer.io.frames.iter_frames`).
        layout: ``auto``, ``list`` or ``wide`` (:func:`resolve_layout`); the other arguments
            as in :func:`embed` and :func:`embedding_frame`.
        chunks_out: with ``truncation="chunks"``, a second output file with one row per
            window (:func:`window_embedding_frame`; ``layout`` resolved for that file).

    Returns:
        ``{"n_docs", "n_missing", "n_truncated", "hidden", "max_length", "n_windows",
        "precision"}`` (``n_truncated`` with chunks: documents whose windows ``max_chunks``
        dropped; ``precision``: the precision used and why, as ``precision``, ``requested``
        and ``reason``; the rows' ``backend`` column says ``torch``, ``torch bf16``,
        ``onnx fp32`` or ``onnx int8``).

    Raises:
        InputError: bad input file, output path, layout, truncation, window settings, model,
            ``max_length`` or ``precision``.
    """
    check_output_file(out_path)
    asked = check_reading_request(Reading(truncation, DEFAULT_MAX_LENGTH, stride, max_chunks),
                                  chunks_out)
    win_layout = resolve_layout(layout, chunks_out) if chunks_out else None
    layout = resolve_layout(layout, out_path)
    check_with_backend(check_precision(precision), backend, quantize)
    chunks = iter_frames(input_path, chunk_rows=CHUNK_ROWS, text_col=text_col, id_col=id_col,
                         fmt=fmt, quoting=quoting)
    first = next(chunks)  # input errors surface before the model loads
    enc = load_encoder(model, device, backend, quantize)
    reading = asked.replace(max_length=check_length(enc, max_length))
    chosen = encoder_precision(enc, precision)
    label = backend_label(enc, chosen)
    counts = {"n_docs": 0, "n_missing": 0, "n_truncated": 0, "n_windows": 0}
    with FrameWriter(out_path) as writer, contextlib.ExitStack() as stack:
        windows = stack.enter_context(FrameWriter(chunks_out)) if chunks_out else None
        for chunk in itertools.chain([first], chunks):
            vecs, encoded, win_vecs = embed_any(
                enc, chunk["text"].tolist(), reading=reading, batch_size=batch_size,
                normalize=normalize, progress=not quiet, precision=chosen)
            writer.write(embedding_frame(chunk, vecs, layout, keep_text=keep_text,
                                         backend=label))
            if windows is not None:
                windows.write(window_embedding_frame(chunk, encoded, win_vecs, win_layout))
            _add_counts(counts, chunk, encoded, win_vecs)
    missing_warning(counts["n_missing"], counts["n_docs"], "a null embedding"
                    if layout == "list" else "NaN in every dim_ column")
    return {**counts, "hidden": int(vecs.shape[1]), "max_length": reading.max_length,
            "precision": precision_record(enc, chosen)}


def _add_counts(counts: dict, chunk: pd.DataFrame, encoded, win_vecs) -> None:
    counts["n_docs"] += len(chunk)
    counts["n_missing"] += int(encoded.missing.sum())
    counts["n_truncated"] += int(encoded.truncated.sum())
    counts["n_windows"] += 0 if win_vecs is None else len(win_vecs)
