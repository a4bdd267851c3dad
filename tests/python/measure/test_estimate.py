"""Prevalence estimates (issue 12): PPI intervals cover, naive ones do not; bad input refused.

The coverage tests draw a gold sample many times (seeded) from one corpus whose every true label
is known and count how often each 95 % interval holds the corpus's true prevalence. A synthetic
corpus runs always; the Toxic comments (../shared/data) run when present.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import quantformer
from quantformer._core.errors import InputError
from quantformer.io.gold import GoldWarning
from toydata import biased_corpus

DRAWS = 300
N_GOLD = 200


def coverage(pred, truth, by=None, draws=DRAWS, n_gold=N_GOLD, cls="toxic", seed=1,
             methods=("ppi",)):
    """Share of draws whose interval holds the true prevalence, per method (and group).

    The naive interval does not depend on the gold sample: it is computed once.
    """
    rng = np.random.default_rng(seed)
    groups = pred[by] if by else pd.Series("all", index=pred.index)
    true = pd.Series(truth == cls).groupby(groups.to_numpy()).mean()

    def hit(gold, method):
        t = quantformer.estimate(pred, gold, by=by, method=method)
        t = t[t["class"] == cls]
        value = true[t[by].to_numpy() if by else np.array(["all"])].to_numpy()
        return (t["ci_low"].to_numpy() <= value) & (value <= t["ci_high"].to_numpy())

    hits = {m: [] for m in methods}
    for _ in range(draws):
        rows = rng.choice(len(pred), n_gold, replace=False)
        gold = pd.DataFrame({"doc_id": pred["doc_id"].iloc[rows], "label": truth[rows]})
        for method in hits:
            hits[method].append(hit(gold, method))
    cov = {m: np.mean(h, axis=0) for m, h in hits.items()}
    return {**cov, "naive": hit(gold, "naive").astype(float)}


def test_ppi_interval_covers_synthetic_prevalence_issue12():
    pred, truth = biased_corpus()
    cov = coverage(pred, truth, methods=("ppi", "gold"))
    assert cov["ppi"][0] >= 0.93
    assert cov["gold"][0] >= 0.92
    assert cov["naive"][0] < 0.3


def test_ppi_interval_covers_each_group_issue12():
    pred, truth = biased_corpus(seed=2)
    cov = coverage(pred, truth, by="party", draws=DRAWS, seed=3)
    assert (cov["ppi"] >= 0.93).all(), cov
    assert (cov["naive"] < 0.3).all(), cov


def toxic_corpus(shared_data):
    """Toxic comments with a bag-of-words logistic regression trained on 300 of them."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    df = pd.read_csv(shared_data / "jigsaw_toxic" / "jigsaw_5k.csv", dtype={"id": str})
    truth = np.where(df["toxic"] == 1, "toxic", "ok")
    rng = np.random.default_rng(7)
    train = rng.choice(len(df), 300, replace=False)
    vectorizer = TfidfVectorizer(min_df=2)
    x = vectorizer.fit_transform(df["comment_text"].fillna(""))
    model = LogisticRegression(max_iter=1000).fit(x[train], truth[train])
    proba = model.predict_proba(x)
    classes = list(model.classes_)
    length = np.where(df["comment_text"].str.len() > 200, "long", "short")
    pred = pd.DataFrame({"doc_id": df["id"], "length": length,
                         "predicted": np.asarray(classes)[proba.argmax(1)],
                         **{f"prob_{c}": proba[:, j] for j, c in enumerate(classes)}})
    return pred, truth


def test_ppi_interval_covers_toxic_prevalence_issue12(shared_data):
    pred, truth = toxic_corpus(shared_data)
    cov = coverage(pred, truth)
    assert cov["ppi"][0] >= 0.93, cov
    assert cov["naive"][0] < 0.5, cov


def test_ppi_interval_covers_toxic_group_contrast_issue12(shared_data):
    # two groups, comments of more or fewer than 200 characters (toxic: 6 % and 13 %): the
    # contrast is the coefficient of `length` in a linear probability model (short - long)
    pred, truth = toxic_corpus(shared_data)
    is_toxic = truth == "toxic"
    long = (pred["length"] == "long").to_numpy()
    true = is_toxic[~long].mean() - is_toxic[long].mean()
    rng = np.random.default_rng(5)
    hits = []
    for _ in range(DRAWS):
        rows = rng.choice(len(pred), N_GOLD, replace=False)
        gold = pd.DataFrame({"doc_id": pred["doc_id"].iloc[rows], "label": truth[rows]})
        t = quantformer.regress(pred, gold, "toxic ~ length").iloc[1]
        hits.append(t["ci_low"] <= true <= t["ci_high"])
    naive = quantformer.regress(pred, gold, "toxic ~ length", method="naive").iloc[1]
    assert np.mean(hits) >= 0.93
    assert not naive["ci_low"] <= true <= naive["ci_high"]


