"""The codebook's labels: an empty or missing label is refused with its row (or entry) number
and the fix, in every format (JSON, CSV, TSV, a data frame from R written as CSV), with exit 2
from the CLI; never an internal error, never a label named "None"."""

from __future__ import annotations

import json

import pytest

from quantformer._core.errors import InputError
from quantformer.cli.main import main
from quantformer.io.codebook import make_codebook


def _write(tmp_path, fmt, labels):
    path = tmp_path / f"book.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps([{"label": lab, "description": f"d{i}"}
                                    for i, lab in enumerate(labels)]), encoding="utf-8")
    else:
        sep = "\t" if fmt == "tsv" else ","
        rows = [f"{'' if lab is None else lab}{sep}d{i}" for i, lab in enumerate(labels)]
        path.write_text("\n".join([f"label{sep}description", *rows]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt, noun", [("json", "entry"), ("csv", "row"), ("tsv", "row")])
@pytest.mark.parametrize("empty", [None, "", "  "])
def test_an_empty_label_is_refused_with_its_row_in_every_format(tmp_path, fmt, noun, empty):
    path = _write(tmp_path, fmt, ["pro", empty, "contra"])
    with pytest.raises(InputError) as err:
        make_codebook(path=path)
    line = " (line 3 of the file)" if noun == "row" else ""  # a file's row after its header
    assert str(err.value) == (
        f"codebook '{path}': {noun} 2{line} has no label (an empty or missing 'label'); give "
        f"every {noun} a label, or remove the {noun}")


def test_the_empty_label_check_is_said_once_and_not_as_a_repeat(tmp_path):
    path = _write(tmp_path, "csv", ["pro", None, "contra", None])
    with pytest.raises(InputError, match=r"rows 2, 4 \(lines 3, 5 of the file\) have no label") as err:
        make_codebook(path=path)
    assert "repeated" not in str(err.value)
    # a real repeat is still named as one
    with pytest.raises(InputError, match=r"repeated: pro"):
        make_codebook(path=_write(tmp_path, "csv", ["pro", "contra", "pro"]))


@pytest.mark.parametrize("fmt", ["json", "csv", "tsv"])
def test_cli_annotate_and_code_exit_2_on_an_empty_label(tmp_path, fmt, capsys):
    path = _write(tmp_path, fmt, ["pro", None, "contra"])
    corpus = tmp_path / "corpus.csv"
    corpus.write_text("doc_id,text\na,one\nb,two\n", encoding="utf-8")
    code = main(["annotate", "--input", str(corpus), "--codebook", str(path), "--llm",
                 str(tmp_path / "no-model"), "--out", str(tmp_path / "codes.parquet")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "has no label (an empty or missing 'label')" in err and "--codebook" in err
    assert "internal error" not in err and not (tmp_path / "codes.parquet").exists()
