"""quantformer behave: perturbations, invariance/directional/minimum-functionality tests."""

from __future__ import annotations

import json

import numpy as np
import pytest
from toydata import toy_frame

from quantformer._core.errors import InputError
from quantformer.cli.main import main
from quantformer.audit import behave as bh
from quantformer.audit import perturb as pt
from quantformer.score.proportion import wilson_interval
from quantformer.train.finetune import finetune


@pytest.fixture(scope="module")
def tuned(tiny_bert_dir, tmp_path_factory):
    clf = finetune(toy_frame(24), model=str(tiny_bert_dir), epochs=1, quiet=True, device="cpu",
                   max_length=64)
    return clf, clf.save(tmp_path_factory.mktemp("behave") / "model")


def rng():
    return np.random.default_rng(1)


def test_perturbations_on_known_texts():
    assert pt.negate("The law is fair and can stay.", rng()) == "The law is not fair and can stay."
    assert pt.negate("It IS fine", rng()) == "It IS not fine"
    assert pt.negate("Nothing here", rng()) is None  # negative already
    assert pt.unnegate("She can't go", rng()) == "She can go"
    assert pt.unnegate("He is not here", rng()) == "He is here"
    assert pt.unnegate("We never lie", rng()) == "We lie"
    assert pt.punctuation("Stop it!!", rng()) == "Stop it"
    assert pt.punctuation("Stop it", rng()) == "Stop it!"
    t = pt.typo("abortion rights", rng())
    diff = [i for i, (a, b) in enumerate(zip(t, "abortion rights")) if a != b]
    assert sorted(t) == sorted("abortion rights") and len(diff) == 2 and diff[1] == diff[0] + 1
    new = pt.perturbation("names")("John met Maryann", rng())
    assert new != "John met Maryann" and new.endswith(" met Maryann")
    assert pt.perturbation("names")("Johnny", rng()) is None  # whole words only
    assert pt.numbers("in 1999 and 7", rng()) != "in 1999 and 7"
    sub = pt.perturbation("substitutions", [("Steuern", "Abgaben")])
    assert sub("Die Steuern steigen; Steuern!", rng()) == "Die Abgaben steigen; Abgaben!"
    with pytest.raises(InputError, match="unknown"):
        pt.perturbation("shout")


def test_wilson_interval_known_values():
    z2 = 1.959963984540054 ** 2
    assert wilson_interval(0, 16) == (0.0, pytest.approx(z2 / (16 + z2)))
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(1 - hi) and hi == pytest.approx(0.7634, abs=1e-4)


def test_invariance_counts_changed_predictions(tuned):
    clf, _ = tuned
    frame = toy_frame(16)
    res = bh.run_perturbation(clf, frame, bh.BehaviourTest("p", "same", "punctuation"))
    perturbed = [pt.punctuation(t, None) for t in frame["text"]]
    changed = (clf.predict_proba(frame["text"].tolist()).argmax(1)
               != clf.predict_proba(perturbed).argmax(1))
    assert res["n"] == 16 and res["n_fail"] == int(changed.sum())
    shown = res["passed_examples"]
    assert len(shown) == min(3, 16 - int(changed.sum()))
    assert all(e["perturbed"] == pt.punctuation(e["original"], None) for e in shown)
    assert all(e["original_prediction"]["predicted"] == e["perturbed_prediction"]["predicted"]
               for e in shown)
    assert res["fail_rate"] == pytest.approx(changed.mean())
    assert (res["ci_lower"], res["ci_upper"]) == pytest.approx(wilson_interval(int(changed.sum()), 16))


def test_directional_tolerance_and_examples(tuned):
    clf, _ = tuned
    frame = toy_frame(12)
    n_applies = sum(pt.negate(t, None) is not None for t in frame["text"])
    loose = bh.run_perturbation(clf, frame, bh.BehaviourTest("n", "down:econ", "negation",
                                                             tolerance=1.0))
    strict = bh.run_perturbation(clf, frame, bh.BehaviourTest("n", "down:econ", "negation",
                                                              tolerance=-1.0))
    assert loose["n"] == strict["n"] == n_applies > 0
    assert loose["n_fail"] == 0 and strict["n_fail"] == n_applies
    ex = strict["failures"][0]
    assert ex["perturbed"] == pt.negate(ex["original"], None)
    p = clf.predict_proba([ex["original"]])[0]
    assert ex["original_prediction"]["probabilities"]["econ"] == pytest.approx(p[0], abs=1e-6)


