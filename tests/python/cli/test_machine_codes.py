"""One codes frame shape for every machine coder: annotate's codes (``label``, ``prob_*``
missing when an endpoint gave no token log-probabilities) and predict's or zeroshot's
predictions (``predicted``) go as they are into estimate, regress (PPI and DSL), evaluate,
reliability and ``code --add-coder``; where a document has no probabilities its hard label is
the prediction, and the output says so."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score

from quantformer.cli.main import main
from quantformer.room.store import Store
from toydata import biased_corpus

N = 400
N_GOLD = 120
UNPARSED = ["d3", "d17"]


def endpoint_codes(pred: pd.DataFrame, unparsed=UNPARSED) -> pd.DataFrame:
    """The codes frame as ``annotate --endpoint`` writes it (infer/annotate.py's frame) when
    the server returns no token log-probabilities: doc_id, label, prob_<label> for every
    label (all missing), unparsed (those rows without a label), coder (the model's name)."""
    codes = pd.DataFrame({"doc_id": pred["doc_id"], "label": pred["predicted"],
                          "prob_ok": np.nan, "prob_toxic": np.nan,
                          "unparsed": pred["doc_id"].isin(unparsed), "coder": "tiny-llm"})
    codes.loc[codes["unparsed"], "label"] = None
    return codes


@pytest.fixture()
def files(tmp_path):
    pred, truth = biased_corpus(n=N)
    codes = endpoint_codes(pred)
    codes.to_parquet(tmp_path / "codes.parquet")
    gold = pd.DataFrame({"doc_id": pred["doc_id"][:N_GOLD], "label": truth[:N_GOLD]})
    gold.to_csv(tmp_path / "gold.csv", index=False)
    return tmp_path, pred, truth, codes


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _dsl_by_hand(codes, truth, cls="toxic"):
    """Egami et al. 2023's pseudo-outcomes of the hard labels, the unparsed documents left
    out: yhat + (y - yhat) * N / n_gold on the gold documents."""
    keep = codes["label"].notna().to_numpy()
    yhat = (codes["label"] == cls).to_numpy(float)[keep]
    gold = np.zeros(len(codes), bool)
    gold[:N_GOLD] = True
    gold = gold[keep]
    y = (truth == cls).astype(float)[keep]
    pseudo = yhat.copy()
    pseudo[gold] += (y[gold] - yhat[gold]) * keep.sum() / gold.sum()
    return pseudo.mean()


def test_estimate_takes_endpoint_codes_without_probabilities(files, capsys):
    tmp, pred, truth, codes = files
    for method in ("naive", "dsl", "ppi"):
        code, out, err = _run(capsys, "estimate", "--pred", tmp / "codes.parquet", "--gold",
                              tmp / "gold.csv", "--method", method, "--out",
                              tmp / f"{method}.csv")
        assert code == 0, err
        assert "predictions: hard labels (no probabilities)" in out
        assert "2 document(s) have no prediction" in err
    table = {m: pd.read_csv(tmp / f"{m}.csv").set_index("class") for m in ("naive", "dsl",
                                                                           "ppi")}
    coded = codes["label"].dropna()
    assert table["naive"].loc["toxic", "estimate"] == pytest.approx((coded == "toxic").mean())
    assert table["dsl"].loc["toxic", "estimate"] == pytest.approx(_dsl_by_hand(codes, truth))
    # the unparsed documents (two of them gold) have no prediction and are left out
    assert (table["ppi"]["n_total"] == N - 2).all()
    assert (table["ppi"]["n_gold"] == N_GOLD - 2).all()
    assert (table["ppi"]["note"] == "predictions: hard labels (no probabilities)").all()
    # the same estimates as the hard labels given as a predictions file (predicted only)
    hard = pred[["doc_id", "predicted"]].assign(
        predicted=codes["label"].where(codes["label"].notna(), None))
    hard.to_parquet(tmp / "hard.parquet")
    assert main(["estimate", "--pred", str(tmp / "hard.parquet"), "--gold",
                 str(tmp / "gold.csv"), "--out", str(tmp / "hard.csv")]) == 0
    again = pd.read_csv(tmp / "hard.csv").set_index("class")
    assert np.allclose(again[["estimate", "ci_low", "ci_high"]],
                       table["ppi"][["estimate", "ci_low", "ci_high"]])


def test_estimate_uses_probabilities_where_given_and_labels_elsewhere(files, capsys):
    tmp, pred, truth, codes = files
    some = codes.copy()
    first = (np.arange(N) < 200) & some["label"].notna().to_numpy()
    some.loc[first, ["prob_ok", "prob_toxic"]] = pred.loc[first, ["prob_ok", "prob_toxic"]].values
    some.to_parquet(tmp / "some.parquet")
    code, out, err = _run(capsys, "estimate", "--pred", tmp / "some.parquet", "--gold",
                          tmp / "gold.csv", "--method", "dsl", "--out", tmp / "some.csv")
    assert code == 0, err
    table = pd.read_csv(tmp / "some.csv").set_index("class")
    # rows 0-199 have probabilities but the 2 unparsed ones; rows 200-399 only labels
    assert table.loc["toxic", "note"] == ("predictions: probabilities; the hard label for 200 "
                                          "of 398 document(s) without probabilities")
    keep = some["label"].notna().to_numpy()
    yhat = np.where(np.arange(N) < 200, some["prob_toxic"].fillna(0),
                    (some["label"] == "toxic").astype(float))[keep]
    y = (truth == "toxic").astype(float)[keep]
    gold = (np.arange(N) < N_GOLD)[keep]
    yhat[gold] += (y[gold] - yhat[gold]) * keep.sum() / gold.sum()
    assert table.loc["toxic", "estimate"] == pytest.approx(yhat.mean())


def test_regress_ppi_and_dsl_take_endpoint_codes(files, capsys):
    tmp, pred, truth, codes = files
    codes.assign(party=pred["party"]).to_parquet(tmp / "codes_party.parquet")
    for method in ("ppi", "dsl"):
        code, out, err = _run(capsys, "regress", "--pred", tmp / "codes_party.parquet",
                              "--gold", tmp / "gold.csv", "--formula", "toxic ~ party",
                              "--method", method, "--out", tmp / f"r_{method}.csv")
        assert code == 0, err
        table = pd.read_csv(tmp / f"r_{method}.csv")
        assert table["term"].tolist() == ["Intercept", "party[T.R]"]
        assert (table["note"] == "predictions: hard labels (no probabilities)").all()
        assert (table["n_total"] == N - 2).all()
    # an intercept-only DSL regression is the DSL prevalence
    assert main(["regress", "--pred", str(tmp / "codes.parquet"), "--gold",
                 str(tmp / "gold.csv"), "--formula", "toxic ~ 1", "--method", "dsl",
                 "--out", str(tmp / "r1.csv")]) == 0
    assert pd.read_csv(tmp / "r1.csv")["estimate"].iloc[0] == pytest.approx(
        _dsl_by_hand(codes, truth))


def test_evaluate_takes_codes_and_says_ece_is_not_available(files, capsys):
    tmp, pred, truth, codes = files
    code, out, err = _run(capsys, "evaluate", "--pred", tmp / "codes.parquet", "--truth",
                          tmp / "gold.csv", "--out", tmp / "e.json")
    assert code == 0, err
    report = json.loads((tmp / "e.json").read_text())
    coded = codes[:N_GOLD]["label"].notna().to_numpy()
    assert report["n"] == coded.sum() == N_GOLD - 2 and report["n_missing_pred"] == 2
    assert report["accuracy"] == pytest.approx(
        accuracy_score(truth[:N_GOLD][coded], codes["label"][:N_GOLD][coded]))
    assert report["labels"] == ["ok", "toxic"]
    assert report["calibration"]["ece"] is None and report["calibration"]["n"] == 0
    assert "every prob_<class> value is missing" in report["calibration"]["reason"]
    assert ("expected calibration error: not available: no document has probabilities"
            in out) and "0.0000" not in out
    # a predictions file without prob_ columns: not available either, with its reason
    pred[["doc_id", "predicted"]].to_csv(tmp / "p.csv", index=False)
    code, out, _ = _run(capsys, "evaluate", "--pred", tmp / "p.csv", "--truth",
                        tmp / "gold.csv", "--out", tmp / "p.json")
    assert code == 0
    calibration = json.loads((tmp / "p.json").read_text())["calibration"]
    assert calibration["ece"] is None and "no probabilities" in calibration["reason"]
    assert "expected calibration error: not available: the predictions have no" in out


def test_reliability_reads_codes_and_predictions_as_they_are(files, capsys):
    tmp, pred, truth, codes = files
    human = pd.DataFrame({"doc_id": pred["doc_id"][:N_GOLD], "label": truth[:N_GOLD],
                          "coder": "ann"})
    human.to_csv(tmp / "ann.csv", index=False)
    # zeroshot-shaped predictions: doc_id, predicted, prob_*, backend (no coder column)
    shot = pred[["doc_id", "predicted", "prob_ok", "prob_toxic"]].assign(backend="nli fp32")
    shot.to_parquet(tmp / "zeroshot.parquet")
    code, out, err = _run(capsys, "reliability", "--codes", tmp / "ann.csv",
                          tmp / "codes.parquet", tmp / "zeroshot.parquet", "--n-boot", "20",
                          "--out", tmp / "rel.csv")
    assert code == 0, err
    table = pd.read_csv(tmp / "rel.csv")
    assert table[["coder_1", "coder_2"]].values.tolist() == [
        ["ann", "tiny-llm"], ["ann", "zeroshot"], ["tiny-llm", "zeroshot"]]
    common = [i for i in range(N_GOLD) if f"d{i}" not in UNPARSED]
    one, two = truth[common], pred["predicted"].to_numpy()[common]
    index = {"ok": 0, "toxic": 1}
    alpha = krippendorff.alpha(reliability_data=[[index[x] for x in one],
                                                 [index[x] for x in two]],
                               level_of_measurement="nominal")
    assert (table["n_documents"] == len(common)).all()
    assert table["krippendorff_alpha"].iloc[0] == pytest.approx(alpha, abs=1e-12)
    assert table["cohen_kappa"].iloc[1] == pytest.approx(cohen_kappa_score(one, two),
                                                         abs=1e-12)


def test_add_coder_takes_endpoint_codes_and_zeroshot_predictions(files, capsys):
    tmp, pred, truth, codes = files
    pd.DataFrame({"doc_id": pred["doc_id"], "text": [f"text {i}" for i in range(N)]}).to_csv(
        tmp / "corpus.csv", index=False)
    pred[["doc_id", "predicted", "prob_ok", "prob_toxic"]].to_parquet(tmp / "zeroshot.parquet")
    project = tmp / "room.sqlite"
    for path, name in ((tmp / "codes.parquet", []), (tmp / "zeroshot.parquet",
                                                      ["--coder-name", "nli"])):
        code, out, err = _run(capsys, "code", "--project", project, "--input",
                              tmp / "corpus.csv", "--labels", "ok,toxic", "--add-coder", path,
                              *name, "--quiet")
        assert code == 0, err
    store = Store(project)
    try:
        rows = store.db.execute("SELECT coder, doc_id, label FROM codes").fetchall()
    finally:
        store.close()
    got = {(c, d): lab for c, d, lab in rows}
    assert sum(c == "tiny-llm" for c, _ in got) == N - 2
    assert sum(c == "nli" for c, _ in got) == N
    assert all(got[("nli", d)] == p for d, p in zip(pred["doc_id"], pred["predicted"]))
    assert ("tiny-llm", "d3") not in got
