"""quantformer annotate (issue 35): an LLM codes from the codebook, scored, cached, resumable."""

from __future__ import annotations

import json
import math
import os
import sys

import pandas as pd
import pytest
import tiny_models

from quantformer.cli.main import main
from quantformer.infer.annotate import build_messages
from quantformer.models.llm import LocalLM, normalise

CODEBOOK = [{"label": "pro", "description": "supports the policy", "examples": ["Yes, do it."]},
            {"label": "pro-life", "description": "against abortion"},
            {"label": "contra", "description": "opposes the policy"}]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return tiny_models.build_tiny_llama(tmp_path_factory.mktemp("models") / "llama")


@pytest.fixture()
def files(tmp_path):
    corpus = pd.DataFrame({"doc_id": [f"d{i}" for i in range(6)],
                           "text": tiny_models._SENTENCES[:6]})
    human = pd.DataFrame({"doc_id": [f"h{i}" for i in range(4)],
                          "text": tiny_models._SENTENCES[10:14],
                          "label": ["pro", "contra", "pro-life", "pro"]})
    corpus.to_csv(tmp_path / "corpus.csv", index=False)
    human.to_csv(tmp_path / "human.csv", index=False)
    (tmp_path / "codebook.json").write_text(json.dumps(CODEBOOK))
    return tmp_path


def _plain_logp(llm, ids, n_label):
    """Summed log-softmax of the last ``n_label`` tokens of ``ids`` in one plain forward pass."""
    import torch

    with torch.no_grad():
        logits = llm.model(torch.tensor([ids])).logits[0]
    logp = torch.log_softmax(logits.double(), dim=-1)
    return sum(float(logp[p - 1, ids[p]]) for p in range(len(ids) - n_label, len(ids)))


def test_label_scores_equal_a_plain_forward_pass_with_and_without_prefix_cache(llama_dir):
    llm = LocalLM(str(llama_dir))
    head, tail = llm.split_prompt(build_messages(CODEBOOK, [("A shot.", "contra")]))
    labels = [e["label"] for e in CODEBOOK]
    label_ids = llm.label_ids(labels)
    assert label_ids[0][:-1] == label_ids[1][:len(label_ids[0]) - 1]  # "pro" prefixes "pro-life"
    assert all(x[-1] == llm.tokenizer.eos_token_id for x in label_ids)
    for text in tiny_models._SENTENCES[:3]:
        prefix_ids, doc_ids = llm.sequences(head, text, tail)
        want = [_plain_logp(llm, prefix_ids + doc_ids + lab, len(lab)) for lab in label_ids]
        cached = llm.score(prefix_ids, doc_ids, label_ids, use_cache=True)
        plain = llm.score(prefix_ids, doc_ids, label_ids, use_cache=False)
        assert cached == pytest.approx(want, abs=1e-5)
        assert plain == pytest.approx(want, abs=1e-5)
        assert sum(normalise(cached)) == pytest.approx(1.0)


def test_annotate_writes_codes_record_and_reuses_the_cache(llama_dir, files, capsys):
    out = files / "codes.parquet"
    argv = ["annotate", "--input", str(files / "corpus.csv"), "--codebook",
            str(files / "codebook.json"), "--llm", str(llama_dir), "--out", str(out),
            "--shots", "2", "--shots-from", str(files / "human.csv")]
    assert main(argv) == 0
    codes = pd.read_parquet(out)
    record = json.loads((files / "codes.parquet.json").read_text())
    assert list(codes.columns) == ["doc_id", "label", "prob_pro", "prob_pro-life",
                                   "prob_contra", "unparsed", "coder", "status", "reason"]
    assert (codes["status"] == "coded").all() and codes["reason"].isna().all()
    assert codes["doc_id"].tolist() == [f"d{i}" for i in range(6)]
    probs = codes[["prob_pro", "prob_pro-life", "prob_contra"]].to_numpy()
    assert probs.sum(axis=1) == pytest.approx([1.0] * 6)
    assert codes["label"].tolist() == [["pro", "pro-life", "contra"][k]
                                       for k in probs.argmax(axis=1)]
    assert record["from_cache"] == 0 and record["shots"] == 2 and len(record["prompt"]) == 6
    assert record["precision"] == "fp32"  # the tiny Llama's weights, as saved
    # the record's prompt scored directly gives the same probabilities
    llm = LocalLM(str(llama_dir))
    head, tail = llm.split_prompt(record["prompt"])
    p, d = llm.sequences(head, tiny_models._SENTENCES[0], tail)
    direct = normalise(llm.score(p, d, llm.label_ids(record["labels"])))
    assert probs[0] == pytest.approx(direct, abs=1e-6)
    # a rerun reads every code from the cache and writes the same frame
    assert main(argv) == 0
    assert json.loads((files / "codes.parquet.json").read_text())["from_cache"] == 6
    pd.testing.assert_frame_equal(pd.read_parquet(out), codes)


