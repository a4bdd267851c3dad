"""The on-disk cache of a corpus' document embeddings: one ``.npz`` file (NumPy's
``savez``: the doc_ids and the vectors) beside the corpus file or in a folder of its own,
named by a hash of the file's content and of the settings that made the vectors, so an edited
corpus or another model never reads stale vectors. The vectors themselves are computed by
:mod:`quantformer.infer.embed`; ``suggest`` and the coding room read them from here.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import numpy as np

from .._core.atomic import atomic_file

CACHE_VERSION = 1  # part of every key: a new layout of the file reads no old file


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_file(corpus: str | os.PathLike, settings: list[str],
               cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the embeddings of ``corpus`` made with ``settings`` are cached.

    Args:
        corpus: the corpus file (its content is hashed).
        settings: the strings that made the vectors (model, token limit, truncation,
            precision), in a fixed order; part of the key.
        cache_dir: the folder of the cache (None: beside ``corpus``, a hidden file).

    Returns:
        ``<cache_dir>/quantformer-embeddings-<key>.npz``, or
        ``.<corpus name>.quantformer-embeddings-<key>.npz`` beside ``corpus``; ``<key>`` is
        the first 16 hex digits of a SHA-256 over the cache version, the file's digest and
        ``settings``.

    Raises:
        OSError: ``corpus`` cannot be read.
    """
    p = Path(corpus)
    key = "|".join([str(CACHE_VERSION), file_digest(p), *settings])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    if cache_dir is not None:
        return Path(cache_dir) / f"quantformer-embeddings-{digest}.npz"
    return p.with_name(f".{p.name}.quantformer-embeddings-{digest}.npz")


def read_cache(path: Path, doc_ids, warning: type[Warning] = UserWarning,
               stacklevel: int = 2) -> np.ndarray | None:
    """Cached vectors when ``path`` holds them for exactly ``doc_ids``.

    Args:
        path: the cache file (see :func:`cache_file`).
        doc_ids: the corpus' doc_ids, in order.
        warning: the category of the warning about a damaged or stale file.
        stacklevel: of that warning (2: the caller's line).

    Returns:
        float32 (n_docs, hidden); None when the file is absent, and None with a warning when
        it is damaged or holds other documents (the caller computes the vectors again).
    """
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            ids, vecs = z["doc_id"], z["vectors"]
        if list(ids) == list(map(str, doc_ids)) and vecs.ndim == 2 and len(vecs) == len(ids):
            return vecs.astype(np.float32)
    except Exception:  # a truncated or foreign file: zip, key and value errors alike
        pass
    warnings.warn(f"the embedding cache '{path}' is damaged or stale; embedding again",
                  warning, stacklevel=stacklevel)
    return None


def write_cache(path: Path, doc_ids, vectors: np.ndarray,
                warning: type[Warning] = UserWarning, stacklevel: int = 2) -> None:
    """Write the cache atomically (temporary file, then rename); a folder that cannot be
    written only warns (``warning``, at ``stacklevel``), since the vectors are in hand."""
    try:
        with atomic_file(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, doc_id=np.asarray(list(map(str, doc_ids)), dtype=str),
                     vectors=vectors)
    except OSError as exc:
        warnings.warn(f"cannot cache embeddings beside the corpus ({exc})", warning,
                      stacklevel=stacklevel)
