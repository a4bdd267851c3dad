"""The training loop of every recipe: AdamW (the fused kernel where available), the learning rate
decayed linearly to 0 (without warm-up for fine-tuning; after a warm-up for further pretraining,
as transformers' ``get_linear_schedule_with_warmup``), gradients clipped at norm 1.0
(Wankmüller 2022, section 6.4), optional gradient accumulation, mixed precision and early
stopping. :func:`step_batches` is the step of both: fine-tuning's epochs (:func:`train_loop`)
and pretraining's steps over a streamed corpus (:mod:`quantformer.train.pretrain_run`).

Mixed precision (``precision``, chosen by :func:`quantformer.models.precision.choose_precision`
with ``use="train"``): ``auto`` is bf16 autocast on CUDA devices that support it and on CPUs
with AMX or AVX-512 BF16, fp16 autocast with a gradient scaler on older CUDA devices, fp32
elsewhere (Micikevicius et al. 2018, "Mixed precision training"; PyTorch's ``torch.autocast`` /
``GradScaler`` recipe).
Early stopping (``early_stopping = N``) scores the validation data after every epoch, stops after
N epochs without improvement and restores the best epoch's weights (Prechelt 1998, "Early
stopping - but when?").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..models.batching import pad_batch
from ..models.precision import autocast
from .arguments import MAX_GRAD_NORM
from .data import length_grouped_batches


def make_optimizer(params, lr: float, *, fused: bool = True):
    """AdamW without weight decay over ``params`` (an iterable of parameters); the fused kernel
    (one pass over all parameters) if it runs and ``fused`` (default True), PyTorch's default
    implementation otherwise."""
    import torch

    if fused:
        try:
            return torch.optim.AdamW(params, lr=lr, weight_decay=0.0, fused=True)
        except (RuntimeError, TypeError, ValueError):  # pragma: no cover - device without it
            pass
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)


def linear_schedule(opt, total: int, warmup: int | None = None):
    """The learning rate decayed linearly to 0 over ``total`` optimizer steps: from the first
    step (``warmup`` None, fine-tuning's schedule), or after ``warmup`` steps of linear warm-up
    (transformers' ``get_linear_schedule_with_warmup``, as its ``run_mlm.py``; also with
    ``warmup`` 0, whose factors differ from the first form's in the last bit)."""
    import torch

    if warmup is None:
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / total))
    from transformers import get_linear_schedule_with_warmup

    return get_linear_schedule_with_warmup(opt, warmup, total)


def step_batches(batches, backward, params, opt, sched, *, grad_accum: int = 1, scaler=None,
                 n_batches: int | None = None):
    """Train on each of ``batches`` in turn, yielding ``(batch, loss)`` after each.

    ``backward(batch, scale)`` back-propagates the batch's loss through ``scale`` (the
    accumulation divisor and the fp16 gradient scaler) and returns it unscaled. After every
    ``grad_accum`` batches, and after the last of ``n_batches``, the gradients of ``params`` (a
    list) are clipped at norm ``MAX_GRAD_NORM`` and the optimizer and ``sched`` step.
    """
    import torch

    for i, b in enumerate(batches):
        loss = backward(b, lambda value: _scaled(value, scaler, grad_accum))
        if (i + 1) % grad_accum == 0 or i + 1 == n_batches:
            if scaler:
                scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
        yield b, loss


@dataclass
class Batches:
    """The encoded training documents and how they are fed: ``rows`` indexes ``encodings``
    (oversampled duplicates included), ``targets`` is aligned with ``encodings``."""

    encodings: object
    rows: np.ndarray
    targets: np.ndarray
    pad_id: int
    hook: object = None
    lengths: np.ndarray = field(init=False)

    def __post_init__(self):
        self.lengths = np.array([len(self.encodings.input_ids[i]) for i in self.rows])

    def tensors(self, b, device: str) -> tuple[dict, object]:
        import torch

        rows = self.rows[b]
        enc = self.encodings
        batch = pad_batch([enc.input_ids[i] for i in rows],
                          [enc.token_type_ids[i] for i in rows] if enc.token_type_ids
                          else None, self.pad_id, device)
        if self.hook is not None:
            batch = self.hook(batch)
        return batch, torch.as_tensor(self.targets[rows], device=device)

    def loss(self, network, batch, target):
        """The loss of one batch (the head's own, from ``labels``)."""
        return network(**batch, labels=target).loss

    def backward(self, network, batch, target, *, precision: str, device: str, scale):
        """Back-propagate one batch's loss, ``scale(loss)`` (the accumulation divisor and the
        fp16 gradient scaler), into the network's gradients; returns the unscaled loss."""
        with autocast(precision, device):
            full = self.loss(network, batch, target)
        scale(full).backward()
        return full.detach()


