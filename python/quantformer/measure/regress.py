"""Regressions on a measured class, with prediction-powered confidence intervals.

The outcome is the indicator of one class (``toxic ~ party + year``: 1 when a document is toxic)
and the covariates are docvars; the coefficients are estimated by OLS (a linear probability
model) or logistic regression. As for prevalence (:mod:`quantformer.measure.prevalence`), regressing
predicted labels gives biased coefficients and intervals that do not cover (Egami et al. 2023,
DSL); prediction-powered inference corrects them with the hand-coded random sample
(Angelopoulos et al. 2023, Science, sections on linear and logistic regression), power-tuned by
PPI++ (Angelopoulos, Duchi & Zrnic 2023). Estimators: ppi-python's ``ppi_ols_ci``,
``ppi_logistic_ci`` and ``classical_ols_ci`` / ``classical_logistic_ci``; statsmodels'
``OLS`` and ``Logit`` for the naive fit.

Methods: ``ppi`` (default; the outcome's prediction is ``prob_<class>``, or the 0/1 label of a
document without probabilities, as :mod:`quantformer.io.codes` reads it), ``naive`` (the
predicted label as the outcome, every document, textbook standard errors; for contrast),
``gold`` (the hand-coded documents alone), ``dsl`` (design-based supervised learning, Egami,
Hinck, Stewart & Wei 2023, NeurIPS, section 3): every document's outcome is replaced by its
design-based pseudo-outcome ``yhat + R (y - yhat) / pi`` (:func:`quantformer.measure.
prevalence.dsl_pseudo_outcomes`: the prediction, corrected on a gold document by its error
divided by its known inclusion probability), and the regression of the pseudo-outcomes on the
covariates is fitted over all documents with sandwich (HC0) standard errors: statsmodels'
``OLS`` for ``ols``, and for ``logistic`` its ``GLM`` with the binomial family, whose score
equations ``sum x (pseudo - expit(x'b)) = 0`` are DSL's moment conditions (the pseudo-outcomes
need not lie in [0, 1]). DSL is unbiased and its intervals cover whatever the errors of the
surrogate codes (a fine-tuned model's or a language model's, ``quantformer annotate``),
provided the gold documents were drawn with known probabilities, equal or not (e.g. a
stratified draw with ``weight_col``). The right-hand side is a patsy formula over the
docvars of the prediction file (``C(party)``, interactions, ``np.log(x)`` work); a categorical
docvar gets treatment dummies, an intercept is added unless ``- 1``. A document with a missing
covariate is an error (never dropped silently).
"""

from __future__ import annotations

import ast
import warnings

import numpy as np
import pandas as pd

from .._core.checks import check_level
from .._core.errors import InputError
from ..io.columns import (
    BACKEND_COLUMN,
    ID_COLUMN,
    LABEL_COLUMN,
    PREDICTED_COLUMN,
    PREDICTED_PREFIX,
    PROB_PREFIX,
    REASON_COLUMN,
    STATUS_COLUMN,
    TEXT_COLUMN,
)
from ..io.gold import GoldPair, join_gold
from ..io.codes import CODER_COLUMN, UNPARSED_COLUMN
from .prevalence import check_method, dsl_pseudo_outcomes, prediction_note
from .ppi import ppi_py

FAMILIES = ("ols", "logistic")


def parse_formula(formula: str, classes: list) -> tuple[str, str]:
    """``"toxic ~ party + year"`` -> (class, right-hand side); checks the class."""
    if not isinstance(formula, str) or formula.count("~") != 1:
        raise InputError(f"formula must look like 'CLASS ~ docvar + docvar', not {formula!r}")
    lhs, rhs = (part.strip() for part in formula.split("~"))
    lhs = lhs.strip("`'\"")
    if lhs not in classes:
        raise InputError(f"the outcome '{lhs}' of the formula is not a class of the model "
                         f"(its classes: {', '.join(classes)}); put a class on the left of ~")
    if not rhs:
        raise InputError("the formula has no right-hand side; write e.g. 'toxic ~ party' or "
                         "'toxic ~ 1' for the prevalence alone")
    return lhs, rhs


