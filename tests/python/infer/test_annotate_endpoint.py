"""``annotate --endpoint`` against a flaky server (the real test server process,
tests/python/llm_server.py): unreadable answers, documents past their retries, Retry-After,
the endpoint's scheme, a key given where its variable's name belongs, the cache keyed on the
run."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_annotate import ANSWERS, _serve, coder_dir, files  # noqa: F401 (fixtures)

from quantformer.cli.main import main
from quantformer.io.columns import LABEL_COLUMN, REASON_COLUMN, STATUS_COLUMN
from quantformer.models.llm_endpoint import RETRY_AFTER_CAP, retry_after_seconds

#: a piece of each corpus document's text, to aim a fault at that document
PIECE = ["spoke to the Congress", "reduce the deficit", "our people are free",
         "schools, roads", "Abortion should be legal", "Every life is sacred"]


def _argv(files, model_dir, url, out="codes.parquet", *extra):
    return ["annotate", "--input", str(files / "corpus.csv"), "--codebook",
            str(files / "codebook.json"), "--llm", str(model_dir), "--endpoint", url,
            "--out", str(files / out), "--max-tokens", "12", *extra]


def _labels(codes) -> list:
    return [None if pd.isna(x) else x for x in codes[LABEL_COLUMN]]


def _requests(log) -> list[dict]:
    """The completion requests the server saw (its --log)."""
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _run_against(files, model_dir, *faults, argv_extra=(), out="codes.parquet"):
    """One annotate run against a fresh test server with ``faults`` (on the port of the first
    one, as the cache keys on the endpoint's URL): (exit code, requests)."""
    log = files / f"log{len(list(files.glob('log*')))}"
    port = (files / "port").read_text() if (files / "port").exists() else "0"
    proc, url = _serve(model_dir, files, "--log", str(log), "--port", port, *faults)
    (files / "port").write_text(url.split(":")[-1].split("/")[0])
    try:
        rc = main(_argv(files, model_dir, url, out, *argv_extra))
    finally:
        proc.kill()
        proc.wait()
    return rc, _requests(log)


def test_unreadable_answers_are_unparsed_with_their_reason_and_retry_unparsed_asks_again(
        coder_dir, files, capsys):
    """A 200 answer that is not JSON, or JSON without choices, is that document's unparsed code
    with the reason; every other answer is kept; unparsed codes are cached as finished (a rerun
    asks nothing), and --retry-unparsed asks again for those two only."""
    rc, seen = _run_against(files, coder_dir, "--non-json", PIECE[1], "--no-choices", PIECE[3],
                            argv_extra=("--concurrency", "2"))
    assert rc == 0, capsys.readouterr().err
    assert len(seen) == 6
    codes = pd.read_parquet(files / "codes.parquet")
    want = [None if k in (1, 3) else a for k, a in enumerate(ANSWERS)]
    assert _labels(codes) == want
    assert codes["unparsed"].tolist() == [False, True, False, True, False, False]
    assert codes[STATUS_COLUMN].tolist() == ["coded", "unparsed", "coded", "unparsed", "coded",
                                             "coded"]
    assert "not JSON" in codes[REASON_COLUMN][1] and "502 Bad Gateway" in codes[REASON_COLUMN][1]
    assert "no choices" in codes[REASON_COLUMN][3]
    assert codes[REASON_COLUMN].isna().tolist() == [True, False, True, False, True, True]
    rc, seen = _run_against(files, coder_dir)
    assert rc == 0 and seen == []  # the unparsed codes are finished in the cache
    assert _labels(pd.read_parquet(files / "codes.parquet")) == want
    rc, seen = _run_against(files, coder_dir, argv_extra=("--retry-unparsed",))
    assert rc == 0 and len(seen) == 2
    codes = pd.read_parquet(files / "codes.parquet")
    assert codes[LABEL_COLUMN].tolist() == ANSWERS
    assert (codes[STATUS_COLUMN] == "coded").all() and not codes["unparsed"].any()
    record = json.loads((files / "codes.parquet.json").read_text())
    assert record["from_cache"] == 4 and record["unparsed"] == 0


def test_a_document_past_its_retries_fails_alone_and_a_rerun_asks_only_for_it(
        coder_dir, files, capsys):
    """Five 429s (Retry-After: 1) for one document: the other five are coded and written, the
    failed one has its status and reason, the run exits 1 at the end with the count and the
    fix; the waits honour Retry-After; a rerun asks for that one document only."""
    capsys.readouterr()
    rc, seen = _run_against(files, coder_dir, "--reject", PIECE[4], "--retry-after", "1",
                            argv_extra=("--retries", "4", "--concurrency", "2"))
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "1 of 6 documents failed" in err and "rerun the same command" in err
    assert "4 retries (last: HTTP 429" in err  # the progress line
    codes = pd.read_parquet(files / "codes.parquet")
    assert _labels(codes) == [None if k == 4 else a for k, a in enumerate(ANSWERS)]
    assert codes[STATUS_COLUMN].tolist() == ["coded"] * 4 + ["failed", "coded"]
    assert "HTTP 429" in codes[REASON_COLUMN][4] and "5 attempts" in codes[REASON_COLUMN][4]
    assert not codes["unparsed"].any()
    record = json.loads((files / "codes.parquet.json").read_text())
    assert record["failed"] == 1 and record["failed_documents"] == ["d4"]
    assert record["retries"] == 4 and "HTTP 429" in record["last_retry_reason"]
    rejected = [r["t"] for r in seen if r["status"] == 429]
    assert len(rejected) == 5 and len(seen) == 10
    gaps = [b - a for a, b in zip(rejected, rejected[1:])]
    assert min(gaps) >= 0.95, gaps  # Retry-After: 1 honoured (the backoff alone starts at 0.25)
    rc, seen = _run_against(files, coder_dir)
    assert rc == 0 and len(seen) == 1  # failed documents are not cached as finished
    assert pd.read_parquet(files / "codes.parquet")[LABEL_COLUMN].tolist() == ANSWERS


def test_retry_after_in_seconds_and_as_an_http_date_is_capped():
    now = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert retry_after_seconds("2", now=now) == 2.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:07 GMT", now=now) == 7.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:27:00 GMT", now=now) == 0.0  # in the past
    assert retry_after_seconds("86400", now=now) == RETRY_AFTER_CAP
    assert retry_after_seconds(None, now=now) is None
    assert retry_after_seconds("soon", now=now) is None


