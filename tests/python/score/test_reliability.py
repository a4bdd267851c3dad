"""Krippendorff's alpha and Cohen's kappa of model vs human codes (issue 12)."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

import quantformer
from quantformer._core.errors import InputError
from quantformer.cli.main import main
from quantformer.score.evaluate import evaluate
from quantformer.score.reliability import agreement, agreement_lines, coder_agreement


def _codes(n=300, seed=0, accuracy=0.8):
    rng = np.random.default_rng(seed)
    truth = rng.choice(["a", "b", "c"], n)
    pred = np.where(rng.random(n) < accuracy, truth, rng.choice(["a", "b", "c"], n))
    return truth.tolist(), pred.tolist()


def test_alpha_and_kappa_equal_the_reference_implementations():
    truth, pred = _codes()
    res = agreement(truth, pred, n_boot=200)
    ref_alpha = krippendorff.alpha(reliability_data=[[ord(x) for x in truth],
                                                     [ord(x) for x in pred]],
                                   level_of_measurement="nominal")
    assert res["krippendorff_alpha"]["estimate"] == np.float64(ref_alpha).round(12) or \
        abs(res["krippendorff_alpha"]["estimate"] - ref_alpha) < 1e-12
    assert abs(res["cohen_kappa"]["estimate"] - cohen_kappa_score(truth, pred)) < 1e-12
    for name in ("krippendorff_alpha", "cohen_kappa"):
        a = res[name]
        assert a["ci_low"] < a["estimate"] < a["ci_high"]
        assert a["ci_high"] - a["ci_low"] < 0.2
    assert agreement(truth, pred, n_boot=200) == res  # seeded


def test_bootstrap_interval_narrows_with_more_documents_and_covers():
    small = agreement(*_codes(n=100, seed=1), n_boot=300)["cohen_kappa"]
    large = agreement(*_codes(n=1600, seed=1), n_boot=300)["cohen_kappa"]
    assert (large["ci_high"] - large["ci_low"]) < (small["ci_high"] - small["ci_low"]) / 2
    # with 80 % kept and 20 % random among 3 classes, kappa is about 0.8
    assert large["ci_low"] < 0.8 < large["ci_high"]


def test_one_class_is_undefined_not_a_number():
    res = agreement(["a"] * 20, ["a"] * 20, n_boot=50)
    assert res["krippendorff_alpha"]["estimate"] is None
    assert "undefined" in agreement_lines(res)[0]


def test_evaluate_report_carries_agreement(capsys):
    truth, pred = _codes(n=200)
    rep = evaluate(truth, pred)
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["agreement"]["cohen_kappa"]["estimate"] == rep.agreement["cohen_kappa"]["estimate"]
    assert d["agreement"]["level"] == 0.95 and d["agreement"]["n_boot"] == 1000
    rep.print()
    out = capsys.readouterr().out
    assert "Krippendorff's alpha: 0." in out and "Cohen's kappa: 0." in out


def _team(n=60, seed=3):
    """Two human coders (a coding-room export, one row per code) and a language model's codes
    (the columns of ``quantformer annotate``) on ``n`` documents, some not coded."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(["a", "b", "c"], n)

    def coder(accuracy):
        return np.where(rng.random(n) < accuracy, truth, rng.choice(["a", "b", "c"], n))
    ids = [f"d{i}" for i in range(n)]
    h1, h2, llm = coder(0.9), coder(0.85).astype(object), coder(0.7).astype(object)
    h2[:5] = None  # skipped by the second coder
    llm[5:8] = None  # unparsed answers
    export = pd.DataFrame({"doc_id": ids * 2, "label": list(h1) + list(h2),
                           "coder": ["ann"] * n + ["ben"] * n, "status": "code"})
    codes = pd.DataFrame({"doc_id": ids, "label": llm, "prob_a": np.nan,
                          "unparsed": pd.isna(llm), "coder": "tiny-llm"})
    return export, codes, {"ann": h1, "ben": h2, "tiny-llm": llm}


