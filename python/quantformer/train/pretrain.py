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
    head that is first warmed up with the encoder frozen; the record says so.
``tsdae``
    the transformer-based denoising auto-encoder (Wang et al. 2021) with sentence-transformers'
    own ``DenoisingAutoEncoderLoss``: the pooled sentence vector of a text with 60 % of its
    words deleted must let a tied decoder rebuild the text. Words are split at white space
    (the library's default noise needs NLTK data).

``objective="auto"`` picks ``tsdae`` for sentence-transformers bodies (a folder with
``modules.json``: SetFit, embeddings and the bundled default are such models; measured on the
bundled model and the SemEval-2016 Abortion task: masked LM lowered macro-F1 by 0.014-0.019,
TSDAE raised it by 0.017) and ``mlm`` for every other masked-LM encoder.

Batches are length-grouped with dynamic padding; every batch's masks, word deletions and
dropout come from a generator seeded by (seed, step), so a run resumed from a checkpoint
(written every ``checkpoint_every`` steps beside ``out``) gives the same encoder as one that
was never interrupted.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.atomic import atomic_dir
from .._core.errors import InputError
from ..io.frames import iter_frames
from ..io.modeldir import encoder_record, hf_quiet, now_utc, versions
from ..io.writable import check_model_dir
from ..io.modeldir import write_encoder_dir
from ..models.hub import check_max_length, load_config, model_label, resolve_device, resolve_model
from .data import length_grouped_batches, set_seed

OBJECTIVES = ("auto", "mlm", "tsdae")
MIN_DOCS = 100
DELETE_RATIO = 0.6
LR = {"mlm": 5e-5, "tsdae": 3e-5}
HEAD_LR = 5e-4
WARMUP_FRACTION = 0.06
# files of a sentence-transformers folder that keep an MLM-trained body a sentence transformer
ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")

REASONS = {
    "st": "a sentence-transformers body (modules.json): TSDAE (Wang et al. 2021), the domain "
          "adaptation sentence-transformers documents for such models; masked LM with a new "
          "head lowered the bundled model's Abortion macro-F1 (-0.014 to -0.019) where TSDAE "
          "raised it (+0.017)",
    "mlm": "a masked-LM encoder: masked language modelling, the task-/domain-adaptive "
           "pretraining of Gururangan et al. (2020)",
    "given": "asked for",
}


@dataclass
class Run:
    """Everything one pretraining run needs: settings, texts, split and the model parts."""
    settings: dict
    texts: list
    train_idx: np.ndarray
    valid_idx: np.ndarray
    lengths: np.ndarray
    device: str
    checkpoint: Path
    say: object
    parts: dict = field(default_factory=dict)


def check_settings(*, objective, mask_prob, valid_fraction, epochs, max_steps, batch_size,
                   checkpoint_every, lr) -> None:
    """The checks that need no model and no corpus.

    Raises:
        InputError: naming the parameter out of range.
    """
    if objective not in OBJECTIVES:
        raise InputError(f"{{objective}} must be one of {', '.join(OBJECTIVES)}, not "
                         f"{objective!r}", params=["objective"])
    if not 0 < mask_prob < 1:
        raise InputError(f"{{mask_prob}} must be between 0 and 1 (exclusive), not {mask_prob}; "
                         "BERT masks 0.15", params=["mask_prob"])
    if not 0 < valid_fraction < 0.5:
        raise InputError(f"{{valid_fraction}} must be above 0 and below 0.5, not "
                         f"{valid_fraction}", params=["valid_fraction"])
    if epochs is not None and max_steps is not None:
        raise InputError("give {epochs} or {max_steps}, not both", params=["epochs", "max_steps"])
    for name, value in (("epochs", epochs), ("max_steps", max_steps), ("batch_size", batch_size),
                        ("checkpoint_every", checkpoint_every), ("lr", lr)):
        if value is not None and not value > 0:
            raise InputError(f"{{{name}}} must be greater than 0, not {value}", params=[name])


def check_out(out, resume: bool) -> Path:
    """An ``out`` that does not exist, or (with ``resume``) an encoder folder to compare.

    Raises:
        InputError: ``out`` exists and ``resume`` is False or it is no encoder folder; it
            cannot be written.
    """
    p = Path(out)
    if p.exists() and not (resume and encoder_record(p) is not None):
        hint = (" it is not an encoder folder written by `quantformer pretrain`" if resume
                else " pass {resume} to continue or finish an interrupted run of this corpus")
        raise InputError(f"{{out}} '{out}' exists;{hint}; or choose another {{out}}",
                         params=["out", "resume"])
    if p.exists():
        return p
    return check_model_dir(p)


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
    is_st = (Path(resolve_model(model)) / "modules.json").is_file()
    if objective != "auto":
        return objective, REASONS["given"], config
    return ("tsdae", REASONS["st"], config) if is_st else ("mlm", REASONS["mlm"], config)


def read_corpus(corpus, **corpus_kw) -> tuple[list[str], dict]:
    """The non-empty texts of a corpus file (read in chunks) or frame, and its description.

    Returns:
        ``(texts, {"n_docs", "n_empty", "sha256", "source"})``; the hash covers every text in
        order, so it names the corpus.

    Raises:
        InputError: fewer than 100 documents with text (the count named).
    """
    chunks = ([corpus] if isinstance(corpus, pd.DataFrame)
              else iter_frames(corpus, **corpus_kw))
    digest, texts, n_empty = hashlib.sha256(), [], 0
    for chunk in chunks:
        for t in chunk["text"]:
            t = "" if t is None or (isinstance(t, float) and math.isnan(t)) else str(t)
            digest.update(t.encode("utf-8") + b"\0")
            if t.strip():
                texts.append(t)
            else:
                n_empty += 1
    if len(texts) < MIN_DOCS:
        n = len(texts) + n_empty
        what = (f"has {n} documents and every text is empty" if not texts
                else f"has only {len(texts)} documents with text (of {n})")
        raise InputError(f"{{corpus}} {what}; further pretraining needs at least {MIN_DOCS} "
                         "documents with text (thousands help)", params=["corpus"])
    return texts, {"n_docs": len(texts), "n_empty": n_empty, "sha256": digest.hexdigest(),
                   "source": None if isinstance(corpus, pd.DataFrame) else str(corpus)}


def split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random held-out documents (at least one) and the training rest."""
    perm = np.random.default_rng(seed).permutation(n)
    k = max(1, int(round(n * fraction)))
    return np.sort(perm[k:]), np.sort(perm[:k])


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


def mlm_parts(run: Run) -> dict:
    """The masked-LM model (a new head when the checkpoint has none), tokenizer and collators."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling

    path = resolve_model(run.settings["model"])
    tok = AutoTokenizer.from_pretrained(path, use_fast=True)
    model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True)
    base = model.base_model_prefix
    new_head = any(not k.startswith(base) for k in info.get("missing_keys", []))
    s = run.settings
    enc = tok(run.texts, truncation=True,
              max_length=s["max_length"], return_special_tokens_mask=True,
              return_offsets_mapping=s["whole_word"])
    # whole words are always replaced by [MASK] (transformers has no random-word option)
    replace = {"mask_replace_prob": 1.0, "random_replace_prob": 0.0} if s["whole_word"] else {}
    collate = DataCollatorForLanguageModeling(tok, mlm_probability=s["mask_prob"],
                                              whole_word_mask=s["whole_word"], **replace)
    return {"model": model.to(run.device), "tokenizer": tok, "encodings": enc,
            "collate": collate, "head": _mlm_head(model), "new_head": new_head,
            "lengths": np.array([len(x) for x in enc["input_ids"]])}


