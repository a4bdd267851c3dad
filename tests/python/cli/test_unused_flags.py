"""A flag that the chosen method, objective or back-end would not use is an error (exit 2)
that names it and what it belongs to, before any model loads, with nothing written: never
accepted and silently dropped."""

from __future__ import annotations

import json

import pytest
from toydata import toy_frame

from quantformer.cli.main import main

ENDPOINT = "http://127.0.0.1:9/v1"  # nothing listens there: the checks come before any call
FILES = {"docs": "{tmp}/docs.csv", "human": "{tmp}/human.csv", "book": "{tmp}/book.json"}
#: the start of each command line: the verb, its input and an output never written
FINETUNE = ["finetune", "--train", "{docs}", "--out", "{tmp}/out"]
COMPARE = ["compare", "--train", "{docs}", "--test", "{docs}", "--out", "{tmp}/out"]
ANNOTATE = ["annotate", "--input", "{docs}", "--codebook", "{book}", "--llm", "x", "--out",
            "{tmp}/out.csv"]
CASES = [
    # finetune: options of the standard recipe with SetFit, window settings without chunks
    ([*FINETUNE, "--method", "setfit",
      "--precision", "bf16"],
     "--precision bf16 does not apply to --method setfit: SetFit trains and predicts in fp32"),
    ([*FINETUNE, "--method", "setfit",
      "--grad-accum", "4", "--early-stopping", "2"],
     "--early-stopping, --grad-accum do not apply to --method setfit (--early-stopping: it "
     "takes no validation data to stop on; --grad-accum: its body trains on batch_size pairs "
     "a step); leave them out"),
    ([*FINETUNE, "--method", "setfit",
      "--early-stopping", "1"], "--early-stopping does not apply to --method setfit"),
    ([*FINETUNE, "--method", "setfit",
      "--stride", "64"], "--stride applies to --truncation chunks only"),
    ([*FINETUNE, "--method", "nli",
      "--max-chunks", "2", "--aggregate", "max"],
     "--max-chunks, --aggregate apply to --truncation chunks only"),
    ([*FINETUNE, "--method", "nli",
      "--tune-thresholds"], "--tune-thresholds is for --task multilabel; leave it out"),
    ([*FINETUNE, "--tune-thresholds"],
     "--tune-thresholds is for --task multilabel; leave it out"),
    ([*FINETUNE, "--aggregate", "mean"],
     "--aggregate applies to --truncation chunks only (documents read whole as windows): add "
     "--truncation chunks or leave it out"),
    ([*FINETUNE, "--method", "setfit",
      "--truncation", "chunks", "--aggregate", "mean"],
     "--aggregate does not apply to --method setfit: the mean of the windows' embeddings"),
    ([*FINETUNE, "--method", "setfit",
      "--label-sep", ";"], "--label-sep is for --task multilabel; add --task multilabel or leave "
                           "it out"),
    ([*FINETUNE, "--method", "nli",
      "--label-cols", "a,b", "--label-sep", ";"],
     "--label-cols, --label-sep are for --task multilabel; add --task multilabel or leave them "
     "out"),
    (["tune", "--train", "{docs}", "--out", "{tmp}/out", "--aggregate", "mean"],
     "--aggregate applies to --truncation chunks only"),
    # tune and compare: the windows' training without windows
    (["tune", "--train", "{docs}", "--out", "{tmp}/out", "--chunk-training", "labels"],
     "--chunk-training applies to --truncation chunks only (documents read whole as windows): "
     "add --truncation chunks or leave it out"),
    ([*COMPARE, "--chunk-training", "labels"],
     "--chunk-training applies to --truncation chunks only (documents read whole as windows): "
     "add --truncation chunks or leave it out"),
    # pretrain: masked-LM settings with TSDAE; a negative warm-up
    (["pretrain", "--corpus", "{docs}", "--out", "{tmp}/out", "--objective", "tsdae",
      "--mask-prob", "0.4", "--whole-word", "--head-steps", "7"],
     "--mask-prob, --whole-word, --head-steps are settings of masked language modelling; "
     "--objective tsdae deletes words instead (Wang et al. 2021): leave them out or use "
     "--objective mlm"),
    (["pretrain", "--corpus", "{docs}", "--out", "{tmp}/out", "--head-steps", "-3"],
     "--head-steps must be 0 (no warm-up) or more, not -3"),
    # annotate: shots, and the settings of the other kind of coder
    ([*ANNOTATE, "--shots", "-2"], "--shots must be a whole number of at least 0, not -2"),
    ([*ANNOTATE, "--shots-from", "{human}"],
     "--shots-from gives the human codes the k-shot examples are drawn from, and --shots is 0 "
     "(zero-shot): add --shots K or leave --shots-from out"),
    ([*ANNOTATE, "--timeout", "5", "--api-key-env", "HOME", "--top-logprobs", "3"],
     "--api-key-env, --timeout, --top-logprobs are settings of an --endpoint; a local model "
     "does not use them: add --endpoint or leave them out"),
    ([*ANNOTATE, "--endpoint", ENDPOINT, "--device", "cuda:3"],
     "--device is for a local model; with --endpoint the server chooses its device"),
    ([*ANNOTATE, "--endpoint", ENDPOINT, "--concurrency", "0"],
     "--concurrency must be a whole number of at least 1 (requests), not 0"),
    ([*ANNOTATE, "--endpoint", ENDPOINT, "--retries", "-1"],
     "--retries must be a whole number of at least 0 (retries), not -1"),
    (["annotate", "--input", "{tmp}", "--codebook", "{book}", "--llm", "x", "--out",
      "{tmp}/out", "--concurrency", "8"], "--concurrency is a setting of an --endpoint"),
    # compare: fine-tuning settings without a fine-tuned candidate
    ([*COMPARE, "--models",
      "svm-bow", "--truncation", "chunks", "--chunk-training", "labels", "--epochs", "2"],
     "--truncation, --chunk-training, --epochs are settings of the fine-tuned candidates"),
    ([*COMPARE, "--models",
      "svm-bow", "--truncation", "chunks", "--stride", "8"],
     "--truncation, --stride are settings of the fine-tuned candidates"),
    ([*COMPARE, "--models",
      "svm-bow", "--stride", "8"], "--stride is a setting of the fine-tuned candidates"),
    ([*COMPARE, "--models",
      "svm-bow", "--model", "some-encoder"],
     "--model is a setting of the fine-tuned candidates (default, setfit, nli), and --models "
     "has none"),
    ([*FINETUNE, "--method", "setfit",
      "--task", "regression"],
     "--method setfit trains classifiers only; use --method standard for --task regression"),
    ([*COMPARE, "--models",
      "svm-bow,xgb-bow", "--lr", "1e-4"],
     "--lr is a setting of the fine-tuned candidates (default, setfit, nli), and --models has "
     "none: add one or leave it out"),
    # compare: the language model's rows of another task
    ([*COMPARE, "--task",
      "regression", "--models", "ridge-bow", "--codebook", "{book}"],
     "--codebook is for the language model's rows of a classification comparison"),
]


