"""How a document is read: one value, :class:`Reading`, that owns its settings, defaults and
checks.

A document longer than the model's window is cut on token ids (``head_tail``, ``head``,
``tail``; :mod:`quantformer.models.tokenize`) or read whole as overlapping windows
(``chunks``) whose outputs are aggregated (``mean`` or ``max``;
:mod:`quantformer.models.chunks`). ``head_tail`` keeps the first 128 and last 382 of 512
tokens (Wankmüller 2022, section 6.3, after Sun et al. 2019); windows follow Devlin et al.
(2019, SQuAD) and Pappagari et al. (2019).

Every verb, :class:`~quantformer.train.spec.TrainSpec` and the model record carry one
:class:`Reading`; the checks that need no model (:meth:`Reading.check`) run before any work,
the check that needs the tokenizer's template (:meth:`Reading.check_window`) when the windows
are made. R reads the choices and defaults through ``core_rules()`` (:meth:`Reading.rules`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .._core.errors import InputError, unused_error

STRATEGIES = ("head_tail", "head", "tail")  # cut on token ids
#: where a sentence-transformer body (SetFit's) cuts a long document: at the head, as
#: sentence-transformers does (Tunstall et al. 2022)
BODY_TRUNCATION = "head"
CHUNKS = "chunks"  # read whole in windows
TRUNCATIONS = STRATEGIES + (CHUNKS,)  # what finetune, predict, embed, zeroshot take
DEFAULT_TRUNCATION = "head_tail"  # the first 128 and last 382 of 512 (Sun et al. 2019)
DEFAULT_MAX_LENGTH = 512  # tokens per document or window, special tokens included (BERT's)
AGGREGATES = ("mean", "max")
DEFAULT_AGGREGATE = "mean"  # the mean of the window logits (Pappagari et al. 2019)
#: the fields of a reading that only windows use
WINDOW_FIELDS = ("stride", "max_chunks", "aggregate")
#: special tokens of one window guessed where the tokenizer is not loaded yet (the checks
#: before any load): BERT's and RoBERTa's two ([CLS] ... [SEP], <s> ... </s>). Once the
#: tokenizer is at hand its own template counts them (models/template.py) and the window
#: is checked again.
GUESSED_SPECIAL_TOKENS = 2


def check_strategy(strategy: str, allowed: tuple = STRATEGIES) -> str:
    """Validate a truncation strategy name.

    Args:
        allowed: the names the caller offers (default the cutting strategies; ``chunks``
            where windows are offered, :data:`TRUNCATIONS`).

    Raises:
        InputError: ``chunks`` where windows are not offered yet, or an unknown name.
    """
    if strategy == CHUNKS and CHUNKS not in allowed:
        raise InputError("{truncation} chunks is not offered yet here (finetune, predict, "
                         "embed, zeroshot, tune and compare offer it); use head_tail, head or "
                         "tail", params=["truncation"])
    if strategy not in allowed:
        raise InputError(f"unknown {{truncation}} '{strategy}'; use one of: "
                         f"{', '.join(allowed)}", params=["truncation"])
    return strategy


def check_aggregate(aggregate: str) -> str:
    """Raises: InputError: ``aggregate`` is not ``mean`` or ``max``."""
    if aggregate not in AGGREGATES:
        raise InputError(f"unknown {{aggregate}} '{aggregate}'; use mean or max",
                         params=["aggregate"])
    return aggregate


def check_max_chunks(max_chunks: int | None) -> None:
    """Raises: InputError: ``max_chunks`` below 1 (None: all windows)."""
    if max_chunks is not None and max_chunks < 1:
        raise InputError(f"{{max_chunks}} must be at least 1 (got {max_chunks}); leave it out "
                         "for all windows", params=["max_chunks"])


def refuse_without_chunks(truncation: str | None, **settings) -> None:
    """Window settings given (not None) without ``truncation="chunks"`` would not be used.

    Raises:
        InputError: naming the settings given and the fix.
    """
    given = [name for name, value in settings.items() if value is not None]
    if truncation == CHUNKS or not given:
        return
    only = "to {truncation} chunks only (documents read whole as windows): add {truncation} chunks"
    raise unused_error(given, f"applies {only} or leave it out",
                       f"apply {only} or leave them out", also=["truncation"])


def check_chunk_options(truncation: str | None, stride: int | None = None,
                        max_chunks: int | None = None, aggregate: str | None = None) -> None:
    """The checks of the window settings that need no model (run before any loads).

    Raises:
        InputError: ``stride``, ``max_chunks`` or ``aggregate`` without ``truncation``
            ``chunks``; an unknown ``aggregate``; ``stride`` < 0; ``max_chunks`` < 1. Whether
            ``stride`` is smaller than the window needs the model's tokenizer
            (:func:`check_windows`).
    """
    refuse_without_chunks(truncation, stride=stride, max_chunks=max_chunks, aggregate=aggregate)
    if aggregate is not None:
        check_aggregate(aggregate)
    if stride is not None and stride < 0:
        raise InputError(f"{{stride}} {stride} must be at least 0 and smaller than the window",
                         params=["stride"])
    check_max_chunks(max_chunks)


def check_windows(budget: int, stride: int | None, max_chunks: int | None,
                  max_length: int, *, model_window: bool = False) -> None:
    """Refuse a ``stride`` not smaller than the window's content ``budget`` and a
    ``max_chunks`` below 1.

    Args:
        model_window: ``max_length`` is a trained model's, not the caller's argument: the
            message names the model's window instead of ``max_length`` (default False).

    Raises:
        InputError: naming ``stride`` or ``max_chunks``.
    """
    if stride is not None and not 0 <= stride < budget:
        window = (f"the model's window of {max_length} tokens" if model_window else
                  f"{{max_length}} {max_length}")
        raise InputError(f"{{stride}} {stride} must be at least 0 and smaller than the window "
                         f"({budget} content tokens at {window}); the default is a quarter "
                         "of it", params=["stride"] + ([] if model_window else ["max_length"]))
    check_max_chunks(max_chunks)


def default_stride(max_length: int, n_special: int = GUESSED_SPECIAL_TOKENS) -> int:
    """Tokens neighbouring windows share by default: a quarter of the window's content
    (``n_special``: the special tokens of one window, the tokenizer's where it is loaded)."""
    return max(0, (max_length - n_special) // 4)


@dataclass(frozen=True)
class Reading:
    """How documents are read into a model: cut to one window, or read whole in windows.

    Attributes:
        truncation: ``"head_tail"`` (default: the first 128 and last 382 tokens at 512,
            Wankmüller 2022, section 6.3), ``"head"``, ``"tail"``, or ``"chunks"`` (read whole
            in overlapping windows).
        max_length: tokens per document or window, special tokens included (default 512).
        stride: with ``chunks``, tokens neighbouring windows share (None: a quarter of the
            window's content, :func:`default_stride`).
        max_chunks: with ``chunks``, the most windows read per document (None: all).
        aggregate: with ``chunks``, how window outputs become the document's: ``"mean"`` or
            ``"max"`` (None: not given; ``"mean"`` where windows are read, see
            :attr:`aggregate_or_default`).
    """

    truncation: str = DEFAULT_TRUNCATION
    max_length: int = DEFAULT_MAX_LENGTH
    stride: int | None = None
    max_chunks: int | None = None
    aggregate: str | None = None

    @property
    def chunks(self) -> bool:
        """Whether documents are read whole in windows."""
        return self.truncation == CHUNKS

    @property
    def aggregate_or_default(self) -> str:
        """The aggregate windows are combined with (``mean`` when none was given)."""
        return self.aggregate or DEFAULT_AGGREGATE

    def window_settings(self) -> dict:
        """``stride``, ``max_chunks`` and ``aggregate`` as keywords (None: not given)."""
        return {k: getattr(self, k) for k in WINDOW_FIELDS}

    def check(self, offered: tuple = TRUNCATIONS) -> "Reading":
        """The checks that need no model (run before any loads); returns ``self``.

        Args:
            offered: the truncations the caller offers (default all of :data:`TRUNCATIONS`).

        Raises:
            InputError: an unknown ``truncation`` or ``aggregate``; window settings without
                ``chunks``; ``stride`` < 0; ``max_chunks`` < 1.
        """
        check_strategy(self.truncation, offered)
        check_chunk_options(self.truncation, self.stride, self.max_chunks, self.aggregate)
        return self

    def check_window(self, budget: int, *, model_window: bool = False) -> "Reading":
        """The check that needs the tokenizer: ``stride`` smaller than the window's content
        of ``budget`` tokens (``max_length`` less the special tokens); returns ``self``.

        Raises:
            InputError: naming ``stride`` (and ``max_length`` unless ``model_window``).
        """
        check_windows(budget, self.stride, self.max_chunks, self.max_length,
                      model_window=model_window)
        return self

    def replace(self, **changes) -> "Reading":
        """A copy with ``changes`` (field names as keywords)."""
        return dataclasses.replace(self, **changes)

    def to_record(self) -> dict:
        """The record form: ``truncation`` and ``max_length``, and with ``chunks`` the window
        settings too (None where not given)."""
        out = {"truncation": self.truncation, "max_length": int(self.max_length)}
        if self.chunks:
            out.update(self.window_settings())
        return out

    @classmethod
    def from_record(cls, record: dict | None) -> "Reading":
        """The reading a model record (or its ``hyperparameters``) stores; the defaults for a
        model without a record (``{}`` or None)."""
        record = record or {}
        hp = record.get("hyperparameters", record)
        return cls(truncation=str(hp.get("truncation", DEFAULT_TRUNCATION)),
                   max_length=int(hp.get("max_length", DEFAULT_MAX_LENGTH)),
                   **{k: hp.get(k) for k in WINDOW_FIELDS})

    @staticmethod
    def rules() -> dict:
        """Choices and defaults for callers (R's ``core_rules()$reading``); plain JSON types."""
        return {"truncation": {"choices": list(TRUNCATIONS), "default": DEFAULT_TRUNCATION,
                               "strategies": list(STRATEGIES), "chunks": CHUNKS},
                "max_length": {"default": DEFAULT_MAX_LENGTH},
                "stride": {"default": None}, "max_chunks": {"default": None},
                "aggregate": {"choices": list(AGGREGATES), "default": DEFAULT_AGGREGATE}}
