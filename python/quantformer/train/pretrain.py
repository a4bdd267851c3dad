"""Further pretraining of an encoder on a researcher's unlabelled texts (``quantformer pretrain``):
check the settings, run the objective, record the encoder.

Task-adaptive pretraining (TAPT: the task's own unlabelled texts) and domain-adaptive
pretraining (DAPT: a larger domain corpus) continue the language-model pretraining before
fine-tuning (Gururangan et al. 2020, "Don't stop pretraining"). The objectives, keyed by name
in :data:`OBJECTIVES`: ``mlm``, masked language modelling (Devlin et al. 2019;
:mod:`quantformer.train.pretrain_mlm`), and ``tsdae``, the transformer-based denoising
auto-encoder (Wang et al. 2021; :mod:`quantformer.train.pretrain_tsdae`).

``objective="auto"`` picks ``mlm`` for every encoder, the bundled sentence-transformers body
included, and ``epochs`` is 1 by default: both chosen by measurement on three tasks (the
fine-tuned macro-F1 after either objective, and after ten epochs against one; see
bench/RESULTS.md, "Further pretraining"). TSDAE, the domain adaptation sentence-transformers
documents for embedding models, stays available as ``objective="tsdae"``. Not measured: the 100
epochs of Gururangan et al. (2020), who pretrained RoBERTa, whose masked-LM head is pretrained
(the bundled body's is learnt from the corpus itself), nor a larger domain corpus.

The corpus is streamed (:mod:`quantformer.train.pretrain_corpus`): read in chunks, held
``buffer_docs`` documents at a time, each buffer shuffled and length-grouped into batches with
dynamic padding. The run's steps, checkpoints and resumption, one process or several
(``torchrun``, ``accelerate launch``), are :mod:`quantformer.train.pretrain_run`'s, through
the training loop of every recipe (:mod:`quantformer.train.loop`).
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from pathlib import Path

from .._core.errors import InputError, ParamWarning, unused_error
from ..io.modeldir import encoder_record, hf_quiet, now_utc, versions
from ..io.writable import check_model_dir
from ..io.modeldir import write_encoder_dir
from ..models.hub import (check_max_length, load_config, load_tokenizer, max_positions,
                          model_label, resolve_device, resolve_model)
from .data import set_seed
from .ddp import check_launcher, is_main_process, join, leave, world_size
from .pretrain_corpus import BUFFER_DOCS, Corpus, scan, token_counter
from .pretrain_mlm import MLM
from .pretrain_run import (Run, changed_settings, check_checkpoint, check_same_everywhere,
                           checkpoint_path, setting_fields, train_phases)
from .pretrain_tsdae import TSDAE

#: the pretraining objectives by name
OBJECTIVES = {"mlm": MLM, "tsdae": TSDAE}
#: what ``objective`` may be: ``auto`` or an objective's name
OBJECTIVE_CHOICES = ("auto", *OBJECTIVES)

REASONS = {
    "auto": "masked language modelling, the task-/domain-adaptive pretraining of Gururangan et "
            "al. (2020), for every encoder: on Abortion, Toxic and HanDeSeT (3 seeds each) "
            "the fine-tuned macro-F1 changed by -0.005, +0.001 and +0.028 after it against "
            "-0.023, -0.004 and -0.004 after TSDAE (SetFit within its seeds' spread with "
            "either); a gain is not assured, so compare the encoder with its base on your "
            "task; objective tsdae is the sentence-embedding alternative",
    "given": "asked for",
}


def check_settings(*, objective, mask_prob, valid_fraction, epochs, max_steps, batch_size,
                   checkpoint_every, lr, buffer_docs, whole_word=False,
                   head_steps=None) -> None:
    """The checks that need no model and no corpus.

    Raises:
        InputError: naming the parameter out of range, or the masked-LM settings
            (``mask_prob`` other than 0.15, ``whole_word``, ``head_steps``) with
            ``objective="tsdae"``, which deletes words instead of masking them.
    """
    if objective not in OBJECTIVE_CHOICES:
        raise InputError(f"{{objective}} must be one of {', '.join(OBJECTIVE_CHOICES)}, not "
                         f"{objective!r}", params=["objective"])
    if objective == "tsdae":
        given = [n for n, v, left_out in (("mask_prob", mask_prob, 0.15),
                                          ("whole_word", whole_word, False),
                                          ("head_steps", head_steps, None)) if v != left_out]
        if given:
            tsdae = "{objective} tsdae deletes words instead (Wang et al. 2021)"
            raise unused_error(given, f"is a setting of masked language modelling; {tsdae}: "
                                      "leave it out or use {objective} mlm",
                               f"are settings of masked language modelling; {tsdae}: leave "
                               "them out or use {objective} mlm", also=["objective"])
    if head_steps is not None and not head_steps >= 0:
        raise InputError(f"{{head_steps}} must be 0 (no warm-up) or more, not {head_steps:g}",
                         params=["head_steps"])
    if not 0 < mask_prob < 1:
        raise InputError(f"{{mask_prob}} must be between 0 and 1 (exclusive), not {mask_prob:g}; "
                         "BERT masks 0.15", params=["mask_prob"])
    if not 0 < valid_fraction < 0.5:
        raise InputError(f"{{valid_fraction}} must be above 0 and below 0.5, not "
                         f"{valid_fraction:g}", params=["valid_fraction"])
    if epochs is not None and max_steps is not None:
        raise InputError("give {epochs} or {max_steps}, not both", params=["epochs", "max_steps"])
    for name, value in (("epochs", epochs), ("max_steps", max_steps), ("batch_size", batch_size),
                        ("checkpoint_every", checkpoint_every), ("lr", lr),
                        ("buffer_docs", buffer_docs)):
        if value is not None and not value > 0:
            raise InputError(f"{{{name}}} must be greater than 0, not {value:g}", params=[name])


def check_out(out, resume: bool) -> Path:
    """An ``out`` that does not exist, or a finished encoder folder (with ``resume``: then
    there is nothing to do); no checkpoint of an interrupted run beside it unless ``resume``.

    Raises:
        InputError: ``out`` exists and is no encoder folder, or is a finished encoder and
            ``resume`` is False; a checkpoint waits beside it and ``resume`` is False; it
            cannot be written.
    """
    p = Path(out)
    if p.exists() and encoder_record(p) is None:
        raise InputError(f"{{out}} '{out}' exists and is not an encoder folder written by "
                         "`quantformer pretrain`; choose another {out}", params=["out"])
    if p.exists() and not resume:
        raise InputError(f"{{out}} '{out}' is a finished encoder already; to pretrain again, "
                         "delete it or choose another {out}", params=["out"])
    checkpoint = checkpoint_path(p)
    if checkpoint.exists() and not resume:
        raise InputError(f"an interrupted run left a checkpoint in '{checkpoint}'; pass "
                         "{resume} to continue it, or delete that folder to start over",
                         params=["resume", "out"])
    if p.exists():
        return p
    return check_model_dir(p)


# settings that follow from others (the step counts, a default lr, auto's objective); the


def choose_objective(model: str, objective: str) -> tuple[str, str, object]:
    """``(objective, why, config)`` for a model: see the module docstring.

    Raises:
        InputError: the model has no masked-LM architecture (a GPT, say).
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    config = load_config(model)
    kind = getattr(config, "model_type", "?")
    if kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise InputError(
            f"{{model}} '{model_label(model)}' ({kind}) has no masked-LM encoder architecture, "
            "so it cannot be pretrained further here; use an encoder: BERT, RoBERTa, "
            "DistilBERT, DeBERTa, ELECTRA, XLM-RoBERTa, a sentence-transformers body, or the "
            "default all-MiniLM-L6-v2", params=["model"])
    if objective != "auto":
        return objective, REASONS["given"], config
    return "mlm", REASONS["auto"], config


