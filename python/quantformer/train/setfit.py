"""Few-shot fine-tuning with SetFit (``finetune --method setfit``).

SetFit (Tunstall et al. 2022, "Efficient Few-Shot Learning Without Prompts") fine-tunes a
sentence-transformer body contrastively on pairs of labelled documents (same class = similar,
different class = dissimilar), then fits a logistic-regression head on the body's embeddings.
The bundled all-MiniLM-L6-v2 is a sentence-transformer, its natural body. Training runs
through the ``setfit`` package (the ``fewshot`` extra).

The model directory holds the fine-tuned body as a sentence-transformers folder (so
``SentenceTransformer(dir)`` and ``AutoModel.from_pretrained(dir)`` load it), the head as
plain numbers in ``head.json`` (coefficients, intercepts, label order; no pickle), and the
usual ``quantformer.json`` record with ``"method": "setfit"``. :class:`SetFitClassifier`
predicts with quantformer's own batched mean pooling (:mod:`quantformer.infer.embed`), so
``quantformer predict``, ``quantformer.load`` and R's ``predict()`` work unchanged.

Defaults for 8-64 examples per class (:data:`DEFAULTS`): 5 pair iterations per example
(setfit's ``num_iterations``; about 10 pairs per example), 1 body epoch, batch 16, body
learning rate 1e-4, a logistic-regression head with C = 1. Tunstall et al. (2022, section 4.2)
use 20 iterations at 2e-5; quantformer's values were chosen by a dev search on documents held
out of the Abortion and Toxic training pools, never the test sets (``bench/devsearch_setfit.py``,
bench/RESULTS.md "SetFit dev search": mean dev macro-F1 0.631 vs 0.617 at 8 codes per class,
3.2x less training time), a logistic-regression head
(scikit-learn, as in the paper).

On the test sets (bench/RESULTS.md, "Few-shot"), SetFit with these defaults beat standard
fine-tuning by 0.09-0.15 macro-F1 at 8, 16 and 32 codes per class on Toxic and Manifesto
protectionism and tied it on Abortion stance; at 64 per class standard fine-tuning had caught
up (Manifesto), as in Tunstall et al. (2022, figure 3).
"""

from __future__ import annotations

import contextlib
import shutil
import weakref

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..infer.embed import Encoder
from ..infer.setfit import SetFitClassifier
from ..io.columns import LABEL_COLUMN
from ..io.modeldir import hf_quiet, now_utc, versions
from ..models.hub import (
    check_length_value,
    check_max_length,
    load_setfit,
    model_label,
    resolve_device,
    resolve_model,
)
from ..models.reading import BODY_TRUNCATION, check_strategy
from ..models.tokenize import encode

METHOD = "setfit"
HEAD = BODY_TRUNCATION  # SetFit's default cut, as sentence-transformers cuts
DEFAULTS = {"num_iterations": 5, "epochs": 1, "batch_size": 16, "body_lr": 1e-4}
#: ``tune --method setfit``'s default grid: body learning rates x epochs over the pairs
GRID = ((2e-5, 5e-5, 1e-4), (1, 2))


# ------------------------------------------------------------------------------------------
# training


def check_hyperparameters(**values) -> None:
    """Each value must be a positive number.

    Raises:
        InputError: naming the parameter and the value.
    """
    for name, v in values.items():
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or v <= 0:
            raise InputError(f"{name} must be a positive number, not {v!r}")


def setfit_finetune(frame: pd.DataFrame, *, model: str | None = None,
                    labels: list[str] | None = None, epochs: int | None = None,
                    lr: float | None = None, batch_size: int | None = None,
                    num_iterations: int | None = None, seed: int = 1, device: str = "auto",
                    quiet: bool = False, source: str | None = None,
                    max_length: int | None = None,
                    truncation: str | None = None) -> SetFitClassifier:
    """Few-shot fine-tuning with SetFit (Tunstall et al. 2022).

    Args:
        frame: corpus frame with ``text`` and ``label``; rows with a missing label or text are
            left out.
        model: a sentence-transformer (hub id or folder); ``None`` = the bundled
            all-MiniLM-L6-v2. Other encoders get mean pooling.
        labels: label order (default: sorted distinct labels).
        epochs: body epochs over the pairs (default 1).
        lr: body learning rate (default 1e-4).
        batch_size: pairs per step (default 16).
        num_iterations: pairs generated per training example and direction (default 5).
        seed: fixes pair sampling, the body's training and the head (same CPU run, same model).
        device: ``auto``, ``cpu``, ``cuda`` or ``mps``.
        quiet: no progress bars or messages.
        source: where the data came from, for the record.
        max_length: tokens per document, special tokens included, in training (the body's
            ``max_seq_length``) and prediction (default: the sentence-transformer's own, 256
            for all-MiniLM-L6-v2).
        truncation: how longer documents are cut, in training and prediction: ``head``
            (default, as sentence-transformers cuts), ``head_tail`` or ``tail`` (training
            documents are cut with :func:`quantformer.models.tokenize.encode` first, so the
            body trains on the tokens it later predicts from).

    Returns:
        A :class:`SetFitClassifier`; its ``record`` has ``"method": "setfit"``.

    Raises:
        InputError: fewer than two classes, labels not in ``labels``, non-positive values,
            ``max_length`` below 8 or above the model's limit, an unknown truncation, model
            or device.
    """
    check_hyperparameters(epochs=epochs, lr=lr, batch_size=batch_size,
                          num_iterations=num_iterations)
    if max_length is not None:
        check_length_value(max_length)
    truncation = check_strategy(HEAD if truncation is None else truncation)
    hp = {**DEFAULTS, **{k: v for k, v in {"epochs": epochs, "body_lr": lr,
                                           "batch_size": batch_size,
                                           "num_iterations": num_iterations}.items()
                         if v is not None}, "max_length": max_length, "truncation": truncation}
    train, order = training_rows(frame, labels)
    body, head = _train(train, model, hp, order, seed, device, quiet)
    return _classifier(body, head, order, hp, model, train, seed, device, source)


