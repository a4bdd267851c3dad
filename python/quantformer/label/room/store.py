"""Deprecated: ``quantformer.label.room.store`` (as in ``from quantformer.label.room.store import Store``)
is now ``quantformer.room.store`` (its export, ``export_codes`` and ``final_codes``,
``quantformer.room.export``); this path works for one release, with a DeprecationWarning."""

import importlib

from ..._core.moved import moved

_store_getattr, _store_dir = moved(__name__, "quantformer.room.store")
EXPORTED = ("EXPORT_COLUMNS", "export_codes", "final_codes")  # now in quantformer.room.export


def __getattr__(name: str):
    if name in EXPORTED:
        return getattr(importlib.import_module("quantformer.room.export"), name)
    return _store_getattr(name)


def __dir__() -> list[str]:
    return sorted({*_store_dir(), *EXPORTED})
