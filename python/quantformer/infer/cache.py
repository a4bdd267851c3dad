"""The one bounded model cache of a process: the worker, Dask workers and suggest share it.

Every model the core loads for inference (fine-tuned classifiers through
:func:`quantformer.infer.load.load_model`, sentence encoders through
:func:`quantformer.infer.embed.load_encoder`, zero-shot NLI networks) goes through
:data:`MODELS`. A plain command-line process keeps nothing (size 0); the persistent worker
(``quantformer serve --cache-size N``, default 2) and each Dask worker process (see
:mod:`quantformer.scale.dask`) give it room, so a second call on the same model costs the
inference only. Entries are keyed by the model folder, the modification times and sizes of its
files (a folder written again is loaded again), the device and the loading options; the least
recently used entry is dropped first.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path


def folder_stamp(path) -> tuple:
    """(name, mtime_ns, size) of each file of a model folder; empty for hub ids, the bundled
    default (``None``) and folders that cannot be read."""
    try:
        return tuple(sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size)
                            for e in os.scandir(path) if e.is_file()))
    except (OSError, TypeError):
        return ()


def model_key(kind: str, path, device: str, **options) -> tuple:
    """The cache key of one loaded model: what it is, its folder and files, device, options."""
    folder = str(Path(path).resolve()) if path is not None else None
    return (kind, folder, folder_stamp(path), device, tuple(sorted(options.items())))


class ModelCache:
    """The last ``size`` models loaded, least recently used dropped (thread-safe).

    Args:
        size: models kept (int >= 0; 0 keeps none: every call loads).
    """

    def __init__(self, size: int = 0):
        self.size = int(size)
        self.models: OrderedDict = OrderedDict()
        self.loads = 0  # models actually read from disk
        self.hits = 0
        self._lock = threading.RLock()

    def get(self, kind: str, path, device: str, load: Callable[[], object], **options):
        """The model ``load()`` returns, from the cache when this key was loaded before.

        Args:
            kind: what is loaded (``classifier``, ``encoder``, ``zeroshot-nli``).
            path: the model folder or id (``None``: the bundled default).
            device: the device string asked for.
            load: loads the model when it is not cached.
            options: further loading options that make another model (backend, quantize).
        """
        key = model_key(kind, path, device, **options)
        with self._lock:
            if key in self.models:
                self.models.move_to_end(key)
                self.hits += 1
                return self.models[key]
        model = load()
        with self._lock:
            self.loads += 1
            if self.size > 0:
                self.models[key] = model
                self._trim()
        return model

    def resize(self, size: int) -> None:
        """Keep at most ``size`` models from now on (dropping the oldest beyond it)."""
        with self._lock:
            self.size = int(size)
            self._trim()

    def clear(self) -> None:
        """Drop every cached model."""
        with self._lock:
            self.models.clear()

    def _trim(self) -> None:
        while len(self.models) > max(self.size, 0):
            self.models.popitem(last=False)


#: the cache of this process (size 0 until the worker or a Dask worker sizes it)
MODELS = ModelCache(0)
