"""Deprecated: ``quantformer.frames`` (as in ``quantformer.frames.to_frame(df, ...)``) is now ``quantformer.io.frames``;
this path works for one release, with a DeprecationWarning."""

from ._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.io.frames")
