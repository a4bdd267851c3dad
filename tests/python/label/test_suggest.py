"""Active learning (issue 13): cold start, uncertainty strategies, diversity guard, the
embedding cache, the bad-input rules and the CLI verb."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.cli.main import main
from quantformer._core.errors import InputError
from quantformer.label.strategies import allocate, uncertainty
from quantformer.label.suggest import SuggestWarning, cache_path, read_cache, suggest


def blobs(n_per: int = 30, seed: int = 0):
    """Three well-separated clusters of unit vectors in 8 dimensions, one docvar ``party``."""
    rng = np.random.default_rng(seed)
    centres = np.eye(8)[:3] * 5
    vecs = np.concatenate([c + rng.normal(0, 0.3, (n_per, 8)) for c in centres])
    n = len(vecs)
    frame = pd.DataFrame({"doc_id": [f"d{i:03d}" for i in range(n)],
                          "text": [f"document {i}" for i in range(n)],
                          "label": [None] * n,
                          "party": np.where(np.arange(n) % 4 == 0, "small", "big")})
    return frame, vecs.astype(np.float32), np.repeat(["a", "b", "c"], n_per)


def test_uncertainty_scores_by_hand():
    p = np.array([[0.5, 0.3, 0.2], [0.9, 0.05, 0.05]])
    np.testing.assert_allclose(uncertainty(p, "margin"), [0.8, 0.15])
    np.testing.assert_allclose(uncertainty(p, "least_confidence"), [0.5, 0.1])
    ent = -(p * np.log(p)).sum(axis=1)
    np.testing.assert_allclose(uncertainty(p, "entropy"), ent)


def test_corpus_without_any_text_is_refused():
    frame, vecs, _ = blobs()
    frame = frame.assign(text=None)
    with pytest.raises(InputError, match="every document of the corpus has a missing or empty"):
        suggest(frame, vecs, n=3)


def test_cold_start_covers_every_cluster_and_is_seeded():
    frame, vecs, _ = blobs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing coded yet: the cold start needs no warning
        out = suggest(frame, vecs, n=3, strategy="margin")
    clusters = {int(d[1:]) // 30 for d in out["doc_id"]}
    assert clusters == {0, 1, 2}  # one document from each cluster
    assert (out["strategy"] == "cold").all() and out["guess"].isna().all()
    assert out["code"].isna().all() and list(out["rank"]) == [1, 2, 3]
    again = suggest(frame, vecs, n=3, strategy="margin")
    assert list(again["doc_id"]) == list(out["doc_id"])


def test_cold_start_stratified_by_docvar():
    frame, vecs, _ = blobs()
    out = suggest(frame, vecs, n=8, strategy="cold", stratify="party")
    # party 'small' is a quarter of the corpus: 2 of 8
    assert out["party"].value_counts().to_dict() == {"big": 6, "small": 2}
    frame.loc[:9, "party"] = None  # a missing docvar value is a level of its own
    out = suggest(frame, vecs, n=12, strategy="cold", stratify="party")
    assert out["party"].isna().sum() == 1 and len(out) == 12
    assert allocate(pd.Series({"x": 90, "y": 9, "z": 1}), 5).to_dict() == {"x": 3, "y": 1,
                                                                           "z": 1}


def test_margin_picks_boundary_documents_and_never_coded_or_missing_ones():
    frame, vecs, truth = blobs()
    # a boundary document between clusters a and b, and a missing text
    frame.loc[5, "text"] = None
    vecs[5] = np.nan
    vecs[40] = (vecs[0] + vecs[31]) / 2
    coded = pd.DataFrame({"doc_id": frame["doc_id"].iloc[[0, 1, 30, 31, 60, 61]],
                          "label": truth[[0, 1, 30, 31, 60, 61]]})
    with pytest.warns(SuggestWarning, match="1 uncoded document.s. have a missing or empty"):
        out = suggest(frame, vecs, coded=coded, n=5, strategy="margin", diversity=False)
    assert out["doc_id"].iloc[0] == "d040"
    assert not set(out["doc_id"]) & set(coded["doc_id"]) and "d005" not in set(out["doc_id"])
    assert (out["strategy"] == "margin").all() and out["score"].is_monotonic_decreasing
    # the guess is the most probable of 3 classes: its probability is at least 1/3, and the
    # boundary document (picked first) is the least sure of the ones suggested
    assert set(out["guess"].dropna()) <= {"a", "b", "c"}
    assert (out["guess_prob"] >= 1 / 3 - 1e-12).all() and (out["guess_prob"] <= 1).all()
    assert out["guess_prob"].iloc[0] == out["guess_prob"].min()


def test_diversity_guard_avoids_near_duplicates():
    frame, vecs, truth = blobs()
    rng = np.random.default_rng(3)
    mid = (vecs[0] + vecs[31]) / 2
    for i in range(40, 50):  # ten near-duplicates on the a/b boundary
        vecs[i] = mid + rng.normal(0, 0.01, 8)
    coded = pd.DataFrame({"doc_id": ["d000", "d030", "d060"], "label": ["a", "b", "c"]})
    plain = suggest(frame, vecs, coded=coded, n=5, diversity=False)
    guarded = suggest(frame, vecs, coded=coded, n=5)
    dupes = {f"d{i:03d}" for i in range(40, 50)}
    assert len(set(plain["doc_id"]) & dupes) == 5
    assert len(set(guarded["doc_id"]) & dupes) <= 2


def test_random_is_seeded_and_n_above_pool_returns_all():
    frame, vecs, _ = blobs(n_per=4)
    a = suggest(frame, vecs, n=5, strategy="random", seed=7)
    b = suggest(frame, vecs, n=5, strategy="random", seed=7)
    c = suggest(frame, vecs, n=5, strategy="random", seed=8)
    assert list(a["doc_id"]) == list(b["doc_id"]) != list(c["doc_id"])
    with pytest.warns(SuggestWarning, match="only 12 are uncoded"):
        out = suggest(frame, vecs, n=50, strategy="random")
    assert sorted(out["doc_id"]) == sorted(frame["doc_id"])


def test_probabilities_from_a_model_replace_the_light_classifier():
    frame, vecs, _ = blobs(n_per=4)
    probs = np.tile([0.9, 0.1], (12, 1))
    probs[7] = [0.55, 0.45]
    out = suggest(frame, vecs, n=1, probs=probs, prob_labels=["x", "y"])
    assert list(out["doc_id"]) == ["d007"] and out["guess"].iloc[0] == "x"


def test_random_share_mixes_seeded_random_documents_into_an_uncertainty_batch():
    frame, vecs, truth = blobs()
    coded = pd.DataFrame({"doc_id": ["d000", "d030", "d060"], "label": ["a", "b", "c"]})
    pure = suggest(frame, vecs, coded=coded, n=10, diversity=False)
    mixed = suggest(frame, vecs, coded=coded, n=10, diversity=False, random_share=0.3, seed=4)
    # the 7 most uncertain documents stay, 3 others are drawn at random from the rest
    assert list(mixed["doc_id"].iloc[:7]) == list(pure["doc_id"].iloc[:7])
    assert list(mixed["strategy"]) == ["margin"] * 7 + ["random"] * 3
    drawn = set(mixed["doc_id"].iloc[7:])
    assert len(drawn) == 3 and not drawn & (set(mixed["doc_id"].iloc[:7]) | set(coded["doc_id"]))
    again = suggest(frame, vecs, coded=coded, n=10, diversity=False, random_share=0.3, seed=4)
    assert list(again["doc_id"]) == list(mixed["doc_id"])
    other = suggest(frame, vecs, coded=coded, n=10, diversity=False, random_share=0.3, seed=5)
    assert set(other["doc_id"].iloc[7:]) != drawn
    # all random: 10 distinct uncoded documents; a cold start or random round is unchanged
    allr = suggest(frame, vecs, coded=coded, n=10, random_share=1.0)
    assert (allr["strategy"] == "random").all() and allr["doc_id"].nunique() == 10
    with pytest.warns(SuggestWarning, match="random_share applies to uncertainty rounds only"):
        cold = suggest(frame, vecs, n=3, random_share=0.5)
    assert (cold["strategy"] == "cold").all()


def test_a_fully_coded_corpus_is_refused():
    frame, vecs, truth = blobs()
    coded = pd.DataFrame({"doc_id": frame["doc_id"], "label": truth})
    with pytest.raises(InputError, match="already coded, so there is nothing to suggest"):
        suggest(frame, vecs, coded=coded, n=5)


@pytest.mark.parametrize("kwargs, message", [
    ({"strategy": "uncertain"}, "unknown strategy"),
    ({"random_share": 1.5}, "random_share must be a share between 0 and 1"),
    ({"n": 0}, "at least 1"),
    ({"stratify": "region"}, "stratify docvar 'region'"),
    ({"coded": pd.DataFrame({"doc_id": ["zzz"], "label": ["a"]})}, "not in the corpus"),
])
def test_bad_arguments(kwargs, message):
    frame, vecs, _ = blobs(n_per=4)
    with pytest.raises(InputError, match=message):
        suggest(frame, vecs, **kwargs)


def test_empty_corpus():
    with pytest.raises(InputError, match="no documents"):
        suggest(pd.DataFrame({"doc_id": [], "text": []}), np.zeros((0, 8)))


# ------------------------------------------------------------------------------------------
# cache and CLI (tiny BERT embeddings: fast)


CODED_ROWS = [0, 1, 2, 10, 11, 12]


@pytest.fixture()
def corpus_file(tmp_path):
    f = toy_frame(40)
    f.loc[~f.index.isin(CODED_ROWS), "label"] = None  # 3 econ, 3 other coded
    f.loc[20, "text"] = None  # never suggested
    path = tmp_path / "corpus.csv"
    f.to_csv(path, index=False)
    return path


def run(args) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return main(["suggest", *map(str, args)])


def test_cli_rounds_with_cache(corpus_file, tiny_bert_dir, tmp_path, monkeypatch):
    common = ["--input", corpus_file, "--embed-model", tiny_bert_dir, "--n", 4, "--quiet"]
    assert run([*common, "--out", tmp_path / "r1.csv"]) == 0
    caches = list(tmp_path.glob(".corpus.csv.quantformer-embeddings-*.npz"))
    assert len(caches) == 1
    r1 = pd.read_csv(tmp_path / "r1.csv", dtype={"code": object})
    assert list(r1.columns) == ["doc_id", "text", "year", "rank", "score", "strategy", "guess",
                                "guess_prob", "code"]
    assert (r1["strategy"] == "margin").all() and r1["code"].isna().all()
    assert not set(r1["doc_id"]) & ({f"d{i:03d}" for i in CODED_ROWS} | {"d020"})
    # round 2: code the spreadsheet and pass it back; the cache is reused as it is, and the
    # encoder's weights are not even loaded
    stamp = caches[0].stat().st_mtime_ns

    def no_load(*args, **kwargs):
        raise AssertionError("the encoder was loaded although the cache holds the vectors")

    monkeypatch.setattr("quantformer.label.suggest.load_encoder", no_load)
    r1["code"] = ["econ", "other", "econ", "other"]
    r1.to_csv(tmp_path / "coded1.csv", index=False)
    assert run([*common, "--labelled", tmp_path / "coded1.csv", "--out", tmp_path / "r2.csv"]) == 0
    assert caches[0].stat().st_mtime_ns == stamp
    r2 = pd.read_csv(tmp_path / "r2.csv")
    assert not set(r2["doc_id"]) & set(r1["doc_id"])
    # same seed, same suggestions
    assert run([*common, "--out", tmp_path / "again.csv"]) == 0
    assert list(pd.read_csv(tmp_path / "again.csv")["doc_id"]) == list(r1["doc_id"])


def test_damaged_cache_is_recomputed(corpus_file, tiny_bert_dir, tmp_path):
    args = ["--input", corpus_file, "--embed-model", tiny_bert_dir, "--n", 3, "--quiet",
            "--out", tmp_path / "a.csv"]
    assert run(args) == 0
    (cache,) = tmp_path.glob(".corpus.csv.quantformer-embeddings-*.npz")
    good = read_cache(cache, pd.read_csv(corpus_file)["doc_id"])
    cache.write_bytes(b"not a zip file")
    with pytest.warns(SuggestWarning, match="damaged or stale"):
        assert read_cache(cache, pd.read_csv(corpus_file)["doc_id"]) is None
    assert run(args) == 0
    np.testing.assert_array_equal(read_cache(cache, pd.read_csv(corpus_file)["doc_id"]), good)
    # another file content gives another cache key
    f = pd.read_csv(corpus_file)
    f.loc[0, "text"] = "changed"
    f.to_csv(corpus_file, index=False)
    assert cache_path(corpus_file, str(tiny_bert_dir), 512, "head_tail") != cache


def test_cli_bad_input_exit_2_and_nothing_written(corpus_file, tiny_bert_dir, tmp_path, capsys):
    pd.DataFrame({"doc_id": ["nope"], "label": ["econ"]}).to_csv(tmp_path / "c.csv", index=False)
    out = tmp_path / "x.csv"
    base = ["--input", corpus_file, "--embed-model", tiny_bert_dir, "--quiet", "--out", out]
    assert run([*base, "--labelled", tmp_path / "c.csv"]) == 2
    assert "not in the corpus" in capsys.readouterr().err
    assert run([*base, "--stratify", "region"]) == 2
    assert "stratify docvar 'region'" in capsys.readouterr().err
    assert run([*base, "--n", "0"]) == 2
    assert run([*base, "--random-share", "2"]) == 2
    assert "--random-share must be a share between 0 and 1" in capsys.readouterr().err
    assert not out.exists()


def test_cli_with_a_finetuned_model(corpus_file, tiny_bert_dir, tmp_path):
    from quantformer.train.finetune import finetune

    clf = finetune(toy_frame(16), model=str(tiny_bert_dir), epochs=1, max_length=32,
                   quiet=True, device="cpu")
    clf.save(tmp_path / "m")
    args = ["--input", corpus_file, "--embed-model", tiny_bert_dir, "--model", tmp_path / "m",
            "--n", 4, "--quiet", "--out", tmp_path / "s.csv"]
    assert run(args) == 0
    out = pd.read_csv(tmp_path / "s.csv")
    assert len(out) == 4 and set(out["guess"]) <= {"econ", "other"}
    # the fine-tuned model's probabilities of the suggested documents, derived here: the guess
    # is its top class, guess_prob its probability, the margin score 1 - (p1 - p2)
    texts = toy_frame(40).set_index("doc_id").loc[out["doc_id"], "text"]
    probs = clf.predict(texts.tolist(), warn=False)[["prob_econ", "prob_other"]].to_numpy()
    top = np.sort(probs, axis=1)[:, ::-1]
    assert out["guess"].tolist() == [("econ", "other")[i] for i in probs.argmax(axis=1)]
    np.testing.assert_allclose(out["guess_prob"], top[:, 0], atol=1e-5)
    np.testing.assert_allclose(out["score"], 1 - (top[:, 0] - top[:, 1]), atol=1e-5)
