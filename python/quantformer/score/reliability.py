"""Agreement between the model and the human coder, as intercoder reliability.

Communication science reports intercoder reliability for every coding; the classifier is one
more coder. Krippendorff's alpha for nominal data (Krippendorff 2004, *Content Analysis*, ch.
11; Hayes & Krippendorff 2007, "Answering the call for a standard reliability measure for
coding data", Communication Methods and Measures 1(1)) from the ``krippendorff`` package, and
Cohen's kappa (Cohen 1960) from scikit-learn, each with a percentile bootstrap confidence
interval over documents (Hayes & Krippendorff 2007 bootstrap alpha the same way).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._core.checks import check_level
from .._core.errors import InputError
from ..io.columns import ID_COLUMN, LABEL_COLUMN

N_BOOT = 1000


def _value_counts(truth: list, predicted: list, labels: list) -> np.ndarray:
    """Units x categories matrix: how many of the two coders chose each category."""
    index = {lab: j for j, lab in enumerate(labels)}
    counts = np.zeros((len(truth), len(labels)), dtype=float)
    for i, (t, p) in enumerate(zip(truth, predicted)):
        counts[i, index[t]] += 1
        counts[i, index[p]] += 1
    return counts


def _alpha(counts: np.ndarray) -> float:
    import krippendorff

    if np.count_nonzero(counts.sum(axis=0)) < 2:
        return float("nan")  # one category only: alpha is undefined
    return float(krippendorff.alpha(value_counts=counts, level_of_measurement="nominal"))


def _kappa(codes: np.ndarray) -> float:
    from sklearn.metrics import cohen_kappa_score

    if len(np.unique(codes)) < 2:
        return float("nan")
    return float(cohen_kappa_score(codes[0], codes[1], labels=np.unique(codes)))


def agreement(truth, predicted, level: float = 0.95, n_boot: int = N_BOOT,
              seed: int = 0) -> dict:
    """Krippendorff's alpha (nominal) and Cohen's kappa with bootstrap confidence intervals.

    Args:
        truth, predicted: label sequences of the same length without missing values (the
            human codes and the model's predictions of the same documents).
        level: confidence level of the percentile intervals (0.95).
        n_boot: bootstrap resamples of the documents (1,000).
        seed: random seed of the resampling (results are reproducible).

    Returns:
        ``{"krippendorff_alpha": {"estimate", "ci_low", "ci_high"}, "cohen_kappa": {...},
        "level": level, "n_boot": n_boot}``; NaN where a statistic is undefined (one class).
    """
    truth, predicted = [str(x) for x in truth], [str(x) for x in predicted]
    labels = sorted(set(truth) | set(predicted))
    counts = _value_counts(truth, predicted, labels)
    index = {lab: j for j, lab in enumerate(labels)}
    codes = np.array([[index[t] for t in truth], [index[p] for p in predicted]])
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(truth), size=(n_boot, len(truth)))
    boot_alpha = np.array([_alpha(counts[d]) for d in draws])
    boot_kappa = np.array([_kappa(codes[:, d]) for d in draws])
    tail = (1 - level) / 2 * 100

    def summary(point, boot):
        boot = boot[~np.isnan(boot)]
        low, high = np.percentile(boot, [tail, 100 - tail]) if len(boot) else (np.nan,) * 2
        return {"estimate": _none(point), "ci_low": _none(low), "ci_high": _none(high)}

    return {"krippendorff_alpha": summary(_alpha(counts), boot_alpha),
            "cohen_kappa": summary(_kappa(codes), boot_kappa),
            "level": level, "n_boot": n_boot}


def _none(x) -> float | None:
    return None if np.isnan(x) else float(x)


def agreement_lines(result: dict) -> list:
    """One printable line per statistic of an :func:`agreement` result."""
    lines = []
    for name in ("krippendorff_alpha", "cohen_kappa"):
        a = result.get(name)
        if not a:
            continue
        title = name.replace("_", " ").replace("krippendorff", "Krippendorff's").replace(
            "cohen", "Cohen's")
        if a["estimate"] is None:
            lines.append(f"{title}: undefined (one class only)")
        else:
            lines.append(f"{title}: {a['estimate']:.3f} ({result['level']:.0%} bootstrap "
                         f"interval {a['ci_low']:.3f} to {a['ci_high']:.3f})")
    return lines


#: the columns of :func:`coder_agreement`, one row per pair of coders
PAIR_COLUMNS = ["coder_1", "coder_2", "n_documents", "percent_agreement", "krippendorff_alpha",
                "alpha_ci_low", "alpha_ci_high", "cohen_kappa", "kappa_ci_low",
                "kappa_ci_high"]
DOCUMENTS = ("common", "pair")


def coder_agreement(codes, documents: str = "common", level: float = 0.95,
                    n_boot: int = N_BOOT, seed: int = 0):
    """Intercoder reliability of every pair of coders: humans, a fine-tuned model's predictions
    or a language model's codes (``quantformer annotate``) alike, each one more coder
    (Krippendorff 2004; for a language model as a coder, Ziems et al. 2024, Computational
    Linguistics, and Halterman & Keith 2025, Political Analysis).

    Args:
        codes: a long DataFrame, one row per code: ``doc_id``, ``coder``, ``label`` (a missing
            label, e.g. a skipped document or an unparsed answer, is no code).
        documents: ``"common"`` (default): every pair on the documents that every coder coded,
            so that the pairs' statistics are comparable; ``"pair"``: each pair on the
            documents both of its coders coded.
        level, n_boot, seed: the bootstrap intervals of :func:`agreement`.

    Returns:
        DataFrame of :data:`PAIR_COLUMNS`, one row per pair of coders in the order they first
        appear in ``codes``: Krippendorff's alpha (nominal) and Cohen's kappa with percentile
        bootstrap intervals (:func:`agreement`) and the share of documents coded alike.

    Raises:
        InputError: a missing column, fewer than two coders, a coder who coded a document
            twice, an unknown ``documents``, a ``level`` outside (0, 1), an ``n_boot`` below 1, or fewer than two
            documents for a pair.
    """
    level = check_level(level)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise InputError(f"{{n_boot}} must be a whole number of at least 1, not {n_boot!r}",
                         params=["n_boot"])
    wide = _wide_codes(codes)
    if documents not in DOCUMENTS:
        raise InputError(f"{{documents}} must be one of {', '.join(DOCUMENTS)}, not "
                         f"{documents!r}", params=["documents"])
    coders = list(wide.columns)
    common = wide.dropna()
    rows = []
    for i, first in enumerate(coders):
        for second in coders[i + 1:]:
            both = (common if documents == "common" else wide)[[first, second]].dropna()
            if len(both) < 2:
                raise InputError(f"coders '{first}' and '{second}' share {len(both)} coded "
                                 "document(s) (" + ("coded by every coder" if documents ==
                                                    "common" else "coded by both") + "); "
                                 "agreement needs at least two; code an overlap, or compare "
                                 "each pair on its own overlap with {documents} pair",
                                 params=["codes", "documents"])
            res = agreement(both[first], both[second], level=level, n_boot=n_boot, seed=seed)
            alpha, kappa = res["krippendorff_alpha"], res["cohen_kappa"]
            rows.append([first, second, len(both), float((both[first] == both[second]).mean()),
                         alpha["estimate"], alpha["ci_low"], alpha["ci_high"],
                         kappa["estimate"], kappa["ci_low"], kappa["ci_high"]])
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def _wide_codes(codes):
    """Documents x coders (labels as strings, NaN where a coder gave no code), coders in the
    order they first appear."""
    missing = [c for c in (ID_COLUMN, "coder", LABEL_COLUMN) if c not in codes.columns]
    if missing:
        raise InputError(f"{{codes}} lacks the column(s) {', '.join(missing)}; give doc_id, "
                         "coder and label, one row per code", params=["codes"])
    coded = codes.loc[codes[LABEL_COLUMN].notna(), [ID_COLUMN, "coder", LABEL_COLUMN]].astype(str)
    twice = coded.duplicated([ID_COLUMN, "coder"])
    if twice.any():
        one = coded[twice].iloc[0]
        raise InputError(f"{{codes}}: coder '{one['coder']}' coded document '{one['doc_id']}' "
                         f"more than once ({int(twice.sum())} repeated code(s)); keep one code "
                         "per coder and document", params=["codes"])
    order = list(dict.fromkeys(coded["coder"]))
    if len(order) < 2:
        raise InputError(f"{{codes}} holds the codes of {len(order)} coder(s); agreement needs "
                         "at least two", params=["codes"])
    return coded.pivot(index=ID_COLUMN, columns="coder", values=LABEL_COLUMN)[order]
