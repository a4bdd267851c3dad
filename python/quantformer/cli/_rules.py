"""The core's rules that a caller checks before a run (the contract's side of them), in one dict: R reads them once a session
(``quantformer info --verbs --json``) instead of keeping copies that could drift.

``caller_rules()`` gives ``numeric_classes_max`` (more distinct numeric labels than this look
like a numeric outcome: :data:`quantformer.models.tasks.NUMERIC_CLASSES_MAX`) and
``zeroshot_labels`` (:func:`quantformer.infer.zeroshot.label_rules`) and ``reading``, the
choices and defaults of how a document is read (:meth:`quantformer.models.reading.Reading.rules`),
and ``precision``: its values by use (``infer``, ``train``) and its default
(:data:`quantformer.models.precision.PRECISION_USES`, ``DEFAULT_PRECISION``).
"""

from __future__ import annotations

from ..infer.zeroshot import label_rules
from ..models.precision import DEFAULT_PRECISION, PRECISIONS, TRAIN_PRECISIONS
from ..models.reading import Reading
from ..models.tasks import NUMERIC_CLASSES_MAX


def caller_rules() -> dict:
    """The rules callers check before a run (see the module docstring); plain JSON types."""
    return {"numeric_classes_max": NUMERIC_CLASSES_MAX, "zeroshot_labels": label_rules(),
            "reading": Reading.rules(),
            "precision": {"infer": list(PRECISIONS), "train": list(TRAIN_PRECISIONS),
                          "default": DEFAULT_PRECISION}}