def test_annotate_prints_no_transformers_deprecation(llama_dir, files):
    """A fresh process (transformers warns once per process): the key-value cache is passed
    and read under the name the installed transformers uses."""
    import subprocess

    out = files / "codes.parquet"
    run = subprocess.run(
        [sys.executable, "-m", "quantformer.cli.main", "annotate", "--input",
         str(files / "corpus.csv"), "--codebook", str(files / "codebook.json"), "--llm",
         str(llama_dir), "--out", str(out)],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "deprecated" not in run.stderr and "[transformers]" not in run.stderr
    assert len(pd.read_parquet(out)) == 6


def _bad(files, llama_dir, *extra, llm=None, out="codes.parquet"):
    argv = ["annotate", "--input", str(files / "corpus.csv"), "--codebook",
            str(files / "codebook.json"), "--llm", str(llm or llama_dir),
            "--out", str(files / out), *extra]
    return main(argv)


def test_bad_inputs_fail_before_any_work_and_write_nothing(llama_dir, tiny_bert_dir, files,
                                                           capsys, monkeypatch):
    (files / "one.json").write_text(json.dumps([{"label": "only"}]))
    overlap = pd.read_csv(files / "corpus.csv").assign(label="pro")
    overlap.to_csv(files / "overlap.csv", index=False)
    monkeypatch.delenv("QF_TEST_KEY", raising=False)
    cases = [
        (["--codebook", str(files / "one.json")], "two", None),
        (["--shots", "5", "--shots-from", str(files / "human.csv")], "only 4", None),
        (["--shots", "1", "--shots-from", str(files / "overlap.csv")], "never", None),
        # each shared document counts once, though it matches by id and by text
        (["--shots", "1", "--shots-from", str(files / "overlap.csv")],
         f"--shots-from shares {len(overlap)} documents with --input", None),
        (["--shots", "1", "--shots-from", str(files / "overlap.csv")],
         "remove them from one of the two", None),
        (["--api-key-env", "QF_TEST_KEY"], "--api-key-env is a setting of an --endpoint; a "
         "local model does not use it", None),
        (["--endpoint", "http://127.0.0.1:9/v1", "--api-key-env", "QF_TEST_KEY"],
         "--api-key-env: the environment variable 'QF_TEST_KEY' is unset", None),
        ([], "not a causal language model", tiny_bert_dir),
        ([], "not a causal language model", "default"),  # the bundled encoder
        ([], "model folder not found", "./no-such-folder/model"),
        (["--endpoint", "http://127.0.0.1:9/v1"], "does not answer", None),
    ]
    for extra, words, llm in cases:
        capsys.readouterr()
        assert _bad(files, llama_dir, *extra, llm=llm) == 2, extra
        assert words in capsys.readouterr().err, extra
        assert not (files / "codes.parquet").exists() and not any(files.glob("*.sqlite"))
    before = sorted(os.listdir(files))
    assert _bad(files, llama_dir, out="corpus.csv/codes.parquet") == 2
    err = capsys.readouterr().err
    assert "--out" in err and "Loading" not in err  # refused before the model loads
    assert sorted(os.listdir(files)) == before


def test_missing_and_blank_texts_get_no_code(llama_dir, files, capsys):
    """A document with no text (a blank cell, spaces only) is left uncoded with a warning, as
    predict leaves it, never labelled from an empty prompt."""
    frame = pd.read_csv(files / "corpus.csv")
    frame.loc[1, "text"] = None
    frame.loc[3, "text"] = "   "
    frame.to_csv(files / "gaps.csv", index=False)
    capsys.readouterr()
    assert main(["annotate", "--input", str(files / "gaps.csv"), "--codebook",
                 str(files / "codebook.json"), "--llm", str(llama_dir), "--out",
                 str(files / "gaps.parquet")]) == 0
    assert "2 of 6 document(s) have a missing or empty text" in capsys.readouterr().err
    codes = pd.read_parquet(files / "gaps.parquet")
    assert codes["label"].isna().tolist() == [False, True, False, True, False, False]
    assert codes.filter(like="prob_").iloc[[1, 3]].isna().all().all()
    assert not codes["unparsed"].any()


SERVER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "llm_server.py")
#: what the trained tiny coder answers for the six corpus documents
ANSWERS = ["pro", "contra", "pro-life", "pro", "contra", "pro-life"]


