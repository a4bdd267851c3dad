"""Training arguments: defaults by model size (Wankmüller 2022, section 6.4, and the sizes
measured here) and the rules of training's arguments, the library's table
(:mod:`quantformer.models.arguments`) with the precisions training offers.
"""

from __future__ import annotations

from ..models.arguments import PARAMETERS, check_choice, check_with
from ..models.hub import load_config
from ..models.precision import TRAIN_PRECISIONS

DROPOUT = 0.1
BATCH_SIZE = 16
MAX_GRAD_NORM = 1.0
DEFAULT_VALID_FRACTION = 0.0
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


#: the rules of training's arguments: the library's table (:mod:`quantformer.models.arguments`)
#: with the precisions training offers
TRAINING_PARAMETERS = {**PARAMETERS, "precision": lambda v, n: check_choice(v, n, PRECISIONS)}


def check_training(**values) -> None:
    """Check training arguments against :data:`TRAINING_PARAMETERS` (unknown names are
    ignored, ``None`` means the default). Also used by tune and compare before any work.

    Raises:
        InputError: the first bad value, naming its parameter and what was expected.
    """
    check_with(TRAINING_PARAMETERS, values)
