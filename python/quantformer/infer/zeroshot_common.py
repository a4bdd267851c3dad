"""What both zero-shot methods share: the candidate labels and their rules, the hypothesis
template, the embedding method's calibration and temperature choices (checked before any model
loads), the entry of the method table, and the precision of a zero-shot run.

Each label is filled into a hypothesis template with one ``{}`` (Yin et al. 2019; Wankmüller
2022, Appendix J), e.g. ``"The text is {} legalization of abortion."``. The methods are
:mod:`quantformer.infer.zeroshot_nli` and :mod:`quantformer.infer.zeroshot_embed`; the verb is
:func:`quantformer.infer.zeroshot.zeroshot`.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._core.errors import InputError
from ..models.precision import Precision, TorchPrecision, check_precision, torch_precision

DEFAULT_HYPOTHESIS = "This text is about {}."
CALIBRATIONS = ("standardise", "centre", "none")
DEFAULT_CALIBRATION = "standardise"
#: softmax temperatures of the embedding method, by calibration
EMBED_TEMPERATURE = {"standardise": 1.0, "centre": 0.05, "none": 0.05}
METHOD_COL = "zeroshot_method"
#: the fewest candidate labels: single-label zero-shot chooses between at least two; with
#: ``multi_label`` each label is scored on its own, so one is enough
MIN_LABELS = 2
MIN_LABELS_MULTI_LABEL = 1


class ZeroShotWarning(UserWarning):
    """Something the zero-shot run worked around (e.g. too few documents to calibrate)."""


@dataclass(frozen=True)
class ZeroShotMethod:
    """One entry of the zero-shot method table (:data:`quantformer.infer.zeroshot.METHODS`).

    Attributes:
        name: the ``method`` value (``"nli"``, ``"embedding"``).
        title: the name every output gives the method (``"NLI entailment"``).
        short: the method's name in messages (``"NLI"`` in "the NLI method").
        settings: the settings only this method takes (refused with the other methods).
        score: ``score(texts, present, labels, hypothesis, *, config, options, model,
            multi_label, batch_size, reading, device, progress, backend, quantize,
            precision)`` -> ``(probabilities (n_present, n_labels), truncated, info)``;
            ``options`` holds the method's own ``settings``.
    """

    name: str
    title: str
    short: str
    settings: tuple
    score: Callable


# ------------------------------------------------------------------------------------------
# the hypothesis and the labels


def check_hypothesis(hypothesis: str) -> str:
    """Validate a hypothesis template: a string with exactly one ``{}`` placeholder.

    Raises:
        InputError: no placeholder, more than one, a named one (``{label}``), or unbalanced
            braces.
    """
    if not isinstance(hypothesis, str) or not hypothesis.strip():
        raise InputError("the hypothesis template is empty; give one with a {} for the label, "
                         "e.g. {hypothesis} 'This text is about {}.'", params=["hypothesis"])
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(hypothesis) if f is not None]
    except ValueError as exc:
        raise InputError(f"the hypothesis template '{hypothesis}' has unbalanced braces ({exc}); "
                         "write exactly one {} where the label goes, and {{ }} for a literal "
                         "brace") from None
    if not fields:
        raise InputError(f"the hypothesis template '{hypothesis}' has no {{}} placeholder for the "
                         "label; write it like 'This text is about {}.'")
    if len(fields) > 1:
        raise InputError(f"the hypothesis template '{hypothesis}' has {len(fields)} placeholders; "
                         "it needs exactly one {} where the label goes")
    if fields[0] != "":
        raise InputError(f"the hypothesis template '{hypothesis}' has a named placeholder "
                         f"{{{fields[0]}}}; write {{}} where the label goes")
    return hypothesis


def parse_labels(labels) -> list[str]:
    """Labels from a list of strings, or one comma-separated string (``"a,b,c"``).

    Surrounding whitespace is stripped. Use a list (or a labels file, one label a line) for
    labels that contain commas.
    """
    if isinstance(labels, str):
        labels = labels.split(",")
    if labels is None:
        return []
    return [str(x).strip() if x is not None else "" for x in labels]


def label_rules() -> dict:
    """What :func:`check_labels` requires of candidate labels, for callers that check them
    before a run (R's ``textmodel_zeroshot()``, through ``quantformer info --verbs --json``):
    the fewest labels without and with ``multi_label``, and that labels are stripped of
    surrounding whitespace, non-empty, distinct and on one line (a labels file holds one a
    line)."""
    return {"min_labels": MIN_LABELS, "min_labels_multi_label": MIN_LABELS_MULTI_LABEL,
            "strip": True, "nonempty": True, "distinct": True, "one_line": True}


def check_labels(labels, multi_label: bool = False) -> list[str]:
    """Validate candidate labels.

    Raises:
        InputError: an empty label, a duplicate, or fewer than two labels in single-label
            mode (one label is allowed with ``multi_label``).
    """
    labels = parse_labels(labels)
    empty = [i + 1 for i, x in enumerate(labels) if x == ""]
    if empty:
        raise InputError(f"label {', '.join(map(str, empty))} of {len(labels)} is empty; give "
                         "each label as a phrase, e.g. {labels} 'in favor of,against' (no empty "
                         "items or trailing commas)", params=["labels"])
    seen, dups = set(), []
    for x in labels:
        if x in seen and x not in dups:
            dups.append(x)
        seen.add(x)
    if dups:
        raise InputError(f"duplicate label(s): {', '.join(map(repr, dups))}; give each label once "
                         "(zeroshot's labels are the candidate class descriptions, one per "
                         "line in {labels_file}, not one label per document)",
                         params=["labels_file"])
    if not labels:
        raise InputError("no labels given; pass {labels} 'a,b' or {labels_file}",
                         params=["labels", "labels_file"])
    if len(labels) < (MIN_LABELS_MULTI_LABEL if multi_label else MIN_LABELS):
        raise InputError(f"single-label zero-shot needs at least two labels to choose between, "
                         f"got only {labels[0]!r}; add labels, or pass {{multi_label}} to "
                         "score each label on its own", params=["multi_label"])
    return labels


# ------------------------------------------------------------------------------------------
# the embedding method's calibration and temperature, checked before any model loads


def check_calibration(calibration: str | None) -> str | None:
    """Raises: InputError: a ``calibration`` not in :data:`CALIBRATIONS` (None: not given)."""
    if calibration is not None and calibration not in CALIBRATIONS:
        raise InputError(f"unknown {{calibration}} '{calibration}'; use one of: "
                         f"{', '.join(CALIBRATIONS)}", params=["calibration"])
    return calibration


def check_temperature(temperature: float | None) -> float | None:
    """Raises: InputError: a ``temperature`` not above 0 (None: not given)."""
    if temperature is not None and not float(temperature) > 0:
        raise InputError(f"{{temperature}} must be greater than 0, not {temperature}",
                         params=["temperature"])
    return temperature


# ------------------------------------------------------------------------------------------
# what both methods' scoring uses


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """The softmax of ``x`` along ``axis`` (shifted by the maximum)."""
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def run_precision(precision: str, device: str, multi_label: bool,
                  backend: str) -> TorchPrecision | None:
    """The precision of a zero-shot run on a resolved ``device``: as predict's
    (:func:`quantformer.models.precision.torch_precision`; single-label near ties computed
    again in fp32; ``auto`` keeps multi-label runs in fp32, which have no top-two margin), or
    None with ONNX Runtime (``quantize`` sets it)."""
    if backend == "onnx":
        return None
    if multi_label:
        return multi_label_precision(precision)
    return torch_precision(precision, device)


def multi_label_precision(precision: str) -> TorchPrecision:
    """fp32 for multi-label scoring: each label's probability stands alone, with no top-two
    margin whose near ties bf16 could have computed again in fp32.

    Raises:
        InputError: a bad ``precision``, or ``bf16`` (naming ``multi_label``).
    """
    if check_precision(precision) == "bf16":
        raise InputError("{precision} bf16 with {multi_label} has no fp32 recheck: use auto "
                         "or fp32", params=["precision", "multi_label"])
    return TorchPrecision(Precision("fp32", precision,
                                    "fp32 for multi-label scoring (no near-tie recheck)"))


def window_rows_of(doc: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The rows of the windows of documents ``idx`` (sorted) among windows whose documents are
    ``doc`` (grouped by document, in order): where the windows of the documents ``idx`` read
    again on their own go."""
    return np.flatnonzero(np.isin(doc, idx))
