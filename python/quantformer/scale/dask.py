"""Partitioned corpora and Dask: predict, zeroshot and embed over many files, on one machine or
a cluster.

A *partitioned* run reads a folder, a glob (``'tweets/*.parquet'``) or a list of corpus files
(every format :func:`quantformer.io.frames.read_frame` knows; Parquet is streamed) and writes one
Parquet file per input partition into an output folder, named after it
(``part-0001.csv`` -> ``part-0001.parquet``), with the rows in input order and the docvars
carried. Each output is written atomically (a temporary file renamed at the end), so a
partition's output either exists complete or not at all: a task may run twice (a retried or
preempted one) without ever leaving a half-written or duplicated file.

``manifest.json`` in the output folder records the verb, model and options, the versions, every
run (start, end, scheduler) and, per partition, its input, output, rows, seconds, worker and
finishing time. It is rewritten atomically after every partition, so it is the job's log.
With ``resume=True`` (``--resume``) partitions whose output is complete (the manifest has it
and the Parquet file holds that many rows) are skipped; without it an existing non-empty
output folder is refused. Resuming with another verb, model or options is refused too.

doc_id uniqueness holds across the whole job: before any work, the driver reads the id column
of every partition (Parquet: that column only; other formats: the whole file), hashes the ids
(8 bytes a document, as the single-file reader does) and refuses duplicates, naming the id and
the partition. Without an id column, ids are ``text1 .. textN`` numbered across the partitions
in the order listed, the ids one concatenated file would get. Uniqueness is not checked
against other jobs' output folders, and two different ids collide in the 64-bit hash with
probability about n^2 / 2^65.

The engine (``scheduler``): ``None`` runs the partitions one after another in this process;
``"local:N"`` starts a :class:`distributed.LocalCluster` of N worker processes with one Dask
thread each and ``cores // N`` torch threads; ``"tcp://host:8786"`` uses a running Dask
scheduler (e.g. one started by dask-jobqueue's ``SLURMCluster``). Tasks carry the model's
*path*; each worker loads a model once and keeps it for later partitions (the process's model
cache, :data:`quantformer.infer.cache.MODELS`, with room for :data:`WORKER_CACHE` models) for
``predict``, ``embed`` and ``zeroshot``; a model folder written again is loaded again.
A task whose worker dies is rescheduled by Dask
(``distributed.scheduler.allowed-failures``, 3 by default) and tasks that raise an internal
error are retried twice (``Client.submit(retries=2)``). A partition with bad input is not
retried: the job finishes the other partitions (their outputs stay) and then fails with an
:class:`~quantformer._core.errors.InputError` naming the bad partition(s).

``zeroshot`` with the embedding method calibrates cosines per label over each *partition*
(not over the whole corpus); use partitions of thousands of documents, or
``calibration="none"``, or an NLI model, whose scores do not depend on the partition.
"""

from __future__ import annotations

import contextlib
import glob
import os
import socket
import time
import warnings
from pathlib import Path

from .._core.errors import InputError
from ..infer.cache import MODELS
from ..infer.classifier import CHUNK_ROWS
from ..infer.chunked import check_reading_request, with_chunking
from ..infer.embed import (backend_label, check_length, embed_any, encoder_precision,
                           load_encoder, precision_record as encoder_precision_record)
from ..infer.embedding_table import embedding_frame, resolve_layout
from ..infer.load import load_model
from ..infer.predict import precision_record
from ..infer.zeroshot import method_for, zeroshot
from ..infer.zeroshot_common import DEFAULT_HYPOTHESIS, check_hypothesis, check_labels
from ..io.writing import FrameWriter, write_frame
from ..io.frames import (
    iter_frames,
)
from ..io.modeldir import read_record
from ..io.writable import check_job_dir
from ..models.hub import resolve_model
from ..models.onnx.backend import check_backend
from ..models.precision import DEFAULT_PRECISION, check_precision, check_with_backend
from ..models.reading import CHUNKS, DEFAULT_MAX_LENGTH, DEFAULT_TRUNCATION, Reading
from ..models.tokenize import warn_truncated
from ..models.windows import ChunkWarning, warn_dropped
from .cluster import (  # noqa: F401  (re-exported: the engine's names stay importable here)
    TASK_RETRIES,
    attempts,
    check_scheduler_reachable,
    dask_client,
    local_cluster,
    map_runs,
    parse_scheduler,
    torch_threads,
)
from .manifest import MANIFEST, Manifest
from .partitions import (  # noqa: F401  (re-exported: the partitions' names stay importable here)
    is_partitioned,
    list_partitions,
    output_names,
    scan_partitions,
)

