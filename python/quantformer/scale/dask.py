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
import json
import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path

from .._core.atomic import write_text
from .._core.errors import InputError
from .._core.version import __version__
from ..infer.cache import MODELS
from ..infer.classifier import CHUNK_ROWS
from ..infer.embed import check_length, embed_texts, embedding_frame, load_encoder, resolve_layout
from ..infer.load import load_model
from ..infer.zeroshot import DEFAULT_HYPOTHESIS, check_hypothesis, check_labels, zeroshot
from ..io.frames import (
    FrameWriter,
    _check_input,
    _duplicate_ids,
    _read_whole,
    _SeenIds,
    detect_format,
    iter_frames,
    to_frame,
    write_frame,
)
from ..io.modeldir import read_record
from ..io.writable import check_writable
from ..models.hub import resolve_model
from ..models.onnx.backend import check_backend
from ..models.precision import check_precision, check_with_backend
from ..models.tokenize import check_strategy, warn_truncated

MANIFEST = "manifest.json"
VERBS = ("predict", "zeroshot", "embed")
TASK_RETRIES = 2
_GLOB_CHARS = "*?["
WORKER_CACHE = 4  # models a worker process keeps loaded (quantformer.infer.cache.MODELS)


# ------------------------------------------------------------------------------------------
# partitions and the output folder


def is_partitioned(inputs, scheduler=None, resume: bool = False, out=None) -> bool:
    """True when ``inputs`` (str or list) names a folder, a glob or several files, when a
    ``scheduler`` or ``resume`` asks for a partitioned run, or when ``out`` is an existing
    folder or a name without an extension; False for one corpus file into one output file."""
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if scheduler or resume or len(items) != 1:
        return True
    if out is not None and (Path(out).is_dir() or not Path(out).suffix):
        return True
    item = str(items[0])
    return Path(item).is_dir() or any(c in item for c in _GLOB_CHARS)


def list_partitions(inputs) -> list[Path]:
    """The partition files of ``inputs``: a folder (its files, sorted, hidden ones left out),
    a glob (sorted matches) or a list of files and globs (in the order given).

    Raises:
        InputError: nothing matches, a file does not exist, a file is listed twice.
    """
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    parts: list[Path] = []
    for item in map(str, items):
        p = Path(item)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        elif any(c in item for c in _GLOB_CHARS):
            found = sorted(Path(f) for f in glob.glob(item) if Path(f).is_file())
        elif p.is_file():
            found = [p]
        else:
            raise InputError(f"{{inputs}} '{item}' is neither a file, a folder nor a glob that "
                             "matches files; check the path", params=["inputs"])
        if not found:
            raise InputError(f"{{inputs}} '{item}' matches no files; check the path or "
                             "pattern", params=["inputs"])
        parts.extend(found)
    seen = [str(p.resolve()) for p in parts]
    dup = sorted({s for s in seen if seen.count(s) > 1})
    if dup:
        raise InputError(f"{{inputs}} lists {dup[0]} more than once; give each partition once",
                         params=["inputs"])
    return parts


def output_names(parts: list[Path]) -> list[str]:
    """One output file name per partition: its name with the extension replaced by
    ``.parquet``. Raises InputError when two partitions would get the same output name."""
    names = [p.stem + ".parquet" for p in parts]
    clash = [n for n in dict.fromkeys(names) if names.count(n) > 1]
    if clash:
        who = [str(p) for p, n in zip(parts, names) if n == clash[0]]
        raise InputError(f"partitions {who[0]} and {who[1]} would both be written to "
                         f"'{clash[0]}'; rename one (outputs are named after their input)")
    return names


def check_out_dir(out, resume: bool) -> Path:
    """Validate the output folder before any work.

    Raises:
        InputError: ``out`` is a file; ``out`` is non-empty and ``resume`` is False; ``resume``
            is True but the non-empty folder has no ``manifest.json``.
    """
    d = Path(out)
    if d.exists() and not d.is_dir():
        raise InputError(f"{{out}} '{out}' is a file; a partitioned run writes a folder "
                         "(one Parquet file per input partition)", params=["out"])
    content = [f for f in d.iterdir() if not f.name.startswith(".")] if d.exists() else []
    if content and not resume:
        raise InputError(f"{{out}} '{out}' exists and is not empty; pass {{resume}} to "
                         "continue the job recorded in its manifest.json, or choose a new {out}",
                         params=["out", "resume"])
    if content and not (d / MANIFEST).exists():
        raise InputError(f"{{out}} '{out}' has files but no {MANIFEST}, so it is not the "
                         "output of a quantformer partitioned run; choose a new {out}",
                         params=["out"])
    return check_writable(d)


