"""explain of documents read in windows (``truncation="chunks"``, issue 34): every word of a
long document gets an attribution, a word read by two windows gets the mean of the windows'
values (checked against direct Captum calls on each window), and completeness holds per
document against the aggregate of the window logits."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from toydata import toy_frame

from quantformer._core.errors import InputError
from quantformer.infer.chunked import ChunkingWarning, with_chunking
from quantformer.audit.explain import check_model, explain, words_of
from quantformer.audit.integrate import DIFF_FLOOR
from quantformer.models.tokenize import ChunkWarning, window_starts
from quantformer.train.finetune import finetune

STRIDE = 4
MAX_LENGTH = 24


def _long(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    out["text"] = [" ".join([t] * 6) for t in out["text"]]  # 9-10 windows at 24 tokens
    return out


@pytest.fixture(scope="module")
def chunked(tiny_bert_dir, tmp_path_factory):
    """A tiny BERT fine-tuned in windows (mean), its head scaled so that its logits move by
    several units between a document and its baseline (a one-epoch tiny model barely does),
    saved."""
    clf = finetune(_long(toy_frame(16)), model=str(tiny_bert_dir), epochs=1, quiet=True,
                   device="cpu", max_length=MAX_LENGTH, truncation="chunks", stride=STRIDE,
                   precision="fp32")
    with torch.no_grad():
        clf.model.classifier.weight.mul_(1e5)
    path = clf.save(tmp_path_factory.mktemp("explain-chunks") / "m")
    return clf, path


def _direct_windows(clf, text: str, target: int, steps: int):
    """Per word the mean of its attributions over the windows that read it, each window
    explained by a direct Captum call on its own (unpadded) input, with the window's logits of
    input and baseline and its attribution sum."""
    from captum.attr import LayerIntegratedGradients

    tok = clf.tokenizer
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offs = enc["input_ids"], enc["offset_mapping"]
    budget = clf.max_length - 2  # [CLS] ... [SEP]
    words = words_of(text)
    sums, counts = np.zeros(len(words)), np.zeros(len(words))

    def fwd(i, m):
        return clf.model(input_ids=i, attention_mask=m).logits

    lig = LayerIntegratedGradients(fwd, clf.model.get_input_embeddings())
    per_window = []
    for s in window_starts(len(ids), budget, clf.stride):
        x = torch.tensor([[tok.cls_token_id] + ids[s:s + budget] + [tok.sep_token_id]])
        base = x.clone()
        base[0, 1:-1] = tok.pad_token_id
        mask = torch.ones_like(x)
        attr = lig.attribute(x, baselines=base, target=target, additional_forward_args=(mask,),
                             n_steps=steps).sum(-1)[0].detach().numpy()
        with torch.no_grad():
            f_in, f_base = fwd(x, mask)[0, target].item(), fwd(base, mask)[0, target].item()
        per_window.append((f_in, f_base, float(attr.sum())))
        here, seen = np.zeros(len(words)), np.zeros(len(words), dtype=bool)
        for a, (cs, ce) in zip(attr[1:-1], offs[s:s + budget]):
            k = int(np.argmax([min(ce, we) - max(cs, ws) for _, ws, we in words]))
            here[k] += a
            seen[k] = True
        sums += here
        counts += seen
    return sums / counts, counts, np.array(per_window)


def test_every_word_of_a_long_document_is_the_mean_over_its_windows(chunked):
    clf, _ = chunked
    frame = _long(toy_frame(3))
    res = explain(clf, frame, steps=16)
    assert res.documents["n_windows"].min() > 1
    assert not res.words["attribution"].isna().any()
    assert res.documents["n_unseen"].eq(0).all()
    for doc_id, text in zip(frame["doc_id"], frame["text"]):
        w = res.words[res.words["doc_id"] == doc_id]
        assert [text[s:e] for s, e in zip(w["start"], w["end"])] == w["word"].tolist()
        target = clf.labels.index(w["target"].iloc[0])
        direct, counts, _ = _direct_windows(clf, text, target, 16)
        np.testing.assert_array_equal(w["word_windows"].to_numpy(), counts)
        assert (counts == 2).any() and (counts == 1).any()  # overlaps and single reads
        # float32 rounding of a padded batch against one unpadded window: relative to the
        # document's largest attribution
        np.testing.assert_allclose(w["attribution"].to_numpy(), direct, rtol=1e-4,
                                   atol=1e-6 + 1e-4 * np.abs(direct).max())
        assert (w["n_windows"] == len(_direct_windows(clf, text, target, 1)[2])).all()


def test_mean_completeness_is_the_documents_against_the_aggregate(chunked):
    clf, _ = chunked
    frame = _long(toy_frame(4))
    res = explain(clf, frame, steps=64)
    d = res.documents
    diff = (d["logit"] - d["baseline_logit"]).to_numpy()
    # real logit differences (above the floor the gap is relative to)
    assert np.abs(diff).max() > 0.5
    # completeness against the aggregate: the mean of the windows' attribution sums is the
    # difference of the mean window logits of input and baseline
    assert d["completeness_gap"].max() < 0.02
    assert (np.abs(d["attribution_sum"] - diff)
            <= 0.02 * np.maximum(np.abs(diff), DIFF_FLOOR)).all()
    # the logits and probabilities are the aggregate's, as predict computes them
    probs = clf.predict_proba(frame)
    np.testing.assert_allclose(d[[f"prob_{c}" for c in clf.labels]].to_numpy(), probs,
                               atol=1e-5)
    for j, (text, target) in enumerate(zip(frame["text"], d["target"])):
        _, _, win = _direct_windows(clf, text, clf.labels.index(target), 64)
        np.testing.assert_allclose(d.loc[j, ["logit", "baseline_logit"]].to_numpy(float),
                                   win[:, :2].mean(axis=0), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(d["attribution_sum"].iloc[j], win[:, 2].mean(), rtol=1e-3,
                                   atol=1e-3)
    # adaptive steps meet the 5 % tolerance per document
    adaptive = explain(clf, frame)
    assert adaptive.documents["completeness_gap"].max() <= 0.05


def test_max_completeness_is_the_largest_windows(chunked):
    clf, _ = chunked
    frame = _long(toy_frame(3))
    res = explain(clf, frame, steps=32, chunking={"aggregate": "max"})
    d = res.documents
    assert not res.words["attribution"].isna().any()
    for j, (text, target) in enumerate(zip(frame["text"], d["target"])):
        _, _, win = _direct_windows(clf, text, clf.labels.index(target), 32)
        top = int(np.argmax(win[:, 0]))
        np.testing.assert_allclose(d["logit"].iloc[j], win[top, 0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(d["baseline_logit"].iloc[j], win[top, 1], rtol=1e-4,
                                   atol=1e-4)
        np.testing.assert_allclose(d["attribution_sum"].iloc[j], win[top, 2], rtol=1e-3,
                                   atol=1e-3)
    probs = with_chunking(clf, aggregate="max").predict_proba(frame)
    np.testing.assert_allclose(d[[f"prob_{c}" for c in clf.labels]].to_numpy(), probs,
                               atol=1e-5)


def test_windows_dropped_by_max_chunks_leave_their_words_unseen(chunked):
    clf, _ = chunked
    frame = _long(toy_frame(2))
    with pytest.warns(ChunkWarning):
        res = explain(clf, frame, steps=4, chunking={"max_chunks": 2})
    d = res.documents
    assert (d["n_windows"] == 2).all() and d["truncated"].all()
    for doc_id, g in res.words.groupby("doc_id"):
        seen = g["word_windows"] > 0
        assert seen.iloc[0] and not seen.iloc[-1]
        assert g["attribution"].isna().to_numpy().tolist() == (~seen).tolist()


def test_a_head_tail_model_explained_in_windows_warns_naming_both(toy_model_dir):
    frame = _long(toy_frame(2))
    frame["text"] = [" ".join([t] * 3) for t in frame["text"]]  # beyond 64 tokens
    with pytest.warns(ChunkingWarning, match="head_tail and predicts with chunks"):
        res = explain(str(toy_model_dir), frame, steps=4, device="cpu",
                      chunking={"truncation": "chunks"})
    assert (res.documents["n_windows"] > 1).all()
    assert not res.words["attribution"].isna().any()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cut = explain(str(toy_model_dir), frame, steps=4, device="cpu")
    assert cut.words["attribution"].isna().any()  # head+tail: words in the middle unseen


@pytest.mark.parametrize("chunking, msg", [
    ({"truncation": "chunks", "aggregate": "median"}, "unknown {aggregate} 'median'"),
    ({"truncation": "chunks", "stride": 62}, "{stride} 62 must be at least 0"),
    # explain takes no max_length: the window is the model's
    ({"truncation": "chunks", "stride": 62}, "62 content tokens at the model's window of 64 "
                                             "tokens)"),
    ({"truncation": "chunks", "max_chunks": 0}, "{max_chunks} must be at least 1"),
    ({"stride": 3}, "{stride} applies to {truncation} chunks only"),
    ({"truncation": "middle"}, "unknown {truncation} 'middle'"),
])
def test_bad_window_settings_are_refused_before_the_model_loads(toy_model_dir, chunking, msg):
    with pytest.raises(InputError) as err:
        check_model(str(toy_model_dir), chunking=chunking)
    assert msg in err.value.args[0]


def test_partitioned_explain_reads_windows_as_one_file_does(chunked, tmp_path):
    from quantformer.scale.explain import explain_partitions, read_explanation

    _, path = chunked
    frame = _long(toy_frame(4)).drop(columns=["label", "year"])
    (tmp_path / "parts").mkdir()
    frame.iloc[:2].to_csv(tmp_path / "parts" / "p-0.csv", index=False)
    frame.iloc[2:].to_csv(tmp_path / "parts" / "p-1.csv", index=False)
    chunking = {"truncation": None, "stride": 6, "max_chunks": None, "aggregate": "max"}
    explain_partitions(str(path), str(tmp_path / "parts"), str(tmp_path / "out"), steps=8,
                       device="cpu", quiet=True, chunking=chunking)
    got = read_explanation(tmp_path / "out")
    want = explain(str(path), frame, steps=8, device="cpu", chunking=chunking).words
    assert got["doc_id"].tolist() == want["doc_id"].tolist()
    assert got["word_windows"].tolist() == want["word_windows"].tolist()
    assert not got["attribution"].isna().any()
    np.testing.assert_allclose(got["attribution"], want["attribution"], rtol=1e-4, atol=1e-6)
    with pytest.raises(InputError, match="must be at least 0"):
        explain_partitions(str(path), str(tmp_path / "parts"), str(tmp_path / "out2"),
                           chunking={"stride": 40})
    assert not (tmp_path / "out2").exists()


def test_a_regression_model_in_windows_explains_its_mean_output(tiny_bert_dir):
    from toydata import regression_frame

    reg = finetune(_long(regression_frame(12)), model=str(tiny_bert_dir), epochs=1,
                   quiet=True, device="cpu", max_length=MAX_LENGTH, truncation="chunks",
                   stride=STRIDE, task="regression", precision="fp32")
    frame = _long(regression_frame(2))
    res = explain(reg, frame, steps=8)
    d = res.documents
    assert (d["target"] == "predicted").all() and (d["n_windows"] > 1).all()
    assert not res.words["attribution"].isna().any()
    # the prediction beside it is predict's, from the mean of the windows' outputs
    np.testing.assert_allclose(d["predicted"].astype(float), reg.predict(frame)["predicted"],
                               rtol=1e-5)


@pytest.mark.parametrize("method", ["nli", "setfit"])
def test_windows_of_nli_and_setfit_models_are_refused_naming_head_tail(method):
    from quantformer.audit.explain import check_chunking

    record = {"method": method, "hyperparameters": {"truncation": "chunks", "max_length": 64}}
    with pytest.raises(InputError) as err:
        check_chunking("m", record, None, None)
    assert f"not yet for method '{method}'" in str(err.value)
    assert err.value.render(lambda p: "--" + p).endswith("--truncation head_tail")
    check_chunking("m", record, None, {"truncation": "head_tail"})  # one window: explained