@pytest.fixture(scope="module")
def coder_dir(tmp_path_factory):
    """The tiny Llama taught to answer the codebook prompt of each corpus document with its
    label in :data:`ANSWERS` (a model that really answers, so generated codes parse)."""
    from quantformer.models.llm import DOC_SLOT

    folder = tiny_models.build_tiny_llama(tmp_path_factory.mktemp("models") / "coder")
    msgs = build_messages(CODEBOOK)
    prompts = [[dict(m, content=m["content"].replace(DOC_SLOT, t)) for m in msgs]
               for t in tiny_models._SENTENCES[:6]]
    return tiny_models.train_tiny_coder(folder, prompts, ANSWERS)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def transformers_serve(tmp_path_factory):
    """``transformers serve`` (transformers' own OpenAI-compatible server) as a real process on
    127.0.0.1, serving any model folder a request names (``model`` is the folder's path)."""
    import shutil
    import subprocess
    import time
    import urllib.request

    exe = shutil.which("transformers") or os.path.join(os.path.dirname(sys.executable),
                                                       "transformers")
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([exe, "serve", "--host", "127.0.0.1", "--port", str(port),
                                 "--device", "cpu", "--dtype", "float32"], stdout=f, stderr=f,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/models", timeout=2).read()
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.2)
        yield url
    finally:
        proc.kill()
        proc.wait()


def _serve(model_dir, tmp_path, *faults):
    """Start the test server (llm_server.py) process; returns (process, base URL)."""
    import subprocess
    import time

    port_file = tmp_path / f"port{len(list(tmp_path.glob('port*')))}"
    proc = subprocess.Popen([sys.executable, SERVER, str(model_dir), str(port_file), *faults],
                            stderr=subprocess.DEVNULL)
    for _ in range(600):
        if port_file.exists():
            return proc, f"http://127.0.0.1:{port_file.read_text()}/v1"
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the test server did not start")


def _endpoint_argv(files, model_dir, url, *extra):
    return ["annotate", "--input", str(files / "corpus.csv"), "--codebook",
            str(files / "codebook.json"), "--llm", str(model_dir), "--endpoint", url,
            "--out", str(files / "codes.parquet"), "--concurrency", "1", "--max-tokens", "12",
            *extra]


def _record(files):
    return json.loads((files / "codes.parquet.json").read_text())