# ------------------------------------------------------------------------------------------
# the scan: rows, default-id offsets and doc_id uniqueness across partitions


def _parquet_ids(path: Path, id_col: str | None, text_col: str | None):
    """(row count, ids or None) from a Parquet file's schema, metadata and id column only."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        raise InputError(f"cannot read partition '{path}' as Parquet: {exc}") from exc
    names = pf.schema_arrow.names
    text = text_col or "text"
    if text not in names:
        raise InputError(f"partition '{path}' has no text column '{text}' (columns: "
                         f"{', '.join(names)}); name it with {{text_col}}", params=["text_col"])
    icol = id_col or ("doc_id" if "doc_id" in names else None)
    if icol is not None and icol not in names:
        raise InputError(f"partition '{path}' has no id column '{icol}' (columns: "
                         f"{', '.join(names)}); name it with {{id_col}}", params=["id_col"])
    if pf.metadata.num_rows == 0:
        raise InputError(f"partition '{path}' is empty: it has no documents")
    if icol is None:
        return pf.metadata.num_rows, None
    import pandas as pd

    ids = pf.read(columns=[icol]).column(0).to_pandas()
    ids = ids.astype(object).where(ids.notna(), None)
    if ids.isna().any():
        raise InputError(f"partition '{path}' has documents without an id in '{icol}'; fill "
                         "them in or drop {id_col}", params=["id_col"])
    ids = pd.Series([str(v) for v in ids], dtype=object)
    dup = ids[ids.duplicated()]
    if len(dup):
        raise _duplicate_ids(f"partition '{path}'", dup.tolist())
    return len(ids), ids


def _frame_ids(path: Path, corpus: dict):
    """(row count, ids or None) of a non-Parquet partition, read whole and validated."""
    p, kind = _check_input(path, corpus.get("fmt"))
    raw = _read_whole(p, kind, corpus.get("text_col"), corpus.get("id_col"),
                      corpus.get("quoting", "auto"))
    frame = to_frame(raw, text_col=corpus.get("text_col"), id_col=corpus.get("id_col"),
                     label_col=corpus.get("label_col"), source=f"partition '{path}'",
                     warn_label=False)
    has_ids = corpus.get("id_col") is not None or "doc_id" in [str(c) for c in raw.columns]
    return len(frame), frame["doc_id"] if has_ids else None


def scan_partitions(parts: list[Path], corpus: dict) -> tuple[list[int], list[int]]:
    """Rows of every partition and the offset of its default ids; checks doc_id uniqueness
    across partitions (see the module docstring).

    Returns:
        ``(rows, id_offsets)``, one entry per partition.

    Raises:
        InputError: an unreadable or empty partition, a missing column, or a doc_id found in
            two partitions (the id and the later partition named).
    """
    seen = _SeenIds()
    rows, offsets, total = [], [], 0
    for p in parts:
        kind = detect_format(p, corpus.get("fmt"))
        if kind == "parquet":
            n, ids = _parquet_ids(p, corpus.get("id_col"), corpus.get("text_col"))
        else:
            n, ids = _frame_ids(p, corpus)
        ids = ids if ids is not None else _default_ids(total, n)
        dup = seen.add(ids)
        if dup:
            raise InputError(f"doc_ids must be unique across partitions, but '{dup[0]}' of "
                             f"'{p}' is also in an earlier partition; make ids unique or "
                             "pass another {id_col}", params=["id_col"])
        rows.append(n)
        offsets.append(total)
        total += n
    return rows, offsets


def _default_ids(offset: int, n: int):
    import pandas as pd

    return pd.Series([f"text{i}" for i in range(offset + 1, offset + n + 1)], dtype=object)


# ------------------------------------------------------------------------------------------
# the manifest


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _versions() -> dict:
    from importlib import metadata

    out = {"quantformer": __version__}
    for pkg in ("torch", "transformers", "dask", "distributed", "pandas", "pyarrow"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


class Manifest:
    """``manifest.json`` of an output folder: the job's settings and one entry per finished
    partition. :meth:`save` writes it atomically."""

    def __init__(self, folder: Path, job: dict):
        self.path = Path(folder) / MANIFEST
        old = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else None
        if old is not None and old.get("job") != job:
            raise InputError(
                f"{{out}} '{folder}' holds a {old.get('job', {}).get('verb')} job with other "
                f"settings ({_diff(old.get('job', {}), job)}); resume with the same verb, "
                "model and options, or choose a new {out}", params=["out"])
        self.data = old or {"job": job, "created": _now(), "runs": [], "partitions": {}}

    def start_run(self, scheduler, todo: int) -> None:
        self.data["runs"].append({"started": _now(), "finished": None,
                                  "scheduler": scheduler, "partitions_to_do": todo,
                                  "versions": _versions(), "host": socket.gethostname()})
        self.save()

    def complete(self, name: str) -> bool:
        """True when partition output ``name`` is recorded and its file holds those rows
        (``out_rows`` when a verb writes another number of rows than it reads)."""
        entry = self.data["partitions"].get(name)
        f = self.path.parent / name
        if entry is None or not f.exists():
            return False
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(f).metadata.num_rows == entry.get("out_rows", entry["rows"])
        except Exception:
            return False

    def record(self, name: str, result: dict) -> None:
        self.data["partitions"][name] = {**result, "finished": _now(),
                                         "run": len(self.data["runs"])}
        self.save()

    def finish_run(self) -> None:
        self.data["runs"][-1]["finished"] = _now()
        self.save()

    def save(self) -> None:
        write_text(self.path, json.dumps(self.data, indent=2, default=str))


def _diff(old: dict, new: dict) -> str:
    keys = sorted(set(old) | set(new))
    diffs = [f"{k}: {old.get(k)!r} then, {new.get(k)!r} now" for k in keys
             if old.get(k) != new.get(k)]
    return "; ".join(diffs)[:300]


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
        counts = (spec.get("runner") or _RUNNERS[spec["verb"]])(spec)
    except InputError as exc:
        # the message with its parameter fields, rendered where the job's error is raised
        return {"input": spec["input"], "error": str(exc.args[0]) if exc.args else str(exc),
                "params": list(exc.params)}
    return {"input": spec["input"], **counts, "seconds": round(time.perf_counter() - t0, 3),
            "worker": f"{socket.gethostname()}:{os.getpid()}"}


def cached_model(verb: str, model, device: str, backend: str = "torch",
                 quantize: str = "none", precision: str = "fp32"):
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
                       **spec["corpus"])


def _counts(rows: int, missing: int, truncated: int, max_length: int, truncation: str) -> dict:
    """What a partition task reports besides its timing (see :func:`run_partition`)."""
    return {"rows": int(rows), "missing": int(missing), "truncated": int(truncated),
            "max_length": int(max_length), "truncation": truncation}


def _predict_partition(spec: dict) -> dict:
    opts = spec["options"]
    clf = cached_model("predict", spec["model"], opts["device"], opts.get("backend", "torch"),
                       opts.get("quantize", "none"), opts.get("precision", "fp32"))
    n = n_missing = 0
    counts: dict = {}
    with FrameWriter(spec["output"]) as writer:
        for chunk in _chunks(spec):
            probs, missing, rechecked = clf.scored(chunk["text"].tolist(), opts["batch_size"],
                                                    False, counts)
            writer.write(clf.output_frame(chunk, probs, missing, opts["keep_text"], rechecked))
            n += len(chunk)
            n_missing += int(missing.sum())
    return _counts(n, n_missing, counts.get("truncated", 0), clf.max_length, clf.truncation)


def _embed_partition(spec: dict) -> dict:
    opts = spec["options"]
    enc = cached_model("embed", spec["model"], opts["device"], opts.get("backend", "torch"),
                       opts.get("quantize", "none"))
    length = check_length(enc, opts["max_length"])
    n = n_missing = n_truncated = 0
    with FrameWriter(spec["output"]) as writer:
        for chunk in _chunks(spec):
            vecs, encoded = embed_texts(enc, chunk["text"].tolist(), max_length=length,
                                  truncation=opts["truncation"], batch_size=opts["batch_size"],
                                  normalize=opts["normalize"], progress=False)
            writer.write(embedding_frame(chunk, vecs, opts["layout"], keep_text=opts["keep_text"],
                                         backend=getattr(enc.model, "label", "torch")))
            n += len(chunk)
            n_missing += int(encoded.missing.sum())
            n_truncated += int(encoded.truncated.sum())
    return _counts(n, n_missing, n_truncated, length, opts["truncation"])


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
    return _counts(len(out), meta["n_missing"], meta["n_truncated"], meta["max_length"],
                   meta["truncation"])


_RUNNERS = {"predict": _predict_partition, "embed": _embed_partition,
            "zeroshot": _zeroshot_partition}


# ------------------------------------------------------------------------------------------
# the engine


def parse_scheduler(scheduler: str | None):
    """``None``, ``("local", N)`` or ``("address", "tcp://...")``.

    Raises:
        InputError: anything else (the message shows both accepted forms).
    """
    if scheduler is None:
        return None
    s = str(scheduler).strip()
    if s.startswith("local:") and s[6:].isdigit() and int(s[6:]) > 0:
        return ("local", int(s[6:]))
    if "://" in s and len(s.split("://", 1)[1]) > 0:
        return ("address", s)
    raise InputError(f"{{scheduler}} '{scheduler}' is not understood; use local:N (N worker "
                     "processes on this machine) or the address of a running Dask scheduler, "
                     "e.g. tcp://10.0.0.5:8786", params=["scheduler"])


def check_scheduler_reachable(scheduler: str | None, timeout: float = 5.0) -> None:
    """Open (and close) a TCP connection to a ``tcp://host:port`` scheduler before anything is
    written: nothing listening fails in milliseconds, not after Dask's 30 s connect timeout.

    Raises:
        InputError: the address cannot be reached (the message names it and the fix).
    """
    from urllib.parse import urlparse

    how = parse_scheduler(scheduler)
    if how is None or how[0] != "address":
        return
    url = urlparse(how[1])
    if url.scheme not in ("tcp", "tls") or not url.hostname or not url.port:
        return  # other transports (ucx, inproc): left to Dask
    try:
        socket.create_connection((url.hostname, url.port), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"cannot reach the Dask scheduler at {how[1]} "
                         f"({exc.strerror or exc}); start it first (dask scheduler, or a "
                         "dask-jobqueue cluster), or check {scheduler}",
                         params=["scheduler"]) from None


def torch_threads(n_workers: int) -> int:
    """Torch threads per worker so that workers x threads fits this machine's cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // n_workers)


