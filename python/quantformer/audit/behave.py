"""Behavioural tests of a fine-tuned classifier (the ideas of CheckList, Ribeiro et al. 2020).

Three kinds of test:

* **invariance** (``expect="same"``): a perturbation that should not change the prediction
  (a typo, another name, another city, another number, punctuation); a failure is a document
  whose predicted class changes.
* **directional** (``expect="up:CLASS"`` / ``"down:CLASS"``): a perturbation that should move
  the probability of CLASS one way (e.g. adding a negation should lower ``favor``); a failure
  is a document whose probability of CLASS moves the other way by more than ``tolerance``
  (0.1, CheckList's ``Monotonic`` default).
* **minimum functionality** (``expect="label"``): short texts with the label they must get,
  given as a corpus with a label column or as a template (``"I {verb} it"``) filled with
  every combination of the given words; a failure is a text predicted otherwise.

The perturbations (English built-ins, and ``substitutions`` from a user's list of ``from -> to``
pairs) are :mod:`quantformer.audit.perturb`. A perturbation that does not apply to a document
(no name in it) leaves the document out of the test's ``n``.

Each test reports ``n``, the failures, ``fail_rate`` with a Wilson 95 % interval
(:func:`quantformer.score.proportion.wilson_interval`) and up to ``max_examples`` failing
examples (original, perturbed, both predictions).
"""

from __future__ import annotations

import itertools
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN, PREDICTED_COLUMN, TEXT_COLUMN
from ..models.tokenize import TruncationWarning
from ..score.proportion import wilson_interval
from .perturb import (  # noqa: F401 (the perturbations' names, importable from here as before)
    LOCATIONS, NAMES, NEGATION_SKIPS, PERTURBATIONS, negate, negation, numbers, perturbation,
    punctuation, substitute, typo, unnegate)

#: the expectation of a minimum functionality test: each text gets a given label
EXPECT_LABEL = "label"
#: the field of a tests file that gives that label (for a template's texts)
LABEL_FIELD = "label"
TOLERANCE = 0.1
MAX_EXAMPLES = 20
#: passing pairs a perturbation test shows beside its failures (what the perturbation did)
PASSED_EXAMPLES = 3
#: a directional change smaller than this (either way) counts as "did not move"
UNMOVED = 0.01


# ------------------------------------------------------------------------------------------
# tests


@dataclass
class BehaviourTest:
    """One test: a perturbation and what it should do, or a minimum-functionality test.

    Attributes:
        name: shown in the output.
        expect: ``same``, ``up:CLASS``, ``down:CLASS`` or ``label`` (minimum functionality).
        perturb: a name of :data:`PERTURBATIONS` (None for ``label``).
        substitutions: ``(from, to)`` pairs for ``perturb="substitutions"``.
        template, fill: a minimum-functionality template (``"I {verb} it"``) and the words of
            each placeholder (``{"verb": ["love", "like"]}``); without them, the corpus's
            ``label`` column gives the expected labels.
        label: the class every filled template must get.
        tolerance: directional tests: the largest move the wrong way that still passes.
        preserve_case: substitutions match any case and keep the case of the word replaced.
        min_change: directional tests: the least move the expected way that passes (a
            probability, 0-1); None: only ``tolerance`` applies (a move of 0 passes).
    """

    name: str
    expect: str
    perturb: str | None = None
    substitutions: list = field(default_factory=list)
    template: str | None = None
    fill: dict = field(default_factory=dict)
    label: str | None = None
    tolerance: float = TOLERANCE
    preserve_case: bool = False
    min_change: float | None = None

    def check(self, labels: list[str]) -> None:
        """Raises InputError for an expectation or class that does not fit the model."""
        kind, _, cls = self.expect.partition(":")
        directional = kind in ("up", "down")
        if kind not in ("same", "up", "down", EXPECT_LABEL) or directional != bool(cls):
            raise InputError(f"{{expect}} '{self.expect}' (test '{self.name}') is unknown; use "
                             "same, up:CLASS, down:CLASS or label", params=["expect"])
        for c in [cls] * bool(cls) + [self.label] * (self.label is not None):
            if c not in labels:
                raise InputError(f"'{c}' (test '{self.name}') is not a class of the model; its "
                                 f"classes are: {', '.join(labels)}", params=["expect"])
        if kind == EXPECT_LABEL:
            if self.template is not None and self.label is None:
                raise InputError(f"test '{self.name}': a template needs the label its texts "
                                 "must get", params=[LABEL_FIELD])
            return
        if self.perturb is None:
            raise InputError(f"test '{self.name}': {{expect}} '{self.expect}' compares a text "
                             "with a changed copy: give {perturb} (one of: "
                             f"{', '.join(PERTURBATIONS)})", params=["expect", "perturb"])
        perturbation(self.perturb, self.substitutions)
        if self.min_change is not None and (kind == "same" or not 0 < self.min_change <= 1):
            raise InputError(f"test '{self.name}': {{min_change}} {self.min_change} applies to "
                             "directional tests (up:/down:) and is a probability in (0, 1]",
                             params=["min_change"])


