"""The perturbations of behavioural tests (:mod:`quantformer.audit.behave`): functions
``f(text, rng) -> str | None`` that change a text the way a test names, or None where the
change does not apply. They follow CheckList's (Ribeiro et al. 2020).

Built-in (English): ``typos`` (two adjacent letters of one word swapped), ``names``,
``locations`` (a first name or a place from a short list replaced by another), ``numbers``
(every number replaced by another), ``punctuation`` (the final punctuation removed, or ``!``
added), ``negation`` (the first statement negated by one grammatical rule: ``is`` -> ``is
not``, ``I like`` -> ``I do not like`` and similar, :func:`negation`), ``negation_removed``
(``not``/``n't``/``never`` removed). ``substitutions`` take a user list of ``from -> to``
pairs (any language), replaced as whole words (:func:`substitute`).
"""

from __future__ import annotations

import re

from .._core.errors import InputError

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