def test_transformers_serve_codes_parse_and_are_cached(coder_dir, files, transformers_serve):
    """Against `transformers serve` itself: the generated answers parse into the same labels
    the local back-end scores highest; the server gives no logprobs, so the probabilities are
    missing and the record says why; a rerun reads every code from the cache."""
    assert main(["annotate", "--input", str(files / "corpus.csv"), "--codebook",
                 str(files / "codebook.json"), "--llm", str(coder_dir), "--out",
                 str(files / "local.parquet")]) == 0
    assert pd.read_parquet(files / "local.parquet")["label"].tolist() == ANSWERS
    argv = _endpoint_argv(files, coder_dir, transformers_serve, "--raw", "--concurrency", "2")
    assert main(argv) == 0
    codes = pd.read_parquet(files / "codes.parquet")
    assert codes["label"].tolist() == ANSWERS
    assert codes["raw"].tolist() == ANSWERS  # the bare label: the server ignores the schema
    assert not codes["unparsed"].any() and codes.filter(like="prob_").isna().all().all()
    record = _record(files)
    assert record["probabilities"] == "token logprobs"
    assert record["precision"] == "the endpoint's (not reported)"
    assert record["probabilities_missing"] == {"no_logprobs": 6}
    assert "ignores" in record["probabilities_missing_reasons"]["no_logprobs"]
    assert record["from_cache"] == 0 and record["model"] == str(coder_dir)
    assert main(argv) == 0
    assert _record(files)["from_cache"] == 6
    pd.testing.assert_frame_equal(pd.read_parquet(files / "codes.parquet"), codes)


def test_transformers_serve_babble_is_unparsed_counted_and_warned(llama_dir, files, capsys,
                                                                  transformers_serve):
    """The random tiny model's generated text is no label: every row unparsed, none guessed."""
    assert main(_endpoint_argv(files, llama_dir, transformers_serve)) == 0
    assert "warning: 6 of 6 answers did not parse" in capsys.readouterr().err
    codes = pd.read_parquet(files / "codes.parquet")
    assert codes["unparsed"].all() and codes["label"].isna().all()
    assert _record(files)["unparsed"] == 6
    assert _record(files)["probabilities_missing"] == {"unparsed": 6}


def test_endpoint_retries_429_and_timeouts(coder_dir, files):
    proc, url = _serve(coder_dir, files, "--fail-429", "2", "--slow", "3")
    try:
        assert main(_endpoint_argv(files, coder_dir, url, "--timeout", "1", "--raw")) == 0
    finally:
        proc.kill()
    codes = pd.read_parquet(files / "codes.parquet")
    assert codes["label"].tolist() == ANSWERS
    assert not codes["unparsed"].any()


def test_killed_endpoint_keeps_finished_codes_and_a_rerun_resumes(coder_dir, files):
    """The server dies after 3 answers: those 3 are coded, the other 3 fail (connection
    refused past their retries) and are written as failed, exit 1; a rerun against the server
    back on its port asks only for the 3 failed ones."""
    proc, url = _serve(coder_dir, files, "--die-after", "3")
    try:
        assert main(_endpoint_argv(files, coder_dir, url, "--retries", "1")) == 1
    finally:
        proc.kill()
        proc.wait()
    codes = pd.read_parquet(files / "codes.parquet")
    assert codes["status"].tolist() == ["coded"] * 3 + ["failed"] * 3
    assert codes["label"].tolist()[:3] == ANSWERS[:3] and codes["label"].isna().sum() == 3
    assert all("after 2 attempts" in r for r in codes["reason"][3:])
    proc, url = _serve(coder_dir, files, "--port", url.split(":")[-1].split("/")[0])
    try:
        assert main(_endpoint_argv(files, coder_dir, url)) == 0
    finally:
        proc.kill()
    assert _record(files)["from_cache"] == 3
    assert pd.read_parquet(files / "codes.parquet")["label"].tolist() == ANSWERS


def _in_top(llm, ids, token, top=20) -> bool:
    """Is ``token`` among the ``top`` most likely next tokens after ``ids``?"""
    import torch

    with torch.no_grad():
        logits = llm.model(torch.tensor([ids])).logits[0, -1]
    return token in torch.topk(logits, top).indices.tolist()