@pytest.mark.parametrize("url", ["file:///tmp/models", "ftp://127.0.0.1/v1", "127.0.0.1:8000/v1",
                                 "http:///v1"])
def test_an_endpoint_that_is_not_http_is_refused_before_any_work(files, url, capsys):
    capsys.readouterr()
    assert main(_argv(files, "some-model", url)) == 2
    err = capsys.readouterr().err
    assert "--endpoint must be an http:// or https:// URL" in err
    assert "http://127.0.0.1:11434/v1" in err  # the fix, by example
    assert not (files / "codes.parquet").exists() and not any(files.glob("*.sqlite"))


@pytest.mark.parametrize("value", ["sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
                                   "sk_live_4f9a8b7c6d5e4f3a",
                                   "Xq7Lm2Np4Rt6Vw8Zk1Jh3Gf5Ds0AbC9y",
                                   "hf_AbCdEfGhIjKlMnOpQrStUvWxYz"])
def test_a_key_given_as_the_variable_name_is_never_echoed(files, value, capsys, monkeypatch):
    capsys.readouterr()
    monkeypatch.delenv(value, raising=False)
    for extra in (["--endpoint", "http://127.0.0.1:9/v1"], []):
        argv = ["annotate", "--input", str(files / "corpus.csv"), "--codebook",
                str(files / "codebook.json"), "--llm", "m", "--out", str(files / "c.parquet"),
                "--api-key-env", value, *extra]
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert value not in out and value not in err and value[:12] not in err
        if extra:
            assert "--api-key-env takes the name of an environment variable" in err


