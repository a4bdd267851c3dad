"""quantformer explain --by-term --bow-data (what the model keys on beside a bag-of-words
model) and --png (a figure of highlighted documents), on a tiny fine-tuned model."""

from __future__ import annotations

import struct

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.cli.main import main
from quantformer.score.attributions import compare_terms
from quantformer.train.baselines import BowTokenizer
from quantformer.train.bow_terms import check_bow_data, fit_bow_terms


@pytest.fixture(scope="module")
def tuned(toy_model_dir):
    return toy_model_dir


def _png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_compare_terms_on_known_values():
    words = pd.DataFrame({
        "doc_id": ["d1", "d1", "d1", "d2", "d2", "d2", "d3", "d3"],
        "word": ["Taxes", "jobs", "the", "taxes", "jobs", "the", "jobs", "!"],
        "attribution": [1.0, 0.5, -0.2, 0.6, 0.1, -0.4, 0.3, 0.9],
        "target": "econ"})
    coefs = pd.DataFrame({"target": ["econ"] * 4 + ["other"] * 4,
                          "term": ["tax", "deficit", "the", "job"] * 2,
                          "bow_coef": [2.0, 1.0, 0.5, -1.0, -2.0, -1.0, -0.5, 1.0],
                          "bow_rank": [1, 2, 3, 4, 4, 3, 2, 1]})
    t = compare_terms(words, coefs, BowTokenizer(), top=2, n_boot=200)
    econ = t[t["target"] == "econ"].set_index("term")
    assert econ.index.tolist() == ["tax", "job", "deficit"]  # attribution top, then BoW top
    # issue 36, item 17: each stem shown as its most frequent surface form, the stem kept
    assert econ["word"].tolist() == ["taxes", "jobs", "deficit"]
    assert t.columns.tolist()[:3] == ["target", "term", "word"]
    assert econ.loc["tax", "mean_attribution"] == pytest.approx(0.8)
    assert econ.loc["job", "mean_attribution"] == pytest.approx(0.3)
    assert econ.loc["job", "n_docs"] == 3 and econ.loc["tax", "rank"] == 1
    assert econ.loc["tax", "lower"] <= 0.8 <= econ.loc["tax", "upper"]
    assert np.isnan(econ.loc["deficit", "mean_attribution"])
    assert econ.loc["deficit", "n_docs"] == 0 and pd.isna(econ.loc["deficit", "rank"])
    assert econ.loc["deficit", "bow_coef"] == 1.0 and econ.loc["job", "bow_rank"] == 4
    assert econ["in_top"].tolist() == [True, True, False]
    assert econ["in_bow_top"].tolist() == [True, False, True]
    assert (econ["top_overlap"] == 0.5).all()  # tax of {tax, job} vs {tax, deficit}
    # tax, job, the: means 0.8, 0.3, -0.3 vs coefficients 2, -1, 0.5 -> ranks 3,2,1 vs 3,1,2
    assert econ["spearman"].tolist() == pytest.approx([0.5] * 3)
    assert (econ["n_common"] == 3).all()
    other = t[t["target"] == "other"]
    assert other["term"].tolist() == ["job", "the"]
    assert other["top_overlap"].isna().all() and other["mean_attribution"].isna().all()


def test_bow_terms_are_a_logistic_regression_on_the_baselines_features():
    from sklearn.linear_model import LogisticRegression

    from quantformer.train.baselines import bow_vectorizer

    data = check_bow_data(toy_frame(24), {"task": "classification",
                                          "labels": ["econ", "other"]})
    bow = fit_bow_terms(data)
    vec = bow_vectorizer()
    X = vec.fit_transform(data["text"])
    ref = LogisticRegression(max_iter=2000, random_state=1).fit(X, data["label"] == "other")
    other = bow.coefs[bow.coefs["target"] == "other"].set_index("term")
    econ = bow.coefs[bow.coefs["target"] == "econ"].set_index("term")
    np.testing.assert_allclose(other.loc[vec.get_feature_names_out(), "bow_coef"],
                               ref.coef_[0], atol=1e-5)
    np.testing.assert_allclose(econ["bow_coef"], -other.loc[econ.index, "bow_coef"])
    assert other["bow_rank"].min() == 1 and other.loc[other["bow_coef"].idxmax(), "bow_rank"] == 1
    assert "tax" in econ.index and econ.loc["tax", "bow_coef"] > 0