def templates(template: str, fill: dict) -> list[str]:
    """Every filling of ``template``'s ``{placeholders}`` with the words in ``fill``.

    Raises:
        InputError: a placeholder without words.
    """
    keys = re.findall(r"{(\w+)}", template)
    missing = [k for k in dict.fromkeys(keys) if not fill.get(k)]
    if missing:
        raise InputError(f"the template '{template}' has no words for {', '.join(missing)}; "
                         "give them with fill", params=["fill"])
    keys = list(dict.fromkeys(keys))
    return [template.format(**dict(zip(keys, combo)))
            for combo in itertools.product(*(fill[k] for k in keys))]


def _result(test: BehaviourTest, n: int, fails: list[dict], max_examples: int,
            passes: list[dict] | None = None) -> dict:
    lo, hi = wilson_interval(len(fails), n)
    out = {"name": test.name, "type": _kind(test), "perturb": test.perturb,
           "expect": test.expect, "n": n, "n_fail": len(fails),
           "fail_rate": len(fails) / n if n else None, "ci_lower": None if n == 0 else lo,
           "ci_upper": None if n == 0 else hi, "interval": "Wilson 95%",
           "failures": fails[:max_examples]}
    if passes is not None:  # what the perturbation did, also when nothing failed
        out["passed_examples"] = passes[:PASSED_EXAMPLES]
    return out


def _kind(test: BehaviourTest) -> str:
    kind = test.expect.partition(":")[0]
    return {"same": "invariance", EXPECT_LABEL: "minimum functionality"}.get(kind, "directional")


def _pred(labels, p) -> dict:
    return {PREDICTED_COLUMN: labels[int(np.argmax(p))],
            "probabilities": {c: round(float(v), 6) for c, v in zip(labels, p)}}


def run_perturbation(clf, frame: pd.DataFrame, test: BehaviourTest, seed: int = 1,
                     max_examples: int = MAX_EXAMPLES, progress: bool = False) -> dict:
    """An invariance or directional test over the documents of ``frame`` (``progress``: tqdm
    bars of the predictions on stderr)."""
    rng = np.random.default_rng(seed)
    f = perturbation(test.perturb, test.substitutions, test.preserve_case)
    rows, skipped = [], {}
    for doc_id, text in zip(frame["doc_id"], frame["text"]):
        new = f(text, rng) if isinstance(text, str) and text.strip() else None
        if new is not None and new != text:
            rows.append((doc_id, text, new))
            continue
        why = ("an empty text" if not (isinstance(text, str) and text.strip()) else
               getattr(f, "why", lambda t: "the perturbation does not apply")(text))
        skipped[why] = skipped.get(why, 0) + 1
    if not rows:
        return {**_result(test, 0, [], max_examples), "n_skipped": sum(skipped.values()),
                "skipped": skipped}
    before = clf.predict_proba([r[1] for r in rows], batch_size=32, progress=progress)
    # truncation is counted on the corpus's documents (above); their perturbed copies would
    # count each document twice
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        after = clf.predict_proba([r[2] for r in rows], batch_size=32, progress=progress)
    kind, _, cls = test.expect.partition(":")
    if kind == "same":
        bad = before.argmax(axis=1) != after.argmax(axis=1)
        change = None
    else:
        j = clf.labels.index(cls)
        move = after[:, j] - before[:, j]
        bad = _directional_fails(move, kind, test)
        change = change_summary(move)
    def example(i):
        return {"doc_id": str(rows[i][0]), "original": rows[i][1], "perturbed": rows[i][2],
                "original_prediction": _pred(clf.labels, before[i]),
                "perturbed_prediction": _pred(clf.labels, after[i])}

    fails = [example(i) for i in np.flatnonzero(bad)]
    passes = [example(i) for i in np.flatnonzero(~bad)[:PASSED_EXAMPLES]]
    out = _result(test, len(rows), fails, max_examples, passes)
    out.update({"n_skipped": sum(skipped.values()), "skipped": skipped})
    if change is not None:
        out.update({"change": change, "min_change": test.min_change})
    return out