def test_estimate_table_columns_and_values():
    pred, truth = biased_corpus(n=1000)
    gold = pd.DataFrame({"doc_id": pred["doc_id"][:300], "label": truth[:300]})
    t = quantformer.estimate(pred, gold, by=["party"], level=0.9)
    assert list(t.columns) == ["party", "class", "estimate", "ci_low", "ci_high", "method",
                               "n_gold", "n_total", "note"]
    assert t["party"].tolist() == ["D", "D", "R", "R"]
    assert t.groupby("party")["estimate"].sum().round(10).eq(1).all()
    assert t["n_gold"].sum() == 2 * 300 and t["n_total"].sum() == 2 * 1000
    assert ((t["ci_low"] < t["estimate"]) & (t["estimate"] < t["ci_high"])).all()
    naive = quantformer.estimate(pred, gold, method="naive")
    share = (pred["predicted"] == "toxic").mean()
    assert naive.set_index("class").loc["toxic", "estimate"] == pytest.approx(share)


def test_ppi_narrower_than_gold_alone():
    pred, truth = biased_corpus()
    gold = pd.DataFrame({"doc_id": pred["doc_id"][:300], "label": truth[:300]})
    width = {m: quantformer.estimate(pred, gold, method=m).eval("ci_high - ci_low")[0]
             for m in ("ppi", "gold")}
    assert width["ppi"] < width["gold"]


def test_stratified_gold_sample_with_inclusion_probabilities():
    # R documents are drawn 5 times as often as D documents; weights undo that
    pred, truth = biased_corpus(seed=4)
    rng = np.random.default_rng(9)
    p = np.where(pred["party"] == "R", 0.1, 0.02)
    true = np.mean(truth == "toxic")
    hits = {"gold": [], "ppi": [], "dsl": []}
    means = {"gold": [], "ppi": [], "dsl": [], "unweighted": []}
    for _ in range(100):
        rows = np.flatnonzero(rng.random(len(pred)) < p)
        gold = pd.DataFrame({"doc_id": pred["doc_id"][rows], "label": truth[rows],
                             "p": p[rows]})
        for method in hits:
            t = quantformer.estimate(pred, gold, method=method, weight_col="p")
            t = t[t["class"] == "toxic"].iloc[0]
            hits[method].append(t["ci_low"] <= true <= t["ci_high"])
            means[method].append(t["estimate"])
        means["unweighted"].append(np.mean(truth[rows] == "toxic"))
    assert np.mean(hits["gold"]) >= 0.9 and np.mean(hits["ppi"]) >= 0.9
    assert np.mean(hits["dsl"]) >= 0.9  # design-based supervised learning (issue 35)
    assert np.mean(means["dsl"]) == pytest.approx(true, abs=0.01)
    assert np.mean(means["gold"]) == pytest.approx(true, abs=0.01)
    assert np.mean(means["ppi"]) == pytest.approx(true, abs=0.01)
    assert np.mean(means["unweighted"]) > true + 0.01  # the sample over-represents R


def test_dsl_equals_the_mean_pseudo_outcome_by_hand():
    """Egami et al. (2023): yhat + R (y - yhat) / pi, averaged over the corpus; a simple random
    sample has pi = n_gold / N (issue 35)."""
    from scipy.stats import norm

    rng = np.random.default_rng(5)
    prob_x = np.round(rng.random(30), 3)
    pred = pd.DataFrame({"doc_id": [f"d{i}" for i in range(30)],
                         "predicted": np.where(prob_x > 0.5, "x", "y"),
                         "prob_x": prob_x, "prob_y": 1 - prob_x})
    coded = np.arange(0, 30, 2)[:12]  # 12 gold documents
    labels = np.where(rng.random(12) < 0.5, "x", "y")
    gold = pd.DataFrame({"doc_id": pred["doc_id"].to_numpy()[coded], "label": labels})
    t = quantformer.estimate(pred, gold, method="dsl", level=0.9).set_index("class")
    pseudo = prob_x.copy()
    pseudo[coded] += ((labels == "x").astype(float) - pseudo[coded]) * (30 / 12)
    half = norm.ppf(0.95) * pseudo.std(ddof=1) / np.sqrt(30)
    assert t.loc["x", "estimate"] == pytest.approx(pseudo.mean())
    assert t.loc["x", "ci_low"] == pytest.approx(max(pseudo.mean() - half, 0.0))
    assert t.loc["x", "ci_high"] == pytest.approx(min(pseudo.mean() + half, 1.0))
    assert t.loc["x", "method"] == "dsl"


