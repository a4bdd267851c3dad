"""Deprecated: ``quantformer.infer.explain_words`` is now ``quantformer.audit.explain_words``;
this path works for one release, with a DeprecationWarning."""

from .._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.audit.explain_words")
