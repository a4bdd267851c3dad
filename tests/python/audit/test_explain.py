"""quantformer explain: Integrated Gradients word attributions on tiny fine-tuned models."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from toydata import toy_frame

from quantformer._core.errors import InputError, ModelDirError
from quantformer.cli.main import main
from quantformer.audit import integrate as ig
from quantformer.audit.explain import explain, windows, words_of
from quantformer.score.attributions import aopc, by_term, spearman
from quantformer.train.finetune import finetune

HARD = ["Café naïve résumé 👍🏽 don't stop — the économie is 😀 great!!",
        "Crème bru\u0302lée, jalapen\u0303o & 👨‍👩‍👧 well-known taxes... ¿Qué?",
        "The deficit grew."]


def _tuned(base, tmp_path_factory, name, **kw):
    clf = finetune(toy_frame(24), model=str(base), epochs=1, quiet=True, device="cpu",
                   max_length=64, **kw)
    return clf, clf.save(tmp_path_factory.mktemp("explain") / name)


@pytest.fixture(scope="module")
def bert(tiny_bert_dir, tmp_path_factory):
    return _tuned(tiny_bert_dir, tmp_path_factory, "bert")


@pytest.fixture(scope="module")
def roberta(tiny_roberta_dir, tmp_path_factory):
    return _tuned(tiny_roberta_dir, tmp_path_factory, "roberta")


def _direct_word_attributions(clf, text, steps):
    """A direct Captum call on one unpadded document, summed into words by hand."""
    from captum.attr import LayerIntegratedGradients

    enc = clf.tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    ids = torch.tensor([enc["input_ids"]])
    special = np.array(enc["special_tokens_mask"], dtype=bool)
    base = ids.clone()
    base[0, ~special] = clf.tokenizer.pad_token_id
    mask = torch.ones_like(ids)

    def fwd(i, m):
        return clf.model(input_ids=i, attention_mask=m).logits

    with torch.no_grad():
        target = int(fwd(ids, mask).argmax())
    lig = LayerIntegratedGradients(fwd, clf.model.get_input_embeddings())
    attr = lig.attribute(ids, baselines=base, target=target, additional_forward_args=(mask,),
                         n_steps=steps).sum(-1)[0].detach().numpy()
    words = words_of(text)
    out = np.zeros(len(words))
    for a, (s, e), sp in zip(attr, enc["offset_mapping"], special):
        if sp:
            continue
        overlap = [min(e, we) - max(s, ws) for _, ws, we in words]
        out[int(np.argmax(overlap))] += a
    return out, clf.labels[target]


@pytest.mark.parametrize("which", ["bert", "roberta"])
def test_words_slice_the_text_exactly_and_match_a_direct_captum_call(which, request):
    clf, _ = request.getfixturevalue(which)
    res = explain(clf, HARD, steps=8)
    for i, text in enumerate(HARD):
        w = res.words[res.words["doc_id"] == f"text{i + 1}"]
        assert [text[s:e] for s, e in zip(w["start"], w["end"])] == w["word"].tolist()
        assert w["word"].tolist() == [x[0] for x in words_of(text)]
        direct, target = _direct_word_attributions(clf, text, 8)
        assert (w["target"] == target).all()
        np.testing.assert_allclose(w["attribution"].to_numpy(), direct, atol=1e-5)
    # subwords are summed into words, nothing lost
    sums = res.words.groupby("doc_id")["attribution"].sum().to_numpy()
    np.testing.assert_allclose(sums, res.documents["attribution_sum"].to_numpy(), atol=1e-6)


def test_words_keep_accents_emoji_and_contractions_whole():
    words = [w for w, _, _ in words_of(HARD[1])]
    assert words == ["Crème", "bru\u0302lée", ",", "jalapen\u0303o", "&", "👨‍👩‍👧",
                     "well-known", "taxes", "...", "¿", "Qué", "?"]


def test_completeness_holds_and_logits_are_the_models(bert):
    clf, _ = bert
    frame = toy_frame(6)
    res = explain(clf, frame, steps=64)
    d = res.documents
    diff = d["logit"] - d["baseline_logit"]
    np.testing.assert_allclose(d["attribution_sum"], diff, atol=1e-6 + 1e-3 * diff.abs().max())
    gap = (d["attribution_sum"] - diff).abs() / np.maximum(diff.abs(), ig.DIFF_FLOOR)
    np.testing.assert_allclose(d["completeness_gap"], gap, rtol=1e-9)
    # the probabilities beside the attributions are predict's
    probs = clf.predict_proba(frame)
    np.testing.assert_allclose(d[[f"prob_{c}" for c in clf.labels]].to_numpy(), probs,
                               atol=1e-5)
    assert d["target"].tolist() == [clf.labels[i] for i in probs.argmax(axis=1)]
    # issue 36, item 16: each word carries its document's steps, prediction and probability
    w = res.words
    by_doc = {i: k for k, i in enumerate(frame["doc_id"].astype(str))}
    k = w["doc_id"].map(by_doc).to_numpy()
    assert (w["steps"].to_numpy() == 64).all()
    assert w["predicted"].tolist() == [clf.labels[i] for i in probs[k].argmax(axis=1)]
    np.testing.assert_allclose(w["probability"], probs[k].max(axis=1), atol=1e-5)


def _engine_items(clf, n):
    wins, _ = windows(clf, toy_frame(n)["text"].tolist())
    eng = ig.Integrator(clf)
    targets = eng.all_logits(wins, np.arange(n)).argmax(axis=1)
    return eng, wins, targets


def test_nested_trapezoid_reuses_points_and_equals_the_direct_rule(bert):
    clf, _ = bert
    eng, wins, targets = _engine_items(clf, 3)
    t5, f_in, f_base = ig.trapezoid_rule(eng, wins, targets, 5)
    # the logits read from Captum's own forward passes are the model's
    ids, base, mask, types = eng.tensors(wins)
    rows = np.arange(len(wins))
    np.testing.assert_allclose(f_in, eng.logits(ids, mask, types)[rows, targets], atol=1e-6)
    np.testing.assert_allclose(f_base, eng.logits(base, mask, types)[rows, targets], atol=1e-6)
    t9 = ig.refine_trapezoid(eng, wins, targets, t5, 5)  # 4 new midpoints only
    direct9, _, _ = ig.trapezoid_rule(eng, wins, targets, 9)
    np.testing.assert_allclose(t9, direct9, atol=1e-6)
    t17 = ig.refine_trapezoid(eng, wins, targets, t9, 9)
    direct17, _, _ = ig.trapezoid_rule(eng, wins, targets, 17)
    np.testing.assert_allclose(t17, direct17, atol=1e-6)
    # the rescaled weights add up to 1: on many points the rule is complete
    t65, _, _ = ig.trapezoid_rule(eng, wins, targets, 65)
    assert ig.completeness_gap(t65.sum(axis=1), f_in, f_base).max() < 1e-3
    assert ig.ADAPTIVE_STEPS == ig.nested_schedule(ig.ADAPTIVE_STEPS[0],
                                                           len(ig.ADAPTIVE_STEPS))


def test_adaptive_default_reaches_the_gap_tolerance(bert, monkeypatch):
    clf, _ = bert
    import warnings

    frame = toy_frame(6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ig.CompletenessWarning)
        res = explain(clf, frame)
    d = res.documents
    assert (d["completeness_gap"] <= ig.GAP_TOLERANCE).all()
    assert d["steps"].isin(ig.ADAPTIVE_STEPS).all()
    diff = d["logit"] - d["baseline_logit"]
    gap = (d["attribution_sum"] - diff).abs() / np.maximum(diff.abs(), ig.DIFF_FLOOR)
    np.testing.assert_allclose(d["completeness_gap"], gap, rtol=1e-9)
    # the tiny model's path is nearly straight: all meet 5 % at the first level; a tolerance
    # that half of them miss there sends those through the refinements, and they meet it
    tol = float(np.median(d["completeness_gap"]))
    monkeypatch.setattr(ig, "GAP_TOLERANCE", tol)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ig.CompletenessWarning)
        again = explain(clf, frame).documents
    refined = again["steps"] > ig.ADAPTIVE_STEPS[0]
    assert refined.sum() == (d["completeness_gap"] > tol).sum() > 0
    assert (again["completeness_gap"] <= tol).all()


def test_adaptive_steps_integrate_again_only_above_the_tolerance(bert, monkeypatch):
    clf, _ = bert
    frame = toy_frame(4)
    monkeypatch.setattr(ig, "GAP_TOLERANCE", np.inf)  # every gap is small enough
    first = explain(clf, frame)
    assert (first.documents["steps"] == ig.ADAPTIVE_STEPS[0]).all()
    monkeypatch.setattr(ig, "GAP_TOLERANCE", -1.0)  # every gap is too large
    with pytest.warns(ig.CompletenessWarning, match="raise steps"):
        res = explain(clf, frame)
    assert (res.documents["steps"] == ig.ADAPTIVE_STEPS[-1]).all()
    np.testing.assert_allclose(res.documents["logit"], first.documents["logit"], rtol=1e-9)
    # the last level, built level by level from the first, is the trapezoid rule on its points
    eng, wins, targets = _engine_items(clf, 4)
    out = ig.integrate(eng, wins, np.arange(4), targets, batch_size=3)
    direct, _, _ = ig.trapezoid_rule(eng, wins, targets, ig.ADAPTIVE_STEPS[-1])
    for i in range(4):
        np.testing.assert_allclose(out["attr"][i], direct[i, :len(wins[i].input_ids)],
                                   atol=1e-6)


def test_long_document_is_explained_in_predicts_window(bert):
    clf, _ = bert
    text = " ".join(f"word{i % 7} tax" for i in range(80)) + " final."
    with pytest.warns(UserWarning, match="1 of 2 document"):
        res = explain(clf, [text, "short text"], steps=4)
    w = res.words[res.words["doc_id"] == "text1"]
    d = res.documents.iloc[0]
    assert bool(d["truncated"]) and d["n_unseen"] == w["attribution"].isna().sum() > 0
    seen = w["attribution"].notna().to_numpy()
    # head+tail: seen at both ends, not seen in the middle, in one run
    assert seen[0] and seen[-1] and not seen[len(seen) // 2]
    assert np.count_nonzero(np.diff(seen.astype(int))) == 2
    np.testing.assert_allclose(d[[f"prob_{c}" for c in clf.labels]].to_numpy(dtype=float),
                               clf.predict_proba([text])[0], atol=1e-5)
    assert res.words[res.words["doc_id"] == "text2"]["attribution"].notna().all()


def test_target_multilabel_and_regression(bert, tiny_bert_dir):
    clf, _ = bert
    res = explain(clf, toy_frame(3), target="econ", steps=2)
    assert (res.words["target"] == "econ").all()
    f = toy_frame(24)
    f["label"] = np.where(f["label"] == "econ", "econ|tax", "other")
    ml = finetune(f, model=str(tiny_bert_dir), epochs=1, quiet=True, device="cpu",
                  max_length=64, task="multilabel", label_sep="|")
    res = explain(ml, ["taxes and jobs"], steps=2)
    assert sorted(res.documents["target"]) == sorted(ml.labels)
    p_ml = dict(zip(ml.labels, ml.predict_proba(["taxes and jobs"])[0]))
    for t, p in zip(res.words["target"], res.words["probability"]):  # the target's probability
        assert p == pytest.approx(p_ml[t], abs=1e-5)
    f["label"] = f["year"] - 2000.0
    reg = finetune(f, model=str(tiny_bert_dir), epochs=1, quiet=True, device="cpu",
                   max_length=64, task="regression")
    res = explain(reg, ["taxes and jobs"], steps=2)
    assert res.documents["target"].tolist() == ["predicted"]
    assert res.words["predicted"].to_numpy() == pytest.approx(
        reg.predict_proba(["taxes and jobs"])[0, 0], abs=1e-4)
    assert res.words["probability"].isna().all()
    with pytest.raises(InputError, match="not a class"):
        explain(reg, ["x"], target="econ")


def test_bad_input_is_refused(bert):
    clf, path = bert
    with pytest.raises(InputError, match="at least 1"):
        explain(clf, ["a text"], steps=0)
    with pytest.raises(InputError, match="'nope' is not a class"):
        explain(path, ["a text"], target="nope")
    with pytest.raises(InputError, match="all 2 texts are missing"):
        explain(clf, [None, "  "])
    with pytest.raises(InputError, match="no documents"):
        explain(clf, pd.DataFrame({"doc_id": [], "text": []}))
    with pytest.raises(ModelDirError):
        explain(path.parent, ["a text"])


def _aopc_of_top_words(clf, frame, words, k=5):
    """AOPC (Samek et al. 2017) of deleting each document's 1..k most attributed words, by
    hand: the mean over documents of sum_{j=0..k} (p_0 - p_j) / (k + 1)."""
    texts = dict(zip(frame["doc_id"].astype(str), frame["text"]))
    areas = []
    for (doc_id, target), w in words.groupby(["doc_id", "target"], sort=False):
        w = w[w["attribution"].notna()]
        if len(w) < k:
            continue
        top = w.sort_values("attribution", ascending=False, kind="stable").head(k)
        variants = [texts[doc_id]]
        for j in range(1, k + 1):
            text, cut = texts[doc_id], sorted(zip(top["start"][:j], top["end"][:j]))
            for start, end in reversed(cut):
                text = text[:start] + text[end:]
            variants.append(text)
        p = clf.predict_proba(variants)[:, clf.labels.index(target)]
        areas.append(sum(p[0] - p) / (k + 1))
    return float(np.mean(areas)), len(areas)


def test_cli_writes_words_page_terms_and_checks(bert, tmp_path):
    clf, path = bert
    frame = toy_frame(12)
    frame.loc[3, "text"] = None
    frame.to_csv(tmp_path / "c.csv", index=False)
    out = tmp_path / "w.parquet"
    code = main(["explain", "--model", str(path), "--input", str(tmp_path / "c.csv"),
                 "--out", str(out), "--html", str(tmp_path / "p.html"), "--by-term",
                 str(tmp_path / "t.csv"), "--top", "3", "--check", "--quiet"])
    assert code == 0
    words = pd.read_parquet(out)
    assert list(words.columns[:8]) == ["doc_id", "word_id", "word", "start", "end",
                                       "attribution", "target", "completeness_gap"]
    assert words["doc_id"].nunique() == 11  # the missing text has no words
    page = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert page.count('class="doc"') == 11 and "<script" not in page
    terms = pd.read_csv(tmp_path / "t.csv")
    first = terms.iloc[0]
    mine = words[words["target"] == first["target"]].assign(t=lambda w: w["word"].str.lower())
    per_doc = mine[mine["t"] == first["term"]].groupby("doc_id")["attribution"].sum()
    assert first["n_docs"] == len(per_doc)
    assert first["mean_attribution"] == pytest.approx(per_doc.mean())
    assert first["lower"] <= first["mean_attribution"] <= first["upper"]
    check = json.loads((tmp_path / "w.check.json").read_text())
    area, n_docs = _aopc_of_top_words(clf, frame, words)
    assert check["aopc_top"] == pytest.approx(area, abs=1e-6)
    assert check["aopc_n_docs"] == n_docs == 11


@pytest.mark.parametrize("flags, message", [
    (["--steps", "0"], "--steps must be a whole number"),
    (["--target", "nope"], "--target 'nope' is not a class"),
    (["--backend", "onnx"], "torch only"),
])
def test_cli_bad_flags_exit_2_and_write_nothing(bert, tmp_path, capsys, flags, message):
    _, path = bert
    toy_frame(3).to_csv(tmp_path / "c.csv", index=False)
    out = tmp_path / "w.parquet"
    code = main(["explain", "--model", str(path), "--input", str(tmp_path / "c.csv"),
                 "--out", str(out), "--html", str(tmp_path / "p.html"), *flags])
    assert code == 2 and message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv"]


def test_cli_bad_corpus_or_model_exit_2(bert, tmp_path):
    _, path = bert
    (tmp_path / "empty.csv").write_text("doc_id,text\n")
    (tmp_path / "miss.csv").write_text("doc_id,text\na,\nb,\n")
    toy_frame(2).to_csv(tmp_path / "ok.csv", index=False)
    for model, corpus in [(path, "empty.csv"), (path, "miss.csv"), (tmp_path, "ok.csv")]:
        assert main(["explain", "--model", str(model), "--input", str(tmp_path / corpus),
                     "--out", str(tmp_path / "w.csv")]) == 2
    assert not (tmp_path / "w.csv").exists()


def test_aopc_by_term_and_spearman_on_known_values():
    assert aopc(np.array([1.0, 0.5]), np.array([[0.5, 0.0], [0.5, 0.5]])) == \
        pytest.approx(((0.5 + 1.0) / 3 + 0.0) / 2)
    assert spearman([1, 2, 3, 4], [10, 20, 40, 30]) == pytest.approx(0.8)
    words = pd.DataFrame({"doc_id": ["a", "a", "b", "c"], "word": ["Tax", "tax", "tax", "war"],
                          "attribution": [1.0, 2.0, 5.0, 9.0], "target": ["econ"] * 4})
    t = by_term(words, min_docs=2)
    assert t["term"].tolist() == ["tax"] and t["mean_attribution"].iloc[0] == 4.0
    assert t["n_docs"].iloc[0] == 2 and (t["lower"].iloc[0], t["upper"].iloc[0]) == (3.0, 5.0)


def test_cli_reads_the_model_record_once(bert, tmp_path, monkeypatch):
    """One explain reads its model's quantformer.json once (the check before any work), and
    the loader uses that record (issue 32: it was read four times)."""
    from pathlib import Path

    from quantformer.infer.cache import MODELS

    clf, path = bert
    toy_frame(4).to_csv(tmp_path / "c.csv", index=False)
    reads = []
    real = Path.read_text

    def counting(self, *args, **kwargs):
        if self.name == "quantformer.json":
            reads.append(str(self))
        return real(self, *args, **kwargs)

    MODELS.clear()  # a model loaded by an earlier test would hide the loader's read
    monkeypatch.setattr(Path, "read_text", counting)
    assert main(["explain", "--model", str(path), "--input", str(tmp_path / "c.csv"),
                 "--out", str(tmp_path / "w.parquet"), "--quiet"]) == 0
    assert reads == [str(Path(path) / "quantformer.json")]


def test_check_does_not_warn_about_its_own_emptied_copies(bert):
    """Issue 36, item 15: deleting all k words of a k-word document empties the copy; the
    check must not warn that documents have an empty text."""
    import warnings

    from quantformer.infer.classifier import PredictionWarning
    from quantformer.audit.explain_check import check

    clf, _ = bert
    frame = pd.DataFrame({"doc_id": ["a", "b"], "text": ["Taxes rise now", "War ends today"]})
    ex = explain(clf, frame, steps=8)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = check(clf, frame, ex, k=3, max_docs=2)
    assert not [w for w in seen if issubclass(w.category, PredictionWarning)]
    assert res["aopc_n_docs"] == 2


EMOJI = "\U0001F600 \U0001F389"


def _with_emoji(n_words: int = 2) -> pd.DataFrame:
    """Two word documents, then two emoji-only ones (all unknown tokens to BERT's vocabulary),
    one of them with a literal special token."""
    texts = ["Taxes rise now and then", "War ends today for all", "The budget grows again",
             "Peace talks start soon"][:n_words]
    return pd.DataFrame({"doc_id": [f"w{i}" for i in range(len(texts))] + ["e1", "e2"],
                         "text": texts + [EMOJI, f"{EMOJI} [SEP] \U0001F44D"]})


def test_explain_warns_once_about_documents_of_unknown_tokens_only(bert):
    """Issue 36, item 15: an emoji-only text (all unknown tokens) is explained with one
    warning that counts such documents, and flagged in the documents frame."""
    import warnings

    from quantformer.audit.explain import unknown_only

    clf, _ = bert
    frame = _with_emoji()
    ids = clf.tokenizer(EMOJI, add_special_tokens=False)["input_ids"]
    assert ids and set(ids) == {clf.tokenizer.unk_token_id}
    assert unknown_only(clf, dict(zip(frame["doc_id"], frame["text"]))) == ["e1", "e2"]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ex = explain(clf, frame, steps=8)
    mine = [str(w.message) for w in seen if "does not know" in str(w.message)]
    assert len(mine) == 1 and mine[0].startswith("2 of 4 document(s) consist only of tokens")
    assert "e.g. 'e1'" in mine[0]
    flags = ex.documents.set_index("doc_id")["unknown_only"]
    assert flags.to_dict() == {"w0": False, "w1": False, "e1": True, "e2": True}


def test_check_leaves_out_documents_of_unknown_tokens_only(bert):
    """Issue 36, item 15: the checks leave emoji-only documents out and count them, without
    a second warning; without them the randomisation Spearman is that of the word documents."""
    import warnings

    from quantformer.audit.explain_check import check

    clf, _ = bert
    frame = _with_emoji()
    with pytest.warns(UserWarning, match="does not know"):
        ex = explain(clf, frame, steps=8)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = check(clf, frame, ex, k=2, max_docs=10)
    assert not [w for w in seen if "does not know" in str(w.message)]
    assert res["n_unknown_only"] == 2
    assert res["randomisation_n_docs"] == 2 and res["aopc_n_docs"] == 2
    words_only = frame.iloc[:2]
    alone = check(clf, words_only, explain(clf, words_only, steps=8), k=2, max_docs=10)
    assert res["randomisation_spearman"] == pytest.approx(alone["randomisation_spearman"])
    assert res["aopc_top"] == pytest.approx(alone["aopc_top"])
    assert alone["n_unknown_only"] == 0
    # an Explanation without the flag (built elsewhere): found anew from the texts
    bare = type(ex)(words=ex.words, documents=ex.documents.drop(columns="unknown_only"))
    assert check(clf, frame, bare, k=2, max_docs=10)["n_unknown_only"] == 2


def test_check_of_documents_all_of_unknown_tokens(bert):
    clf, _ = bert
    from quantformer.audit.explain_check import check

    frame = _with_emoji(0)
    with pytest.warns(UserWarning, match="2 of 2 document"):
        ex = explain(clf, frame, steps=8)
    res = check(clf, frame, ex, k=2)
    assert res["n_unknown_only"] == 2 and res["aopc_n_docs"] == res["randomisation_n_docs"] == 0
    assert res["aopc_top"] is None and res["randomisation_spearman"] is None


@pytest.mark.parametrize("quiet", [False, True])
def test_cli_check_shows_progress_and_reports_the_documents_left_out(bert, tmp_path, capsys,
                                                                      quiet):
    """Issue 36, item 15: explain --check has a progress bar (not with --quiet) and says how
    many documents of unknown tokens only it left out."""
    _, path = bert
    _with_emoji().to_csv(tmp_path / "c.csv", index=False)
    code = main(["explain", "--model", str(path), "--input", str(tmp_path / "c.csv"),
                 "--out", str(tmp_path / "w.parquet"), "--steps", "8", "--check",
                 *(["--quiet"] if quiet else [])])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads((tmp_path / "w.check.json").read_text())["n_unknown_only"] == 2
    assert "(2 document(s) made only of tokens the model does not know left out)" in out
    assert err.count("warning: 2 of 4 document(s) consist only of tokens") == 1
    assert ("checking" in err) is not quiet and ("explaining" in err) is not quiet


def test_partitioned_explain_warns_once_about_unknown_tokens_only(bert, tmp_path):
    from quantformer.scale.explain import explain_partitions

    _, path = bert
    (tmp_path / "in").mkdir()
    frame = _with_emoji()
    frame.iloc[:3].to_parquet(tmp_path / "in" / "a.parquet")
    frame.iloc[3:].to_parquet(tmp_path / "in" / "b.parquet")
    with pytest.warns(UserWarning, match="2 of 4 document.*does not know") as seen:
        explain_partitions(str(path), str(tmp_path / "in"), str(tmp_path / "out"), steps=8,
                           device="cpu", quiet=True)
    assert len([w for w in seen if "does not know" in str(w.message)]) == 1
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert sorted(e["unknown_only"] for e in manifest["partitions"].values()) == [1, 1]
