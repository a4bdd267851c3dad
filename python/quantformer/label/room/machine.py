"""Deprecated: ``quantformer.label.room.machine`` (as in ``from quantformer.label.room.machine import add_machine_coder``)
is now ``quantformer.room.machine``; this path works for one release, with a DeprecationWarning."""

from ..._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.room.machine")