def test_minimum_functionality_template(tuned):
    clf, _ = tuned
    t = bh.BehaviourTest("m", "label", template="The {a} is about {b}.",
                         fill={"a": ["speech", "text"], "b": ["taxes", "war", "jobs"]},
                         label="econ")
    res = bh.run_minimum(clf, None, t)
    texts = bh.templates(t.template, t.fill)
    assert len(texts) == res["n"] == 6 and "The text is about war." in texts
    wrong = [clf.labels[i] != "econ" for i in clf.predict_proba(texts).argmax(1)]
    assert res["n_fail"] == sum(wrong)


def test_suite_files_yaml_and_csv_agree(tmp_path):
    (tmp_path / "subs.csv").write_text("from,to\nSteuern,Abgaben\n", encoding="utf-8")
    (tmp_path / "s.yaml").write_text(
        "tests:\n- {name: neg, perturb: negation, expect: 'down:econ'}\n"
        "- {name: de, perturb: substitutions, substitutions: subs.csv, expect: same}\n"
        "- name: mft\n  expect: label\n  template: 'I {v} it'\n  fill: {v: [love, hate]}\n"
        "  label: econ\n", encoding="utf-8")
    (tmp_path / "s.csv").write_text(
        "name,perturb,expect,substitutions,template,fill,label\n"
        "neg,negation,down:econ,,,,\nde,substitutions,same,subs.csv,,,\n"
        "mft,,label,,I {v} it,v=love|hate,econ\n", encoding="utf-8")
    a, b = bh.read_suite(tmp_path / "s.yaml"), bh.read_suite(tmp_path / "s.csv")
    assert a == b and a[1].substitutions == [("Steuern", "Abgaben")]
    assert a[2].fill == {"v": ["love", "hate"]}


def test_cli_runs_one_test_and_a_suite(tuned, tmp_path, capsys):
    _, path = tuned
    toy_frame(10).to_csv(tmp_path / "c.csv", index=False)
    (tmp_path / "s.yaml").write_text(
        "- {name: neg, perturb: negation, expect: 'down:econ', tolerance: -1}\n"
        "- {name: typo, perturb: typos, expect: same}\n", encoding="utf-8")
    assert main(["behave", "--model", str(path), "--input", str(tmp_path / "c.csv"),
                 "--suite", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "r.json")]) == 0
    res = json.loads((tmp_path / "r.json").read_text())["tests"]
    assert [t["name"] for t in res] == ["neg", "typo"]
    assert res[0]["n_fail"] == res[0]["n"] > 0 and res[1]["n"] == 10
    out = capsys.readouterr().out
    assert "neg" in out
    # the precision line every verb that runs a model prints, as in the JSON
    used = json.loads((tmp_path / "r.json").read_text())["precision"]
    assert f"precision: {used['precision']} ({used['reason']})\n" in out


@pytest.mark.parametrize("flags, corpus", [
    (["--expect", "sideways"], "c.csv"),
    (["--expect", "up:nope", "--perturb", "typos"], "c.csv"),
    (["--expect", "same", "--perturb", "substitutions"], "c.csv"),
    (["--expect", "same", "--perturb", "typos"], "empty.csv"),
    (["--expect", "same", "--perturb", "typos"], "miss.csv"),
    ([], "c.csv"),
])
def test_cli_bad_input_exit_2_nothing_written(tuned, tmp_path, flags, corpus):
    _, path = tuned
    toy_frame(3).to_csv(tmp_path / "c.csv", index=False)
    (tmp_path / "empty.csv").write_text("doc_id,text\n")
    (tmp_path / "miss.csv").write_text("doc_id,text\na,\n")
    assert main(["behave", "--model", str(path), "--input", str(tmp_path / corpus),
                 "--out", str(tmp_path / "r.json"), *flags]) == 2
    assert not (tmp_path / "r.json").exists()


def test_truncation_is_counted_on_the_corpus_documents_not_their_copies(tuned):
    from quantformer.models.tokenize import TruncationWarning

    clf, _ = tuned
    frame = toy_frame(6)
    frame.loc[:2, "text"] = frame.loc[:2, "text"] + " and more" * 80  # 3 of 6 past 64 tokens
    with pytest.warns(TruncationWarning) as got:
        res = bh.run_perturbation(clf, frame, bh.BehaviourTest("p", "same", "punctuation"))
    counts = [str(w.message) for w in got if issubclass(w.category, TruncationWarning)]
    assert res["n"] == 6
    assert len(counts) == 1 and counts[0].startswith("3 of 6 document(s) truncated")


