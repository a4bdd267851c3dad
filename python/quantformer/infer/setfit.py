"""A SetFit model as a classifier: a sentence-transformer body (mean pooling) and a
logistic-regression head stored as plain numbers in ``head.json`` (Tunstall et al. 2022,
"Efficient Few-Shot Learning Without Prompts"). Training is :mod:`quantformer.train.setfit`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from .._core.errors import ModelDirError
from ..io.modeldir import RECORD, read_record, write_model_dir
from .chunked import chunking_of
from .classifier import Classifier
from ..models.reading import BODY_TRUNCATION, CHUNKS
from .embed import embed_any, load_encoder

HEAD_FILE = "head.json"


class SetFitClassifier(Classifier):
    """A SetFit model: sentence-transformer body (mean pooling, optional unit length) and a
    logistic-regression head. Same interface as :class:`~quantformer.infer.classifier.Classifier`.

    Attributes:
        coef, intercept: the head's weights, (k, hidden) and (k,), or (1, hidden) and (1,)
            for two classes (a logistic instead of a softmax).
        normalize: whether the body's embeddings are scaled to unit length before the head.
    """

    def __init__(self, encoder, coef, intercept, labels, *, normalize: bool, max_length: int,
                 truncation: str = BODY_TRUNCATION, record: dict | None = None):
        self.encoder = encoder
        self.coef = np.asarray(coef, dtype=np.float64)
        self.intercept = np.asarray(intercept, dtype=np.float64)
        self.normalize = bool(normalize)
        super().__init__(encoder.model, encoder.tokenizer, labels, max_length=max_length,
                         truncation=truncation, device=encoder.device, record=record)

    @classmethod
    def from_dir(cls, path: str | os.PathLike, device: str = "auto",
                 record: dict | None = None) -> SetFitClassifier:
        """Load a SetFit model directory written by :func:`setfit_finetune`.

        Raises:
            ModelDirError: missing or damaged record, head or body files.
        """
        record = read_record(path) if record is None else record
        head = read_head(Path(path))
        try:
            encoder = load_encoder(str(path), device)
        except Exception as exc:
            raise ModelDirError(f"the SetFit body in '{path}' cannot be loaded ({exc}); "
                                "fine-tune again") from exc
        hp = record.get("hyperparameters", {})
        clf = cls(encoder, head["coef"], head["intercept"], record["labels"],
                  normalize=head["normalize"], max_length=hp.get("max_length", 256),
                  truncation=hp.get("truncation", BODY_TRUNCATION), record=record)
        stride, max_chunks, aggregate = chunking_of(hp)
        clf.reading = clf.reading.replace(stride=stride, max_chunks=max_chunks,
                                          aggregate=aggregate)
        return clf

    def to(self, device: str) -> SetFitClassifier:
        super().to(device)
        self.encoder.device = self.device
        return self

    def _proba(self, texts: list, batch_size: int, progress: bool, counts: dict | None = None):
        """Class probabilities of texts (NaN rows for missing texts) and the missing mask;
        ``counts["truncated"]`` adds up the documents cut (as :meth:`Classifier._proba`).

        With ``truncation="chunks"`` a document's embedding is the mean of its windows'
        (:func:`quantformer.infer.embed.embed_windows`, unit length again when the head was
        trained on unit vectors), which goes into the logistic head; ``counts`` then receives
        ``dropped`` and ``windows`` (each window's own probabilities from the head), as
        :meth:`Classifier._proba_windows` does."""
        chunks = self.truncation == CHUNKS
        bar = progress if hasattr(progress, "update") else None
        vecs, encoded, win_vecs = embed_any(
            self.encoder, texts, max_length=self.max_length, truncation=self.truncation,
            stride=self.stride, max_chunks=self.max_chunks, batch_size=batch_size,
            normalize=self.normalize, progress=False if chunks and bar else progress)
        if chunks and bar is not None:
            bar.update(int((~encoded.missing).sum()))
        if counts is not None:
            key = "dropped" if chunks else "truncated"
            counts[key] = counts.get(key, 0) + int(encoded.truncated.sum())
            if chunks:
                counts["windows"] = (encoded, head_proba(win_vecs.astype(np.float64),
                                                         self.coef, self.intercept))
        return head_proba(vecs.astype(np.float64), self.coef, self.intercept), encoded.missing

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> Path:
        """Write the model directory atomically (see the module docstring)."""
        files = _DirFiles(self.encoder, self.coef, self.intercept, self.labels, self.normalize)
        return write_model_dir(files, files, self.record, path, overwrite=overwrite)


def head_proba(vectors: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """scikit-learn ``LogisticRegression.predict_proba`` from its weights: a softmax over
    ``X W' + b`` for three or more classes, a logistic for two (rows of NaN stay NaN)."""
    z = vectors @ coef.T + intercept
    if coef.shape[0] == 1:
        p1 = 1.0 / (1.0 + np.exp(-z[:, 0]))
        return np.column_stack([1.0 - p1, p1])
    e = np.exp(z - np.max(np.nan_to_num(z, nan=0.0), axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def read_head(path: Path) -> dict:
    """The head of a SetFit model directory (``head.json``).

    Raises:
        ModelDirError: the file is missing or not a head.
    """
    try:
        head = json.loads((path / HEAD_FILE).read_text(encoding="utf-8"))
        np.asarray(head["coef"], dtype=float), np.asarray(head["intercept"], dtype=float)
        return head
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelDirError(f"'{path}' has no valid {HEAD_FILE} (the SetFit head); fine-tune "
                            "again") from exc


class _DirFiles:
    """What :func:`quantformer.io.modeldir.write_model_dir` saves for a SetFit model: the body as
    a sentence-transformers folder, its tokenizer, and ``head.json``."""

    def __init__(self, encoder, coef, intercept, labels, normalize):
        self.encoder, self.coef, self.intercept = encoder, coef, intercept
        self.labels, self.normalize = labels, normalize

    def save_pretrained(self, folder) -> None:
        folder = Path(folder)
        if (folder / HEAD_FILE).exists():
            return  # called a second time as the "tokenizer": already saved
        body = Path(self.encoder.path)
        if (body / "modules.json").is_file():
            _copy_tree(body, folder)  # sentence-transformers folder (body, pooling, tokenizer)
        else:
            self.encoder.model.save_pretrained(folder)
            self.encoder.tokenizer.save_pretrained(folder)
        (folder / HEAD_FILE).write_text(json.dumps({
            "labels": list(self.labels), "coef": self.coef.tolist(),
            "intercept": self.intercept.tolist(), "normalize": self.normalize,
            "head": "sklearn.linear_model.LogisticRegression"}), encoding="utf-8")


def _copy_tree(src: Path, dst: Path) -> None:
    for item in src.iterdir():
        if item.name in (RECORD, "README.md", HEAD_FILE):
            continue
        target = dst / item.name
        if item.is_dir():
            shutil.copytree(item, target, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target)
