"""Fine-tuning an NLI model on the task written as hypotheses (``finetune --method nli``).

Laurer, van Atteveldt, Casas & Welbers (2023), "Less Annotating, More Classifying: Addressing
the Data Scarcity Issue of Supervised Machine Learning with Deep Transfer Learning and
BERT-NLI", *Political Analysis*: a classifier trained from few codes does better when the task
is rewritten as natural language inference, so that the model starts from what it learned on
NLI data instead of a new, random head. Each class gets a *label phrase* filled into a
*hypothesis template* (``"This text is about {}."`` with ``economy``); the document is the
premise. Training pairs say "entailment" for the document's own class and "not entailment"
(the head's contradiction output) for other classes; the model's own 2- or 3-way NLI head is
kept and fine-tuned (the entailment and contradiction outputs are found by name in the config,
as in :mod:`quantformer.infer.zeroshot`). Prediction scores every class's hypothesis and returns the
softmax of the entailment logits across the classes (``prob_<class>``), the class with the
highest one being ``predicted``: exactly zero-shot NLI (:func:`quantformer.infer.zeroshot`) with the
fine-tuned model.

Training pairs (``pairs``):

``balanced`` (default; Laurer et al.'s ``format_nli_trainset`` in their replication code,
    ``helpers.py``): for each class, every document of the class with that class's hypothesis
    (entailment), and as many documents of *other* classes, drawn at random without
    replacement (at most all of them), with the same hypothesis (not entailment). Every
    hypothesis sees as many entailment as not-entailment pairs; about 2 pairs per document.
``all``
    every document with every class's hypothesis: 1 entailment and k - 1 not-entailment pairs
    per document (k classes), k times the cost, and (k - 1):1 imbalanced.

Laurer et al.'s code trains the 3-way DeBERTa-v3-base-mnli-fever-anli with label id 1 as
"not entailment" (its ``neutral``); here the contradiction output is used (for a 2-way
``entailment``/``not_entailment`` head, the other output).

The loop is the standard one (:mod:`quantformer.train.loop`: AdamW without weight decay,
linear decay, no warm-up, gradient clipping; ``--early-stopping``, ``--precision``,
``--grad-accum`` as for the standard method) over pairs instead of documents. Defaults
(:data:`DEFAULTS`): learning rate 2e-5 and 7 epochs, the typical values Laurer et al. tuned
for DeBERTa-v3-base-NLI at 100-500 codes (their appendix table of hyperparameters: 1.2e-5 to
6.7e-5, 7-11 epochs, batch 8-32). ``--oversample`` is refused (``balanced`` pairs balance
the hypotheses already).

The model directory is a plain Hugging Face NLI model (``config.json`` keeps its NLI
``id2label``, so ``quantformer zeroshot --model DIR`` also runs on it) with ``quantformer.json``
recording ``"method": "nli"``, ``hypothesis``, ``label_phrases`` (class -> phrase), ``labels``
(the class order), ``nli_pairs``, ``n_pairs``, ``entailment_id`` and ``contradiction_id``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..infer.classifier import global_attention_hook
from ..infer.nli import NLIClassifier
from ..infer.zeroshot_common import DEFAULT_HYPOTHESIS, check_hypothesis
from ..infer.zeroshot_nli import nli_label_ids
from ..io.formats import read_text_file
from ..io.modeldir import hf_quiet, now_utc
from ..models.hub import load_config, load_network, load_tokenizer, model_label
from ..models.hub import resolve_device, resolve_model
from ..models.tasks import Classification
from ..models.tokenize import encode
from .arguments import DROPOUT
from .data import set_seed, training_data
from ..models.precision import choose_precision
from .loop import Batches
from .record import training_record
from .spec import TrainSpec
from .standard import check_needs_validation, check_settings, train_epochs, validate

METHOD = "nli"
PAIRS = ("balanced", "all")
#: lr and epochs when not given (Laurer et al. 2023's tuned values at 100-500 codes)
DEFAULTS = {"lr": 2e-5, "epochs": 7}
EXAMPLE_MODEL = "MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli"


# ------------------------------------------------------------------------------------------
# label phrases


def parse_label_phrases(value) -> dict:
    """Class -> phrase from a dict, a list of ``"class=phrase"`` items, or one string of
    comma-separated ``class=phrase`` items (``"pro=in favor of,con=against"``; use a list or
    :func:`read_label_phrases_file` for phrases with commas). Each item is split at its first
    ``=``; surrounding whitespace is stripped.

    Raises:
        InputError: an item without ``=``, an empty class or phrase, a class given twice.
    """
    if value is None:
        return {}
    if isinstance(value, dict):
        items = [(str(k), str(v)) for k, v in value.items()]
    else:
        parts = value.split(",") if isinstance(value, str) else list(value)
        items = []
        for part in parts:
            if "=" not in str(part):
                raise InputError(f"label phrase {str(part)!r} has no '='; write each as "
                                 "CLASS=PHRASE, e.g. {label_phrases} 'pro=in favor of,"
                                 "con=against'", params=["label_phrases"])
            items.append(tuple(str(part).split("=", 1)))
    phrases: dict = {}
    for cls, phrase in items:
        cls, phrase = cls.strip(), phrase.strip()
        if not cls or not phrase:
            raise InputError(f"label phrase '{cls}={phrase}' has an empty class or phrase; "
                             "write each as CLASS=PHRASE")
        if cls in phrases:
            raise InputError(f"class {cls!r} has two label phrases; give each class once")
        phrases[cls] = phrase
    return phrases


def read_label_phrases_file(path: str | Path) -> dict:
    """Class -> phrase from a UTF-8 file with one ``class=phrase`` a line (blank lines skipped;
    phrases may contain commas).

    Raises:
        InputError: the file is missing, or a line as in :func:`parse_label_phrases`.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"label phrases file not found: '{path}'")
    return parse_label_phrases([ln for ln in read_text_file(p).split("\n") if ln.strip()])


