"""Fine-tune a pretrained Transformer encoder as a document classifier or regression model.

The recipe follows Wankmüller (2022), section 6.4: AdamW without weight decay, the learning rate
decayed linearly to 0 with no warm-up, dropout 0.1, batch size 16, a fixed number of epochs,
gradients clipped at norm 1.0 (the Hugging Face default the paper's runs used). Long documents
are cut with head+tail truncation (section 6.3). Optional random oversampling of minority
classes (section 6.4, ratio 0.25 in the paper) is applied to the training data only.

:func:`finetune` reads as a table of contents over :mod:`quantformer.train`: check the
arguments, prepare the data and the task (classification, regression, multilabel), encode,
run the epoch loop (length-grouped batches, fused AdamW), write the record. ``seed`` fixes
Python, NumPy and torch generators and the data order, so two CPU runs with one seed give
identical models.

Default learning rate and epochs depend on the model size (:func:`default_hyperparameters`):
the paper's 1e-5 to 3e-5 were chosen for BERT-base (768 hidden units); small models such as the
bundled all-MiniLM-L6-v2 (384) underfit with them and need a larger rate.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._core.callable import make_callable
from .._core.errors import InputError
from .arguments import (BATCH_SIZE, DEFAULT_VALID_FRACTION, DROPOUT, MAX_GRAD_NORM, SIZE_DEFAULTS,
    check_arguments, default_hyperparameters, model_size)
from .data import length_grouped_batches, oversample_indices, set_seed
from ..models.tasks import TrainingWarning

__all__ = ["finetune", "default_hyperparameters", "model_size", "oversample_indices",
           "length_grouped_batches", "set_seed", "TrainingWarning", "BATCH_SIZE", "DROPOUT",
           "MAX_GRAD_NORM", "SIZE_DEFAULTS", "DEFAULT_VALID_FRACTION"]


def finetune(
    frame: pd.DataFrame,
    *,
    model: str | None = None,
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int = BATCH_SIZE,
    max_length: int = 512,
    truncation: str = "head_tail",
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
    precision: str = "auto",
    grad_accum: int = 1,
    method: str = "standard",
    hypothesis: str | None = None,
    label_phrases=None,
    nli_pairs: str = "balanced",
    setfit_iterations: int | None = None,
):
    """Fine-tune a pretrained encoder on labelled documents (Wankmüller 2022, section 6.4).

    Args:
        frame: corpus frame with ``text`` and ``label`` (for ``label_cols``: those columns).
            Rows with a missing label or text are left out (counted in the record).
        model: hub id or local folder; ``None`` = the bundled all-MiniLM-L6-v2.
        epochs, lr: default by model size, see :func:`default_hyperparameters`.
        batch_size: documents per forward pass (16, the paper's).
        max_length: tokens per document, special tokens included (512; up to 4,096 for
            Longformer models, whose first token gets global attention).
        truncation: ``head_tail`` (128 + 382 at 512, section 6.3), ``head`` or ``tail``.
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
        precision: ``auto`` (bf16 autocast on CUDA devices that support it, fp16 with a
            gradient scaler on older ones, fp32 on CPU/MPS), ``fp32``, ``bf16``, ``fp16``
            (CUDA only).
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

    Returns:
        A :class:`quantformer.infer.classifier.Classifier` whose ``record`` holds the training record.

    Raises:
        InputError: no labelled documents, a single class (or one value only), a non-numeric
            regression label (named), a multilabel column that is not 0/1, non-positive
            epochs/lr/batch size, ``max_length`` above the model's limit, an unknown
            truncation, device, task or precision, a bad ``labels`` list or oversampling ratio,
            oversampling with regression/multilabel, early stopping without validation data.
    """
    if setfit_iterations is not None and method != "setfit":
        raise InputError("setfit_iterations (--setfit-iterations) is for method='setfit' "
                         "only; add --method setfit or leave it out")
    from .nli import check_method_options

    check_method_options(method, hypothesis, label_phrases, nli_pairs)
    if method == "nli" and task == "classification":
        from .nli import nli_finetune

        return nli_finetune(
            frame, model=model, hypothesis=hypothesis, label_phrases=label_phrases,
            pairs=nli_pairs, epochs=epochs, lr=lr, batch_size=batch_size, max_length=max_length,
            truncation=truncation, valid=valid, valid_fraction=valid_fraction, labels=labels,
            seed=seed, device=device, quiet=quiet, source=source,
            early_stopping=early_stopping, precision=precision, grad_accum=grad_accum,
            oversample=oversample)
    if method != "standard":  # few-shot methods live in quantformer.fewshot
        from .setfit import finetune_fewshot

        if task != "classification":
            raise InputError(f"method={method!r} trains classifiers only; use the standard "
                             f"method for task={task!r}")

        return finetune_fewshot(method, frame, model=model, epochs=epochs, lr=lr,
                                batch_size=batch_size, labels=labels, seed=seed, device=device,
                                quiet=quiet, source=source, oversample=oversample, valid=valid,
                                valid_fraction=valid_fraction,
                                num_iterations=setfit_iterations)
    from ..models.hub import load_config, resolve_device, resolve_model
    from ..io.modeldir import now_utc
    from .data import training_data
    from .loop import resolve_precision
    from ..models.tasks import make_task

    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    started, created = time.time(), now_utc()
    settings = _check(model, epochs=epochs, lr=lr, batch_size=batch_size, max_length=max_length,
                      truncation=truncation, oversample=oversample, seed=seed,
                      valid_fraction=valid_fraction, task=task, early_stopping=early_stopping,
                      precision=precision, grad_accum=grad_accum)
    _check_needs_validation(valid is not None or bool(valid_fraction), early_stopping,
                            tune_thresholds, task)
    base_path, config = resolve_model(model), load_config(model)
    dev = resolve_device(device)
    settings["precision"] = resolve_precision(precision, dev)
    kind = make_task(task, labels, label_cols, label_sep)
    data, valid_data, counts = training_data(frame, valid, valid_fraction, int(seed), kind, say)
    kind.fit(data, oversample=oversample)
    set_seed(int(seed))
    rng = np.random.default_rng(int(seed))
    clf, batches, n_truncated = _setup(model, base_path, config, data, kind, settings, dev,
                                       rng, say)
    say(f"fine-tuning {clf.record['model']} on {len(data)} documents ({kind.describe()}), "
        f"{settings['epochs']} epoch(s), lr {settings['lr']:g}, batch size {batch_size}, "
        f"device {dev}")
    loop = _train(clf, batches, valid_data, kind, settings, dev, rng, quiet)
    from .record import training_record

    clf.record = training_record(
        task=kind, settings=settings, size=settings.pop("size"), data=data, counts=counts,
        n_rows=len(frame), n_oversampled=len(batches.rows), n_truncated=n_truncated,
        source=source, model=clf.record, device=dev, loop=loop, started=started,
        created=created)
    if valid_data is not None:
        _validate(clf, kind, valid_data, "valid" if valid is not None
                  else f"valid_fraction {valid_fraction}", tune_thresholds, say)
    clf.record["finished"] = now_utc()
    return clf


def _check(model, **settings) -> dict:
    """Check the arguments (one table, :mod:`quantformer.train.arguments`); fill the defaults
    by model size."""
    from ..models.hub import check_max_length, load_config
    from ..models.tokenize import check_strategy

    check_arguments(**settings)
    check_strategy(settings["truncation"])
    check_max_length(int(settings["max_length"]), load_config(model))
    defaults = default_hyperparameters(model)
    settings["epochs"] = int(settings["epochs"] if settings["epochs"] is not None
                             else defaults["epochs"])
    settings["lr"] = float(settings["lr"] if settings["lr"] is not None else defaults["lr"])
    settings["size"] = defaults["size"]
    return settings


def _check_needs_validation(has_valid: bool, early_stopping, tune_thresholds, task) -> None:
    if tune_thresholds and task != "multilabel":
        raise InputError("--tune-thresholds is for --task multilabel; leave it out")
    for flag, used in (("--early-stopping", early_stopping is not None),
                       ("--tune-thresholds", tune_thresholds)):
        if used and not has_valid:
            raise InputError(f"{flag} needs validation data: give --valid or --valid-fraction "
                             "(e.g. 0.2)")


def _setup(model, base_path, config, data, task, settings, device, rng, say):
    """Tokenise, oversample, load the network with the task's head; returns (Classifier,
    Batches, number of truncated documents)."""
    from transformers import AutoModelForSequenceClassification

    from ..io.modeldir import hf_quiet
    from ..models.hub import load_tokenizer, model_label
    from ..infer.classifier import Classifier, global_attention_hook
    from ..models.tokenize import encode
    from .loop import Batches

    tokenizer = load_tokenizer(model)
    targets = task.targets(data)
    oversample = settings["oversample"]
    rows = (oversample_indices(task.oversample_labels(data), oversample, rng)
            if oversample is not None else np.arange(len(data)))
    enc = encode(tokenizer, data["text"].tolist(), max_length=int(settings["max_length"]),
                 truncation=settings["truncation"])
    n_truncated = int(enc.truncated.sum())
    if n_truncated:
        say(f"{n_truncated} of {len(data)} training documents are longer than "
            f"{settings['max_length']} tokens and were truncated ({settings['truncation']})")
    overrides = {k: DROPOUT for k in ("hidden_dropout_prob", "attention_probs_dropout_prob",
                                      "dropout", "attention_dropout") if hasattr(config, k)}
    with hf_quiet():  # "newly initialized classifier weights" is expected here
        network = AutoModelForSequenceClassification.from_pretrained(
            base_path, ignore_mismatched_sizes=True, **task.head(), **overrides)
    network.to(device)
    record = {"model": model_label(model), "base_model_path": base_path,
              "model_type": getattr(config, "model_type", None)}
    clf = Classifier(network, tokenizer, task.labels, max_length=int(settings["max_length"]),
                     truncation=settings["truncation"], device=device, record=record, task=task)
    batches = Batches(enc, rows, targets,
                      tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
                      global_attention_hook(network.config))
    return clf, batches, n_truncated


def _train(clf, batches, valid_data, task, settings, device, rng, quiet):
    """Run the epoch loop; with validation data, score it after every epoch."""
    import warnings

    from .loop import train_loop

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


def _validate(clf, task, valid_data, source: str, tune_thresholds: bool, say) -> None:
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


# ------------------------------------------------------------------------------------------
# CLI


def add_cli(sub) -> None:
    from ..cli._options import (add_corpus_options, add_device_option, add_model_option,
        add_quiet_option, positive)
    from ..models.tokenize import STRATEGIES

    p = sub.add_parser(
        "finetune",
        help="fine-tune a pretrained encoder on labelled documents",
        description="Fine-tune a pretrained Transformer on hand-coded documents and save a "
                    "model directory (Wankmüller 2022, section 6.4: AdamW, linear decay, no "
                    "warm-up, no weight decay, dropout 0.1, batch 16). Learning rate and "
                    "epochs default by model size (small models: 8e-5, 4 epochs).",
    )
    p.add_argument("--train", required=True, help="labelled corpus file")
    add_corpus_options(p)
    from ..cli._options import add_labels_file_option

    add_labels_file_option(p, "--train")
    add_model_option(p)
    p.add_argument("--epochs", type=positive(int), default=None,
                   help="passes over the data (default by model size: 4)")
    p.add_argument("--lr", type=positive(float), default=None,
                   help="peak learning rate (default by model size: 8e-5 small, 3e-5 base, "
                        "1e-5 large)")
    p.add_argument("--batch-size", type=positive(int), default=BATCH_SIZE,
                   help="documents per step (16)")
    p.add_argument("--max-length", type=positive(int), default=512,
                   help="tokens per document incl. special tokens (512; Longformer up to 4096)")
    p.add_argument("--truncation", default="head_tail", choices=STRATEGIES,
                   help="how long documents are cut (head_tail: first 128 + last 382 at 512)")
    p.add_argument("--oversample", type=positive(float), default=None,
                   help="oversample minority classes up to RATIO x the majority (paper: 0.25)")
    p.add_argument("--labels", default=None,
                   help="comma-separated label order (default: sorted training labels)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--valid", default=None,
                   help="labelled validation file (metrics per epoch, early stopping)")
    g.add_argument("--valid-fraction", type=float, default=DEFAULT_VALID_FRACTION,
                   help="share of --train held out for validation metrics (0: none)")
    _add_task_options(p)
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    p.add_argument("--method", default="standard", choices=("standard", "setfit", "nli"),
                   help="standard fine-tuning, or setfit: few-shot contrastive fine-tuning of "
                        "a sentence-transformer body plus a logistic head (8-64 codes per "
                        "class; --epochs, --lr, --batch-size apply to the body), or nli: an NLI "
                        "--model fine-tuned on the classes written as hypotheses (Laurer et "
                        "al. 2023; default 7 epochs, lr 2e-5)")
    from ..cli._options import add_nli_options as add_cli_options

    add_cli_options(p)
    p.add_argument("--setfit-iterations", type=positive(int), default=None, metavar="N",
                   help="setfit: pairs drawn per training document and direction (5)")
    add_device_option(p)
    add_quiet_option(p)
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=_run_finetune)


def _add_task_options(p) -> None:
    from ..cli._options import positive
    from .arguments import PRECISIONS, TASKS

    g = p.add_argument_group("what is measured, and how training runs")
    g.add_argument("--task", default="classification", choices=TASKS,
                   help="classification (default; numeric codes stay classes), regression (a "
                        "numeric label) or multilabel (several 0/1 labels)")
    g.add_argument("--label-cols", default=None,
                   help="multilabel: comma-separated 0/1 columns, one per label")
    g.add_argument("--label-sep", default=None,
                   help="multilabel: separator of the labels in one label column (e.g. '|')")
    g.add_argument("--tune-thresholds", action="store_true",
                   help="multilabel: choose each label's threshold by F1 on the validation "
                        "data (default 0.5)")
    g.add_argument("--early-stopping", type=positive(int), default=None, metavar="N",
                   help="stop after N epochs without validation improvement and keep the best "
                        "epoch (needs --valid or --valid-fraction)")
    g.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="auto: bf16 on CUDA GPUs that support it, fp16 on older ones, fp32 on "
                        "CPU")
    g.add_argument("--grad-accum", type=positive(int), default=1, metavar="K",
                   help="one optimisation step every K batches (effective batch = batch x K)")


def _split_list(value: str | None) -> list | None:
    return [s.strip() for s in value.split(",") if s.strip()] if value else None


def _run_finetune(args) -> int:
    from ..cli._options import check_task_flags, corpus_kwargs
    from ..io.frames import read_frame
    from ..io.modeldir import check_out_dir
    from ..cli._options import nli_kwargs

    check_out_dir(args.out, args.overwrite)
    check_task_flags(args)
    kw = corpus_kwargs(args)
    needs_label = args.label_cols is None
    train = read_frame(args.train, require_label=needs_label, labels_file=args.labels_file, **kw)
    valid = read_frame(args.valid, require_label=needs_label, **kw) if args.valid else None
    clf = finetune(train, model=args.model, epochs=args.epochs, lr=args.lr,
                   batch_size=args.batch_size, max_length=args.max_length,
                   truncation=args.truncation, oversample=args.oversample, valid=valid,
                   valid_fraction=args.valid_fraction, labels=_split_list(args.labels),
                   seed=args.seed, device=args.device, quiet=args.quiet,
                   source=str(args.train), task=args.task,
                   label_cols=_split_list(args.label_cols), label_sep=args.label_sep,
                   tune_thresholds=args.tune_thresholds, early_stopping=args.early_stopping,
                   precision=args.precision, grad_accum=args.grad_accum,
                   method=args.method, setfit_iterations=args.setfit_iterations,
                   **nli_kwargs(args))
    clf.save(args.out, overwrite=args.overwrite)
    print(f"saved the fine-tuned model to {args.out}")
    return 0


make_callable(__name__, "finetune")
