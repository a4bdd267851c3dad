"""ONNX Runtime inference backend (``--backend onnx``), optionally int8 (``--quantize int8``).

A model is exported once per use (``proba`` for fine-tuned classifiers, ``logits`` for NLI
zero-shot, ``mean_pool`` for embeddings) with ``torch.onnx.export(dynamo=True)``: the exported
graph is the very function the torch path runs on a padded batch, so both backends compute the
same thing (probabilities within 1e-4). The fp32 export is then fused for ONNX Runtime's CPU
kernels (attention, skip-LayerNorm, bias-GELU; :mod:`quantformer.models.onnx.fusion`), when the fused
graph's outputs stay within 1e-4 of the unfused one's (:data:`FUSE`). ``--quantize int8`` runs
ONNX Runtime's dynamic int8 quantization (``quantize_dynamic``: int8 weights, activations
quantised per batch; Zafrir et al. 2019, "Q8BERT") on that fp32 export, with the settings in
:data:`INT8_SETTINGS`. ONNX Runtime's
block-wise ``MatMulNBits`` 8-bit quantization agreed better with fp32 (99.6 % of the Abortion
labels) but was slower than fp32 on a CPU without VNNI and took gigabytes of memory on
512-token documents (bench/RESULTS.md), so it is not used.

The export is cached in a folder holding ``model.onnx``, ``tokenizer.json`` and
``manifest.json``:

* inside the model folder, ``<model>/onnx/<use>-<fp32|int8>/``, when the model was given as a
  local folder that is writable;
* else (the bundled all-MiniLM-L6-v2, hub ids, read-only folders) in the user cache,
  ``$QUANTFORMER_CACHE`` or ``$XDG_CACHE_HOME/quantformer`` or ``~/.cache/quantformer``, under
  ``onnx/<hash of the model path>/<use>-<fp32|int8>/``.

The manifest holds a key, the SHA-256 of the model's weight, config and tokenizer files, the
use, the quantization, whether to fuse, the export format and the versions of torch,
transformers, tokenizers, onnx, onnxscript, onnxruntime and quantformer, and a ``fusion``
record (the fusions applied, or why none was). A cached export whose key differs (weights or
versions changed) or whose files do not match their recorded SHA-256 (damaged) is rebuilt,
never trusted. Exports are written to a temporary folder and renamed into place, so an
interrupted export leaves no half-written cache.

With a valid cached export, inference imports neither torch nor transformers: the tokenizer is
the Rust ``tokenizers`` library, reading the exported ``tokenizer.json`` with the special-token
template recorded at export time. That saves the seconds torch takes to import, for short jobs
and for every Dask worker.

Longformer (sliding-window attention with data-dependent shapes) cannot be exported with
dynamic shapes by ``torch.export``; it is refused with a clear error (use ``--backend torch``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import logging
import os
import shutil
import sys
import warnings
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..._core.atomic import atomic_dir
from ..._core.errors import InputError
from ..._core.version import versions as package_versions
from ..batching import pad_batch
from ..hub import resolve_model
from ..tokenize import SpecialTemplate, special_template
from .fusion import fuse

BACKENDS = ("torch", "onnx")
QUANTIZE = ("none", "int8")
#: bump when the export procedure changes, so older caches are rebuilt
EXPORT_FORMAT = 2  # 2: exports are fused (onnx_fusion) before int8 quantization
#: fuse fp32 exports (:mod:`quantformer.models.onnx.fusion`); part of the cache key. Benchmarks set it
#: to False to measure the unfused graph; users have no reason to.
FUSE = True
OPSET = 18
MANIFEST = "manifest.json"
MODEL_FILE = "model.onnx"
#: the unfused fp32 graph while an export is built (not kept)
UNFUSED_FILE = "unfused-model.onnx"
TOKENIZER_FILE = "tokenizer.json"
#: model files whose bytes enter the cache key
KEY_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
             "vocab.json", "merges.txt", "special_tokens_map.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin")
VERSIONED = ("torch", "transformers", "tokenizers", "onnx", "onnxscript", "onnxruntime")
UNSUPPORTED_TYPES = ("longformer", "led")
#: quantize_dynamic settings: int8 weights of the MatMuls only (embeddings, pooler and
#: classification head stay fp32), one scale per output channel, 7-bit weight range (no
#: saturation in the u8s8 kernels of CPUs without VNNI), and the first encoder layer's MatMuls
#: kept fp32 (``first_layer_fp32``: the layer most sensitive to quantization in the settings
#: search of bench/bench_onnx.py), applied to the fused fp32 graph (1.2x faster than int8 of the unfused graph, which
#: was no faster than fused fp32); there the query, key and value weights sit inside the fused
#: ``Attention`` nodes and stay fp32, so int8 covers the attention output and FFN MatMuls. Top-1 agreement with fp32 varies by a few documents between
#: settings and library versions: on the Abortion test tweets 98.2-98.9 %, on Toxic 99.3-99.7 %
#: (bench/RESULTS.md). Part of the cache key: a change rebuilds cached int8 exports.
INT8_SETTINGS = {"method": "quantize_dynamic", "op_types_to_quantize": ["MatMul"],
                 "per_channel": True, "reduce_range": True, "first_layer_fp32": True}


# ------------------------------------------------------------------------------------------
# options


def check_backend(backend: str, quantize: str = "none", device: str | None = "auto") -> str:
    """Validate ``backend``, ``quantize`` and ``device`` together; returns the backend.

    Raises:
        InputError: unknown backend or quantization; ``int8`` with the torch backend; the onnx
            backend without onnxruntime installed, or with a GPU device (it runs on CPU).
    """
    if backend not in BACKENDS:
        raise InputError(f"unknown {{backend}} '{backend}'; use one of: {', '.join(BACKENDS)}",
                         params=["backend"])
    if quantize not in QUANTIZE:
        raise InputError(f"unknown {{quantize}} '{quantize}'; use one of: "
                         f"{', '.join(QUANTIZE)}", params=["quantize"])
    if quantize != "none" and backend != "onnx":
        raise InputError("{quantize} int8 needs {backend} onnx (ONNX Runtime's int8 kernels); "
                         "add {backend} onnx or drop {quantize}", params=["quantize", "backend"])
    if backend == "onnx" and importlib.util.find_spec("onnxruntime") is None:
        raise InputError("{backend} onnx needs ONNX Runtime: pip install 'quantformer[onnx]' "
                         "(onnxruntime, onnx, onnxscript), or use {backend} torch",
                         params=["backend"])
    if backend == "onnx" and (device or "auto").lower() not in ("auto", "cpu"):
        raise InputError(f"{{backend}} onnx runs on the CPU, not on {{device}} {device}; use "
                         "{device} cpu (or auto), or {backend} torch for a GPU",
                         params=["backend", "device"])
    return backend


def backend_label(backend: str = "torch", quantize: str = "none") -> str:
    """What the outputs' ``backend`` column says: ``torch``, ``onnx fp32`` or ``onnx int8``."""
    if backend == "torch":
        return "torch"
    return f"onnx {'int8' if quantize == 'int8' else 'fp32'}"


