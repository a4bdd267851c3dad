"""Let a verb module be called like its main function.

``quantformer.train.finetune`` is both a module (``quantformer.train.finetune.default_hyperparameters``)
and the function ``quantformer.finetune(frame, ...)``. Python binds a submodule to its package
attribute whenever it is imported, so a lazily exported *function* of the same name would be
replaced by the module; giving the module a ``__call__`` keeps both spellings working.
"""

from __future__ import annotations

import sys
import types


def make_callable(module_name: str, func_name: str) -> None:
    """Make ``sys.modules[module_name](...)`` call the module's function ``func_name``."""
    module = sys.modules[module_name]

    class _CallableModule(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return getattr(self, func_name)(*args, **kwargs)

    module.__class__ = _CallableModule
