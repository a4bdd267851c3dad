"""Further pretraining of an encoder on a researcher's unlabelled texts (``quantformer pretrain``).

Task-adaptive pretraining (TAPT: the task's own unlabelled texts) and domain-adaptive
pretraining (DAPT: a larger domain corpus) continue the language-model pretraining before
fine-tuning (Gururangan et al. 2020, "Don't stop pretraining"). Two objectives:

``mlm``
    masked language modelling with transformers' own pieces (``AutoModelForMaskedLM``,
    ``DataCollatorForLanguageModeling``, whole-word masking as an option: Devlin et al. 2019).
    The vocabulary projection, which dominates a small model's step, is computed only at the
    masked positions: the encoder runs on the batch, its hidden states are gathered where the
    labels are not -100, and the MLM head is applied to those rows only. A checkpoint without
    an MLM head (a sentence-transformers body such as the bundled all-MiniLM-L6-v2) gets a new
    head that is first warmed up with the encoder frozen; the record says so. The masked-LM
    classes of BERT and RoBERTa have no pooler, so the encoder folder has none and standard
    fine-tuning starts from a new one, as after Hugging Face's ``run_mlm.py``: writing the
    base's pooler into the folder instead measured lower on Abortion (macro-F1 0.592 against
    0.609 over the same 3 seeds, bench/RESULTS.md "Further pretraining").
``tsdae``
    the transformer-based denoising auto-encoder (Wang et al. 2021) with sentence-transformers'
    own ``DenoisingAutoEncoderLoss``: the pooled sentence vector of a text with 60 % of its
    words deleted must let a tied decoder rebuild the text. Words are split at white space
    (the library's default noise needs NLTK data). The encoder keeps its base's
    ``max_seq_length`` (the window of embed, zeroshot and SetFit), whatever ``max_length`` it
    was trained at.

``objective="auto"`` picks ``mlm`` for every encoder, the bundled sentence-transformers body
included. The measurements decided it (bench/RESULTS.md "Further pretraining"; Abortion,
Toxic and HanDeSeT, 3 seeds each, one epoch on the task's own texts): the fine-tuned macro-F1
changed by -0.005, +0.001 and +0.028 after masked LM and by -0.023, -0.004 and -0.004 after
TSDAE, which also lowered the embedding zero-shot on Abortion and Toxic (by 0.053 and 0.042);
SetFit moved within its seeds' spread with either. TSDAE, the domain adaptation
sentence-transformers documents for embedding models, stays available as
``objective="tsdae"``.

``epochs`` is 1 by default, also by measurement: ten epochs (ten times the steps) lowered the
held-out perplexity but were no better for fine-tuning, -0.0105, -0.0045 and +0.009 on the same
three tasks, means below one epoch's within the seeds' spread (bench/RESULTS.md "Further
pretraining", epochs sweep). Not measured: the 100 epochs of Gururangan et al. (2020), who
pretrained RoBERTa, whose masked-LM head is pretrained (the bundled body's is learnt from the
corpus itself), nor a larger domain corpus.

The corpus is streamed (:mod:`quantformer.train.pretrain_corpus`): read in chunks, held
``buffer_docs`` documents at a time, each buffer shuffled and length-grouped into batches with
dynamic padding. Every batch's masks, word deletions and dropout come from a generator seeded
by (seed, step), so a run resumed from a checkpoint (written every ``checkpoint_every`` steps
beside ``out``) gives the same encoder as one that was never interrupted. Under ``torchrun`` or
``accelerate launch`` each process trains on its share of every batch and PyTorch's
``DistributedDataParallel`` averages the gradients (:mod:`quantformer.train.ddp`); a masked-LM
step then gives the gradient of one process training on the whole batch.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._core.atomic import atomic_dir
from .._core.errors import InputError, ParamWarning, unused_error
from ..io.modeldir import encoder_record, hf_quiet, now_utc, versions
from ..io.writable import check_model_dir
from ..io.modeldir import write_encoder_dir
from ..models.hub import (check_max_length, load_config, load_network, load_tokenizer, max_positions, model_label, resolve_device, resolve_model)
from .data import set_seed
from .ddp import World, check_launcher, is_main_process, join, leave, world_size
from .pretrain_corpus import BUFFER_DOCS, Corpus, scan, token_counter

OBJECTIVES = ("auto", "mlm", "tsdae")
DELETE_RATIO = 0.6
LR = {"mlm": 5e-5, "tsdae": 3e-5}
HEAD_LR = 5e-4
WARMUP_FRACTION = 0.06
# files of a sentence-transformers folder that keep an MLM-trained body a sentence transformer
ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")

REASONS = {
    "auto": "masked language modelling, the task-/domain-adaptive pretraining of Gururangan et "
            "al. (2020), for every encoder: on Abortion, Toxic and HanDeSeT (3 seeds each) "
            "the fine-tuned macro-F1 changed by -0.005, +0.001 and +0.028 after it against "
            "-0.023, -0.004 and -0.004 after TSDAE (SetFit within its seeds' spread with "
            "either); a gain is not assured, so compare the encoder with its base on your "
            "task; objective tsdae is the sentence-embedding alternative",
    "given": "asked for",
}


@dataclass
class Run:
    """Everything one pretraining run needs: settings, the streamed corpus, the processes and
    the model parts."""
    settings: dict
    corpus: Corpus
    device: str
    checkpoint: Path
    say: object
    quiet: bool = False
    world: World = field(default_factory=World)
    parts: dict = field(default_factory=dict)

    @property
    def global_batch(self) -> int:
        """Documents per step over all processes."""
        return self.settings["batch_size"] * self.world.size


def check_settings(*, objective, mask_prob, valid_fraction, epochs, max_steps, batch_size,
                   checkpoint_every, lr, buffer_docs, whole_word=False,
                   head_steps=None) -> None:
    """The checks that need no model and no corpus.

    Raises:
        InputError: naming the parameter out of range, or the masked-LM settings
            (``mask_prob`` other than 0.15, ``whole_word``, ``head_steps``) with
            ``objective="tsdae"``, which deletes words instead of masking them.
    """
    if objective not in OBJECTIVES:
        raise InputError(f"{{objective}} must be one of {', '.join(OBJECTIVES)}, not "
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


def checkpoint_path(out: Path) -> Path:
    """Where the checkpoints of a run into ``out`` are kept: ``<out>.checkpoint``."""
    return out.with_name(out.name + ".checkpoint")


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
# values asked for are kept in settings["requested"] and compared instead
DERIVED = ("steps", "epochs", "head_steps", "lr", "objective")
NAMES = {"world_size": "the number of processes", "corpus_sha256": "the corpus"}


def _requested(settings: dict) -> dict:
    """The settings as asked for: those that follow from others replaced by the values given
    (``requested``; a record without it keeps only the settings given as they are)."""
    given = {k: v for k, v in settings.items() if k not in (*DERIVED, "requested")}
    return {**given, **settings.get("requested", {})}


def _fields(settings: dict) -> list[str]:
    """The parameters that :func:`changed_settings` may name as fields."""
    return [k for k in _requested(settings) if k not in NAMES]


def changed_settings(before: dict, now: dict) -> list[str]:
    """The settings asked for ``now`` that differ from those of ``before`` (a record or a
    checkpoint), each as ``"{batch_size} 16 vs 8 now"`` (fields: the parameters); what follows
    from them (the epochs of a changed batch size, say) is not named."""
    a, b = _requested(before.get("settings", {})), _requested(now)
    return [("the corpus" if k == "corpus_sha256"
             else f"{NAMES.get(k, '{' + k + '}')} {a[k]} vs {b[k]} now")
            for k in sorted(k for k in b if k in a and a[k] != b[k])]


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


def delete_words(text: str, rng: np.random.Generator, ratio: float = DELETE_RATIO) -> str:
    """TSDAE's noise (Wang et al. 2021): delete each white-space word with probability
    ``ratio``, keeping one word at least."""
    words = text.split()
    if not words:
        return text
    keep = rng.random(len(words)) >= ratio
    if not keep.any():
        keep[rng.integers(len(words))] = True
    return " ".join(w for w, k in zip(words, keep) if k)


# ------------------------------------------------------------------------------------------
# masked language modelling


def _mlm_head(model):
    """The MLM head module that maps hidden states to vocabulary logits (BERT's ``cls``,
    RoBERTa's ``lm_head``), or None (the model's full forward is used then)."""
    for name in ("cls", "lm_head"):
        if hasattr(model, name):
            return getattr(model, name)
    return None


def masked_lm_sum(model, head, batch: dict):
    """Cross-entropy summed over the masked positions, the vocabulary projection computed
    there only (over every position when the model has no separate head)."""
    import torch.nn.functional as F

    labels = batch["labels"]
    inputs = {k: v for k, v in batch.items() if k not in ("labels", "special_tokens_mask")}
    if head is None:
        logits = model(**inputs).logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1),
                               ignore_index=-100, reduction="sum")
    hidden = model.base_model(**inputs)[0]
    at = labels != -100
    return F.cross_entropy(head(hidden[at]).float(), labels[at], reduction="sum")


def _masked_lm_module(model, head):
    """The model as one module whose forward is :func:`masked_lm_sum`: what
    ``DistributedDataParallel`` wraps."""
    import torch

    class MaskedLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, batch):
            return masked_lm_sum(self.model, head, batch)

    return MaskedLM()


def mlm_parts(run: Run) -> dict:
    """The masked-LM model (a new head when the checkpoint has none), tokenizer and collator."""
    from transformers import DataCollatorForLanguageModeling

    path = resolve_model(run.settings["model"])
    tok = load_tokenizer(path)
    model, info = load_network(path, "masked_lm", output_loading_info=True)
    base = model.base_model_prefix
    new_head = any(not k.startswith(base) for k in info.get("missing_keys", []))
    s = run.settings
    # whole words are always replaced by [MASK] (transformers has no random-word option)
    replace = {"mask_replace_prob": 1.0, "random_replace_prob": 0.0} if s["whole_word"] else {}
    collate = DataCollatorForLanguageModeling(tok, mlm_probability=s["mask_prob"],
                                              whole_word_mask=s["whole_word"], **replace)
    model = model.to(run.device)
    head = _mlm_head(model)
    return {"model": model, "net": _masked_lm_module(model, head), "tokenizer": tok,
            "collate": collate, "head": head, "new_head": new_head}


def _mlm_batch(run: Run, texts: list[str]) -> dict:
    """Tokenised, masked (the collator, from torch's generator) and on the device."""
    p, s = run.parts, run.settings
    enc = p["tokenizer"](texts, truncation=True, max_length=s["max_length"],
                         return_special_tokens_mask=True, return_offsets_mapping=s["whole_word"])
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")
            if k in enc]
    feats = [{k: enc[k][i] for k in keys} for i in range(len(texts))]
    if s["whole_word"]:  # the tokenizer's pad() leaves offsets unpadded
        longest = max(len(f["input_ids"]) for f in feats)
        for i, f in enumerate(feats):
            offsets = [list(o) for o in enc["offset_mapping"][i]]
            f["offset_mapping"] = offsets + [[0, 0]] * (longest - len(offsets))
    batch = p["collate"](feats)
    return {k: v.to(run.device) for k, v in batch.items()}


