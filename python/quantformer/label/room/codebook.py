"""Deprecated: ``quantformer.label.room.codebook`` (as in ``from quantformer.label.room.codebook import make_codebook``)
is now ``quantformer.io.codebook``; this path works for one release, with a DeprecationWarning."""

from ..._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.io.codebook")
