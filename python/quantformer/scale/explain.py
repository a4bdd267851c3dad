"""Word attributions (:mod:`quantformer.audit.explain`) over partitioned corpora and on Dask.

* :func:`explain_partitions`: a folder, glob or list of corpus files in, one Parquet file of
  word attributions per partition out (the words frame of
  :class:`~quantformer.audit.explain.Explanation`: ``doc_id, word_id, word, start, end,
  attribution, target, completeness_gap``), named after its partition, with the
  ``manifest.json``, ``resume`` and schedulers of :mod:`quantformer.scale.dask`. Each
  document is explained as in one file: Integrated Gradients depend on the document and the
  model only, so the partitioned attributions equal the one-file ones (to float rounding of
  other batches). ``chunking`` (documents read in windows) applies as in one file.
* :func:`read_explanation`: the partitions' attributions back as one frame, in input order.
* :func:`explain_on`: one corpus explained in one task on a scheduler (``explain --scheduler``
  with one input file), the same outputs as in this process.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..audit.explain import check_model, check_steps, explain, explain_precision, warn_unknown_only
from ..audit.explain_check import check
from ..audit.integrate import GAP_TOLERANCE, warn_gaps
from ..infer.chunked import with_chunking
from ..infer.classifier import CHUNK_ROWS
from ..io.writing import FrameWriter
from ..io.frames import iter_frames
from ..models.precision import DEFAULT_PRECISION, check_precision
from ..models.precision import record as precision_of
from .cluster import map_runs
from .dask import cached_model, run_partitions
from .manifest import MANIFEST

VERB = "explain"
WORD_COLUMNS = {"doc_id": "string", "word_id": "int64", "word": "string", "start": "int64",
                "end": "int64", "attribution": "float64", "target": "string",
                "completeness_gap": "float64"}


def _options(opts: dict) -> dict:
    """The keyword arguments of :func:`quantformer.audit.explain.explain` in ``opts``."""
    return {"target": opts["target"], "steps": opts["steps"], "batch_size": opts["batch_size"],
            "precision": opts.get("precision", "fp32")}


def _model(model, opts: dict):
    """The cached classifier of ``model``, reading documents as ``opts["chunking"]`` asks."""
    return with_chunking(cached_model("predict", model, opts["device"], precision="fp32"),
                         **(opts.get("chunking") or {}))


def explain_partition(spec: dict) -> dict:
    """Explain one partition into its output Parquet (a task of
    :func:`quantformer.scale.dask.run_partition`); documents with a missing or empty text
    have no rows.

    Returns:
        The counts of :func:`quantformer.scale.dask.run_partition`, with ``out_rows`` (word
        rows written), ``gap_above`` (explanations whose completeness gap exceeds
        :data:`~quantformer.audit.integrate.GAP_TOLERANCE`), ``items`` (explanations),
        ``unknown_only`` (documents made only of tokens the model does not know) and
        ``id_offset`` (the partition's place in the input order).
    """
    opts = spec["options"]
    clf = _model(spec["model"], opts)
    n = n_missing = n_cut = out_rows = gap_above = items = unknown = 0
    with warnings.catch_warnings(), FrameWriter(spec["output"]) as writer:
        warnings.simplefilter("ignore")  # counted per job by the driver
        for chunk in iter_frames(spec["input"], chunk_rows=CHUNK_ROWS,
                                 id_offset=spec["id_offset"], **spec["corpus"]):
            present = np.array([isinstance(t, str) and t.strip() != "" for t in chunk["text"]],
                               dtype=bool)
            words = empty_words()
            if present.any():
                ex = explain(clf, chunk[present], progress=False, **_options(opts))
                words = ex.words
                n_cut += int(ex.documents.groupby("doc_id")["truncated"].any().sum())
                gap_above += int((ex.documents["completeness_gap"] > GAP_TOLERANCE).sum())
                items += len(ex.documents)
                unknown += int(ex.documents.groupby("doc_id")["unknown_only"].any().sum())
            writer.write(words)
            n += len(chunk)
            n_missing += int((~present).sum())
            out_rows += len(words)
    used = precision_of(explain_precision(opts.get("precision", "fp32"), clf.device))
    return {"rows": n, "missing": n_missing, "truncated": n_cut, "max_length": clf.max_length,
            "truncation": clf.truncation, "out_rows": out_rows, "gap_above": gap_above,
            "items": items, "unknown_only": unknown, "id_offset": int(spec["id_offset"]),
            "precision": used}


def empty_words() -> pd.DataFrame:
    """A words frame without rows (a chunk whose texts are all missing)."""
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in WORD_COLUMNS.items()})


def explain_partitions(model, inputs, out, *, scheduler: str | None = None,
                       resume: bool = False, target: str | None = None,
                       steps: int | None = None, batch_size: int = 8, device: str = "auto",
                       text_col: str | None = None, id_col: str | None = None,
                       fmt: str | None = None, quiet: bool = False,
                       quoting: str = "auto", chunking: dict | None = None,
                       precision: str = DEFAULT_PRECISION) -> dict:
    """Word attributions of a partitioned corpus, one Parquet file per partition
    (``quantformer.explain_partitions``; the CLI's ``explain`` with a folder, glob or several
    files as ``--input``).

    Args:
        model: a model directory of any method explain serves (standard, NLI, SetFit).
        inputs, out, scheduler, resume, quiet: as :func:`quantformer.scale.dask.run_partitions`
            (``out``: a folder; ``scheduler``: None, ``"local:N"`` or ``"tcp://host:port"``).
        target, steps, batch_size, device, chunking, precision: as
            :func:`quantformer.audit.explain.explain`.
        text_col, id_col, fmt, quoting: how the partitions are read.

    Returns:
        The summary of :func:`~quantformer.scale.dask.run_partitions` (read the attributions
        with :func:`read_explanation`). Warns once (CompletenessWarning) when explanations
        have a completeness gap above 5 %, and once when documents consist only of tokens
        the model does not know.

    Raises:
        InputError: a bad ``steps``, ``target``, ``chunking``, model (checked before any
            partition is read), input or ``out``; bad partitions (named, after the others
            finished).
    """
    steps = check_steps(steps)
    check_precision(precision)
    check_model(model, "torch", target, chunking)
    opts = {"target": None if target is None else str(target), "steps": steps,
            "batch_size": int(batch_size), "device": device, "chunking": chunking,
            "precision": precision}
    summary = run_partitions(VERB, model, inputs, out, options=opts, scheduler=scheduler,
                             resume=resume, quiet=quiet, runner=explain_partition,
                             corpus={"text_col": text_col, "id_col": id_col, "fmt": fmt,
                                     "quoting": quoting})
    _warn_counts(Path(summary["manifest"]), summary["done"])
    return summary


def _warn_counts(manifest: Path, done: int) -> None:
    data = json.loads(manifest.read_text(encoding="utf-8"))
    run = len(data["runs"])
    mine = [e for e in data["partitions"].values() if e.get("run") == run]
    if done:
        warn_gaps(sum(e.get("gap_above", 0) for e in mine), sum(e.get("items", 0) for e in mine))
        warn_unknown_only(sum(e.get("unknown_only", 0) for e in mine),
                          sum(e.get("rows", 0) for e in mine))


def read_explanation(out) -> pd.DataFrame:
    """The word attributions of a partitioned ``explain`` run as one frame, the partitions in
    input order (``quantformer.read_explanation``).

    Args:
        out: the output folder of :func:`explain_partitions` (``explain --input FOLDER
            --out OUT``).

    Returns:
        The words frame (columns as :class:`~quantformer.audit.explain.Explanation`'s) of
        every partition the manifest records as finished.

    Raises:
        InputError: ``out`` is not the output folder of a partitioned explain run.
    """
    folder = Path(out)
    path = folder / MANIFEST
    if not path.is_file():
        raise InputError(f"'{out}' has no {MANIFEST}: it is not the output folder of a "
                         "partitioned explain run; give the --out of `quantformer explain "
                         "--input FOLDER`")
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("job", {}).get("verb") != VERB:
        raise InputError(f"'{out}' holds the output of {data.get('job', {}).get('verb')}, not of "
                         "explain")
    entries = sorted(data["partitions"].items(), key=lambda kv: kv[1].get("id_offset", 0))
    frames = [pd.read_parquet(folder / name) for name, _ in entries]
    words = pd.concat(frames, ignore_index=True) if frames else empty_words()
    return words.astype(WORD_COLUMNS)


def _explain_task(job: tuple):
    """One corpus explained on a worker: (Explanation, checks or None, warnings)."""
    model, frame, opts, with_check = job
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = _model(model, opts)
        ex = explain(clf, frame, progress=False, **_options(opts))
        checks = check(clf, frame, ex) if with_check else None
    return ex, checks, [(w.category, str(w.message)) for w in caught]


def explain_on(scheduler: str, model, frame: pd.DataFrame, *, target: str | None = None,
               steps: int | None = None, batch_size: int = 8, device: str = "auto",
               with_check: bool = False, chunking: dict | None = None,
               precision: str = DEFAULT_PRECISION):
    """:func:`quantformer.audit.explain.explain` of ``frame`` in one task on ``scheduler``
    (``"local:N"`` or ``"tcp://host:port"``); its warnings are raised again here.
    ``chunking``: as :func:`quantformer.audit.explain.explain`.

    Returns:
        ``(Explanation, the faithfulness checks of
        :func:`quantformer.audit.explain_check.check` or None)``.
    """
    opts = {"target": target, "steps": check_steps(steps), "batch_size": int(batch_size),
            "device": device, "chunking": chunking, "precision": check_precision(precision)}
    model = str(Path(model).resolve())  # workers may run in other folders
    ex, checks, caught = map_runs(_explain_task, [(model, frame, opts, with_check)],
                                  scheduler)[0]
    for category, message in caught:
        warnings.warn(message, category, stacklevel=2)
    return ex, checks
