"""A large language model as a coder: one interface, "score the labels given a prompt".

Two back-ends:

* :class:`LocalLM`: a causal LM loaded with ``AutoModelForCausalLM`` (any Hugging Face id or
  folder), its prompt built with the tokenizer's chat template. Each label is scored by the
  summed log-probability of its full token sequence followed by the end-of-sequence token
  after the prompt, normalised over the labels (so labels that are prefixes of each other,
  ``pro`` and ``pro-life``, are told apart exactly: the end token closes each answer). The
  codebook prefix is run once; its key-value cache is reused for every document and label.
* :class:`~quantformer.models.llm_endpoint.EndpointLM` (in
  :mod:`quantformer.models.llm_endpoint`, imported here): a server speaking the OpenAI
  chat-completions protocol (Ollama, vLLM, llama.cpp's server, ``transformers serve``). The
  label comes from structured output (a JSON schema whose ``label`` is an enum of the
  codebook's labels); an answer that does not parse strictly, or a body that cannot be read,
  is ``unparsed`` with the reason; a document past its retries is ``failed``. Probabilities
  come from the answer's token log-probabilities (``logprobs: true, top_logprobs: k``) where
  the server gives them (:mod:`quantformer.models.llm_probs` states the rule); where it does
  not (``transformers serve`` ignores the field), they are missing and the reason is kept.
  The API key is read only from the environment variable the caller names; it is never
  printed, logged, cached or written.

Scoring by label likelihood rather than parsing generated text follows the practice of
zero-shot classification with language models (Brown et al. 2020, "Language Models are
Few-Shot Learners", section 2; Holtzman et al. 2021, "Surface Form Competition").
"""

from __future__ import annotations

import inspect
import math

from .._core.errors import InputError, unused_error
from .hub import resolve_model
from .llm_endpoint import EndpointLM, check_api_key  # noqa: F401 (the coders' one home)
from .llm_endpoint import check_endpoint_url, check_key_name

#: stands for the document while the chat template is rendered (split off afterwards)
DOC_SLOT = "\u0000DOCUMENT\u0000"


#: the settings of a coder behind an endpoint, with their defaults: the API key's variable,
#: seconds per request, retries after a 429/5xx/timeout, candidate tokens per answer token
#: (20, the OpenAI maximum), the longest answer (the server's) and requests in flight
ENDPOINT_DEFAULTS = {"api_key_env": None, "timeout": 60.0, "retries": 4, "top_logprobs": 20,
                     "max_tokens": None, "concurrency": 4}
#: the device of a local coder
LOCAL_DEFAULT_DEVICE = "cpu"
# (setting, smallest value allowed, what it counts) of the numeric endpoint settings
_ENDPOINT_RANGES = (("timeout", None, "seconds"), ("retries", 0, "retries"),
                    ("top_logprobs", 0, "tokens"), ("max_tokens", 1, "tokens"),
                    ("concurrency", 1, "requests"))


