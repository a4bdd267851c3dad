"""Regressions on a measured class with PPI intervals (issue 12): values, coverage, bad input."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import quantformer
import quantformer.cli.main
from quantformer._core.errors import InputError

from toydata import biased_corpus


def _gold(pred, truth, rows):
    return pd.DataFrame({"doc_id": pred["doc_id"].iloc[rows], "label": truth[rows]})


def test_ppi_regression_covers_the_party_difference_issue12():
    # the two-group contrast: the coefficient of party R is the difference in prevalence
    pred, truth = biased_corpus(seed=0)
    is_toxic = truth == "toxic"
    true = is_toxic[pred["party"] == "R"].mean() - is_toxic[pred["party"] == "D"].mean()
    rng = np.random.default_rng(6)
    hits = {"ppi": [], "gold": []}
    for _ in range(300):
        gold = _gold(pred, truth, rng.choice(len(pred), 200, replace=False))
        for method in hits:
            t = quantformer.regress(pred, gold, "toxic ~ party", method=method).iloc[1]
            hits[method].append(t["ci_low"] <= true <= t["ci_high"])
    naive = quantformer.regress(pred, gold, "toxic ~ party", method="naive").iloc[1]
    assert np.mean(hits["ppi"]) >= 0.93 and np.mean(hits["gold"]) >= 0.92
    assert not naive["ci_low"] <= true <= naive["ci_high"]
    assert naive["estimate"] < 0.6 * true  # attenuated: predicted labels bias it towards 0


def test_regression_table_and_families():
    pred, truth = biased_corpus(n=2000)
    pred["year"] = np.arange(2000) % 10 + 2000
    gold = _gold(pred, truth, np.arange(0, 2000, 5))
    ols = quantformer.regress(pred, gold, "toxic ~ party + year")
    assert list(ols.columns) == ["outcome", "term", "estimate", "ci_low", "ci_high", "family",
                                 "method", "n_gold", "n_total", "note"]
    assert ols["term"].tolist() == ["Intercept", "party[T.R]", "year"]
    assert (ols["n_gold"] == 400).all() and (ols["n_total"] == 2000).all()
    assert ((ols["ci_low"] < ols["estimate"]) & (ols["estimate"] < ols["ci_high"])).all()
    # OLS of the gold sample alone equals the least-squares fit of the codes
    gold_fit = quantformer.regress(pred, gold, "toxic ~ party", method="gold")
    x = np.column_stack([np.ones(400), pred["party"].iloc[::5] == "R"]).astype(float)
    beta = np.linalg.lstsq(x, (truth[::5] == "toxic").astype(float), rcond=None)[0]
    np.testing.assert_allclose(gold_fit["estimate"], beta, rtol=1e-6)
    logit = quantformer.regress(pred, gold, "toxic ~ party", family="logistic")
    assert logit["estimate"].iloc[0] < 0  # log-odds of a minority class
    assert logit["family"].iloc[0] == "logistic"


@pytest.mark.parametrize("kwargs, message", [
    ({"formula": "spam ~ party"}, "outcome 'spam'.*not a class"),
    ({"formula": "toxic"}, "formula must look like"),
    ({"formula": "toxic ~ "}, "no right-hand side"),
    # the formula's variables are checked before patsy, against the docvars alone
    ({"formula": "toxic ~ region"}, "formula uses region, which is no docvar of pred; its "
                                    "docvars are: party$"),
    ({"formula": "toxic ~ C(party) + np.log(nosuch) + a:b"},
     "formula uses nosuch, a, b, which are no docvars of pred"),
    ({"formula": "toxic ~ (party"}, "cannot read the covariates"),
    ({"formula": "toxic ~ party", "family": "probit"}, "family must be one of"),
    ({"formula": "toxic ~ party", "method": "plugin"}, "method must be one of"),
])
def test_bad_regression_arguments_are_refused(kwargs, message):
    pred, truth = biased_corpus(n=300)
    with pytest.raises(InputError, match=message):
        quantformer.regress(pred, _gold(pred, truth, np.arange(50)), **kwargs)


def test_unknown_formula_variable_names_the_docvars_not_predicts_columns(capsys, tmp_path):
    pred, truth = biased_corpus(n=300)
    pred["backend"] = "torch"  # written by predict: no docvar
    with pytest.raises(InputError, match="uses backend, which is no docvar of pred; its "
                                         "docvars are: party$"):
        quantformer.regress(pred, _gold(pred, truth, np.arange(50)), "toxic ~ backend")
    pred.to_parquet(tmp_path / "pred.parquet")
    _gold(pred, truth, np.arange(50)).to_csv(tmp_path / "gold.csv", index=False)
    assert quantformer.cli.main.main(
        ["regress", "--pred", str(tmp_path / "pred.parquet"), "--gold", str(tmp_path / "gold.csv"),
         "--formula", "toxic ~ nosuch"]) == 2
    err = capsys.readouterr().err
    assert "--formula uses nosuch, which is no docvar of --pred; its docvars are: party\n" in err
    assert "NameError" not in err


def test_missing_covariate_is_an_error_not_a_dropped_document():
    pred, truth = biased_corpus(n=300)
    pred["year"] = 2000.0
    pred.loc[3, "year"] = np.nan
    with pytest.raises(InputError, match="missing"):
        quantformer.regress(pred, _gold(pred, truth, np.arange(50)), "toxic ~ year")


def test_cli_regress(tmp_path):
    pred, truth = biased_corpus(n=500)
    pred.to_parquet(tmp_path / "pred.parquet")
    _gold(pred, truth, np.arange(100)).to_csv(tmp_path / "gold.csv", index=False)
    r = subprocess.run([sys.executable, "-m", "quantformer", "regress", "--pred",
                        "pred.parquet", "--gold", "gold.csv", "--formula", "toxic ~ party",
                        "--family", "logistic", "--out", "coef.csv"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = pd.read_csv(tmp_path / "coef.csv")
    assert out["term"].tolist() == ["Intercept", "party[T.R]"]
    assert "FutureWarning" not in r.stderr


def test_dsl_regression_equals_ols_of_pseudo_outcomes_with_sandwich_se_by_hand():
    """Egami et al. (2023): the OLS coefficients of yhat + R (y - yhat) / pi on the covariates,
    with the HC0 sandwich (X'X)^-1 X' diag(e^2) X (X'X)^-1 (issue 35)."""
    from scipy.stats import norm

    pred, truth = biased_corpus(n=600, seed=2)
    coded = np.arange(0, 600, 4)  # 150 gold documents, a simple random design: pi = 150/600
    t = quantformer.regress(pred, _gold(pred, truth, coded), "toxic ~ party", method="dsl",
                            level=0.9)
    pseudo = pred["prob_toxic"].to_numpy().copy()
    pseudo[coded] += ((truth[coded] == "toxic") - pseudo[coded]) * (600 / 150)
    x = np.column_stack([np.ones(600), (pred["party"] == "R").to_numpy(float)])
    bread = np.linalg.inv(x.T @ x)
    beta = bread @ x.T @ pseudo
    resid = pseudo - x @ beta
    se = np.sqrt(np.diag(bread @ (x.T * resid ** 2) @ x @ bread))
    np.testing.assert_allclose(t["estimate"], beta, rtol=1e-9)
    np.testing.assert_allclose(t["ci_low"], beta - norm.ppf(0.95) * se, rtol=1e-9)
    np.testing.assert_allclose(t["ci_high"], beta + norm.ppf(0.95) * se, rtol=1e-9)
    assert (t["method"] == "dsl").all() and (t["n_gold"] == 150).all()
    # logistic: the root of sum x (pseudo - expit(x'b)) = 0 (the DSL moment condition)
    logit = quantformer.regress(pred, _gold(pred, truth, coded), "toxic ~ party",
                                family="logistic", method="dsl")
    b = logit["estimate"].to_numpy()
    score = x.T @ (pseudo - 1 / (1 + np.exp(-x @ b)))
    np.testing.assert_allclose(score, 0, atol=1e-6)


def test_dsl_regression_covers_with_unequal_inclusion_probabilities():
    """A stratified gold draw (R documents 4 times as likely): DSL weighted by the known
    probabilities covers the party difference; few draws keep it fast (issue 35)."""
    pred, truth = biased_corpus(n=3000, seed=3)
    is_toxic = truth == "toxic"
    true = is_toxic[pred["party"] == "R"].mean() - is_toxic[pred["party"] == "D"].mean()
    p = np.where(pred["party"] == "R", 0.12, 0.03)
    rng = np.random.default_rng(11)
    hits, estimates = [], []
    for _ in range(60):
        rows = np.flatnonzero(rng.random(len(pred)) < p)
        gold = pd.DataFrame({"doc_id": pred["doc_id"].to_numpy()[rows], "label": truth[rows],
                             "p": p[rows]})
        t = quantformer.regress(pred, gold, "toxic ~ party", method="dsl",
                                weight_col="p").iloc[1]
        hits.append(t["ci_low"] <= true <= t["ci_high"])
        estimates.append(t["estimate"])
    assert np.mean(hits) >= 0.9
    assert np.mean(estimates) == pytest.approx(true, abs=0.01)
