"""Deprecated: ``quantformer.infer.explain_forward`` is now ``quantformer.audit.explain_forward``;
this path works for one release, with a DeprecationWarning."""

from .._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.audit.explain_forward")
