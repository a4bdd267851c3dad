"""compare --llm (issue 35): a language model's rows beside the baselines on the same test set."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import tiny_models
from sklearn.metrics import accuracy_score, f1_score
from toydata import toy_frame

from quantformer.cli.main import main
from quantformer.infer.annotate import annotate, draw_shots
from quantformer.models.llm import LocalLM
from quantformer.select.common import draw_sample
from quantformer.select.compare import compare
from quantformer.select.compare_llm import shot_pool

CODEBOOK = [{"label": "econ", "description": "about taxes, jobs, trade or spending"},
            {"label": "other", "description": "anything else"},
            {"label": "unsure", "description": "cannot tell"}]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return tiny_models.build_tiny_llama(tmp_path_factory.mktemp("models") / "llama")


def _split():
    frame = toy_frame(44)
    return frame.iloc[:30].reset_index(drop=True), frame.iloc[30:].reset_index(drop=True)


def test_llm_rows_score_the_annotate_codes_of_the_test_documents(llama_dir):
    train, test = _split()
    res = compare(train, test, models="svm-bow", train_sizes=[20], repeats=2, folds=2,
                  quiet=True, llm=str(llama_dir), codebook=CODEBOOK, shots=2)
    r = res.results
    assert r["model"].tolist() == ["svm-bow", "svm-bow", "llm", "llm-2shot", "llm",
                                   "llm-2shot"]
    assert res.table["model"].tolist() == ["svm-bow", "llm", "llm-2shot"]
    llm = LocalLM(str(llama_dir))
    truth, classes = test["label"].tolist(), ["econ", "other"]
    # zero-shot: sklearn's macro-F1 and accuracy of annotate's labels on the same documents
    codes, _ = annotate(test[["doc_id", "text"]], CODEBOOK, llm, progress=None)
    zero = r[r["model"] == "llm"]
    want = f1_score(truth, codes["label"].tolist(), labels=classes, average="macro",
                    zero_division=0)
    assert zero["macro_f1"].tolist() == pytest.approx([want, want], abs=1e-12)
    assert zero["accuracy"].iloc[0] == pytest.approx(accuracy_score(truth, codes["label"]))
    # k-shot: shots drawn from the repeat's training sample (seed + repeat), never test docs
    sample = draw_sample(train, 20, 1, seed=1)
    shots = draw_shots(shot_pool(sample, test), 2, test["doc_id"], test["text"],
                       ["econ", "other", "unsure"], seed=1 + 1)
    assert {t for t, _ in shots} <= set(sample["text"]) and not \
        {t for t, _ in shots} & set(test["text"])
    kcodes, record = annotate(test[["doc_id", "text"]], CODEBOOK, llm, shots=shots,
                              progress=None)
    kshot = r[(r["model"] == "llm-2shot") & (r["repeat"] == 1)]
    assert kshot["macro_f1"].iloc[0] == pytest.approx(
        f1_score(truth, kcodes["label"].tolist(), labels=classes, average="macro",
                 zero_division=0), abs=1e-12)
    run = [x for x in res.runs if x["model"] == "llm-2shot" and x["repeat"] == 1][0]
    assert run["shots"] == 2 and run["prompt_hash"] == record["prompt_hash"]
    assert (r.loc[r["model"].str.startswith("llm"), "seconds"] > 0).all()
    # the LLM is no conventional baseline in the margins; the summary names it
    assert res.summary["by_size"]["20"]["best_conventional"] == "svm-bow"
    assert res.summary["llm"]["model"] == str(llama_dir) and res.summary["llm"]["shots"] == 2
    assert "zero-shot from the codebook" in res.summary["models"]["llm"]


def _files(tmp_path):
    train, test = _split()
    train.to_csv(tmp_path / "train.csv", index=False)
    test.to_csv(tmp_path / "test.csv", index=False)
    (tmp_path / "codebook.json").write_text(json.dumps(CODEBOOK))
    return ["compare", "--train", str(tmp_path / "train.csv"), "--test",
            str(tmp_path / "test.csv"), "--models", "svm-bow", "--folds", "2", "--repeats", "1",
            "--quiet"]


def test_cli_compare_with_llm_writes_its_rows(llama_dir, tmp_path, capsys):
    argv = _files(tmp_path) + ["--llm", str(llama_dir), "--codebook",
                               str(tmp_path / "codebook.json"), "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    results = pd.read_csv(tmp_path / "out" / "results.csv")
    assert results["model"].tolist() == ["svm-bow", "llm"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["llm"]["shots"] == 0 and summary["llm"]["labels"] == ["econ", "other",
                                                                          "unsure"]
    assert "llm rows" in (tmp_path / "out" / "table.md").read_text()


@pytest.mark.parametrize("extra, message", [
    (["--shots", "2"], "--shots is for the language model's rows: add --llm or leave it out"),
    (["--codebook", "BOOK"], "--codebook is for the language model's rows"),
    (["--codebook", "BOOK", "--shots", "2"],
     "--codebook, --shots are for the language model's rows: add --llm or leave them out"),
    (["--llm", "LLM"], "--llm needs --codebook"),
    (["--llm", "LLM", "--codebook", "BOOK2"], "lacks the class"),
    (["--llm", "LLM", "--codebook", "BOOK", "--shots", "40"], "--shots is 40"),
    (["--llm", "LLM", "--codebook", "BOOK", "--api-key-env", "QF_TEST_UNSET_KEY_VAR"],
     "--api-key-env is for an --endpoint"),
    (["--llm", "LLM", "--codebook", "BOOK", "--endpoint", "http://127.0.0.1:9/v1",
      "--api-key-env", "QF_TEST_UNSET_KEY_VAR"], "unset or empty"),
    (["--llm", "LLM", "--codebook", "BOOK", "--endpoint", "http://127.0.0.1:9/v1"],
     "does not answer"),
    (["--llm", "LLM", "--codebook", "BOOK", "--task", "regression", "--models", "ridge-bow"],
     "--llm, --codebook are for the language model's rows of a classification comparison; "
     "leave them out with --task regression"),
    (["--codebook", "BOOK", "--task", "regression", "--models", "ridge-bow"],
     "--codebook is for the language model's rows of a classification comparison; leave it "
     "out with --task regression"),
    (["--shots", "3", "--endpoint", "http://127.0.0.1:9/v1", "--task", "regression",
      "--models", "ridge-bow"], "--endpoint, --shots are for the language model's rows"),
])
def test_bad_llm_options_fail_before_any_run(llama_dir, tmp_path, capsys, extra, message):
    (tmp_path / "book2.json").write_text(json.dumps(CODEBOOK[1:]))
    subst = {"LLM": str(llama_dir), "BOOK": str(tmp_path / "codebook.json"),
             "BOOK2": str(tmp_path / "book2.json")}
    argv = _files(tmp_path) + [subst.get(x, x) for x in extra] + ["--out",
                                                                  str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "run 1/" not in err
    assert not (tmp_path / "out").exists()