def _files(tmp_path):
    toy_frame(12).to_csv(tmp_path / "docs.csv", index=False)
    toy_frame(4).assign(doc_id=lambda f: "h" + f["doc_id"].astype(str)).to_csv(
        tmp_path / "human.csv", index=False)
    book = [{"label": "econ", "description": "the economy"},
            {"label": "other", "description": "anything else"}]
    (tmp_path / "book.json").write_text(json.dumps(book))
    return {"docs.csv", "human.csv", "book.json"}


@pytest.mark.parametrize("argv, message", CASES)
def test_a_flag_that_would_not_be_used_is_refused(tmp_path, capsys, argv, message):
    before = _files(tmp_path)
    code = main([a.format(tmp=tmp_path, **{k: v.format(tmp=tmp_path) for k, v in FILES.items()})
                 for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert {p.name for p in tmp_path.iterdir()} == before  # nothing written


def test_zeroshot_nli_refuses_the_embedding_methods_settings(tmp_path, capsys,
                                                             tiny_roberta_nli_dir):
    """calibration and temperature shape the embedding method's similarities; the NLI
    method's probabilities are its entailment softmax."""
    toy_frame(4).to_csv(tmp_path / "docs.csv", index=False)
    base = ["zeroshot", "--input", str(tmp_path / "docs.csv"), "--labels", "a,b", "--model",
            str(tiny_roberta_nli_dir), "--out", str(tmp_path / "z.csv")]
    assert main([*base, "--temperature", "2", "--calibration", "none"]) == 2
    assert ("--calibration, --temperature apply to the embedding method, and this run uses "
            "the NLI entailment method: leave them out") in capsys.readouterr().err
    assert main([*base, "--method", "nli", "--temperature", "2"]) == 2
    assert "--temperature applies to the embedding method" in capsys.readouterr().err
    assert not (tmp_path / "z.csv").exists()


def test_zeroshot_partitions_refuse_them_before_any_partition_runs(tmp_path, capsys,
                                                                    tiny_roberta_nli_dir):
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(2):
        toy_frame(4).to_csv(parts / f"p{i}.csv", index=False)
    assert main(["zeroshot", "--input", str(parts), "--labels", "a,b", "--model",
                 str(tiny_roberta_nli_dir), "--out", str(tmp_path / "z"),
                 "--temperature", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "--temperature applies to the embedding method" in err and "partition" not in err
    assert not (tmp_path / "z").exists()


def test_partitioned_predict_refuses_window_flags_of_a_model_that_reads_none(
        tmp_path, capsys, toy_model_dir):
    """The model's own truncation (head+tail) is read from its record before any partition
    runs, as the one-file predict does."""
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(2):
        toy_frame(4).to_csv(parts / f"p{i}.csv", index=False)
    assert main(["predict", "--model", str(toy_model_dir), "--input", str(parts), "--out",
                 str(tmp_path / "p"), "--aggregate", "max"]) == 2
    err = capsys.readouterr().err
    assert "--aggregate applies to --truncation chunks only" in err and "partition" not in err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("partitioned", [False, True])
def test_explain_top_needs_by_term(tmp_path, capsys, toy_model_dir, partitioned):
    toy_frame(4).to_csv(tmp_path / "docs.csv", index=False)
    out = tmp_path / ("x" if partitioned else "x.csv")
    assert main(["explain", "--model", str(toy_model_dir), "--input",
                 str(tmp_path if partitioned else tmp_path / "docs.csv"), "--out", str(out),
                 "--top", "5"]) == 2
    assert ("--top is the number of terms per class of --by-term; add --by-term FILE or leave "
            "--top out") in capsys.readouterr().err
    assert not out.exists()