# ------------------------------------------------------------------------------------------
# cache location and key


def user_cache_dir() -> Path:
    """``$QUANTFORMER_CACHE``, else ``$XDG_CACHE_HOME/quantformer``, else
    ``~/.cache/quantformer``."""
    if os.environ.get("QUANTFORMER_CACHE"):
        return Path(os.environ["QUANTFORMER_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "quantformer"


def cache_dir(name: str | None, path: str, use: str, quantize: str) -> Path:
    """Folder of one cached export (see the module docstring for where it goes)."""
    leaf = f"{use}-{'int8' if quantize == 'int8' else 'fp32'}"
    local = name not in (None, "") and Path(str(name)).expanduser().is_dir()
    if local and os.access(path, os.W_OK):
        return Path(path) / "onnx" / leaf
    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]
    return user_cache_dir() / "onnx" / digest / leaf


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def versions() -> dict:
    """Versions of the libraries an export depends on (read without importing them)."""
    found = package_versions(VERSIONED)
    return {"quantformer": found.pop("quantformer"), "export_format": EXPORT_FORMAT, **found}


def cache_key(path: str, use: str, quantize: str) -> tuple[str, dict]:
    """(key, parts): a SHA-256 over the model's weight/config/tokenizer files, the use, the
    quantization and :func:`versions`."""
    folder = Path(path)
    files = sorted(f.name for f in folder.iterdir()
                   if f.is_file() and (f.name in KEY_FILES or f.suffix in WEIGHT_SUFFIXES))
    parts = {"use": use, "quantize": quantize, "versions": versions(), "fuse": FUSE,
             "int8_settings": INT8_SETTINGS if quantize == "int8" else None,
             "files": {name: file_sha256(folder / name) for name in files}}
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    return key, parts


# ------------------------------------------------------------------------------------------
# the torch-free tokenizer


class RustTokenizer:
    """The model's fast tokenizer without transformers: the ``tokenizers`` library on the
    exported ``tokenizer.json``, with the special-token template recorded at export time.

    It answers what :func:`quantformer.models.tokenize.encode` asks of a tokenizer, with the same
    ids as the Hugging Face tokenizer it was saved from.
    """

    def __init__(self, tokenizer_file: Path, pad_token_id: int, template: dict):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(tokenizer_file))
        self._tok.no_truncation()
        self._tok.no_padding()
        self.pad_token_id = pad_token_id
        self.is_fast = True
        self.__dict__["_quantformer_template"] = SpecialTemplate(**template)

    def __call__(self, texts, add_special_tokens: bool = False,
                 return_offsets_mapping: bool = False, **_ignored) -> dict:
        if isinstance(texts, str):
            texts = [texts]
        encodings = self._tok.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        out = {"input_ids": [e.ids for e in encodings]}
        if return_offsets_mapping:  # characters of each token (windows, truncation="chunks")
            out["offset_mapping"] = [e.offsets for e in encodings]
        return out


