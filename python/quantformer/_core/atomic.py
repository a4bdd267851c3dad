"""The one atomic writer: a file or folder appears whole under its name, or not at all.

Every output of the core (frames, figures, JSON reports, model directories, results folders,
ONNX caches, embedding caches, manifests) is written into a temporary sibling (``.NAME.*.part``)
and renamed into place, so an interrupted run never leaves a half-written file under the name a
user (or R) will read. Temporary files get the usual permissions (``mkstemp`` and ``mkdtemp``
make them private), so outputs are readable as if written directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

UMASK = os.umask(0o022)
os.umask(UMASK)


def json_default(o):
    """``json.dumps(default=...)`` for numpy scalars and arrays (else ``str``)."""
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def temporary_sibling(target: Path) -> Path:
    """An empty temporary file beside ``target`` (its folder is created), with the usual mode.

    Raises:
        OSError: the folder cannot be created or written.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    os.chmod(name, 0o666 & ~UMASK)
    return Path(name)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on any exception
    (Ctrl-C included) it is removed and ``path`` is untouched."""
    target = Path(path)
    tmp = temporary_sibling(target)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(obj, path: str | os.PathLike) -> Path:
    """Write ``obj`` as indented JSON atomically (numpy values as plain numbers)."""
    return write_text(path, json.dumps(obj, indent=2, default=json_default))


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, keep_theirs: bool = False) -> Iterator[Path]:
    """Yield a temporary folder to fill; on success it replaces the folder ``path``.

    An existing folder is moved aside first and removed only after the swap; if the swap fails
    between the two renames it is put back. On any exception the temporary folder is removed.

    Args:
        path: the folder to create or replace.
        keep_theirs: a cache written by several processes: when another process renamed its
            folder into place first, keep theirs and drop ours (default False: raise).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent))
    os.chmod(tmp, 0o777 & ~UMASK)
    old = None
    try:
        yield tmp
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old",
                                        dir=target.parent))
            os.replace(target, old)  # onto the empty folder mkdtemp made
        try:
            os.replace(tmp, target)
        except OSError:
            if not (keep_theirs and target.exists()):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            if target.exists():
                os.rmdir(old)  # the rename aside failed: drop the empty placeholder
            else:
                os.replace(old, target)  # failed between the two renames: put it back
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