# columns that predict or annotate (or a join) writes: never docvars
WRITTEN = (ID_COLUMN, TEXT_COLUMN, PREDICTED_COLUMN, LABEL_COLUMN, BACKEND_COLUMN, "n_windows",
           UNPARSED_COLUMN, CODER_COLUMN, STATUS_COLUMN, REASON_COLUMN, "raw")
WRITTEN_PREFIXES = (PROB_PREFIX, PREDICTED_PREFIX)


def formula_variables(rhs: str) -> list[str]:
    """The variables a patsy right-hand side reads (``C(party) + np.log(year)`` -> party,
    year): the names in its factors that are neither called nor an attribute's base."""
    import patsy

    try:
        factors = [f.code for t in patsy.ModelDesc.from_formula(rhs).rhs_termlist
                   for f in t.factors]
    except patsy.PatsyError as exc:
        raise InputError(f"cannot read the covariates '{rhs}' of {{formula}}: {exc.message}",
                         params=["formula"]) from None
    names = []
    for code in factors:
        tree = ast.parse(code, mode="eval")
        skip = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)} | \
            {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names += [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in skip]
    return list(dict.fromkeys(names))


def check_formula_docvars(frame: pd.DataFrame, rhs: str) -> pd.DataFrame:
    """The docvars of ``frame`` (its columns less those predict writes), once every variable
    of ``rhs`` is one.

    Raises:
        InputError: a variable of the formula that is no docvar, naming the docvars.
    """
    docvars = frame.drop(columns=[c for c in frame.columns if c in WRITTEN
                                  or str(c).startswith(WRITTEN_PREFIXES)])
    unknown = [v for v in formula_variables(rhs) if v not in docvars.columns]
    if unknown:
        have = ", ".join(map(str, docvars.columns)) or "none"
        which = f"{{formula}} uses {', '.join(unknown)}, which " + \
            ("is no docvar" if len(unknown) == 1 else "are no docvars") + " of "
        raise InputError(which + f"{{pred}}; its docvars are: {have}",
                         params=["formula", "pred", "data"],
                         r_message=which + f"{{data}}; the docvars given are: {have}")
    return docvars


def design(frame: pd.DataFrame, rhs: str) -> tuple[np.ndarray, list]:
    """The model matrix of every document (patsy) and its column names."""
    import patsy

    docvars = check_formula_docvars(frame, rhs)
    try:
        x = patsy.dmatrix(rhs, docvars, NA_action="raise", return_type="dataframe")
    except patsy.PatsyError as exc:
        raise InputError(f"cannot build the covariates '{rhs}' from the docvars "
                         f"({', '.join(docvars.columns)}): {exc.message}. Name existing "
                         "docvars; fill in or drop documents with missing values") from None
    if len(x) != len(frame):
        raise InputError(f"covariates '{rhs}' lost documents; fill in missing values")
    return np.ascontiguousarray(x.to_numpy(float)), list(x.columns)


def _fit(pair: GoldPair, x: np.ndarray, cls: str, family: str, method: str, alpha: float):
    ppi = ppi_py()
    y, w = pair.indicator(cls), pair.gold_weights
    f = pair.column(cls)
    xg, fg = x[pair.gold_rows], f[pair.gold_rows]
    if method == "ppi" and family == "ols":
        point = ppi.ppi_ols_pointestimate(xg, y, fg, x, f, w=w)
        return point, *ppi.ppi_ols_ci(xg, y, fg, x, f, alpha=alpha, w=w)
    if method == "ppi":
        with warnings.catch_warnings():  # ppi-python passes sklearn a deprecated `penalty`
            warnings.filterwarnings("ignore", category=FutureWarning, module="sklearn")
            point = ppi.ppi_logistic_pointestimate(xg, y, fg, x, f, w=w)
            return point, *ppi.ppi_logistic_ci(xg, y, fg, x, f, alpha=alpha, w=w)
    if method == "gold":
        return _classical(ppi, xg, y, w, family, alpha)
    if method == "dsl":
        return dsl_regression(x, dsl_pseudo_outcomes(pair, cls), family, alpha)
    return _naive(x, (pair.predicted == cls).astype(float), family, alpha)


def _classical(ppi, x, y, w, family, alpha):
    if family == "ols":
        low, high = ppi.classical_ols_ci(x, y, w=w, alpha=alpha)
    elif np.ptp(w) > 0:
        raise InputError("a logistic regression on a weighted (stratified) gold sample alone "
                         "is not available; use method 'ppi' or family 'ols'")
    else:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module="sklearn")
            low, high = ppi.classical_logistic_ci(x, y, alpha=alpha)
    return (np.asarray(low) + np.asarray(high)) / 2, low, high  # symmetric normal interval