def test_group_without_gold_is_pooled_and_said():
    pred, truth = biased_corpus(n=1000)
    pred["region"] = np.where(np.arange(1000) < 950, "north", "south")
    gold = pd.DataFrame({"doc_id": pred["doc_id"][:200], "label": truth[:200]})
    with pytest.warns(GoldWarning, match="no gold documents: region=south.*pooled"):
        t = quantformer.estimate(pred, gold, by="region")
    south = t[t["region"] == "south"]
    assert (south["n_gold"] == 0).all() and south["note"].str.contains("pooled").all()
    assert south["estimate"].notna().all()
    with pytest.warns(GoldWarning, match="no gold documents"):
        g = quantformer.estimate(pred, gold, by="region", method="gold")
    assert g.loc[g["region"] == "south", "estimate"].isna().all()


def test_gold_sample_of_one_class_warns_that_intervals_are_degenerate():
    pred, truth = biased_corpus(n=400)
    keep = np.flatnonzero(np.asarray(truth) == "ok")[:40]
    gold = pd.DataFrame({"doc_id": pred["doc_id"].to_numpy()[keep], "label": "ok"})
    with pytest.warns(GoldWarning, match="every gold document is coded 'ok'.*degenerate"):
        quantformer.estimate(pred, gold)


def _gold(pred, truth, n=50):
    return pd.DataFrame({"doc_id": pred["doc_id"][:n], "label": truth[:n]})


@pytest.mark.parametrize("change, message", [
    (lambda p, g: (p, g.assign(doc_id=["zz"] + g["doc_id"].tolist()[1:])),
     "1 gold document.*not in pred .*zz.*or check id_col"),
    (lambda p, g: (p, g.assign(label=["spam"] + g["label"].tolist()[1:])),
     "label.*the model does not know: spam"),
    (lambda p, g: (p, g.head(9)), "9 usable.*at least 10"),
    (lambda p, g: (p, g.drop(columns="label")), "no 'label' column"),
    (lambda p, g: (p.drop(columns="doc_id"), g), "no doc_id column"),
    (lambda p, g: (p, pd.concat([g, g.head(1)])), "codes 1 document.*twice"),
    (lambda p, g: (p.drop(columns=["predicted", "prob_ok", "prob_toxic"]), g),
     "neither 'predicted', 'label' nor 'prob_"),
])
def test_bad_gold_input_is_refused(change, message):
    pred, truth = biased_corpus(n=200)
    p, g = change(pred, _gold(pred, truth))
    with pytest.raises(InputError, match=message):
        quantformer.estimate(p, g)


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "plugin"}, "method must be one of ppi, naive, gold"),
    ({"level": 1.5}, "level must be in"),
    ({"by": "nope"}, "by column.*nope"),
    ({"weight_col": "p"}, "no 'p' column"),
    ({"target_halfwidth": 2.0}, "half-width must be in"),
])
def test_bad_arguments_are_refused(kwargs, message):
    pred, truth = biased_corpus(n=200)
    with pytest.raises(InputError, match=message):
        quantformer.estimate(pred, _gold(pred, truth), **kwargs)


def test_bad_inclusion_probabilities_are_refused():
    pred, truth = biased_corpus(n=200)
    gold = _gold(pred, truth).assign(p=0.0)
    with pytest.raises(InputError, match=r"inclusion probabilities.*\(0, 1\]"):
        quantformer.estimate(pred, gold, weight_col="p")


def test_gold_without_label_and_unpredicted_documents_warn():
    pred, truth = biased_corpus(n=300)
    pred.loc[0, ["predicted", "prob_ok", "prob_toxic"]] = [None, np.nan, np.nan]
    gold = _gold(pred, truth, n=60)
    gold.loc[gold.index[5], "label"] = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = quantformer.estimate(pred, gold)
    text = " ".join(str(w.message) for w in caught)
    assert "1 gold document(s) have no label" in text
    assert "1 document(s) have no prediction" in text
    assert t["n_gold"].iloc[0] == 58 and t["n_total"].iloc[0] == 299


def test_planner_reports_gold_needed_for_target_halfwidth():
    pred, truth = biased_corpus()
    gold = _gold(pred, truth, n=200)
    wide = quantformer.estimate(pred, gold, method="gold", target_halfwidth=0.05)
    narrow = quantformer.estimate(pred, gold, method="gold", target_halfwidth=0.025)
    n_wide, n_narrow = wide["n_gold_needed"].iloc[0], narrow["n_gold_needed"].iloc[0]
    p = np.mean(truth[:200] == "toxic")
    assert n_wide == pytest.approx(1.96 ** 2 * p * (1 - p) / 0.05 ** 2, rel=0.01)
    assert n_narrow == pytest.approx(4 * n_wide, rel=0.01)
    # the planned size really gives about that half-width
    more = _gold(pred, truth, n=int(n_wide))
    t = quantformer.estimate(pred, more, method="gold")
    assert (t["ci_high"] - t["ci_low"]).iloc[0] / 2 == pytest.approx(0.05, rel=0.15)
    ppi = quantformer.estimate(pred, gold, target_halfwidth=0.05)
    assert ppi["n_gold_needed"].iloc[0] < n_wide


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "quantformer", "estimate", *args], cwd=cwd,
                          capture_output=True, text=True)


