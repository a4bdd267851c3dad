"""Module paths that moved: an old path stays importable for one release, with a
:class:`DeprecationWarning` naming the new path, and forwards every attribute to it."""

from __future__ import annotations

import importlib
import warnings


def moved(old: str, new: str):
    """Warn that module ``old`` is now ``new`` and return ``(__getattr__, __dir__)`` for the
    old module, both forwarding to ``new`` (PEP 562)."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release; import from "
                  f"{new} instead", DeprecationWarning, stacklevel=3)
    target = importlib.import_module(new)

    def getattr_(name: str):
        return getattr(target, name)

    def dir_() -> list[str]:
        return dir(target)
    return getattr_, dir_
