"""The one answer to "may I write here?", per kind of output, run by every verb that writes
before any work: :func:`check_writable` (any path), :func:`check_output_file` (a frame or
figure file), :func:`check_model_dir` (a model or encoder folder), :func:`check_results_dir`
(tune and compare), :func:`check_job_dir` (a partitioned run's folder) and
:func:`check_project_file` (the coding room's SQLite file).

A verb writes its file or folder through :mod:`quantformer._core.atomic`: a temporary sibling in
the output's folder, renamed at the end, with missing folders created. So the output can be
written when its nearest existing ancestor is a folder this process may write into; a
read-only folder (permissions, ``chattr +i``, a read-only mount) is refused here, not after
training (issue 27, point 5).
"""

from __future__ import annotations

import os
from pathlib import Path

from .._core.errors import InputError
from .formats import detect_format


def check_writable(path: str | os.PathLike, param: str = "out") -> Path:
    """Refuse an output path whose folder cannot be written.

    Args:
        path: the output file or folder to be written.
        param: the library parameter that gave ``path`` (named in the message; default ``out``).

    Returns:
        ``Path(path)``.

    Raises:
        InputError: the nearest existing folder above ``path`` is a file or cannot be written
            (``os.access`` with write and search permission, which also sees ``chattr +i`` and
            read-only mounts, for root too).
    """
    p = Path(path)
    folder = p.absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{{{param}}} '{path}' is inside '{folder}', which is a file, not a "
                         f"folder; choose another {{{param}}}", params=[param])
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{{{param}}} '{path}' cannot be written: the folder '{folder}' is "
                         f"read-only; make it writable or choose another {{{param}}}",
                         params=[param])
    if p.is_dir() and not os.access(p, os.W_OK | os.X_OK):
        raise InputError(f"{{{param}}} '{path}' cannot be written: the folder is read-only; "
                         f"make it writable or choose another {{{param}}}", params=[param])
    return p


def check_output_file(path: str | os.PathLike, *, overwrite: bool = True,
                      param: str = "out") -> Path:
    """Validate an output file path before any work starts (format known, folder writable).

    ``param``: the library parameter that gave ``path`` (named in the message; default ``out``).

    Raises:
        InputError: unknown format, the file exists and ``overwrite`` is False, or its folder
            cannot be written (:func:`check_writable`).
    """
    p = Path(path)
    detect_format(p, write=True)
    if p.exists() and not overwrite:
        raise InputError(f"'{path}' exists; pass {{overwrite}} or choose another file name",
                         params=["overwrite"])
    if p.is_dir():
        raise InputError(f"'{path}' is a folder; give a file name such as preds.parquet")
    return check_writable(p, param)


def check_model_dir(out: str | os.PathLike, overwrite: bool = False) -> Path:
    """Validate a model output folder before training starts.

    Raises:
        InputError: ``out`` is a file, it exists and ``overwrite`` is False, or it cannot be
            written (:func:`check_writable`).
    """
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise InputError(f"{{out}} '{out}' is a file; give a folder name for the model",
                         params=["out"])
    if p.exists() and not overwrite:
        raise InputError(f"'{out}' exists; pass {{overwrite}} or choose another {{out}}",
                         params=["overwrite", "out"])
    return check_writable(p)


def check_results_dir(out: str | os.PathLike, overwrite: bool = False) -> Path:
    """Validate a results folder (``--out`` of ``tune`` and ``compare``) before any work.

    A folder that does not exist yet, or an empty one, is fine; a non-empty folder is replaced
    only when ``overwrite`` is True (see :func:`results_dir`).

    Args:
        out: the folder path.
        overwrite: allow replacing an existing non-empty folder (default False).

    Returns:
        ``Path(out)``.

    Raises:
        InputError: ``out`` is a file (never replaced), a non-empty folder and
            ``overwrite`` is False, or it cannot be written
            (:func:`check_writable`).
    """
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise InputError(f"{{out}} '{out}' is a file, not a folder; choose another {{out}} for "
                         "the results folder", params=["out"])
    if p.is_dir() and not overwrite and any(p.iterdir()):
        raise InputError(f"{{out}} '{out}' exists and is not empty; pass {{overwrite}} or "
                         "choose another {out}", params=["out", "overwrite"])
    return check_writable(p)


def check_job_dir(out, resume: bool, manifest: str = "manifest.json") -> Path:
    """Validate a partitioned run's output folder before any work.

    Args:
        out: the folder path.
        resume: continue the job recorded in the folder's manifest.
        manifest: the manifest's file name (``manifest.json``).

    Raises:
        InputError: ``out`` is a file; ``out`` is non-empty and ``resume`` is False; ``resume``
            is True but the non-empty folder has no manifest.
    """
    d = Path(out)
    if d.exists() and not d.is_dir():
        raise InputError(f"{{out}} '{out}' is a file; a partitioned run writes a folder "
                         "(one Parquet file per input partition)", params=["out"])
    content = [f for f in d.iterdir() if not f.name.startswith(".")] if d.exists() else []
    if content and not resume:
        raise InputError(f"{{out}} '{out}' exists and is not empty; pass {{resume}} to "
                         "continue the job recorded in its manifest.json, or choose a new {out}",
                         params=["out", "resume"])
    if content and not (d / manifest).exists():
        raise InputError(f"{{out}} '{out}' has files but no {manifest}, so it is not the "
                         "output of a quantformer partitioned run; choose a new {out}",
                         params=["out"])
    return check_writable(d)


def check_project_file(path: str | os.PathLike) -> None:
    """Refuse a project file (or folder) that cannot be written, before SQLite is asked.

    Raises:
        InputError: the file is read-only (permissions, ``chattr +i``, a read-only mount) or
            its folder cannot be written (SQLite's write-ahead log lives beside the file).
    """
    path = Path(path)
    fix = ("the coding room writes every code into it as it is pressed; make it writable "
           "or give another {project}")
    if path.is_dir():
        raise InputError(f"{{project}} '{path}' is a folder; give a file name such as "
                         "coding.sqlite", params=["project"])
    if path.exists():
        try:
            with open(path, "r+b"):
                pass
        except OSError as exc:
            raise InputError(f"{{project}} '{path}' is read-only ({exc.strerror}): " + fix,
                             params=["project"]) from None
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"the folder of {{project}} '{path}' does not exist; create it or "
                         "give another path", params=["project"])
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"the folder of {{project}} '{path}' is read-only: " + fix,
                         params=["project"])
