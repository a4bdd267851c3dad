"""Deprecated: ``quantformer.datasets`` (as in ``from quantformer.datasets import split_by_group``) is now ``quantformer.io.datasets``;
this path works for one release, with a DeprecationWarning."""

from ._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.io.datasets")