# Dask's statistical profiler samples every worker thread's stack every 10 ms; over torch's
# deep stacks that costs CPU for nothing here (tasks are long, one per partition)
WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


def local_cluster(n_workers: int):
    """A :class:`distributed.LocalCluster` of ``n_workers`` processes, 1 Dask thread each,
    profiler off (:data:`WORKER_CONFIG`); a context manager."""
    import dask
    from distributed import LocalCluster

    with dask.config.set(WORKER_CONFIG):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                            dashboard_address=":0")


@contextlib.contextmanager
def dask_client(scheduler: str | None):
    """A :class:`distributed.Client` for ``scheduler`` (None yields None); a LocalCluster
    started here is closed on exit."""
    how = parse_scheduler(scheduler)
    if how is None:
        yield None
        return
    from distributed import Client

    if how[0] == "local":
        with local_cluster(how[1]) as cluster, Client(cluster) as client:
            client.quantformer_threads = torch_threads(how[1])
            try:
                yield client
            finally:
                _close_quietly(client, cluster)
    else:
        check_scheduler_reachable(scheduler)
        try:
            client = Client(how[1], timeout="30s")
        except OSError as exc:
            raise InputError(f"cannot reach the Dask scheduler at {how[1]} ({exc}); start it "
                             "first (dask scheduler, or a dask-jobqueue cluster)") from exc
        with client:
            client.quantformer_threads = None
            yield client