def _mlm_batch(run: Run, idx) -> dict:
    p = run.parts
    enc = p["encodings"]
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")
            if k in enc]
    feats = [{k: enc[k][i] for k in keys} for i in idx]
    if run.settings["whole_word"]:  # the tokenizer's pad() leaves offsets unpadded
        longest = max(len(f["input_ids"]) for f in feats)
        for f, i in zip(feats, idx):
            offsets = [list(o) for o in enc["offset_mapping"][i]]
            f["offset_mapping"] = offsets + [[0, 0]] * (longest - len(offsets))
    batch = p["collate"](feats)
    return {k: v.to(run.device) for k, v in batch.items()}


def mlm_loss(run: Run, batch: dict, reduction: str = "mean"):
    """Cross-entropy at the masked positions, the vocabulary projection computed there only."""
    import torch.nn.functional as F

    model, head = run.parts["model"], run.parts["head"]
    labels = batch.pop("labels")
    batch.pop("special_tokens_mask", None)
    if head is None:
        logits = model(**batch).logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1),
                               ignore_index=-100, reduction=reduction)
    hidden = model.base_model(**batch)[0]
    at = labels != -100
    logits = head(hidden[at])
    return F.cross_entropy(logits.float(), labels[at], reduction=reduction)


def mlm_step(run: Run, idx, step_seed: int):
    import torch

    torch.manual_seed(step_seed)
    return mlm_loss(run, _mlm_batch(run, idx))


