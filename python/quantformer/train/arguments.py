"""Training arguments: defaults by model size and one table of checks shared by finetune, tune
and compare.

Each check raises :class:`~quantformer._core.errors.InputError` with one message shape ("--NAME must
be ..., not VALUE"); the flag name is the CLI's, which R maps back to its argument names.
"""

from __future__ import annotations

import math

import numpy as np

from .._core.errors import InputError
from ..models.chunks import check_chunk_options, check_chunk_training, refuse_without_chunks
from ..models.hub import check_length_value, load_config
from ..models.precision import TRAIN_PRECISIONS
from ..models.tokenize import CHUNKS, TRUNCATIONS, check_strategy

DROPOUT = 0.1
BATCH_SIZE = 16
MAX_GRAD_NORM = 1.0
DEFAULT_VALID_FRACTION = 0.0
TASKS = ("classification", "regression", "multilabel")
PRECISIONS = TRAIN_PRECISIONS  # the one table: models.precision.PRECISION_USES
# hidden size -> (lr, epochs); the first row whose bound is >= the model's hidden size is used
SIZE_DEFAULTS = (
    (512, 8e-5, 4),    # small: MiniLM (384), DistilBERT-small, tiny test models
    (1024 - 1, 3e-5, 4),  # base: BERT/RoBERTa-base (768); paper section 6.4 range 1e-5..3e-5
    (10 ** 9, 1e-5, 4),   # large (1024+): the bottom of the paper's range, for stability
)


def model_size(model: str | None) -> str:
    """``small``, ``base`` or ``large`` from the model's hidden size (config only, no weights)."""
    config = load_config(model)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None) or 768
    for (bound, _, _), name in zip(SIZE_DEFAULTS, ("small", "base", "large")):
        if hidden <= bound:
            return name
    return "large"  # pragma: no cover


def default_hyperparameters(model: str | None = None) -> dict:
    """Default learning rate and epochs for a model, chosen by its size.

    ================  ===============  ======  ======
    size              hidden units     lr      epochs
    ================  ===============  ======  ======
    small             <= 512           8e-5    4
    base              513 - 1023       3e-5    4
    large             >= 1024          1e-5    4
    ================  ===============  ======  ======

    The paper's rates (1e-5 to 3e-5, section 6.4) were tuned for BERT-base. On the bundled
    all-MiniLM-L6-v2 (384 hidden units) they underfit: measured on the Abortion task, 2e-5 x 3
    epochs gave macro-F1 0.44, 5e-5 x 4 gave 0.59, 8e-5 x 4 0.62, 1e-4 x 5 0.61. See
    ``bench/RESULTS.md`` for the default's score (mean of seeds 1-3).

    Args:
        model: model name or folder (``None`` = the bundled default).

    Returns:
        ``{"lr": float, "epochs": int, "size": str}``.
    """
    size = model_size(model)
    i = ("small", "base", "large").index(size)
    _, lr, epochs = SIZE_DEFAULTS[i]
    return {"lr": lr, "epochs": epochs, "size": size}


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


def _check_ratio(value, name: str) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
        raise InputError(f"{{{name}}} must be a ratio in (0, 1] (the paper uses 0.25), not "
                         f"{value!r}", params=[name])


#: python parameter -> check(value, parameter); ``None`` values are "use the default"
PARAMETERS = {
    "epochs": lambda v, n: check_positive(v, n, int),
    "lr": lambda v, n: check_positive(v, n, float),
    "batch_size": lambda v, n: check_positive(v, n, int),
    "max_length": lambda v, n: check_length_value(v),  # the one rule (models.hub)
    "seed": _check_seed,
    "valid_fraction": _check_fraction,
    "oversample": _check_ratio,
    "grad_accum": lambda v, n: check_positive(v, n, int),
    "early_stopping": lambda v, n: check_positive(v, n, int),
    "task": lambda v, n: check_choice(v, n, TASKS),
    "precision": lambda v, n: check_choice(v, n, PRECISIONS),
}


def check_arguments(**values) -> None:
    """Check training arguments against :data:`PARAMETERS` (unknown names are ignored, ``None``
    means the default). Also used by tune and compare before any work.

    Raises:
        InputError: the first bad value, naming its parameter and what was expected.
    """
    for name, value in values.items():
        if name in PARAMETERS and value is not None:
            PARAMETERS[name](value, name)


def chunk_kwargs(truncation: str | None, stride: int | None = None,
                 max_chunks: int | None = None, aggregate: str | None = None,
                 chunk_training: str | None = None) -> dict:
    """The window settings tune and compare hand to each fine-tuning run, checked before any
    run: ``{}`` without ``truncation="chunks"``, else those given of ``stride``,
    ``max_chunks``, ``aggregate`` and ``chunk_training``.

    Raises:
        InputError: an unknown ``truncation``, ``aggregate`` or ``chunk_training``; window
            settings (``chunk_training`` labels too) without chunks; ``stride`` < 0;
            ``max_chunks`` < 1.
    """
    if truncation is not None:
        check_strategy(truncation, TRUNCATIONS)
    check_chunk_options(truncation, stride, max_chunks, aggregate)
    if chunk_training is not None:
        check_chunk_training(chunk_training)
    if truncation != CHUNKS:  # chunk_training's default, aggregate, is the same without chunks
        refuse_without_chunks(truncation, chunk_training=(
            None if chunk_training == "aggregate" else chunk_training))
        return {}
    given = {"stride": stride, "max_chunks": max_chunks, "aggregate": aggregate,
             "chunk_training": chunk_training}
    return {k: v for k, v in given.items() if v is not None}
