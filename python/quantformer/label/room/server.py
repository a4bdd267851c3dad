"""Deprecated: ``quantformer.label.room.server`` (as in ``from quantformer.label.room.server import RoomServer``)
is now ``quantformer.room.server``; this path works for one release, with a DeprecationWarning."""

from ..._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.room.server")