def mlm_evaluate(run: Run) -> dict:
    """Held-out masked-LM loss (mean over masked tokens) and perplexity, the same masks every
    time (a generator seeded by the run's seed)."""
    import torch

    model, total, count = run.parts["model"], 0.0, 0
    model.eval()
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(run.settings["seed"] + 7919)
        for idx in _fixed_batches(run, run.valid_idx):
            batch = _mlm_batch(run, idx)
            n = int((batch["labels"] != -100).sum())
            if n:
                total += float(mlm_loss(run, batch, reduction="sum"))
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
    st.max_seq_length = run.settings["max_length"]
    loss = DenoisingAutoEncoderLoss(st, decoder_name_or_path=path, tie_encoder_decoder=True)
    tok = st.tokenizer
    lengths = np.array([len(x) for x in tok(run.texts, truncation=True,
                                            max_length=run.settings["max_length"])["input_ids"]])
    return {"model": loss.to(run.device), "st": st, "new_head": False, "lengths": lengths}


def _tsdae_loss(run: Run, idx, rng: np.random.Generator):
    st = run.parts["st"]
    clean = [run.texts[i] for i in idx]
    noisy = [delete_words(t, rng) for t in clean]
    encode = getattr(st, "preprocess", None) or st.tokenize
    feats = [{k: v.to(run.device) for k, v in encode(x).items() if hasattr(v, "to")}
             for x in (noisy, clean)]
    return run.parts["model"](feats, None)


def tsdae_step(run: Run, idx, step_seed: int):
    import torch

    torch.manual_seed(step_seed)
    return _tsdae_loss(run, idx, np.random.default_rng(step_seed))


def tsdae_evaluate(run: Run) -> dict:
    """Held-out denoising loss (mean over batches; the same deletions every time)."""
    import torch

    model, losses, sizes = run.parts["model"], [], []
    model.eval()
    rng = np.random.default_rng(run.settings["seed"] + 7919)
    with torch.inference_mode():
        for idx in _fixed_batches(run, run.valid_idx):
            losses.append(float(_tsdae_loss(run, idx, rng)))
            sizes.append(len(idx))
    model.train()
    return {"loss": round(float(np.average(losses, weights=sizes)), 5)}


OBJECTIVE_FNS = {"mlm": (mlm_parts, mlm_step, mlm_evaluate),
                 "tsdae": (tsdae_parts, tsdae_step, tsdae_evaluate)}


# ------------------------------------------------------------------------------------------
# the training loop, checkpoints and the run


def _fixed_batches(run: Run, idx: np.ndarray) -> list:
    """Length-sorted batches of ``idx`` (evaluation)."""
    order = idx[np.argsort(-run.lengths[idx], kind="stable")]
    b = run.settings["batch_size"]
    return [order[i:i + b] for i in range(0, len(order), b)]


def _epoch_batches(run: Run, epoch: int) -> list:
    rng = np.random.default_rng([run.settings["seed"], epoch])
    batches = length_grouped_batches(run.lengths[run.train_idx], run.settings["batch_size"], rng)
    return [run.train_idx[b] for b in batches]


def _save_checkpoint(run: Run, phase: str, step: int, opt, sched) -> None:
    import torch

    with atomic_dir(run.checkpoint) as tmp:
        torch.save({"model": run.parts["model"].state_dict(), "opt": opt.state_dict(),
                    "sched": sched.state_dict()}, tmp / "state.pt")
        (tmp / "checkpoint.json").write_text(json.dumps(
            {"phase": phase, "step": step, "settings": run.settings}), encoding="utf-8")