def pretrain(corpus, out: str | os.PathLike, model: str | None = None, *,
             objective: str = "auto", epochs: float | None = None, max_steps: int | None = None,
             max_length: int = 128, mask_prob: float = 0.15, whole_word: bool = False,
             valid_fraction: float = 0.05, seed: int = 42, lr: float | None = None,
             batch_size: int = 32, checkpoint_every: int = 500, head_steps: int | None = None,
             buffer_docs: int = BUFFER_DOCS, resume: bool = False, device: str = "auto",
             quiet: bool = False, text_col=None, id_col=None, fmt=None, quoting: str = "auto",
             say=print) -> dict:
    """Pretrain an encoder further on unlabelled texts and write an encoder folder.

    The corpus is streamed (:mod:`quantformer.train.pretrain_corpus`): a Parquet file is read
    one record batch at a time, a CSV, TSV, text or JSON-lines file one chunk at a time (an
    ``.rds`` file is read whole) and only ``buffer_docs`` documents are held at once. Started by
    ``torchrun`` or ``accelerate launch`` with several processes, each process trains on its
    share of every batch and ``DistributedDataParallel`` averages the gradients
    (:mod:`quantformer.train.ddp`); the main process alone writes and prints.

    Args:
        corpus: a corpus file (Parquet, CSV, TSV, text, JSONL, RDS; read in chunks) or a
            corpus frame with a ``text`` column; at least 100 documents with text.
        out: the encoder folder to write (a Hugging Face / sentence-transformers model folder
            plus ``quantformer.json`` of kind ``"encoder"``).
        model: the base model (default: the bundled all-MiniLM-L6-v2).
        objective: ``auto`` (default: ``mlm``, chosen by measurement: see bench/RESULTS.md,
            "Further pretraining"), ``mlm`` or ``tsdae``.
        epochs: passes over the training documents (default 1, chosen by the epochs sweep: see
            bench/RESULTS.md, "Further pretraining"); or ``max_steps`` batches.
        max_length: tokens per document, special tokens included (128; at most the model's
            limit). A longer document is read up to it (its first tokens); a
            :class:`~quantformer._core.errors.ParamWarning` before training says how many
            were, and the record's ``corpus.n_truncated``.
        mask_prob: share of tokens masked (0.15, Devlin et al. 2019), in (0, 1); masked LM
            only.
        whole_word: mask every subword of a word together (whole-word masking); masked LM
            only.
        valid_fraction: share of documents held out for the loss before and after (0.05).
        seed: seed of the split, batch order, masks, deletions and dropout (42).
        lr: learning rate (default 5e-5 for mlm, 3e-5 for tsdae, as Wang et al. 2021).
        batch_size: documents per step in each process (32; the step's batch is this times
            the number of processes).
        checkpoint_every: steps between checkpoints (500), written to ``<out>.checkpoint``.
        head_steps: warm-up steps of a new MLM head with the encoder frozen (default: one
            epoch, at most the main phase's steps); 0 skips the warm-up. A model whose
            masked-LM head is pretrained has no new head: a ``head_steps`` given then is not
            used, and a ParamWarning says so. Masked LM only.
        buffer_docs: documents read, shuffled and length-grouped together (10,000): memory
            grows with it, not with the corpus.
        resume: continue an interrupted run from its checkpoint (same corpus, settings and
            number of processes); on a finished encoder of this corpus and these settings,
            say that there is nothing to do and return its record. Settings are compared as
            given (``requested`` in the record): what follows from them (the epochs of another
            ``batch_size``) is not named.
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (several processes on CUDA
            each take ``cuda:LOCAL_RANK``).
        text_col, id_col, fmt, quoting: as :func:`quantformer.io.frames.read_frame`.

    Returns:
        The encoder record (also written as the folder's ``quantformer.json``).

    Raises:
        InputError: a setting out of range, fewer than 100 documents with text, a model
            without a masked-LM architecture, ``max_length`` above the model's limit, an
            ``out`` that exists (a finished encoder without ``resume``, or no encoder folder)
            or cannot be written, a checkpoint beside it without ``resume``, a checkpoint or
            finished encoder of another corpus or other settings (the changed ones named), a
            checkpoint of another number of processes (both named; before the model is
            loaded), a launch whose settings training would not follow (``accelerate launch
            --mixed_precision bf16``; :func:`quantformer.train.ddp.check_launcher`), processes
            that read different corpora or see different checkpoints.
    """
    check_settings(objective=objective, mask_prob=mask_prob, valid_fraction=valid_fraction,
                   epochs=epochs, max_steps=max_steps, batch_size=batch_size,
                   checkpoint_every=checkpoint_every, lr=lr, buffer_docs=buffer_docs,
                   whole_word=whole_word, head_steps=head_steps)
    check_launcher(device)
    out_path = check_out(out, resume)
    chosen, why, config = choose_objective(model, objective)
    check_max_length(max_length, config, longer=READ_FIRST)
    data = scan(corpus, {"text_col": text_col, "id_col": id_col, "fmt": fmt, "quoting": quoting},
                lengths=token_counter(_tokenizer(model), max_length),
                valid_fraction=valid_fraction, seed=seed, buffer_docs=int(buffer_docs))
    settings = {"objective": chosen, "max_length": max_length, "mask_prob": mask_prob,
                "whole_word": whole_word, "valid_fraction": valid_fraction, "seed": seed,
                "lr": lr or OBJECTIVES[chosen].lr, "batch_size": batch_size,
                "checkpoint_every": checkpoint_every, "buffer_docs": int(buffer_docs),
                "requested": {"objective": objective, "lr": lr, "epochs": epochs,
                              "max_steps": max_steps, "head_steps": head_steps}}
    if out_path.exists():  # under a launcher, the main process alone says so
        return _finished(out, out_path, data, settings,
                         say if is_main_process() else _silent)
    if data.n_cut and is_main_process():
        _warn_cut(data, max_length, max_positions(config))
    settings.update(world_size=world_size(), corpus_sha256=data.sha256)
    if resume:  # before the model is loaded: what was asked for (the rest once it is)
        check_checkpoint(checkpoint_path(out_path), settings)
    world, dev = join(resolve_device(device))
    try:
        settings.update(world_size=world.size)
        run = _new_run(data, model, chosen, dev, out_path, settings,
                       (epochs, max_steps, head_steps), say, world, quiet)
        return _train_and_write(run, resume, why, model, out_path)
    finally:
        leave(world)


