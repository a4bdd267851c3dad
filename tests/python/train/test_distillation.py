"""Distillation (issue 35): a language model's codes, kept with their texts, are the training
data of ``finetune``; human codes are its validation set."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import tiny_models

from quantformer.cli.main import main
from quantformer.io.modeldir import read_record

CODEBOOK = [{"label": "yes"}, {"label": "no"}]  # the tiny random model gives both


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return tiny_models.build_tiny_llama(tmp_path_factory.mktemp("models") / "llama")


def test_finetune_trains_on_annotate_output_kept_with_its_texts(llama_dir, tiny_bert_dir,
                                                                 tmp_path, capsys):
    corpus = pd.DataFrame({"doc_id": [f"d{i}" for i in range(16)],
                           "text": tiny_models._SENTENCES[:16]})
    corpus.to_csv(tmp_path / "corpus.csv", index=False)
    human = pd.DataFrame({"doc_id": [f"h{i}" for i in range(4)],
                          "text": tiny_models._SENTENCES[16:20],
                          "label": ["yes", "no", "yes", "no"]})
    human.to_csv(tmp_path / "human.csv", index=False)
    (tmp_path / "codebook.json").write_text(json.dumps(CODEBOOK))
    codes_path = tmp_path / "codes.parquet"
    assert main(["annotate", "--input", str(tmp_path / "corpus.csv"), "--codebook",
                 str(tmp_path / "codebook.json"), "--llm", str(llama_dir), "--out",
                 str(codes_path), "--keep-text"]) == 0
    codes = pd.read_parquet(codes_path)
    assert codes.columns[:3].tolist() == ["doc_id", "text", "label"]
    assert codes["text"].tolist() == corpus["text"].tolist()
    # an unparsed answer (as an endpoint may give) has no label: not trained on
    codes.loc[2, ["label", "unparsed"]] = [None, True]
    codes.to_parquet(codes_path)
    counts = codes["label"].value_counts().to_dict()
    assert set(counts) == {"yes", "no"}
    capsys.readouterr()
    assert main(["finetune", "--train", str(codes_path), "--valid", str(tmp_path / "human.csv"),
                 "--model", str(tiny_bert_dir), "--epochs", "1", "--device", "cpu",
                 "--out", str(tmp_path / "student")]) == 0
    assert "left out 1 document(s) with a missing label" in capsys.readouterr().out
    record = read_record(tmp_path / "student")
    assert record["n_train"] == 15 and record["n_missing_label"] == 1
    assert record["label_counts"] == counts  # the LLM's codes, the unparsed one left out
    assert record["validation"]["n"] == 4  # scored on the human codes
