"""Exceptions raised by quantformer.

The CLI maps them to exit codes: :class:`InputError` (bad arguments, files or data the user can
fix) exits with 2, every other exception with 1.
"""

from __future__ import annotations


class QuantformerError(Exception):
    """Base class of all quantformer errors."""


class InputError(QuantformerError, ValueError):
    """Bad input the user can fix: a missing file, an unknown column, an invalid option value.

    The message names the problem and the fix. The CLI exits with code 2.
    """


class ModelDirError(InputError):
    """A model directory is missing, incomplete (no completion record) or not a classifier."""