# ------------------------------------------------------------------------------------------
# the runtime model


class OnnxModel:
    """An ONNX Runtime session that takes the padded numpy batches of
    :func:`quantformer.models.batching.run_batches` and returns what the torch function returned.

    Attributes:
        backend: ``"onnx"`` (how :func:`~quantformer.models.batching.run_batches` recognises it).
        label: ``onnx fp32`` or ``onnx int8``.
        config: the model's ``config.json`` as attributes (no transformers needed).
        tokenizer: a :class:`RustTokenizer`.
        folder: the cache folder the export was loaded from.
    """

    backend = "onnx"

    def __init__(self, folder: Path, manifest: dict, config):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = _threads()
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(folder / MODEL_FILE), opts,
                                            providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.tokenizer = RustTokenizer(folder / TOKENIZER_FILE, manifest["pad_token_id"],
                                       manifest["template"])
        self.config = config
        self.folder = folder
        self.label = backend_label("onnx", manifest["quantize"])

    def eval(self) -> OnnxModel:
        return self

    def forward(self, batch: dict) -> np.ndarray:
        """Run one padded batch (a dict of int64 arrays); returns a float32 array."""
        feed = {k: batch[k] for k in self.inputs}
        return self.session.run(None, feed)[0]


def _threads() -> int:
    """Intra-op threads: ``$OMP_NUM_THREADS`` when set, else ONNX Runtime's default (0)."""
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "0")))
    except ValueError:
        return 0


def read_config(path: str):
    """A model's ``config.json`` as a namespace (``model_type``, ``id2label``, ...), read
    without transformers. ``max_positions`` and ``nli_label_ids`` work on it."""
    cfg = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    return SimpleNamespace(**cfg)


# ------------------------------------------------------------------------------------------
# export, quantization and the cache