def mlm_step(run: Run, net, texts: list[str], step_seed: int):
    """This process's part of the loss of one global batch: every process masks the whole
    batch alike, trains on its rows, and divides by the masked tokens of the whole batch
    (times the processes, which the gradient average divides by again), so the averaged
    gradient is that of one process training on the whole batch."""
    import torch

    torch.manual_seed(step_seed)
    batch = _mlm_batch(run, texts)
    total = int((batch["labels"] != -100).sum())
    rows, weight = run.world.share(len(texts))
    mine = {k: v[rows] for k, v in batch.items()}
    return net(mine) * (weight * run.world.size / max(total, 1))


def mlm_evaluate(run: Run) -> dict:
    """Held-out masked-LM loss (mean over masked tokens) and perplexity, the same masks every
    time (a generator seeded by the run's seed)."""
    import torch

    model, head, total, count = run.parts["model"], run.parts["head"], 0.0, 0
    model.eval()
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(run.settings["seed"] + 7919)
        for texts in run.corpus.held_out(run.settings["batch_size"]):
            batch = _mlm_batch(run, texts)
            n = int((batch["labels"] != -100).sum())
            if n:
                total += float(masked_lm_sum(model, head, batch))
                count += n
    model.train()
    loss = total / max(count, 1)
    return {"loss": round(loss, 5), "perplexity": round(math.exp(min(loss, 50)), 4),
            "masked_tokens": count}