def training_rows(frame: pd.DataFrame, labels):
    """The labelled rows with a text, and the label order.

    Raises:
        InputError: no label column, fewer than two classes, labels outside ``labels``.
    """
    if LABEL_COLUMN not in frame.columns:
        raise InputError("the training data have no label column; name it with {label_col}",
                         params=["label_col"])
    keep = frame[LABEL_COLUMN].notna() & frame["text"].notna() & (frame["text"].astype(str)
                                                             .str.strip() != "")
    train = frame.loc[keep, ["text", LABEL_COLUMN]].astype(str).reset_index(drop=True)
    present = sorted(train[LABEL_COLUMN].unique())
    order = [str(x) for x in labels] if labels else present
    unknown = sorted(set(present) - set(order))
    if unknown:
        raise InputError(f"training labels {unknown} are not in {{labels}} {order}; add them",
                         params=["labels"])
    if len(present) < 2:
        raise InputError(f"SetFit needs codes of at least two classes, but the training data "
                         f"have {len(present)} ({', '.join(present) or 'none'}); code more "
                         "documents")
    return train, order


def _train(train, model, hp, order, seed, device, quiet):
    """Run setfit's Trainer; returns the trained SentenceTransformer body and sklearn head."""
    import logging
    import tempfile
    import warnings

    try:
        from datasets import Dataset
        from setfit import Trainer, TrainingArguments
    except ImportError as exc:
        raise InputError(f"{{method}} setfit needs the setfit package ({exc}); install it "
                         "with pip install 'quantformer[fewshot]'", params=["method"]) from exc
    from transformers import set_seed

    set_seed(seed)
    logging.getLogger("setfit").setLevel(logging.ERROR)  # "no model_head.pkl": expected
    # the Trainer's output folder (nothing is saved there): removed afterwards
    with hf_quiet(), tempfile.TemporaryDirectory(prefix="quantformer-setfit-") as scratch:
        net = load_setfit(resolve_model(model), labels=None, device=resolve_device(device))
        net.model_head.set_params(max_iter=1000, random_state=seed)
        train = _cut(net.model_body, train, hp)
        args = TrainingArguments(output_dir=scratch,
                                 batch_size=hp["batch_size"], num_epochs=hp["epochs"],
                                 num_iterations=hp["num_iterations"],
                                 body_learning_rate=hp["body_lr"], seed=seed,
                                 show_progress_bar=not quiet, report_to="none",
                                 save_strategy="no", logging_strategy="no",
                                 logging_first_step=False)
        with _datasets_quiet(quiet), warnings.catch_warnings():
            # torch's DataLoader on a CPU: not news (R would show it as a warning every run)
            warnings.filterwarnings("ignore", message=".*'pin_memory' argument is set as true")
            trainer = Trainer(model=net, args=args, train_dataset=Dataset.from_pandas(train))
            _one_line_log(trainer, quiet)
            trainer.train()
    return net.model_body, net.model_head


def _cut(body, train: pd.DataFrame, hp: dict) -> pd.DataFrame:
    """Set the body's ``max_seq_length`` to ``hp["max_length"]`` (checked against the model's
    limit) and, for a truncation other than ``head``, cut the longer training documents with
    :func:`quantformer.models.tokenize.encode` (decoded back to text), as prediction cuts them."""
    if hp["max_length"] is not None:
        body.max_seq_length = check_max_length(hp["max_length"], body[0].auto_model.config)
    hp["max_length"] = int(body.max_seq_length or 256)
    if hp["truncation"] == HEAD:
        return train
    enc = encode(body.tokenizer, train["text"].tolist(), max_length=hp["max_length"],
                 truncation=hp["truncation"])
    texts = [body.tokenizer.decode(ids, skip_special_tokens=True) if cut else text
             for ids, cut, text in zip(enc.input_ids, enc.truncated, train["text"])]
    return train.assign(text=texts)