def _load_checkpoint(run: Run) -> dict | None:
    """The checkpoint of this corpus and these settings, if there is one."""
    meta = run.checkpoint / "checkpoint.json"
    if not meta.is_file():
        return None
    info = json.loads(meta.read_text(encoding="utf-8"))
    if info.get("settings") != run.settings:
        raise InputError(f"the checkpoint beside {{out}} ('{run.checkpoint}') is of another "
                         "corpus or other settings; leave out {resume} to start again",
                         params=["out", "resume"])
    return info


def train_phase(run: Run, phase: str, n_steps: int, lr: float, params, resume_from=None) -> float:
    """Train for ``n_steps`` steps (AdamW, linear decay after a 6 % warm-up), checkpointing
    every ``checkpoint_every`` steps; returns the last running loss."""
    import torch
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    step_fn = OBJECTIVE_FNS[run.settings["objective"]][1]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = get_linear_schedule_with_warmup(opt, int(WARMUP_FRACTION * n_steps), n_steps)
    step = 0
    if resume_from is not None:
        state = torch.load(run.checkpoint / "state.pt", map_location=run.device)
        run.parts["model"].load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step = resume_from
    bar = tqdm(total=n_steps, initial=step, desc=phase, disable=run.settings["quiet"])
    running, per_epoch = None, len(_epoch_batches(run, 0))
    model = run.parts["model"]
    model.train()
    while step < n_steps:
        epoch, at = divmod(step, per_epoch)
        for idx in _epoch_batches(run, epoch)[at:]:
            loss = step_fn(run, idx, run.settings["seed"] * 1_000_003 + step + (phase == "head"))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            value = float(loss.detach())
            running = value if running is None else 0.98 * running + 0.02 * value
            bar.update(1)
            bar.set_postfix(loss=f"{running:.4f}")
            if step % run.settings["checkpoint_every"] == 0 and step < n_steps:
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
        return lambda tmp: parts["st"].save(str(tmp))

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
             resume: bool = False, device: str = "auto", quiet: bool = False,
             text_col=None, id_col=None, fmt=None, quoting: str = "auto", say=print) -> dict:
    """Pretrain an encoder further on unlabelled texts and write an encoder folder.

    Args:
        corpus: a corpus file (Parquet, CSV, TSV, text, JSONL, RDS; read in chunks) or a
            corpus frame with a ``text`` column; at least 100 documents with text.
        out: the encoder folder to write (a Hugging Face / sentence-transformers model folder
            plus ``quantformer.json`` of kind ``"encoder"``).
        model: the base model (default: the bundled all-MiniLM-L6-v2).
        objective: ``auto`` (default: ``tsdae`` for sentence-transformers bodies, else
            ``mlm``), ``mlm`` or ``tsdae`` (module docstring).
        epochs: passes over the training documents (default 1); or ``max_steps`` batches.
        max_length: tokens per document, special tokens included (128; at most the model's
            limit).
        mask_prob: share of tokens masked (0.15, Devlin et al. 2019), in (0, 1).
        whole_word: mask every subword of a word together (whole-word masking).
        valid_fraction: share of documents held out for the loss before and after (0.05).
        seed: seed of the split, batch order, masks, deletions and dropout (42).
        lr: learning rate (default 5e-5 for mlm, 3e-5 for tsdae, as Wang et al. 2021).
        batch_size: documents per step (32).
        checkpoint_every: steps between checkpoints (500), written to ``<out>.checkpoint``.
        head_steps: warm-up steps of a new MLM head with the encoder frozen (default: one
            epoch, at most the main phase's steps); 0 skips the warm-up.
        resume: continue an interrupted run from its checkpoint (same corpus and settings).
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        text_col, id_col, fmt, quoting: as :func:`quantformer.io.frames.read_frame`.

    Returns:
        The encoder record (also written as the folder's ``quantformer.json``).

    Raises:
        InputError: a setting out of range, fewer than 100 documents with text, a model
            without a masked-LM architecture, ``max_length`` above the model's limit, an
            ``out`` that exists (without ``resume``, or that is not an encoder folder) or
            cannot be written, a checkpoint of another corpus.
    """
    check_settings(objective=objective, mask_prob=mask_prob, valid_fraction=valid_fraction,
                   epochs=epochs, max_steps=max_steps, batch_size=batch_size,
                   checkpoint_every=checkpoint_every, lr=lr)
    out_path = check_out(out, resume)
    chosen, why, config = choose_objective(model, objective)
    check_max_length(max_length, config)
    texts, described = read_corpus(corpus, text_col=text_col, id_col=id_col, fmt=fmt,
                                   quoting=quoting)
    done = encoder_record(out_path) if out_path.exists() else None
    if done is not None:
        if done.get("corpus", {}).get("sha256") != described["sha256"]:
            raise InputError(f"{{out}} '{out}' is an encoder of another corpus; choose another "
                             "{out}", params=["out", "resume"])
        say(f"{out} is already an encoder of this corpus; nothing to do")
        return done
    run = _new_run(texts, model, chosen, device, out_path, dict(
        objective=chosen, max_length=max_length, mask_prob=mask_prob, whole_word=whole_word,
        valid_fraction=valid_fraction, seed=seed, lr=lr or LR[chosen], batch_size=batch_size,
        checkpoint_every=checkpoint_every, quiet=quiet, corpus_sha256=described["sha256"]),
        epochs, max_steps, head_steps, say)
    return _train_and_write(run, resume, described, why, model, out_path)


