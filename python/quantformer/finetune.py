"""Fine-tune a pretrained Transformer encoder as a document classifier.

The recipe follows Wankmüller (2022), section 6.4: AdamW without weight decay, the learning rate
decayed linearly to 0 with no warm-up, dropout 0.1, batch size 16, a fixed number of epochs,
gradients clipped at norm 1.0 (the Hugging Face default the paper's runs used). Long documents
are cut with head+tail truncation (section 6.3). Optional random oversampling of minority
classes (section 6.4, ratio 0.25 in the paper) is applied to the training data only.

The training loop is quantformer's own: documents are tokenised once, grouped into batches of
similar length (shuffled into mega-batches of 50 batches, sorted by length inside each, and the
batch order shuffled), and each batch is padded only to its own longest document. That costs
about 2 % padding instead of the ~80 % of random batches, which is where the speed-up over the
Hugging Face ``Trainer`` comes from. ``seed`` fixes Python, NumPy and torch generators and the
data order, so two CPU runs with one seed give identical models.

Default learning rate and epochs depend on the model size (:func:`default_hyperparameters`):
the paper's 1e-5 to 3e-5 were chosen for BERT-base (768 hidden units); small models such as the
bundled all-MiniLM-L6-v2 (384) underfit with them and need a larger rate.
"""

from __future__ import annotations

import math
import random
import time
import warnings

import numpy as np
import pandas as pd

from ._callable import make_callable
from .errors import InputError

DROPOUT = 0.1
BATCH_SIZE = 16
MAX_GRAD_NORM = 1.0
MEGABATCH = 50
DEFAULT_VALID_FRACTION = 0.0
# hidden size -> (lr, epochs); the first row whose bound is >= the model's hidden size is used
SIZE_DEFAULTS = (
    (512, 8e-5, 4),    # small: MiniLM (384), DistilBERT-small, tiny test models
    (1024 - 1, 3e-5, 4),  # base: BERT/RoBERTa-base (768); paper section 6.4 range 1e-5..3e-5
    (10 ** 9, 1e-5, 4),   # large (1024+): the bottom of the paper's range, for stability
)


class TrainingWarning(UserWarning):
    """A problem in the training data that training works around (tiny classes, dropped rows)."""


# ------------------------------------------------------------------------------------------
# hyperparameters


def model_size(model: str | None) -> str:
    """``small``, ``base`` or ``large`` from the model's hidden size (config only, no weights)."""
    from .models import load_config

    config = load_config(model)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None) or 768
    for (bound, _, _), name in zip(SIZE_DEFAULTS, ("small", "base", "large")):
        if hidden <= bound:
            return name
    return "large"  # pragma: no cover


def default_hyperparameters(model: str | None = None) -> dict:
    """Default learning rate and epochs for a model, chosen by its size.

    ================  ===============  ======  ======
    size              hidden units     lr      epochs
    ================  ===============  ======  ======
    small             <= 512           8e-5    4
    base              513 - 1023       3e-5    4
    large             >= 1024          1e-5    4
    ================  ===============  ======  ======

    The paper's rates (1e-5 to 3e-5, section 6.4) were tuned for BERT-base. On the bundled
    all-MiniLM-L6-v2 (384 hidden units) they underfit: measured on the Abortion task, 2e-5 x 3
    epochs gave macro-F1 0.44, 5e-5 x 4 gave 0.59, 8e-5 x 4 0.62, 1e-4 x 5 0.61. See
    ``bench/RESULTS.md`` for the default's score (mean of seeds 1-3).

    Args:
        model: model name or folder (``None`` = the bundled default).

    Returns:
        ``{"lr": float, "epochs": int, "size": str}``.
    """
    size = model_size(model)
    i = ("small", "base", "large").index(size)
    _, lr, epochs = SIZE_DEFAULTS[i]
    return {"lr": lr, "epochs": epochs, "size": size}


def _check_positive(value, name: str, kind) -> None:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if kind is int:
        ok = ok and float(value) == int(value)
    if not ok or not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
        what = "a whole number" if kind is int else "a number"
        raise InputError(f"--{name} must be {what} greater than 0, not {value!r}")


# ------------------------------------------------------------------------------------------
# data preparation


