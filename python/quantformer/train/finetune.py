"""Fine-tune a pretrained Transformer encoder as a document classifier or regression model:
the method switch.

``method="standard"`` is the recipe of Wankmüller (2022), section 6.4
(:mod:`quantformer.train.standard`); ``"nli"`` fine-tunes an NLI model on the classes written
as hypotheses (Laurer et al. 2023, :mod:`quantformer.train.nli`); ``"setfit"`` is few-shot
SetFit (Tunstall et al. 2022, :mod:`quantformer.train.setfit`).

Default learning rate and epochs depend on the model size (:func:`default_hyperparameters`):
the paper's 1e-5 to 3e-5 were chosen for BERT-base (768 hidden units); small models such as the
bundled all-MiniLM-L6-v2 (384) underfit with them and need a larger rate.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..models.hub import load_tokenizer
from ..models.reading import CHUNKS, DEFAULT_AGGREGATE, DEFAULT_TRUNCATION
from ..models.precision import DEFAULT_PRECISION
from ..models.tasks import TrainingWarning
from ..models.tokenize import special_template
from .arguments import (
    BATCH_SIZE,
    DEFAULT_VALID_FRACTION,
    DROPOUT,
    MAX_GRAD_NORM,
    SIZE_DEFAULTS,
    default_hyperparameters,
    model_size,
)
from .data import length_grouped_batches, oversample_indices, set_seed
from .nli import nli_finetune
from .setfit import finetune_fewshot
from .spec import TrainSpec
from .standard import finetune_standard

__all__ = ["finetune", "finetune_spec", "TrainSpec", "default_hyperparameters", "model_size", "oversample_indices",
           "length_grouped_batches", "set_seed", "TrainingWarning", "BATCH_SIZE", "DROPOUT",
           "MAX_GRAD_NORM", "SIZE_DEFAULTS", "DEFAULT_VALID_FRACTION"]


def finetune(
    frame: pd.DataFrame,
    *,
    model: str | None = None,
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int = BATCH_SIZE,
    max_length: int | None = None,
    truncation: str | None = None,
    oversample: float | None = None,
    valid: pd.DataFrame | None = None,
    valid_fraction: float = DEFAULT_VALID_FRACTION,
    labels: list[str] | None = None,
    seed: int = 1,
    device: str = "auto",
    quiet: bool = False,
    source: str | None = None,
    task: str = "classification",
    label_cols: list[str] | None = None,
    label_sep: str | None = None,
    tune_thresholds: bool = False,
    early_stopping: int | None = None,
    precision: str = DEFAULT_PRECISION,
    grad_accum: int = 1,
    method: str = "standard",
    hypothesis: str | None = None,
    label_phrases=None,
    nli_pairs: str = "balanced",
    setfit_iterations: int | None = None,
    stride: int | None = None,
    max_chunks: int | None = None,
    aggregate: str | None = None,
    chunk_training: str = "aggregate",
):
    """Fine-tune a pretrained encoder on labelled documents (Wankmüller 2022, section 6.4).

    Args:
        frame: corpus frame with ``text`` and ``label`` (for ``label_cols``: those columns).
            Rows with a missing label or text are left out (counted in the record).
        model: hub id or local folder; ``None`` = the bundled all-MiniLM-L6-v2.
        epochs, lr: default by model size, see :func:`default_hyperparameters`.
        batch_size: documents per forward pass (16, the paper's).
        max_length: tokens per document, special tokens included (``None``: 512; up to 4,096
            for Longformer models, whose first token gets global attention; SetFit: the
            sentence-transformer's own limit, 256 for the bundled model).
        truncation: ``head_tail`` (128 + 382 at 512, section 6.3), ``head``, ``tail`` or
            ``chunks`` (standard method only: each document read whole as overlapping windows
            of ``max_length`` tokens, the loss on the aggregate of its windows' logits; see
            :mod:`quantformer.train.chunks`) (``None``: ``head_tail``; SetFit: ``head``, as
            sentence-transformers cuts).
        oversample: minority:majority ratio for random oversampling of the training data
            (e.g. 0.25, the paper's); ``None`` for none. Classification only.
        valid: labelled validation frame: metrics per epoch, early stopping, thresholds.
        valid_fraction: share of ``frame`` held out (stratified for classification) as
            validation when ``valid`` is None; default 0 (all labelled documents train, as in
            the paper's fixed-epoch recipe). Ignored when ``valid`` is given.
        labels: class order (classification) or label order (multilabel with ``label_sep``);
            default the sorted distinct training labels (as strings).
        seed: fixes Python, NumPy, torch and the data order (identical CPU runs).
        device: ``auto`` (CUDA, else MPS, else CPU), ``cpu``, ``cuda``, ``mps``.
        quiet: no progress bars or messages.
        source: where the data came from (a file path), recorded in ``quantformer.json``.
        task: ``classification`` (default; numeric codes stay classes), ``regression`` (a
            numeric ``label``; MSE on standardised targets) or ``multilabel`` (several 0/1
            labels; binary cross-entropy), see :mod:`quantformer.models.tasks`.
        label_cols: multilabel: the 0/1 columns, one per label.
        label_sep: multilabel: the separator of labels in one ``label`` column (e.g. ``"|"``).
        tune_thresholds: multilabel: choose each label's threshold by F1 on the validation
            data (default: 0.5 for every label).
        early_stopping: stop after this many epochs without improvement of the validation
            metric (macro-F1, or RMSE for regression) and restore the best epoch's weights;
            needs ``valid`` or ``valid_fraction``. ``None``: train all epochs.
        precision: ``auto`` (bf16 autocast on CUDA devices that support it and on CPUs with
            AMX or AVX-512 BF16, fp16 with a gradient scaler on older CUDA devices, fp32 on
            other CPUs and MPS), ``fp32``, ``bf16``, ``fp16`` (CUDA only).
        grad_accum: optimisation step every ``grad_accum`` batches (effective batch size
            ``batch_size * grad_accum``).
        method: ``standard`` (this recipe) or ``setfit`` (few-shot: SetFit, Tunstall et al.
            2022, see :mod:`quantformer.train.setfit`; ``epochs``, ``lr`` and ``batch_size`` apply
            to its body, validation data and oversampling are refused) or ``nli`` (an NLI
            model fine-tuned on the classes written as hypotheses, Laurer et al. 2023, see
            :mod:`quantformer.train.nli`; classification only, no oversampling).
        hypothesis, label_phrases, nli_pairs: ``method="nli"`` only: the hypothesis template
            (one ``{}``), class -> label phrase (default: the class names) and the training
            pairs (``balanced`` or ``all``); see :func:`quantformer.train.nli.nli_finetune`.
        setfit_iterations: ``method="setfit"`` only: pairs drawn per training document and
            direction (setfit's ``num_iterations``; default 5, see :mod:`quantformer.train.setfit`).
        stride: ``truncation="chunks"``: tokens shared by neighbouring windows (int; default
            a quarter of the window's content); smaller than the window.
        max_chunks: ``truncation="chunks"``: the first windows kept per document at most
            (int >= 1; default all; a warning counts the documents that had more).
        aggregate: ``truncation="chunks"``: ``mean`` (None, the default) or ``max`` of the
            window logits (regression: of the outputs); recorded, so prediction uses it.
            Given without chunks, or with SetFit (which averages the windows' embeddings), it
            is an error.
        chunk_training: ``truncation="chunks"``: ``aggregate`` (default: the loss on the
            document's aggregate) or ``labels`` (each window a training example with its
            document's label).

    Returns:
        A :class:`quantformer.infer.classifier.Classifier` whose ``record`` holds the training record.

    Raises:
        InputError: no labelled documents, a single class (or one value only), a non-numeric
            regression label (named), a multilabel column that is not 0/1, non-positive
            epochs/lr/batch size, ``max_length`` above the model's limit, an unknown
            truncation, device, task or precision, a bad ``labels`` list or oversampling ratio,
            oversampling with regression/multilabel, early stopping without validation data,
            window settings without ``truncation="chunks"`` or bad ones (a ``stride`` not
            smaller than the window, ``max_chunks`` < 1, an unknown ``aggregate``), chunks with
            a Longformer or with the NLI or SetFit method.
    """
    settings = {k: v for k, v in locals().items() if k not in ("frame", "valid", "source")}
    spec = TrainSpec.from_keywords(**settings)
    return finetune_spec(frame, spec, valid=valid, source=source)


def finetune_spec(frame: pd.DataFrame, spec: TrainSpec, *, valid: pd.DataFrame | None = None,
                  source: str | None = None):
    """Fine-tune as ``spec`` says (checked, given its method's defaults, then handed to the
    method's recipe); :func:`finetune` with its settings as one value.

    Args:
        frame: corpus frame, as for :func:`finetune`.
        spec: the run's settings (:class:`~quantformer.train.spec.TrainSpec`).
        valid: labelled validation frame (default None).
        source: where the data came from, for the record (default None).

    Raises:
        InputError: as :func:`finetune`.
    """
    spec = spec.check().with_defaults()
    if spec.method != "standard" and spec.truncation == CHUNKS:
        return _windows_at_prediction(frame, spec, valid=valid, source=source)
    if spec.method == "nli" and spec.task == "classification":
        return nli_finetune(frame, spec, valid=valid, source=source)
    if spec.method != "standard":  # few-shot: quantformer.train.setfit
        return finetune_fewshot(frame, spec, valid=valid, source=source)
    return finetune_standard(frame, spec, valid=valid, source=source)


def _windows_at_prediction(frame: pd.DataFrame, spec: TrainSpec, *, valid, source):
    """SetFit and NLI with ``truncation="chunks"``: their recipes train on single inputs
    (SetFit's contrastive pairs of documents, NLI's premise-hypothesis pairs), so each training
    document is cut by head+tail (Wankmüller 2022, section 6.3) and the windows are read at
    prediction (SetFit: the mean of the windows' embeddings into the head; NLI: the aggregate
    of the windows' entailment logits). The record says so: ``truncation`` ``chunks`` with
    ``chunk_training`` ``head_tail``, and the validation scores are those of the head+tail
    inputs."""
    _check_stride(spec)
    r = spec.reading
    cut = replace(spec, reading=r.replace(truncation=DEFAULT_TRUNCATION, stride=None,
                                          max_chunks=None, aggregate=None))
    clf = finetune_spec(frame, cut, valid=valid, source=source)
    aggregate = None if spec.method == "setfit" else r.aggregate_or_default
    clf.record["hyperparameters"].update(
        truncation=CHUNKS, stride=r.stride, max_chunks=r.max_chunks,
        aggregate=aggregate, chunk_training=DEFAULT_TRUNCATION)
    clf.reading = clf.reading.replace(truncation=CHUNKS, stride=r.stride, max_chunks=r.max_chunks,
                                      aggregate=aggregate or DEFAULT_AGGREGATE)
    clf.reading.check_window(clf.window_budget())
    return clf


def _check_stride(spec: TrainSpec) -> None:
    """A ``stride`` not smaller than the window refused before training (the window of a
    single input at ``max_length``; NLI's, shortened by the hypothesis, is checked again
    after)."""
    r = spec.reading
    if r.stride is None or r.max_length is None:
        return
    tpl = special_template(load_tokenizer(spec.model))
    r.check_window(r.max_length - tpl.n_single)