def phrases_for(classes: list, phrases: dict) -> dict:
    """The phrase of every class (the class name itself when no phrases are given).

    Raises:
        InputError: a class without a phrase, or a phrase for a class that does not exist.
    """
    if not phrases:
        return {c: c for c in classes}
    unknown = [c for c in phrases if c not in classes]
    if unknown:
        raise InputError(f"{{label_phrases}} names class(es) {', '.join(map(repr, unknown))} "
                         f"that are not among the classes ({', '.join(classes)}); fix the name",
                         params=["label_phrases"])
    lacking = [c for c in classes if c not in phrases]
    if lacking:
        raise InputError(f"class(es) {', '.join(map(repr, lacking))} have no label phrase; add "
                         f"them to {{label_phrases}} (e.g. '{lacking[0]}=PHRASE'), or leave "
                         "{label_phrases} out to use the class names as phrases",
                         params=["label_phrases"])
    return {c: phrases[c] for c in classes}


def nli_outputs(model) -> tuple[int, int]:
    """(entailment id, contradiction id) of an NLI model's head (from its config's labels).

    Raises:
        InputError: the model has no ``entailment`` label (not an NLI model).
    """
    config = load_config(model)
    ids = nli_label_ids(config)
    if ids is None:
        names = ", ".join(map(str, (getattr(config, "id2label", None) or {}).values()))
        raise InputError(f"{{method}} nli needs an NLI model (one with an 'entailment' label), "
                         f"but {model_label(model)} has labels: {names or 'none'}; pass {{model}} "
                         f"with an NLI model such as {EXAMPLE_MODEL}, or use {{method}} standard",
                         params=["method", "model"])
    return ids


# ------------------------------------------------------------------------------------------
# training pairs


