"""The training settings of one fine-tuning run as one value (:class:`TrainSpec`): built once
from the caller's arguments (the CLI, :func:`quantformer.train.finetune.finetune`, ``tune``,
``compare``), checked once, given its method's defaults in one place, and passed whole to the
recipe of its method (standard, NLI, SetFit).

The defaults of the standard recipe come from Wankmüller (2022), section 6.3-6.4: 512 tokens
per document with head+tail truncation (the first 128 and last 382 tokens, Sun et al. 2019).
SetFit (Tunstall et al. 2022) keeps its sentence-transformer body's own limit and cuts at the
head, as sentence-transformers does; the body's limit is read in :mod:`quantformer.train.setfit`.

How documents are read travels as one :class:`~quantformer.models.reading.Reading`. Its
``truncation`` and ``max_length`` are ``None`` until :meth:`TrainSpec.with_defaults` gives
them the method's defaults (:data:`UNSET_READING`): "not given" stays expressible, because the
default depends on the method.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields, replace
from typing import ClassVar

from .._core.errors import InputError, unused_error
from ..models.chunks import check_chunk_training
from ..models.reading import (CHUNKS, DEFAULT_MAX_LENGTH, DEFAULT_TRUNCATION, TRUNCATIONS,
                              Reading, check_chunk_options, check_strategy,
                              refuse_without_chunks)
from ..models.precision import DEFAULT_PRECISION
from ..models.tasks import check_label_columns
from ..models.arguments import check_with
from .arguments import BATCH_SIZE, DEFAULT_VALID_FRACTION, TRAINING_PARAMETERS
from .chunks import check_training_reading

METHODS = ("standard", "nli", "setfit")
#: a reading whose length and truncation are the method's (filled by ``with_defaults``)
UNSET_READING = Reading(truncation=None, max_length=None)
#: the fields of a :class:`Reading`, as flat keywords (``finetune(truncation=...)``)
READING_FIELDS = tuple(f.name for f in fields(Reading))
# options of the standard recipe that SetFit's does not take (its body trains in fp32 on pairs
# for a fixed number of steps, its head by logistic regression), each with why
_NOT_SETFIT = {"early_stopping": "it takes no validation data to stop on",
               "grad_accum": "its body trains on batch_size pairs a step"}


@dataclass(frozen=True)
class TrainSpec:
    """The settings of one fine-tuning run; see :func:`quantformer.train.finetune.finetune`
    for each field. ``reading`` holds how documents are read (truncation, max_length, stride,
    max_chunks, aggregate); ``None`` in its ``max_length``/``truncation`` means the method's
    default (:meth:`with_defaults`). Build one from flat keywords with :meth:`from_keywords`.

    :attr:`PARAMETERS` holds the rules of its values (the training table of
    :mod:`quantformer.train.arguments`); ``tune`` and ``compare`` extend it with their own
    parameters (``{**TrainSpec.PARAMETERS, ...}``).
    """

    PARAMETERS: ClassVar[dict] = TRAINING_PARAMETERS

    model: str | None = None
    reading: Reading = UNSET_READING
    chunk_training: str = "aggregate"
    epochs: int | None = None
    lr: float | None = None
    batch_size: int = BATCH_SIZE
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

    # ---------------------------------------------------------------------------------------
    # flat keywords (finetune's signature, fit_fn's, compare's finetune_kwargs)

    @classmethod
    def from_keywords(cls, **keywords) -> TrainSpec:
        """A spec from :func:`~quantformer.train.finetune.finetune`'s flat keywords (the
        reading's five among them).

        Raises:
            TypeError: a name that is no setting of a fine-tuning run.
        """
        return cls().with_keywords(**keywords)

    def with_keywords(self, **keywords) -> TrainSpec:
        """A copy with ``keywords`` changed (flat names: ``truncation=`` changes the reading).

        Raises:
            TypeError: a name that is no setting of a fine-tuning run.
        """
        reading = {k: keywords.pop(k) for k in READING_FIELDS if k in keywords}
        if reading:
            keywords["reading"] = self.reading.replace(**reading)
        return replace(self, **keywords)

    def keywords(self) -> dict:
        """The settings as flat keywords, the reading's in its place (``model``, the reading,
        ``chunk_training``, ``epochs``, ...): what a ``fit_fn`` receives."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out.update(dataclasses.asdict(value) if f.name == "reading" else {f.name: value})
        return out

    def given(self, leave_out=()) -> list[str]:
        """The flat names whose value is not the default, in :meth:`keywords` order (but
        ``leave_out``)."""
        default = TrainSpec().keywords()
        return [k for k, v in self.keywords().items()
                if k not in leave_out and v is not None and v != default[k]]

    @property
    def truncation(self) -> str | None:
        """The reading's truncation (``None``: the method's)."""
        return self.reading.truncation

    @property
    def max_length(self) -> int | None:
        """The reading's tokens per document (``None``: the method's)."""
        return self.reading.max_length

    # ---------------------------------------------------------------------------------------
    # checks and defaults

    def check_values(self, table: dict | None = None, **others) -> TrainSpec:
        """Every value against :attr:`PARAMETERS`, and the reading's checks that need no
        model (``truncation`` and ``max_length`` may be unset): what tune and compare check
        before any run; returns the spec.

        Args:
            table: the rules to check by (default :attr:`PARAMETERS`; tune and compare extend
                it with theirs).
            **others: the caller's own values checked with the spec's (``lrs=...``).

        Raises:
            InputError: the first bad value; an unknown ``truncation``, ``aggregate`` or
                ``chunk_training``; window settings (``chunk_training`` labels too) without
                chunks; ``stride`` < 0; ``max_chunks`` < 1.
        """
        check_with(self.PARAMETERS if table is None else table, {**self.keywords(), **others})
        r = self.reading
        if r.truncation is not None:
            check_strategy(r.truncation, TRUNCATIONS)
        check_chunk_options(r.truncation, r.stride, r.max_chunks, r.aggregate)
        check_chunk_training(self.chunk_training)
        if not r.chunks:  # chunk_training's default, aggregate, is the same without chunks
            refuse_without_chunks(r.truncation, chunk_training=(
                None if self.chunk_training == "aggregate" else self.chunk_training))
        return self

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
        if (self.method != "standard" and self.truncation == CHUNKS
                and self.chunk_training != "aggregate"):
            raise InputError(f"{{chunk_training}} applies to the standard method; {self.method} "
                             "trains on each document cut by head+tail and reads windows at "
                             "prediction: leave it out", params=["chunk_training", "method"])
        if (self.method == "setfit" and self.truncation == CHUNKS
                and self.reading.aggregate is not None):
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
        if self.method != "standard" and self.truncation != CHUNKS:
            check_training_reading(self.reading.replace(
                max_length=self.reading.max_length or DEFAULT_MAX_LENGTH), self.chunk_training)
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
        r = self.reading
        return replace(self, reading=r.replace(
            max_length=DEFAULT_MAX_LENGTH if r.max_length is None else r.max_length,
            truncation=DEFAULT_TRUNCATION if r.truncation is None else r.truncation))


def check_method_options(method: str, hypothesis, label_phrases, nli_pairs,
                         where: str = "{method} nli; add {method} nli",
                         where_params: tuple = ("method",)) -> None:
    """Refuse the NLI options with another method.

    Args:
        where: what the options are for and the fix, e.g. ``compare``'s ``"the nli model;
            add nli to {models}"``; ``where_params``: the parameters it names as fields.

    Raises:
        InputError: naming the option and the fix.
    """
    if method == "nli":
        return
    used = [name for name, v in (("hypothesis", hypothesis is not None),
                                 ("label_phrases", bool(label_phrases)),
                                 ("nli_pairs", nli_pairs != "balanced")) if v]
    if used:
        named = ", ".join(f"{{{name}}}" for name in used)
        raise InputError(f"{named} is for {where} (with an NLI {{model}}) or leave it out",
                         params=[*used, *where_params, "model"])
