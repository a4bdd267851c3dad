"""Label probabilities from the token log-probabilities an OpenAI-compatible server returns.

A chat-completions answer asked with ``logprobs: true, top_logprobs: k`` carries, for each
generated token, its log-probability and the ``k`` most likely tokens at that place
(``choices[0].logprobs.content``). :func:`label_probs` turns them into one probability per
codebook label, normalised over the labels, by this rule:

1. The label's place in the answer: after ``"label": "`` in a JSON answer, else at the first
   non-blank character (a bare label). The generated token holding that character is the
   first *label token*; any part of it before the label (``"`` merged into the token) must
   begin every candidate token too.
2. At the first label token, each candidate token names the labels whose text starts with
   it (or that it completes, followed by ``"`` or by an end token, :data:`END_TOKENS`). A
   candidate that names one label adds its probability (times that of the answer's tokens
   before it) to that label; several candidates may add to one label.
3. Labels whose first tokens collide (``pro`` and ``pro-life`` both start with ``pro``): when
   the answer took the shared token, the next generated token's candidates split them the
   same way, their probabilities multiplied by the shared token's, and so on until they
   part. When the answer did not take the shared token, only the labels' joint probability
   is known: each of them gets no probability (missing), and the other labels' probabilities
   still count that joint mass in their normalisation.
4. A label none of whose tokens is among the ``k`` candidates gets 0 (its probability is below
   the ``k``-th candidate's). The masses are divided by their sum over the labels.

This is the first-token rule of scoring classifiers through an API (the probability of the
label's first token, Brown et al. 2020, section 2; Ziems et al. 2024, section 3), extended
along the answer's own tokens where labels share first tokens. Nothing is guessed: where the
server gives no log-probabilities, the answer did not parse, or no label is among the
candidates, the result is ``None`` with the reason (see :data:`REASONS`).
"""

from __future__ import annotations

import math
import re

#: why a row has no probabilities (the ``probabilities_missing`` counts of annotate's record)
REASONS = {
    "no_logprobs": "the server returned no token log-probabilities (it ignores 'logprobs')",
    "not_requested": "log-probabilities were not asked for (top_logprobs = 0)",
    "unparsed": "the answer did not parse as a codebook label (or the body could not be read)",
    "failed": "the request failed past its retries (the row's reason says why)",
    "no_label_in_top": "no label's first token was among the top candidates",
    "misaligned": "the tokens' text did not match the answer",
}

#: the field of the JSON answer the model is asked for (``{"label": L}``)
ANSWER_FIELD = "label"
_JSON_LABEL = re.compile(rf'"{ANSWER_FIELD}"\s*:\s*"')
#: how servers spell the end of an answer in ``top_logprobs`` (the chat templates' end-of-turn
#: and end-of-sequence tokens of ChatML/Qwen, Llama 3, GPT-2, Llama 2/Mistral, Gemma, Phi-3)
END_TOKENS = frozenset({"", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>",
                        "</s>", "<eos>", "<end_of_turn>", "<|end|>"})


def _is_end(token: str) -> bool:
    return token in END_TOKENS


def _hits(text: str, labels: list[str], end: bool) -> list[str]:
    """The labels ``text`` (the label's characters so far) is a start of, or completes."""
    if end:
        return [lab for lab in labels if lab == text]
    return [lab for lab in labels if lab.startswith(text)
            or (text.startswith(lab) and text[len(lab):len(lab) + 1] == '"')]


def _label_start(raw: str) -> int:
    m = _JSON_LABEL.search(raw)
    return m.end() if m else len(raw) - len(raw.lstrip())


def label_probs(content: list[dict] | None, raw: str, labels: list[str]
                ) -> tuple[list[float | None] | None, str | None]:
    """Per-label probabilities from ``content`` (the server's ``logprobs.content``: dicts with
    ``token``, ``logprob`` and ``top_logprobs``) of the answer ``raw``, by the module's rule.

    Returns:
        ``(probs, None)``, ``probs`` in the order of ``labels`` (``None`` for labels whose
        first tokens collide off the answer's path), or ``(None, reason)``, a key of
        :data:`REASONS`.
    """
    if not content:
        return None, "no_logprobs"
    tokens = [str(t.get("token", "")) for t in content]
    text = "".join("" if _is_end(t) else t for t in tokens)
    if text.strip() != raw.strip():
        return None, "misaligned"
    start, pos, i = _label_start(text), 0, 0
    while i < len(tokens) and pos + len(tokens[i]) <= start:
        pos += len(tokens[i])
        i += 1
    if i == len(tokens):
        return None, "misaligned"
    skip = text[pos:start]
    mass: dict[str, float] = {}
    joint: list[tuple[list[str], float]] = []
    pending, done, path_lp = list(labels), "", 0.0
    for k in range(i, len(content)):
        step = content[k]
        nxt = None
        cands = list(step.get("top_logprobs") or [])
        if not any(c.get("token") == tokens[k] for c in cands):  # the answer's own token
            cands.append({"token": tokens[k], "logprob": step.get("logprob", -math.inf)})
        for cand in cands:
            tok = str(cand.get("token", ""))
            if not tok.startswith(skip):
                continue
            end = _is_end(tok)
            hit = _hits(done if end else done + tok[len(skip):], pending, end)
            p = math.exp(path_lp + float(cand["logprob"]))
            if len(hit) == 1:
                mass[hit[0]] = mass.get(hit[0], 0.0) + p
            elif hit and tok == tokens[k]:
                nxt = (hit, float(cand["logprob"]), tok[len(skip):])
            elif hit:
                joint.append((hit, p))
        if nxt is None:
            break
        pending, path_lp, done, skip = nxt[0], path_lp + nxt[1], done + nxt[2], ""
    else:
        if len(pending) > 1:
            joint.append((pending, math.exp(path_lp)))
    return _normalised(labels, mass, joint)


def _normalised(labels, mass, joint):
    """Divide by the total mass; labels known only jointly stay None."""
    total = sum(mass.values()) + sum(p for _, p in joint)
    if total <= 0:
        return None, "no_label_in_top"
    unknown = {lab for group, _ in joint for lab in group}
    return [None if lab in unknown else mass.get(lab, 0.0) / total for lab in labels], None