def training_pairs(targets: np.ndarray, k: int, scheme: str,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which (document, class hypothesis) pairs train the model (see the module docstring).

    Args:
        targets: class index of each training document.
        k: number of classes.
        scheme: ``balanced`` or ``all``.

    Returns:
        (document index, class index, entailment flag), one entry per pair.
    """
    targets = np.asarray(targets, dtype=np.int64)
    if scheme == "all":
        docs = np.repeat(np.arange(len(targets)), k)
        classes = np.tile(np.arange(k), len(targets))
        return docs, classes, classes == targets[docs]
    docs, classes, entail = [], [], []
    for c in range(k):
        own, other = np.flatnonzero(targets == c), np.flatnonzero(targets != c)
        drawn = np.sort(rng.choice(other, size=min(len(own), len(other)), replace=False))
        docs += [own, drawn]
        classes.append(np.full(len(own) + len(drawn), c))
        entail += [np.ones(len(own), bool), np.zeros(len(drawn), bool)]
    return np.concatenate(docs), np.concatenate(classes), np.concatenate(entail)


# ------------------------------------------------------------------------------------------
# training


def nli_finetune(frame: pd.DataFrame, spec: TrainSpec, *, valid: pd.DataFrame | None = None,
                 source: str | None = None) -> NLIClassifier:
    """Fine-tune an NLI model on labelled documents written as hypotheses (Laurer et al. 2023):
    ``finetune(..., method="nli")``.

    Args:
        frame: corpus frame with ``text`` and ``label``; rows with a missing label or text are
            left out (counted in the record).
        spec: the run's settings (:class:`~quantformer.train.spec.TrainSpec`, given their
            defaults), of which the NLI recipe reads: ``model``, an NLI model (hub id or
            folder) whose config has an ``entailment`` label, e.g.
            ``MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli`` (required in practice: the bundled
            default is not an NLI model); ``hypothesis``, a template with exactly one ``{}``
            (default ``"This text is about {}."``); ``label_phrases``, class -> phrase (a dict,
            ``"a=x,b=y"`` or a list of ``"a=x"``; default: each class name is its own phrase;
            every class needs one); ``nli_pairs``, ``balanced`` (default, Laurer et al.) or
            ``all`` (module docstring); ``epochs``, ``lr`` (default 7 and 2e-5,
            :data:`DEFAULTS`); ``batch_size``, pairs per step (16); the reading's
            ``max_length``, tokens per pair (premise + hypothesis, special tokens included;
            512), the premise cut by its ``truncation`` (``head_tail``, ``head``, ``tail``);
            ``valid_fraction``, ``labels``, ``seed`` (the pair sampling, the data order and
            dropout), ``device``, ``quiet``, ``early_stopping``, ``precision``,
            ``grad_accum`` as for the standard method; ``oversample`` is refused (the pairs
            are balanced per hypothesis already).
        valid: labelled validation documents: macro-F1 after every epoch and in the record.
        source: where the data came from, for the record.

    Returns:
        An :class:`NLIClassifier` whose ``record`` has ``"method": "nli"``.

    Raises:
        InputError: a model without an ``entailment`` label (naming the fix: an NLI model), a
            bad template, a class without a label phrase or a phrase for an unknown class, an
            unknown ``pairs``, oversampling, fewer than two classes, and the standard
            method's bad arguments (non-positive epochs, lr, batch size, ...).
    """
    say = (lambda *a: None) if spec.quiet else (lambda *a: print(*a, flush=True))
    started, created = time.time(), now_utc()
    model, seed, valid_fraction = spec.model, spec.seed, spec.valid_fraction
    pairs = spec.nli_pairs
    hypothesis, phrases, outputs, settings = _check(spec, valid is not None
                                                    or bool(valid_fraction))
    dev = resolve_device(spec.device)
    settings["precision"] = choose_precision(spec.precision, dev, use="train").name
    kind = Classification(spec.labels)
    data, valid_data, counts = training_data(frame, valid, valid_fraction, int(seed), kind, say)
    kind.fit(data)
    phrases = phrases_for(kind.labels, phrases)
    set_seed(int(seed))
    rng = np.random.default_rng(int(seed))
    clf, batches, n_truncated = _setup(model, data, kind, phrases, hypothesis, pairs,
                                       outputs, settings, dev, rng, say)
    say(f"fine-tuning NLI model {clf.record['model']} on {len(data)} documents "
        f"({kind.describe()}) as {len(batches.rows)} premise-hypothesis pairs ({pairs}), "
        f"{settings['epochs']} epoch(s), lr {settings['lr']:g}, batch size {spec.batch_size}, "
        f"device {dev}")
    loop = train_epochs(clf, batches, valid_data, kind, settings, dev, rng, spec.quiet)
    clf.record = training_record(
        task=kind, settings=settings, size=settings.pop("size"), data=data, counts=counts,
        n_rows=len(frame), n_oversampled=len(data), n_truncated=n_truncated, source=source,
        model=clf.record, device=dev, loop=loop, started=started, created=created)
    clf.record["hyperparameters"].update(defaults_by_size=None, batch_size_unit="pairs")
    if valid_data is not None:
        validate(clf, kind, valid_data, "valid" if valid is not None
                  else f"valid_fraction {valid_fraction}", False, say)
    clf.record["finished"] = now_utc()
    return clf


def _check(spec: TrainSpec, has_valid: bool):
    """Every setting, checked before any work: returns (template, class -> phrase as given,
    (entailment id, contradiction id), settings with the NLI defaults filled in)."""
    hypothesis = check_hypothesis(DEFAULT_HYPOTHESIS if spec.hypothesis is None
                                  else spec.hypothesis)
    phrases = parse_label_phrases(spec.label_phrases)
    if spec.nli_pairs not in PAIRS:
        raise InputError(f"{{nli_pairs}} must be one of {', '.join(PAIRS)}, not "
                         f"{spec.nli_pairs!r}", params=["nli_pairs"])
    if spec.oversample is not None:
        raise InputError("{oversample} cannot be used with {method} nli: its training pairs "
                         "are balanced per class hypothesis already ({nli_pairs} balanced); "
                         "leave it out", params=["oversample", "method", "nli_pairs"])
    outputs = nli_outputs(spec.model)
    defaults = {name: value for name, value in DEFAULTS.items() if getattr(spec, name) is None}
    settings = check_settings(replace(spec, **defaults, task="classification"))
    check_needs_validation(has_valid, settings["early_stopping"], False)
    return hypothesis, phrases, outputs, settings


def _setup(model, data, task, phrases, hypothesis, pairs, outputs, settings, device, rng, say):
    """Build the pairs, tokenise them, load the NLI model; returns (NLIClassifier, Batches,
    number of truncated documents)."""
    entail, contra = outputs
    base_path, config = resolve_model(model), load_config(model)
    tokenizer = load_tokenizer(model)
    docs, classes, is_entail = training_pairs(task.targets(data), len(task.labels), pairs, rng)
    hyps = [hypothesis.format(phrases[c]) for c in task.labels]
    texts = data["text"].tolist()
    enc = encode(tokenizer, [texts[d] for d in docs], max_length=int(settings["max_length"]),
                 truncation=settings["truncation"], pairs=[hyps[c] for c in classes])
    n_truncated = len(np.unique(docs[enc.truncated]))
    if n_truncated:
        say(f"{n_truncated} of {len(data)} training documents are longer than "
            f"{settings['max_length']} tokens with their hypothesis and were truncated "
            f"({settings['truncation']})")
    overrides = {k: DROPOUT for k in ("hidden_dropout_prob", "attention_probs_dropout_prob",
                                      "dropout", "attention_dropout") if hasattr(config, k)}
    with hf_quiet():
        network = load_network(base_path, head="classification", **overrides)
    network.to(device)
    record = {"model": model_label(model), "base_model_path": base_path,
              "model_type": getattr(config, "model_type", None), "method": METHOD,
              "hypothesis": hypothesis, "label_phrases": phrases, "nli_pairs": pairs,
              "n_pairs": int(len(docs)), "n_pairs_entailment": int(is_entail.sum()),
              "entailment_id": int(entail), "contradiction_id": int(contra)}
    clf = NLIClassifier(network, tokenizer, task.labels, hypothesis=hypothesis,
                        phrases=[phrases[c] for c in task.labels], entailment_id=entail,
                        contradiction_id=contra, max_length=int(settings["max_length"]),
                        truncation=settings["truncation"], device=device, record=record)
    targets = np.where(is_entail, entail, contra).astype(np.int64)
    batches = Batches(enc, np.arange(len(docs)), targets,
                      tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
                      global_attention_hook(network.config))
    return clf, batches, n_truncated
