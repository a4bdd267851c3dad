"""Fine-tuning on documents read in windows (``truncation="chunks"``).

``chunk_training="aggregate"`` (default): every window of a document goes into the same step,
the window logits are aggregated into the document's (:mod:`quantformer.models.chunks`) and the
head's loss (cross-entropy, MSE or BCE-with-logits, as the Hugging Face heads compute it) is
taken on that aggregate, so the gradient reaches each window through the document's label
(Pappagari et al. 2019). ``chunk_training="labels"``: each window is a training example with
its document's label (simpletransformers' sliding window), the simpler alternative.
"""

from __future__ import annotations

import numpy as np

from .._core.errors import InputError
from ..models.chunks import aggregate_torch, check_aggregate, check_chunk_training
from ..models.tokenize import CHUNKS, check_windows
from .loop import Batches


def check_chunk_settings(truncation: str, stride, max_chunks, aggregate: str,
                         chunk_training: str, max_length: int) -> None:
    """Refuse window settings without chunks, and bad ones with it (before any model loads;
    the stride is checked against ``max_length`` less two special tokens here, against the
    tokenizer's own template when the windows are made).

    Raises:
        InputError: naming the parameter.
    """
    check_aggregate(aggregate)
    check_chunk_training(chunk_training)
    if truncation != CHUNKS:
        given = [p for p, v in (("stride", stride), ("max_chunks", max_chunks)) if v is not None]
        given += ["aggregate"] if aggregate != "mean" else []
        given += ["chunk_training"] if chunk_training != "aggregate" else []
        if given:
            names = ", ".join("{%s}" % p for p in given)
            verb = "applies" if len(given) == 1 else "apply"
            raise InputError(f"{names} {verb} to {{truncation}} chunks only; add it or leave "
                             "it out", params=given + ["truncation"])
        return
    check_windows(max_length - 2, stride, max_chunks, max_length)


class WindowBatches(Batches):
    """Training batches of whole documents read in windows: :attr:`rows` index documents,
    each batch holds every window of its documents, and the loss is the head's loss on the
    aggregate of each document's window logits."""

    def __init__(self, encodings, rows, targets, pad_id, hook=None, *, aggregate="mean",
                 problem_type="single_label_classification"):
        self.aggregate, self.problem_type = aggregate, problem_type
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


def head_loss(problem_type: str, logits, target):
    """The loss a Hugging Face sequence-classification head takes for ``problem_type``."""
    import torch.nn.functional as F

    if problem_type == "regression":
        return F.mse_loss(logits.squeeze(-1).float(), target.float().view(-1))
    if problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits.float(), target.float())
    return F.cross_entropy(logits.float(), target.long())


def window_batches(enc, rows, targets, pad_id, hook, *, chunk_training: str, aggregate: str,
                   problem_type: str) -> Batches:
    """The training batches of windowed documents ``enc`` (:class:`~quantformer.models.tokenize.Windows`):
    whole documents for ``aggregate``, single windows with their document's label for
    ``labels``. Documents without windows (empty texts are dropped before) cannot occur."""
    if chunk_training == "aggregate":
        return WindowBatches(enc, rows, targets, pad_id, hook, aggregate=aggregate,
                             problem_type=problem_type)
    first = np.concatenate([[0], np.cumsum(enc.n_windows)])
    windows = np.concatenate([np.arange(first[i], first[i + 1]) for i in rows])
    return Batches(enc, windows, np.asarray(targets)[enc.doc], pad_id, hook)