def coder_settings(endpoint: str | None, *, device: str | None = None, **given) -> dict:
    """The settings of a language-model coder, checked before any work, with the defaults
    filled in: :data:`ENDPOINT_DEFAULTS` with an ``endpoint``, ``device`` without one.

    Args:
        endpoint: the server's base URL, or None for a local model.
        device: a local model's torch device (None: ``cpu``).
        **given: the endpoint settings of :data:`ENDPOINT_DEFAULTS`; None means not given.

    Returns:
        ``device`` and every key of :data:`ENDPOINT_DEFAULTS` (the defaults where not given).

    Raises:
        InputError: an endpoint setting without ``endpoint`` or ``device`` with one (the
            setting would not be used), ``timeout`` not above 0, ``retries`` or
            ``top_logprobs`` below 0, ``max_tokens`` or ``concurrency`` below 1, an unknown
            setting.
    """
    unknown = sorted(set(given) - set(ENDPOINT_DEFAULTS))
    if unknown:
        raise TypeError(f"unknown coder settings: {unknown}")
    named = [k for k in ENDPOINT_DEFAULTS if given.get(k) is not None]
    if endpoint is None and named:
        raise unused_error(named, "is a setting of an {endpoint}; a local model does not use "
                                  "it: add {endpoint} or leave it out",
                           "are settings of an {endpoint}; a local model does not use them: "
                           "add {endpoint} or leave them out", also=["endpoint"])
    if endpoint is not None and device is not None:
        raise InputError("{device} is for a local model; with {endpoint} the server chooses "
                         "its device: leave {device} out", params=["device", "endpoint"])
    if endpoint is not None:
        check_endpoint_url(endpoint)
    if given.get("api_key_env") is not None:
        check_key_name(given["api_key_env"])
    out = {**ENDPOINT_DEFAULTS, **{k: given[k] for k in named},
           "device": device or LOCAL_DEFAULT_DEVICE}
    for name, least, unit in _ENDPOINT_RANGES:
        value, whole = out[name], least is not None
        if value is None:
            continue
        ok = not isinstance(value, bool) and (value >= least and int(value) == value
                                              if whole else value > 0)
        if not ok:
            what = f"a whole number of at least {least}" if whole else "greater than 0"
            raise InputError(f"{{{name}}} must be {what} ({unit}), not {value!r}",
                             params=[name])
    return out


def _resolve(model: str) -> str:
    """The local folder or cached hub id of ``model`` (:func:`quantformer.models.hub.resolve_model`),
    with its errors naming ``llm``: a hub id that is neither cached nor reachable is an input
    error before any download is tried."""
    try:
        return resolve_model(model)
    except InputError as exc:
        text = str(exc.args[0]) if exc.args else ""
        raise InputError(text.replace("{model}", "{llm}"),
                         params=["llm" if q == "model" else q for q in exc.params]) from None


def check_causal_lm(model: str):
    """The resolved folder of ``model`` and its tokenizer, checked without loading weights.

    Raises:
        InputError: the model is not a causal LM, or its tokenizer has no chat template or
            no end-of-sequence token.
    """
    from transformers import AutoConfig, AutoTokenizer

    model = _resolve(model)
    config = AutoConfig.from_pretrained(model)
    archs = getattr(config, "architectures", None) or []
    if getattr(config, "is_encoder_decoder", False) or (
            archs and not any(a.endswith("ForCausalLM") or a.endswith("LMHeadModel")
                              for a in archs)):
        raise InputError(f"{{llm}} '{model}' is not a causal language model "
                         f"(architectures: {', '.join(archs) or 'none'}); give a "
                         "decoder-only model such as a Llama, Qwen or GPT-2 checkpoint",
                         params=["llm"])
    tokenizer = AutoTokenizer.from_pretrained(model)
    if not getattr(tokenizer, "chat_template", None):
        raise InputError(f"{{llm}} '{model}': its tokenizer has no chat template, so the "
                         "codebook cannot be put as a conversation; give an instruction-"
                         "tuned (chat) checkpoint, or set tokenizer.chat_template and save "
                         "the folder again", params=["llm"])
    if tokenizer.eos_token_id is None:
        raise InputError(f"{{llm}} '{model}': its tokenizer has no end-of-sequence token",
                         params=["llm"])
    return model, tokenizer