#: what pretraining does with a document longer than ``max_length`` (the tokenizer's own
#: truncation, as ``run_mlm.py --line_by_line`` does)
READ_FIRST = "pretraining reads the first {max_length} tokens of each document"


def _warn_cut(data: Corpus, max_length: int, limit: int | None) -> None:
    """One warning, before any training, for the documents longer than ``max_length`` tokens:
    how many, that only their first tokens are read, and the fix where there is one."""
    share = 100 * data.n_cut / data.n_docs
    fix = ("; a larger {max_length} reads more of them" if limit is None else
           f"; a larger {{max_length}} (up to the model's {limit}) reads more of them"
           if max_length < limit else
           "; split longer documents into parts (paragraphs) to read all of them")
    warnings.warn(ParamWarning(
        f"{data.n_cut} of {data.n_docs} documents ({share:.{0 if share >= 1 else 1}f}%) are "
        f"longer than {{max_length}} {max_length} tokens: "
        + READ_FIRST.replace("{max_length}", str(max_length)) + " and leaves the rest" + fix,
        params=["max_length"]), stacklevel=3)


def _finished(out, out_path: Path, data: Corpus, settings: dict, say) -> dict:
    """The record of the finished encoder ``out`` (``resume``): nothing to do when it is of
    this corpus and these settings.

    Raises:
        InputError: it is of another corpus or was made with other settings (named).
    """
    done = encoder_record(out_path)
    if done.get("corpus", {}).get("sha256") != data.sha256:
        raise InputError(f"{{out}} '{out}' is an encoder of another corpus; choose another "
                         "{out}", params=["out", "resume"])
    changed = changed_settings(done, settings)
    if changed:  # refused, as a checkpoint of other settings is
        raise InputError(f"{{out}} '{out}' is a finished encoder of this corpus made with other "
                         f"settings ({', '.join(changed)}); to pretrain with these, choose "
                         "another {out} or delete it", params=["out", *setting_fields(settings)])
    say(f"{out} is already an encoder of this corpus; nothing to do")
    return done


