"""Fine-tuning on documents read in windows (``truncation="chunks"``).

``chunk_training="aggregate"`` (default): every window of a document goes into the same step,
the window logits are aggregated into the document's (:mod:`quantformer.models.chunks`) and the
head's loss (cross-entropy, MSE or BCE-with-logits, as the Hugging Face heads compute it) is
taken on that aggregate, so the gradient reaches each window through the document's label
(Pappagari et al. 2019). ``chunk_training="labels"``: each window is a training example with
its document's label (simpletransformers' sliding window), the simpler alternative.

Memory: one forward pass reads at most ``windows_per_pass`` windows (:data:`PASS_FACTOR` times
the batch size: the memory of a few head+tail batches at the same window), however long the
documents. A batch whose documents have more windows is trained in passes: the windows' logits
are computed without a graph, the documents' loss is taken on their aggregate and its gradient
with respect to each window's logits, then each pass recomputes its windows with the same
dropout draws and back-propagates that gradient. The result is the gradient of the one-pass
loss (activation checkpointing at the level of windows; Chen et al. 2016, "Training deep nets
with sublinear memory cost"), for one more forward pass.
"""

from __future__ import annotations

import numpy as np

from ..models.chunks import (CHUNK_TRAINING, aggregate_torch, check_aggregate,
                             check_chunk_training, refuse_without_chunks)
from ..models.reading import DEFAULT_AGGREGATE, GUESSED_SPECIAL_TOKENS, Reading
from ..models.precision import autocast
from .loop import Batches

PASS_FACTOR = 4
#: ``chunk_training``'s default (the loss on each document's aggregate of its windows)
DEFAULT_CHUNK_TRAINING = CHUNK_TRAINING[0]


def check_training_reading(reading: Reading, chunk_training: str) -> Reading:
    """Refuse window settings without chunks (``aggregate`` None: not given), and bad ones
    with it, before any model loads; returns ``reading``. The tokenizer is not loaded yet, so
    the stride is checked against ``max_length`` less
    :data:`~quantformer.models.reading.GUESSED_SPECIAL_TOKENS` here, and against the
    tokenizer's own template when the windows are made.

    Raises:
        InputError: naming the parameter.
    """
    if reading.aggregate is not None:
        check_aggregate(reading.aggregate)
    check_chunk_training(chunk_training)
    if reading.chunks:
        return reading.check_window(reading.max_length - GUESSED_SPECIAL_TOKENS)
    # chunk_training's default, aggregate, is the same without chunks
    refuse_without_chunks(reading.truncation, **reading.window_settings(), chunk_training=(
        None if chunk_training == DEFAULT_CHUNK_TRAINING else chunk_training))
    return reading


class WindowBatches(Batches):
    """Training batches of whole documents read in windows: :attr:`rows` index documents,
    each batch holds every window of its documents, and the loss is the head's loss on the
    aggregate of each document's window logits."""

    def __init__(self, encodings, rows, targets, pad_id, hook=None, *,
                 aggregate=DEFAULT_AGGREGATE,
                 problem_type="single_label_classification", windows_per_pass=None):
        self.aggregate, self.problem_type = aggregate, problem_type
        self.windows_per_pass = windows_per_pass
        self.first = np.concatenate([[0], np.cumsum(encodings.n_windows)])
        super().__init__(encodings, rows, targets, pad_id, hook)

    def __post_init__(self):
        lens = np.array([len(x) for x in self.encodings.input_ids] or [0])
        self.lengths = np.array([int(lens[self.first[i]:self.first[i + 1]].sum())
                                 for i in self.rows])

    def tensors(self, b, device: str):
        import torch

        docs = self.rows[b]
        windows = np.concatenate([np.arange(self.first[i], self.first[i + 1]) for i in docs])
        owner = np.repeat(np.arange(len(docs)), [self.first[i + 1] - self.first[i] for i in docs])
        view = Batches(self.encodings, windows, np.zeros(len(self.encodings.input_ids)),
                       self.pad_id, self.hook)
        batch, _ = view.tensors(np.arange(len(windows)), device)
        batch["_doc"] = torch.as_tensor(owner, device=device)
        return batch, torch.as_tensor(self.targets[docs], device=device)

    def loss(self, network, batch, target):
        doc = batch.pop("_doc")
        logits = network(**batch).logits
        agg = aggregate_torch(logits, doc, len(target), self.aggregate)
        return head_loss(self.problem_type, agg, target)

    def backward(self, network, batch, target, *, precision: str, device: str, scale):
        """One pass when the batch has at most ``windows_per_pass`` windows, else the passes
        of the module docstring (the same gradient, bounded memory)."""
        n = int(batch["input_ids"].shape[0])
        if self.windows_per_pass is None or n <= self.windows_per_pass:
            return super().backward(network, batch, target, precision=precision,
                                    device=device, scale=scale)
        import torch

        doc = batch.pop("_doc")
        parts = [(s, min(s + self.windows_per_pass, n))
                 for s in range(0, n, self.windows_per_pass)]
        states, outs = [], []
        with torch.no_grad():
            for s, e in parts:
                states.append(_rng_state(device))
                with autocast(precision, device):
                    outs.append(network(**_rows(batch, s, e)).logits.float())
        logits = torch.cat(outs).requires_grad_()
        full = head_loss(self.problem_type,
                         aggregate_torch(logits, doc, len(target), self.aggregate), target)
        scale(full).backward()  # only into ``logits``: no parameter is in this graph
        for (s, e), state in zip(parts, states):
            _set_rng_state(device, state)
            with autocast(precision, device):
                out = network(**_rows(batch, s, e)).logits.float()
            (out * logits.grad[s:e]).sum().backward()
        return full.detach()


def _rows(batch: dict, start: int, end: int) -> dict:
    """Windows ``start:end`` of a padded batch, cut to their longest window."""
    mask = batch["attention_mask"][start:end]
    width = int(mask.sum(dim=1).max())
    return {k: v[start:end, :width] for k, v in batch.items()}


def _rng_state(device: str):
    """The generator state dropout draws from on ``device`` (replayed by the second pass)."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_rng_state(device)
    return torch.get_rng_state()


def _set_rng_state(device: str, state) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.set_rng_state(state, device)
    else:
        torch.set_rng_state(state)


def head_loss(problem_type: str, logits, target):
    """The loss a Hugging Face sequence-classification head takes for ``problem_type``."""
    import torch.nn.functional as F

    if problem_type == "regression":
        return F.mse_loss(logits.squeeze(-1).float(), target.float().view(-1))
    if problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits.float(), target.float())
    return F.cross_entropy(logits.float(), target.long())


def window_batches(enc, rows, targets, pad_id, hook, *, chunk_training: str, aggregate: str,
                   problem_type: str, batch_size: int) -> Batches:
    """The training batches of windowed documents ``enc`` (:class:`~quantformer.models.windows.Windows`):
    whole documents for ``aggregate``, single windows with their document's label for
    ``labels``. Documents without windows (empty texts are dropped before) cannot occur."""
    if chunk_training == DEFAULT_CHUNK_TRAINING:
        return WindowBatches(enc, rows, targets, pad_id, hook, aggregate=aggregate,
                             problem_type=problem_type,
                             windows_per_pass=PASS_FACTOR * batch_size)
    first = np.concatenate([[0], np.cumsum(enc.n_windows)])
    windows = np.concatenate([np.arange(first[i], first[i + 1]) for i in rows])
    return Batches(enc, windows, np.asarray(targets)[enc.doc], pad_id, hook)