def _first_token_mass(llm, ids, label, top=20):
    """The probability of the tokens among the ``top`` most likely after ``ids`` whose text
    starts ``label`` (one plain forward pass)."""
    import torch

    with torch.no_grad():
        logp = torch.log_softmax(llm.model(torch.tensor([ids])).logits[0, -1].double(), -1)
    vals, idx = torch.topk(logp, top)
    return sum(float(v.exp()) for v, i in zip(vals, idx)
               if (t := llm.tokenizer.decode([int(i)])) and label.startswith(t))


def test_endpoint_logprobs_give_label_probabilities_equal_to_a_forward_pass(coder_dir, files):
    """Probabilities through an endpoint that returns logprobs (issue 35): the first label
    token's candidates, normalised over the labels; ``pro`` and ``pro-life`` share their first
    tokens, so where the answer took them the next tokens split the two, and where it did not
    their probabilities are missing while ``contra``'s still counts their joint mass."""
    proc, url = _serve(coder_dir, files)
    try:
        assert main(_endpoint_argv(files, coder_dir, url)) == 0
    finally:
        proc.kill()
    codes = pd.read_parquet(files / "codes.parquet").set_index("doc_id")
    assert codes["label"].tolist() == ANSWERS
    assert _record(files)["probabilities_missing"] == {}
    llm = LocalLM(str(coder_dir))
    head, tail = llm.split_prompt(build_messages(CODEBOOK))
    pro, pro_life, contra = llm.label_ids(["pro", "pro-life", "contra"])
    assert pro[:3] == pro_life[:3] and pro_life[3] != pro[3]  # they part at the 4th token
    for k, answer in enumerate(ANSWERS):
        p, d = llm.sequences(head, tiny_models._SENTENCES[k], tail)
        row = codes.loc[f"d{k}"]
        m_contra = _first_token_mass(llm, p + d, "contra")
        if answer == "contra":
            assert pd.isna(row["prob_pro"]) and pd.isna(row["prob_pro-life"])
            joint = _first_token_mass(llm, p + d, "pro")  # the tokens both pro labels start with
            assert row["prob_contra"] == pytest.approx(m_contra / (m_contra + joint), rel=1e-6)
            continue
        m_pro = math.exp(_plain_logp(llm, p + d + pro, len(pro)))  # p r o <end>
        m_life = math.exp(_plain_logp(llm, p + d + pro_life[:4], 4))  # p r o -
        # a parting token below the 20 candidates the server returns counts as 0
        m_pro *= _in_top(llm, p + d + pro[:3], pro[3])
        m_life *= _in_top(llm, p + d + pro_life[:3], pro_life[3])
        total = m_pro + m_life + m_contra
        assert [row["prob_pro"], row["prob_pro-life"], row["prob_contra"]] == pytest.approx(
            [m_pro / total, m_life / total, m_contra / total], rel=1e-6)
        assert row["label"] == answer


def test_llm_codes_feed_ppi_estimates_and_reliability_unchanged(llama_dir, files, capsys):
    """The codes frame is read by `estimate` as any prediction file (issue 35, section 2)."""
    from quantformer.score.reliability import agreement

    out = files / "codes.parquet"
    pd.DataFrame({"doc_id": [f"d{i}" for i in range(20)],
                  "text": tiny_models._SENTENCES}).to_csv(files / "big.csv", index=False)
    assert main(["annotate", "--input", str(files / "big.csv"), "--codebook",
                 str(files / "codebook.json"), "--llm", str(llama_dir), "--out", str(out)]) == 0
    codes = pd.read_parquet(out)
    gold = codes[["doc_id"]].assign(label=(["pro", "contra", "pro-life", "pro"] * 5)[:20])
    gold.iloc[:12].to_csv(files / "gold.csv", index=False)
    table = files / "prev.csv"
    g = gold.iloc[:12].merge(codes, on="doc_id", suffixes=("_gold", ""))
    for method, want in [("naive", codes["label"]), ("gold", g["label_gold"])]:
        assert main(["estimate", "--pred", str(out), "--gold", str(files / "gold.csv"),
                     "--method", method, "--out", str(table)]) == 0
        prev = pd.read_csv(table).set_index("class")
        for lab in ["pro", "contra"]:
            assert prev.loc[lab, "estimate"] == pytest.approx((want == lab).mean(), abs=1e-9)
    assert main(["estimate", "--pred", str(out), "--gold", str(files / "gold.csv"),
                 "--out", str(table)]) == 0
    prev = pd.read_csv(table)
    assert (prev["method"] == "ppi").all() and (prev["ci_low"] <= prev["estimate"]).all()
    res = agreement(g["label_gold"].tolist(), g["label"].tolist(), n_boot=50)
    assert res["krippendorff_alpha"]["estimate"] <= 1


