"""Calibration (issue 12): ECE, reliability diagram, temperature scaling, calibrate verb,
predict --calibrated, evaluate's ECE."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.cli import main as cli
from quantformer.score.calibration import (apply_temperature, calibrate,
                                     expected_calibration_error, fit_temperature)
from quantformer._core.errors import InputError, ModelDirError
from quantformer.train.finetune import finetune


def _overconfident(n=3000, temperature=3.0, seed=0):
    """True class probabilities softmax(z); reported ones softmax(T z): overconfident."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1, (n, 3))
    p_true = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    truth = np.array([rng.choice(3, p=row) for row in p_true])
    reported = np.exp(temperature * z) / np.exp(temperature * z).sum(1, keepdims=True)
    return reported, truth


def test_ece_by_hand():
    # 4 documents in two bins: confidence 0.95 (2 right) and 0.55 (1 of 2 right)
    probs = np.array([[0.95, 0.05], [0.95, 0.05], [0.55, 0.45], [0.45, 0.55]])
    truth = np.array([0, 0, 0, 0])
    # bin 0.9-1: |0.95 - 1| * 1/2; bin 0.5-0.6: |0.55 - 0.5| * 1/2
    assert expected_calibration_error(probs, truth) == pytest.approx(0.025 + 0.025)


def test_temperature_scaling_recovers_the_temperature_and_lowers_ece():
    probs, truth = _overconfident()
    t = fit_temperature(probs, truth)
    assert t == pytest.approx(3.0, rel=0.1)
    after = apply_temperature(probs, t)
    assert (after.argmax(1) == probs.argmax(1)).all()  # labels unchanged
    assert expected_calibration_error(after, truth) < expected_calibration_error(probs, truth) / 3


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir, tmp_path_factory):
    clf = finetune(toy_frame(32), model=str(tiny_bert_dir), epochs=1, lr=1e-3, quiet=True,
                   device="cpu", max_length=64)
    return clf.save(tmp_path_factory.mktemp("calib") / "model")


def test_calibrate_stores_temperature_and_predict_applies_it(model_dir, tmp_path, capsys):
    mdir = shutil.copytree(model_dir, tmp_path / "model")
    docs = toy_frame(40)
    docs.to_csv(tmp_path / "valid.csv", index=False)
    raw, cal = tmp_path / "raw.parquet", tmp_path / "cal.parquet"
    base = ["predict", "--model", str(mdir), "--input", str(tmp_path / "valid.csv"),
            "--device", "cpu", "--quiet"]
    assert cli.main([*base, "--calibrated", "--out", str(cal)]) == 2
    assert "has no calibration; run `quantformer calibrate" in capsys.readouterr().err
    assert cli.main([*base, "--out", str(raw)]) == 0
    assert cli.main(["calibrate", "--model", str(mdir), "--pred", str(raw)]) == 0
    assert "temperature" in capsys.readouterr().out
    record = json.loads((mdir / "quantformer.json").read_text())
    t = record["calibration"]["temperature"]
    assert record["calibration"]["n"] == 40 and record["complete"] is True
    assert cli.main([*base, "--calibrated", "--out", str(cal)]) == 0
    p0, p1 = pd.read_parquet(raw), pd.read_parquet(cal)
    cols = ["prob_econ", "prob_other"]
    np.testing.assert_allclose(p1[cols], apply_temperature(p0[cols].to_numpy(), t), atol=1e-6)
    assert p1["predicted"].tolist() == p0["predicted"].tolist()


def test_calibrate_bad_input(model_dir, tmp_path):
    mdir = shutil.copytree(model_dir, tmp_path / "model")
    bad = pd.DataFrame({"doc_id": ["a"] * 3, "prob_econ": [0.1] * 3, "label": ["econ"] * 3})
    with pytest.raises(InputError, match="lacks prob_other"):
        calibrate(mdir, bad)
    bad["prob_other"] = 0.9
    with pytest.raises(InputError, match="at least 10"):
        calibrate(mdir, bad)
    with pytest.raises(ModelDirError):
        calibrate(tmp_path / "nope", bad)


def test_evaluate_reports_ece_and_writes_reliability_diagram(tmp_path, capsys):
    probs, truth = _overconfident(n=500)
    labels = np.array(["a", "b", "c"])
    pred = pd.DataFrame({"doc_id": [f"d{i}" for i in range(500)], "label": labels[truth],
                         "predicted": labels[probs.argmax(1)],
                         **{f"prob_{c}": probs[:, j] for j, c in enumerate(labels)}})
    pred.to_csv(tmp_path / "pred.csv", index=False)
    png, out = tmp_path / "rel.png", tmp_path / "r.json"
    assert cli.main(["evaluate", "--pred", str(tmp_path / "pred.csv"), "--truth-col", "label",
                     "--calibration-plot", str(png), "--out", str(out)]) == 0
    assert "expected calibration error" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["calibration"]["ece"] == pytest.approx(
        expected_calibration_error(probs, truth))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_calibrated_is_refused_for_a_regression_or_multilabel_record():
    from quantformer.score.calibration import stored_temperature

    for task in ("regression", "multilabel"):
        with pytest.raises(InputError, match=f"is a {task} model: predict without calibrated"):
            stored_temperature({"task": task, "calibration": {"temperature": 2.0}}, "m")
    assert stored_temperature({"calibration": {"temperature": 2.0}}, "m") == 2.0
