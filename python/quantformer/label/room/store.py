"""Deprecated: ``quantformer.label.room.store`` (as in ``from quantformer.label.room.store import Store``)
is now ``quantformer.room.store``; this path works for one release, with a DeprecationWarning."""

from ..._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.room.store")
