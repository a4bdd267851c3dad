"""Deprecated: ``quantformer.onnx_recheck`` (as in ``quantformer.onnx_recheck``) is now ``quantformer.models.onnx.recheck``;
this path works for one release, with a DeprecationWarning."""

from ._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.models.onnx.recheck")