def dsl_regression(x: np.ndarray, pseudo: np.ndarray, family: str, alpha: float):
    """The DSL coefficients of ``pseudo`` (design-based pseudo-outcomes, one per document) on
    ``x`` with sandwich (HC0) normal intervals: ``(estimate, ci_low, ci_high)`` arrays.
    ``ols``: statsmodels ``OLS``; ``logistic``: ``GLM`` with the binomial family (Egami et al.
    2023, section 3: the moment conditions of the regression with the pseudo-outcome in place
    of the outcome, and their sandwich variance)."""
    import statsmodels.api as sm

    model = sm.OLS(pseudo, x) if family == "ols" else sm.GLM(
        pseudo, x, family=sm.families.Binomial())
    with warnings.catch_warnings():  # pseudo-outcomes outside [0, 1] are expected
        warnings.simplefilter("ignore")
        fit = model.fit(cov_type="HC0")
    ci = np.asarray(fit.conf_int(alpha=alpha))
    return np.asarray(fit.params), ci[:, 0], ci[:, 1]


def _naive(x, y, family, alpha):
    import statsmodels.api as sm

    model = sm.OLS(y, x) if family == "ols" else sm.Logit(y, x)
    fit = model.fit() if family == "ols" else model.fit(disp=0)
    ci = np.asarray(fit.conf_int(alpha=alpha))
    return np.asarray(fit.params), ci[:, 0], ci[:, 1]


def regress(pred, gold, formula: str, family: str = "ols", method: str = "ppi",
            level: float = 0.95, *, label_col: str = LABEL_COLUMN, weight_col: str | None = None,
            id_col: str | None = None) -> pd.DataFrame:
    """Coefficients of a regression of a measured class on docvars, with confidence intervals.

    Args:
        pred: prediction DataFrame or file of the whole corpus: ``predict``'s or
            ``zeroshot``'s output (``doc_id``, docvars, ``predicted``, ``prob_<class>``) or
            ``annotate``'s codes (``doc_id``, ``label``, ``prob_<label>`` maybe missing; a
            document without them is predicted by its hard label); see
            :mod:`quantformer.io.codes`.
        gold: hand-coded random sample of its documents (``doc_id``, ``label_col``).
        formula: ``"CLASS ~ covariates"``: a class of the model on the left, a patsy formula
            of docvars on the right (e.g. ``"toxic ~ C(party) + year"``).
        family: ``"ols"`` (linear probability model; default) or ``"logistic"``.
        method: ``"ppi"`` (default), ``"naive"``, ``"gold"`` or ``"dsl"`` (design-based
            supervised learning, Egami et al. 2023; see the module docstring).
        level: confidence level in (0, 1) (0.95).
        label_col, weight_col, id_col: as in :func:`quantformer.measure.prevalence`.

    Returns:
        DataFrame, one row per coefficient: ``outcome``, ``term``, ``estimate``, ``ci_low``,
        ``ci_high``, ``family``, ``method``, ``n_gold``, ``n_total``, ``note`` (which
        predictions were used when some are hard labels, not probabilities; else empty).

    Raises:
        InputError: bad formula, family, method or level, missing covariate values, and the
            gold-sample problems of :func:`quantformer.io.gold.join_gold`.
    """
    method, level = check_method(method), check_level(level)
    if family not in FAMILIES:
        raise InputError(f"family must be one of {', '.join(FAMILIES)}, not '{family}'")
    pair = join_gold(pred, gold, label_col=label_col, weight_col=weight_col, id_col=id_col)
    cls, rhs = parse_formula(formula, pair.classes)
    x, terms = design(pair.frame, rhs)
    point, low, high = (np.ravel(v) for v in _fit(pair, x, cls, family, method, 1 - level))
    return pd.DataFrame({"outcome": cls, "term": terms, "estimate": point, "ci_low": low,
                         "ci_high": high, "family": family, "method": method,
                         "n_gold": len(pair.gold_rows), "n_total": pair.n_total,
                         "note": prediction_note(pair)})


