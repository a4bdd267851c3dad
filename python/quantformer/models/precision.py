"""The one choice of numeric precision for running or training a model, from the hardware.

``precision="auto"`` picks **bf16** (bfloat16 autocast: matrix products in bfloat16, weights,
softmax and layer norms kept in fp32; Kalamkar et al. 2019, "A study of BFLOAT16 for deep
learning training"; PyTorch's ``torch.autocast``) where the processor computes it natively:

- a CPU with AMX (``amx_bf16``) or AVX-512 BF16 (``avx512_bf16``) in ``/proc/cpuinfo``'s flags
  (Intel Xeon from Cooper Lake / Sapphire Rapids, AMD EPYC from Zen 4);
- a CUDA GPU for which ``torch.cuda.is_bf16_supported()`` is true (Ampere and later);

and **fp32** elsewhere: on a CPU with AVX2 or AVX-512 but no bf16 instructions, bf16 is
emulated and runs slower than fp32 (``bench/RESULTS.md``, "Precision"). ``precision="bf16"``
on such a machine is allowed with a :class:`PrecisionWarning` naming the expected slowdown.

bf16 keeps 8 bits of mantissa, so probabilities move a little; callers that return labels
predict the near ties again in fp32 (:data:`BF16_RECHECK_MARGIN`, the confidence cascade of
:mod:`quantformer.models.onnx.recheck`), so no label changes silently.

**Reproducibility.** Under bf16 a document's probabilities depend a little on which documents
share its batch (the padded length and the shape of the matrix products change the rounding):
single-process and partitioned runs (Dask), or two batch sizes, can differ in the third
decimal (up to 1.4e-3 measured on a MiniLM classifier; zero-shot NLI 0.014 from Hugging Face's
fp32 pipeline). Labels do not: a classifier's near ties are predicted again in fp32 **one
document at a time** (:meth:`TorchPrecision.recheck`), so their probabilities are the same in
every batching, and a row outside the margin keeps its label as long as bf16 moves its
probabilities by less than half the margin (0.025; measured at most 0.0057). ``fp32`` is the
reproducible choice: its probabilities agree to about 1e-7 across batchings. The record of
every output names the precision used (:func:`record`).

Training (``use="train"``) has one choice more: **fp16** autocast with a gradient scaler, on
CUDA only, which ``auto`` picks on CUDA devices without bf16 (Micikevicius et al. 2018, "Mixed
precision training"). :data:`PRECISION_USES` says where each value applies.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._core.errors import InputError
from .onnx.recheck import near_ties

__all__ = ["PRECISION_USES", "PRECISIONS", "TRAIN_PRECISIONS", "DEFAULT_PRECISION",
           "BF16_RECHECK_MARGIN", "Precision", "PrecisionWarning", "cpu_flags",
           "cpu_model", "bf16_support", "check_precision", "choose_precision", "autocast",
           "check_with_backend", "describe_hardware", "TorchPrecision", "torch_precision",
           "kept_fp32", "record"]

#: every value of ``precision`` and the runs it applies to: ``infer`` (the verbs that run a
#: model) and ``train`` (fine-tuning); fp16 needs a gradient scaler on a CUDA GPU, so it trains only
PRECISION_USES = {"auto": ("infer", "train"), "fp32": ("infer", "train"),
                  "bf16": ("infer", "train"), "fp16": ("train",)}
#: the values of ``precision`` on the inference verbs
PRECISIONS = tuple(name for name, uses in PRECISION_USES.items() if "infer" in uses)
#: the values of ``precision`` in training (finetune, tune, compare)
TRAIN_PRECISIONS = tuple(name for name, uses in PRECISION_USES.items() if "train" in uses)
#: the library's default ``precision`` everywhere (the CLI's ``--precision`` default too)
DEFAULT_PRECISION = "auto"
#: bf16 top-two probability margin under which a document is predicted again in fp32: the
#: int8 recheck's margin. On the 653 Abortion training tweets pure bf16 moved no probability by
#: more than 0.0057 and changed no label, so a label can flip only under a margin of about
#: 0.011; 0.05 keeps a 4x safety factor (bench/RESULTS.md, "Precision")
BF16_RECHECK_MARGIN = 0.05
#: instruction-set flags recorded by ``quantformer info`` and the benches
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
#: measured slowdown of emulated bf16 against fp32 on an AVX2-only CPU (bench/RESULTS.md)
EMULATED_SLOWDOWN = "about 5x slower than fp32 (MiniLM forward passes on AVX2 alone)"


class PrecisionWarning(UserWarning):
    """bf16 asked for on hardware that only emulates it."""


@dataclass(frozen=True)
class Precision:
    """A resolved precision: ``name`` (``fp32`` or ``bf16``), what was asked (``requested``)
    and why (``reason``, one sentence for the output's record and ``quantformer info``)."""

    name: str
    requested: str
    reason: str

    def as_record(self) -> dict:
        return {"precision": self.name, "requested": self.requested, "reason": self.reason}

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset:
    """The CPU's instruction-set flags (``/proc/cpuinfo``; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`)."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def bf16_support(device: str = "cpu") -> tuple[bool, str]:
    """(native bf16 on ``device``?, the reason in words)."""
    kind = str(device).split(":")[0]
    if kind == "cuda":
        import torch

        ok = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        name = torch.cuda.get_device_name(device) if torch.cuda.is_available() else "none"
        return ok, f"CUDA GPU {name} {'supports' if ok else 'does not support'} bf16"
    if kind != "cpu":
        return False, f"bf16 is not offered on device {device}"
    flags = cpu_flags()
    have = [f for f in ("amx_bf16", "avx512_bf16") if f in flags]
    if have:
        return True, f"CPU has {' and '.join(have)} (native bf16)"
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return False, f"CPU has {isa} but neither AMX nor AVX-512 BF16 (bf16 would be emulated)"


def check_precision(precision, use: str = "infer") -> str:
    """``precision`` when it is one of the values of ``use`` (``infer``: ``auto``, ``fp32`` or
    ``bf16``; ``train``: those and ``fp16``; :data:`PRECISION_USES`).

    Raises:
        InputError: any other value.
    """
    choices = PRECISIONS if use == "infer" else TRAIN_PRECISIONS
    if precision not in choices:
        raise InputError(f"{{precision}} must be one of {', '.join(choices)}, not "
                         f"{precision!r}", params=["precision"])
    return precision


def choose_precision(precision: str = DEFAULT_PRECISION, device: str = "cpu",
                     use: str = "infer") -> Precision:
    """Resolve ``precision`` on a resolved ``device`` for ``use`` (``infer`` or ``train``).

    ``auto`` is bf16 where the hardware computes it natively, else fp32; in training on a CUDA
    GPU without bf16 it is fp16. ``fp16`` (training only) needs a CUDA GPU.

    Raises:
        InputError: a value not offered for ``use`` (:data:`PRECISION_USES`); fp16 off CUDA.

    Warns:
        PrecisionWarning: ``bf16`` for inference on hardware without native bf16 (allowed;
        slower).
    """
    check_precision(precision, use)
    kind = str(device).split(":")[0]
    ok, why = bf16_support(device)
    if precision == "fp32":
        return Precision("fp32", "fp32", "fp32 asked for")
    if precision == "fp16":
        if kind != "cuda":
            raise InputError(f"{{precision}} fp16 needs a CUDA GPU (device here: {device}); "
                             "use bf16 or fp32", params=["precision"])
        return Precision("fp16", "fp16", "fp16 asked for")
    if precision == "bf16":
        if not ok and use == "infer":
            warnings.warn(f"precision bf16 on hardware without native bf16 ({why}): it runs "
                          f"emulated, {EMULATED_SLOWDOWN}; leave precision at auto for fp32",
                          PrecisionWarning, stacklevel=2)
        return Precision("bf16", "bf16", f"bf16 asked for; {why}")
    if not ok and use == "train" and kind == "cuda":  # fp16 autocast with a gradient scaler
        return Precision("fp16", "auto", f"{why}: fp16 autocast with a gradient scaler")
    return Precision("bf16" if ok else "fp32", "auto", why)


def autocast(precision: Precision | str, device: str = "cpu"):
    """The autocast context of a resolved precision (``fp32``: a no-op; ``bf16`` or ``fp16``:
    ``torch.autocast`` in that type), for training and inference alike."""
    name = precision.name if isinstance(precision, Precision) else precision
    if name == "fp32":
        return contextlib.nullcontext()
    import torch

    dtype = torch.bfloat16 if name == "bf16" else torch.float16
    return torch.autocast(device_type=str(device).split(":")[0], dtype=dtype)


def check_with_backend(precision: str, backend: str, quantize: str = "none") -> None:
    """``precision`` applies to the torch backend; with ONNX Runtime ``quantize`` sets it
    (fp32 graph, or int8): ``auto`` and ``fp32`` leave it to ``quantize``.

    Raises:
        InputError: ``bf16`` with the onnx backend.
    """
    if backend == "onnx" and precision == "bf16":
        raise InputError("{precision} bf16 applies to the torch backend; with {backend} onnx "
                         "the precision is fp32, or int8 with {quantize} int8: leave "
                         "{precision} out or use {backend} torch",
                         params=["precision", "backend", "quantize"])


def describe_hardware() -> dict:
    """The CPU's model, its instruction sets and the precision ``auto`` picks on it (for
    ``quantformer info`` and the benches)."""
    flags = cpu_flags()
    cpu = choose_precision("auto", "cpu")
    out = {"cpu_model": cpu_model(), "isa": {f: f in flags for f in ISA_FLAGS},
           "auto_precision_cpu": cpu.name, "auto_precision_reason": cpu.reason}
    try:
        import torch

        out["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except (ImportError, AttributeError):
        pass
    return out


class TorchPrecision:
    """How a torch classifier runs: its :class:`Precision`, the autocast context, the fp32
    recheck of bf16 near ties and the ``backend`` labels of its output rows.

    Args:
        chosen: the resolved precision.
        margin: bf16 top-two probability margin under which a document is predicted again in
            fp32 (default None: :data:`BF16_RECHECK_MARGIN`; 0: no recheck).
    """

    def __init__(self, chosen: Precision, margin: float | None = None):
        self.chosen = chosen
        self.margin = float(BF16_RECHECK_MARGIN if margin is None else margin)

    @classmethod
    def fp32(cls) -> TorchPrecision:
        return cls(Precision("fp32", "fp32", "fp32"))

    @property
    def name(self) -> str:
        return self.chosen.name

    @property
    def label(self) -> str:
        """The ``backend`` value of rows computed in this precision."""
        return "torch" if self.name == "fp32" else f"torch {self.name}"

    #: the ``backend`` value of bf16 rows predicted again in fp32
    recheck_label = "torch fp32 recheck"

    def context(self, device: str, cast: bool = True):
        """Autocast for bf16 (when ``cast``), else a no-op."""
        return autocast(self.chosen if cast else "fp32", device)

    def ties(self, probs):
        """bf16: the mask of rows of ``probs`` whose top-two margin is under :attr:`margin`
        (to compute again in fp32); fp32: None."""
        if self.name == "fp32":
            return None
        return near_ties(probs, self.margin)

    def recheck(self, proba, texts: list, probs):
        """bf16: replace, in place, the near ties' rows of ``probs`` with their fp32
        probabilities and return the mask of the rows replaced; fp32: None.

        ``proba(list_of_texts)`` computes fp32 probabilities; it is called with one document
        at a time, so a near tie's probabilities (and so its label) are the document's own,
        whatever documents shared its batch or partition: a batch of one has no padding, and
        bf16 rounds the others' probabilities by far less than the margin (module docstring).
        """
        mask = self.ties(probs)
        if mask is not None and mask.any():
            for i in np.flatnonzero(mask):
                probs[i] = proba([texts[i]])[0]
        return mask

    def backend_column(self, n: int, rechecked=None):
        """The ``backend`` value of ``n`` output rows: :attr:`label`, or
        :attr:`recheck_label` where ``rechecked`` (a mask or None) is true."""
        if rechecked is None:
            return np.full(n, self.label, dtype=object)
        return np.where(np.asarray(rechecked, dtype=bool), self.recheck_label,
                        self.label).astype(object)


def record(chosen: TorchPrecision | None, onnx_label: str = "onnx fp32") -> dict:
    """The output's record of a run's precision (``precision``, ``requested``, ``reason``):
    ``chosen``'s, or with ONNX Runtime (``chosen`` None) its graph's ``onnx_label``."""
    if chosen is None:
        return {"precision": onnx_label, "requested": "auto",
                "reason": "ONNX Runtime: quantize sets the precision"}
    return chosen.chosen.as_record()


def kept_fp32(precision: str, why: str) -> TorchPrecision | None:
    """fp32 where ``auto`` keeps it for a reason of the caller's (``why``, the record's
    reason); None when ``precision`` is not ``auto`` (the caller then chooses as asked).

    Raises:
        InputError: a value other than auto, fp32 or bf16.
    """
    if check_precision(precision) != "auto":
        return None
    return TorchPrecision(Precision("fp32", "auto", why))


def torch_precision(precision: str, device: str, task: str = "classification") -> TorchPrecision:
    """:func:`choose_precision` for a torch model answering ``task``: bf16 only for
    classification, whose near ties can be predicted again in fp32 (``auto`` picks fp32 for
    regression and multi-label models).

    Raises:
        InputError: a bad ``precision``, or ``bf16`` for a task other than classification.
    """
    if task != "classification":
        if precision == "bf16":
            raise InputError(f"{{precision}} bf16 is offered for classification models (their "
                             f"near ties are checked in fp32); this is a {task} model: use "
                             "auto or fp32", params=["precision"])
        check_precision(precision)
        return TorchPrecision(Precision("fp32", precision,
                                        f"fp32 for a {task} model (no near-tie recheck)"))
    return TorchPrecision(choose_precision(precision, device))

