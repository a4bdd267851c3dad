"""Deprecated: ``quantformer.label.room.finetune_now`` (as in ``from quantformer.label.room.finetune_now import FinetuneNow``)
is now ``quantformer.room.finetune_now``; this path works for one release, with a DeprecationWarning."""

from ..._core.moved import moved

__getattr__, __dir__ = moved(__name__, "quantformer.room.finetune_now")
