"""The CLI contract: tokenize, example, info, --help, exit codes and bad input (no output left)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from quantformer.cli.main import main
from quantformer.io.frames import read_frame

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def run(capsys, *argv):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _summary(stdout):
    """The summary table printed by tokenize, as {row name: value}."""
    rows = {}
    for line in stdout.splitlines()[2:]:
        name, _, value = line.rstrip().rpartition(" ")
        if name.strip():
            rows[name.strip()] = value
    return rows


def test_tokenize_tweeteval(capsys, shared_data, tmp_path):
    out = tmp_path / "tok.parquet"
    code, stdout, _ = run(capsys, "tokenize", "--input",
                          shared_data / "tweeteval_abortion" / "train_text.txt", "--out", out)
    assert code == 0
    s = _summary(stdout)
    assert s["documents"] == "587" and s["missing or empty"] == "0"
    assert s["over 512 (truncated)"] == "0" and int(s["max"]) < 128
    stats = read_frame(out, text_col="doc_id")  # no text column in a stats file
    assert len(stats) == 587 and stats.columns.tolist() == ["doc_id", "text", "n_tokens",
                                                           "truncated"]
    assert stats["doc_id"].iloc[-1] == "text587"
    assert f"wrote 587 rows to {out}" in stdout


def test_example_sotu_then_tokenize_with_ids(capsys, tmp_path):
    corpus = tmp_path / "sotu.parquet"
    code, stdout, _ = run(capsys, "example", "sotu", "--since", "2016", "--label", "party",
                          "--out", corpus)
    assert code == 0 and "paragraphs from" in stdout
    frame = pd.read_parquet(corpus)
    assert frame.columns.tolist() == ["doc_id", "text", "label", "year", "president", "party",
                                      "address", "paragraph"]
    assert frame["year"].min() >= 2016 and (frame["label"] == frame["party"]).all()
    out = tmp_path / "ids.rds"
    code, stdout, _ = run(capsys, "tokenize", "--input", corpus, "--max-length", "64", "--ids",
                          "--truncation", "head", "--out", out)
    assert code == 0
    s = _summary(stdout)
    assert s["documents"] == str(len(frame)) and int(s["over 64 (truncated)"]) > 0
    import pyreadr

    back = pyreadr.read_r(str(out))[None]
    assert back["doc_id"].tolist() == frame["doc_id"].tolist()
    ids = [json.loads(x) for x in back["input_ids"]]
    assert max(map(len, ids)) == 64 and all(x[0] == 101 and x[-1] == 102 for x in ids)
    assert back["truncated"].tolist() == (back["n_tokens"] > 64).tolist()
    assert back.columns.tolist()[-5:] == ["year", "president", "party", "address", "paragraph"]


def test_missing_and_empty_texts_are_kept_and_counted(capsys, tmp_path):
    f = tmp_path / "m.csv"
    f.write_text("doc_id,text\na,hello world\nb,\nc,NA\nd,\"  \"\n", encoding="utf-8")
    out = tmp_path / "m.jsonl"
    code, stdout, stderr = run(capsys, "tokenize", "--input", f, "--out", out)
    assert code == 0
    assert "warning: 2 of 4 documents have missing or empty text; they are kept" in stderr
    assert _summary(stdout)["missing or empty"] == "2"
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["doc_id"] for r in rows] == ["a", "b", "c", "d"]
    assert [r["n_tokens"] for r in rows] == [4, 0, 3, 0]


def test_info_verbs_lists_each_verb_its_quiet_flag_and_the_caller_rules(capsys):
    """Issue 32: what R checks before a run comes from the core, not from copies in R."""
    from quantformer.cli.main import build_parser
    from quantformer.infer.zeroshot_common import check_labels
    from quantformer.models.tasks import NUMERIC_CLASSES_MAX

    code, stdout, _ = run(capsys, "info", "--verbs", "--json")
    answer = json.loads(stdout)
    assert code == 0
    verbs = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    assert sorted(answer["verbs"]) == sorted(verbs.choices)
    for name, sub in verbs.choices.items():
        takes = any("--quiet" in a.option_strings for a in sub._actions)
        assert answer["verbs"][name] == {"quiet": takes}
    assert answer["verbs"]["predict"] == {"quiet": True}
    assert answer["verbs"]["estimate"] == {"quiet": False}
    assert answer["numeric_classes_max"] == NUMERIC_CLASSES_MAX
    rules = answer["zeroshot_labels"]
    # the counts are the ones check_labels enforces: one label fewer fails, that many passes
    assert len(check_labels([f"l{i}" for i in range(rules["min_labels"])])) == rules["min_labels"]
    with pytest.raises(Exception, match="at least two labels"):
        check_labels([f"l{i}" for i in range(rules["min_labels"] - 1)])
    assert check_labels(["only"], multi_label=True) == ["only"]
    assert rules["min_labels_multi_label"] == 1
    assert check_labels(["  a ", "b"]) == ["a", "b"] and rules["strip"] is True


def test_info_json_and_help(capsys):
    code, stdout, _ = run(capsys, "info", "--json")
    info = json.loads(stdout)
    assert code == 0 and info["default_model"] == "all-MiniLM-L6-v2"
    assert os.path.isdir(info["default_model_path"]) and info["torch"]
    code, stdout, _ = run(capsys, "--help")
    assert code == 0 and "tokenize" in stdout and "example" in stdout and "info" in stdout
    code, stdout, _ = run(capsys, "tokenize", "--help")
    for flag in ("--input", "--text-col", "--label-col", "--id-col", "--format", "--model",
                 "--max-length", "--truncation", "--ids", "--out"):
        assert flag in stdout


def test_help_is_light_and_python_m_works():
    code = ("import sys, quantformer.cli.main as c; c.build_parser(); "
            "print(sorted(m for m in ('torch', 'transformers', 'sklearn', 'xgboost', "
            "'matplotlib') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
    res = subprocess.run([sys.executable, "-m", "quantformer", "--version"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("quantformer ")


def test_usage_errors_exit_2(capsys, tmp_path):
    code, _, stderr = run(capsys, "no-such-verb")
    assert code == 2 and "invalid choice" in stderr
    code, _, stderr = run(capsys, "tokenize")
    assert code == 2 and "--input" in stderr
    code, _, stderr = run(capsys, "tokenize", "--input", "x.csv", "--truncation", "middle")
    assert code == 2
    # one line: the problem and where to get help, no usage block (R shows it as its error)
    code, _, stderr = run(capsys, "finetune", "--train", "x.csv", "--epochs", "0",
                          "--out", str(tmp_path / "m"))
    assert code == 2
    assert stderr.strip().splitlines() == [
        "quantformer finetune: error: argument --epochs: must be greater than 0, not 0 "
        "(see 'quantformer finetune --help')"]


def test_abbreviated_flags_are_refused_in_every_verb(capsys, tmp_path):
    """Review finding: `tune --epochs 2` was taken as `--epochs-grid 2` (argparse's
    abbreviations). Every parser refuses them now and names the flag meant."""
    from quantformer.cli.main import build_parser

    def parsers(p):
        yield p
        for action in p._actions:
            if isinstance(action.choices, dict):  # the verbs' sub-parsers
                for sub in action.choices.values():
                    yield from parsers(sub)

    found = list(parsers(build_parser()))
    assert len(found) > 15 and all(p.allow_abbrev is False for p in found)
    code, _, stderr = run(capsys, "tune", "--train", "x.csv", "--epochs", "2",
                          "--out", tmp_path / "t")
    assert code == 2 and stderr.strip().splitlines() == [
        "quantformer tune: error: unrecognized arguments: --epochs 2 (did you mean "
        "--epochs-grid?) (see 'quantformer tune --help')"]
    code, _, stderr = run(capsys, "predict", "--model", "m", "--input", "x.csv",
                          "--out", tmp_path / "p.csv", "--batch", "8")
    assert code == 2 and "--batch 8 (did you mean --batch-size?)" in stderr
    code, _, stderr = run(capsys, "predict", "--model", "m", "--input", "x.csv",
                          "--out", tmp_path / "p.csv", "--zzz")
    assert code == 2 and "unrecognized arguments: --zzz (see" in stderr
    assert not (tmp_path / "t").exists() and not (tmp_path / "p.csv").exists()


def test_unknown_output_extension_names_the_fix(capsys, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("text\none\n", encoding="utf-8")
    code, _, stderr = run(capsys, "tokenize", "--input", f, "--out", tmp_path / "o.xlsx")
    assert code == 2
    assert "is not an output format; name the output file with one of" in stderr
    assert ".parquet" in stderr and "--format" not in stderr


@pytest.fixture
def corpus_csv(tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("doc_id,body,stance\na,one,x\nb,two,y\n", encoding="utf-8")
    return f


def _bad(capsys, tmp_path, args, *messages, out_name="out.parquet"):
    out = tmp_path / out_name
    code, stdout, stderr = run(capsys, *args, "--out", out)
    assert code == 2, stderr
    for m in messages:
        assert m in stderr, stderr
    assert stderr.startswith(f"quantformer {args[0]}: error: ")
    assert not out.exists()
    assert not any(p.name.startswith(f".{out_name}.") for p in tmp_path.iterdir())
    return stderr


def test_bad_inputs_exit_2_and_leave_no_output(capsys, tmp_path, corpus_csv):
    _bad(capsys, tmp_path, ["tokenize", "--input", tmp_path / "missing.csv"],
         "file not found:", "missing.csv")
    (tmp_path / "x.xlsx").write_text("x")
    _bad(capsys, tmp_path, ["tokenize", "--input", tmp_path / "x.xlsx"],
         "cannot tell the format of", "'.xlsx'", "--format")
    (tmp_path / "empty.csv").write_text("")
    _bad(capsys, tmp_path, ["tokenize", "--input", tmp_path / "empty.csv"],
         "is empty: it has no documents")
    _bad(capsys, tmp_path, ["tokenize", "--input", corpus_csv],
         "has no 'text' column; its columns are: doc_id, body, stance", "--text-col")
    _bad(capsys, tmp_path, ["tokenize", "--input", corpus_csv, "--text-col", "body",
                            "--label-col", "Stance"],
         "label column 'Stance' is not in", "its columns are: doc_id, body, stance")
    dup = tmp_path / "dup.tsv"
    dup.write_text("doc_id\ttext\nd1\ta\nd2\tb\nd1\tc\nd2\td\n", encoding="utf-8")
    _bad(capsys, tmp_path, ["tokenize", "--input", dup],
         "doc_ids must be unique", "repeats 2 id(s), first: 'd1', 'd2'")
    _bad(capsys, tmp_path, ["tokenize", "--input", corpus_csv, "--text-col", "body",
                            "--max-length", "1000"],
         "--max-length 1000 is above this model's limit of 512 tokens")
    _bad(capsys, tmp_path, ["tokenize", "--input", corpus_csv, "--text-col", "body"],
         "is not an output format", out_name="out.xlsx")
    _bad(capsys, tmp_path, ["tokenize", "--input", corpus_csv, "--text-col", "body",
                            "--model", tmp_path / "no" / "model"], "model folder not found")
    _bad(capsys, tmp_path, ["example", "sotu", "--since", "2100"],
         "no State of the Union paragraphs match these filters")


def test_label_column_all_missing(capsys, tmp_path):
    f = tmp_path / "nolabels.csv"
    f.write_text("text,code\none,\ntwo,NA\nthree,\n", encoding="utf-8")
    # a verb that needs labels refuses the file ...
    out = tmp_path / "model"
    code, _, stderr = run(capsys, "finetune", "--train", f, "--label-col", "code", "--out", out)
    assert code == 2 and "every value of the label column 'code'" in stderr
    assert not out.exists()
    # ... one that does not warns
    code, _, stderr = run(capsys, "tokenize", "--input", f, "--label-col", "code")
    assert code == 0 and "warning: every value of the label column 'code'" in stderr


def test_internal_errors_exit_1(capsys, monkeypatch, tmp_path):
    import quantformer.models.tokenize as tokenization

    def boom(*a, **k):
        raise RuntimeError("kaput")

    monkeypatch.setattr(tokenization, "token_stats", boom)
    f = tmp_path / "c.txt"
    f.write_text("one doc\n")
    out = tmp_path / "o.csv"
    code, _, stderr = run(capsys, "tokenize", "--input", f, "--out", out)
    assert code == 1 and not out.exists()
    assert "quantformer tokenize: internal error: RuntimeError: kaput" in stderr
    assert "--debug" in stderr and "Traceback" not in stderr
    code, _, stderr = run(capsys, "--debug", "tokenize", "--input", f)
    assert code == 1 and "Traceback" in stderr


def test_warnings_show_on_every_in_process_run(capsys, tmp_path):
    f = tmp_path / "legacy.txt"
    f.write_bytes("Grüße aus Köln\n".encode("cp1252"))
    for _ in range(2):
        code, _, stderr = run(capsys, "tokenize", "--input", f)
        assert code == 0
        assert f"warning: {f} is not valid UTF-8; read it as cp1252" in stderr


def test_positive_names_the_expected_kind():
    import argparse

    from quantformer.cli._options import positive

    assert positive(int)("3") == 3 and positive(float)("0.25") == 0.25
    for kind, value, msg in [(int, "1.5", "'1.5' is not an integer"),
                             (int, "two", "'two' is not an integer"),
                             (float, "x", "'x' is not a number"),
                             (int, "0", "must be greater than 0, not 0"),
                             (float, "-1", "must be greater than 0, not -1")]:
        with pytest.raises(argparse.ArgumentTypeError) as e:
            positive(kind)(value)
        assert str(e.value) == msg


def test_bad_positive_flag_message_through_the_cli(capsys, tmp_path):
    args = ["finetune", "--train", "x.csv", "--epochs", "1.5", "--out", str(tmp_path / "m")]
    assert main(args) == 2
    assert "argument --epochs: '1.5' is not an integer" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("value", ["-1e-5", "-2E-5", "-.5", "-3"])
def test_negative_numbers_are_values_not_options(capsys, tmp_path, value):
    # argparse's own pattern misses scientific notation: "--lr -1e-5" said "expected one
    # argument"; now it reaches the check and gets the real message
    args = ["finetune", "--train", "x.csv", "--lr", value, "--out", str(tmp_path / "m")]
    assert main(args) == 2
    assert f"argument --lr: must be greater than 0, not {value}" in capsys.readouterr().err


@pytest.mark.parametrize("verb,flag,value,msg", [
    ("compare", "--lr", "-1e-5", "must be greater than 0, not -1e-5"),
    ("compare", "--repeats", "1.5", "'1.5' is not an integer"),
    ("compare", "--max-length", "0", "must be a whole number of tokens of at least 8 (special "
                                     "tokens included), not 0"),
    ("tune", "--batch-size", "0", "must be greater than 0, not 0"),
])
def test_compare_and_tune_check_numbers_before_any_work(capsys, tmp_path, verb, flag, value,
                                                        msg):
    args = [verb, "--train", "a.csv", "--out", str(tmp_path / "o"), flag, value]
    if verb == "compare":
        args += ["--test", "b.csv"]
    assert main(args) == 2
    err = capsys.readouterr()
    assert f"argument {flag}: {msg}" in err.err
    assert "runs" not in err.out  # refused before the plan is printed
    assert not (tmp_path / "o").exists()


def test_errors_name_the_flag_or_the_r_argument(capsys, tmp_path):
    """One table (quantformer._core.parameters) names a library parameter as a flag, or as the
    R argument of the calling function when R passes --r-names."""
    from quantformer._core.errors import InputError
    from quantformer._core.parameters import cli_flag, r_argument

    error = InputError("{label_col} names no column; {max_length} too small",
                       params=["label_col", "max_length"])
    assert str(error) == "label_col names no column; max_length too small"
    assert error.render(cli_flag) == "--label-col names no column; --max-length too small"
    assert error.render(lambda p: r_argument(p, ["x", "y", "max_length"])) == \
        "`y` names no column; `max_length` too small"
    assert r_argument("overwrite", ["x", "..."]) == "`overwrite = TRUE`"
    assert r_argument("overwrite", ["x", "overwrite"]) == "`overwrite = TRUE`"


def test_messages_in_flags_name_the_r_arguments(capsys):
    """Messages of the command-line layer itself (argparse's) name R's arguments when R passes
    --r-names; flags without an R argument stay."""
    from quantformer._core.parameters import r_flags

    r_args = ["x", "y", "max_length", "output_dir", "folds", "..."]
    assert r_flags("'m' exists; pass --overwrite or choose another --out", r_args) == \
        "'m' exists; pass `overwrite = TRUE` or choose another `output_dir`"
    assert r_flags("--max-length 1024 is above the limit; use --folds 3, or --label-col",
                   r_args) == "`max_length` 1024 is above the limit; use `folds` 3, or `y`"
    assert r_flags("see --train, --text-col, --seed", r_args + ["text_field"]) == \
        "see `x`, `text_field`, --seed"
    assert r_flags("no column 'k' in --input", ["object", "newdata"]) == \
        "no column 'k' in `newdata`"
    code, _, stderr = run(capsys, "--r-names", "x,y,max_length,output_dir", "finetune",
                          "--train", "t.csv", "--out", "m", "--max-length", "0")
    assert code == 2
    assert ("error: argument `max_length`: must be a whole number of tokens of at least 8 "
            "(special tokens included), not 0") in stderr


def test_a_corpus_without_ids_is_numbered_with_one_notice_a_run(capsys, tmp_path):
    """Issue 36: a corpus without ids got text1..N silently."""
    f = tmp_path / "no_ids.csv"
    pd.DataFrame({"id": ["a", "b", "c"], "text": ["one", "two", "three"]}).to_csv(f, index=False)
    out = tmp_path / "tok.csv"
    for _ in range(2):  # every in-process run says it again, once
        code, _, stderr = run(capsys, "tokenize", "--input", f, "--out", out)
        assert code == 0
        notices = [line for line in stderr.splitlines() if "text1..textN" in line]
        assert notices == [
            f"quantformer: warning: '{f}' has no id column ('doc_id', the column read as "
            "document ids unless --id-col names another): its 3 documents are named "
            "text1..textN by their position, as quanteda names them. To keep ids of your own, "
            "name their column with --id-col; if the column 'id' holds them, pass it as --id-col"]
        assert pd.read_csv(out)["doc_id"].tolist() == ["text1", "text2", "text3"]
    # as R names it
    code, _, stderr = run(capsys, "--r-names", "x,docid_field", "tokenize", "--input", f)
    assert "name their column with `docid_field`" in stderr
    # ids named: silent
    code, _, stderr = run(capsys, "tokenize", "--input", f, "--id-col", "id", "--out", out)
    assert code == 0 and "text1..textN" not in stderr
    assert pd.read_csv(out)["doc_id"].tolist() == ["a", "b", "c"]
