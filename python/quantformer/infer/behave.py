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

Built-in perturbations (English): ``typos`` (two adjacent letters of one word swapped),
``names``, ``locations`` (a first name or a place from a short list replaced by another),
``numbers`` (every number replaced by another), ``punctuation`` (the final punctuation removed,
or ``!`` added), ``negation`` (``is`` -> ``is not`` and similar, added to the first verb that
takes it), ``negation_removed`` (``not``/``n't``/``never`` removed). ``substitutions`` take a
user list of ``from -> to`` pairs (any language), replaced as whole words. A perturbation that
does not apply to a document (no name in it) leaves the document out of the test's ``n``.

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
from ..models.tokenize import TruncationWarning
from ..score.proportion import wilson_interval

TOLERANCE = 0.1
MAX_EXAMPLES = 20
#: passing pairs a perturbation test shows beside its failures (what the perturbation did)
PASSED_EXAMPLES = 3
#: a directional change smaller than this (either way) counts as "did not move"
UNMOVED = 0.01

NAMES = ["John", "Mary", "James", "Patricia", "Michael", "Jennifer", "David", "Linda", "Ahmed",
         "Fatima", "Wei", "Mei", "Carlos", "Maria", "Kwame", "Aisha", "Ivan", "Olga"]
LOCATIONS = ["London", "Paris", "Berlin", "Chicago", "Texas", "California", "New York", "Lagos",
             "Tokyo", "Delhi", "Mexico", "Canada", "Brazil", "Ohio", "Florida", "Madrid"]
PERTURBATIONS = ("typos", "names", "locations", "numbers", "punctuation", "negation",
                 "negation_removed", "substitutions")


def _whole(word: str) -> str:
    return rf"(?<!\w){re.escape(word)}(?!\w)"


def _swap_one(text: str, choices: list[str], rng) -> str | None:
    found = [c for c in choices if re.search(_whole(c), text)]
    if not found:
        return None
    old = found[int(rng.integers(len(found)))]
    new = [c for c in choices if c != old][int(rng.integers(len(choices) - 1))]
    return re.sub(_whole(old), new, text)


def typo(text: str, rng) -> str | None:
    words = [m for m in re.finditer(r"[^\W\d_]{4,}", text)]
    if not words:
        return None
    m = words[int(rng.integers(len(words)))]
    i = m.start() + int(rng.integers(len(m.group()) - 1))
    return text[:i] + text[i + 1] + text[i] + text[i + 2:]


def numbers(text: str, rng) -> str | None:
    if not re.search(r"\d", text):
        return None
    return re.sub(r"\d+", lambda m: str(int(m.group()) + 1 + int(rng.integers(9))), text)


def punctuation(text: str, rng) -> str | None:
    stripped = text.rstrip()
    if stripped and stripped[-1] in ".!?":
        return stripped.rstrip(".!?")
    return stripped + "!"


_MODALS = {"can": "cannot", "could": "could not", "will": "will not", "would": "would not",
           "should": "should not", "must": "must not", "may": "may not", "might": "might not",
           "shall": "shall not"}
_BE = ("am", "is", "are", "was", "were")
_CONTRACTED = {"'m": "'m not", "'re": "'re not", "'s": "'s not", "'ll": " will not",
               "'ve": " have not"}
_NEGATIVE = re.compile(r"(?<!\w)(not|no|never|nothing|nobody|none|nowhere|neither|nor|"
                       r"cannot)(?!\w)|n't(?!\w)|n’t(?!\w)", re.IGNORECASE)
_PRONOUNS = {"i": "do", "you": "do", "we": "do", "they": "do",
             "he": "does", "she": "does", "it": "does"}
_NOT_VERBS = {"also", "always", "often", "really", "just", "still", "only", "never", "usually",
              "sometimes", "all", "both", "too", "who", "that", "and", "or", "but", "the", "a"}
# common irregular past forms: a pronoun + one of them has no do-support rule here
_IRREGULAR_PAST = set("""went said got made knew thought took saw came gave told felt became left
put meant kept let began seemed brought wrote stood heard ran sat paid met lost found held led sent
built spent fell grew won bought taught caught fought sold chose drove ate drank spoke broke forgot
woke wore hid hit cut shut set understood sang swam threw flew slept lay rode struck""".split())
# the word after a pronoun that do-support turns into a bare verb
_VERB = re.compile(r"(?<!\w)(I|you|we|they|he|she|it)\s+([a-z]+)(?!['’\w])", re.IGNORECASE)
_AUX = re.compile(r"(?<!\w)(" + "|".join([*_BE, *_MODALS]) + r")(?!['’\w])", re.IGNORECASE)
_CONTRACTION = re.compile(r"(?<=\w)(?P<c>'m|'re|'ll|'ve)(?!\w)"
                          r"|(?<!\w)(?:it|he|she|that|here|what)(?P<s>'s)(?!\w)",
                          re.IGNORECASE)
_HAVE = re.compile(r"(?<!\w)(have|has|had)\s+(been|got|gotten|\w+ed|\w+en)(?!\w)",
                   re.IGNORECASE)
#: why :func:`negate` left a text unchanged
NEGATION_SKIPS = {
    "empty": "an empty text",
    "question": "only questions (no statement to negate)",
    "negative": "its first statement is negative already",
    "no rule": "no auxiliary, copula or pronoun + present-tense verb to negate",
}


def _base_form(word: str) -> str:
    """The base form of a third-person present verb (``tries`` -> ``try``, ``watches`` ->
    ``watch``, ``goes`` -> ``go``, ``likes`` -> ``like``)."""
    w = word.lower()
    if w.endswith("ies") and len(w) > 4:
        return word[:-3] + "y"
    if re.search(r"(ch|sh|ss|x|z|o)es$", w):
        return word[:-2]
    return word[:-1]


def _statements(text: str) -> list[tuple[int, str]]:
    """``(offset, sentence)`` of the sentences of ``text`` that are not questions."""
    out = []
    for m in re.finditer(r"[^.!?]+[.!?]*", text):
        if m.group().strip() and not m.group().rstrip().endswith("?"):
            out.append((m.start(), m.group()))
    return out


def _negate_statement(sent: str) -> str | None:
    """``sent`` negated by one grammatical rule, or None where no rule applies."""
    found = [(m.start(), "aux", m) for m in [_AUX.search(sent)] if m]
    found += [(m.start(m.lastgroup), "contraction", m) for m in [_CONTRACTION.search(sent)]
              if m]
    found += [(m.start(), "have", m) for m in [_HAVE.search(sent)] if m]
    verb = _VERB.search(sent)
    if verb and verb.group(2).lower() not in _NOT_VERBS and not _AUX.fullmatch(verb.group(2)):
        found.append((verb.start(2), "do", verb))
    if not found:
        return None
    _, rule, m = min(found, key=lambda x: x[0])
    if rule == "aux":
        word = m.group(1)
        neg = _MODALS.get(word.lower(), word.lower() + " not")
        new = word + neg[len(word):]  # keep the case of the verb
    elif rule == "contraction":
        c = m.lastgroup
        return sent[:m.start(c)] + _CONTRACTED[m.group(c).lower()] + sent[m.end(c):]
    elif rule == "have":
        new = f"{m.group(1)} not {m.group(2)}"
    else:
        do, word = _PRONOUNS[m.group(1).lower()], m.group(2)
        if word.lower() in ("do", "does", "did"):  # "I do my best" -> "I do not do my best"
            do, word = word, "do"
        elif do == "does":
            if not word.lower().endswith("s") or word.lower().endswith("ss"):
                return None  # "he said", "it goes" handled; "she went" has no rule here
            word = _base_form(word)
        elif word.lower().endswith("ed") or word.lower() in _IRREGULAR_PAST:
            return None  # past tense: "did not" needs the verb's base form
        return sent[:m.start(2)] + f"{do} not " + word + sent[m.end(2):]
    return sent[:m.start()] + new + sent[m.end():]


def negation(text: str) -> tuple[str | None, str]:
    """``text`` with its first statement negated, and why not where it is not.

    Rules, in the order they occur in the first statement (questions are left alone):
    an auxiliary, copula or modal gets ``not`` (``is`` -> ``is not``, ``can`` -> ``cannot``);
    a contraction is expanded or negated (``it's`` -> ``it's not``, ``I'll`` -> ``I will
    not``); perfect ``have``/``has``/``had`` + participle gets ``not``; a pronoun with a
    present-tense verb gets do-support (``I like`` -> ``I do not like``, ``she likes`` ->
    ``she does not like``). A statement that is negative already (``not``, ``no``, ``never``,
    ``n't``, ...) is not negated twice. Returns ``(new text, "")`` or ``(None, reason)`` with a
    key of :data:`NEGATION_SKIPS`.
    """
    if not text.strip():
        return None, "empty"
    statements = _statements(text)
    if not statements:
        return None, "question"
    reason = "no rule"
    for start, sent in statements:
        if _NEGATIVE.search(sent):
            reason = "negative"
            break
        new = _negate_statement(sent)
        if new is not None:
            return text[:start] + new + text[start + len(sent):], ""
    return None, reason


def negate(text: str, rng) -> str | None:
    """The first statement negated grammatically (:func:`negation`), or None."""
    return negation(text)[0]


negate.why = lambda text: NEGATION_SKIPS[negation(text)[1]]


def unnegate(text: str, rng) -> str | None:
    """The first negation removed: ``not``, ``never``, ``n't`` (``can't`` -> ``can``)."""
    m = re.search(r"(?<!\w)(cannot|can't|won't)(?!\w)|\s+not(?!\w)|n't(?!\w)|(?<!\w)never\s+",
                  text, re.IGNORECASE)
    if not m:
        return None
    repl = {"cannot": "can", "can't": "can", "won't": "will"}.get((m.group(1) or "").lower(), "")
    return text[:m.start()] + repl + text[m.end():]


def _cased(new: str, old: str) -> str:
    """``new`` in the case pattern of ``old``: all capitals, capitalised, or as given."""
    if old.isupper() and len(old) > 1:
        return new.upper()
    if old[:1].isupper():
        return new[:1].upper() + new[1:]
    if old.islower():
        return new[:1].lower() + new[1:]
    return new


def substitute(pairs: list[tuple[str, str]], preserve_case: bool = False):
    """A perturbation that replaces every whole word ``from`` by its ``to``, all pairs at
    once (one pass, so a ``to`` is never replaced again; longer ``from`` first).

    With ``preserve_case`` the match ignores case and each replacement takes the case pattern
    of the word it replaces (``GOD`` -> ``ALLAH``, ``god`` -> ``allah``); without it the match
    is case-sensitive and ``to`` is written as given. ``None`` when no ``from`` occurs.
    """
    table = {(o.lower() if preserve_case else o): n for o, n in pairs}
    olds = sorted((o for o, _ in pairs), key=len, reverse=True)
    pat = re.compile("|".join(_whole(o) for o in olds), re.IGNORECASE if preserve_case else 0)

    def repl(m):
        new = table[m.group().lower() if preserve_case else m.group()]
        return _cased(new, m.group()) if preserve_case else new

    def perturb(text: str, rng) -> str | None:
        new, n = pat.subn(repl, text)
        return new if n else None
    return perturb


def perturbation(name: str, substitutions: list | None = None, preserve_case: bool = False):
    """The perturbation function ``f(text, rng) -> str | None`` called ``name``
    (``preserve_case``: see :func:`substitute`).

    Raises:
        InputError: an unknown name, or ``substitutions`` without pairs.
    """
    table = {"typos": typo, "numbers": numbers, "punctuation": punctuation,
             "negation": negate, "negation_removed": unnegate,
             "names": lambda t, r: _swap_one(t, NAMES, r),
             "locations": lambda t, r: _swap_one(t, LOCATIONS, r)}
    if name == "substitutions":
        if not substitutions:
            raise InputError("{perturb} substitutions needs a list of replacements: give "
                             "{substitutions} (a CSV file with columns from,to)",
                             params=["perturb", "substitutions"])
        return substitute(substitutions, preserve_case)
    if name not in table:
        raise InputError(f"{{perturb}} '{name}' is unknown; use one of: "
                         f"{', '.join(PERTURBATIONS)}", params=["perturb"])
    return table[name]


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
        if kind not in ("same", "up", "down", "label") or (kind in ("up", "down")) != bool(cls):
            raise InputError(f"{{expect}} '{self.expect}' (test '{self.name}') is unknown; use "
                             "same, up:CLASS, down:CLASS or label", params=["expect"])
        for c in [cls] * bool(cls) + [self.label] * (self.label is not None):
            if c not in labels:
                raise InputError(f"'{c}' (test '{self.name}') is not a class of the model; its "
                                 f"classes are: {', '.join(labels)}", params=["expect"])
        if kind == "label":
            if self.template is not None and self.label is None:
                raise InputError(f"test '{self.name}': a template needs the label its texts "
                                 "must get", params=["label"])
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
    return {"same": "invariance", "label": "minimum functionality"}.get(kind, "directional")


def _pred(labels, p) -> dict:
    return {"predicted": labels[int(np.argmax(p))],
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
        if frame is None or "label" not in frame.columns:
            raise InputError(f"test '{test.name}' (expect label) needs a template or a corpus "
                             "with a label column", params=["input"])
        keep = frame["label"].notna() & frame["text"].notna()
        texts, expected = frame.loc[keep, "text"].tolist(), frame.loc[keep, "label"].astype(
            str).tolist()
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
        if t.expect != "label" and frame is None:
            raise InputError(f"test '{t.name}' perturbs documents: give a corpus",
                             params=["input"])
    out = []
    for t in tqdm(tests, desc="behavioural tests", unit="test", leave=False,
                  disable=not progress or len(tests) < 2):
        if t.expect == "label":
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
                         label=None if entry.get("label") is None else str(entry["label"]),
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
