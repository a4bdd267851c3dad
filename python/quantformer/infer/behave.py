"""Deprecated: ``quantformer.infer.behave`` is now ``quantformer.audit.behave``;
this path works for one release, with a DeprecationWarning."""

from .._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.audit.behave")