def test_label_probs_of_a_json_answer_with_the_quote_merged_into_the_label_token():
    """The rule of :mod:`quantformer.models.llm_probs` on a JSON answer whose first label token
    carries the opening quote: candidates must carry it too; ``pro``/``pro-life`` share the
    token ` "pro`, which the answer did not take, so both are missing and ``contra``'s
    probability counts their joint mass."""
    from quantformer.models.llm_probs import label_probs

    def tok(t, lp, top=()):
        return {"token": t, "logprob": lp, "top_logprobs": [{"token": a, "logprob": b}
                                                             for a, b in top]}
    content = [tok('{"', 0.0), tok("label", 0.0), tok('":', 0.0),
               tok(' "con', -0.1, [(' "con', -0.1), (' "pro', -2.5), (' "x', -3.0),
                                   ("con", -4.0)]),
               tok("tra", -0.01), tok('"}', 0.0)]
    raw = '{"label": "contra"}'
    probs, why = label_probs(content, raw, ["pro", "pro-life", "contra"])
    assert why is None and probs[:2] == [None, None]
    assert probs[2] == pytest.approx(math.exp(-0.1) / (math.exp(-0.1) + math.exp(-2.5)))
    assert label_probs(None, raw, ["pro", "contra"]) == (None, "no_logprobs")
    assert label_probs(content, "something else", ["pro", "contra"]) == (None, "misaligned")


def _parts(files, n=3):
    """The six corpus documents in ``n`` partition files (folder ``parts``)."""
    corpus = pd.read_csv(files / "corpus.csv")
    (files / "parts").mkdir()
    for j in range(n):
        corpus.iloc[j::n].sort_index().to_csv(files / "parts" / f"part-{j}.csv", index=False)
    order = [i for j in range(n) for i in range(j, len(corpus), n)]
    return files / "parts", order


def _read_parts(folder):
    return pd.concat([pd.read_parquet(p) for p in sorted(folder.glob("part-*.parquet"))],
                     ignore_index=True)


