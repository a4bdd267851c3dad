"""Batched inference shared by fine-tuned classifiers, zero-shot and embeddings.

Inputs are sorted by length and padded per batch (dynamic padding), so a batch of short
documents costs what short documents cost, and a batch holds at most :data:`MAX_TOKENS` padded
tokens (token-budget batching, fairseq's ``--max-tokens``: Ott et al. 2019), so the longest
documents go in small batches and few shorter ones are padded to their length; forward passes
run under ``torch.inference_mode()``; outputs come back in input order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def pad_arrays(input_ids: Sequence[list[int]], token_type_ids: Sequence[list[int]] | None,
               pad_id: int) -> dict:
    """Pad one batch of id lists (right padding) into int64 numpy arrays.

    Returns:
        ``{"input_ids", "attention_mask"[, "token_type_ids"]}``, each of shape
        (batch, longest).
    """
    longest = max(len(x) for x in input_ids)
    ids = np.full((len(input_ids), longest), pad_id, dtype=np.int64)
    mask = np.zeros((len(input_ids), longest), dtype=np.int64)
    types = np.zeros((len(input_ids), longest), dtype=np.int64) if token_type_ids else None
    for i, seq in enumerate(input_ids):
        ids[i, : len(seq)] = seq
        mask[i, : len(seq)] = 1
        if types is not None:
            types[i, : len(seq)] = token_type_ids[i]
    batch = {"input_ids": ids, "attention_mask": mask}
    if types is not None:
        batch["token_type_ids"] = types
    return batch


def pad_batch(input_ids: Sequence[list[int]], token_type_ids: Sequence[list[int]] | None,
              pad_id: int, device: str = "cpu") -> dict:
    """:func:`pad_arrays` as LongTensors on ``device``."""
    import torch

    return {k: torch.from_numpy(v).to(device)
            for k, v in pad_arrays(input_ids, token_type_ids, pad_id).items()}


#: padded tokens per forward pass at most (64 documents of 64 tokens, 8 of 512): on 300 Toxic
#: comments (median 43 tokens, some cut at 512) prediction ran 1.8-1.9x faster than with fixed
#: batches of 64, torch and ONNX alike (bench/RESULTS.md, "token-budget batching")
MAX_TOKENS = 4096


def length_batches(lengths: Sequence[int], batch_size: int,
                   max_tokens: int | None = MAX_TOKENS) -> list[np.ndarray]:
    """Index batches of similar length: indices sorted by length (longest first), cut in runs
    of at most ``batch_size`` inputs and, when ``max_tokens`` is set, at most ``max_tokens``
    padded tokens (a batch's first input is its longest; one input per batch at the least).
    Fewer inputs left than a batch takes go in batches of powers of two (13: 8, 4, 1), so that
    the batch shapes do not grow in number with the corpus: bf16 kernels on CPU (oneDNN) keep
    about 2 MB for each new shape, and a streamed file's every chunk ends with a remainder."""
    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable")
    batches, start = [], 0
    while start < len(order):
        size = batch_size
        if max_tokens:
            size = max(1, min(batch_size, max_tokens // max(1, int(lengths[order[start]]))))
        left = len(order) - start
        if left < size:
            size = 1 << (left.bit_length() - 1)
        batches.append(order[start:start + size])
        start += size
    return batches


class PerGroup:
    """A caller's bar advanced by whole groups of ``size`` inputs (e.g. a document's
    (document, hypothesis) pairs in zero-shot NLI), for :func:`run_batches`' ``progress``."""

    def __init__(self, bar, size: int):
        self.bar, self.size, self.inputs, self.done = bar, max(1, size), 0, 0

    def update(self, n: int) -> None:
        self.inputs += n
        groups = self.inputs // self.size
        if groups > self.done:
            self.bar.update(groups - self.done)
            self.done = groups


def run_batches(
    model,
    input_ids: Sequence[list[int]],
    token_type_ids: Sequence[list[int]] | None,
    *,
    fn: Callable,
    batch_size: int = 64,
    max_tokens: int | None = MAX_TOKENS,
    device: str = "cpu",
    pad_id: int = 0,
    extra: Callable | None = None,
    progress=False,
    desc: str = "predicting",
) -> np.ndarray:
    """Run ``fn(model, batch) -> array (b, ...)`` over length-sorted batches; input order out.

    Args:
        model: a torch module already on ``device`` and in eval mode, or an
            :class:`~quantformer.models.onnx.backend.OnnxModel` (``--backend onnx``), whose export
            computes ``fn`` itself: it gets numpy batches and torch is not imported.
        input_ids, token_type_ids: as in :class:`quantformer.models.tokenize.Encoded`.
        fn: maps the model and a padded batch dict to a float array with one row per input.
        batch_size: inputs per forward pass at most (default 64).
        max_tokens: padded tokens per forward pass at most (default :data:`MAX_TOKENS`);
            None for batches of ``batch_size`` whatever their length.
        extra: optional ``extra(batch) -> batch`` hook (e.g. Longformer's global attention;
            torch models only).
        progress: True for a tqdm bar of batches on stderr; or a caller's bar (anything with
            ``update(n)``, e.g. one tqdm bar over all documents of a streamed file), advanced
            by the number of inputs after each batch.

    Returns:
        A float32 array whose row i belongs to input i.
    """
    from tqdm.auto import tqdm

    n = len(input_ids)
    if n == 0:
        return np.zeros((0,), dtype=np.float32)
    forward, pad, context = _backend(model, fn, device, extra)
    batches = length_batches([len(x) for x in input_ids], batch_size, max_tokens)
    out = None
    bar = progress if hasattr(progress, "update") else None
    with context:
        for idx in tqdm(batches, desc=desc, unit="batch", disable=bar is not None or not progress,
                        leave=False):
            batch = pad([input_ids[i] for i in idx],
                        [token_type_ids[i] for i in idx] if token_type_ids else None, pad_id)
            res = forward(batch)
            res = res.float().cpu().numpy() if hasattr(res, "cpu") else np.asarray(res)
            if out is None:
                out = np.zeros((n, *res.shape[1:]), dtype=np.float32)
            out[idx] = res
            if bar is not None:
                bar.update(len(idx))
    return out


def _backend(model, fn: Callable, device: str, extra: Callable | None):
    """(forward(batch), pad(ids, types, pad_id), context) for a torch or an ONNX model."""
    if getattr(model, "backend", "torch") == "onnx":
        import contextlib

        return model.forward, pad_arrays, contextlib.nullcontext()
    import torch

    def forward(batch):
        return fn(model, extra(batch) if extra is not None else batch)

    def pad(ids, types, pad_id):
        return pad_batch(ids, types, pad_id, device)

    return forward, pad, torch.inference_mode()


def mean_pool(last_hidden, attention_mask):
    """Mean of token vectors over the attention mask (sentence-transformers' pooling).

    Args:
        last_hidden: tensor (batch, tokens, hidden).
        attention_mask: tensor (batch, tokens), 1 for real tokens.

    Returns:
        Tensor (batch, hidden).
    """
    m = attention_mask.unsqueeze(-1).to(last_hidden.dtype)
    return (last_hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