VERBS = ("predict", "zeroshot", "embed")
WORKER_CACHE = 4  # models a worker process keeps loaded (quantformer.infer.cache.MODELS)


# ------------------------------------------------------------------------------------------
# the task: one partition in, one Parquet file out (runs on a worker)


def run_partition(spec: dict) -> dict:
    """Process one partition (a Dask task; also called in-process without a scheduler).

    Args:
        spec: ``verb``, ``model`` (a path or hub id), ``options`` (the verb's keyword
            arguments), ``corpus`` (reader keyword arguments), ``input``, ``output``,
            ``id_offset``, ``threads`` (torch threads, or None to leave them) and ``runner``
            (a module-level ``runner(spec) -> counts`` of a verb this module does not know,
            e.g. :func:`quantformer.scale.explain.explain_partition`; None for its own).

    Returns:
        ``{"input", "rows", "missing", "truncated", "max_length", "truncation", "seconds",
        "worker"}`` (``missing``: documents with a missing or empty text, kept with a missing
        result; ``truncated``: documents cut to ``max_length`` tokens by the ``truncation``
        strategy), or ``{"input", "error"}`` for a
        partition with bad input (InputError; not retried). Other exceptions propagate
        (Dask retries them).
    """
    t0 = time.perf_counter()
    if spec.get("threads"):
        import torch

        torch.set_num_threads(int(spec["threads"]))
    try:
        with warnings.catch_warnings():  # windows dropped: counted once by the driver
            warnings.simplefilter("ignore", ChunkWarning)
            counts = (spec.get("runner") or _RUNNERS[spec["verb"]])(spec)
    except InputError as exc:
        # the message with its parameter fields, rendered where the job's error is raised
        return {"input": spec["input"], "error": str(exc.args[0]) if exc.args else str(exc),
                "params": list(exc.params)}
    return {"input": spec["input"], **counts, "seconds": round(time.perf_counter() - t0, 3),
            "worker": f"{socket.gethostname()}:{os.getpid()}"}


def cached_model(verb: str, model, device: str, backend: str = "torch",
                 quantize: str = "none", precision: str = DEFAULT_PRECISION):
    """The loaded model for ``verb`` in this process, through the process's model cache
    (:data:`quantformer.infer.cache.MODELS`, given room for :data:`WORKER_CACHE` models)."""
    if MODELS.size < WORKER_CACHE:
        MODELS.resize(WORKER_CACHE)
    if verb == "predict":
        return load_model(model, device=device, backend=backend, quantize=quantize,
                          precision=precision)
    return load_encoder(model, device, backend=backend, quantize=quantize)


def _chunks(spec: dict):
    return iter_frames(spec["input"], chunk_rows=CHUNK_ROWS, id_offset=spec["id_offset"],
                       warn_ids=False, **spec["corpus"])  # the scan warned for the run


def _counts(rows: int, missing: int, truncated: int, max_length: int, truncation: str) -> dict:
    """What a partition task reports besides its timing (see :func:`run_partition`)."""
    return {"rows": int(rows), "missing": int(missing), "truncated": int(truncated),
            "max_length": int(max_length), "truncation": truncation}