# ------------------------------------------------------------------------------------------
# TSDAE


def tsdae_parts(run: Run) -> dict:
    """The sentence transformer and its denoising auto-encoder loss (decoder tied)."""
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss
    except ImportError:  # pragma: no cover - sentence-transformers < 6
        from sentence_transformers.losses import DenoisingAutoEncoderLoss

    path = resolve_model(run.settings["model"])
    st = SentenceTransformer(path, device=run.device)
    window = st.max_seq_length  # the base's own, written back with the encoder (_save)
    st.max_seq_length = run.settings["max_length"]
    # tied: the decoder is the encoder's own checkpoint (naming it again only logs a warning)
    loss = DenoisingAutoEncoderLoss(st, tie_encoder_decoder=True).to(run.device)
    # the loss never reads the encoder's pooler: unused parameters under several processes
    return {"model": loss, "net": loss, "st": st, "new_head": False, "unused": True,
            "window": window}


def _tsdae_loss(run: Run, net, clean: list[str], noisy: list[str]):
    st = run.parts["st"]
    encode = getattr(st, "preprocess", None) or st.tokenize
    feats = [{k: v.to(run.device) for k, v in encode(x).items() if hasattr(v, "to")}
             for x in (noisy, clean)]
    return net(feats, None)


def tsdae_step(run: Run, net, texts: list[str], step_seed: int):
    """This process's loss on its rows of one global batch (the words deleted over the whole
    batch alike in every process)."""
    import torch

    torch.manual_seed(step_seed)
    rng = np.random.default_rng(step_seed)
    noisy = [delete_words(t, rng) for t in texts]
    rows, weight = run.world.share(len(texts))
    return _tsdae_loss(run, net, texts[rows], noisy[rows]) * weight


