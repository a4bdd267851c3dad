"""Exceptions raised by quantformer, and the one table that names their parameters.

The CLI maps them to exit codes: :class:`InputError` (bad arguments, files or data the user can
fix) exits with 2, every other exception with 1.

An error about a parameter names it as a field in its message, ``"{max_length} must be at
least 8, not 4"``, and lists it in ``params``. ``str(error)`` shows the library's own parameter
name (``max_length``); the CLI shows the flag (``--max-length``) and, for R, the R argument of
the calling function (``max_length``, or ``y`` for ``label_col``), all from
:data:`quantformer._core.parameters.PARAMETERS`. No message is searched for names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


class QuantformerError(Exception):
    """Base class of all quantformer errors."""


class Rendered:
    """A message with parameter fields (``{name}``), rendered for the library, the command line
    or R: the one ``render()`` of :class:`InputError` and :class:`ParamWarning`.

    Args:
        message: the text; each parameter it names is written ``{name}``.
        params: the parameter names written as fields in ``message`` (default: none).
        r_message: the text when R called, for wording that is not a parameter (R's named
            vectors instead of files); fields as in ``message`` (default: ``message``).
    """

    def __init__(self, message: str = "", *, params: Iterable[str] = (),
                 r_message: str | None = None):
        super().__init__(message)
        self.params = tuple(params)
        self.r_message = r_message

    def render(self, name: Callable[[str], str], r: bool = False) -> str:
        """The message (``r``: the R message, when there is one) with each parameter field
        written as ``name(parameter)``."""
        text = self.r_message if r and self.r_message is not None else \
            (str(self.args[0]) if self.args else "")
        for p in self.params:
            text = text.replace("{" + p + "}", name(p))
        return text

    def __str__(self) -> str:
        return self.render(lambda p: p)


class InputError(Rendered, QuantformerError, ValueError):
    """Bad input the user can fix: a missing file, an unknown column, an invalid option value.

    The message names the problem and the fix. The CLI exits with code 2.

    Args:
        message: the text; each parameter it names is written ``{name}``.
        params: the parameter names written as fields in ``message`` (default: none).
        r_message: the text when R called, for wording that is not a parameter (R's named
            vectors instead of files); fields as in ``message`` (default: ``message``).
    """


def unused_error(names: Iterable[str], one: str, several: str, *,
                 also: Iterable[str] = ()) -> InputError:
    """The error for settings that would not be used: the parameters ``names`` as fields
    (``{a}, {b}``), then ``one`` when there is one of them, ``several`` when there are more
    (either may name other parameters as fields, listed in ``also``)."""
    names = list(names)
    return InputError(", ".join("{" + n + "}" for n in names) + " "
                      + (one if len(names) == 1 else several), params=[*names, *also])


class ModelDirError(InputError):
    """A model directory is missing, incomplete (no completion record) or not a classifier."""


class ParamWarning(Rendered, UserWarning):
    """A warning that names parameters, rendered like :class:`InputError`: as flags on the
    command line, as the calling function's arguments in R.

    Args:
        message: the text; each parameter it names is written ``{name}``, a setting of one
            ``{name=value}`` (``--task regression`` on the command line,
            ``task = "regression"`` in R).
        params: the fields of ``message`` (``"max_length"``, ``"task=regression"``).
        r_message: the text when R called, for wording that is not a parameter (an R
            function call instead of a command line); fields as in ``message``.
    """
