"""The standard fine-tuning recipe of Wankmüller (2022), section 6.4.

AdamW without weight decay, the learning rate decayed linearly to 0 with no warm-up, dropout
0.1, batch size 16, a fixed number of epochs, gradients clipped at norm 1.0 (the Hugging Face
default the paper's runs used). Long documents are cut with head+tail truncation (section
6.3). Optional random oversampling of minority classes (section 6.4, ratio 0.25 in the paper)
is applied to the training data only.

:func:`finetune_standard` reads as a table of contents over :mod:`quantformer.train`: check the
arguments, prepare the data and the task (classification, regression, multilabel), encode,
run the epoch loop (length-grouped batches, fused AdamW), write the record. ``seed`` fixes
Python, NumPy and torch generators and the data order, so two CPU runs with one seed give
identical models.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..infer.classifier import Classifier, global_attention_hook
from ..io.modeldir import hf_quiet, now_utc
from ..models.hub import (
    check_max_length,
    load_config,
    load_network,
    load_tokenizer,
    model_label,
    resolve_device,
    resolve_model,
)
from ..models.tasks import make_task
from ..models.chunks import check_not_longformer
from ..models.reading import CHUNKS, TRUNCATIONS, Reading, check_strategy
from ..models.tokenize import encode, encode_windows
from .chunks import check_training_reading, window_batches
from .arguments import DROPOUT, check_training, default_hyperparameters
from .data import oversample_indices, set_seed, training_data
from ..models.precision import choose_precision
from .loop import Batches, train_loop
from .record import training_record
from .spec import TrainSpec


def finetune_standard(frame: pd.DataFrame, spec: TrainSpec, *,
                      valid: pd.DataFrame | None = None,
                      source: str | None = None) -> Classifier:
    """The standard recipe (module docstring).

    Args:
        frame: corpus frame, as for :func:`quantformer.train.finetune.finetune`.
        spec: the run's settings, given their defaults
            (:meth:`~quantformer.train.spec.TrainSpec.with_defaults`).
        valid: labelled validation frame (default None).
        source: where the data came from, for the record (default None).

    Raises:
        InputError: as :func:`quantformer.train.finetune.finetune`.
    """
    say = (lambda *a: None) if spec.quiet else (lambda *a: print(*a, flush=True))
    started, created = time.time(), now_utc()
    r = spec.reading
    check_strategy(r.truncation, TRUNCATIONS)  # window settings checked before the model loads
    check_training_reading(r, spec.chunk_training)
    settings = check_settings(spec)
    settings["aggregate"] = r.aggregate_or_default
    model, seed, valid_fraction = spec.model, spec.seed, spec.valid_fraction
    check_needs_validation(valid is not None or bool(valid_fraction), spec.early_stopping,
                           spec.tune_thresholds)
    base_path, config = resolve_model(model), load_config(model)
    check_not_longformer(config, r.truncation)
    dev = resolve_device(spec.device)
    settings["precision"] = choose_precision(spec.precision, dev, use="train").name
    kind = make_task(spec.task, spec.labels, spec.label_cols, spec.label_sep)
    data, valid_data, counts = training_data(frame, valid, valid_fraction, int(seed), kind, say)
    kind.fit(data, oversample=spec.oversample)
    set_seed(int(seed))
    rng = np.random.default_rng(int(seed))
    clf, batches, n_truncated = _setup(model, base_path, config, data, kind, settings, dev,
                                       rng, say)
    say(f"fine-tuning {clf.record['model']} on {len(data)} documents ({kind.describe()}), "
        f"{settings['epochs']} epoch(s), lr {settings['lr']:g}, batch size {spec.batch_size}, "
        f"device {dev}")
    loop = train_epochs(clf, batches, valid_data, kind, settings, dev, rng, spec.quiet)

    clf.record = training_record(
        task=kind, settings=settings, size=settings.pop("size"), data=data, counts=counts,
        n_rows=len(frame), n_oversampled=len(batches.rows), n_truncated=n_truncated,
        source=source, model=clf.record, device=dev, loop=loop, started=started,
        created=created)
    if valid_data is not None:
        validate(clf, kind, valid_data, "valid" if valid is not None
                  else f"valid_fraction {valid_fraction}", spec.tune_thresholds, say)
    clf.record["finished"] = now_utc()
    return clf


def check_settings(spec: TrainSpec) -> dict:
    """Check the settings (one table, :mod:`quantformer.train.arguments`) and the reading
    against the model; returns them as flat keywords (the record's working copy,
    :func:`quantformer.train.record.hyperparameters`) with the defaults by model size filled
    in (``epochs``, ``lr``, and ``size``)."""
    settings = spec.keywords()
    check_training(**settings)
    check_strategy(settings["truncation"], TRUNCATIONS)
    check_max_length(int(settings["max_length"]), load_config(spec.model))
    defaults = default_hyperparameters(spec.model)
    settings["epochs"] = int(settings["epochs"] if settings["epochs"] is not None
                             else defaults["epochs"])
    settings["lr"] = float(settings["lr"] if settings["lr"] is not None else defaults["lr"])
    settings["size"] = defaults["size"]
    return settings


def check_needs_validation(has_valid: bool, early_stopping, tune_thresholds) -> None:
    """Early stopping and tuned thresholds need validation data (that thresholds are for
    multilabel is checked with the other settings: :meth:`quantformer.train.spec.TrainSpec.check`).

    Raises:
        InputError: naming the parameter and the fix.
    """
    for name, used in (("early_stopping", early_stopping is not None),
                       ("tune_thresholds", tune_thresholds)):
        if used and not has_valid:
            raise InputError("{%s} needs validation data: give {valid} or {valid_fraction} "
                             "(e.g. 0.2)" % name, params=[name, "valid", "valid_fraction"])


def _setup(model, base_path, config, data, task, settings, device, rng, say):
    """Tokenise, oversample, load the network with the task's head; returns (Classifier,
    Batches, number of truncated documents)."""
    tokenizer = load_tokenizer(model)
    targets = task.targets(data)
    oversample = settings["oversample"]
    rows = (oversample_indices(task.oversample_labels(data), oversample, rng)
            if oversample is not None else np.arange(len(data)))
    enc = _encode(tokenizer, data, settings)
    n_truncated = int(enc.truncated.sum())
    if n_truncated and settings["truncation"] != CHUNKS:
        say(f"{n_truncated} of {len(data)} training documents are longer than "
            f"{settings['max_length']} tokens and were truncated ({settings['truncation']})")
    overrides = {k: DROPOUT for k in ("hidden_dropout_prob", "attention_probs_dropout_prob",
                                      "dropout", "attention_dropout") if hasattr(config, k)}
    with hf_quiet():  # "newly initialized classifier weights" is expected here
        network = load_network(base_path, head="classification", ignore_mismatched_sizes=True,
                               **task.head(), **overrides)
    network.to(device)
    record = {"model": model_label(model), "base_model_path": base_path,
              "model_type": getattr(config, "model_type", None)}
    reading = Reading(settings["truncation"], int(settings["max_length"]), settings["stride"],
                      settings["max_chunks"], settings["aggregate"])
    clf = Classifier(network, tokenizer, task.labels, device=device, record=record, task=task,
                     reading=reading)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if settings["truncation"] == CHUNKS:
        batches = window_batches(enc, rows, targets, pad, None,
                                 chunk_training=settings["chunk_training"],
                                 aggregate=settings["aggregate"],
                                 problem_type=task.problem_type,
                                 batch_size=int(settings["batch_size"]))
    else:
        batches = Batches(enc, rows, targets, pad, global_attention_hook(network.config))
    return clf, batches, n_truncated


def _encode(tokenizer, data, settings):
    """The training documents cut (:func:`~quantformer.models.tokenize.encode`) or read in
    windows (:func:`~quantformer.models.tokenize.encode_windows`)."""
    texts, max_length = data["text"].tolist(), int(settings["max_length"])
    if settings["truncation"] == CHUNKS:
        return encode_windows(tokenizer, texts, max_length=max_length,
                              stride=settings["stride"], max_chunks=settings["max_chunks"])
    return encode(tokenizer, texts, max_length=max_length, truncation=settings["truncation"])


def train_epochs(clf, batches, valid_data, task, settings, device, rng, quiet):
    """Run the epoch loop; with validation data, score it after every epoch."""
    import warnings

    def validate():
        clf.model.eval()  # the loop puts it back in training mode
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return task.score(valid_data, clf.predict(valid_data, warn=False))[task.metric]

    return train_loop(clf.model, batches, epochs=settings["epochs"], lr=settings["lr"],
                      batch_size=int(settings["batch_size"]),
                      grad_accum=int(settings["grad_accum"]), precision=settings["precision"],
                      device=device, rng=rng, validate=validate if valid_data is not None
                      else None, early_stopping=settings["early_stopping"],
                      higher_is_better=task.higher_is_better, quiet=quiet)


def validate(clf, task, valid_data, source: str, tune_thresholds: bool, say) -> None:
    """Score the final (or restored best) model on the validation data into the record."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if tune_thresholds:
            task.tune_thresholds(valid_data, clf.predict_proba(valid_data))
            clf.record["thresholds"] = task.thresholds
        result = task.score(valid_data, clf.predict(valid_data, warn=False))
    clf.record["validation"] = {**result, "source": source}
    say(f"validation ({result['n']} documents): {task.say(result)}")
