"""Tests of quantformer.baselines: bag-of-words, averaged vectors, SVM/XGBoost tuned by CV."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantformer.train.baselines import (BASELINES, BowTokenizer, ModelEmbeddings, WordVectors,
                                   bow_vectorizer, check_folds, fit_baseline, training_rows,
                                   unusable_rows)
from quantformer._core.errors import InputError

POS = ["taxes rise", "tax cuts now", "the taxes are high", "cut the deficit and taxes",
       "taxing jobs", "a tax on trade"]
NEG = ["the war goes on", "peace at last", "the soldiers came home", "war and peace",
       "an army marches", "the soldiers fight"]


def two_class(n_per: int = 12) -> pd.DataFrame:
    texts = [POS[i % len(POS)] + f" {i}" for i in range(n_per)] + \
            [NEG[i % len(NEG)] + f" {i}" for i in range(n_per)]
    labels = ["econ"] * n_per + ["war"] * n_per
    return pd.DataFrame({"doc_id": [f"d{i}" for i in range(2 * n_per)], "text": texts,
                         "label": labels})


def glove_file(tmp_path, lines=None):
    lines = lines or ["tax 1.0 0.0 0.0", "taxes 1.0 0.1 0.0", "deficit 0.9 0.0 0.1",
                      "jobs 0.8 0.0 0.0", "trade 0.9 0.1 0.0", "cuts 0.7 0.0 0.0",
                      "war 0.0 1.0 0.0", "peace 0.0 0.9 0.1", "soldiers 0.0 1.0 0.1",
                      "army 0.1 0.9 0.0", "fight 0.0 0.8 0.0", "the 0.1 0.1 0.9"]
    p = tmp_path / "glove.txt"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_bow_tokenizer_lowercases_stems_and_filters():
    tok = BowTokenizer()
    assert tok("Running runners RAN, 2016 taxes!") == ["run", "runner", "ran", "tax"]
    keep = BowTokenizer(remove_punct=False, remove_numbers=False, language=None)
    assert keep("Running, 2016 taxes!") == ["running", ",", "2016", "taxes", "!"]
    with pytest.raises(InputError, match="no Snowball stemmer for 'klingon'"):
        BowTokenizer(language="klingon")("a text")


def test_bow_vectorizer_is_binary_with_document_frequency_filters():
    v = bow_vectorizer(min_df=2, max_df=0.9)
    X = v.fit_transform(["tax tax tax war", "tax peace", "war war", "the army"])
    # 'tax' and 'war' occur in 2 of 4 documents; 'peace', 'the', 'army' in one -> dropped
    assert v.get_feature_names_out().tolist() == ["tax", "war"]
    assert X.toarray().tolist() == [[1, 1], [1, 0], [0, 1], [0, 0]]
    v2 = bow_vectorizer(min_df=1, max_df=0.5)
    v2.fit(["tax war", "tax peace", "tax army", "war"])
    assert "tax" not in v2.get_feature_names_out()  # in 3 of 4 documents > 50 %


def test_check_folds_names_the_small_class_and_suggests_fewer_folds():
    labels = ["a"] * 10 + ["b"] * 10 + ["rare"] * 3
    check_folds(labels, 3)
    with pytest.raises(InputError) as e:
        check_folds(labels, 5)
    assert "class 'rare' has only 3 document(s)" in str(e.value)
    assert "use folds 3 or fewer" in str(e.value)
    with pytest.raises(InputError, match="only one class \\('a'\\); a classifier needs at "
                                         "least two: code documents of at least one other "
                                         "class, or check label_col"):
        check_folds(["a"] * 10, 2)
    with pytest.raises(InputError, match="code more documents of that class"):
        check_folds(["a"] * 10 + ["b"], 2)


def test_training_rows_leaves_out_unlabelled_and_empty_with_a_count():
    f = two_class(4)
    f.loc[0, "label"] = None
    f.loc[1, "text"] = "  "
    with pytest.warns(UserWarning, match="2 document.*1 without a label, 1 with a missing"):
        out = training_rows(f)
    assert out["doc_id"].tolist() == [f"d{i}" for i in range(2, 8)]


def test_svm_bow_tuned_by_cv_predicts_and_keeps_missing():
    m = fit_baseline(two_class(), "svm-bow", folds=3, min_df=1)
    assert m.labels == ["econ", "war"]
    assert set(m.best_params) == {"C", "class_weight"}
    assert len(m.cv_results) == 8 and m.cv_score == pytest.approx(
        m.cv_results["mean_macro_f1"].max())
    new = pd.DataFrame({"doc_id": ["x", "y", "z"], "text": ["more taxes", None, "war"],
                        "year": [1, 2, 3]})
    with pytest.warns(UserWarning, match="1 document"):
        p = m.predict(new)
    assert p["doc_id"].tolist() == ["x", "y", "z"] and p["year"].tolist() == [1, 2, 3]
    pred = p["predicted"].tolist()
    assert pred[0] == "econ" and pd.isna(pred[1]) and pred[2] == "war"
    assert "bag-of-words" in m.description


def test_xgb_bow_multiclass():
    f = two_class(8)
    extra = pd.DataFrame({"doc_id": [f"e{i}" for i in range(8)],
                          "text": [f"abortion rights {i}" for i in range(8)],
                          "label": ["abortion"] * 8})
    m = fit_baseline(pd.concat([f, extra], ignore_index=True), "xgb-bow", folds=2, min_df=1)
    assert m.labels == ["abortion", "econ", "war"]
    assert set(m.best_params) == {"max_depth", "n_estimators", "learning_rate"}
    assert len(m.cv_results) == 4
    assert m.predict_labels(["abortion rights now", "taxes rise", "the war"]).tolist() == \
        ["abortion", "econ", "war"]


def test_vec_baselines_with_a_glove_file(tmp_path):
    p = glove_file(tmp_path)
    m = fit_baseline(two_class(), "svm-vec", folds=3, vectors=str(p))
    assert m.predict_labels(["deficit and jobs", "an army of soldiers"]).tolist() == \
        ["econ", "war"]
    assert "averaged vectors from glove.txt" in m.description
    wv = WordVectors(str(p))
    X = wv.transform(["Tax war!", "unknown words only", None])
    assert wv.dim == 3
    np.testing.assert_allclose(X[0], [0.5, 0.5, 0.0])  # mean of 'tax' and 'war'; '!' unknown
    assert X[1].tolist() == [0, 0, 0] and X[2].tolist() == [0, 0, 0]


def test_word2vec_header_is_skipped(tmp_path):
    p = glove_file(tmp_path, ["2 3", "tax 1 0 0", "war 0 1 0"])
    assert WordVectors(str(p)).transform(["war"]).tolist() == [[0, 1, 0]]


@pytest.mark.parametrize("lines, msg", [
    (["tax 1.0 0.0 0.0", "war 0.0 1.0"],
     "line 2 of .* has 2 values but the first vector has 3"),
    (["tax 1.0 0.0", "war 0.0 abc"], "line 2 of .* has a value that is not a number"),
    (["tax 1.0 0.0", "war"], "line 2 of .* has a word but no values"),
])
def test_bad_vectors_files(tmp_path, lines, msg):
    p = glove_file(tmp_path, lines)
    with pytest.raises(InputError, match=msg):
        WordVectors(str(p)).transform(["tax war"])
    with pytest.raises(InputError, match="not found"):
        WordVectors(str(tmp_path / "nope.txt"))


def test_model_input_embeddings_average_word_pieces():
    from quantformer.train.baselines import _input_embeddings
    from quantformer.models.hub import load_tokenizer

    X = ModelEmbeddings().transform(["taxes", "", "war and peace"])
    emb = _input_embeddings(None)
    assert X.shape == (3, 384) and emb.shape[1] == 384
    ids = load_tokenizer(None)("war and peace", add_special_tokens=False)["input_ids"]
    np.testing.assert_allclose(X[2], emb[ids].mean(axis=0), rtol=1e-5)
    assert not X[1].any()


def test_unknown_baseline_and_empty_vocabulary():
    with pytest.raises(InputError) as e:
        fit_baseline(two_class(), "svm-tfidf")
    assert all(n in str(e.value) for n in BASELINES)
    with pytest.raises(InputError, match="empty after the document-frequency filters"):
        fit_baseline(two_class(), "svm-bow", folds=2, min_df=50)
    unique = pd.DataFrame({"doc_id": list("abcdef"), "text": ["w1", "w2", "w3", "w4", "w5", "w6"],
                           "label": ["x", "y"] * 3})
    with pytest.raises(InputError, match="lower min_df or raise max_df"):
        fit_baseline(unique, "xgb-bow", folds=2, min_df=2, remove_numbers=False)


def test_unusable_rows_masks_and_errors():
    f = two_class(3)
    f["text"] = f["text"].astype(object)
    f.loc[0, "label"], f.loc[1, "text"], f.loc[2, "text"] = None, None, ""
    f.loc[0, "text"] = ""
    no_label, no_text = unusable_rows(f, "test data")
    assert no_label.tolist() == [True] + [False] * 5
    assert no_text.tolist() == [True, True, True, False, False, False]
    with pytest.raises(InputError, match="the test data has no label column; name it with "
                                         "label_col"):
        unusable_rows(f.drop(columns="label"), "test data")
    with pytest.raises(InputError, match="has no document with both a text and a label"):
        unusable_rows(f.assign(text=""), "test data")
    with pytest.warns(UserWarning, match="3 document\\(s\\) of the test data are not scored: "
                                         "1 without a label, 2 with a missing or empty text"):
        assert len(training_rows(f, "test data", "are not scored")) == 3
