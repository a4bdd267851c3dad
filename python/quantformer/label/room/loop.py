"""Deprecated: ``quantformer.label.room.loop`` (as in ``from quantformer.label.room.loop import Room``)
is now ``quantformer.room.loop``; this path works for one release, with a DeprecationWarning."""

from ..._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.room.loop")
