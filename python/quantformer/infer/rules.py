"""Deprecated: ``quantformer.infer.rules`` is now ``quantformer.cli._rules`` (the rules of the
contract between R and the core sit with the contract); this path works for one release, with a
DeprecationWarning."""

from .._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.cli._rules")
