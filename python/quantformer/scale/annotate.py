"""``annotate`` (:mod:`quantformer.infer.annotate`) over partitioned corpora and on Dask.

:func:`annotate_partitions` reads a folder, a glob or a list of corpus files and writes one
Parquet file of codes per partition (the codes frame of the one-file run: ``doc_id, label,
prob_<label>, unparsed, coder``, optional ``raw``), named after its partition, with the
``manifest.json``, ``resume`` and schedulers of :mod:`quantformer.scale.dask`. Each document is
coded as in one file (the same prompt, the same model), so the partitions' codes put together
equal the one-file run's.

* A local causal LM is loaded once per worker process and kept for its later partitions (the
  process's model cache, :data:`quantformer.infer.cache.MODELS`).
* An endpoint is shared by all workers: each worker sends at most ``concurrency`` requests at
  once, and on a Dask scheduler a ``distributed.Semaphore`` with ``concurrency`` leases,
  named after the output folder, bounds the requests in flight across all workers together.
  The API key is read on each worker from the environment variable named (a LocalCluster's
  workers inherit this process's environment; on a remote cluster set it there); it is never
  put in a task, the manifest or the cache.
* Every finished code goes to the one SQLite cache (``cache``; workers on one machine share
  the file), so a partition interrupted midway costs only its missing documents on resume.
* A partition is read whole into memory (codes are a few columns per document; split very
  large files with ``quantformer partition``).
* The k-shot examples are drawn once by the driver; before any work it streams every
  partition once to refuse shots that are documents being coded.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import pandas as pd

from .._core.errors import InputError
from ..infer.annotate import (annotate, check_codebook_labels, check_shots_overlap, draw_shots,
                              shots_overlap)
from ..infer.cache import MODELS
from ..infer.classifier import CHUNK_ROWS
from ..io.columns import REASON_COLUMN, STATUS_COLUMN
from ..io.frames import iter_frames
from ..io.llm_cache import CodeCache
from ..io.writing import write_frame
from ..models.llm import EndpointLM, LocalLM, check_api_key, check_causal_lm, coder_settings
from .dask import WORKER_CACHE, run_partitions
from .partitions import list_partitions, scan_partitions

VERB = "annotate"


def _llm(model: str, opts: dict):
    """The coder of a task: an endpoint client, or this process's cached local model."""
    if opts["endpoint"] is not None:
        return EndpointLM(opts["endpoint"], model, check_api_key(opts["api_key_env"]),
                          timeout=opts["timeout"], retries=opts["retries"],
                          top_logprobs=opts["top_logprobs"], max_tokens=opts["max_tokens"])
    if MODELS.size < WORKER_CACHE:
        MODELS.resize(WORKER_CACHE)
    return MODELS.get("causal-lm", model, opts["device"],
                      lambda: LocalLM(model, device=opts["device"]))


def _gate(opts: dict):
    """The Dask semaphore bounding the endpoint requests of all workers, when this task runs
    on a Dask worker; else None (partitions run one after another here)."""
    if opts["endpoint"] is None:
        return None
    try:
        from distributed import Semaphore, get_worker

        get_worker()
    except (ImportError, ValueError):
        return None
    return Semaphore(max_leases=int(opts["concurrency"]), name=opts["gate"])