def tsdae_evaluate(run: Run) -> dict:
    """Held-out denoising loss (mean over batches; the same deletions every time)."""
    import torch

    model, losses, sizes = run.parts["model"], [], []
    model.eval()
    rng = np.random.default_rng(run.settings["seed"] + 7919)
    with torch.inference_mode():
        for texts in run.corpus.held_out(run.settings["batch_size"]):
            noisy = [delete_words(t, rng) for t in texts]
            losses.append(float(_tsdae_loss(run, model, texts, noisy)))
            sizes.append(len(texts))
    model.train()
    return {"loss": round(float(np.average(losses, weights=sizes)), 5)}


OBJECTIVE_FNS = {"mlm": (mlm_parts, mlm_step, mlm_evaluate),
                 "tsdae": (tsdae_parts, tsdae_step, tsdae_evaluate)}


# ------------------------------------------------------------------------------------------
# the training loop, checkpoints and the run


def _save_checkpoint(run: Run, phase: str, step: int, opt, sched) -> None:
    """The state after ``step`` steps of ``phase`` (the main process writes it)."""
    import torch

    if not run.world.main:
        return
    per_epoch = run.corpus.steps_per_epoch(run.global_batch)
    with atomic_dir(run.checkpoint) as tmp:
        torch.save({"model": run.parts["model"].state_dict(), "opt": opt.state_dict(),
                    "sched": sched.state_dict()}, tmp / "state.pt")
        (tmp / "checkpoint.json").write_text(json.dumps(
            {"phase": phase, "step": step, "epoch": step // per_epoch,
             "batch_in_epoch": step % per_epoch, "settings": run.settings}), encoding="utf-8")


