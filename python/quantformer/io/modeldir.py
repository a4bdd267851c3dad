"""Model directories: save and load fine-tuned classifiers.

A model directory is what ``save_pretrained`` writes for the model and its tokenizer (so plain
``transformers.AutoModelForSequenceClassification.from_pretrained(dir)`` loads it, with
``id2label``/``label2id`` in ``config.json``), plus

``quantformer.json``
    the record of the run: label order and counts, training arguments and seed, data source and
    row counts, validation metrics, library versions, dates, and ``"complete": true``. It is the
    *completion record*: a directory without it (or with ``complete`` not true) does not load.
``README.md``
    a model card that says what the model was trained on and how.

The directory is written into a temporary folder next to the target and renamed into place at
the end, so an interrupted run never leaves a directory that loads as complete.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from pathlib import Path

from .._core.atomic import write_json, atomic_dir, json_default
from .._core.errors import ModelDirError
from .._core.version import versions as package_versions
from .writable import check_model_dir

RECORD = "quantformer.json"
FORMAT_VERSION = 1


def versions() -> dict:
    """Versions of quantformer, Python and the libraries that shape a trained model."""
    import platform

    found = package_versions(("torch", "transformers", "tokenizers", "numpy", "pandas",
                              "scikit-learn"))
    return {"quantformer": found.pop("quantformer"), "python": platform.python_version(), **found}


@contextlib.contextmanager
def hf_quiet():
    """Silence transformers' loading/saving progress bars and expected warnings (such as
    "newly initialized classifier weights" when a head is added for fine-tuning)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def now_utc() -> str:
    """The current time as an ISO 8601 UTC string (seconds)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _card_title(record: dict) -> str:
    task = record.get("task", "classification")
    if task == "regression":
        return (f"# Fine-tuned regression model (training mean {record.get('target_mean'):.4g}, "
                f"standard deviation {record.get('target_scale'):.4g})")
    kind = "multi-label classifier" if task == "multilabel" else "classifier"
    return f"# Fine-tuned {kind}: {', '.join(record.get('labels', []))}"


def _method_lines(record: dict) -> list[str]:
    """The model card's paragraph on an NLI model's hypotheses (none for other methods)."""
    if record.get("method") != "nli":
        return []
    phrases = "; ".join(f"{k}: \"{v}\"" for k, v in record.get("label_phrases", {}).items())
    return [f"An NLI model fine-tuned on the classes written as hypotheses (Laurer et al. "
            f"2023): template \"{record.get('hypothesis')}\", label phrases {phrases}; "
            f"{record.get('n_pairs')} premise-hypothesis pairs ({record.get('nli_pairs')}).", ""]


def model_card(record: dict) -> str:
    """The README.md model card for a model directory, from its ``quantformer.json`` record."""
    hp = record.get("hyperparameters", {})
    counts = record.get("label_counts", {})
    val = record.get("validation")
    lines = [
        _card_title(record),
        "",
        f"Fine-tuned with quantformer {record.get('versions', {}).get('quantformer', '?')} "
        f"on {record.get('created', '?')} from the pretrained model "
        f"`{record.get('model')}`.",
        "",
        *_method_lines(record),
        "## Training data",
        "",
        f"- source: {record.get('data_source') or '(a data frame)'}",
        f"- documents used for training: {record.get('n_train')} "
        f"(after oversampling: {record.get('n_train_oversampled')})",
        f"- documents with a missing label, left out: {record.get('n_missing_label', 0)}",
        f"- documents with a missing or empty text, left out: {record.get('n_missing_text', 0)}",
        "",
        "| label | training documents |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in counts.items()],
        "",
        "## Training procedure (Wankmüller 2022, section 6.4)",
        "",
        "AdamW without weight decay, learning rate decayed linearly to 0 without warm-up, "
        "dropout 0.1, length-grouped batches with dynamic padding.",
        "",
        "| setting | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in hp.items()],
        "",
        "## Validation",
        "",
    ]
    if val:
        scores = ", ".join(f"{k} {val[k]:.4f}" for k in ("accuracy", "macro_f1", "micro_f1",
                                                          "rmse", "pearson") if k in val)
        lines += [f"On {val.get('n')} held-out documents: {scores}.", ""]
    else:
        lines += ["No validation set was used.", ""]
    lines += [
        "## Use",
        "",
        "```",
        "quantformer predict --model THIS_FOLDER --input docs.parquet --out preds.parquet",
        "```",
        "",
        "or in Python `quantformer.load(folder).predict(frame)`, or with plain transformers "
        "`AutoModelForSequenceClassification.from_pretrained(folder)`.",
        "",
    ]
    return "\n".join(lines)


def write_model_dir(model, tokenizer, record: dict, out: str | os.PathLike,
                    overwrite: bool = False) -> Path:
    """Save a fine-tuned model, its tokenizer, ``quantformer.json`` and README.md atomically.

    Everything goes into a temporary folder beside ``out`` first; the completion record
    (``"complete": true``) is written last and the folder is then renamed to ``out`` (an
    existing ``out`` is replaced only when ``overwrite`` is True).

    Returns:
        The path of the model directory.

    Raises:
        InputError: ``out`` exists and ``overwrite`` is False, or it is a file.
    """
    target = check_model_dir(out, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(target) as tmp:
        with hf_quiet():
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        record = {**record, "format_version": FORMAT_VERSION, "complete": True}
        (tmp / "README.md").write_text(model_card(record), encoding="utf-8")
        (tmp / RECORD).write_text(json.dumps(record, indent=2, default=json_default),
                                  encoding="utf-8")
    return target


def read_record(path: str | os.PathLike) -> dict:
    """Read and check the ``quantformer.json`` record of a model directory.

    Raises:
        ModelDirError: the folder does not exist, has no completion record (an unfinished or
            interrupted run, or a folder not written by quantformer), or is not a classifier.
    """
    p = Path(path)
    if not p.exists():
        raise ModelDirError(f"model directory not found: '{path}'; give the --out folder of "
                            "`quantformer finetune`")
    if not p.is_dir():
        raise ModelDirError(f"'{path}' is a file, not a model directory; give the --out folder "
                            "of `quantformer finetune`")
    rec_path = p / RECORD
    if not rec_path.exists():
        if (p / "config.json").exists():
            # e.g. a pretrained model from the hub or a package: never suggest overwriting it
            raise ModelDirError(
                f"'{path}' has no {RECORD} completion record: it is a model folder, but not one "
                "written by `quantformer finetune`. Fine-tune it first (`quantformer finetune "
                f"--model '{path}' --train F --out NEW_DIR`) and predict with NEW_DIR, or use "
                "`quantformer zeroshot` for a model without training"
            )
        raise ModelDirError(
            f"'{path}' has no {RECORD} completion record: it is not a quantformer model "
            "directory (an interrupted `quantformer finetune` leaves no folder under its --out "
            "name). Give the --out folder of a finished `quantformer finetune`"
        )
    try:
        record = json.loads(rec_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelDirError(f"'{rec_path}' is not valid JSON ({exc}); fine-tune again") from exc
    if not isinstance(record, dict) or record.get("complete") is not True:
        raise ModelDirError(
            f"'{path}' is incomplete: its {RECORD} has no \"complete\": true record. "
            "Fine-tune again with this --out and --overwrite"
        )
    if record.get("kind") == ENCODER_KIND:
        raise ModelDirError(
            f"'{path}' is an encoder written by `quantformer pretrain`, not a classifier: "
            f"fine-tune it first (`quantformer finetune --model '{path}' --train F --out "
            "NEW_DIR`) and predict with NEW_DIR, or embed with it (`quantformer embed`)"
        )
    labels = record.get("labels")
    fewest = {"regression": 0, "multilabel": 1}.get(record.get("task"), 2)
    if not isinstance(labels, list) or len(labels) < fewest:
        raise ModelDirError(f"'{path}' is not a classifier: {RECORD} lists no labels")
    if record.get("method", "standard") != "standard":
        return record  # a few-shot model directory: its loader (quantformer.fewshot) checks it
    cfg_path = p / "config.json"
    if not cfg_path.exists():
        raise ModelDirError(f"'{path}' has no config.json; fine-tune again")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelDirError(f"'{cfg_path}' is not valid JSON ({exc}); the folder was changed "
                            "after training: fine-tune again") from exc
    archs = (cfg.get("architectures") if isinstance(cfg, dict) else None) or []
    if not any(a.endswith("ForSequenceClassification") for a in archs):
        raise ModelDirError(
            f"'{path}' is not a sequence classifier (architectures: {', '.join(archs) or 'none'});"
            " give a folder written by `quantformer finetune`"
        )
    return record


def peek_record(model: str | os.PathLike | None) -> dict:
    """The ``quantformer.json`` record of a folder without checking it: ``{}`` for a model id,
    a folder without a record (a Hugging Face model) or a record that is not a JSON object."""
    path = Path(model) / RECORD if model else None
    if path is None or not path.is_file():
        return {}
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return {}
    return content if isinstance(content, dict) else {}


def record_path(model_dir: str | os.PathLike) -> Path:
    """Where a model directory keeps its record (to check it can be written before work)."""
    return Path(model_dir) / RECORD


def update_record(model_dir: str | os.PathLike, record: dict) -> Path:
    """Replace a model directory's record atomically (e.g. to add a calibration)."""
    return write_json(record, record_path(model_dir))