def annotate_partition(spec: dict) -> dict:
    """Code one partition into its output Parquet (a task of
    :func:`quantformer.scale.dask.run_partition`).

    Returns:
        The counts of :func:`~quantformer.scale.dask.run_partition` (``missing``: documents
        without text), with ``unparsed``, ``from_cache``, ``probabilities_missing`` and
        ``model_loads`` (models this worker process has read from disk so far; None through
        an endpoint).
    """
    opts = spec["options"]
    frame = pd.concat(list(iter_frames(spec["input"], chunk_rows=CHUNK_ROWS,
                                       id_offset=spec["id_offset"], **spec["corpus"])),
                      ignore_index=True)
    cache = CodeCache(opts["cache"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # counted per job by the driver
            codes, rec = annotate(frame, opts["codebook"], _llm(spec["model"], opts),
                                  cache=cache, shots=[tuple(x) for x in opts["shots"]],
                                  keep_raw=opts["keep_raw"], concurrency=opts["concurrency"],
                                  progress=None, gate=_gate(opts),
                                  retry_unparsed=opts.get("retry_unparsed", False))
    finally:
        cache.close()
    if rec["failed"]:  # the partition is not done: --resume asks for just those documents
        why = codes.loc[codes[STATUS_COLUMN] == "failed", REASON_COLUMN].iloc[0]
        raise InputError(f"{rec['failed']} of {rec['documents']} documents failed (e.g. {why}); "
                         "the others are cached", params=["resume"])
    write_frame(codes, spec["output"])
    return {"rows": len(codes), "missing": rec["empty"], "truncated": 0, "max_length": 0,
            "truncation": "none", "unparsed": rec["unparsed"], "from_cache": rec["from_cache"],
            "probabilities_missing": rec["probabilities_missing"],
            "model_loads": None if opts["endpoint"] else MODELS.loads}


def _check_overlap(inputs, corpus: dict, human) -> None:
    """Stream every partition once: no shot may be a document being coded."""
    parts = list_partitions(inputs)
    _, offsets = scan_partitions(parts, corpus)
    shared = pd.Series(False, index=human.index)
    for part, offset in zip(parts, offsets):
        for chunk in iter_frames(part, chunk_rows=CHUNK_ROWS, id_offset=offset, **corpus):
            shared |= shots_overlap(human, chunk["doc_id"], chunk["text"])
    check_shots_overlap(human, shared=shared)


def annotate_partitions(inputs, out, codebook: list[dict], llm: str, *,
                        endpoint: str | None = None, api_key_env: str | None = None,
                        shots: int = 0, human: pd.DataFrame | None = None, seed: int = 0,
                        cache=None, scheduler: str | None = None, resume: bool = False,
                        keep_raw: bool = False, concurrency: int | None = None,
                        timeout: float | None = None, retries: int | None = None,
                        top_logprobs: int | None = None, max_tokens: int | None = None,
                        device: str | None = None, corpus: dict | None = None,
                        quiet: bool = False, retry_unparsed: bool = False) -> dict:
    """Code a partitioned corpus with a large language model, one Parquet of codes per
    partition (the CLI's ``annotate`` with a folder, glob or several files as ``--input``, or
    with ``--scheduler``).

    Args:
        inputs, out, scheduler, resume, quiet: as :func:`quantformer.scale.dask.run_partitions`.
        codebook, llm, endpoint, api_key_env, shots, human, seed, keep_raw, concurrency,
        timeout, retries, top_logprobs, max_tokens, device: as the one-file ``annotate``
            (``human``: the human codes the shots are drawn from; ``concurrency``: requests in
            flight to the endpoint across all workers; None: the defaults of
            :func:`quantformer.models.llm.coder_settings`, which checks them).
        cache: the SQLite cache (default: ``out`` + ``.cache.sqlite``, beside the folder).
        retry_unparsed: ask again for documents whose cached code is unparsed.
        corpus: ``text_col``, ``id_col``, ``fmt``, ``quoting``.

    Returns:
        The summary of :func:`~quantformer.scale.dask.run_partitions`.

    Raises:
        InputError: as the one-file run, before any work (the shots' overlap with every
            partition included).
    """
    settings = coder_settings(endpoint, device=device, api_key_env=api_key_env,
                              concurrency=concurrency, timeout=timeout, retries=retries,
                              top_logprobs=top_logprobs, max_tokens=max_tokens)
    labels = check_codebook_labels(codebook)
    corpus = {k: v for k, v in (corpus or {}).items() if v is not None}
    picked = draw_shots(human, shots, [], [], labels, seed)
    if picked:
        _check_overlap(inputs, corpus, human)
    key = check_api_key(api_key_env)
    if endpoint is not None:
        EndpointLM(endpoint, llm, key, timeout=settings["timeout"]).check()
        model = llm
    else:
        model = check_causal_lm(llm)[0]  # the checks of the model, its weights not loaded
    folder = Path(out).resolve()
    opts = {"codebook": codebook, "shots": [list(x) for x in picked], "endpoint": endpoint,
            **settings, "keep_raw": bool(keep_raw), "retry_unparsed": bool(retry_unparsed),
            "cache": str(Path(cache).resolve()) if cache else str(folder) + ".cache.sqlite",
            "gate": "quantformer-annotate-" + hashlib.sha256(str(folder).encode()).hexdigest()[:16]}
    return run_partitions(VERB, model, inputs, out, options=opts, corpus=corpus,
                          scheduler=scheduler, resume=resume, quiet=quiet,
                          runner=annotate_partition)
