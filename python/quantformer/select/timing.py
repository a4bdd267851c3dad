"""The time estimate of a grid search: one training step measured on the caller's documents,
scaled to the runs planned (``tune`` prints it before the first run)."""

from __future__ import annotations

import math
import time

from ..io.modeldir import hf_quiet
from ..models.batching import pad_batch
from ..models.hub import load_network, load_tokenizer, resolve_device, resolve_model
from ..models.tokenize import encode


def step_seconds(model: str | None, texts: list, *, batch_size: int, max_length: int,
                 truncation: str, n_labels: int, device: str) -> float:
    """Measured seconds of one training step (forward + backward + update) on ``texts``.

    Loads the model once, runs three steps on one batch of up to ``batch_size`` of the given
    documents, and returns the faster of the last two (the first warms up).
    """
    import torch

    dev = resolve_device(device)
    tok = load_tokenizer(model)
    with hf_quiet():
        m = load_network(resolve_model(model), head="classification",
                         num_labels=n_labels).to(dev)
    enc = encode(tok, texts[:batch_size], max_length=max_length, truncation=truncation)
    batch = pad_batch(enc.input_ids, enc.token_type_ids, tok.pad_token_id or 0, dev)
    y = torch.zeros(len(enc.input_ids), dtype=torch.long, device=dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5)
    m.train()
    took = []
    for _ in range(3):
        t0 = time.perf_counter()
        m(**batch, labels=y).loss.backward()
        opt.step()
        opt.zero_grad()
        took.append(time.perf_counter() - t0)
    return min(took[1:])


def estimate_seconds(plan: list[tuple[int, int]], step: float, batch_size: int) -> float:
    """Seconds for runs given as ``(training documents, epochs)`` pairs at ``step`` s a step.

    Prediction of the held-out fold is counted as a third of a training step per batch.
    """
    total = 0.0
    for n_docs, epochs in plan:
        steps = math.ceil(n_docs / batch_size)
        total += steps * epochs * step + steps / 3 * step / 4
    return total
