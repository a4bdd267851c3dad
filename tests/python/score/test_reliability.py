"""Krippendorff's alpha and Cohen's kappa of model vs human codes (issue 12)."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
from sklearn.metrics import cohen_kappa_score

from quantformer.score.evaluate import evaluate
from quantformer.score.reliability import agreement, agreement_lines


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