def test_cli_estimate_writes_table(tmp_path):
    pred, truth = biased_corpus(n=500)
    pred.to_parquet(tmp_path / "pred.parquet")
    _gold(pred, truth, n=100).to_csv(tmp_path / "gold.csv", index=False)
    r = _cli("--pred", "pred.parquet", "--gold", "gold.csv", "--by", "party", "--out",
             "est.csv", "--target-halfwidth", "0.05", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = pd.read_csv(tmp_path / "est.csv")
    assert out["party"].tolist() == ["D", "D", "R", "R"]
    assert set(out["method"]) == {"ppi"} and out["n_gold_needed"].notna().all()
    assert "prevalence (ppi, 95% intervals)" in r.stdout


def test_cli_estimate_bad_input_exit_2(tmp_path):
    pred, truth = biased_corpus(n=200)
    pred.to_parquet(tmp_path / "pred.parquet")
    _gold(pred, truth, n=5).to_csv(tmp_path / "gold.csv", index=False)
    r = _cli("--pred", "pred.parquet", "--gold", "gold.csv", "--out", "est.csv", cwd=tmp_path)
    assert r.returncode == 2
    assert "quantformer estimate: error:" in r.stderr and "at least 10" in r.stderr
    assert not (tmp_path / "est.csv").exists()


def test_ppi_python_import_does_not_silence_warnings():
    # ppi_py's ppi.py runs warnings.simplefilter("ignore") at import; ppi.ppi_py() undoes it
    code = ("import warnings, quantformer.measure.ppi as g; g.ppi_py(); "
            "warnings.warn('still heard', UserWarning)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "still heard" in r.stderr


def test_gold_needed_beyond_the_corpus_is_noted_issue27():
    pred, truth = biased_corpus(n=300)
    gold = _gold(pred, truth, n=100)
    t = quantformer.estimate(pred, gold, method="gold", target_halfwidth=0.01)
    p = np.mean(truth[:100] == "toxic")
    needed = np.ceil(1.96 ** 2 * p * (1 - p) / 0.01 ** 2)
    assert t["n_gold_needed"].iloc[0] == pytest.approx(needed, abs=1) and needed > 300
    assert t["note"].iloc[0] == (f"n_gold_needed ({t['n_gold_needed'].iloc[0]:.0f}) is more "
                                 "than the 300 documents the corpus has: coding all of them is "
                                 "the most one can do")
    wide = quantformer.estimate(pred, gold, method="gold", target_halfwidth=0.2)
    assert (wide["note"] == "").all()


def test_group_whose_gold_documents_agree_gets_exact_interval_issue27():
    from scipy.stats import beta

    pred, truth = biased_corpus(n=600)
    pred["region"] = np.where(np.arange(600) < 590, "north", "south")
    south = np.flatnonzero(pred["region"] == "south")[:3]
    gold = pd.concat([_gold(pred, truth, n=100),
                      pd.DataFrame({"doc_id": pred["doc_id"].to_numpy()[south],
                                    "label": "ok"})])
    with pytest.warns(GoldWarning, match="fewer than 10: region=south"):
        t = quantformer.estimate(pred, gold, by="region")
    row = t[(t["region"] == "south") & (t["class"] == "ok")].iloc[0]
    # 3 of 3 gold documents coded ok: Clopper-Pearson [(alpha/2)^(1/3), 1], not [1, 1]
    assert row["n_gold"] == 3 and row["ci_low"] == pytest.approx(beta.ppf(0.025, 3, 1))
    assert row["ci_low"] == pytest.approx(0.025 ** (1 / 3)) and row["ci_high"] == 1.0
    assert row["note"] == ("its 3 gold document(s) agree (3 of 3 in this class): the variance "
                           "estimate is zero, so the interval is widened to the exact "
                           "Clopper-Pearson interval of the gold share")
    toxic = t[(t["region"] == "south") & (t["class"] == "toxic")].iloc[0]
    assert toxic["ci_low"] == 0.0 and toxic["ci_high"] == pytest.approx(1 - 0.025 ** (1 / 3))
    north = t[t["region"] == "north"]
    assert (north["note"] == "").all() and (north["ci_high"] > north["ci_low"]).all()
    with pytest.warns(GoldWarning):
        g = quantformer.estimate(pred, gold, by="region", method="gold")
    assert g.loc[(g["region"] == "south") & (g["class"] == "ok"), "ci_low"].iloc[0] == \
        pytest.approx(0.025 ** (1 / 3))
