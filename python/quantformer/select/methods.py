"""The fine-tuning methods ``tune`` knows (issue 13): ``standard``, ``setfit`` and ``nli``.

For each method: its default grid of learning rates x epochs and the options passed to every
run (:func:`quantformer.train.finetune` receives them unchanged, so a cross-validation run and the
refit train exactly as ``finetune --method ...`` with the same flags would).

``standard``
    default grid by model size (:data:`quantformer.select.tune.GRIDS`); no per-run options.
``setfit``
    :data:`quantformer.train.setfit.GRID`: body learning rates 2e-5, 5e-5, 1e-4 x 1, 2 epochs over
    the pairs; per run ``setfit_iterations``.
``nli``
    :data:`GRID_NLI`: learning rates 1e-5, 2e-5, 5e-5 x 7, 10 epochs; per run ``hypothesis``,
    ``label_phrases``, ``nli_pairs``.

The NLI grid spans the values Laurer et al. (2023, appendix table of hyperparameters) tuned
for DeBERTa-v3-base-NLI at 100-500 codes (learning rates 1.2e-5 to 6.7e-5, 7-11 epochs) in
round numbers, around :data:`quantformer.train.nli.DEFAULTS` (2e-5, 7 epochs).

``compare`` passes the same NLI options to the runs of its ``nli`` model
(:func:`compare_kwargs`), checked here the same way.
"""

from __future__ import annotations

from .._core.errors import InputError
from ..infer.zeroshot_common import DEFAULT_HYPOTHESIS, check_hypothesis
from ..train.nli import nli_outputs, parse_label_phrases, phrases_for
from ..train.setfit import GRID
from ..train.spec import check_method_options

METHODS = ("standard", "setfit", "nli")
#: ``tune --method nli``'s default grid: learning rates x epochs (see the module docstring)
GRID_NLI = ((1e-5, 2e-5, 5e-5), (7, 10))


def method_grid(method: str) -> tuple[tuple, tuple] | None:
    """The default ``(learning rates, epochs)`` of a few-shot or NLI method; None for the
    standard method, whose grid depends on the model's size."""
    if method == "setfit":
        return GRID
    return GRID_NLI if method == "nli" else None


def method_kwargs(method: str, *, task: str = "classification", oversample=None,
                  setfit_iterations: int | None = None, hypothesis: str | None = None,
                  label_phrases=None, nli_pairs: str = "balanced") -> dict:
    """Check a method and its options; return the keyword arguments every run passes to
    :func:`quantformer.train.finetune` (empty for the standard method without options).

    Args:
        method: ``standard``, ``setfit`` or ``nli``.
        task: SetFit and NLI train classifiers only.
        oversample: refused with SetFit and NLI (their pairs are balanced by class).
        setfit_iterations: ``setfit`` only: pairs per document and direction (default 5).
        hypothesis, label_phrases, nli_pairs: ``nli`` only (see
            :func:`quantformer.train.nli.nli_finetune`); ``label_phrases`` a dict, a
            ``"a=x,b=y"`` string or a list of ``"a=x"`` items.

    Raises:
        InputError: an unknown method, SetFit or NLI with another task than classification
            or with oversampling, an option of another method, a bad label phrase or template.
    """
    if method not in METHODS:
        raise InputError(f"tune knows the methods {', '.join(METHODS)}, not '{method}'")
    if method != "standard" and task != "classification":
        raise InputError(f"{{method}} {method} trains classifiers only; use the standard "
                         f"method for {{task}} {task}", params=["method", "task"])
    if method != "standard" and oversample is not None:
        why = ("SetFit draws its pairs class by class" if method == "setfit" else
               "its training pairs are balanced per class hypothesis already")
        raise InputError(f"{{oversample}} cannot be used with {{method}} {method} ({why}); "
                         "leave it out", params=["oversample", "method"])
    if setfit_iterations is not None and method != "setfit":
        raise InputError("{setfit_iterations} is for {method} setfit; add {method} setfit or "
                         "leave it out", params=["setfit_iterations", "method"])
    check_method_options(method, hypothesis, label_phrases, nli_pairs)
    kwargs = {} if method == "standard" else {"method": method}
    if setfit_iterations is not None:
        kwargs["setfit_iterations"] = _positive_int(setfit_iterations)
    if method == "nli":
        hypothesis = check_hypothesis(DEFAULT_HYPOTHESIS if hypothesis is None else hypothesis)
        kwargs.update(hypothesis=hypothesis, nli_pairs=nli_pairs,
                      label_phrases=parse_label_phrases(label_phrases) or None)
    return kwargs


def check_nli_model(model, labels: list, label_phrases) -> dict:
    """Before any ``tune --method nli`` run: the model has an entailment output and every class
    has a label phrase (the first run would fail otherwise, after the plan is printed).
    Returns the phrase of every class (its name when ``label_phrases`` is empty).

    Raises:
        InputError: as :func:`quantformer.train.nli.nli_outputs` and
            :func:`quantformer.train.nli.phrases_for`.
    """
    nli_outputs(model)
    return phrases_for([str(c) for c in labels], label_phrases or {})


def compare_kwargs(names: list, *, model, labels: list, hypothesis: str | None = None,
                   label_phrases=None, nli_pairs: str = "balanced") -> dict:
    """For ``compare``: ``{model name: keyword arguments}`` its fine-tuned models' runs pass
    to :func:`quantformer.train.finetune` (the ``nli`` model: ``hypothesis``, ``label_phrases``,
    ``nli_pairs``, checked as for ``tune --method nli``, the model and the phrases of
    ``labels`` before any run; ``label_phrases`` then holds every class's phrase, its name
    when none was given).

    Raises:
        InputError: NLI options without ``nli`` in ``names``, and as :func:`method_kwargs`
            and :func:`check_nli_model`.
    """
    if "nli" not in names:
        check_method_options("standard", hypothesis, label_phrases, nli_pairs,
                             where="compare's nli model; add nli to {models}",
                             where_params=("models",))
        return {}
    kwargs = method_kwargs("nli", hypothesis=hypothesis, label_phrases=label_phrases,
                           nli_pairs=nli_pairs)
    kwargs["label_phrases"] = check_nli_model(model, labels, kwargs["label_phrases"])
    return {"nli": kwargs}


def sample_kwargs(kwargs: dict, classes) -> dict:
    """A run's ``kwargs`` for a training sample: NLI label phrases of the sample's classes
    only (a small plain random sample can lack a class; the model then knows the others, as a
    standard fine-tuned model would)."""
    phrases = kwargs.get("label_phrases")
    if not phrases:
        return kwargs
    present = {str(c) for c in classes}
    return {**kwargs, "label_phrases": {c: p for c, p in phrases.items() if c in present}}


def _positive_int(value) -> int:
    try:
        ok = not isinstance(value, bool) and float(value).is_integer() and float(value) >= 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"{{setfit_iterations}} must be a whole number greater than 0, not "
                         f"{value!r}", params=["setfit_iterations"])
    return int(value)
