"""Prediction with fine-tuned classifiers: in memory and streamed over large corpus files.

:class:`Classifier` wraps a sequence-classification model, its tokenizer and its label order.
Prediction tokenises with the model's truncation (head+tail by default, Wankmüller 2022 section
6.3), runs length-sorted batches with dynamic padding under ``torch.inference_mode()``
(:mod:`quantformer.models.batching`) and returns rows in input order. Missing or empty texts are kept:
their ``predicted`` is missing, their probabilities NaN, and a warning counts them.

:func:`predict_file` reads the input in record batches (Parquet row groups, CSV chunks) and
appends to the output as it goes, so memory does not grow with the corpus.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError, ModelDirError
from ..io.modeldir import hf_quiet, read_record, write_model_dir
from ..models.batching import run_batches
from ..models.hub import load_network, load_tokenizer, resolve_device
from ..models.onnx import recheck as onnx_recheck
from ..models.onnx.backend import check_backend, open_model
from ..models.onnx.recheck import RECHECK_LABEL, Recheck, check_margin
from ..models.precision import (DEFAULT_PRECISION, TorchPrecision, check_with_backend,
                                 torch_precision)
from ..models.chunks import aggregate_windows
from ..models.reading import DEFAULT_MAX_LENGTH, DEFAULT_TRUNCATION, Reading
from ..models.tasks import Classification, from_record
from ..models.template import special_template
from ..models.tokenize import encode_reading, warn_truncated
from ..models.windows import Windows, dropped_counted, warn_dropped
from .chunked import window_frame

CHUNK_ROWS = 4096


class PredictionWarning(UserWarning):
    """Documents that got no prediction (missing or empty texts)."""


def _is_longformer(config) -> bool:
    return getattr(config, "model_type", "") in ("longformer", "led")


def global_attention_hook(config):
    """Batch hook that puts global attention on the first token for Longformer models, else None.

    Longformer classifies from the first token, which must see the whole document
    (Beltagy et al. 2020); other models need nothing.
    """
    if not _is_longformer(config):
        return None

    def hook(batch: dict) -> dict:
        import torch

        g = torch.zeros_like(batch["attention_mask"])
        g[:, 0] = 1
        batch["global_attention_mask"] = g
        return batch

    return hook


def warn_missing(n_missing: int, n: int) -> None:
    """Warn that ``n_missing`` of ``n`` documents had no text and got no prediction."""
    if n_missing:
        warnings.warn(
            f"{n_missing} of {n} document(s) have a missing or empty text; they are kept with a "
            "missing prediction",
            PredictionWarning,
            stacklevel=3,
        )


def softmax_logits(model, batch):
    """Class probabilities of one padded batch: softmax of the logits (what is exported)."""
    import torch

    return torch.softmax(model(**batch).logits.float(), dim=-1)


def window_logits(model, batch):
    """The logits of one padded batch (windows, aggregated after the forward pass)."""
    return model(**batch).logits.float()


def _load_torch(path):
    """(sequence-classification model in eval mode, fast tokenizer) of a model directory.

    Raises:
        ModelDirError: the weights or tokenizer files are missing or damaged.
    """
    try:
        with hf_quiet():
            tok = load_tokenizer(str(path))
            model = load_network(path, "classification")
    except Exception as exc:  # weights or tokenizer files missing, truncated or damaged
        # (OSError, ValueError, safetensors' SafetensorError, tokenizers' exceptions...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelDirError(
            f"'{path}' has a completion record but its model files cannot be loaded "
            f"({first}); the folder was changed after training. Fine-tune again, or copy "
            "the whole folder again"
        ) from exc
    return model.eval(), tok


class Classifier:
    """A fine-tuned sequence classifier: model, tokenizer and label order.

    Attributes:
        labels: class labels as strings, in the order of the model's outputs.
        model: the ``transformers`` ``...ForSequenceClassification`` module (eval mode).
        tokenizer: its fast tokenizer.
        device: torch device string the model is on.
        reading: how documents are read at prediction (as at training, from the record;
            :func:`quantformer.infer.chunked.with_chunking` changes it), a
            :class:`~quantformer.models.reading.Reading`: cut to ``max_length`` tokens by
            ``truncation``, or with ``truncation="chunks"`` read whole in windows
            (:mod:`quantformer.models.chunks`). ``max_length``, ``truncation``, ``stride``,
            ``max_chunks`` and ``aggregate`` are its fields, read here as read-only attributes
            too (``aggregate``: ``mean`` when none was given); to change one, replace the
            reading (``clf.reading = clf.reading.replace(stride=64)``).
        record: the ``quantformer.json`` record (training arguments, counts, versions).
    """

    def __init__(self, model, tokenizer, labels, *, max_length: int = DEFAULT_MAX_LENGTH,
                 truncation: str = DEFAULT_TRUNCATION, device: str = "cpu",
                 record: dict | None = None, task=None, reading: Reading | None = None):
        self.task = task if task is not None else Classification(labels)
        self.model = model
        self.tokenizer = tokenizer
        self.labels = [str(x) for x in labels]
        # reading, when given, replaces max_length and truncation
        self.reading = reading or Reading(truncation, int(max_length))
        self.device = device
        self.record = dict(record or {})
        self.recheck = None  # int8: the fp32 recheck of near ties (from_dir sets it)
        self.open_logits = None  # onnx: quantize -> the export of the logits (windows)
        self._logits_nets: dict = {}
        self.precision = TorchPrecision.fp32()  # bf16 autocast + fp32 recheck: from_dir sets it
        self.model.eval()

    # the reading's fields as read-only attributes: a change replaces the whole reading
    # (``clf.reading = clf.reading.replace(...)``)
    max_length = property(lambda self: self.reading.max_length,
                          doc="Tokens per document or window, special tokens included.")
    truncation = property(lambda self: self.reading.truncation,
                          doc="How long documents are read (``chunks``: in windows).")
    stride = property(lambda self: self.reading.stride,
                      doc="With chunks, tokens neighbouring windows share (None: default).")
    max_chunks = property(lambda self: self.reading.max_chunks,
                          doc="With chunks, the most windows read per document (None: all).")
    aggregate = property(lambda self: self.reading.aggregate_or_default,
                         doc="With chunks, how window logits are combined (``mean``, ``max``).")

    # ---------------------------------------------------------------------------------------

    @classmethod
    def from_dir(cls, path: str | os.PathLike, device: str = "auto", backend: str = "torch",
                 quantize: str = "none", recheck_margin: float | None = None,
                 precision: str = DEFAULT_PRECISION, record: dict | None = None) -> Classifier:
        """Load a model directory fine-tuned the standard way (every method:
        :func:`quantformer.infer.load.load_model`, ``quantformer.load``).

        Args:
            backend: ``torch`` or ``onnx`` (ONNX Runtime on the CPU; the export is cached in
                ``<path>/onnx/``, see :mod:`quantformer.models.onnx.backend`).
            quantize: ``none`` or ``int8`` (onnx only).
            recheck_margin: with ``int8``, documents whose int8 top-two probability margin is
                below this are predicted again in fp32 (float in [0, 1); None:
                :data:`quantformer.models.onnx.recheck.RECHECK_MARGIN`, 0.05; 0: pure int8).
            precision: torch backend: ``auto`` (default: bf16 where the hardware has it
                natively), ``fp32`` or ``bf16`` (autocast, near ties predicted again in fp32;
                :mod:`quantformer.models.precision`).

        Raises:
            ModelDirError: missing, incomplete, not a classifier, or its model files damaged.
            InputError: a bad backend/quantize/device combination, or a model ONNX cannot
                export (Longformer).
        """
        record = read_record(path) if record is None else record
        if record.get("method", "standard") != "standard":
            raise ModelDirError(f"'{path}' holds a model fine-tuned with method "
                                f"'{record.get('method')}'; load it with quantformer.load(path), "
                                "which knows every method")
        use_onnx = check_backend(backend, quantize, device) == "onnx"
        check_with_backend(precision, backend, quantize)
        if recheck_margin is not None:  # checked before an export that may take minutes

            if quantize != "int8":
                raise InputError("{recheck_margin} applies to quantize='int8' only; leave it "
                                 "out", params=["recheck_margin"])
            check_margin(recheck_margin)
        task = from_record(record)
        reading = Reading.from_record(record)
        if use_onnx:
            if task.name != "classification":
                raise InputError(f"{{backend}} onnx supports classification models only; "
                                 f"this is a {task.name} model: use {{backend}} torch",
                                 params=["backend"])
            net = open_model(str(path), use="proba", fn=softmax_logits, loader=_load_torch,
                             quantize=quantize)
            clf = cls(net, net.tokenizer, record["labels"], reading=reading, device="cpu",
                      record=record)
            if quantize == "int8":
                clf.recheck = _recheck(path, recheck_margin)
            clf.open_logits = lambda q: open_model(str(path), use="logits", fn=window_logits,
                                                   loader=_load_torch, quantize=q)
            return clf

        dev = resolve_device(device)
        chosen = torch_precision(precision, dev, task.name)  # checked before the weights load
        model, tok = _load_torch(path)
        model = model.to(dev)
        clf = cls(model, tok, record["labels"], reading=reading, device=dev, record=record,
                  task=task)
        clf.precision = chosen
        return clf

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> Path:
        """Write the model directory (model, tokenizer, ``quantformer.json``, README.md).

        Raises:
            InputError: ``path`` exists and ``overwrite`` is False.
        """
        return write_model_dir(self.model, self.tokenizer, self.record, path,
                               overwrite=overwrite)

    def to(self, device: str) -> Classifier:
        """Move the model to ``device`` (``auto``, ``cpu``, ``cuda``, ``mps``); returns self."""
        self.device = resolve_device(device)
        self.model.to(self.device)
        return self

    def __repr__(self) -> str:
        return (f"Classifier(task={self.task.name!r}, labels={self.labels}, model={self.record.get('model')!r}, "
                f"max_length={self.max_length}, device={self.device!r})")

    # ---------------------------------------------------------------------------------------

    def _texts(self, frame_or_texts) -> list:
        if isinstance(frame_or_texts, pd.DataFrame):
            if "text" not in frame_or_texts.columns:
                raise InputError("the frame has no 'text' column; read it with "
                                 "quantformer.read_frame or name the text column")
            return frame_or_texts["text"].tolist()
        if isinstance(frame_or_texts, str):
            return [frame_or_texts]
        return list(frame_or_texts)

    def reads_windows(self) -> bool:
        """Whether this classifier can read documents in windows (``truncation="chunks"``):
        standard (window logits aggregated), NLI (window-hypothesis entailment logits
        aggregated) and SetFit (window embeddings averaged into the head)."""
        return True

    def window_budget(self) -> int:
        """Content tokens of one window at :attr:`max_length` (special tokens taken off)."""
        return self.max_length - special_template(self.tokenizer).n_single

    def encoded(self, texts: list):
        """The documents tokenised as :meth:`_proba` tokenises them (an
        :class:`~quantformer.models.tokenize.Encoded`), or None for a subclass that tokenises
        in its own way (NLI pairs, SetFit): for tokenising ahead, in another thread, of the
        forward passes (:mod:`quantformer.infer.pipeline`)."""
        if type(self)._proba is not Classifier._proba:
            return None
        return encode_reading(self.tokenizer, texts, self.reading)

    def _proba(self, texts: list, batch_size: int, progress: bool,
               counts: dict | None = None, model=None,
               cast: bool = True, enc=None) -> tuple[np.ndarray, np.ndarray]:
        model = self.model if model is None else model

        # an ONNX model's config is config.json alone (classifiers only: one column a label)
        k = getattr(self.model.config, "num_labels", None) or len(self.labels)
        if enc is None:
            enc = self.encoded(texts)
        if isinstance(enc, Windows):
            return self._proba_windows(enc, k, batch_size, progress, counts, model, cast)
        if counts is not None:  # adds up the documents cut, for warn_truncated
            counts["truncated"] = counts.get("truncated", 0) + int(enc.truncated.sum())
        probs = np.full((len(texts), k), np.nan, dtype=np.float64)
        keep = np.flatnonzero(~enc.missing)
        if keep.size:
            ids = [enc.input_ids[i] for i in keep]
            types = [enc.token_type_ids[i] for i in keep] if enc.token_type_ids else None
            with self.precision.context(self.device, cast and model is self.model):
                out = run_batches(
                    model, ids, types,
                    fn=lambda m, b: self.task.activation(m(**b).logits.float()),
                    batch_size=batch_size, device=self.device,
                    pad_id=self.tokenizer.pad_token_id or 0,
                    extra=global_attention_hook(model.config), progress=progress,
                )
            probs[keep] = out
        return probs, enc.missing

    def _proba_windows(self, enc: Windows, k: int, batch_size: int, progress, counts,
                       model, cast: bool) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_proba` of documents read in windows: every window of every document in
        length-sorted batches, the window logits aggregated per document
        (:func:`quantformer.models.chunks.aggregate_windows`), then the task's activation.
        ``counts`` receives ``dropped`` (documents cut by ``max_chunks``) and ``windows``
        (the last call's :class:`Windows` and its per-window outputs, for ``chunks_out``)."""
        import torch

        n = len(enc.missing)
        probs = np.full((n, k), np.nan, dtype=np.float64)
        if len(enc.input_ids):
            bar = progress if not hasattr(progress, "update") else False
            with self.precision.context(self.device, cast and model is self.model):
                logits = run_batches(
                    self._logits_model(model), enc.input_ids, enc.token_type_ids,
                    fn=window_logits, batch_size=batch_size,
                    device=self.device, pad_id=self.tokenizer.pad_token_id or 0,
                    progress=bar)
            agg = aggregate_windows(logits, enc.doc, n, self.aggregate)
            keep = enc.n_windows > 0
            act = self.task.activation
            probs[keep] = act(torch.from_numpy(agg[keep])).double().numpy()
            if counts is not None:
                counts["windows"] = (enc, act(torch.from_numpy(logits)).double().numpy())
        if hasattr(progress, "update"):
            progress.update(int((~enc.missing).sum()))
        if counts is not None:
            counts["dropped"] = counts.get("dropped", 0) + int(enc.truncated.sum())
        return probs, enc.missing

    def _logits_model(self, model):
        """The network that gives window logits: ``model`` itself on torch; for an ONNX
        export of probabilities (``proba``), the export of the logits of the same
        quantization (opened once, on first use)."""
        if getattr(model, "backend", "torch") != "onnx":
            return model
        quantize = "int8" if model.label.endswith("int8") else "none"
        if quantize not in self._logits_nets:
            self._logits_nets[quantize] = self.open_logits(quantize)
        return self._logits_nets[quantize]

    def window_rows(self, frame: pd.DataFrame, counts: dict) -> pd.DataFrame:
        """One row per window of the documents last scored into ``counts`` (doc_id, chunk,
        start, end in characters, then the task's columns for the window alone)."""
        enc, probs = counts.pop("windows", (None, None))
        return window_frame(frame, enc, probs, self.task)

    def scored(self, texts: list, batch_size: int, progress: bool, counts: dict | None = None,
               enc=None):
        """(probabilities, missing mask, rechecked mask or None): :meth:`_proba`, then for
        int8 the fp32 recheck of near ties (:mod:`quantformer.models.onnx.recheck`), for
        bf16 that of :mod:`quantformer.models.precision`. ``enc``: the texts already tokenised
        by :meth:`encoded` (None: tokenised here)."""
        ahead = {} if enc is None else {"enc": enc}
        probs, missing = self._proba(texts, batch_size, progress, counts, **ahead)
        if self.recheck is None:
            return probs, missing, self.precision.recheck(
                lambda t: self._proba(t, batch_size, False, cast=False)[0], texts, probs)
        return probs, missing, self.recheck(
            lambda m, t: self._proba(t, batch_size, False, model=m)[0], texts, probs)

    def predict_proba(self, frame_or_texts, batch_size: int = 64,
                      progress: bool = False) -> np.ndarray:
        """Class probabilities (softmax of the logits).

        Args:
            frame_or_texts: a corpus frame (its ``text`` column) or a sequence of str/None.
            batch_size: documents per forward pass at most (default 64; long documents go
                in smaller batches, :data:`quantformer.models.batching.MAX_TOKENS`).
            progress: show a tqdm bar.

        Returns:
            float64 array of shape (n, len(labels)), columns in :attr:`labels` order; rows of
            NaN for missing or empty texts.
        """
        texts = self._texts(frame_or_texts)
        counts: dict = {}
        with dropped_counted():
            probs, missing, _ = self.scored(texts, batch_size, progress, counts)
        warn_missing(int(missing.sum()), len(texts))
        self.warn_truncated(counts, len(texts))
        return probs

    def predict(self, frame, batch_size: int = 64, keep_text: bool = False,
                progress: bool = False, warn: bool = True) -> pd.DataFrame:
        """Predict a corpus frame.

        Args:
            frame: a corpus frame (``doc_id``, ``text``, docvars) or a sequence of texts.
            batch_size: documents per forward pass at most (default 64; long documents go
                in smaller batches, :data:`quantformer.models.batching.MAX_TOKENS`).
            keep_text: keep the ``text`` column in the output.
            progress: show a tqdm bar.
            warn: warn when documents have missing or empty texts, were truncated to
                :attr:`max_length` tokens (how many; :func:`quantformer.models.tokenize.token_stats`
                says which) or, with chunks, had windows over ``max_chunks``.

        Returns:
            A frame in input row order: ``doc_id``, the docvars (a ``label`` column included),
            [``text``], ``predicted`` (label string; missing for missing/empty texts),
            ``prob_<label>`` per class, ``backend`` (``torch``, ``onnx fp32``, ``onnx int8``
            or, for int8 rows predicted again in fp32, ``onnx fp32 recheck``: which backend
            produced each row, issue 16).
        """
        if not isinstance(frame, pd.DataFrame):
            texts = self._texts(frame)
            frame = pd.DataFrame({"doc_id": [f"text{i + 1}" for i in range(len(texts))],
                                  "text": texts})
        counts: dict = {}
        texts = self._texts(frame)
        with dropped_counted():
            probs, missing, rechecked = self.scored(texts, batch_size, progress, counts)
        if warn:
            warn_missing(int(missing.sum()), len(frame))
            self.warn_truncated(counts, len(frame))
        return self.output_frame(frame, probs, missing, keep_text, rechecked)

    def warn_truncated(self, counts: dict, n: int) -> None:
        """One warning for the ``n`` documents scored into ``counts``: those cut to
        :attr:`max_length` tokens, or with chunks those with windows over ``max_chunks``."""
        if self.reading.chunks:
            if counts.get("dropped"):
                warn_dropped(counts["dropped"], n, self.max_chunks, stacklevel=3)
            return
        warn_truncated(counts.get("truncated", 0), n, self.max_length, self.truncation)

    def output_frame(self, frame: pd.DataFrame, probs: np.ndarray, missing: np.ndarray,
                keep_text: bool, rechecked: np.ndarray | None = None) -> pd.DataFrame:
        out = {"doc_id": frame["doc_id"].to_numpy()}
        for c in frame.columns:
            if c == "doc_id" or (c == "text" and not keep_text):
                continue
            out[c] = frame[c].to_numpy()
        out.update(self.task.columns(probs, missing))
        # which backend produced each row (issue 16): torch, onnx fp32 or onnx int8
        onnx = getattr(self.model, "backend", "torch") == "onnx"
        if not onnx:  # bf16 rows predicted again in fp32 are marked
            out["backend"] = self.precision.backend_column(len(frame), rechecked)
        elif rechecked is None:
            out["backend"] = self.model.label
        else:  # int8 rows predicted again in fp32
            out["backend"] = np.where(rechecked, RECHECK_LABEL, self.model.label)
        return pd.DataFrame(out, index=pd.RangeIndex(len(frame)))


def _recheck(path, margin):
    """The fp32 recheck of an int8 classifier (:class:`quantformer.models.onnx.recheck.Recheck`)."""
    return Recheck(onnx_recheck.RECHECK_MARGIN if margin is None else margin,
                   lambda: open_model(str(path), use="proba", fn=softmax_logits,
                                      loader=_load_torch, quantize="none"))
