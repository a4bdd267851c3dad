"""The one check that an output can be written, run by every verb that writes before any work.

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
