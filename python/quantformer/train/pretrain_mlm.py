"""The further-pretraining objective ``mlm``: masked language modelling, with transformers' own
pieces (a masked-LM network, ``DataCollatorForLanguageModeling``, whole-word masking as an
option). The method is BERT's (Devlin et al. 2019), continued on a task's or domain's texts as
Gururangan et al. (2020) do.

The vocabulary projection, which dominates a small model's step, is computed only at the
masked positions: the encoder runs on the batch, its hidden states are gathered where the
labels are not -100, and the MLM head is applied to those rows only. A checkpoint without an
MLM head (a sentence-transformers body such as the bundled all-MiniLM-L6-v2) gets a new head
that is first warmed up with the encoder frozen; the record says so. The masked-LM classes of
BERT and RoBERTa have no pooler, so the encoder folder has none and standard fine-tuning starts
from a new one, as after Hugging Face's ``run_mlm.py`` (writing the base's pooler instead
measured lower: see bench/RESULTS.md, "Further pretraining").
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from ..models.hub import load_network, load_tokenizer, resolve_model
from .pretrain_run import Objective, Run

HEAD_LR = 5e-4
# files of a sentence-transformers folder that keep an MLM-trained body a sentence transformer
ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


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
    model, info = load_network(path, head="masked_lm", output_loading_info=True)
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


def mlm_save(run: Run):
    """The function that writes the trained masked-LM encoder into a folder: the network and
    tokenizer, and the base's sentence-transformers files (a sentence-transformers body stays
    one)."""
    parts, base = run.parts, Path(resolve_model(run.settings["model"]))

    def save(tmp: Path) -> None:
        parts["model"].save_pretrained(tmp)
        parts["tokenizer"].save_pretrained(tmp)
        for name in ST_FILES:
            if (base / name).is_file():
                shutil.copy2(base / name, tmp / name)
        for pooling in base.glob("*_Pooling"):
            shutil.copytree(pooling, tmp / pooling.name)
        if (base / "modules.json").is_file():
            for normalize in base.glob("*_Normalize"):
                shutil.copytree(normalize, tmp / normalize.name)
    return save


MLM = Objective(name="mlm", parts=mlm_parts, step=mlm_step, evaluate=mlm_evaluate,
                save=mlm_save, lr=5e-5, head_lr=HEAD_LR)