def test_substitutions_apply_every_pair_and_can_keep_case():
    """Issue 36, item 13: every pair, all matches, one pass; a case-preserving option."""
    pairs = [("God", "Allah"), ("Jesus", "Muhammad")]
    sub = pt.perturbation("substitutions", pairs)
    assert sub("God sent Jesus; Jesus wept", rng()) == "Allah sent Muhammad; Muhammad wept"
    assert sub("god sent jesus", rng()) is None  # case-sensitive without the option
    swap = pt.perturbation("substitutions", [("he", "she"), ("she", "he")])
    assert swap("he said she left", rng()) == "she said he left"  # one pass, no re-replacing
    keep = pt.perturbation("substitutions", pairs, preserve_case=True)
    assert keep("GOD sent jesus, God!", rng()) == "ALLAH sent muhammad, Allah!"


@pytest.mark.parametrize("text, needle", [
    ("tests:\n- just a string\n", "test 1 of .* is 'just a string', not a mapping"),
    ("tests:\n- {name: a, expect: same\n- b\n", r"not valid YAML at line \d+, column \d+"),
])
def test_suite_entry_not_a_mapping_and_yaml_errors_are_input_errors(tmp_path, text, needle):
    """Issue 36, item 14: an input error naming the entry; a YAML error in one line."""
    (tmp_path / "s.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=needle) as err:
        bh.read_suite(tmp_path / "s.yaml")
    assert "\n" not in str(err.value)


def test_a_perturbation_expectation_without_perturb_names_it():
    """Issue 36, item 18: expect='same' without perturb names perturb, not "'' is unknown"."""
    with pytest.raises(InputError, match="changed copy: give perturb") as err:
        bh.BehaviourTest(name="t", expect="same").check(["a", "b"])
    assert "''" not in str(err.value) and tuple(err.value.params) == ("expect", "perturb")


@pytest.mark.parametrize("text, expected, reason", [
    ("I can't stand it", None, "negative"),
    ("What do you think?", None, "question"),
    ("There is no hope for us.", None, "negative"),
    ("We won't go", None, "negative"),
    ("It cannot last", None, "negative"),
    ("The law is fair and can stay.", "The law is not fair and can stay.", ""),
    ("They can win", "They cannot win", ""),
    ("Taxes were high", "Taxes were not high", ""),
    ("I like it", "I do not like it", ""),
    ("She likes dogs.", "She does not like dogs.", ""),
    ("He watches TV", "He does not watch TV", ""),
    ("She tries hard", "She does not try hard", ""),
    ("He goes home", "He does not go home", ""),
    ("I have a dog", "I do not have a dog", ""),
    ("We have been there", "We have not been there", ""),
    ("I did it", "I did not do it", ""),
    ("It's fine", "It's not fine", ""),
    ("I'm happy", "I'm not happy", ""),
    ("I'll go", "I will not go", ""),
    ("They've gone home", "They have not gone home", ""),
    ("Why? I love it.", "Why? I do not love it.", ""),
    ("I went home", None, "no rule"),
    ("You wanted it", None, "no rule"),
    ("John's car", None, "no rule"),
    ("  ", None, "empty"),
])
def test_negation_is_grammatical_or_skipped_with_a_reason(text, expected, reason):
    """Issue 36, item 11: one rule where it applies grammatically; otherwise a reason."""
    assert pt.negation(text) == (expected, reason)
    assert pt.negate(text, rng()) == expected


def test_directional_reports_skips_change_distribution_and_min_change(tuned):
    """Issue 36, items 11 and 12: skipped documents counted by reason; the changes' mean with
    an interval and the share that did not move; min_change fails a test where nothing moves."""
    clf, _ = tuned
    frame = toy_frame(12)
    new = [pt.negate(t, None) for t in frame["text"]]
    keep = [i for i, x in enumerate(new) if x is not None]
    reasons = {}
    for i, x in enumerate(new):
        if x is None:
            why = pt.NEGATION_SKIPS[pt.negation(frame["text"][i])[1]]
            reasons[why] = reasons.get(why, 0) + 1
    res = bh.run_perturbation(clf, frame, bh.BehaviourTest("n", "up:econ", "negation"))
    assert res["n"] == len(keep) and res["n_skipped"] == 12 - len(keep) > 0
    assert res["skipped"] == reasons
    j = clf.labels.index("econ")
    move = (clf.predict_proba([new[i] for i in keep])[:, j]
            - clf.predict_proba([frame["text"][i] for i in keep])[:, j])
    ch = res["change"]
    se = move.std(ddof=1) / np.sqrt(len(move))
    assert ch["mean"] == pytest.approx(move.mean(), abs=1e-6)
    assert (ch["ci_lower"], ch["ci_upper"]) == pytest.approx(
        (move.mean() - 1.96 * se, move.mean() + 1.96 * se), abs=1e-6)
    assert ch["share_unmoved"] == pytest.approx(np.mean(np.abs(move) < 0.01))
    assert res["n_fail"] == int((move < -0.1).sum()) and res["min_change"] is None
    t = bh.BehaviourTest("n", "up:econ", "negation", min_change=0.05)
    strict = bh.run_perturbation(clf, frame, t)
    assert strict["n_fail"] == int((move < 0.05).sum()) and strict["min_change"] == 0.05
    with pytest.raises(InputError, match="min_change"):
        bh.BehaviourTest("n", "same", "negation", min_change=0.05).check(clf.labels)


@pytest.mark.parametrize("quiet", [False, True])
def test_cli_quiet_hides_progress_and_the_table_not_warnings(tuned, tmp_path, capsys, quiet):
    """behave --quiet, as the other verbs: no progress bars and no table; warnings still."""
    _, path = tuned
    frame = toy_frame(6)
    frame.loc[0, "text"] = frame.loc[0, "text"] + " and more" * 80  # past 64 tokens
    frame.to_csv(tmp_path / "c.csv", index=False)
    (tmp_path / "s.yaml").write_text(
        "- {name: typo, perturb: typos, expect: same}\n"
        "- {name: punct, perturb: punctuation, expect: same}\n", encoding="utf-8")
    assert main(["behave", "--model", str(path), "--input", str(tmp_path / "c.csv"),
                 "--suite", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "r.json"),
                 *(["--quiet"] if quiet else [])]) == 0
    out, err = capsys.readouterr()
    assert [t["n"] for t in json.loads((tmp_path / "r.json").read_text())["tests"]] == [6, 6]
    assert err.count("warning: 1 of 6 document(s) truncated to 64 tokens") == 2
    assert ("predicting" in err) is not quiet and ("behavioural tests" in err) is not quiet
    assert ("typo" in out) is not quiet
    assert "precision: " in out  # as predict prints it, --quiet or not


