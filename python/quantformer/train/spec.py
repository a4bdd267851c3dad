"""The training settings of one fine-tuning run as one value (:class:`TrainSpec`): built once
from the caller's arguments, checked once, given its method's defaults in one place, and
passed down to the recipe of its method (standard, NLI, SetFit).

The defaults of the standard recipe come from Wankmüller (2022), section 6.3-6.4: 512 tokens
per document with head+tail truncation (the first 128 and last 382 tokens, Sun et al. 2019).
SetFit (Tunstall et al. 2022) keeps its sentence-transformer body's own limit and cuts at the
head, as sentence-transformers does; the body's limit is read in :mod:`quantformer.train.setfit`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from .._core.errors import InputError, unused_error
from ..models.precision import DEFAULT_PRECISION
from ..models.tasks import check_label_columns
from ..models.tokenize import DEFAULT_MAX_LENGTH, DEFAULT_TRUNCATION
from .arguments import BATCH_SIZE, DEFAULT_VALID_FRACTION
from .chunks import check_chunk_settings
from .nli import check_method_options

METHODS = ("standard", "nli", "setfit")
# keywords each recipe takes besides the frame (train.standard, train.nli, train.setfit)
_COMMON = ("model", "epochs", "lr", "batch_size", "max_length", "truncation", "oversample",
           "valid_fraction", "labels", "seed", "device", "quiet")
_STANDARD = _COMMON + ("task", "label_cols", "label_sep", "tune_thresholds", "early_stopping",
                       "precision", "grad_accum", "stride", "max_chunks", "aggregate",
                       "chunk_training")
_NLI = _COMMON + ("hypothesis", "label_phrases", "early_stopping", "precision", "grad_accum")
_SETFIT = _COMMON
# options of the standard recipe that SetFit's does not take (its body trains in fp32 on pairs
# for a fixed number of steps, its head by logistic regression), each with why
_NOT_SETFIT = {"early_stopping": "it takes no validation data to stop on",
               "grad_accum": "its body trains on batch_size pairs a step"}


@dataclass(frozen=True)
class TrainSpec:
    """The settings of one fine-tuning run; see :func:`quantformer.train.finetune.finetune`
    for each field. ``None`` in ``max_length``/``truncation`` means the method's default
    (:meth:`with_defaults`)."""

    model: str | None = None
    epochs: int | None = None
    lr: float | None = None
    batch_size: int = BATCH_SIZE
    max_length: int | None = None
    truncation: str | None = None
    oversample: float | None = None
    valid_fraction: float = DEFAULT_VALID_FRACTION
    labels: list | None = None
    seed: int = 1
    device: str = "auto"
    quiet: bool = False
    task: str = "classification"
    label_cols: list | None = None
    label_sep: str | None = None
    tune_thresholds: bool = False
    early_stopping: int | None = None
    precision: str = DEFAULT_PRECISION
    grad_accum: int = 1
    method: str = "standard"
    hypothesis: str | None = None
    label_phrases: object = None
    nli_pairs: str = "balanced"
    setfit_iterations: int | None = None
    stride: int | None = None
    max_chunks: int | None = None
    aggregate: str | None = None
    chunk_training: str = "aggregate"

    def check(self) -> TrainSpec:
        """Refuse options that do not belong to the method; returns the spec.

        Raises:
            InputError: ``setfit_iterations`` without ``method="setfit"``; NLI options with
                another method (:func:`quantformer.train.nli.check_method_options`);
                ``chunk_training`` labels with NLI or SetFit, ``aggregate`` with SetFit; a method
                other than classification for SetFit/NLI with another task; ``tune_thresholds``,
                ``label_cols`` or ``label_sep`` without ``task="multilabel"``; window settings
                (``stride``, ``max_chunks``, ``aggregate``, ``chunk_training``) without
                ``truncation="chunks"``;
                ``early_stopping``, ``grad_accum`` other than 1 or ``precision`` other than
                auto/fp32 with SetFit, whose recipe has none of them.
        """
        if self.setfit_iterations is not None and self.method != "setfit":
            raise InputError("{setfit_iterations} is for {method} setfit only; add {method} "
                             "setfit or leave it out", params=["setfit_iterations", "method"])
        check_method_options(self.method, self.hypothesis, self.label_phrases, self.nli_pairs)
        if (self.method != "standard" and self.truncation == "chunks"
                and self.chunk_training != "aggregate"):
            raise InputError(f"{{chunk_training}} applies to the standard method; {self.method} "
                             "trains on each document cut by head+tail and reads windows at "
                             "prediction: leave it out", params=["chunk_training", "method"])
        if self.method == "setfit" and self.truncation == "chunks" and self.aggregate is not None:
            raise InputError("{aggregate} does not apply to {method} setfit: the mean of the "
                             "windows' embeddings goes into the logistic head; leave it out",
                             params=["aggregate", "method"])
        if self.method != "standard" and self.task != "classification":
            raise InputError(f"{{method}} {self.method} trains classifiers only; use {{method}} "
                             f"standard for {{task}} {self.task}", params=["method", "task"])
        check_label_columns(self.task, self.label_cols, self.label_sep)
        if self.tune_thresholds and self.task != "multilabel":
            raise InputError("{tune_thresholds} is for {task} multilabel; leave it out",
                             params=["tune_thresholds", "task"])
        if self.method != "standard" and self.truncation != "chunks":
            check_chunk_settings(self.truncation, self.stride, self.max_chunks, self.aggregate,
                                 self.chunk_training, self.max_length or DEFAULT_MAX_LENGTH)
        if self.method == "setfit":
            self._check_setfit_options()
        return self

    def _check_setfit_options(self) -> None:
        """Options of the standard recipe given with ``method="setfit"`` refused, each with why
        (:data:`_NOT_SETFIT`; ``precision`` other than auto or fp32: SetFit trains in fp32)."""
        given = [n for n, left_out in (("early_stopping", None), ("grad_accum", 1))
                 if getattr(self, n) != left_out]
        if given:
            why = "; ".join(f"{{{n}}}: {_NOT_SETFIT[n]}" for n in given)
            raise unused_error(given, f"does not apply to {{method}} setfit ({why}); leave it out",
                               f"do not apply to {{method}} setfit ({why}); leave them out",
                               also=["method"])
        if self.precision not in ("auto", "fp32"):
            raise InputError(f"{{precision}} {self.precision} does not apply to {{method}} "
                             "setfit: SetFit trains and predicts in fp32; leave {precision} out",
                             params=["precision", "method"])

    def with_defaults(self) -> TrainSpec:
        """The spec with its method's length and truncation filled in: the standard and NLI
        recipes 512 tokens, head+tail; SetFit leaves both to its body (``None`` stays)."""
        if self.method == "setfit":
            return self
        return replace(self,
                       max_length=DEFAULT_MAX_LENGTH if self.max_length is None
                       else self.max_length,
                       truncation=DEFAULT_TRUNCATION if self.truncation is None
                       else self.truncation)

    def kwargs_for(self, recipe: str) -> dict:
        """The keywords of ``recipe`` (``standard``, ``nli`` or ``setfit``) from this spec."""
        names = {"standard": _STANDARD, "nli": _NLI, "setfit": _SETFIT}[recipe]
        values = asdict(self)
        out = {name: values[name] for name in names}
        if recipe == "nli":
            out["pairs"] = self.nli_pairs
        if recipe == "setfit":
            out["num_iterations"] = self.setfit_iterations
        return out