def _predict_partition(spec: dict) -> dict:
    opts = spec["options"]
    clf = cached_model("predict", spec["model"], opts["device"], opts.get("backend", "torch"),
                       opts.get("quantize", "none"), opts.get("precision", "fp32"))
    clf = with_chunking(clf, **opts.get("chunking", {}))
    n = n_missing = 0
    counts: dict = {}
    with FrameWriter(spec["output"]) as writer:
        for chunk in _chunks(spec):
            probs, missing, rechecked = clf.scored(chunk["text"].tolist(), opts["batch_size"],
                                                    False, counts)
            writer.write(clf.output_frame(chunk, probs, missing, opts["keep_text"], rechecked))
            n += len(chunk)
            n_missing += int(missing.sum())
    read, used = clf.reading, {"precision": precision_record(clf)}
    if read.chunks:
        return {**_counts(n, n_missing, counts.get("dropped", 0), read.max_length, CHUNKS),
                "max_chunks": read.max_chunks, **used}
    return {**_counts(n, n_missing, counts.get("truncated", 0), read.max_length,
                      read.truncation), **used}


def _embed_partition(spec: dict) -> dict:
    opts = spec["options"]
    enc = cached_model("embed", spec["model"], opts["device"], opts.get("backend", "torch"),
                       opts.get("quantize", "none"))
    reading = Reading(opts["truncation"], check_length(enc, opts["max_length"]),
                      opts.get("stride"), opts.get("max_chunks"))
    chosen = encoder_precision(enc, opts.get("precision", "fp32"))
    n = n_missing = n_truncated = 0
    with FrameWriter(spec["output"]) as writer:
        for chunk in _chunks(spec):
            vecs, encoded, _ = embed_any(
                enc, chunk["text"].tolist(), reading=reading, batch_size=opts["batch_size"],
                normalize=opts["normalize"], progress=False, precision=chosen)
            writer.write(embedding_frame(chunk, vecs, opts["layout"], keep_text=opts["keep_text"],
                                         backend=backend_label(enc, chosen)))
            n += len(chunk)
            n_missing += int(encoded.missing.sum())
            n_truncated += int(encoded.truncated.sum())
    return {**_counts(n, n_missing, n_truncated, reading.max_length, reading.truncation),
            **({"max_chunks": reading.max_chunks} if reading.chunks else {}),
            "precision": encoder_precision_record(enc, chosen)}