def test_the_cache_is_keyed_on_the_run_not_the_output_name(coder_dir, files, capsys):
    """The same run written to a.parquet, then to b.csv: the second asks the server nothing;
    a setting that changes the answer (--max-tokens) asks again."""
    rc, seen = _run_against(files, coder_dir, out="a.parquet")
    assert rc == 0 and len(seen) == 6
    rc, seen = _run_against(files, coder_dir, out="b.csv")
    assert rc == 0 and seen == []
    assert pd.read_csv(files / "b.csv")[LABEL_COLUMN].tolist() == ANSWERS
    assert json.loads((files / "b.csv.json").read_text())["from_cache"] == 6
    assert (files / "annotate.cache.sqlite").exists()
    rc, seen = _run_against(files, coder_dir, out="c.csv", argv_extra=("--max-tokens", "13"))
    assert rc == 0 and len(seen) == 6


def test_a_partition_with_a_failed_document_is_redone_by_resume_for_that_document_only(
        coder_dir, files, capsys):
    """Partitioned input: the partition holding the document past its retries fails (its
    other codes cached), the others are written; --resume asks for that document only."""
    from test_annotate import _parts, _read_parts

    folder, order = _parts(files)
    out = files / "codes"
    extra = ("--retries", "0", "--concurrency", "1")

    def argv(url, *more):
        return ["annotate", "--input", str(folder), "--out", str(out), "--codebook",
                str(files / "codebook.json"), "--llm", str(coder_dir), "--endpoint", url,
                "--max-tokens", "12", *more]
    log = files / "plog"
    proc, url = _serve(coder_dir, files, "--log", str(log), "--reject", PIECE[4])
    try:
        capsys.readouterr()
        assert main(argv(url, *extra)) == 2
    finally:
        proc.kill()
        proc.wait()
    err = capsys.readouterr().err
    assert "1 partition(s) failed" in err and "1 of 2 documents failed (e.g. HTTP 429" in err
    assert len(_requests(log)) == 6
    port = url.split(":")[-1].split("/")[0]
    log2 = files / "plog2"
    proc, url = _serve(coder_dir, files, "--log", str(log2), "--port", port)
    try:
        assert main(argv(url, *extra, "--resume")) == 0
    finally:
        proc.kill()
        proc.wait()
    assert len(_requests(log2)) == 1
    assert _read_parts(out)[LABEL_COLUMN].tolist() == [ANSWERS[i] for i in order]


def test_help_documents_retry_unparsed_and_the_cache(capsys):
    assert main(["annotate", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--retry-unparsed ask again for the documents whose cached answer is unparsed" in out
    assert "keyed on the run" in out and "annotate.cache.sqlite in the folder of --out" in out


def test_retry_unparsed_without_an_endpoint_is_refused(files, capsys):
    capsys.readouterr()
    assert main(["annotate", "--input", str(files / "corpus.csv"), "--codebook",
                 str(files / "codebook.json"), "--llm", "m", "--out", str(files / "c.parquet"),
                 "--retry-unparsed"]) == 2
    assert "--retry-unparsed asks an --endpoint again" in capsys.readouterr().err
    assert not any(files.glob("*.sqlite")) and not (files / "c.parquet").exists()


def test_codes_keep_the_corpus_docvars_for_estimate_by_and_regress(coder_dir, files, capsys):
    """The corpus's docvars follow the codes (as predict and zeroshot keep them), so
    ``estimate --by`` and ``regress`` read them from the codes; the codes' own columns
    (status, reason, ...) are not offered as docvars."""
    from quantformer.measure.regress import check_formula_docvars

    corpus = pd.read_csv(files / "corpus.csv")
    corpus["party"] = ["a", "b", "a", "b", "a", "b"]
    corpus.to_csv(files / "corpus.csv", index=False)
    rc, seen = _run_against(files, coder_dir)
    assert rc == 0, capsys.readouterr().err
    codes = pd.read_parquet(files / "codes.parquet")
    assert codes["party"].tolist() == ["a", "b", "a", "b", "a", "b"]
    assert list(check_formula_docvars(codes, "C(party)").columns) == ["party"]
    with pytest.raises(Exception, match=r"its docvars are: party$"):
        check_formula_docvars(codes, "C(year)")