def record_hypotheses(record: dict) -> list[str] | None:
    """The filled hypothesis of every class (``labels`` order) of an NLI model directory's
    ``quantformer.json`` record; None for a model of another method."""
    if record.get("method") != "nli":
        return None
    return [record["hypothesis"].format(record["label_phrases"][c]) for c in record["labels"]]


# ------------------------------------------------------------------------------------------
# encoder folders (``quantformer pretrain``): a plain Hugging Face / sentence-transformers
# model folder plus a quantformer.json record of kind "encoder"

ENCODER_KIND = "encoder"


def encoder_record(path: str | os.PathLike) -> dict | None:
    """The ``quantformer.json`` record of an encoder folder written by ``quantformer pretrain``
    (``"kind": "encoder"``, ``"complete": true``); None for any other folder or path."""
    rec_path = Path(path) / RECORD
    if not rec_path.is_file():
        return None
    try:
        record = json.loads(rec_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if (isinstance(record, dict) and record.get("kind") == ENCODER_KIND
            and record.get("complete") is True):
        return record
    return None


def encoder_card(record: dict) -> str:
    """The README.md of an encoder folder, from its record."""
    corpus = record.get("corpus", {})
    before, after = record.get("valid_before", {}), record.get("valid_after", {})
    lines = [
        f"# Encoder further pretrained on a corpus ({record.get('objective')})",
        "",
        f"Pretrained further with quantformer "
        f"{record.get('versions', {}).get('quantformer', '?')} on {record.get('created', '?')} "
        f"from `{record.get('base_model')}`: {record.get('objective_reason', '')}",
        "",
        f"- corpus: {corpus.get('n_docs')} documents, {corpus.get('n_tokens')} tokens, "
        f"sha256 {corpus.get('sha256')}",
        f"- held-out loss before {before.get('loss')}, after {after.get('loss')}"
        + (f"; perplexity before {before.get('perplexity')}, after {after.get('perplexity')}"
           if "perplexity" in after else ""),
        "",
        "| setting | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in record.get("settings", {}).items()],
        "",
        "Use it as any model: `quantformer finetune --model THIS_FOLDER ...`, "
        "`quantformer embed --model THIS_FOLDER ...`.",
        "",
    ]
    return "\n".join(lines)


def write_encoder_dir(save, record: dict, out: str | os.PathLike,
                      overwrite: bool = False) -> Path:
    """Write an encoder folder atomically: ``save(tmp)`` writes the model files, then README.md
    and the ``quantformer.json`` record (``"kind": "encoder"``, ``"complete": true``) last.

    Raises:
        InputError: as :func:`quantformer.io.writable.check_model_dir`.
    """
    target = check_model_dir(out, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(target) as tmp:
        with hf_quiet():
            save(tmp)
        record = {**record, "kind": ENCODER_KIND, "format_version": FORMAT_VERSION,
                  "complete": True}
        (tmp / "README.md").write_text(encoder_card(record), encoding="utf-8")
        (tmp / RECORD).write_text(json.dumps(record, indent=2, default=json_default),
                                  encoding="utf-8")
    return target