def _new_run(texts, model, objective, device, out_path, settings, epochs, max_steps,
             head_steps, say) -> Run:
    train_idx, valid_idx = split(len(texts), settings["valid_fraction"], settings["seed"])
    settings["model"] = resolve_model(model)
    run = Run(settings=settings, texts=texts, train_idx=train_idx, valid_idx=valid_idx,
              lengths=np.zeros(len(texts), dtype=int), device=resolve_device(device),
              checkpoint=out_path.with_name(out_path.name + ".checkpoint"), say=say)
    set_seed(settings["seed"])
    with hf_quiet():
        run.parts = OBJECTIVE_FNS[objective][0](run)
    run.lengths = run.parts["lengths"]
    per_epoch = len(_epoch_batches(run, 0))
    steps = int(max_steps) if max_steps else max(1, int(round((epochs or 1) * per_epoch)))
    if head_steps is None:
        head_steps = min(per_epoch, steps)
    settings.update(steps=steps, epochs=round(steps / per_epoch, 4),
                    head_steps=int(head_steps) if run.parts["new_head"] else 0)
    return run


def _train_and_write(run: Run, resume: bool, described: dict, why: str, model, out_path) -> dict:
    s = run.settings
    evaluate = OBJECTIVE_FNS[s["objective"]][2]
    info = _load_checkpoint(run) if resume else None
    started = time.perf_counter()
    before = evaluate(run)
    run.say(f"held-out {s['objective']} loss before: {before['loss']}"
            + (f" (perplexity {before['perplexity']})" if "perplexity" in before else ""))
    trained = time.perf_counter()
    losses = _phases(run, info)
    losses["train_seconds"] = round(time.perf_counter() - trained, 3)
    after = evaluate(run)
    n_tokens = int(run.lengths.sum())
    record = {
        "base_model": model_label(model), "base_model_path": s["model"],
        "objective": s["objective"], "objective_reason": why,
        "corpus": {**described, "n_tokens": n_tokens, "n_train": len(run.train_idx),
                   "n_valid": len(run.valid_idx)},
        "settings": {k: v for k, v in s.items() if k not in ("model", "quiet", "corpus_sha256")},
        "head_warmup": ({"new_head": True, "steps": s["head_steps"], "lr": HEAD_LR,
                         "encoder_frozen": True} if s["head_steps"] else {"new_head": False}),
        "valid_before": before, "valid_after": after, **losses,
        "seconds": round(time.perf_counter() - started, 1), "device": run.device,
        "created": now_utc(), "versions": versions(),
    }
    write_encoder_dir(_save(run), record, out_path, overwrite=out_path.exists())
    shutil.rmtree(run.checkpoint, ignore_errors=True)
    return record
