"""Issue 27, point 8: every check that needs no model runs before long work, and
``--max-length`` has one rule and one message across verbs."""

from __future__ import annotations

import time

import pytest
from toydata import toy_frame

from quantformer._core.errors import InputError
from quantformer.cli.main import main
from quantformer.label.suggest import suggest_round
from quantformer.train.finetune import finetune

RULE = "must be a whole number of tokens of at least 8 (special tokens included)"
VERBS = {
    "tokenize": ["--input", "{docs}"],
    "embed": ["--input", "{docs}", "--out", "{tmp}/e.parquet"],
    "zeroshot": ["--input", "{docs}", "--labels", "a,b", "--out", "{tmp}/z.csv"],
    "suggest": ["--input", "{docs}", "--out", "{tmp}/s.csv"],
    "finetune": ["--train", "{docs}", "--out", "{tmp}/m"],
    "tune": ["--train", "{docs}", "--out", "{tmp}/t"],
    "compare": ["--train", "{docs}", "--test", "{docs}", "--out", "{tmp}/c"],
    "demo": ["--out", "{tmp}/d"],
}


@pytest.mark.parametrize("value", ["0", "4", "-3", "1.5", "x"])
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_max_length_one_rule_one_message(verb, value, tmp_path, capsys):
    toy_frame(10).to_csv(tmp_path / "docs.csv", index=False)
    args = [a.format(docs=tmp_path / "docs.csv", tmp=tmp_path) for a in VERBS[verb]]
    assert main([verb, *args, "--max-length", value]) == 2
    err = capsys.readouterr().err
    assert f"error: argument --max-length: {RULE}, not {value} " in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.csv"]


def test_library_max_length_rule_is_the_same():
    for value in (0, 4):
        with pytest.raises(InputError) as info:
            finetune(toy_frame(10), max_length=value, quiet=True)
        assert str(info.value) == f"max_length {RULE}, not {value}"


def test_suggest_refuses_a_fully_coded_corpus_before_embedding(tmp_path):
    """The check runs before any model loads: a model that does not exist is never reached."""
    frame = toy_frame(12)
    start = time.monotonic()
    with pytest.raises(InputError, match="all 12 documents with a text are already coded"):
        suggest_round(frame, embed_model=str(tmp_path / "no-such-model"), n=3, quiet=True)
    assert time.monotonic() - start < 2


def test_predict_reads_the_input_before_loading_the_model(tmp_path, monkeypatch):
    """A bad --input fails before any model loads (a fresh user waited 10 s for the error)."""
    import gzip

    import quantformer.infer.predict as predict_module

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was read")

    monkeypatch.setattr(predict_module, "load_model", no_load)
    bad = tmp_path / "fake.csv"
    bad.write_bytes(gzip.compress(b"doc_id,text\na,hello\n"))
    with pytest.raises(InputError, match="does not look like text"):
        predict_module.predict_file(str(tmp_path / "model"), bad, tmp_path / "p.parquet")
    assert not (tmp_path / "p.parquet").exists()
