"""Deprecated: ``quantformer.infer.explain`` is now ``quantformer.audit.explain``;
this path works for one release, with a DeprecationWarning."""

from .._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.audit.explain")