class LocalLM:
    """A local causal LM that scores labels (see the module docstring).

    Args:
        model: a Hugging Face id or a folder saved with ``save_pretrained``.
        device: torch device (default ``cpu``).

    Raises:
        InputError: the model is not a causal LM, or its tokenizer has no chat template or
            no end-of-sequence token.
    """

    def __init__(self, model: str, device: str = "cpu"):
        import torch
        from transformers import AutoModelForCausalLM

        model, self.tokenizer = check_causal_lm(model)
        self.model = AutoModelForCausalLM.from_pretrained(model).to(device).eval()
        self.device = device
        self.name = model
        self._torch = torch
        self._prefix: tuple[list[int], object] | None = None
        # transformers >= 5.2x names the key-value cache argument ``cache``
        params = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        # the document's run needs the next-token distribution at its last position only:
        # projecting every position onto the vocabulary would cost as much as the body
        self._last_only = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    @property
    def precision(self) -> str:
        """The precision the model's weights run in (``fp32``, ``bf16``, ``fp16``; as loaded
        from the checkpoint), for the record."""
        dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
        return {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype)

    def split_prompt(self, messages: list[dict]) -> tuple[str, str]:
        """The rendered chat (generation prompt added) cut at :data:`DOC_SLOT`: the text before
        the document (identical for every document) and the text after it."""
        text = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)
        if text.count(DOC_SLOT) != 1:
            raise InputError("the prompt must hold the document exactly once", params=[])
        head, tail = text.split(DOC_SLOT)
        return head, tail

    def ids(self, text: str) -> list[int]:
        """Token ids of ``text`` with no special tokens added."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def label_ids(self, labels: list[str]) -> list[list[int]]:
        """Each label's tokens followed by the end-of-sequence token."""
        return [self.ids(lab) + [self.tokenizer.eos_token_id] for lab in labels]

    def sequences(self, head: str, doc: str, tail: str) -> tuple[list[int], list[int]]:
        """The prefix ids (codebook, shared) and the document's ids (document and tail)."""
        return self.ids(head), self.ids(doc + tail)

    def prefix_cache(self, prefix_ids: list[int]):
        """Run the shared prefix once; its key-value cache (memoised for the same ids)."""
        if self._prefix is None or self._prefix[0] != prefix_ids:
            with self._torch.no_grad():
                out = self.model(self._torch.tensor([prefix_ids], device=self.device),
                                 use_cache=True)
            # read under the name it was passed as (``past_key_values`` is deprecated, and
            # warned about, where the argument is ``cache``)
            self._prefix = (list(prefix_ids), getattr(out, self._cache_arg))
        return self._prefix[1]

    def score(self, prefix_ids: list[int], doc_ids: list[int], label_ids: list[list[int]],
              use_cache: bool = True) -> list[float]:
        """Summed log-probability of each label's sequence after ``prefix_ids + doc_ids``.

        With ``use_cache`` the prefix's key-value cache is reused and only the document and
        the labels (one batch, right-padded) are run; without it each label's full sequence
        is run from the start (the plain forward pass the cache must equal).
        """
        if use_cache:
            return self._score_cached(prefix_ids, doc_ids, label_ids)
        torch = self._torch
        out = []
        with torch.no_grad():
            for lab in label_ids:
                ids = prefix_ids + doc_ids + lab
                logp = torch.log_softmax(self.model(torch.tensor([ids], device=self.device))
                                         .logits[0].float(), dim=-1)
                start = len(ids) - len(lab)
                out.append(sum(float(logp[start + j - 1, t]) for j, t in enumerate(lab)))
        return out

    def _score_cached(self, prefix_ids, doc_ids, label_ids) -> list[float]:
        """The document once on the prefix's cache, then each label on the document's; the
        cache is cropped back after each label and to the prefix at the end (no copies)."""
        torch = self._torch
        cache = self.prefix_cache(prefix_ids)
        n0, out = len(prefix_ids), []

        def run(ids, **keep):
            return torch.log_softmax(self.model(torch.tensor([ids], device=self.device),
                                                **{self._cache_arg: cache}, use_cache=True,
                                                **keep).logits[0].float(), dim=-1)
        try:
            with torch.no_grad():
                last = run(doc_ids, **self._last_only)[-1]
                for lab in label_ids:
                    logp = run(lab[:-1])
                    out.append(float(last[lab[0]]) + sum(float(logp[j - 1, t])
                                                         for j, t in enumerate(lab) if j))
                    _crop(cache, n0 + len(doc_ids))
        finally:
            _crop(cache, n0)
        return out


def _crop(cache, length: int) -> None:
    """Cut a key-value cache back to ``length`` tokens (a negative ``crop`` removes that
    many tokens in every transformers version that has it)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


def normalise(logps: list[float]) -> list[float]:
    """Probabilities from summed log-probabilities, normalised over the labels (softmax)."""
    top = max(logps)
    w = [math.exp(x - top) for x in logps]
    s = sum(w)
    return [x / s for x in w]