def open_model(name: str | None, *, use: str, fn: Callable, loader: Callable,
               quantize: str = "none") -> OnnxModel:
    """The cached ONNX export of a model for one use, built (or rebuilt) when needed.

    Args:
        name: the model as the user gave it (a folder, a hub id, or None for the default).
        use: ``proba``, ``logits`` or ``mean_pool``: names what ``fn`` computes.
        fn: ``fn(model, batch) -> tensor``, the function the torch path runs on a batch; it is
            what the export computes.
        loader: ``loader(path) -> (torch module in eval mode, Hugging Face fast tokenizer)``,
            called only when an export has to be built.
        quantize: ``none`` (fp32) or ``int8``.

    Raises:
        InputError: a Longformer model (not supported), or a model the exporter cannot handle.
    """
    path = resolve_model(name)
    config = read_config(path)
    if getattr(config, "model_type", "") in UNSUPPORTED_TYPES:
        raise InputError(
            f"{config.model_type} models are not supported with {{backend}} onnx: their "
            "sliding-window attention has data-dependent shapes that torch.onnx cannot export. "
            "Use {backend} torch (the default)", params=["backend"]
        )
    folder = ensure_export(name, path, use, quantize, fn, loader)
    return OnnxModel(folder, json.loads((folder / MANIFEST).read_text()), config)


def ensure_export(name, path: str, use: str, quantize: str, fn: Callable,
                  loader: Callable) -> Path:
    """The folder of a valid cached export, building it first when missing, stale or damaged."""
    folder = cache_dir(name, path, use, quantize)
    key, parts = cache_key(path, use, quantize)
    if is_valid(folder, key):
        return folder
    if quantize == "int8":
        source = ensure_export(name, path, use, "none", fn, loader)
        build = lambda tmp: _quantize(source, tmp)  # noqa: E731
    else:
        build = lambda tmp: _export(path, tmp, fn, loader)  # noqa: E731
    _build_atomically(folder, key, parts, build)
    return folder


