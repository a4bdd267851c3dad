"""A coder behind an OpenAI-compatible chat-completions endpoint (:class:`EndpointLM`), and
the checks of what names it: the endpoint's URL, the API key's variable.

The label comes from structured output (a JSON schema whose ``label`` is an enum of the
codebook's labels); an answer that does not parse strictly is ``unparsed``, with the reason,
never guessed; a body that cannot be read (not JSON, no ``choices``) is ``unparsed`` too. A
document whose requests fail past their retries is ``failed`` with the reason, and the run goes
on (:class:`Answer`). ``Retry-After`` is honoured on a 429 or 503 (RFC 9110, section 10.2.3),
at most :data:`RETRY_AFTER_CAP` seconds. The API key is read only from the environment variable
the caller names; it is never printed, logged, cached or written, and a value given where the
variable's name belongs that looks like a key is refused without being shown. This module is
the only one that opens a network connection, and only to an http(s) endpoint given.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import os
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import NamedTuple

from .._core.errors import InputError
from .llm_probs import ANSWER_FIELD, label_probs

#: the longest wait, in seconds, a server's ``Retry-After`` is followed for (a longer one is
#: cut to it): a rate limit asks for seconds, and a day's wait is better spent failing the
#: document and retrying it in a later run
RETRY_AFTER_CAP = 60.0
#: how many characters of an unreadable answer are kept in its reason
SNIPPET = 80


def check_endpoint_url(endpoint: str) -> str:
    """``endpoint``, checked: an ``http://`` or ``https://`` URL with a host. Any other scheme
    (``file:``, ``ftp:``, none) is refused, as urllib would otherwise read files or speak FTP.

    Raises:
        InputError: another scheme, or no host; the message names the scheme only (a URL may
            carry credentials).
    """
    parts = urllib.parse.urlsplit(str(endpoint))
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        what = (f"a '{parts.scheme}:' URL" if "://" in str(endpoint) and parts.scheme
                else "a URL without http:// or https://")
        if parts.scheme.lower() in ("http", "https"):
            what = "a URL without a host"
        raise InputError(f"{{endpoint}} must be an http:// or https:// URL of an OpenAI-"
                         f"compatible server, not {what}; give its base URL, e.g. "
                         "http://127.0.0.1:11434/v1", params=["endpoint"])
    return endpoint


#: what an API key starts with at common providers (OpenAI, Anthropic, Hugging Face, GitHub,
#: Slack, AWS, Google, Groq, Stripe-like ``pk_``/``rk_``)
_KEY_PREFIXES = ("sk-", "sk_", "pk-", "pk_", "rk_", "hf_", "ghp_", "gho_", "github_pat_",
                 "xoxb-", "xoxp-", "akia", "aiza", "gsk_", "bearer ")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def looks_like_key(value: str) -> bool:
    """Whether ``value`` (given as an environment variable's name) looks like a secret: not a
    valid variable name, a key prefix of :data:`_KEY_PREFIXES`, or a long string mixing
    lower case, upper case and digits (24 characters or more), as keys are and names are not."""
    value = str(value)
    if not _ENV_NAME.fullmatch(value) or value.lower().startswith(_KEY_PREFIXES):
        return True
    mixed = (any(c.islower() for c in value) and any(c.isupper() for c in value)
             and any(c.isdigit() for c in value))
    return len(value) >= 24 and mixed


def check_key_name(api_key_env: str) -> str:
    """``api_key_env``, checked to be the name of an environment variable, never a key.

    Raises:
        InputError: the value looks like a key (:func:`looks_like_key`); the message never
            shows the value.
    """
    if looks_like_key(api_key_env):
        raise InputError("{api_key_env} takes the name of an environment variable that holds "
                         "the API key (e.g. OPENAI_API_KEY), not the key itself; the value "
                         "given looks like a key and is not shown. Set the variable to the key "
                         "(export OPENAI_API_KEY=... in a shell, Sys.setenv() in R) and give "
                         "its name",
                         params=["api_key_env"])
    return api_key_env


def check_api_key(api_key_env: str | None) -> str | None:
    """The API key from the environment variable named ``api_key_env`` (None when not named).

    Raises:
        InputError: ``api_key_env`` looks like a key (:func:`check_key_name`), or the variable
            is unset or empty.
    """
    if api_key_env is None:
        return None
    check_key_name(api_key_env)
    key = os.environ.get(api_key_env, "")
    if not key:
        raise InputError(f"{{api_key_env}}: the environment variable '{api_key_env}' is unset "
                         "or empty; set it to the endpoint's API key", params=["api_key_env"])
    return key


class EndpointLM:
    """A client of an OpenAI-compatible chat-completions endpoint.

    Args:
        endpoint: base URL, e.g. ``http://127.0.0.1:11434/v1``.
        model: the model name the server knows.
        api_key: the key (from :func:`check_api_key`); sent as a bearer token only.
        timeout: seconds per request (default 60).
        retries: attempts after a 429, 5xx or timeout (default 4), with exponential backoff
            and jitter.
        top_logprobs: candidates per token asked for (``logprobs: true``; default 20, the
            OpenAI maximum; 0 asks for none and leaves the probabilities missing).
        max_tokens: the longest answer in tokens (``max_tokens``; default None: the server's).

    Raises:
        InputError: (from :meth:`check`) the endpoint does not answer.
    """

    def __init__(self, endpoint: str, model: str, api_key: str | None = None,
                 timeout: float = 60.0, retries: int = 4, top_logprobs: int = 20,
                 max_tokens: int | None = None):
        self.endpoint = endpoint.rstrip("/")
        self.top_logprobs = int(top_logprobs)
        self.max_tokens = max_tokens
        self.name = model
        self._key = api_key
        self.timeout = timeout
        self.retries = retries

    def __repr__(self) -> str:  # never shows the key
        return f"EndpointLM(endpoint={self.endpoint!r}, model={self.name!r})"

    @property
    def identity(self) -> str:
        """What the answers depend on besides the prompt and the document: the endpoint, the
        model and the settings that change an answer (JSON; the cache's key; never the key)."""
        return json.dumps({"endpoint": self.endpoint, "model": self.name, "temperature": 0,
                           "top_logprobs": self.top_logprobs, "max_tokens": self.max_tokens},
                          sort_keys=True)

    def _open(self, path: str, body: dict | None = None) -> str:
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = "Bearer " + self._key
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.endpoint + path, data=data, headers=headers,
                                     method="GET" if body is None else "POST")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return resp.read().decode("utf-8", errors="replace")

    def check(self) -> None:
        """Ask the endpoint for its models once (before any work)."""
        try:
            json.loads(self._open("/models"))
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise InputError(f"{{endpoint}} '{self.endpoint}' does not answer ({reason}); "
                             "start the server or correct the URL",
                             params=["endpoint"]) from None

    def _body(self, messages: list[dict], labels: list[str]) -> dict:
        body = {"model": self.name, "messages": messages, "temperature": 0,
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": "code", "strict": True, "schema": {
                        "type": "object", "properties": {ANSWER_FIELD: {"type": "string",
                                                                       "enum": list(labels)}},
                        "required": [ANSWER_FIELD], "additionalProperties": False}}}}
        if self.top_logprobs > 0:
            body.update(logprobs=True, top_logprobs=self.top_logprobs)
        if self.max_tokens is not None:
            body["max_tokens"] = int(self.max_tokens)
        return body

    def code(self, messages: list[dict], labels: list[str]) -> "Answer":
        """The :class:`Answer` of one document; never raises for what one request meets.

        A 429, 5xx, timeout or lost connection is retried up to ``retries`` times, after the
        server's ``Retry-After`` on a 429/503 (:func:`retry_after_seconds`, at most
        :data:`RETRY_AFTER_CAP` seconds), else after exponential backoff with jitter (0.5 s
        doubling, at most 30 s, times 0.5 to 1.5). Past its retries, or on another HTTP error,
        the answer is ``failed`` with the last reason. A 200 body that is not JSON, or has no
        ``choices[0].message``, is ``unparsed`` with the reason (its first characters kept)."""
        body, retries, last = self._body(messages, labels), 0, None
        for attempt in range(self.retries + 1):
            wait = None
            try:
                text = self._open("/chat/completions", body)
                return read_answer(text, labels, self.top_logprobs, retries, last)
            except urllib.error.HTTPError as exc:
                reason = f"HTTP {exc.code} {exc.reason}".strip()
                if exc.code in (429, 503):
                    wait = retry_after_seconds(exc.headers.get("Retry-After"))
                elif exc.code < 500:
                    return Answer.failed(reason, retries, last)
            except (TimeoutError, urllib.error.URLError, OSError,
                    http.client.HTTPException) as exc:
                reason = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            if attempt == self.retries:
                tries = f"{attempt + 1} attempt" + ("s" if attempt else "")
                return Answer.failed(f"{reason} after {tries}", retries, reason)
            retries, last = retries + 1, reason
            time.sleep(wait if wait is not None
                       else min(30.0, 0.5 * 2 ** attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")  # pragma: no cover


class Answer(NamedTuple):
    """One document's answer from an endpoint.

    ``label`` (None unless ``status`` is ``coded``), ``raw`` (the answer's text, or the first
    characters of an unreadable body), ``probs`` (per label, from the log-probabilities, or
    None) and ``why`` (the key of :data:`~quantformer.models.llm_probs.REASONS` for missing
    probabilities), ``status`` (``coded``, ``unparsed`` or ``failed``), ``reason`` (why it is
    unparsed or failed; None when coded), ``retries`` (requests repeated) and ``last_retry``
    (the reason of the last one; None without retries).
    """

    label: str | None
    raw: str | None
    probs: list | None
    why: str | None
    status: str
    reason: str | None = None
    retries: int = 0
    last_retry: str | None = None

    @classmethod
    def failed(cls, reason: str, retries: int = 0, last: str | None = None) -> "Answer":
        return cls(None, None, None, "failed", "failed", reason, retries, last)

    @classmethod
    def unparsed(cls, raw, reason: str, retries: int = 0, last: str | None = None) -> "Answer":
        return cls(None, raw, None, "unparsed", "unparsed", reason, retries, last)


def read_answer(text: str, labels: list[str], top_logprobs: int = 0, retries: int = 0,
                last: str | None = None) -> Answer:
    """The :class:`Answer` of a chat-completions body ``text`` (an HTTP 200's)."""
    snippet = text[:SNIPPET].strip()
    try:
        reply = json.loads(text)
    except ValueError:
        return Answer.unparsed(text[:1000], f"the server's answer is not JSON: {snippet!r}",
                               retries, last)
    try:
        choice = reply["choices"][0]
        raw = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        return Answer.unparsed(text[:1000], "the server's answer has no choices[0].message "
                               f"(no choices): {snippet!r}", retries, last)
    label = parse_label(str(raw), labels)
    if label is None:
        return Answer.unparsed(raw, "the answer is not one of the codebook's labels", retries,
                               last)
    if top_logprobs <= 0:
        return Answer(label, raw, None, "not_requested", "coded", None, retries, last)
    probs, why = label_probs((choice.get("logprobs") or {}).get("content"), raw, labels)
    return Answer(label, raw, probs, why, "coded", None, retries, last)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds (RFC 9110, section 10.2.3): a
    number of seconds or an HTTP date (a date in the past: 0), at most
    :data:`RETRY_AFTER_CAP`; None when missing or unreadable (``now``: the time, default
    ``time.time()``)."""
    if value is None:
        return None
    value = str(value).strip()
    try:
        wait = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        wait = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(wait):
        return None
    return min(max(wait, 0.0), RETRY_AFTER_CAP)


def parse_label(raw: str, labels: list[str]) -> str | None:
    """The label of a strict answer: JSON ``{"label": L}`` or the bare label, L one of
    ``labels``; anything else None (never guessed)."""
    text = raw.strip()
    try:
        obj = json.loads(text)
        cand = obj.get(ANSWER_FIELD) if isinstance(obj, dict) else obj
    except ValueError:
        cand = text
    return cand if isinstance(cand, str) and cand in labels else None
