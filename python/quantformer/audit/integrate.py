"""The integration engine of word attributions: Integrated Gradients over a model's input
(word) embeddings through Captum's ``LayerIntegratedGradients``, as
:mod:`quantformer.audit.explain` runs it. Method: Sundararajan et al. (2017); Captum:
Kokhlikyan et al. (2020).

* **Baseline**: the same sequence with every text token replaced by the pad token, special
  tokens ([CLS], [SEP], <s>, </s>) and positions kept, so the baseline differs from the input
  only in the words (:meth:`Integrator.tensors`).
* **Completeness**: a document's attributions add up to the difference of the target logit
  between input and baseline; :func:`completeness_gap` is
  ``|sum - (logit(input) - logit(baseline))| / max(|logit(input) - logit(baseline)|, 0.05)``
  (the floor, :data:`DIFF_FLOOR`, keeps documents whose input and baseline score alike from
  showing arbitrary gaps).
* **Adaptive steps** (default): the path integral is approximated by nested trapezoid rules
  (Captum's ``riemann_trapezoid`` and ``riemann_middle``, see :func:`trapezoid_rule` and
  :func:`refine_trapezoid`; Press et al. 2007, Numerical Recipes, sec. 4.2). Every item first
  gets the trapezoid rule on :data:`ADAPTIVE_STEPS`\\ [0] = 9 equally spaced points of the
  path; items whose gap exceeds :data:`GAP_TOLERANCE` (5 %) get the midpoints added (17
  points, of which 8 new), then again (33, then 65 points): each level reuses every gradient
  evaluated before, and ``steps`` counts the points an item's attributions used. How the
  schedule was chosen: see bench/RESULTS.md, "Explanations".
* **Fixed steps**: ``steps`` = N uses Captum's default Gauss-Legendre rule with N steps for
  every item (``method="gausslegendre"``), what a direct ``LayerIntegratedGradients`` call
  with ``n_steps=N`` computes.
* **Windows** of one document (:func:`window_totals`): Integrated Gradients are linear in the
  function (Sundararajan et al. 2017), so those of the mean of the window logits are each
  window's own divided by their number, and the completeness of the aggregate is checked from
  its windows' results.

Batches: items are sorted by length and integrated several at a time; Captum spreads the
interpolation steps of a batch over forward passes of at most :data:`TOKEN_BUDGET` tokens.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._core.errors import ParamWarning
from ..infer.classifier import Classifier
from ..models.batching import length_batches, pad_arrays
from ..models.chunks import aggregate_windows
from ..models.precision import TorchPrecision
from .explain_forward import ClassifierForward, forward_for

#: the adaptive schedule: every item gets the trapezoid rule on the first count of points,
#: items whose completeness gap exceeds GAP_TOLERANCE the next count, which reuses the points
#: evaluated before and adds the midpoints, and so on (how it was chosen: see
#: bench/RESULTS.md, "Explanations")
ADAPTIVE_STEPS = (9, 17, 33, 65)
GAP_TOLERANCE = 0.05
#: the logit difference below which the completeness gap is taken relative to this value
DIFF_FLOOR = 0.05
#: padded tokens per forward (and backward) pass at most
TOKEN_BUDGET = 8192


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


def warn_result_gaps(gap: np.ndarray, steps: int | None) -> None:
    """Warn (:func:`warn_gaps`) of the items whose ``gap`` exceeds :data:`GAP_TOLERANCE`, naming
    the steps they were integrated at (``steps``; None: adaptive)."""
    bad = int((gap > GAP_TOLERANCE).sum())
    if bad:
        used = f"{steps} steps" if steps is not None else f"{ADAPTIVE_STEPS[-1]} adaptive steps"
        warn_gaps(bad, len(gap), f" at {used} (largest {gap.max():.1%})")


class Integrator:
    """Captum's LayerIntegratedGradients over a model's input embeddings, through the forward
    of its kind (:mod:`quantformer.audit.explain_forward`)."""

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
            its document's, see :func:`quantformer.audit.explain.explain_chunked`).

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


def window_totals(res: dict, item: np.ndarray, n_items: int, how: str) -> dict:
    """The completeness of each item's aggregate from its windows' results (``res`` of
    :func:`integrate`, ``item``: the item of each window).

    ``mean``: the means over the item's windows of the input logits, the baseline logits and
    the attribution sums; ``max``: those of the window with the largest input logit (the
    gradient of the largest logit reaches only its window).

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