def _directional_fails(move: np.ndarray, kind: str, test: BehaviourTest) -> np.ndarray:
    """Which moves fail: the wrong way by more than ``tolerance``, or (with ``min_change``)
    less than ``min_change`` the expected way."""
    sign = 1.0 if kind == "up" else -1.0
    if test.min_change is not None:
        return sign * move < test.min_change
    return sign * move < -test.tolerance


def change_summary(move: np.ndarray) -> dict:
    """The distribution of the changes in the expected class's probability: mean with a 95%
    normal-approximation interval (mean +- 1.96 standard errors), median, and the share of
    documents that moved less than :data:`UNMOVED` either way."""
    n = len(move)
    mean = float(np.mean(move))
    se = float(np.std(move, ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return {"mean": mean, "ci_lower": mean - 1.96 * se if n > 1 else None,
            "ci_upper": mean + 1.96 * se if n > 1 else None, "median": float(np.median(move)),
            "share_unmoved": float(np.mean(np.abs(move) < UNMOVED)), "unmoved_below": UNMOVED,
            "interval": "normal 95%"}


def run_minimum(clf, frame: pd.DataFrame | None, test: BehaviourTest,
                max_examples: int = MAX_EXAMPLES, progress: bool = False) -> dict:
    """A minimum-functionality test: the filled template's texts (or the corpus's labelled
    documents) must get their label (``progress``: a tqdm bar of the predictions)."""
    if test.template is not None:
        texts = templates(test.template, test.fill)
        expected = [test.label] * len(texts)
    else:
        if frame is None or LABEL_COLUMN not in frame.columns:
            raise InputError(f"test '{test.name}' (expect label) needs a template or a corpus "
                             "with a label column", params=["input"])
        keep = frame[LABEL_COLUMN].notna() & frame[TEXT_COLUMN].notna()
        texts = frame.loc[keep, TEXT_COLUMN].tolist()
        expected = frame.loc[keep, LABEL_COLUMN].astype(str).tolist()
    probs = clf.predict_proba(texts, batch_size=32, progress=progress) if texts \
        else np.zeros((0, 1))
    fails = [{"text": texts[i], "expected": expected[i], "prediction": _pred(clf.labels, p)}
             for i, p in enumerate(probs) if clf.labels[int(np.argmax(p))] != expected[i]]
    return _result(test, len(texts), fails, max_examples)


def run_tests(clf, frame: pd.DataFrame | None, tests: list[BehaviourTest], seed: int = 1,
              max_examples: int = MAX_EXAMPLES, progress: bool = False) -> list[dict]:
    """Run ``tests`` (checked first) with a classifier; one result dict per test.

    Args:
        progress: tqdm bars on stderr: one over the tests (several tests), one over each
            test's predictions.
    """
    from tqdm.auto import tqdm

    if clf.task.name != "classification":
        raise InputError(f"behave tests classifiers; this is a {clf.task.name} model")
    for t in tests:
        t.check(clf.labels)
        if t.expect != EXPECT_LABEL and frame is None:
            raise InputError(f"test '{t.name}' perturbs documents: give a corpus",
                             params=["input"])
    out = []
    for t in tqdm(tests, desc="behavioural tests", unit="test", leave=False,
                  disable=not progress or len(tests) < 2):
        if t.expect == EXPECT_LABEL:
            out.append(run_minimum(clf, frame, t, max_examples, progress))
        else:
            out.append(run_perturbation(clf, frame, t, seed, max_examples, progress))
    return out


def summary(results: list[dict]) -> pd.DataFrame:
    """One row per test: name, type, n, n_fail, fail_rate, ci_lower, ci_upper."""
    cols = ["name", "type", "expect", "n", "n_fail", "fail_rate", "ci_lower", "ci_upper"]
    return pd.DataFrame([{c: r[c] for c in cols} for r in results], columns=cols)


# ------------------------------------------------------------------------------------------
# suite files


def read_substitutions(path, where: str | None = None) -> list[tuple[str, str]]:
    """``(from, to)`` pairs from a CSV file with columns ``from`` and ``to`` (UTF-8).

    Args:
        path: the CSV file.
        where: the suite test that names the file (``"test 2 of 'suite.yaml'"``); its errors
            then name ``suite``, else ``substitutions``.

    Raises:
        InputError: unreadable file, missing columns, or no pairs.
    """
    what, params = (f"{{substitutions}} '{path}'", ["substitutions"]) if where is None else \
        (f"the substitutions file '{path}' of {where} in {{suite}}", ["suite"])
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {what}: {exc}", params=params) from None
    if not {"from", "to"} <= set(df.columns) or not (df["from"] != "").any():
        raise InputError(f"{what} needs columns from and to and at least one pair (one a row, "
                         "from not empty)", params=params)
    return [(a, b) for a, b in zip(df["from"], df["to"]) if a]


def parse_fill(spec) -> dict:
    """``"verb=love|like;obj=it"`` (or a dict of lists) as ``{"verb": ["love", "like"], ...}``."""
    if isinstance(spec, dict):
        return {str(k): [str(x) for x in (v if isinstance(v, list) else [v])]
                for k, v in spec.items()}
    out = {}
    for part in filter(None, (spec or "").split(";")):
        key, _, words = part.partition("=")
        out[key.strip()] = [w.strip() for w in words.split("|") if w.strip()]
    return out


def _test_from(entry: dict, where: str, base) -> BehaviourTest:
    from pathlib import Path

    entry = {k: v for k, v in entry.items() if v is not None and not (
        isinstance(v, float) and np.isnan(v)) and v != ""}
    if "expect" not in entry:
        raise InputError(f"{where} has no 'expect'", params=["suite"])
    subs = entry.get("substitutions") or []
    if isinstance(subs, str):
        p = Path(subs)
        subs = read_substitutions(p if p.is_absolute() else Path(base).parent / p, where)
    elif isinstance(subs, dict):
        subs = list(subs.items())
    else:
        subs = [tuple(x) for x in subs]
    return BehaviourTest(name=str(entry.get("name", where)), expect=str(entry["expect"]),
                         perturb=entry.get("perturb"), substitutions=subs,
                         template=entry.get("template"), fill=parse_fill(entry.get("fill")),
                         label=None if entry.get(LABEL_FIELD) is None else str(entry[LABEL_FIELD]),
                         tolerance=float(entry.get("tolerance", TOLERANCE)),
                         preserve_case=str(entry.get("preserve_case", False)).lower()
                         in ("true", "1", "yes"),
                         min_change=None if entry.get("min_change") is None
                         else float(entry["min_change"]))


def read_suite(path) -> list[BehaviourTest]:
    """Tests from a suite file: YAML (a list of tests, or ``tests:`` with one) or CSV (one
    test a row). Keys/columns: ``name``, ``expect`` (required), ``perturb``,
    ``substitutions`` (YAML: a mapping or a list of pairs; both: a CSV file path, relative to
    the suite), ``template``, ``fill`` (YAML: a mapping of lists; CSV: ``verb=love|like;obj=it``),
    ``label``, ``tolerance``, ``min_change``, ``preserve_case`` (true/false).

    Raises:
        InputError: unreadable file or YAML syntax (one line: where and what), an unknown
            extension, an entry that is not a mapping, a test without ``expect``.
    """
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise InputError(f"suite file not found: '{path}'", params=["suite"])
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            what = getattr(exc, "problem", None) or type(exc).__name__
            raise InputError(f"'{path}' is not valid YAML{at}: {what}",
                             params=["suite"]) from None
        entries = data.get("tests") if isinstance(data, dict) else data
    elif p.suffix.lower() == ".csv":
        entries = pd.read_csv(p, dtype=str, keep_default_na=False).to_dict("records")
    else:
        raise InputError(f"suite file '{path}' must end in .yaml, .yml or .csv",
                         params=["suite"])
    if not entries or not isinstance(entries, list):
        raise InputError(f"suite file '{path}' has no tests", params=["suite"])
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise InputError(f"test {i + 1} of '{path}' is {e!r}, not a mapping: give each test "
                             "keys such as 'name: ...' and 'expect: ...'", params=["suite"])
    return [_test_from(dict(e), f"test {i + 1} of '{path}'", p) for i, e in enumerate(entries)]