def _one_line_log(trainer, quiet: bool) -> None:
    """Replace the trainer's log printer (transformers prints the final log as a dict,
    ``{'train_runtime': '0.19', ...}``) by one readable line at the end of the body's
    training, or nothing when ``quiet``; the progress bar stays unless ``quiet``."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class OneLine(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "train_runtime" in logs:
                print(f"SetFit: body trained in {float(logs['train_runtime']):.1f} s "
                      f"({state.global_step} step(s), mean contrastive loss "
                      f"{float(logs.get('train_loss', float('nan'))):.4f}); fitting the "
                      "logistic-regression head", flush=True)

    for callback in (PrinterCallback, ProgressCallback):
        while trainer.pop_callback(callback) is not None:
            pass
    if not quiet:
        trainer.add_callback(OneLine())


@contextlib.contextmanager
def _datasets_quiet(quiet: bool):
    """No ``datasets`` "Map" progress bars while ``quiet``."""
    import datasets

    was = datasets.is_progress_bar_enabled()
    if quiet:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        if quiet and was:
            datasets.enable_progress_bars()


def _classifier(body, head, order, hp, model, train, seed, device, source):
    """Wrap the trained body and head (columns put in ``order``) as a SetFitClassifier."""
    import tempfile

    coef, intercept = head_in_order(head, order)
    folder = tempfile.mkdtemp(prefix="quantformer-setfit-body-")
    with hf_quiet():  # no "Writing model shards" bar for this temporary copy
        body.save(folder)  # the sentence-transformers folder the directory is written from
    normalize = any(type(m).__name__ == "Normalize" for m in body)
    transformer = body[0].auto_model
    encoder = Encoder(model=transformer.eval(), tokenizer=body.tokenizer,
                      config=transformer.config, device=str(body.device), path=folder)
    max_length = int(body.max_seq_length or 256)
    record = {"method": METHOD, "labels": order, "model": model_label(model),
              "label_counts": train[LABEL_COLUMN].value_counts().reindex(order, fill_value=0)
              .to_dict(), "n_train": len(train), "n_train_oversampled": len(train),
              "hyperparameters": {**hp, "max_length": max_length,
                                  "head": "logistic regression", "seed": seed},
              "data_source": source, "versions": versions(), "finished": now_utc()}
    clf = SetFitClassifier(encoder, coef, intercept, order, normalize=normalize,
                           max_length=max_length, truncation=hp["truncation"], record=record)
    weakref.finalize(clf, shutil.rmtree, folder, True)  # the body's temporary folder
    return clf


def head_in_order(head, order: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A fitted LogisticRegression's weights as softmax rows in ``order`` (a two-class
    logistic ``sigmoid(z)`` is ``softmax([0, z])``); classes absent from training get an
    intercept of -1e9 (probability 0)."""
    classes = [str(c) for c in head.classes_]
    coef, intercept = np.asarray(head.coef_, float), np.asarray(head.intercept_, float)
    if coef.shape[0] == 1:
        coef = np.vstack([np.zeros_like(coef), coef])
        intercept = np.array([0.0, intercept[0]])
    rows = {c: i for i, c in enumerate(classes)}
    coef = np.stack([coef[rows[c]] if c in rows else np.zeros(coef.shape[1]) for c in order])
    intercept = np.array([intercept[rows[c]] if c in rows else -1e9 for c in order])
    return coef, intercept


# ------------------------------------------------------------------------------------------
# the finetune verb's entry


METHODS = ("standard", METHOD, "nli")  # nli: quantformer.nli_finetune


def finetune_fewshot(frame: pd.DataFrame, spec, *, valid: pd.DataFrame | None = None,
                     source: str | None = None) -> SetFitClassifier:
    """``finetune(..., method=...)`` for a few-shot method (the dispatch of
    :func:`quantformer.train.finetune.finetune`): the spec's settings in SetFit's own terms
    (``setfit_iterations`` is its ``num_iterations``), handed to :func:`setfit_finetune`.

    Args:
        frame: corpus frame with ``text`` and ``label``.
        spec: the run's settings (:class:`~quantformer.train.spec.TrainSpec`).
        valid: refused (not yet); default None.
        source: where the data came from, for the record.

    Raises:
        InputError: an unknown method, or options the method does not take (validation
            data, oversampling).
    """
    method = spec.method
    if method not in METHODS:
        raise InputError(f"unknown method '{method}'; use one of: {', '.join(METHODS)}")
    unused = [k for k, v in (("oversample", spec.oversample), ("valid", valid))
              if v is not None]
    if spec.valid_fraction:
        unused.append("valid_fraction")
    if unused:
        raise InputError(f"{', '.join('{' + k + '}' for k in unused)} cannot be used with "
                         f"{{method}} {method} (not yet); leave "
                         f"{'it' if len(unused) == 1 else 'them'} out, and evaluate on "
                         "held-out documents with `evaluate`", params=unused + ["method"])
    return setfit_finetune(frame, model=spec.model, labels=spec.labels, epochs=spec.epochs,
                           lr=spec.lr, batch_size=spec.batch_size,
                           num_iterations=spec.setfit_iterations, seed=spec.seed,
                           device=spec.device, quiet=spec.quiet, source=source,
                           max_length=spec.reading.max_length,
                           truncation=spec.reading.truncation)