def test_substitutions_errors_name_the_flag_the_r_argument_or_the_suite(tuned, tmp_path,
                                                                        capsys):
    """Issue 36, item 18: the core's message names its parameter: --substitutions on the
    command line, `substitutions` for R (which calls it "the `substitutions` data frame"); a
    file named in a suite is the suite's."""
    _, path = tuned
    toy_frame(3).to_csv(tmp_path / "c.csv", index=False)
    (tmp_path / "bad.csv").write_text("a,b\nx,y\n", encoding="utf-8")
    (tmp_path / "blank.csv").write_text("from,to\n,y\n", encoding="utf-8")
    args = ["behave", "--model", str(path), "--input", str(tmp_path / "c.csv"), "--out",
            str(tmp_path / "r.json"), "--perturb", "substitutions", "--expect", "same"]
    for name in ("bad.csv", "blank.csv"):
        subs = str(tmp_path / name)
        assert main([*args, "--substitutions", subs]) == 2
        assert (f"error: --substitutions '{subs}' needs columns from and to and at least one "
                "pair") in capsys.readouterr().err
        assert main(["--r-names", "x,newdata,substitutions", *args, "--substitutions",
                     subs]) == 2
        assert f"error: `substitutions` '{subs}' needs columns" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()
    (tmp_path / "s.yaml").write_text(
        "- {name: de, perturb: substitutions, substitutions: bad.csv, expect: same}\n",
        encoding="utf-8")
    with pytest.raises(InputError, match="the substitutions file .*bad.csv' of test 1 of "
                                         ".*s.yaml' in suite needs columns") as err:
        bh.read_suite(tmp_path / "s.yaml")
    assert tuple(err.value.params) == ("suite",)