def check_checkpoint(checkpoint: Path, settings: dict, exact: bool = False) -> dict | None:
    """The checkpoint's record (None without one) when it is of this corpus, these settings
    and this number of processes: the settings as asked for (before the model is loaded), or
    all of them (``exact``: those that follow from the model too).

    Raises:
        InputError: it was written by another number of processes (both named, and how to
            start as many), or is of another corpus or other settings (those named).
    """
    meta = checkpoint / "checkpoint.json"
    if not meta.is_file():
        return None
    info = json.loads(meta.read_text(encoding="utf-8"))
    then, now = info.get("settings", {}).get("world_size", 1), settings["world_size"]
    if then != now:
        how = (f"start {then} processes in all to resume it (torchrun --nproc_per_node, "
               "accelerate launch --num_processes)" if then > 1
               else "resume it in one process, without a launcher")
        raise InputError(
            f"the checkpoint beside {{out}} ('{checkpoint}') was written by {then} process"
            f"{'es' * (then > 1)} and this run has {now} (WORLD_SIZE): every step's batch is "
            f"{{batch_size}} times the processes, so {how}, or delete the checkpoint to start "
            "again", params=["out", "batch_size"])
    changed = ", ".join(changed_settings(info, settings))
    if changed or (exact and info.get("settings") != settings):
        raise InputError(f"the checkpoint beside {{out}} ('{checkpoint}') is of another "
                         f"corpus or other settings ({changed or 'the same ones asked for'}); "
                         "resume with the same ones, or delete the checkpoint to start again",
                         params=["out", "resume", *_fields(settings)])
    return info


def _same_everywhere(run: Run, info: dict | None) -> None:
    """Every process reads the same corpus and resumes from the same checkpoint (on several
    machines each reads its own copies).

    Raises:
        InputError: the corpus, or the checkpoint beside ``out``, differs between processes
            (the values by rank named).
    """
    seen = run.world.gather([run.settings["corpus_sha256"][:12],
                             info and f"{info['phase']} step {info['step']}"])
    corpora, checkpoints = [s[0] for s in seen], [s[1] for s in seen]
    if len(set(corpora)) > 1:
        raise InputError(f"the processes read different corpora (SHA-256 by rank: {corpora}): "
                         "on several machines {corpus} must be the same file on each",
                         params=["corpus"])
    if len(set(checkpoints)) > 1:
        raise InputError(f"the processes see different checkpoints beside {{out}} "
                         f"('{run.checkpoint}'; by rank: {checkpoints}): on several machines "
                         "{out} must be on a file system that all of them share",
                         params=["out", "resume"])


def _restore(run: Run, opt, sched) -> None:
    import torch

    state = torch.load(run.checkpoint / "state.pt", map_location=run.device)
    run.parts["model"].load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    sched.load_state_dict(state["sched"])


def train_phase(run: Run, phase: str, n_steps: int, lr: float, params, resume_from=None) -> float:
    """Train for ``n_steps`` steps (AdamW, linear decay after a 6 % warm-up), checkpointing
    every ``checkpoint_every`` steps; returns the last running loss (over all processes)."""
    import torch
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    step_fn, s = OBJECTIVE_FNS[run.settings["objective"]][1], run.settings
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = get_linear_schedule_with_warmup(opt, int(WARMUP_FRACTION * n_steps), n_steps)
    step = 0
    if resume_from is not None:
        _restore(run, opt, sched)
        step = resume_from
    # wrapped after (un)freezing: see World.wrap
    net = run.world.wrap(run.parts["net"], run.device, run.parts.get("unused", False))
    bar = tqdm(total=n_steps, initial=step, desc=phase, disable=run.quiet or not run.world.main)
    running, per_epoch = None, run.corpus.steps_per_epoch(run.global_batch)
    run.parts["model"].train()
    while step < n_steps:
        epoch, at = divmod(step, per_epoch)
        for texts in run.corpus.epoch(epoch, run.global_batch, s["seed"], skip=at):
            loss = step_fn(run, net, texts, s["seed"] * 1_000_003 + step + (phase == "head"))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            value = run.world.mean(float(loss.detach()))
            running = value if running is None else 0.98 * running + 0.02 * value
            bar.update(1)
            bar.set_postfix(loss=f"{running:.4f}")
            if step % s["checkpoint_every"] == 0 and step < n_steps:
                _save_checkpoint(run, phase, step, opt, sched)
            if step >= n_steps:
                break
    bar.close()
    if phase == "head":  # the main phase starts from the warmed-up head
        _save_checkpoint(run, phase, step, opt, sched)
    return running


