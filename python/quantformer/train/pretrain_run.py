"""One further-pretraining run: its objective, settings and processes, its checkpoints, and its
steps through the training loop of every recipe (:func:`quantformer.train.loop.step_batches`).

Steps follow transformers' ``run_mlm.py``: AdamW, the learning rate decayed linearly after a
6 % warm-up, gradients clipped at norm 1.0, one optimizer step per global batch. Every
batch's masks, word deletions and dropout come from a generator seeded by (seed, step), so a
run resumed from a checkpoint (written every ``checkpoint_every`` steps beside ``out``) gives
the same encoder as one that was never interrupted. Under several processes each trains on its
share of every batch and ``DistributedDataParallel`` averages the gradients
(:mod:`quantformer.train.ddp`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .._core.atomic import atomic_dir
from .._core.errors import InputError
from .ddp import World
from .loop import linear_schedule, make_optimizer, step_batches
from .pretrain_corpus import Corpus

WARMUP_FRACTION = 0.06


@dataclass(frozen=True)
class Objective:
    """A pretraining objective: its functions of a :class:`Run` and its learning rates.

    Attributes:
        name: its name (``"mlm"``, ``"tsdae"``), as the record and ``objective`` say it.
        parts: ``parts(run) -> dict``: the model parts (``model``, ``net``, ``new_head``...).
        step: ``step(run, net, texts, step_seed)``: this process's loss on one global batch.
        evaluate: ``evaluate(run) -> dict``: the held-out loss (and perplexity).
        save: ``save(run)``: the function that writes the trained encoder into a folder.
        lr: the default learning rate.
        head_lr: the learning rate of a new head's warm-up (None: no head to warm up).
    """

    name: str
    parts: Callable
    step: Callable
    evaluate: Callable
    save: Callable
    lr: float
    head_lr: float | None = None


@dataclass
class Run:
    """Everything one pretraining run needs: settings, the streamed corpus, the processes and
    the model parts."""
    settings: dict
    corpus: Corpus
    device: str
    checkpoint: Path
    say: object
    objective: Objective
    quiet: bool = False
    world: World = field(default_factory=World)
    parts: dict = field(default_factory=dict)

    @property
    def global_batch(self) -> int:
        """Documents per step over all processes."""
        return self.settings["batch_size"] * self.world.size


# settings that follow from others (the step counts, a default lr, auto's objective); the
# values asked for are kept in settings["requested"] and compared instead
DERIVED = ("steps", "epochs", "head_steps", "lr", "objective")
NAMES = {"world_size": "the number of processes", "corpus_sha256": "the corpus"}


def requested_settings(settings: dict) -> dict:
    """The settings as asked for: those that follow from others replaced by the values given
    (``requested``; a record without it keeps only the settings given as they are)."""
    given = {k: v for k, v in settings.items() if k not in (*DERIVED, "requested")}
    return {**given, **settings.get("requested", {})}


def setting_fields(settings: dict) -> list[str]:
    """The parameters that :func:`changed_settings` may name as fields."""
    return [k for k in requested_settings(settings) if k not in NAMES]


def changed_settings(before: dict, now: dict) -> list[str]:
    """The settings asked for ``now`` that differ from those of ``before`` (a record or a
    checkpoint), each as ``"{batch_size} 16 vs 8 now"`` (fields: the parameters); what follows
    from them (the epochs of a changed batch size, say) is not named."""
    a, b = requested_settings(before.get("settings", {})), requested_settings(now)
    return [("the corpus" if k == "corpus_sha256"
             else f"{NAMES.get(k, '{' + k + '}')} {a[k]} vs {b[k]} now")
            for k in sorted(k for k in b if k in a and a[k] != b[k])]


def checkpoint_path(out: Path) -> Path:
    """Where the checkpoints of a run into ``out`` are kept: ``<out>.checkpoint``."""
    return out.with_name(out.name + ".checkpoint")


def save_checkpoint(run: Run, phase: str, step: int, opt, sched) -> None:
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
                         params=["out", "resume", *setting_fields(settings)])
    return info


def check_same_everywhere(run: Run, info: dict | None) -> None:
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
    from tqdm.auto import tqdm

    s = run.settings
    # PyTorch's default AdamW, not the fused kernel fine-tuning takes: the encoders stay those
    # of the runs measured
    opt = make_optimizer(params, lr, fused=False)
    sched = linear_schedule(opt, n_steps, warmup=int(WARMUP_FRACTION * n_steps))
    step = 0
    if resume_from is not None:
        _restore(run, opt, sched)
        step = resume_from
    # wrapped after (un)freezing: see World.wrap
    net = run.world.wrap(run.parts["net"], run.device, run.parts.get("unused", False))
    bar = tqdm(total=n_steps, initial=step, desc=phase, disable=run.quiet or not run.world.main)
    running, per_epoch = None, run.corpus.steps_per_epoch(run.global_batch)
    seed = s["seed"] * 1_000_003 + (phase == "head")

    def backward(batch, scale):
        step_seed, texts = batch
        loss = run.objective.step(run, net, texts, step_seed)
        scale(loss).backward()
        return loss

    run.parts["model"].train()
    while step < n_steps:
        epoch, at = divmod(step, per_epoch)
        seeded = ((seed + i, texts) for i, texts in  # i: the step the batch is trained in
                  enumerate(run.corpus.epoch(epoch, run.global_batch, s["seed"], skip=at), step))
        for _, loss in step_batches(seeded, backward, params, opt, sched):
            step += 1
            value = run.world.mean(float(loss.detach()))
            running = value if running is None else 0.98 * running + 0.02 * value
            bar.update(1)
            bar.set_postfix(loss=f"{running:.4f}")
            if step % s["checkpoint_every"] == 0 and step < n_steps:
                save_checkpoint(run, phase, step, opt, sched)
            if step >= n_steps:
                break
    bar.close()
    if phase == "head":  # the main phase starts from the warmed-up head
        save_checkpoint(run, phase, step, opt, sched)
    return running


def train_phases(run: Run, info: dict | None) -> dict:
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
        out["head_loss"] = train_phase(run, "head", s["head_steps"], run.objective.head_lr,
                                       head, start)
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
