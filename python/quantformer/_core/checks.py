"""Checks of argument values shared by layers that do not import each other."""

from __future__ import annotations

from .errors import InputError


def check_level(level: float) -> float:
    """The confidence level as a float in (0, 1).

    Raises:
        InputError: ``level`` is not a number in (0, 1).
    """
    try:
        level = float(level)
    except (TypeError, ValueError):
        raise InputError(f"{{level}} must be a number in (0, 1) such as 0.95, not {level!r}",
                         params=["level"]) from None
    if not 0 < level < 1:
        raise InputError(f"{{level}} must be in (0, 1) such as 0.95, not {level}",
                         params=["level"])
    return level
