"""Deprecated: ``quantformer.train.scoring`` is now ``quantformer.select.scoring``, beside its
only users (tune and compare); this path works for one release, with a DeprecationWarning."""

from .._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.select.scoring")