def oversample_indices(labels, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Random oversampling: every class smaller than ``ratio`` x the largest class is topped up
    with documents drawn with replacement until it has ``ceil(ratio * largest)`` documents.

    Args:
        labels: array (n,) of class labels (training data only).
        ratio: target minority:majority ratio in (0, 1]; the paper uses 0.25 (section 6.4).
        rng: NumPy generator (seeded).

    Returns:
        int64 indices into ``labels``: all originals in order, then the added duplicates.

    Raises:
        InputError: ``ratio`` outside (0, 1].
    """
    if not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise InputError(f"--oversample must be a ratio in (0, 1] (the paper uses 0.25), not "
                         f"{ratio!r}")
    labels = np.asarray(labels, dtype=object)
    classes, counts = np.unique(labels, return_counts=True)
    target = int(math.ceil(ratio * counts.max()))
    extra = []
    for c, n in zip(classes, counts):
        if n < target:
            members = np.flatnonzero(labels == c)
            extra.append(rng.choice(members, size=target - n, replace=True))
    return np.concatenate([np.arange(len(labels)), *extra]).astype(np.int64)


def length_grouped_batches(lengths, batch_size: int, rng: np.random.Generator) -> list:
    """Batches of similar length in a random order (one epoch).

    Indices are shuffled, cut into mega-batches of ``50 * batch_size``, sorted by length
    (longest first) inside each, cut into batches, and the batch order is shuffled.

    Returns:
        A list of int64 index arrays.
    """
    lengths = np.asarray(lengths)
    perm = rng.permutation(len(lengths))
    mega = batch_size * MEGABATCH
    batches = []
    for s in range(0, len(perm), mega):
        chunk = perm[s:s + mega]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators."""
    import torch

    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def _prepare(frame: pd.DataFrame, what: str) -> tuple[pd.DataFrame, int, int]:
    """Drop rows with a missing label or text; return (kept, n_missing_label, n_missing_text)."""
    from .tokenization import _is_missing

    if not isinstance(frame, pd.DataFrame) or "text" not in frame.columns:
        raise InputError(f"the {what} data must be a corpus frame with 'text' and 'label' "
                         "columns (see quantformer.read_frame)")
    if "label" not in frame.columns:
        raise InputError(f"the {what} data has no 'label' column; name it with --label-col")
    from .frames import _as_str_series

    lab = _as_str_series(frame["label"])
    no_label = lab.isna().to_numpy()
    no_text = np.array([_is_missing(t) for t in frame["text"]], dtype=bool) & ~no_label
    kept = frame.loc[~no_label & ~no_text].copy()
    kept["label"] = lab[~no_label & ~no_text]
    return kept.reset_index(drop=True), int(no_label.sum()), int(no_text.sum())


def _split_valid(frame: pd.DataFrame, fraction: float, seed: int):
    from sklearn.model_selection import train_test_split

    counts = frame["label"].value_counts()
    strat = frame["label"] if counts.min() >= 2 else None
    n_valid = max(1, int(round(fraction * len(frame))))
    if n_valid >= len(frame) - 1:
        raise InputError(f"--valid-fraction {fraction} leaves no training data; use a smaller "
                         "fraction")
    if strat is not None and n_valid < len(counts):
        strat = None
    tr, va = train_test_split(np.arange(len(frame)), test_size=n_valid, random_state=seed,
                              stratify=strat)
    return (frame.iloc[np.sort(tr)].reset_index(drop=True),
            frame.iloc[np.sort(va)].reset_index(drop=True))


# ------------------------------------------------------------------------------------------
# training


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
):
    """Fine-tune a pretrained encoder on labelled documents (Wankmüller 2022, section 6.4).

    Args:
        frame: corpus frame with ``text`` and ``label``. Rows with a missing label are left out
            (a printed count); rows with a missing or empty text too (a warning).
        model: hub id or local folder; ``None`` = the bundled all-MiniLM-L6-v2.
        epochs, lr: default by model size, see :func:`default_hyperparameters`.
        batch_size: documents per optimisation step (16, the paper's).
        max_length: tokens per document, special tokens included (512; up to 4,096 for
            Longformer models, whose first token gets global attention).
        truncation: ``head_tail`` (128 + 382 at 512, section 6.3), ``head`` or ``tail``.
        oversample: minority:majority ratio for random oversampling of the training data
            (e.g. 0.25, the paper's); ``None`` for none.
        valid: labelled validation frame, only for reported metrics (no early stopping).
        valid_fraction: share of ``frame`` held out (stratified) as validation when ``valid``
            is None; default 0 (all labelled documents train, as in the paper's fixed-epoch
            recipe). Ignored when ``valid`` is given.
        labels: label order; default the sorted distinct training labels (as strings).
        seed: fixes Python, NumPy, torch and the data order (identical CPU runs).
        device: ``auto`` (CUDA, else MPS, else CPU), ``cpu``, ``cuda``, ``mps``.
        quiet: no progress bars or messages.
        source: where the data came from (a file path), recorded in ``quantformer.json``.

    Returns:
        A :class:`quantformer.predict.Classifier` whose ``record`` holds the training record.

    Raises:
        InputError: no labelled documents, a single class, non-positive epochs/lr/batch size,
            ``max_length`` above the model's limit, an unknown truncation or device, a bad
            ``labels`` list or oversampling ratio.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForSequenceClassification

    from .evaluate import evaluate
    from .models import (check_max_length, load_config, load_tokenizer, model_label,
                         resolve_device, resolve_model)
    from .modeldir import hf_quiet, now_utc, versions
    from .predict import Classifier, global_attention_hook
    from .tokenization import check_strategy, encode

    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    started = time.time()
    created = now_utc()
    # ---- arguments
    _check_positive(batch_size, "batch-size", int)
    if epochs is not None:
        _check_positive(epochs, "epochs", int)
    if lr is not None:
        _check_positive(lr, "lr", float)
    check_strategy(truncation)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise InputError(f"--seed must be a whole number, not {seed!r}")
    if not 0 <= valid_fraction < 1:
        raise InputError(f"--valid-fraction must be in [0, 1), not {valid_fraction}")
    if oversample is not None:
        oversample_indices(np.array(["a"]), oversample, np.random.default_rng(0))  # validates
    base_path = resolve_model(model)
    config = load_config(model)
    check_max_length(int(max_length), config)
    dev = resolve_device(device)
    hp_default = default_hyperparameters(model)
    epochs = int(epochs if epochs is not None else hp_default["epochs"])
    lr = float(lr if lr is not None else hp_default["lr"])

    # ---- data
    data, n_missing_label, n_missing_text = _prepare(frame, "training")
    if n_missing_label:
        say(f"left out {n_missing_label} document(s) with a missing label")
    if n_missing_text:
        warnings.warn(f"{n_missing_text} labelled document(s) have a missing or empty text and "
                      "are left out of training", TrainingWarning, stacklevel=2)
    if len(data) == 0:
        raise InputError("the training set is empty: no document has both a text and a label")
    if valid is None and valid_fraction > 0:
        data, valid_data = _split_valid(data, valid_fraction, seed)
    elif valid is not None:
        valid_data, _, _ = _prepare(valid, "validation")
        if len(valid_data) == 0:
            raise InputError("the validation set has no document with both a text and a label")
    else:
        valid_data = None
    seen = sorted(data["label"].unique().tolist())
    if labels is not None:
        order = [str(x) for x in labels]
        if len(set(order)) != len(order):
            raise InputError(f"--labels repeats a label: {', '.join(order)}")
        missing_lab = sorted(set(seen) - set(order))
        if missing_lab:
            raise InputError(f"training labels {', '.join(map(repr, missing_lab))} are not in "
                             f"--labels ({', '.join(order)}); add them")
        absent = [x for x in order if x not in seen]
        if absent:
            warnings.warn(f"--labels {', '.join(map(repr, absent))} have no training document",
                          TrainingWarning, stacklevel=2)
    else:
        order = seen
    if len(seen) < 2:
        raise InputError(
            f"the training data has only one class ({seen[0]!r}) after removing missing labels; "
            "a classifier needs documents of at least two classes: code documents of at least "
            "one other class, or check --label-col"
        )
    counts = data["label"].value_counts()
    singles = sorted(counts[counts == 1].index.tolist())
    if singles:
        warnings.warn(f"class(es) {', '.join(map(repr, singles))} have a single training "
                      "example; the classifier will hardly learn them. Code more examples",
                      TrainingWarning, stacklevel=2)
    label_counts = {lab: int(counts.get(lab, 0)) for lab in order}
    label2id = {lab: i for i, lab in enumerate(order)}

    # ---- seed, model, tokens
    set_seed(int(seed))
    rng = np.random.default_rng(int(seed))
    tok = load_tokenizer(model)
    y_all = data["label"].map(label2id).to_numpy(dtype=np.int64)
    idx = (oversample_indices(data["label"].to_numpy(), oversample, rng)
           if oversample is not None else np.arange(len(data)))
    enc = encode(tok, data["text"].tolist(), max_length=int(max_length), truncation=truncation)
    n_trunc = int(enc.truncated.sum())
    if n_trunc:
        say(f"{n_trunc} of {len(data)} training documents are longer than {max_length} tokens "
            f"and were truncated ({truncation})")
    overrides = {k: DROPOUT for k in ("hidden_dropout_prob", "attention_probs_dropout_prob",
                                      "dropout", "attention_dropout") if hasattr(config, k)}
    with hf_quiet():  # "newly initialized classifier weights" is expected here
        net = AutoModelForSequenceClassification.from_pretrained(
            base_path, num_labels=len(order), id2label={i: lab for lab, i in label2id.items()},
            label2id=label2id, ignore_mismatched_sizes=True, **overrides)
    net.to(dev)
    net.train()
    hook = global_attention_hook(net.config)
    try:  # the fused kernel (one pass over all parameters) is much cheaper per step
        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0, fused=True)
    except (RuntimeError, TypeError, ValueError):  # pragma: no cover - device without it
        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0)
    lengths = np.array([len(enc.input_ids[i]) for i in idx])
    steps_per_epoch = math.ceil(len(idx) / batch_size)
    total = steps_per_epoch * epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / total))
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    from .inference import pad_batch

    say(f"fine-tuning {model_label(model)} on {len(data)} documents "
        f"({', '.join(f'{k}: {v}' for k, v in label_counts.items())}), {epochs} epoch(s), "
        f"lr {lr:g}, batch size {batch_size}, device {dev}")
    losses = []
    real_tokens = padded_tokens = 0
    loop_started, loop_cpu = time.time(), time.process_time()
    bar = tqdm(total=total, desc="fine-tuning", unit="batch", disable=quiet, dynamic_ncols=True)
    for epoch in range(epochs):
        run_loss, n_seen = 0.0, 0
        for b in length_grouped_batches(lengths, batch_size, rng):
            rows = idx[b]
            batch = pad_batch([enc.input_ids[i] for i in rows],
                              [enc.token_type_ids[i] for i in rows] if enc.token_type_ids
                              else None, pad_id, dev)
            if hook is not None:
                batch = hook(batch)
            real_tokens += int(lengths[b].sum())
            padded_tokens += int(len(b) * lengths[b].max())
            target = torch.as_tensor(y_all[rows], device=dev)
            out = net(**batch, labels=target)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), MAX_GRAD_NORM)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            run_loss += float(out.loss.detach()) * len(rows)
            n_seen += len(rows)
            bar.set_postfix(epoch=f"{epoch + 1}/{epochs}", loss=f"{run_loss / n_seen:.4f}")
            bar.update(1)
        losses.append(run_loss / max(n_seen, 1))
    bar.close()
    net.eval()
    loop_seconds = time.time() - loop_started
    loop_cpu = time.process_time() - loop_cpu
    train_seconds = time.time() - started

    hyper = {"epochs": epochs, "lr": lr, "batch_size": int(batch_size),
             "max_length": int(max_length), "truncation": truncation,
             "oversample": oversample, "seed": int(seed), "weight_decay": 0.0,
             "warmup_steps": 0, "schedule": "linear decay to 0", "dropout": DROPOUT,
             "max_grad_norm": MAX_GRAD_NORM, "optimizer": "AdamW",
             "defaults_by_size": hp_default["size"]}
    record = {
        "labels": order,
        "label_counts": label_counts,
        "n_train": int(len(data)),
        "n_train_oversampled": int(len(idx)),
        "n_missing_label": n_missing_label,
        "n_missing_text": n_missing_text,
        "n_truncated": n_trunc,
        "data_source": source,
        "n_rows_source": int(len(frame)),
        "model": model_label(model),
        "base_model_path": base_path,
        "model_type": getattr(config, "model_type", None),
        "hyperparameters": hyper,
        "device": dev,
        "train_loss_per_epoch": [round(x, 6) for x in losses],
        "train_seconds": round(train_seconds, 1),
        "train_loop_seconds": round(loop_seconds, 3),
        "train_loop_cpu_seconds": round(loop_cpu, 3),
        "padding_ratio": round(padded_tokens / max(real_tokens, 1), 4),
        "validation": None,
        "versions": versions(),
        "created": created,
    }
    clf = Classifier(net, tok, order, max_length=int(max_length), truncation=truncation,
                     device=dev, record=record)
    if valid_data is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = clf.predict(valid_data, warn=False)
            rep = evaluate(valid_data["label"], pred["predicted"], labels=order)
        clf.record["validation"] = {"n": rep.n, "accuracy": rep.accuracy, "macro_f1": rep.macro_f1,
                                "per_class": rep.to_dict()["per_class"],
                                "source": "valid" if valid is not None else
                                f"valid_fraction {valid_fraction}"}
        say(f"validation ({rep.n} documents): accuracy {rep.accuracy:.4f}, "
            f"macro-F1 {rep.macro_f1:.4f}")
    clf.record["finished"] = now_utc()
    return clf


# ------------------------------------------------------------------------------------------
# CLI


def add_cli(sub) -> None:
    from .cli import (add_corpus_options, add_device_option, add_model_option,
                      add_quiet_option, positive)
    from .tokenization import STRATEGIES

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
    from .cli import add_labels_file_option

    add_labels_file_option(p, "--train")
    add_model_option(p)
    p.add_argument("--epochs", type=positive(int), default=None,
                   help="passes over the data (default by model size: 4)")
    p.add_argument("--lr", type=positive(float), default=None,
                   help="peak learning rate (default by model size: 8e-5 small, 3e-5 base, "
                        "1e-5 large)")
    p.add_argument("--batch-size", type=positive(int), default=BATCH_SIZE,
                   help="documents per step (16)")
    p.add_argument("--max-length", type=int, default=512,
                   help="tokens per document incl. special tokens (512; Longformer up to 4096)")
    p.add_argument("--truncation", default="head_tail", choices=STRATEGIES,
                   help="how long documents are cut (head_tail: first 128 + last 382 at 512)")
    p.add_argument("--oversample", type=positive(float), default=None,
                   help="oversample minority classes up to RATIO x the majority (paper: 0.25)")
    p.add_argument("--labels", default=None,
                   help="comma-separated label order (default: sorted training labels)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--valid", default=None, help="labelled validation file (metrics only)")
    g.add_argument("--valid-fraction", type=float, default=DEFAULT_VALID_FRACTION,
                   help="share of --train held out for validation metrics (0: none)")
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    add_device_option(p)
    add_quiet_option(p)
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.set_defaults(func=_run_finetune)


def _run_finetune(args) -> int:
    from .cli import corpus_kwargs
    from .frames import read_frame
    from .modeldir import check_out_dir

    check_out_dir(args.out, args.overwrite)
    kw = corpus_kwargs(args)
    train = read_frame(args.train, require_label=True, labels_file=args.labels_file, **kw)
    valid = read_frame(args.valid, require_label=True, **kw) if args.valid else None
    labels = [s.strip() for s in args.labels.split(",") if s.strip()] if args.labels else None
    clf = finetune(train, model=args.model, epochs=args.epochs, lr=args.lr,
                   batch_size=args.batch_size, max_length=args.max_length,
                   truncation=args.truncation, oversample=args.oversample, valid=valid,
                   valid_fraction=args.valid_fraction, labels=labels, seed=args.seed,
                   device=args.device, quiet=args.quiet, source=str(args.train))
    clf.save(args.out, overwrite=args.overwrite)
    print(f"saved the fine-tuned model to {args.out}")
    return 0


make_callable(__name__, "finetune")
