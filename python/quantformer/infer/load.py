"""The one model loader: a fine-tuned model directory of any method as a classifier.

:func:`load_model` reads the directory's record (``quantformer.json``) and switches on its
method: ``standard`` (:class:`~quantformer.infer.classifier.Classifier`, torch or ONNX
Runtime), ``nli`` (:class:`~quantformer.infer.nli.NLIClassifier`, Laurer et al. 2023) or
``setfit`` (:class:`~quantformer.infer.setfit.SetFitClassifier`, Tunstall et al. 2022). Every
load goes through the process's bounded model cache (:data:`quantformer.infer.cache.MODELS`),
so the worker, Dask workers and suggest load a model once.
"""

from __future__ import annotations

import copy
import os

from .._core.errors import InputError
from ..io.modeldir import read_record
from ..models.onnx.backend import check_backend
from ..models.hub import resolve_device
from ..models.precision import (DEFAULT_PRECISION, TorchPrecision, check_precision,
                                check_with_backend, torch_precision)
from ..models.tasks import from_record
from .cache import MODELS
from .classifier import Classifier
from .nli import NLIClassifier
from .setfit import SetFitClassifier


def load_model(path: str | os.PathLike, device: str = "auto", backend: str = "torch",
               quantize: str = "none", recheck_margin: float | None = None,
               precision: str = DEFAULT_PRECISION, record: dict | None = None) -> Classifier:
    """Load a fine-tuned model directory of any method (``quantformer.load``).

    Args:
        path: a folder written by :func:`quantformer.train.finetune.finetune` or
            ``quantformer finetune``.
        device: ``auto`` (default), ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (see
            :func:`quantformer.models.hub.resolve_device`).
        backend: ``torch`` (default) or ``onnx`` (standard and NLI models).
        quantize: ``none`` (default) or ``int8`` (onnx only).
        recheck_margin: int8 of a standard model only: see
            :meth:`~quantformer.infer.classifier.Classifier.from_dir`.
        precision: ``auto`` (default, :data:`~quantformer.models.precision.DEFAULT_PRECISION`:
            bf16 where the hardware has it natively, near ties predicted again in fp32),
            ``fp32`` or ``bf16`` (:mod:`quantformer.models.precision`): standard classifiers on
            the torch backend; NLI and SetFit models run fp32 (``auto`` picks it, ``bf16`` is
            refused).
        record: the folder's checked record when the caller has read it already
            (:func:`quantformer.io.modeldir.read_record`), so it is read once per call.

    Returns:
        A :class:`~quantformer.infer.classifier.Classifier` (or its NLI / SetFit subclass).

    Raises:
        ModelDirError: missing, incomplete, not a classifier, or its model files damaged.
        InputError: a backend, quantize, recheck_margin or precision the model's method does
            not support.
    """
    record = read_record(path) if record is None else record
    method = record.get("method", "standard")
    use_onnx = check_backend(backend, quantize, device) == "onnx"
    if method == "nli" and recheck_margin is not None:
        raise InputError("{recheck_margin} applies to classifiers fine-tuned the standard way; "
                         "an NLI model's int8 has no fp32 recheck: leave it out",
                         params=["recheck_margin"])
    if method == "setfit" and use_onnx:
        raise InputError("{backend} onnx is not supported for SetFit models yet; use torch",
                         params=["backend"])
    check_with_backend(precision, backend, quantize)
    if method != "standard":
        precision = _fp32_only(method, precision)
    options = {"backend": backend, "quantize": quantize, "recheck_margin": recheck_margin}
    chosen = None  # ONNX Runtime: quantize sets the precision (the graph's)
    if method == "standard" and not use_onnx:
        # the cache key holds the resolved precision, so auto and what it resolves to share
        # one model, and a change of what auto resolves to loads another
        chosen = torch_precision(precision, resolve_device(device), from_record(record).name)
        options["precision"] = chosen.name
    clf = MODELS.get(f"classifier-{method}", path, device,
                     lambda: _load(method, path, device, options, record, chosen),
                     **options)
    return _as_chosen(clf, chosen)


def _as_chosen(clf: Classifier, chosen: TorchPrecision | None) -> Classifier:
    """``clf`` running in ``chosen`` (None: as loaded); a cached classifier loaded under
    another request of the same precision (auto, bf16) is copied, so each caller's record
    says what it asked for, and the network is shared."""
    if chosen is None or clf.precision.chosen == chosen.chosen:
        return clf
    out = copy.copy(clf)
    out.precision = chosen
    return out


def _load(method: str, path, device: str, options: dict, record: dict,
          chosen: TorchPrecision | None = None) -> Classifier:
    """The classifier of one method, read from disk (its checked ``record`` passed on),
    running in ``chosen`` where the precision was resolved (standard, torch)."""
    if method == "nli":
        return NLIClassifier.from_dir(path, device=device, backend=options["backend"],
                                      quantize=options["quantize"], record=record)
    if method == "setfit":
        return SetFitClassifier.from_dir(path, device=device, record=record)
    # the precision is resolved already (one choice, one warning): set on what loads
    clf = Classifier.from_dir(path, device=device, record=record,
                              **{**options, "precision": "fp32"})
    if chosen is not None:
        clf.precision = chosen
    return clf


def _fp32_only(method: str, precision: str) -> str:
    """``fp32`` for a method that runs in fp32 only (``auto`` picks it; ``bf16`` is refused)."""
    if precision == "bf16":
        raise InputError(f"{{precision}} bf16 is offered for classifiers fine-tuned the standard "
                         f"way; a {method} model runs in fp32: use auto or fp32",
                         params=["precision"])
    check_precision(precision)
    return "fp32"
