"""How the coding room is doing: the light classifier's learning curve, the stability of its
predictions, and the agreement of two coders.

The learning curve is the cross-validated macro-F1 of the light classifier on the codes so far.
The stopping rule follows Bloodgood & Vijay-Shanker (2009, "A method for stopping active
learning based on stabilizing predictions and the need for user-adjustable stopping", CoNLL):
Cohen's kappa between two rounds' predictions on a fixed stop set, and coding more is unlikely
to change the model once the mean kappa of the last three rounds reaches 0.99. Agreement is
Krippendorff's alpha and Cohen's kappa with bootstrap intervals
(:func:`quantformer.score.reliability.agreement`).
"""

from __future__ import annotations

import numpy as np

from ..label.strategies import light_classifier
from ..score.reliability import agreement

STOP_KAPPA = 0.99  # Bloodgood & Vijay-Shanker (2009): kappa threshold ...
STOP_WINDOW = 3    # ... averaged over the last three comparisons


def cv_macro_f1(vectors: np.ndarray, codes: np.ndarray, seed: int) -> float | None:
    """Macro-F1 of the light classifier's cross-validated predictions (stratified k-fold,
    k = min(5, smallest class count)); None while a class has fewer than two codes."""
    from sklearn.metrics import f1_score
    from sklearn.model_selection import StratifiedKFold

    _, counts = np.unique(codes, return_counts=True)
    if len(counts) < 2 or counts.min() < 2:
        return None
    folds = StratifiedKFold(n_splits=int(min(5, counts.min())), shuffle=True,
                            random_state=seed)
    predicted = np.empty(len(codes), dtype=object)
    for train, test in folds.split(vectors, codes):
        predicted[test] = light_classifier(vectors[train], codes[train], seed).predict(
            vectors[test])
    return float(f1_score(codes.astype(str), predicted.astype(str), average="macro"))


def prediction_stability(before: np.ndarray | None, after: np.ndarray) -> float | None:
    """Cohen's kappa between two rounds' predictions on the stop set (1 when identical);
    None for the first round."""
    from sklearn.metrics import cohen_kappa_score

    if before is None:
        return None
    if np.array_equal(before, after):
        return 1.0
    kappa = cohen_kappa_score(before.astype(str), after.astype(str))
    return 0.0 if np.isnan(kappa) else float(kappa)


def stop_hint(stability: list) -> bool:
    """Bloodgood & Vijay-Shanker's rule: the last three rounds' kappas average >= 0.99."""
    last = [s for s in stability if s is not None and s == s][-STOP_WINDOW:]
    return len(last) == STOP_WINDOW and float(np.mean(last)) >= STOP_KAPPA


def pair_agreement(coders, both, n_boot: int) -> dict:
    """Alpha and kappa (:func:`quantformer.score.reliability.agreement`), ``n``, ``coders``
    and percent agreement of two coders' codes ``both`` ((doc_id, code, code), ...)."""
    if not both:
        return {"n": 0, "coders": []}
    x, y = [v for _, v, _ in both], [v for _, _, v in both]
    result = agreement(x, y, n_boot=n_boot)
    result.update({"n": len(both), "coders": list(coders),
                   "percent": float(np.mean([a == b for a, b in zip(x, y)]))})
    return result