#: seconds a LocalCluster's worker process gets to exit before its nanny kills it (Dask's
#: default, 4 s, is too short for a worker that holds torch on a busy machine: "Worker process
#: still alive after 4.0 seconds, killing", then a "leaked semaphore" at exit)
WORKER_CLOSE_SECONDS = 30


async def _close_workers(cluster, timeout: float) -> None:
    import asyncio

    await asyncio.gather(*(w.close(timeout=timeout) for w in list(cluster.workers.values())),
                         return_exceptions=True)


def _close_quietly(client, cluster) -> None:
    """Stop a LocalCluster started here in order: tasks cancelled, each worker closed by its
    nanny with :data:`WORKER_CLOSE_SECONDS` to exit on its own, then the cluster."""
    with contextlib.suppress(Exception):
        client.cancel(list(client.futures))
    with contextlib.suppress(Exception):
        cluster.sync(_close_workers, cluster, WORKER_CLOSE_SECONDS)


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
            yield spec, {**fut.result(), **_attempts(client, fut.key)}
        except Exception as exc:
            for other in futures:
                other.cancel()
            raise RuntimeError(f"partition '{spec['input']}' failed after "
                               f"{TASK_RETRIES} retries: {type(exc).__name__}: {exc}") from exc


def _task_attempts(dask_scheduler, key) -> dict | None:
    ts = dask_scheduler.tasks.get(key)
    if ts is None:
        return None
    return {"workers_lost": int(ts.suspicious), "retries_left": int(ts.retries)}