def test_partitioned_on_a_local_cluster_equals_one_file_and_resumes(coder_dir, files):
    """Partitioned input with --scheduler local:2 (a real LocalCluster): each worker loads the
    local model once; the partitions' codes equal the one-file run's; --resume redoes only a
    missing partition, its codes read from the cache."""
    base = ["--codebook", str(files / "codebook.json"), "--llm", str(coder_dir),
            "--shots", "1", "--shots-from", str(files / "human.csv")]
    assert main(["annotate", "--input", str(files / "corpus.csv"), "--out",
                 str(files / "one.parquet"), *base]) == 0
    one = pd.read_parquet(files / "one.parquet")
    folder, order = _parts(files)
    out = files / "codes"
    assert main(["annotate", "--input", str(folder), "--out", str(out), "--scheduler",
                 "local:2", *base]) == 0
    got = _read_parts(out)
    want = one.iloc[order].reset_index(drop=True)
    # labels exactly; probabilities to float rounding (a worker's torch runs one thread)
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-4)
    manifest = json.loads((out / "manifest.json").read_text())
    entries = list(manifest["partitions"].values())
    assert manifest["job"]["verb"] == "annotate" and len(entries) == 3
    assert all(e["model_loads"] == 1 for e in entries)  # one load per worker process
    prompt = json.loads((files / "one.parquet.json").read_text())["prompt"]
    shot = [prompt[1]["content"].split("\n", 1)[1], prompt[2]["content"]]
    assert manifest["job"]["options"]["shots"] == [shot]  # the same shot as the one-file run
    (out / "part-1.parquet").unlink()
    assert main(["annotate", "--input", str(folder), "--out", str(out), "--resume",
                 *base]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["partitions"]["part-1.parquet"]["from_cache"] == 2
    assert [r["partitions_to_do"] for r in manifest["runs"]] == [3, 1]
    pd.testing.assert_frame_equal(_read_parts(out), got)


def test_partitioned_endpoint_shares_one_bound_on_requests_in_flight(coder_dir, files):
    """Two Dask workers coding at once, one endpoint, --concurrency 1: never more than one
    request in flight in total (a Dask semaphore); each worker alone would send one, so
    without the semaphore two are seen together."""
    inflight = files / "inflight"
    proc, url = _serve(coder_dir, files, "--inflight", str(inflight))
    folder, order = _parts(files, 4)
    try:
        assert main(["annotate", "--input", str(folder), "--out", str(files / "codes"),
                     "--codebook", str(files / "codebook.json"), "--llm", str(coder_dir),
                     "--endpoint", url, "--concurrency", "1", "--max-tokens", "12",
                     "--scheduler", "local:2"]) == 0
    finally:
        proc.kill()
    got = _read_parts(files / "codes")
    assert got["label"].tolist() == [ANSWERS[i] for i in order]
    assert got.filter(like="prob_").notna().any(axis=1).all()  # logprobs through the server
    manifest = json.loads((files / "codes" / "manifest.json").read_text())
    assert len({e["worker"] for e in manifest["partitions"].values()}) == 2
    assert int(inflight.read_text()) == 1


def test_partitioned_shots_overlapping_any_partition_are_refused_before_any_work(
        llama_dir, files, capsys):
    folder, _ = _parts(files)
    overlap = pd.read_csv(folder / "part-2.csv").assign(label="pro")
    overlap.to_csv(files / "overlap.csv", index=False)
    capsys.readouterr()
    assert main(["annotate", "--input", str(folder), "--out", str(files / "codes"),
                 "--codebook", str(files / "codebook.json"), "--llm", str(llama_dir),
                 "--shots", "1", "--shots-from", str(files / "overlap.csv")]) == 2
    err = capsys.readouterr().err
    # each of part-2's 2 documents counts once, though it matches by id and by text
    assert f"--shots-from shares {len(overlap)} documents with --input" in err
    assert len(overlap) == 2
    assert not (files / "codes").exists() and not any(files.glob("*.sqlite"))


def test_keep_text_with_a_partitioned_input_is_refused_before_any_work(llama_dir, files, capsys):
    folder, _ = _parts(files)
    capsys.readouterr()
    assert main(["annotate", "--input", str(folder), "--out", str(files / "codes"),
                 "--codebook", str(files / "codebook.json"), "--llm", str(llama_dir),
                 "--keep-text"]) == 2
    err = capsys.readouterr().err
    assert "--keep-text is for a single --input file" in err
    assert not (files / "codes").exists() and not any(files.glob("*.sqlite"))
    # from R's annotate_files(): its arguments, not flags
    assert main(["--r-names", "files,codebook,model,output_dir,scheduler,...", "annotate",
                 "--input", str(folder), "--out", str(files / "codes"),
                 "--codebook", str(files / "codebook.json"), "--llm", str(llama_dir),
                 "--keep-text"]) == 2
    err = capsys.readouterr().err
    assert "`keep_text = TRUE` is for a single `files` file; with a folder, glob or " \
           "`scheduler`," in err
