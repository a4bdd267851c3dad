"""The rules of the library's numeric and choice arguments: one table that every layer checking
parameters uses (training, tune, compare, inference).

Each rule raises :class:`~quantformer._core.errors.InputError` with one message shape
("{NAME} must be ..., not VALUE"); the field is the library's parameter name, which the CLI
renders as its flag and R as its argument (:mod:`quantformer._core.parameters`). A caller with
parameters of its own extends the table, as scikit-learn's estimators extend their parent's
``_parameter_constraints``: ``{**PARAMETERS, "folds": rule}``.
"""

from __future__ import annotations

import math

import numpy as np

from .._core.errors import InputError
from .hub import check_length_value

TASKS = ("classification", "regression", "multilabel")


def check_positive(value, name: str, kind) -> None:
    """Raise InputError unless ``value`` is a finite number > 0 (a whole one for ``int``)."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if kind is int:
        ok = ok and float(value) == int(value)
    if not ok or not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
        what = "a whole number" if kind is int else "a number"
        raise InputError(f"{{{name}}} must be {what} greater than 0, not {value!r}",
                         params=[name])


def check_choice(value, name: str, choices) -> None:
    """Raise InputError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise InputError(f"{{{name}}} must be one of {', '.join(choices)}, not {value!r}",
                         params=[name])


def _check_seed(value, name: str) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise InputError(f"{{{name}}} must be a whole number, not {value!r}", params=[name])


def _check_fraction(value, name: str) -> None:
    if not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise InputError(f"{{{name}}} must be in [0, 1), not {value}", params=[name])


def check_ratio(value, name: str) -> None:
    """The rule of an oversampling ratio: a number in (0, 1]."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
        raise InputError(f"{{{name}}} must be a ratio in (0, 1] (the paper uses 0.25), not "
                         f"{value!r}", params=[name])


def positive_int(value, name: str) -> None:
    """The rule of a count: a whole number greater than 0."""
    check_positive(value, name, int)


def positive_float(value, name: str) -> None:
    """The rule of a rate: a finite number greater than 0."""
    check_positive(value, name, float)


#: python parameter -> rule(value, parameter); ``None`` values are "use the default"
PARAMETERS = {
    "epochs": positive_int,
    "lr": positive_float,
    "batch_size": positive_int,
    "max_length": lambda v, n: check_length_value(v),  # the one rule (models.hub)
    "seed": _check_seed,
    "valid_fraction": _check_fraction,
    "oversample": check_ratio,
    "grad_accum": positive_int,
    "early_stopping": positive_int,
    "task": lambda v, n: check_choice(v, n, TASKS),
}


def check_with(table: dict, values: dict) -> None:
    """Check ``values`` against the rules of ``table`` (names without a rule are ignored,
    ``None`` means the default).

    Raises:
        InputError: the first bad value, naming its parameter and what was expected.
    """
    for name, value in values.items():
        if name in table and value is not None:
            table[name](value, name)


def check_arguments(**values) -> None:
    """Check arguments against :data:`PARAMETERS` (:func:`check_with`).

    Raises:
        InputError: the first bad value, naming its parameter and what was expected.
    """
    check_with(PARAMETERS, values)