@dataclass
class LoopResult:
    """What the loop measured: losses and validation scores per epoch, the kept epoch."""

    losses: list = field(default_factory=list)
    curve: list = field(default_factory=list)
    best_epoch: int | None = None
    real_tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0


def train_loop(network, batches: Batches, *, epochs: int, lr: float, batch_size: int,
               grad_accum: int, precision: str, device: str, rng, validate=None,
               early_stopping: int | None = None, higher_is_better: bool = True,
               quiet: bool = False) -> LoopResult:
    """Train ``network`` in place for ``epochs`` (fewer when early stopping ends it).

    Args:
        validate: ``None`` or a function of no arguments returning the validation metric
            (called after each epoch, with the network in eval mode).
        early_stopping: patience in epochs (needs ``validate``); the best epoch's weights are
            restored at the end.

    Returns:
        A :class:`LoopResult`.
    """
    import torch
    from tqdm.auto import tqdm

    network.train()
    opt = make_optimizer(network.parameters(), lr)
    steps_per_epoch = math.ceil(math.ceil(len(batches.rows) / batch_size) / grad_accum)
    sched = linear_schedule(opt, steps_per_epoch * epochs)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    result, best = LoopResult(), None
    started, cpu = time.time(), time.process_time()
    bar = tqdm(total=epochs * math.ceil(len(batches.rows) / batch_size), desc="fine-tuning",
               unit="batch", disable=quiet, dynamic_ncols=True)
    for epoch in range(epochs):
        result.losses.append(_epoch(network, batches, opt, sched, scaler, rng, bar, result,
                                    epoch=epoch, epochs=epochs, batch_size=batch_size,
                                    grad_accum=grad_accum, precision=precision, device=device))
        if validate is None:
            continue
        score = float(validate())
        network.train()
        result.curve.append(score)
        if best is None or (score > best if higher_is_better else score < best):
            best, result.best_epoch = score, epoch + 1
            kept = _snapshot(network) if early_stopping else None
        elif early_stopping and epoch + 1 - result.best_epoch >= early_stopping:
            break
    bar.close()
    if early_stopping and result.best_epoch not in (None, len(result.losses)):
        network.load_state_dict(kept)
    network.eval()
    result.seconds, result.cpu_seconds = time.time() - started, time.process_time() - cpu
    return result


def _scaled(loss, scaler, grad_accum: int):
    """What is back-propagated of a batch's loss: divided by the accumulation steps, scaled by
    the fp16 gradient scaler."""
    loss = loss / grad_accum if grad_accum > 1 else loss
    return scaler.scale(loss) if scaler else loss


def _snapshot(network) -> dict:
    return {k: v.detach().clone() for k, v in network.state_dict().items()}


def _epoch(network, batches, opt, sched, scaler, rng, bar, result, *, epoch, epochs,
           batch_size, grad_accum, precision, device) -> float:
    run_loss, n_seen = 0.0, 0
    order = length_grouped_batches(batches.lengths, batch_size, rng)

    def backward(b, scale):
        batch, target = batches.tensors(b, device)
        result.real_tokens += int(batches.lengths[b].sum())
        result.padded_tokens += int(len(b) * batches.lengths[b].max())
        return batches.backward(network, batch, target, precision=precision, device=device,
                                scale=scale)

    for b, full in step_batches(order, backward, list(network.parameters()), opt, sched,
                                grad_accum=grad_accum, scaler=scaler, n_batches=len(order)):
        run_loss += float(full.detach()) * len(b)
        n_seen += len(b)
        bar.set_postfix(epoch=f"{epoch + 1}/{epochs}", loss=f"{run_loss / n_seen:.4f}")
        bar.update(1)
    return run_loss / max(n_seen, 1)
