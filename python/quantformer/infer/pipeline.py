"""Reading and tokenising ahead of the forward passes (issue 37): while the model runs on one
chunk of a corpus file, a second thread reads the next chunk and tokenises it, so the model,
not the plumbing, bounds the speed of a streamed prediction.

This is the producer-consumer pipeline of input loaders (PyTorch's ``DataLoader`` prefetching,
``tf.data``'s ``prefetch``: Murray et al. 2021, "tf.data: a machine learning data processing
framework"), with one chunk in flight: memory holds at most two chunks. The fast tokenizers
(Rust) and the forward passes release Python's global interpreter lock, so the two threads run
at once. Errors of the reading thread are raised in the caller at the chunk where they
occurred; the order of the chunks is kept.

It pays only where a core is free for the reading thread (:func:`overlap_pays`: a GPU runs
the model, or the CPU has more cores than torch uses). On a 2-core CPU with torch on both,
tokenising ahead made 12,000 Jigsaw comments 13 % slower (107.3 against 123.4 docs/s), and the
chunks run one after another there (bench/RESULTS.md, "Precision").
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator

_DONE = object()


def prefetched(items: Iterable, prepare: Callable, depth: int = 1) -> Iterator[tuple]:
    """``(item, prepare(item))`` for each item, ``depth`` items read and prepared ahead in a
    background thread (``depth`` >= 1; the order of ``items`` is kept).

    Raises:
        whatever reading or preparing an item raised, when the caller reaches that item.
    """
    box: queue.Queue = queue.Queue(maxsize=max(1, int(depth)))
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                box.put((item, prepare(item)))
        except BaseException as exc:  # handed to the caller, raised there
            box.put(exc)
            return
        box.put(_DONE)

    worker = threading.Thread(target=produce, name="quantformer-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            got = box.get()
            if got is _DONE:
                return
            if isinstance(got, BaseException):
                raise got
            yield got
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue
            try:
                box.get_nowait()
            except queue.Empty:
                worker.join(timeout=0.05)


def overlap_pays(device: str) -> bool:
    """Whether a reading thread has a core of its own: the model runs on a GPU, or torch
    uses fewer threads than this process may run on (ONNX Runtime: never assumed)."""
    if str(device).startswith(("cuda", "mps")):
        return True
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) > torch.get_num_threads()


def scored_chunks(clf, chunks: Iterable, batch_size: int, bar, counts: dict) -> Iterator[tuple]:
    """``(chunk, probabilities, missing, rechecked)`` of each corpus chunk (see
    :meth:`~quantformer.infer.classifier.Classifier.scored`); where :func:`overlap_pays`, the
    next chunk is read and tokenised
    (:meth:`~quantformer.infer.classifier.Classifier.encoded`) while the model runs on this
    one."""
    if not overlap_pays(clf.device):
        for chunk in chunks:
            yield (chunk, *clf.scored(chunk["text"].tolist(), batch_size, bar, counts))
        return
    for chunk, enc in prefetched(chunks, lambda c: clf.encoded(c["text"].tolist())):
        yield (chunk, *clf.scored(chunk["text"].tolist(), batch_size, bar, counts, enc=enc))