def _attempts(client, key) -> dict:
    """How often a finished task was run again: ``workers_lost`` (workers that died while it
    ran there: the scheduler's ``suspicious`` count) and ``retries`` (errors retried, of
    :data:`TASK_RETRIES`); empty when the scheduler cannot say (e.g. quantformer is not
    installed beside a remote scheduler)."""
    try:
        got = client.run_on_scheduler(_task_attempts, key=key)
    except Exception:
        return {}
    if not got:
        return {}
    return {"workers_lost": got["workers_lost"],
            "retries": max(0, TASK_RETRIES - got["retries_left"])}


def map_runs(fn, items: list, scheduler: str | None = None, on_result=None) -> list:
    """``[fn(x) for x in items]``, fanned out over ``scheduler`` (``None``: in this process).

    Used by ``tune`` and ``compare`` for their independent runs; results come back in the
    order of ``items`` whatever order they finish in, so they equal the serial run's.
    ``on_result(i, result)`` is called as each finishes (for progress lines).
    """
    results = [None] * len(items)
    with dask_client(scheduler) as client:
        if client is None:
            for i, x in enumerate(items):
                results[i] = fn(x)
                if on_result:
                    on_result(i, results[i])
            return results
        from distributed import as_completed

        futures = {client.submit(fn, x, retries=TASK_RETRIES, pure=False): i
                   for i, x in enumerate(items)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            if on_result:
                on_result(i, results[i])
    return results


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
    folder = check_out_dir(out, resume).resolve()  # absolute: workers have other folders
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
    if cut:
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
                       precision: str = "auto") -> dict:
    """Classify a partitioned corpus with a fine-tuned model, one output Parquet per partition
    (``quantformer.predict_partitions``; the CLI's ``predict`` with a folder, glob or several
    files as ``--input``). See the module docstring for the output folder, the manifest,
    resuming and the schedulers; the other arguments are those of
    :func:`quantformer.infer.classifier.predict_file`.

    Returns:
        The summary of :func:`run_partitions` (not the predictions: read them from ``out``).
    """
    read_record(model)

    check_backend(backend, quantize, device)
    check_with_backend(check_precision(precision), backend, quantize)
    opts = {"batch_size": int(batch_size), "keep_text": bool(keep_text), "device": device,
            "backend": backend, "quantize": quantize, "precision": precision}
    return run_partitions("predict", model, inputs, out, options=opts, scheduler=scheduler,
                          resume=resume, quiet=quiet, corpus={
                              "text_col": text_col, "id_col": id_col, "label_col": label_col,
                              "fmt": fmt, "quoting": quoting})


def embed_partitions(inputs, out, model: str | None = None, *, scheduler: str | None = None,
                     resume: bool = False, batch_size: int = 32, max_length: int | None = None,
                     layout: str = "auto", truncation: str = "head_tail",
                     normalize: bool = False,
                     keep_text: bool = False, device: str = "auto", text_col: str | None = None,
                     id_col: str | None = None, fmt: str | None = None,
                     quiet: bool = False, quoting: str = "auto", backend: str = "torch",
                     quantize: str = "none") -> dict:
    """Embed a partitioned corpus, one Parquet per partition with a list column ``embedding``
    (``layout="auto"`` or ``"list"``) or columns ``dim_1 ..`` (``"wide"``); other arguments as
    :func:`quantformer.infer.embed.embed` and :func:`run_partitions`."""
    check_strategy(truncation)
    opts = {"layout": resolve_layout(layout, "x.parquet"), "batch_size": int(batch_size),
            "max_length": max_length, "truncation": truncation,
            "normalize": bool(normalize), "keep_text": bool(keep_text), "device": device,
            "backend": backend, "quantize": quantize}
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
    temperature, keep_text). Embedding calibration is per partition (module docstring)."""
    opts = {"labels": check_labels(labels, options.get("multi_label", False)),
            "hypothesis": check_hypothesis(hypothesis or DEFAULT_HYPOTHESIS), **options}
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
