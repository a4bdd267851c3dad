"""Reading and tokenising ahead of the forward passes (issue 37): while the model runs on one
chunk of a corpus file, a second thread reads the next chunk and tokenises it, so the model,
not the plumbing, bounds the speed of a streamed prediction.

This is the producer-consumer pipeline of input loaders (PyTorch's ``DataLoader`` prefetching,
``tf.data``'s ``prefetch``: Murray et al. 2021, "tf.data: a machine learning data processing
framework"), with one chunk in flight: memory holds at most two chunks. The fast tokenizers
(Rust) and the forward passes release Python's global interpreter lock, so the two threads run
at once. Errors of the reading thread are raised in the caller at the chunk where they
occurred; the order of the chunks is kept.
"""

from __future__ import annotations

import queue
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


def scored_chunks(clf, chunks: Iterable, batch_size: int, bar, counts: dict) -> Iterator[tuple]:
    """``(chunk, probabilities, missing, rechecked)`` of each corpus chunk, the next chunk read
    and tokenised (:meth:`~quantformer.infer.classifier.Classifier.encoded`) while the model
    runs on this one (see :meth:`~quantformer.infer.classifier.Classifier.scored`)."""
    for chunk, enc in prefetched(chunks, lambda c: clf.encoded(c["text"].tolist())):
        yield (chunk, *clf.scored(chunk["text"].tolist(), batch_size, bar, counts, enc=enc))