def test_cli_terms_beside_the_bag_of_words_and_a_png(tuned, tmp_path, capsys):
    toy_frame(24).to_csv(tmp_path / "train.csv", index=False)
    toy_frame(8).drop(columns="label").to_csv(tmp_path / "c.csv", index=False)
    code = main(["explain", "--model", str(tuned), "--input", str(tmp_path / "c.csv"),
                 "--out", str(tmp_path / "w.parquet"), "--by-term", str(tmp_path / "t.csv"),
                 "--bow-data", str(tmp_path / "train.csv"), "--top", "5",
                 "--png", str(tmp_path / "f.png"), "--docs", "d001,d004", "--steps", "8",
                 "--quiet"])
    assert code == 0
    out = capsys.readouterr().out
    assert "overlap with the bag-of-words" in out
    assert f"wrote the figure to {tmp_path / 'f.png'}" in out
    t = pd.read_csv(tmp_path / "t.csv")
    assert list(t.columns) == ["target", "term", "word", "mean_attribution", "lower", "upper",
                               "n_docs", "rank", "bow_coef", "bow_rank", "in_top",
                               "in_bow_top", "top_overlap", "spearman", "n_common"]
    bow = fit_bow_terms(check_bow_data(toy_frame(24), {"labels": ["econ", "other"]}))
    coef = bow.coefs.set_index(["target", "term"])["bow_coef"]
    has = t[t["bow_coef"].notna()]
    np.testing.assert_allclose(has["bow_coef"],
                               coef.loc[list(zip(has["target"], has["term"]))], rtol=1e-6)
    for _, g in t.groupby("target"):
        assert g["in_bow_top"].sum() == 5 and g["in_top"].sum() <= 5
        k = min(5, g["in_top"].sum())
        if k:
            assert g["top_overlap"].iloc[0] == pytest.approx(
                (g["in_top"] & g["in_bow_top"]).sum() / k)
    assert set(t["term"]) <= {t2 for w in toy_frame(24)["text"] for t2 in BowTokenizer()(w)}
    width, height = _png_size(tmp_path / "f.png")
    assert width == 1600 and 150 < height < 3000


def _run(tuned, tmp_path, flags):
    toy_frame(4).drop(columns="label").to_csv(tmp_path / "c.csv", index=False)
    return main(["explain", "--model", str(tuned), "--input", str(tmp_path / "c.csv"),
                 "--out", str(tmp_path / "w.csv"), "--by-term", str(tmp_path / "t.csv"),
                 *flags])


@pytest.mark.parametrize("make, flags, message", [
    (None, ["--bow-data", "{d}/nope.csv"], "nope.csv' does not exist"),
    ("nolabel", ["--bow-data", "{d}/b.csv"], "has no label column"),
    ("wrong", ["--bow-data", "{d}/b.csv"], "are not the model's classes"),
    (None, ["--png", "{d}/f.pdf"], "--png '"),
    (None, ["--png", "{d}/f.png", "--docs", "d001,zz"], "--docs: zz is not a document id"),
    (None, ["--docs", "d001"], "add --png"),
    ("one", ["--bow-data", "{d}/b.csv"], "has one class only"),
])
def test_cli_bad_terms_or_figure_input_exit_2_and_write_nothing(tuned, tmp_path, capsys,
                                                                 make, flags, message):
    frame = toy_frame(12)
    if make == "nolabel":
        frame.drop(columns="label").to_csv(tmp_path / "b.csv", index=False)
    if make == "one":
        frame.assign(label="econ").to_csv(tmp_path / "b.csv", index=False)
    if make == "wrong":
        frame.assign(label=["a", "b"] * 6).to_csv(tmp_path / "b.csv", index=False)
    before = {p.name for p in tmp_path.iterdir()}
    code = _run(tuned, tmp_path, [f.format(d=tmp_path) for f in flags])
    assert code == 2 and message in capsys.readouterr().err
    assert {p.name for p in tmp_path.iterdir()} == before | {"c.csv"}


def test_check_file_keeps_all_but_the_last_extension():
    from argparse import Namespace

    from quantformer.cli.explain import check_path

    assert check_path(Namespace(out="a/words.v2.parquet")).as_posix() == "a/words.v2.check.json"
    assert check_path(Namespace(out="words.parquet")).as_posix() == "words.check.json"
    assert check_path(Namespace(out="words.csv.gz")).as_posix() == "words.check.json"


def test_wilson_interval_is_exact_at_the_ends():
    from quantformer.score.proportion import wilson_interval

    lo, hi = wilson_interval(0, 163)
    assert lo == 0.0 and abs(hi - 0.02302) < 1e-4
    lo, hi = wilson_interval(20, 20)
    assert hi == 1.0 and 0.83 < lo < 0.84


def test_png_keeps_the_texts_spacing():
    import pandas as pd

    from quantformer.audit.explain import words_of
    from quantformer.io.highlight_png import _blocks

    ws = words_of("R.E. saw #SemST, yes")
    words = pd.DataFrame({"doc_id": "d1", "word": [w for w, _, _ in ws],
                          "start": [s for _, s, _ in ws], "end": [e for _, _, e in ws],
                          "attribution": 0.1, "target": "a"})
    docs = pd.DataFrame({"doc_id": ["d1"], "target": ["a"], "predicted": ["a"], "prob_a": [0.9]})
    (_, items), = _blocks(words, docs, ["d1"], 0.1)
    assert [(w, sp) for w, _, _, sp in items] == [
        ("R", True), (".", False), ("E", False), (".", False), ("saw", True), ("#", True),
        ("SemST", False), (",", False), ("yes", True)]


def test_completeness_warning_names_steps_as_a_flag_and_as_an_r_argument():
    from quantformer._core.parameters import cli_setting, r_setting
    from quantformer.audit.integrate import CompletenessWarning, warn_gaps

    with pytest.warns(CompletenessWarning) as got:
        warn_gaps(2, 5, " at 9 points")
    w = got[0].message
    assert w.render(cli_setting) == (
        "2 of 5 explanation(s) have a completeness gap above 5% of the logit difference at 9 "
        "points: their attributions do not add up to the prediction; raise --steps 256")
    assert w.render(r_setting).endswith("raise `steps = 256`")