def test_reliability_of_every_pair_on_the_common_documents_equals_krippendorff(tmp_path):
    """One call: the LLM against each human and the humans against each other, on the same
    documents, equal to the krippendorff package and scikit-learn (issue 35)."""
    export, codes, by_coder = _team()
    export.to_csv(tmp_path / "room.csv", index=False)
    codes.to_parquet(tmp_path / "llm.parquet")
    out = tmp_path / "alpha.csv"
    assert main(["reliability", "--codes", str(tmp_path / "room.csv"),
                 str(tmp_path / "llm.parquet"), "--n-boot", "100", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert table[["coder_1", "coder_2"]].values.tolist() == [
        ["ann", "ben"], ["ann", "tiny-llm"], ["ben", "tiny-llm"]]
    common = np.arange(8, 60)  # coded by all three: ben skipped 0-4, the LLM failed on 5-7
    assert (table["n_documents"] == len(common)).all()
    index = {"a": 0, "b": 1, "c": 2}
    for _, row in table.iterrows():
        one, two = by_coder[row["coder_1"]][common], by_coder[row["coder_2"]][common]
        alpha = krippendorff.alpha(reliability_data=[[index[x] for x in one],
                                                     [index[x] for x in two]],
                                   level_of_measurement="nominal")
        assert row["krippendorff_alpha"] == np.float64(alpha) or \
            abs(row["krippendorff_alpha"] - alpha) < 1e-12
        assert abs(row["cohen_kappa"] - cohen_kappa_score(list(one), list(two))) < 1e-12
        assert row["percent_agreement"] == np.mean(one == two)
        assert row["alpha_ci_low"] < row["krippendorff_alpha"] < row["alpha_ci_high"]
    # each pair on its own overlap
    assert main(["reliability", "--codes", str(tmp_path / "room.csv"),
                 str(tmp_path / "llm.parquet"), "--documents", "pair", "--n-boot", "20",
                 "--out", str(out)]) == 0
    pairs = pd.read_csv(out)
    assert pairs["n_documents"].tolist() == [55, 57, 52]
    # evaluate scores the LLM's codes against one human as it scores predictions: the same
    # alpha and kappa on the same documents, with macro-F1 and the confusion matrix beside
    export[export["coder"] == "ann"].to_csv(tmp_path / "ann.csv", index=False)
    assert main(["evaluate", "--pred", str(tmp_path / "llm.parquet"), "--pred-col", "label",
                 "--truth", str(tmp_path / "ann.csv"), "--out", str(tmp_path / "e.json")]) == 0
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["n"] == 57 and report["n_missing_pred"] == 3
    assert report["agreement"]["krippendorff_alpha"]["estimate"] == pytest.approx(
        pairs["krippendorff_alpha"].iloc[1], abs=1e-12)
    assert report["agreement"]["cohen_kappa"]["estimate"] == pytest.approx(
        pairs["cohen_kappa"].iloc[1], abs=1e-12)


def test_reliability_names_coders_and_refuses_bad_codes(tmp_path, capsys):
    export, codes, _ = _team()
    codes.to_csv(tmp_path / "zero.csv", index=False)
    codes.to_csv(tmp_path / "five.csv", index=False)
    # one model in two files (zero- and k-shot runs) is two coders, named by their files
    merged = pd.concat([codes.assign(coder="m (zero)"), codes.assign(coder="m (five)")])
    want = quantformer.reliability(merged, n_boot=10)  # the public name of coder_agreement
    out = tmp_path / "r.csv"
    assert main(["reliability", "--codes", str(tmp_path / "zero.csv"), str(tmp_path / "five.csv"),
                 "--n-boot", "10", "--out", str(out)]) == 0
    got = pd.read_csv(out)
    assert got[["coder_1", "coder_2"]].values.tolist() == [["tiny-llm (zero)",
                                                            "tiny-llm (five)"]]
    assert got["krippendorff_alpha"].iloc[0] == want["krippendorff_alpha"].iloc[0] == 1.0
    # a file without a coder column is one coder named after the file
    export[export["coder"] == "ann"].drop(columns="coder").to_csv(tmp_path / "ann.csv",
                                                                  index=False)
    assert main(["reliability", "--codes", str(tmp_path / "ann.csv"), str(tmp_path / "zero.csv"),
                 "--n-boot", "10", "--out", str(out)]) == 0
    assert pd.read_csv(out)["coder_1"].tolist() == ["ann"]
    capsys.readouterr()
    for argv, message in [
        (["--codes", str(tmp_path / "zero.csv")], "codes of 1 coder(s)"),
        (["--codes", str(tmp_path / "zero.csv"), "--label-col", "code"], "no column code"),
        # the same file twice is refused as such, not as a coder coding a document twice
        (["--codes", str(tmp_path / "zero.csv"), str(tmp_path / "zero.csv")],
         f"--codes names the file '{tmp_path / 'zero.csv'}' more than once"),
        # the level is checked first, in the flag's terms (not numpy's percentile error)
        (["--codes", str(tmp_path / "zero.csv"), str(tmp_path / "five.csv"), "--level", "1.5"],
         "--level must be in (0, 1) such as 0.95, not 1.5"),
        (["--codes", str(tmp_path / "nosuch.csv"), "--level", "0"], "--level must be in (0, 1)"),
    ]:
        assert main(["reliability", *argv, "--out", str(tmp_path / "bad.csv")]) == 2
        assert message in capsys.readouterr().err
        assert not (tmp_path / "bad.csv").exists()
    twice = pd.concat([export, export.iloc[:1]])
    with pytest.raises(InputError, match="coder 'ann' coded document 'd0' more than once"):
        coder_agreement(twice)
    with pytest.raises(InputError, match=r"level must be in \(0, 1\)"):
        coder_agreement(export, level=1.5)
    for n_boot in (0, 2.5):
        with pytest.raises(InputError, match="n_boot must be a whole number of at least 1"):
            coder_agreement(export, n_boot=n_boot)
    apart = pd.DataFrame({"doc_id": ["a", "b", "c", "d"], "coder": ["x", "x", "y", "y"],
                          "label": ["1", "2", "1", "2"]})
    with pytest.raises(InputError, match="share 0 coded document"):
        coder_agreement(apart)