def is_valid(folder: Path, key: str) -> bool:
    """Whether ``folder`` holds an export with this key whose files match their SHA-256."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("key") != key:
            return False
        return all(file_sha256(folder / f) == h for f, h in manifest["sha256"].items())
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return False


def _build_atomically(folder: Path, key: str, parts: dict, build: Callable) -> None:
    """Build into a temporary sibling folder, write the manifest last, then swap it in."""
    # keep_theirs: another process put a fresh export there first
    with atomic_dir(folder, keep_theirs=True) as tmp:
        info = build(tmp)
        manifest = {"key": key, **parts, **info,
                    "sha256": {f: file_sha256(tmp / f) for f in (MODEL_FILE, TOKENIZER_FILE)}}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def _export(path: str, tmp: Path, fn: Callable, loader: Callable) -> dict:
    """Export ``fn(model, batch)`` with dynamic batch and sequence axes (torch.export)."""
    import torch

    model, tokenizer = loader(path)
    template = special_template(tokenizer)
    names = ["input_ids", "attention_mask"] + (["token_type_ids"]
                                               if template.uses_token_types else [])
    wrapper = _Wrapper(model, fn, names)
    sample = _sample(tokenizer, names)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    print(f"quantformer: exporting the model to ONNX once (cached in {tmp.parent})",
          file=sys.stderr, flush=True)
    try:
        with _quiet_export(), torch.no_grad():
            torch.onnx.export(wrapper, sample, str(tmp / UNFUSED_FILE), dynamo=True,
                              input_names=names, output_names=["output"], opset_version=OPSET,
                              dynamic_shapes={n: {0: batch, 1: seq} for n in names},
                              external_data=False, verbose=False)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise InputError(f"this model could not be exported to ONNX ({first}); use {{backend}} "
                         "torch (the default)", params=["backend"]) from exc
    (tmp / TOKENIZER_FILE).write_text(tokenizer.backend_tokenizer.to_str(), encoding="utf-8")
    return {"inputs": names, "template": asdict(template), "fusion": _fuse(tmp, names, sample),
            "pad_token_id": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0}


def _fuse(tmp: Path, names: list[str], sample: tuple) -> dict:
    """Fuse ``tmp/unfused-model.onnx`` into ``tmp/model.onnx`` (:func:`onnx_fusion.fuse`);
    when the fusion is not kept (or :data:`FUSE` is off), the unfused graph becomes
    ``model.onnx``."""
    info = {"applied": False, "reason": "fusion turned off (onnx_backend.FUSE)"}
    if FUSE:
        with _quiet_export():
            info = fuse(tmp / UNFUSED_FILE, tmp / MODEL_FILE,
                        {n: t.numpy() for n, t in zip(names, sample)})
    if info["applied"]:
        (tmp / UNFUSED_FILE).unlink()
    else:
        os.replace(tmp / UNFUSED_FILE, tmp / MODEL_FILE)
    return info


def _sample(tokenizer, names: list[str]) -> tuple:
    """An example batch of two real texts (at most 16 tokens) for tracing."""
    ids = tokenizer(["an example sentence for the export of the model, a little longer",
                     "a shorter one"], add_special_tokens=True)["input_ids"]
    ids = [x[:16] for x in ids]
    types = [[0] * len(x) for x in ids] if "token_type_ids" in names else None
    batch = pad_batch(ids, types, tokenizer.pad_token_id or 0)
    return tuple(batch[n] for n in names)


@contextlib.contextmanager
def _quiet_export():
    """Silence the exporters' progress prints and log lines (torch.onnx, onnxruntime)."""
    loggers = [logging.getLogger(n) for n in ("", "torch", "torch.onnx", "onnxscript",
                                              "onnxruntime.quantization")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _quantize(source: Path, tmp: Path) -> dict:
    """int8 quantization of the (fused) fp32 export in ``source`` (:data:`INT8_SETTINGS`)."""
    print(f"quantformer: quantizing the ONNX export to int8 once (cached in {tmp.parent})",
          file=sys.stderr, flush=True)
    quantize_int8(source / MODEL_FILE, tmp / MODEL_FILE)
    shutil.copyfile(source / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
    manifest = json.loads((source / MANIFEST).read_text(encoding="utf-8"))
    return {k: manifest[k] for k in ("inputs", "template", "pad_token_id", "fusion")}


def quantize_int8(src: Path, dst: Path, **overrides) -> None:
    """Write the int8 version of the ONNX model ``src`` to ``dst`` with ONNX Runtime's
    ``quantize_dynamic`` and :data:`INT8_SETTINGS` (``overrides`` replace some of them: the
    benchmark's variants)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    opts = {k: v for k, v in {**INT8_SETTINGS, **overrides}.items() if k != "method"}
    if opts.pop("first_layer_fp32", False):
        opts["nodes_to_exclude"] = first_layer_matmuls(src)
    with _quiet_export():
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, **opts)


def first_layer_matmuls(path: Path) -> list[str]:
    """Names of the first encoder layer's MatMuls with a constant weight: those before the
    layer's second LayerNormalization (the third of the graph, after the embeddings'), fused
    (``SkipLayerNormalization``, :mod:`quantformer.models.onnx.fusion`) or not."""
    import onnx

    model = onnx.load(str(path))
    weights = {t.name for t in model.graph.initializer}
    names, norms = [], 0
    for node in model.graph.node:  # ONNX graphs are stored in topological order
        norms += node.op_type in ("LayerNormalization", "SkipLayerNormalization")
        if norms >= 3:
            break
        if node.op_type == "MatMul" and node.input[1] in weights:
            names.append(node.name)
    return names


def _wrapper_class():
    import torch

    class Wrapper(torch.nn.Module):
        """``fn(model, batch)`` as a module whose positional inputs are the batch's tensors."""

        def __init__(self, model, fn, names):
            super().__init__()
            self.model, self.fn, self.names = model, fn, names

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            batch = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                batch["token_type_ids"] = token_type_ids
            return self.fn(self.model, batch)

    return Wrapper


def _Wrapper(model, fn, names):  # noqa: N802 - a class built lazily (torch imported on use)
    return _wrapper_class()(model, fn, names)