def _silent(*args, **kwargs) -> None:
    """What the processes other than the main one say: nothing."""


def _tokenizer(model):
    with hf_quiet():
        return load_tokenizer(model)


def _new_run(data: Corpus, model, objective, device, out_path, settings, length, say, world,
             quiet) -> Run:
    """The run with its model parts and step counts; ``length`` is (epochs, max_steps,
    head_steps) as given."""
    epochs, max_steps, head_steps = length
    settings["model"] = resolve_model(model)
    run = Run(settings=settings, corpus=data, device=device, objective=OBJECTIVES[objective],
              checkpoint=checkpoint_path(out_path),
              say=say if world.main else _silent, quiet=quiet, world=world)
    set_seed(settings["seed"])
    with hf_quiet():
        run.parts = run.objective.parts(run)
    per_epoch = data.steps_per_epoch(run.global_batch)
    steps = int(max_steps) if max_steps else max(1, int(round((epochs or 1) * per_epoch)))
    if head_steps and not run.parts["new_head"] and world.main:
        warnings.warn(ParamWarning(
            f"{{head_steps}} {head_steps} not used: '{model_label(model)}' has a pretrained "
            "masked-LM head, so there is no new head to warm up", params=["head_steps"]),
            stacklevel=3)
    if head_steps is None:
        head_steps = min(per_epoch, steps)
    settings.update(steps=steps, epochs=round(steps / per_epoch, 4),
                    head_steps=int(head_steps) if run.parts["new_head"] else 0)
    return run


