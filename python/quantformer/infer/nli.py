"""A fine-tuned NLI model as a classifier: each class is a hypothesis, and the class
probabilities are a softmax of the entailment logits across the classes' hypotheses (Laurer et
al. 2023, "Less Annotating, More Classifying"). Training is :mod:`quantformer.train.nli`."""

from __future__ import annotations

import os

import numpy as np

from .._core.errors import ModelDirError
from ..io.modeldir import read_record
from ..models.hub import resolve_device
from ..models.onnx.backend import open_model
from ..models.reading import DEFAULT_TRUNCATION
from ..models.tokenize import (
    CHUNKS,
    DEFAULT_MAX_LENGTH,
    count_subwords,
    is_missing,
    special_template,
)
from .chunked import chunking_of
from .classifier import Classifier, _load_torch
from .zeroshot_nli import _logits, nli_pair_logits, nli_probabilities, nli_window_logits

METHOD = "nli"


class NLIClassifier(Classifier):
    """A fine-tuned NLI model used as a classifier: each class is a hypothesis.

    Same interface as :class:`~quantformer.infer.classifier.Classifier`; ``predict`` writes
    ``predicted`` and ``prob_<class>`` (softmax of the entailment logits across classes).

    Attributes:
        hypothesis: the template with one ``{}``.
        phrases: the label phrase of each class, in :attr:`labels` order.
        entailment_id, contradiction_id: the NLI head's outputs used.
    """

    def __init__(self, model, tokenizer, labels, *, hypothesis: str, phrases: list,
                 entailment_id: int, contradiction_id: int, max_length: int = DEFAULT_MAX_LENGTH,
                 truncation: str = DEFAULT_TRUNCATION, device: str = "cpu",
                 record: dict | None = None):
        self.hypothesis = hypothesis
        self.phrases = [str(p) for p in phrases]
        self.entailment_id, self.contradiction_id = int(entailment_id), int(contradiction_id)
        super().__init__(model, tokenizer, labels, max_length=max_length, truncation=truncation,
                         device=device, record=record)

    @classmethod
    def from_dir(cls, path: str | os.PathLike, device: str = "auto", backend: str = "torch",
                 quantize: str = "none", record: dict | None = None) -> NLIClassifier:
        """Load a model directory written by :func:`nli_finetune` (torch or ONNX Runtime).

        Raises:
            ModelDirError: missing record fields, or model files that cannot be loaded.
        """
        record = read_record(path) if record is None else record
        missing = [k for k in ("hypothesis", "label_phrases", "entailment_id",
                               "contradiction_id") if k not in record]
        if missing:
            raise ModelDirError(f"'{path}' is not a complete NLI model directory: its "
                                f"quantformer.json lacks {', '.join(missing)}; fine-tune again")
        if backend == "onnx":
            net = open_model(str(path), use="logits", fn=_logits, loader=_load_torch,
                             quantize=quantize)
            tokenizer, dev = net.tokenizer, "cpu"
        else:
            dev = resolve_device(device)
            net, tokenizer = _load_torch(path)
            net = net.to(dev)
        hp = record.get("hyperparameters", {})
        clf = cls(net, tokenizer, record["labels"], hypothesis=record["hypothesis"],
                  phrases=[record["label_phrases"][c] for c in record["labels"]],
                  entailment_id=record["entailment_id"],
                  contradiction_id=record["contradiction_id"],
                  max_length=hp.get("max_length", DEFAULT_MAX_LENGTH),
                  truncation=hp.get("truncation", DEFAULT_TRUNCATION), device=dev, record=record)
        stride, max_chunks, aggregate = chunking_of(hp)
        clf.reading = clf.reading.replace(stride=stride, max_chunks=max_chunks,
                                          aggregate=aggregate)
        return clf

    def hypotheses(self) -> list[str]:
        """The filled hypothesis of each class, in :attr:`labels` order."""
        return [self.hypothesis.format(p) for p in self.phrases]

    def _proba(self, texts: list, batch_size: int, progress: bool,
               counts: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Class probabilities (NaN rows for missing texts) and the missing mask; batches hold
        ``batch_size`` (document, hypothesis) pairs."""
        if self.truncation == CHUNKS:
            return self._proba_windows_nli(texts, batch_size, progress, counts)
        missing = np.array([is_missing(t) for t in texts], dtype=bool)
        present = np.flatnonzero(~missing)
        probs = np.full((len(texts), len(self.labels)), np.nan, dtype=np.float64)
        if present.size:
            logits, truncated = nli_pair_logits(
                self.model, self.tokenizer, [texts[i] for i in present], self.hypotheses(),
                max_length=self.max_length, truncation=self.truncation, batch_size=batch_size,
                device=self.device, progress=progress, desc="predicting (NLI)")
            probs[present] = nli_probabilities(logits, self.entailment_id,
                                               self.contradiction_id)
            if counts is not None:
                counts["truncated"] = counts.get("truncated", 0) + int(truncated.sum())
        return probs, missing

    def _proba_windows_nli(self, texts: list, batch_size: int, progress,
                           counts: dict | None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_proba` of documents read in windows (``truncation="chunks"``): every window
        paired with each class's hypothesis, the entailment logits aggregated per document
        and class (:func:`quantformer.infer.zeroshot_nli.nli_window_logits`), then the softmax
        across classes. ``counts`` receives ``dropped`` and ``windows`` (each window's own
        probabilities) as :meth:`Classifier._proba_windows` does."""
        logits, win, win_logits = nli_window_logits(
            self.model, self.tokenizer, texts, self.hypotheses(), max_length=self.max_length,
            stride=self.stride, max_chunks=self.max_chunks, aggregate=self.aggregate,
            batch_size=batch_size, device=self.device, progress=progress,
            desc="predicting (NLI)")
        probs = np.full((len(texts), len(self.labels)), np.nan, dtype=np.float64)
        keep = win.n_windows > 0
        if keep.any():
            probs[keep] = nli_probabilities(logits[keep], self.entailment_id,
                                            self.contradiction_id)
        if counts is not None:
            counts["dropped"] = counts.get("dropped", 0) + int(win.truncated.sum())
            counts["windows"] = (win, nli_probabilities(win_logits, self.entailment_id,
                                                        self.contradiction_id))
        return probs, win.missing

    def window_budget(self) -> int:
        """Premise tokens of one window: :attr:`max_length` less the pair's special tokens
        and the longest class hypothesis (never cut)."""
        tpl = special_template(self.tokenizer)
        return (self.max_length - tpl.n_pair
                - max(count_subwords(self.tokenizer, self.hypotheses())))