def _phases(run: Run, info: dict | None) -> dict:
    """Run the head warm-up (a new MLM head only) and the main phase, resuming from ``info``."""
    model, s = run.parts["model"], run.settings
    out = {}
    done_head = info is not None and (info["phase"] == "train" or info["step"] >= s["head_steps"])
    if s["head_steps"] and not done_head:
        base = [p for p in model.base_model.parameters()]
        for p in base:
            p.requires_grad_(False)
        head = [p for p in model.parameters() if p.requires_grad]
        start = info["step"] if info else None
        out["head_loss"] = train_phase(run, "head", s["head_steps"], HEAD_LR, head, start)
        for p in base:
            p.requires_grad_(True)
        info = None
    elif info is not None and info["phase"] == "head":  # warm-up done, main phase not begun
        import torch

        model.load_state_dict(torch.load(run.checkpoint / "state.pt",
                                         map_location=run.device)["model"])
    start = info["step"] if info and info["phase"] == "train" else None
    params = [p for p in model.parameters() if p.requires_grad]
    out["train_loss"] = train_phase(run, "train", s["steps"], s["lr"], params, start)
    return out


def _save(run: Run):
    """The function that writes the trained encoder into a folder."""
    parts, base = run.parts, Path(resolve_model(run.settings["model"]))
    if run.settings["objective"] == "tsdae":
        def save_st(tmp: Path) -> None:
            # the training length is a setting of the run, not the encoder's window: embed,
            # zeroshot and SetFit read the base's max_seq_length (256 for the default model)
            parts["st"].max_seq_length = parts["window"]
            parts["st"].save(str(tmp))
        return save_st

    def save(tmp: Path) -> None:
        parts["model"].save_pretrained(tmp)
        parts["tokenizer"].save_pretrained(tmp)
        for name in ST_FILES:  # a sentence-transformers body stays one
            if (base / name).is_file():
                shutil.copy2(base / name, tmp / name)
        for pooling in base.glob("*_Pooling"):
            shutil.copytree(pooling, tmp / pooling.name)
        if (base / "modules.json").is_file():
            for normalize in base.glob("*_Normalize"):
                shutil.copytree(normalize, tmp / normalize.name)
    return save


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
        objective: ``auto`` (default: ``mlm``, chosen by the measurements in the module
            docstring), ``mlm`` or ``tsdae``.
        epochs: passes over the training documents (default 1, chosen by the epochs sweep in
            the module docstring); or ``max_steps`` batches.
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
                "lr": lr or LR[chosen], "batch_size": batch_size,
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
                         "another {out} or delete it", params=["out", *_fields(settings)])
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
    run = Run(settings=settings, corpus=data, device=device,
              checkpoint=checkpoint_path(out_path),
              say=say if world.main else _silent, quiet=quiet, world=world)
    set_seed(settings["seed"])
    with hf_quiet():
        run.parts = OBJECTIVE_FNS[objective][0](run)
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
    evaluate = OBJECTIVE_FNS[s["objective"]][2]
    info = check_checkpoint(run.checkpoint, s, exact=True) if resume else None
    _same_everywhere(run, info)
    started = time.perf_counter()
    before = evaluate(run)
    run.say(f"held-out {s['objective']} loss before: {before['loss']}"
            + (f" (perplexity {before['perplexity']})" if "perplexity" in before else ""))
    trained = time.perf_counter()
    losses = _phases(run, info)
    losses["train_seconds"] = round(time.perf_counter() - trained, 3)
    after = evaluate(run)
    record = {
        "base_model": model_label(model), "base_model_path": s["model"],
        "objective": s["objective"], "objective_reason": why, "corpus": run.corpus.describe(),
        "settings": {k: v for k, v in s.items() if k not in ("model", "corpus_sha256")},
        "head_warmup": ({"new_head": True, "steps": s["head_steps"], "lr": HEAD_LR,
                         "encoder_frozen": True} if s["head_steps"] else {"new_head": False}),
        "processes": {**run.world.describe(), "batch_size_per_process": s["batch_size"],
                      "batch_size_per_step": run.global_batch},
        "valid_before": before, "valid_after": after, **losses,
        "seconds": round(time.perf_counter() - started, 1), "device": run.device,
        "created": now_utc(), "versions": versions(),
    }
    if run.world.main:
        write_encoder_dir(_save(run), record, out_path, overwrite=out_path.exists())
        shutil.rmtree(run.checkpoint, ignore_errors=True)
    run.world.barrier()
    return record