def _train_and_write(run: Run, resume: bool, why: str, model, out_path) -> dict:
    s = run.settings
    evaluate = run.objective.evaluate
    info = check_checkpoint(run.checkpoint, s, exact=True) if resume else None
    check_same_everywhere(run, info)
    started = time.perf_counter()
    before = evaluate(run)
    run.say(f"held-out {s['objective']} loss before: {before['loss']}"
            + (f" (perplexity {before['perplexity']})" if "perplexity" in before else ""))
    trained = time.perf_counter()
    losses = train_phases(run, info)
    losses["train_seconds"] = round(time.perf_counter() - trained, 3)
    after = evaluate(run)
    record = {
        "base_model": model_label(model), "base_model_path": s["model"],
        "objective": s["objective"], "objective_reason": why, "corpus": run.corpus.describe(),
        "settings": {k: v for k, v in s.items() if k not in ("model", "corpus_sha256")},
        "head_warmup": ({"new_head": True, "steps": s["head_steps"], "lr": run.objective.head_lr,
                         "encoder_frozen": True} if s["head_steps"] else {"new_head": False}),
        "processes": {**run.world.describe(), "batch_size_per_process": s["batch_size"],
                      "batch_size_per_step": run.global_batch},
        "valid_before": before, "valid_after": after, **losses,
        "seconds": round(time.perf_counter() - started, 1), "device": run.device,
        "created": now_utc(), "versions": versions(),
    }
    if run.world.main:
        write_encoder_dir(run.objective.save(run), record, out_path, overwrite=out_path.exists())
        shutil.rmtree(run.checkpoint, ignore_errors=True)
    run.world.barrier()
    return record