def _zeroshot_partition(spec: dict) -> dict:
    import warnings

    import pandas as pd

    frame = pd.concat(list(_chunks(spec)), ignore_index=True)

    if MODELS.size < WORKER_CACHE:
        MODELS.resize(WORKER_CACHE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # counted per job by the driver, not per partition
        out = zeroshot(frame, model=spec["model"], quiet=True, **spec["options"])
    meta = out.attrs["quantformer"]
    out.attrs = {}
    write_frame(out, spec["output"])
    return {**_counts(len(out), meta["n_missing"], meta["n_truncated"], meta["max_length"],
                      meta["truncation"]),
            **({"max_chunks": meta["max_chunks"]} if meta["truncation"] == CHUNKS else {}),
            "precision": meta["precision"]}


_RUNNERS = {"predict": _predict_partition, "embed": _embed_partition,
            "zeroshot": _zeroshot_partition}


# ------------------------------------------------------------------------------------------
# the driver


def run_partitions(verb: str, model, inputs, out, *, options: dict, corpus: dict | None = None,
                   scheduler: str | None = None, resume: bool = False,
                   quiet: bool = False, runner=None) -> dict:
    """Run ``verb`` over every partition of ``inputs`` into the folder ``out``.

    Args:
        verb: ``predict``, ``zeroshot`` or ``embed``; or another verb with its ``runner``.
        model: model directory (predict) or model id/folder (zeroshot, embed; None = default).
        inputs: a folder, a glob, a file, or a list of files/globs.
        out: output folder (new, empty, or a folder to resume).
        options: the verb's options (recorded in the manifest; resuming needs the same).
        corpus: ``text_col``, ``id_col``, ``label_col``, ``fmt``.
        scheduler: ``None``, ``"local:N"`` or ``"tcp://host:port"``.
        resume: skip partitions whose output is complete.
        quiet: no progress bar and no per-partition lines.
        runner: a module-level ``runner(spec) -> counts`` (see :func:`run_partition`) for a
            verb of a higher module (``explain``); None for the three verbs here.

    Returns:
        A summary dict: ``out``, ``partitions``, ``done`` (this run), ``skipped``, ``rows``,
        ``seconds``, ``docs_per_second``, ``manifest``.

    Raises:
        InputError: bad inputs or ``out`` (before any work), or bad partitions (after the
            others finished; their names in the message).
    """
    corpus = {k: v for k, v in (corpus or {}).items() if v is not None}
    check_scheduler_reachable(scheduler)  # before anything is written
    parts = list_partitions(inputs)
    names = output_names(parts)
    folder = check_job_dir(out, resume, MANIFEST).resolve()  # absolute: workers have other folders
    if verb in ("zeroshot", "embed"):  # a hub id or None; the others take a model directory
        model = resolve_model(model)
    job = {"verb": verb, "model": str(Path(model).resolve()) if Path(str(model)).exists()
           else str(model), "options": options, "corpus": corpus}
    manifest = Manifest(folder, job)
    rows, offsets = scan_partitions(parts, corpus)  # before anything is written
    existed = folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    todo = [i for i, n in enumerate(names) if not manifest.complete(n)]
    manifest.start_run(scheduler, len(todo))
    t0 = time.perf_counter()
    try:
        with dask_client(scheduler) as client:
            threads = getattr(client, "quantformer_threads", None)
            specs = [{"verb": verb, "model": job["model"], "options": options,
                      "corpus": corpus, "input": str(parts[i].resolve()),
                      "output": str(folder / names[i]), "id_offset": offsets[i],
                      "threads": threads, "runner": runner} for i in todo]
            failed = _drive(client, specs, manifest, sum(rows[i] for i in todo), quiet)
    except BaseException:  # Ctrl-C included: no temporary file, no manifest of nothing
        _remove_orphans(folder, names)
        _undo_empty_start(manifest, existed)
        raise
    manifest.finish_run()
    _remove_orphans(folder, names)
    if failed:
        _undo_empty_start(manifest, existed)
    _warn_missing(manifest, [names[i] for i in todo])
    _warn_truncated(manifest, [names[i] for i in todo])
    if failed:
        raise InputError(f"{len(failed)} partition(s) failed: " + "; ".join(
            f"'{r['input']}': {r['error']}" for r in failed) + f". The other partitions' "
            f"outputs are in '{folder}'; fix these and rerun with {{resume}}",
            params=["resume", *{p for r in failed for p in r.get("params", ())}])
    secs = time.perf_counter() - t0
    done_rows = sum(rows[i] for i in todo)
    return {"out": str(folder), "partitions": len(parts), "done": len(todo),
            "skipped": len(parts) - len(todo), "rows": int(sum(rows)),
            "rows_done": int(done_rows), "seconds": round(secs, 3),
            "docs_per_second": round(done_rows / secs, 1) if secs > 0 else None,
            "manifest": str(manifest.path)}


def _results(client, specs: list[dict]):
    """Yield (spec, result) as partitions finish: in order without a client, else as Dask
    completes them."""
    if client is None:
        for spec in specs:
            yield spec, run_partition(spec)
        return
    from distributed import as_completed

    futures = {client.submit(run_partition, spec, retries=TASK_RETRIES, pure=False,
                             key=f"quantformer-{spec['verb']}-{Path(spec['output']).stem}-"
                                 f"{os.urandom(4).hex()}"): spec for spec in specs}
    for fut in as_completed(futures):
        spec = futures[fut]
        try:
            yield spec, {**fut.result(), **attempts(client, fut.key)}
        except Exception as exc:
            for other in futures:
                other.cancel()
            raise RuntimeError(f"partition '{spec['input']}' failed after "
                               f"{TASK_RETRIES} retries: {type(exc).__name__}: {exc}") from exc


def _undo_empty_start(manifest: Manifest, existed: bool) -> None:
    """A job that has written no partition in any run leaves nothing: its manifest goes, and
    the output folder too when this run created it (so a plain rerun is not refused)."""
    if manifest.data["partitions"]:
        return
    manifest.path.unlink(missing_ok=True)
    if not existed:
        with contextlib.suppress(OSError):  # not empty: something else is in it, keep it
            manifest.path.parent.rmdir()


def _remove_orphans(folder: Path, names: list[str]) -> None:
    """Delete temporary files that tasks killed mid-write left (``.<output>.<random>.part``);
    called when no task of the job runs any more."""
    for name in names:
        for tmp in folder.glob(f".{glob.escape(name)}.*.part"):
            tmp.unlink(missing_ok=True)


def _warn_missing(manifest: Manifest, names: list[str]) -> None:
    """One warning for the documents of this run that had no text (as the one-file verbs)."""
    import warnings

    done = [manifest.data["partitions"][n] for n in names if n in manifest.data["partitions"]]
    missing = sum(e.get("missing", 0) for e in done)
    if missing:
        warnings.warn(f"{missing} of {sum(e['rows'] for e in done)} document(s) have a missing "
                      "or empty text; they are kept with a missing result (counts per "
                      "partition in manifest.json)", UserWarning, stacklevel=3)


def _warn_truncated(manifest: Manifest, names: list[str]) -> None:
    """One warning for the documents of this run cut to the model's maximum length, worded as
    the one-file verbs' (:func:`quantformer.models.tokenize.warn_truncated`)."""
    done = [manifest.data["partitions"][n] for n in names if n in manifest.data["partitions"]]
    cut = [e for e in done if e.get("truncated")]
    if cut and cut[0]["truncation"] == CHUNKS:  # windows dropped by max_chunks
        warn_dropped(sum(e["truncated"] for e in cut), sum(e["rows"] for e in done),
                     cut[0].get("max_chunks"))
    elif cut:
        warn_truncated(sum(e["truncated"] for e in cut), sum(e["rows"] for e in done),
                       cut[0]["max_length"], cut[0]["truncation"])


def _drive(client, specs: list[dict], manifest: Manifest, total: int, quiet: bool) -> list:
    """Run ``specs``, record each finished partition, show progress; return the failures."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit="doc", desc=f"{len(specs)} partitions", disable=quiet)
    failed, k = [], 0
    try:
        for spec, res in _results(client, specs):
            k += 1
            name = Path(spec["output"]).name
            if "error" in res:
                failed.append(res)
                bar.write(f"partition {k}/{len(specs)} {spec['input']}: FAILED: {res['error']}")
                continue
            manifest.record(name, {**res, "output": name})
            bar.update(res["rows"])
            bar.set_postfix_str(f"{k}/{len(specs)} partitions")
            if not quiet:
                bar.write(f"partition {k}/{len(specs)} {spec['input']}: {res['rows']} docs in "
                          f"{res['seconds']:.1f} s on {res['worker']}")
    finally:
        bar.close()
    return failed


# ------------------------------------------------------------------------------------------
# the public API: one function per verb


def predict_partitions(model, inputs, out, *, scheduler: str | None = None,
                       resume: bool = False, batch_size: int = 64, keep_text: bool = False,
                       device: str = "auto", text_col: str | None = None,
                       id_col: str | None = None, label_col: str | None = None,
                       fmt: str | None = None, quiet: bool = False, quoting: str = "auto",
                       backend: str = "torch", quantize: str = "none",
                       precision: str = DEFAULT_PRECISION, chunking: dict | None = None) -> dict:
    """Classify a partitioned corpus with a fine-tuned model, one output Parquet per partition
    (``quantformer.predict_partitions``; the CLI's ``predict`` with a folder, glob or several
    files as ``--input``). See the module docstring for the output folder, the manifest,
    resuming and the schedulers; the other arguments are those of
    :func:`quantformer.infer.predict.predict_file` (``chunking``: ``truncation``,
    ``stride``, ``max_chunks``, ``aggregate``, None each for as trained; checked here
    before any work, against the model's window on each worker).

    Returns:
        The summary of :func:`run_partitions` (not the predictions: read them from ``out``).
    """
    trained = read_record(model).get("hyperparameters", {}).get("truncation")
    check_backend(backend, quantize, device)
    check_with_backend(check_precision(precision), backend, quantize)
    chunking = {k: v for k, v in (chunking or {}).items() if v is not None}
    # as trained where not given (a model without a recorded truncation: let each task check)
    Reading(**{"truncation": trained or CHUNKS, **chunking}).check()
    opts = {"batch_size": int(batch_size), "keep_text": bool(keep_text), "device": device,
            "backend": backend, "quantize": quantize, "precision": precision,
            **({"chunking": chunking} if chunking else {})}
    return run_partitions("predict", model, inputs, out, options=opts, scheduler=scheduler,
                          resume=resume, quiet=quiet, corpus={
                              "text_col": text_col, "id_col": id_col, "label_col": label_col,
                              "fmt": fmt, "quoting": quoting})


def embed_partitions(inputs, out, model: str | None = None, *, scheduler: str | None = None,
                     resume: bool = False, batch_size: int = 32, max_length: int | None = None,
                     layout: str = "auto", truncation: str = DEFAULT_TRUNCATION,
                     normalize: bool = False,
                     keep_text: bool = False, device: str = "auto", text_col: str | None = None,
                     id_col: str | None = None, fmt: str | None = None,
                     quiet: bool = False, quoting: str = "auto", backend: str = "torch",
                     quantize: str = "none", stride: int | None = None,
                     max_chunks: int | None = None, precision: str = DEFAULT_PRECISION) -> dict:
    """Embed a partitioned corpus, one Parquet per partition with a list column ``embedding``
    (``layout="auto"`` or ``"list"``) or columns ``dim_1 ..`` (``"wide"``); other arguments as
    :func:`quantformer.infer.embed.embed` and :func:`run_partitions`."""
    asked = check_reading_request(Reading(truncation, DEFAULT_MAX_LENGTH, stride, max_chunks))
    check_with_backend(check_precision(precision), backend, quantize)
    chunks = {"stride": stride, "max_chunks": max_chunks} if asked.chunks else {}
    opts = {"layout": resolve_layout(layout, "x.parquet"), "batch_size": int(batch_size),
            "max_length": max_length, "truncation": truncation, **chunks,
            "normalize": bool(normalize), "keep_text": bool(keep_text), "device": device,
            "backend": backend, "quantize": quantize, "precision": precision}
    return run_partitions("embed", model, inputs, out, options=opts, scheduler=scheduler,
                          resume=resume, quiet=quiet, corpus={
                              "text_col": text_col, "id_col": id_col, "fmt": fmt,
                              "quoting": quoting})


def zeroshot_partitions(inputs, out, labels, hypothesis: str | None = None, *,
                        model: str | None = None, scheduler: str | None = None,
                        resume: bool = False, text_col: str | None = None,
                        id_col: str | None = None, fmt: str | None = None, quiet: bool = False,
                        quoting: str = "auto", **options) -> dict:
    """Zero-shot classify a partitioned corpus; ``options`` as :func:`quantformer.infer.zeroshot`
    (method, multi_label, batch_size, max_length, truncation, device, calibration,
    temperature, keep_text, backend, quantize, precision). Embedding calibration is per partition (module docstring)."""
    opts = {"labels": check_labels(labels, options.get("multi_label", False)),
            "hypothesis": check_hypothesis(hypothesis or DEFAULT_HYPOTHESIS), **options}
    method_for(model, options.get("method", "auto"), options.get("backend", "torch"),
               **{k: options.get(k) for k in ("aggregate", "calibration", "temperature")})
    return run_partitions("zeroshot", model, inputs, out, options=opts, scheduler=scheduler,
                          resume=resume, quiet=quiet,
                          corpus={"text_col": text_col, "id_col": id_col, "fmt": fmt,
                                  "quoting": quoting})


def describe(summary: dict) -> str:
    """The line the CLI prints at the end of a partitioned run."""
    rate = summary["docs_per_second"]
    return (f"wrote {summary['done']} partition(s) ({summary['rows_done']} documents) to "
            f"{summary['out']} in {summary['seconds']:.1f} s"
            + (f" ({rate:.0f} docs/s)" if rate else "")
            + (f"; skipped {summary['skipped']} complete partition(s)" if summary["skipped"]
               else "") + f"; manifest: {summary['manifest']}")
