"""Word attributions of a fine-tuned model's predictions by Integrated Gradients.

Integrated Gradients (Sundararajan et al. 2017) through Captum's ``LayerIntegratedGradients``
(Kokhlikyan et al. 2020) over the model's input (word) embeddings:

* **Baseline**: the same sequence with every text token replaced by the pad token, special
  tokens ([CLS], [SEP], <s>, </s>) and positions kept, so the baseline differs from the input
  only in the words.
* **Target**: the logit of the predicted class, or of a class chosen with ``target``; a
  regression model's output; for a multi-label model every label (one target per label).
* **Model kinds** (:mod:`quantformer.infer.explain_forward`): a standard model's logits; an
  NLI model's entailment logit of the target class's (document, hypothesis) pair, with only
  the document (premise) attributed; a SetFit model's logistic head score (log-odds for two
  classes). Encoder-decoder models are refused.
* **Units**: attributions are in logit units and never normalised per document, so two
  documents compare. By completeness, a document's attributions add up to the difference of
  the target logit between input and baseline; ``completeness_gap`` is
  ``|sum - (logit(input) - logit(baseline))| / max(|logit(input) - logit(baseline)|, 0.05)``
  (the floor keeps documents whose input and baseline score alike from showing arbitrary
  gaps).
* **Adaptive steps** (default): the path integral is approximated by nested trapezoid rules
  (Captum's ``riemann_trapezoid`` and ``riemann_middle``, see :func:`trapezoid_rule` and
  :func:`refine_trapezoid`). Every document first gets the trapezoid rule on
  :data:`ADAPTIVE_STEPS`\\ [0] = 9 equally spaced points of the path; documents whose gap
  exceeds :data:`GAP_TOLERANCE` (5 %) get the midpoints added (17 points, of which 8 new),
  then again (33, then 65 points): each level reuses every gradient evaluated before, and the
  ``steps`` column counts the points a document's attributions used. The schedule was chosen
  on the TweetEval Abortion training tweets (``bench/explain_schedule.py``): there the nested
  trapezoid rules need fewer evaluations than Gauss-Legendre (16 steps meet 5 % for half of
  the tweets, 17 trapezoid points for 78 %), Simpson's and Romberg's extrapolations
  (Press et al. 2007, Numerical Recipes, sec. 4.2) enlarge the gap on these integrands, and a
  first level of 9 points costs 18 evaluations per tweet on average against 17 to 21 for a
  first level of 3 to 17 (3 or 5 save one evaluation per tweet but let some tweets stop on
  attributions from 3 or 5 gradients).
* **Fixed steps**: ``steps`` = N uses Captum's default Gauss-Legendre rule with N steps for
  every document (``method="gausslegendre"``), what a direct ``LayerIntegratedGradients`` call
  with ``n_steps=N`` computes.
* **Words, not subwords**: subword attributions are summed into the words of the original text
  (:func:`words_of`), located by the fast tokenizer's character offsets, so
  ``text[start:end] == word`` for any tokenizer (WordPiece, BPE, SentencePiece), emoji and
  accents included.
* **Long documents**: each document is explained in the window prediction uses
  (:func:`quantformer.models.tokenize.encode` with the model's ``max_length`` and
  ``truncation``); words outside it get a missing attribution (not seen by the model).
* **Documents read in windows** (``truncation="chunks"``, from the model's record or
  ``chunking``): every window of every document is explained for the document's target (the
  windows batched like documents), and a word's attribution is the mean of its sums over the
  windows that read it (:func:`quantformer.infer.explain_words.averaged_word_rows`), so every
  word has one. The document's score is the aggregate ``F`` of its ``n`` window logits
  ``f_w`` (:mod:`quantformer.models.chunks`):

  - ``mean``: ``F = (1/n) sum_w f_w``. Integrated Gradients of ``F`` along one path for all
    windows are each window's own attributions divided by ``n`` (they are linear in the
    function, Sundararajan et al. 2017, and each ``f_w`` reads its own window), so
    completeness is checked for the document: ``logit`` = ``F`` of the input,
    ``baseline_logit`` = the mean of the windows' baseline logits (each window's pad-token
    baseline), ``attribution_sum`` = the mean over windows of each window's attribution sum.
  - ``max``: ``F = max_w f_w``; the gradient of ``F`` reaches only the window with the
    largest logit, so completeness is that window's: ``logit`` = ``F`` of the input (that
    window's logit), ``baseline_logit`` = that window's baseline logit (not the largest of
    the windows' baseline logits), ``attribution_sum`` = that window's attribution sum. The
    other windows are explained by their own logits and averaged into the words as above.

  A word's attribution is thus in the units of a window's logit (what the word moves in a
  window that reads it), comparable with documents read in one window; with several windows
  the words' attributions do not add up to ``attribution_sum`` (with ``mean`` a word's part
  of it is its attribution times ``word_windows / n_windows``). Adaptive steps refine a
  window while its own gap or its document's exceeds :data:`GAP_TOLERANCE`; a document's
  ``steps`` is the most points any of its windows used.

Batches: documents are sorted by length and integrated several at a time; Captum spreads the
interpolation steps of a batch over forward passes of at most :data:`TOKEN_BUDGET` tokens.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._core.errors import InputError, ParamWarning
from ..io.modeldir import read_record
from ..models.batching import length_batches, pad_arrays
from ..models.chunks import (aggregate_windows, check_aggregate, check_not_longformer,
                             refuse_without_chunks)
from ..models.hub import load_tokenizer
from ..models.precision import TorchPrecision, choose_precision, kept_fp32
from ..models.precision import record as precision_of
from ..models.tokenize import (
    CHUNKS,
    TRUNCATIONS,
    check_strategy,
    check_windows,
    special_template,
    warn_truncated,
)
from .chunked import chunking_of, with_chunking
from .classifier import Classifier, PredictionWarning
from .explain_forward import (
    ClassifierForward,
    check_architecture,
    class_probabilities,
    forward_for,
)
from .explain_words import (  # noqa: F401 (words_of, Window, windows: this module's API)
    Chunks,
    Window,
    averaged_word_rows,
    chunk_windows,
    windows,
    word_index,
    word_rows,
    words_of,
)
from .load import load_model

#: the adaptive schedule: every document gets the trapezoid rule on the first count of points,
#: documents whose completeness gap exceeds GAP_TOLERANCE the next count, which reuses the
#: points evaluated before and adds the midpoints, and so on (chosen on the TweetEval Abortion
#: training tweets, bench/explain_schedule.py)
ADAPTIVE_STEPS = (9, 17, 33, 65)
GAP_TOLERANCE = 0.05
#: the logit difference below which the completeness gap is taken relative to this value
DIFF_FLOOR = 0.05
#: padded tokens per forward (and backward) pass at most
TOKEN_BUDGET = 8192
METHODS = ("standard", "nli", "setfit")

#: why ``precision="auto"`` keeps explain in fp32 (the record's reason; bench/RESULTS.md,
#: "Precision"); plain words, shown as they are on the command line and in R
AUTO_REASON = ("fp32 for attributions: Integrated Gradients needs accurate gradients; "
               "bf16 on request")


def explain_precision(precision: str = "auto", device: str = "cpu") -> TorchPrecision:
    """The precision of the forward and backward passes of :func:`explain`: ``auto`` keeps
    fp32 (:data:`AUTO_REASON`), ``fp32``, or ``bf16`` autocast (warned where the hardware
    only emulates it).

    Raises:
        InputError: a value other than auto, fp32 or bf16.
    """
    kept = kept_fp32(precision, AUTO_REASON)
    return kept if kept is not None else TorchPrecision(choose_precision(precision, device))


class CompletenessWarning(ParamWarning):
    """Documents whose attributions do not add up to the logit difference within 5 %."""


def warn_gaps(bad: int, total: int, detail: str = "", stacklevel: int = 3) -> None:
    """Warn (:class:`CompletenessWarning`) that ``bad`` of ``total`` explanations have a
    completeness gap above :data:`GAP_TOLERANCE`; ``detail`` follows "logit difference"."""
    if bad:
        warnings.warn(CompletenessWarning(
            f"{bad} of {total} explanation(s) have a completeness gap above "
            f"{GAP_TOLERANCE:.0%} of the logit difference{detail}: their attributions do not "
            "add up to the prediction; raise {steps=256}", params=["steps=256"]),
            stacklevel=stacklevel + 1)


def warn_unknown_only(n: int, total: int, example: str | None = None,
                      stacklevel: int = 3) -> None:
    """Warn (UserWarning) that ``n`` of ``total`` documents have no token the model knows
    (:func:`unknown_only_mask`); ``example``: one of their doc_ids."""
    if n:
        eg = f", e.g. '{example}'" if example is not None else ""
        warnings.warn(f"{n} of {total} document(s) consist only of tokens the model does not "
                      f"know (unknown or special tokens{eg}: emoji-only texts, for a vocabulary "
                      "without emoji); their attributions say nothing about their words",
                      UserWarning, stacklevel=stacklevel + 1)


def check_steps(steps) -> int | None:
    """``steps`` as an int, or None (adaptive).

    Raises:
        InputError: not a whole number of at least 1.
    """
    if steps is None:
        return None
    if isinstance(steps, bool) or not float(steps).is_integer() or int(steps) < 1:
        raise InputError(f"{{steps}} must be a whole number of at least 1, not {steps}; leave "
                         "it out for adaptive steps", params=["steps"])
    return int(steps)


def check_model(path, backend: str = "torch", target: str | None = None,
                chunking: dict | None = None) -> dict:
    """Check, before any model is loaded, that ``path`` is a model ``explain`` serves, that
    ``target`` is one of its classes and that ``chunking`` fits it; returns its record.

    Raises:
        ModelDirError: not a model directory. InputError: ``backend`` other than torch, a
        method other than standard, NLI or SetFit, an encoder-decoder model (its
        ``config.json``), a ``target`` that is not a class of the model, or bad ``chunking``
        (:func:`check_chunking`).
    """
    if backend != "torch":
        raise InputError(f"explain needs gradients and runs on torch only, not {{backend}} "
                         f"'{backend}'; leave it out (torch)", params=["backend"])
    record = read_record(path)
    method = record.get("method", "standard")
    if method not in METHODS:
        raise InputError(f"explain supports models fine-tuned with method standard, nli or "
                         f"setfit; '{path}' was fine-tuned with method '{method}'")
    config = _check_config(path)
    check_chunking(path, record, config, chunking)
    if target is not None:
        labels = [str(x) for x in record.get("labels") or []]
        if record.get("task") == "regression":
            raise InputError(f"{{target}} picks a class, but '{path}' is a regression model: "
                             "its output is explained; leave it out", params=["target"])
        if str(target) not in labels:
            raise InputError(f"{{target}} '{target}' is not a class of the model; its classes "
                             f"are: {', '.join(labels)}", params=["target"])
    return record


def check_chunking(path, record: dict, config, chunking: dict | None) -> None:
    """Check the window settings ``chunking`` (``truncation``, ``stride``, ``max_chunks``,
    ``aggregate``; None: as the model was fine-tuned) against a model's record and config,
    before its weights load (only its tokenizer is read, for the window's size).

    Raises:
        InputError: an unknown ``truncation`` or ``aggregate``; ``stride``, ``max_chunks`` or
            ``aggregate`` without chunks; chunks with an NLI or SetFit model or a Longformer;
            a ``stride`` not smaller than the window, ``max_chunks`` < 1.
    """
    c = {k: v for k, v in (chunking or {}).items() if v is not None}
    hp = record.get("hyperparameters", {})
    if "truncation" in c:
        check_strategy(c["truncation"], TRUNCATIONS)
    if "aggregate" in c:
        check_aggregate(c["aggregate"])
    use = c.get("truncation", hp.get("truncation", "head_tail"))
    if use != CHUNKS:
        refuse_without_chunks(use, **{k: v for k, v in c.items() if k != "truncation"})
        return
    if record.get("method", "standard") != "standard":
        raise InputError(_NOT_STANDARD.format(method=record.get("method")),
                         params=["truncation"])
    if config is not None:
        check_not_longformer(config, CHUNKS)
    stride, max_chunks, _ = chunking_of(hp) if use == hp.get("truncation") else (None,) * 3
    max_length = int(hp.get("max_length", 512))
    n_special = special_template(load_tokenizer(str(path))).n_single
    check_windows(max_length - n_special, c.get("stride", stride),
                  c.get("max_chunks", max_chunks), max_length, model_window=True)


_NOT_STANDARD = ("explain reads documents in windows for models fine-tuned the standard way "
                 "only, not yet for method '{method}'; explain it in one window with "
                 "{{truncation}} head_tail")


def _check_config(path):
    """The model's ``config.json`` as a namespace (None when unreadable: the loader names what
    is wrong with the directory), after refusing an encoder-decoder model (no weights read)."""
    import json
    from pathlib import Path
    from types import SimpleNamespace

    cfg = Path(path) / "config.json"
    try:
        config = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    config = SimpleNamespace(**config)
    check_architecture(config, path)
    return config


def load_explainable(path, device: str = "auto", backend: str = "torch",
                     target: str | None = None, record: dict | None = None,
                     chunking: dict | None = None) -> Classifier:
    """A model directory as a :class:`~quantformer.infer.classifier.Classifier`, after
    :func:`check_model` (skipped when the caller passes the ``record`` that check returned),
    through the process's model cache (so the worker keeps it); the record is read once.
    ``chunking``: how it reads documents (:func:`quantformer.infer.chunked.with_chunking`;
    None: as fine-tuned)."""
    if record is None:
        record = check_model(path, backend, target, chunking)
    return with_chunking(load_model(path, device=device, precision="fp32", record=record),
                         **(chunking or {}))


def unknown_only_mask(clf: Classifier, wins: list) -> np.ndarray:
    """For each :class:`Window` (None: a missing text), whether every text token the model
    sees is the tokenizer's unknown token or a special token (or there is none), e.g. an
    emoji-only text for a vocabulary without emoji: its attributions are alike under any model
    and say nothing about its words."""
    tok = clf.tokenizer
    special = set(getattr(tok, "all_special_ids", None) or [])
    if getattr(tok, "unk_token_id", None) is not None:
        special.add(tok.unk_token_id)
    return np.array([w is not None and all(w.input_ids[p] in special for p in w.positions)
                     for w in wins], dtype=bool)


def unknown_only(clf: Classifier, texts: dict) -> list[str]:
    """The doc_ids of ``texts`` (``{doc_id: text}``) that consist only of tokens the model
    does not know (:func:`unknown_only_mask`)."""
    ids = list(texts)
    wins, _ = doc_windows(clf, [texts[d] for d in ids])
    return [d for d, m in zip(ids, unknown_only_mask(clf, wins[0])) if m]


# ------------------------------------------------------------------------------------------
# Integrated Gradients


class Integrator:
    """Captum's LayerIntegratedGradients over a model's input embeddings, through the forward
    of its kind (:mod:`quantformer.infer.explain_forward`)."""

    def __init__(self, clf: Classifier, token_budget: int = TOKEN_BUDGET,
                 fwd: ClassifierForward | None = None,
                 precision: TorchPrecision | None = None):
        from captum.attr import LayerIntegratedGradients

        self.clf = clf
        #: forward and backward passes under this precision's autocast (None: fp32)
        self.precision = precision if precision is not None else TorchPrecision.fp32()
        self.model = clf.model
        self.fwd = fwd if fwd is not None else forward_for(clf)
        self.pad_id = clf.tokenizer.pad_token_id or 0
        self.budget = token_budget
        self.lig = LayerIntegratedGradients(self.forward, self.fwd.embeddings())
        #: while :meth:`run` records: the outputs of the first two forward passes
        self.seen: list | None = None

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        out = self.fwd(input_ids, attention_mask, token_type_ids)
        if self.seen is not None and len(self.seen) < 2:
            self.seen.append(out.detach().float().cpu().numpy().astype(np.float64))
        return out

    def tensors(self, wins: list):
        """(input ids, baseline ids, attention mask, token types or None) of a batch."""
        import torch

        arrays = pad_arrays([w.input_ids for w in wins],
                            [w.token_type_ids for w in wins] if wins[0].token_type_ids else None,
                            self.pad_id)
        base = arrays["input_ids"].copy()
        for row, w in enumerate(wins):
            base[row, w.positions] = self.pad_id
        dev = self.clf.device
        t = {k: torch.from_numpy(v).to(dev) for k, v in arrays.items()}
        return (t["input_ids"], torch.from_numpy(base).to(dev), t["attention_mask"],
                t.get("token_type_ids"))

    def logits(self, ids, mask, types):
        import torch

        with torch.no_grad(), self.precision.context(self.clf.device):
            return self.forward(ids, mask, types).float().cpu().numpy().astype(np.float64)

    def all_logits(self, wins: list, present: np.ndarray) -> np.ndarray:
        """Logits (n_docs, n_outputs) of the documents ``present`` (NaN rows for the others)."""
        out = np.full((len(wins), self.fwd.n_outputs), np.nan)
        for b in _batches(wins, present, 32):
            ids, _, mask, types = self.tensors([wins[i] for i in b])
            out[b] = self.logits(ids, mask, types)
        return out

    def run(self, wins: list, targets: np.ndarray, steps: int, method: str = "gausslegendre",
            logits: bool = True):
        """Token attributions (batch, longest) by Captum's rule ``method`` on ``steps`` points,
        and (``logits``) the target logits of input and baseline (else None, None).

        The logits are read from the two forward passes Captum's ``LayerIntegratedGradients``
        makes on the input and on the baseline to take their embeddings (recorded by
        :meth:`forward`, so for every model kind's explained scores), so they cost no pass of
        their own; if those passes are not seen as expected, they are computed separately.
        """
        ids, base, mask, types = self.tensors(wins)
        rows = np.arange(len(wins))
        internal = max(len(wins), self.budget // ids.shape[1])
        self.seen = [] if logits else None
        try:
            with self.precision.context(self.clf.device):
                attr = self.lig.attribute(ids, baselines=base,
                                          target=[int(t) for t in targets],
                                          additional_forward_args=(mask, types),
                                          n_steps=steps, method=method,
                                          internal_batch_size=internal)
            seen = self.seen
        finally:
            self.seen = None
        f_in = f_base = None
        if logits:
            if len(seen) == 2 and all(x.shape[0] == len(wins) for x in seen):
                f_in, f_base = seen[0][rows, targets], seen[1][rows, targets]
            else:
                f_in = self.logits(ids, mask, types)[rows, targets]
                f_base = self.logits(base, mask, types)[rows, targets]
        return attr.sum(dim=-1).detach().float().cpu().numpy().astype(np.float64), f_in, f_base


def completeness_gap(total, f_in, f_base) -> np.ndarray:
    """``|total - (f_in - f_base)| / max(|f_in - f_base|, DIFF_FLOOR)`` (elementwise)."""
    diff = np.asarray(f_in) - np.asarray(f_base)
    return np.abs(np.asarray(total) - diff) / np.maximum(np.abs(diff), DIFF_FLOOR)


def _batches(wins: list, items: np.ndarray, batch_size: int) -> list[np.ndarray]:
    lengths = [len(wins[i].input_ids) for i in items]
    return [items[b] for b in length_batches(lengths, batch_size, TOKEN_BUDGET // 4)]


def nested_schedule(first: int, levels: int) -> tuple:
    """The point counts of ``levels`` nested trapezoid rules from ``first`` points: each level
    adds the midpoints of the previous one's intervals (``n -> 2 n - 1``)."""
    counts = [int(first)]
    for _ in range(levels - 1):
        counts.append(2 * counts[-1] - 1)
    return tuple(counts)


def trapezoid_rule(engine: Integrator, wins: list, targets: np.ndarray, points: int):
    """The trapezoid rule on ``points`` (>= 2) equally spaced points ``alpha = k / (points - 1)``
    of the path, with the target logits of input and baseline (as :meth:`Integrator.run`).

    Captum's ``riemann_trapezoid`` evaluates the gradient at exactly these points, but weighs
    them ``1 / points`` (halved at both ends), weights that add up to ``(points - 1) / points``
    instead of 1; its attributions are rescaled by ``points / (points - 1)``, which gives the
    trapezoid rule's weights ``1 / (points - 1)`` (halved at both ends).
    """
    attr, f_in, f_base = engine.run(wins, targets, points, "riemann_trapezoid")
    return attr * (points / (points - 1)), f_in, f_base


def refine_trapezoid(engine: Integrator, wins: list, targets: np.ndarray, coarse: np.ndarray,
                     points: int) -> np.ndarray:
    """The trapezoid rule on ``2 points - 1`` points from ``coarse``, the one on ``points``
    (>= 3) points, evaluating the gradient only at the ``points - 1`` new midpoints:
    ``T(2n - 1) = (T(n) + M(n - 1)) / 2``, with ``M(n - 1)`` Captum's ``riemann_middle`` rule on
    ``n - 1`` points (``alpha = (k + 1/2) / (n - 1)``, weights ``1 / (n - 1)``), the midpoint
    rule of the same intervals (Press et al. 2007, Numerical Recipes, sec. 4.2)."""
    mid, _, _ = engine.run(wins, targets, points - 1, "riemann_middle", logits=False)
    return (coarse + mid) / 2


def _padded(arrays: list, width: int) -> np.ndarray:
    out = np.zeros((len(arrays), width))
    for row, a in enumerate(arrays):
        out[row, :len(a)] = a
    return out


def integrate(engine: Integrator, wins: list, docs: np.ndarray, targets: np.ndarray,
              steps: int | None = None, batch_size: int = 8, progress=False,
              refine_gap=None) -> dict:
    """Integrated Gradients for each item ``(wins[docs[j]], targets[j])``.

    Adaptive (``steps`` None): every item gets the trapezoid rule on :data:`ADAPTIVE_STEPS`\\ [0]
    points (:func:`trapezoid_rule`); items whose completeness gap exceeds
    :data:`GAP_TOLERANCE` get the next level, which reuses all points evaluated so far and adds
    the midpoints (:func:`refine_trapezoid`); and so on up to the last level.

    Args:
        engine: the :class:`Integrator` of the model.
        steps: Gauss-Legendre steps for every item; None: adaptive, as above.
        batch_size: documents integrated together at most.
        progress: True for a tqdm bar on stderr ("explaining"); or a caller's bar (anything
            with ``update(n)``), advanced by the items integrated at the first level.
        refine_gap: None (an item is refined on its own gap), or a function of the result
            dict giving per item the gap that decides (a window's: the larger of its own and
            its document's, see :func:`explain_chunked`).

    Returns:
        ``{"attr": list of token-attribution arrays (one per input position), "f_in",
        "f_base", "gap", "steps"}``, item by item; ``steps``: the points at which the gradient
        was evaluated.
    """
    from tqdm.auto import tqdm

    n = len(docs)
    res = {"attr": [None] * n, "f_in": np.zeros(n), "f_base": np.zeros(n),
           "gap": np.zeros(n), "steps": np.zeros(n, dtype=np.int64)}
    schedule = ADAPTIVE_STEPS if steps is None else (steps,)
    todo = np.arange(n)
    own = not hasattr(progress, "update")
    bar = tqdm(total=n, desc="explaining", unit="doc", disable=not progress, leave=False) \
        if own else progress
    for level, s in enumerate(schedule):
        for b in _batches([wins[d] for d in docs], todo, batch_size):
            batch = [wins[docs[j]] for j in b]
            if steps is not None:
                attr, f_in, f_base = engine.run(batch, targets[b], s)
            elif level == 0:
                attr, f_in, f_base = trapezoid_rule(engine, batch, targets[b], s)
            else:
                coarse = _padded([res["attr"][j] for j in b],
                                 max(len(w.input_ids) for w in batch))
                attr = refine_trapezoid(engine, batch, targets[b], coarse, schedule[level - 1])
                f_in, f_base = res["f_in"][b], res["f_base"][b]
            for row, j in enumerate(b):
                length = len(wins[docs[j]].input_ids)
                res["attr"][j] = attr[row, :length]
            res["f_in"][b], res["f_base"][b], res["steps"][b] = f_in, f_base, s
            res["gap"][b] = completeness_gap(attr.sum(axis=1), f_in, f_base)
            if level == 0:
                bar.update(len(b))
        gap = res["gap"] if refine_gap is None else refine_gap(res)
        todo = todo[gap[todo] > GAP_TOLERANCE]
        if not todo.size:
            break
    if own:
        bar.close()
    return res


# ------------------------------------------------------------------------------------------
# items, words, frames


def _items(clf: Classifier, logits: np.ndarray, target: str | None) -> tuple:
    """(item documents, item target indices) for documents with these logits: the predicted
    class (or ``target``); every label of a multi-label model (or ``target``); a regression
    model's one output."""
    n = len(logits)
    task = clf.task.name
    if task == "regression":
        return np.arange(n), np.zeros(n, dtype=np.int64)
    if target is not None:
        return np.arange(n), np.full(n, clf.labels.index(str(target)), dtype=np.int64)
    if task == "multilabel":
        k = len(clf.labels)
        return np.repeat(np.arange(n), k), np.tile(np.arange(k), n)
    return np.arange(n), logits.argmax(axis=1)


def target_names(clf: Classifier) -> list[str]:
    """The name of each model output as written in the ``target`` column."""
    return ["predicted"] if clf.task.name == "regression" else list(clf.labels)


@dataclass
class Explanation:
    """What :func:`explain` returns.

    Attributes:
        words: one row per word and target: ``doc_id, word_id, word, start, end, attribution,
            target, completeness_gap`` (``start``/``end``: character offsets, 0-based,
            end-exclusive, into the document's text; ``attribution`` in logit units, NaN
            for words outside the window the model saw), then the document's ``steps``,
            ``predicted`` (not for multi-label) and ``probability``. Documents read in
            windows (``truncation="chunks"``) add ``word_windows`` (after
            ``completeness_gap``: the windows that read the word, whose sums it averages; 0
            for a word in windows dropped by ``max_chunks``) and, last, the document's
            ``n_windows``.
        documents: one row per document and target: ``doc_id, target, predicted``, the
            model's outputs (``prob_<label>`` or the regression value), ``logit``,
            ``baseline_logit``, ``attribution_sum``, ``completeness_gap``, ``steps``,
            ``truncated``, ``n_words``, ``n_unseen``, ``unknown_only`` (the document
            consists only of tokens the model does not know, :func:`unknown_only_mask`); in
            windows, ``n_windows`` before ``n_words``, ``truncated`` then meaning windows
            dropped by ``max_chunks`` (the module's description says what ``logit``,
            ``baseline_logit`` and ``attribution_sum`` are for each aggregate).
        Both have a ``backend`` column: ``torch`` (fp32) or ``torch bf16``.
        precision: the precision used and why (``precision``, ``requested``, ``reason``).
    """

    words: pd.DataFrame
    documents: pd.DataFrame
    precision: dict | None = None


def _texts_of(frame) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        texts = [frame] if isinstance(frame, str) else list(frame)
        frame = pd.DataFrame({"doc_id": [f"text{i + 1}" for i in range(len(texts))],
                              "text": texts})
    if "text" not in frame.columns:
        raise InputError("the frame has no 'text' column; read it with quantformer.read_frame "
                         "or name the text column")
    if len(frame) == 0:
        raise InputError("the corpus has no documents; give a corpus with at least one text",
                         params=["input"])
    return frame


def explain(model, frame, *, target: str | None = None, steps: int | None = None,
            batch_size: int = 8, device: str = "auto", progress: bool = False,
            chunking: dict | None = None, precision: str = "auto") -> Explanation:
    """Word attributions of a fine-tuned model's predictions (Integrated Gradients).

    Args:
        model: a :class:`~quantformer.infer.classifier.Classifier` (fine-tuned the standard
            way, or its NLI or SetFit subclass) or its model directory.
        frame: a corpus frame (``doc_id``, ``text``) or a sequence of texts.
        target: the class whose score is explained (default: each document's predicted class;
            every label of a multi-label model); not for regression models.
        steps: Gauss-Legendre steps for every document, an int >= 1 (default None:
            adaptive, nested trapezoid rules on :data:`ADAPTIVE_STEPS` = 9, 17, 33, 65 points
            until the completeness gap is within 5 %; see the module's description).
        batch_size: documents integrated together at most (8).
        device: used when ``model`` is a path.
        progress: show a tqdm bar.
        chunking: how documents are read: ``{"truncation", "stride", "max_chunks",
            "aggregate"}`` (values None or left out: as the model was fine-tuned; see
            :func:`quantformer.infer.chunked.with_chunking`). With ``truncation="chunks"``
            every window of every document is explained and a word's attribution is its mean
            over the windows that read it (see the module's description).
        precision: ``auto`` (default: fp32, whatever the hardware: Integrated Gradients
            needs accurate gradients), ``fp32`` or ``bf16`` (bf16 autocast of the forward and
            backward passes, any model kind, in windows too; warned where the hardware only
            emulates it).
            Measured on the bundled model fine-tuned on TweetEval Abortion
            (``bench/bench_precision.py --parts explain``; ``bench/RESULTS.md``, "Precision"):
            on 200 test tweets bf16 explained the same classes with the same completeness
            gaps, its word attributions ranked like fp32's (Spearman per tweet median 1.000,
            10th percentile 0.998, lowest 0.940); on 30 tweets it ran at about 1.9x fp32's
            speed on an AVX-512 BF16 CPU without AMX.

    The explained score by kind (:mod:`quantformer.infer.explain_forward`): a standard model's
    logit; an NLI model's entailment logit of the target class's (document, hypothesis) pair,
    attributed to the document's words only (the hypothesis is kept in input and baseline;
    Laurer et al. 2023); a SetFit model's logistic head score (log-odds of the target class for
    two classes, the class's logit for more; Tunstall et al. 2022).

    Returns:
        An :class:`Explanation` (words and documents frames). Documents with a missing or
        empty text are left out (a warning counts them). Documents made only of tokens the
        model does not know (unknown or special tokens, e.g. emoji-only texts) are explained,
        with one warning that counts them (their ``unknown_only`` is True).

    Raises:
        InputError: ``steps`` < 1, ``target`` not a class, an encoder-decoder model, an empty
            corpus or one whose texts are all missing, bad ``chunking``, a bad
            ``precision``. ModelDirError: not a model directory.
    """
    steps = check_steps(steps)
    kept_fp32(precision, AUTO_REASON)  # a bad value fails before the model loads
    frame = _texts_of(frame)
    clf = _classifier(model, device, target, chunking)
    chosen = explain_precision(precision, clf.device)
    if clf.truncation == CHUNKS:
        return explain_chunked(clf, frame, target=target, steps=steps, batch_size=batch_size,
                               progress=progress, precision=chosen)
    texts = frame["text"].tolist()
    engine = Integrator(clf, precision=chosen)
    doc_wins, missing = doc_windows(clf, texts)
    _check_missing(missing)
    cut = np.any([[bool(w and w.truncated) for w in ws] for ws in doc_wins], axis=0)
    warn_truncated(int(cut.sum()), len(texts), clf.max_length, clf.truncation)
    unknown = unknown_only_mask(clf, doc_wins[0])
    _check_unknown(frame, unknown)
    present = np.flatnonzero(~missing)
    scores = class_scores(engine, doc_wins, present)
    item_docs, item_classes = _items(clf, scores[present], target)
    item_docs = present[item_docs]
    item_wins, outputs = item_windows(engine, doc_wins, item_docs, item_classes)
    res = integrate(engine, item_wins, np.arange(len(item_docs)), outputs, steps, batch_size,
                    progress)
    _warn_gaps(res["gap"], steps)
    parts = [word_rows(texts[d], item_wins[j], res["attr"][j]) for j, d in enumerate(item_docs)]
    stats = {"logit": res["f_in"], "baseline_logit": res["f_base"],
             "attribution_sum": [float(a.sum()) for a in res["attr"]],
             "completeness_gap": res["gap"], "steps": res["steps"],
             "truncated": [w.truncated for w in item_wins]}
    out = _frames(engine, frame, scores, item_docs, item_classes, stats, parts)
    out.documents["unknown_only"] = unknown[item_docs]
    return out


def _check_unknown(frame: pd.DataFrame, unknown: np.ndarray) -> None:
    """Warn how many documents have no token the model knows (``unknown``: per document)."""
    if unknown.any():
        warn_unknown_only(int(unknown.sum()), len(frame),
                          str(frame["doc_id"].iloc[np.flatnonzero(unknown)[0]]), stacklevel=4)


def _check_missing(missing: np.ndarray) -> None:
    """Refuse a corpus whose texts are all missing; warn how many are."""
    n = len(missing)
    if missing.all():
        raise InputError(f"all {n} texts are missing or empty; nothing to explain",
                         params=["input"])
    if missing.any():
        warnings.warn(f"{int(missing.sum())} of {n} document(s) have a missing or empty "
                      "text; they have no words and are left out", PredictionWarning,
                      stacklevel=4)


# ------------------------------------------------------------------------------------------
# documents read in windows (truncation="chunks")


def explain_chunked(clf: Classifier, frame: pd.DataFrame, *, target: str | None = None,
                    steps: int | None = None, batch_size: int = 8,
                    progress: bool = False,
                    precision: TorchPrecision | None = None) -> Explanation:
    """:func:`explain` of a classifier that reads documents in windows: the document's target
    from the aggregate of its window logits, every window explained for it, words averaged
    over the windows that read them, completeness per document against the aggregate (the
    module's description says what is compared for ``mean`` and ``max``); the forward and
    backward passes of every window in ``precision`` (:func:`explain_precision`; None: fp32)."""
    texts = frame["text"].tolist()
    engine = Integrator(clf, precision=precision)
    if engine.fwd.kind != "standard":
        raise InputError(_NOT_STANDARD.format(method=engine.fwd.kind), params=["truncation"])
    chunks = chunk_windows(clf, texts)
    _check_missing(chunks.missing)
    known = np.bincount(chunks.doc, weights=(~unknown_only_mask(clf, chunks.wins)).astype(float),
                        minlength=len(texts))
    unknown = (known == 0) & (chunks.n_windows > 0)  # no window has a known token
    _check_unknown(frame, unknown)
    present = np.flatnonzero(~chunks.missing)
    logits = engine.all_logits(chunks.wins, np.arange(len(chunks.wins)))
    scores = aggregate_windows(logits, chunks.doc, len(texts), clf.aggregate)
    item_docs, item_classes = _items(clf, scores[present], target)
    item_docs = present[item_docs]
    stats, parts = explain_windows(engine, texts, chunks, item_docs, item_classes, steps,
                                   batch_size, progress)
    _warn_gaps(stats["completeness_gap"], steps)
    out = _frames(engine, frame, scores, item_docs, item_classes, stats, parts)
    out.documents["unknown_only"] = unknown[item_docs]
    return out


def explain_windows(engine: Integrator, texts: list, chunks: Chunks, item_docs: np.ndarray,
                    item_classes: np.ndarray, steps: int | None = None, batch_size: int = 8,
                    progress: bool = False) -> tuple[dict, list]:
    """Integrated Gradients of each item (document ``item_docs[j]``, output
    ``item_classes[j]``) over every window of its document.

    Returns:
        ``(stats, parts)``: per item ``logit``, ``baseline_logit``, ``attribution_sum``,
        ``completeness_gap`` (of the aggregate, :func:`window_totals`), ``steps``,
        ``truncated`` (windows dropped by ``max_chunks``) and ``n_windows``; and per item its
        words frame (:func:`~quantformer.infer.explain_words.averaged_word_rows`).
    """
    first = np.concatenate([[0], np.cumsum(chunks.n_windows)[:-1]]).astype(np.int64)
    item = np.repeat(np.arange(len(item_docs)), chunks.n_windows[item_docs])
    win = np.concatenate([np.arange(first[d], first[d] + chunks.n_windows[d])
                          for d in item_docs]).astype(np.int64)
    how = engine.clf.aggregate

    def refine_gap(r):  # a window's own gap or its document's, whichever is larger
        return np.maximum(r["gap"], window_totals(r, item, len(item_docs), how)
                          ["completeness_gap"][item])

    res = integrate(engine, chunks.wins, win, np.asarray(item_classes)[item], steps,
                    batch_size, progress, refine_gap=refine_gap)
    stats = window_totals(res, item, len(item_docs), how)
    stats["truncated"] = [chunks.wins[first[d]].truncated for d in item_docs]
    stats["n_windows"] = chunks.n_windows[item_docs]
    parts = [averaged_word_rows(texts[d], [chunks.wins[w] for w in win[item == j]],
                                [res["attr"][i] for i in np.flatnonzero(item == j)])
             for j, d in enumerate(item_docs)]
    return stats, parts


def window_totals(res: dict, item: np.ndarray, n_items: int, how: str) -> dict:
    """The completeness of each item's aggregate from its windows' results (``res`` of
    :func:`integrate`, ``item``: the item of each window).

    ``mean``: the means over the item's windows of the input logits, the baseline logits and
    the attribution sums; ``max``: those of the window with the largest input logit.

    Returns:
        Per item ``logit``, ``baseline_logit``, ``attribution_sum``, ``completeness_gap``
        (:func:`completeness_gap`) and ``steps`` (the most points any of its windows used).
    """
    total = np.array([a.sum() for a in res["attr"]])
    if how == "mean":
        def agg(v):
            return aggregate_windows(np.asarray(v)[:, None], item, n_items, "mean")[:, 0]
        f_in, f_base, tot = agg(res["f_in"]), agg(res["f_base"]), agg(total)
    else:
        order = np.lexsort((-np.asarray(res["f_in"]), item))  # by item, largest logit first
        pick = order[np.searchsorted(item[order], np.arange(n_items))]
        f_in, f_base, tot = res["f_in"][pick], res["f_base"][pick], total[pick]
    steps = aggregate_windows(res["steps"][:, None], item, n_items, "max")[:, 0]
    return {"logit": f_in, "baseline_logit": f_base, "attribution_sum": tot,
            "completeness_gap": completeness_gap(tot, f_in, f_base),
            "steps": steps.astype(np.int64)}


def doc_windows(clf: Classifier, texts: list) -> tuple[list, np.ndarray]:
    """(one list of :class:`Window` per input the model scores a document in, the missing
    mask): the document alone (standard, SetFit), or one (document, hypothesis) pair per class
    of an NLI model, in class order."""
    hyps = clf.hypotheses() if hasattr(clf, "hypotheses") else [None]
    out = [windows(clf, texts, h) for h in hyps]
    return [w for w, _ in out], out[0][1]


def class_scores(engine: Integrator, doc_wins: list, present: np.ndarray) -> np.ndarray:
    """The score of each class the forward explains, (n_docs, n_outputs) with NaN rows for
    missing documents: the logits (standard), the head's scores (SetFit), the entailment logit
    of each class's pair (NLI)."""
    if engine.fwd.kind != "nli":
        return engine.all_logits(doc_wins[0], present)
    e = engine.fwd.entailment_id
    return np.column_stack([engine.all_logits(w, present)[:, e] for w in doc_wins])


def item_windows(engine: Integrator, doc_wins: list, item_docs: np.ndarray,
                 item_classes: np.ndarray) -> tuple[list, np.ndarray]:
    """(the window of each item, the model output integrated for it): the document's window
    and the class (standard, SetFit); the class's pair and the entailment output (NLI)."""
    if engine.fwd.kind != "nli":
        return [doc_wins[0][d] for d in item_docs], np.asarray(item_classes, dtype=np.int64)
    wins = [doc_wins[c][d] for d, c in zip(item_docs, item_classes)]
    return wins, np.full(len(wins), engine.fwd.entailment_id, dtype=np.int64)


def _classifier(model, device: str, target: str | None,
                chunking: dict | None = None) -> Classifier:
    """The model as a checked Classifier (see :func:`check_model`), reading documents as
    ``chunking`` asks (:func:`quantformer.infer.chunked.with_chunking`)."""
    if not isinstance(model, Classifier):
        return load_explainable(model, device=device, target=target, chunking=chunking)
    if target is not None and (model.task.name == "regression"
                               or str(target) not in model.labels):
        raise InputError(f"{{target}} '{target}' is not a class of the model; its classes "
                         f"are: {', '.join(model.labels)}", params=["target"])
    return with_chunking(model, **(chunking or {}))


def _warn_gaps(gap: np.ndarray, steps: int | None) -> None:
    bad = int((gap > GAP_TOLERANCE).sum())
    if bad:
        used = f"{steps} steps" if steps is not None else f"{ADAPTIVE_STEPS[-1]} adaptive steps"
        warn_gaps(bad, len(gap), f" at {used} (largest {gap.max():.1%})")


def _frames(engine, frame, scores, item_docs, item_targets, stats: dict,
            parts: list) -> Explanation:
    """The words and documents frames from each item's words frame (``parts``) and its
    ``stats`` (the documents frame's columns from ``logit`` on)."""
    clf = engine.clf
    names = np.asarray(target_names(clf), dtype=object)
    doc_ids = frame["doc_id"].astype(str).to_numpy()
    for j, d in enumerate(item_docs):
        parts[j].insert(0, "doc_id", doc_ids[d])
        parts[j]["target"] = names[item_targets[j]]
        parts[j]["completeness_gap"] = stats["completeness_gap"][j]
    words = pd.concat(parts, ignore_index=True)
    words["doc_id"] = words["doc_id"].astype("string")
    words["target"] = words["target"].astype("string")
    if "word_windows" in words.columns:  # after the word's other columns
        words["word_windows"] = words.pop("word_windows")
    missing = np.isnan(scores).any(axis=1)
    probs = class_probabilities(engine.fwd, clf, scores)
    pred = pd.DataFrame(clf.task.columns(probs, missing)).iloc[item_docs].reset_index(drop=True)
    n_words = words.groupby(["doc_id", "target"], sort=False)["attribution"]
    docs = pd.DataFrame({
        "doc_id": pd.array(doc_ids[item_docs], dtype="string"),
        "target": pd.array(names[item_targets], dtype="string"),
    })
    docs = pd.concat([docs, pred], axis=1)
    for col, values in stats.items():
        docs[col] = values
    docs["n_words"] = n_words.size().to_numpy()
    docs["n_unseen"] = n_words.apply(lambda a: int(a.isna().sum())).to_numpy()
    words = _with_prediction(words, docs)
    words["backend"] = docs["backend"] = engine.precision.label
    return Explanation(words=words, documents=docs, precision=precision_of(engine.precision))


def _with_prediction(words: pd.DataFrame, docs: pd.DataFrame) -> pd.DataFrame:
    """The words with their document's ``steps`` (integration points used), ``predicted``
    class (or value) and ``probability`` (of the predicted class; NaN for a regression); a
    multi-label model has no single prediction: the words get ``steps`` and the ``target``'s
    ``probability``."""
    prob = pd.Series(np.nan, index=docs.index, dtype="float64")
    if "predicted" not in docs.columns:  # multi-label
        for lab in docs["target"].dropna().unique():
            pick = docs["target"] == lab
            prob[pick] = docs.loc[pick, f"prob_{lab}"].astype("float64")
        extra = docs[["doc_id", "target", "steps"]].assign(probability=prob)
        extra = extra.join(docs[_windows(docs)])
        return words.merge(extra, on=["doc_id", "target"], how="left", sort=False)
    for lab in docs["predicted"].dropna().unique():
        col = f"prob_{lab}"
        if col in docs.columns:
            pick = docs["predicted"] == lab
            prob[pick] = docs.loc[pick, col].astype("float64")
    extra = docs[["doc_id", "target", "steps", "predicted"]].assign(probability=prob)
    extra = extra.join(docs[_windows(docs)])
    return words.merge(extra, on=["doc_id", "target"], how="left", sort=False)


def _windows(docs: pd.DataFrame) -> list:
    """``["n_windows"]`` for documents read in windows, else ``[]``."""
    return ["n_windows"] if "n_windows" in docs.columns else []
