"""Predicting with a fine-tuned model of any method: one corpus frame in memory
(:func:`predict`, ``quantformer.predict``) or a corpus file streamed in chunks into an output
file (:func:`predict_file`, the ``predict`` verb)."""

from __future__ import annotations

import contextlib

import pandas as pd

from .._core.errors import InputError
from ..io.writing import FrameWriter
from ..io.writable import check_output_file
from ..io.frames import iter_frames
from ..score.calibration import apply_temperature, stored_temperature
from ..models.precision import DEFAULT_PRECISION
from ..models.precision import record as precision_of
from ..models.tokenize import CHUNKS, dropped_counted
from .chunked import with_chunking
from .classifier import CHUNK_ROWS, Classifier, warn_missing
from .load import load_model
from .pipeline import scored_chunks


def predict(model, frame, *, batch_size: int = 64, keep_text: bool = False,
            device: str = "auto", quiet: bool = True, backend: str = "torch",
            quantize: str = "none", precision: str = DEFAULT_PRECISION,
            chunking: dict | None = None) -> pd.DataFrame:
    """Predict a corpus frame with a fine-tuned model (``quantformer.predict(model, frame)``).

    Args:
        model: a :class:`~quantformer.infer.classifier.Classifier` or a model directory path.
        frame: a corpus frame or a sequence of texts.
        batch_size: documents per forward pass at most (default 64; fewer for long documents).
        keep_text: keep the ``text`` column.
        device: used when ``model`` is a path.
        quiet: no progress bar.
        backend, quantize: used when ``model`` is a path: ``torch`` (default) or ``onnx``;
            ``none`` or ``int8`` (see :func:`quantformer.infer.load.load_model`).
        precision: used when ``model`` is a path: ``auto`` (default: bf16 autocast where the
            CPU has AMX or AVX-512 BF16 or the GPU supports bf16, else fp32), ``fp32`` or
            ``bf16``; in bf16, documents whose top-two probability margin is under 0.05 are
            predicted again in fp32, one document at a time (``backend``
            ``torch fp32 recheck``; see :mod:`quantformer.models.precision`). In bf16 a
            document's probabilities can differ in the third decimal with the batch size and
            the partitioning (labels do not: the near ties' fp32 probabilities are the
            document's own); ``fp32`` is the reproducible choice. The ``backend`` column (and
            the CLI's record ``OUT.json``) names the precision used.

    Returns:
        See :meth:`~quantformer.infer.classifier.Classifier.predict`: a last column ``backend`` says which backend
        produced each row (``torch``, ``onnx fp32``, ``onnx int8`` or ``onnx fp32 recheck``).
    """
    clf = model if isinstance(model, Classifier) else load_model(
        model, device=device, backend=backend, quantize=quantize, precision=precision)
    clf = with_chunking(clf, **(chunking or {}))
    return clf.predict(frame, batch_size=batch_size, keep_text=keep_text, progress=not quiet)


def predict_file(model, input_path, out_path, *, text_col: str | None = None,
                 id_col: str | None = None, label_col: str | None = None,
                 fmt: str | None = None, batch_size: int = 64, keep_text: bool = False,
                 device: str = "auto", quiet: bool = False,
                 chunk_rows: int = CHUNK_ROWS, quoting: str = "auto",
                 labels_file: str | None = None, calibrated: bool = False,
                 backend: str = "torch", quantize: str = "none",
                 precision: str = DEFAULT_PRECISION, report: dict | None = None,
                 chunking: dict | None = None, chunks_out: str | None = None) -> int:
    """Stream a corpus file through a classifier into an output file.

    The input is read ``chunk_rows`` documents at a time (Parquet record batches, CSV chunks)
    and each chunk's predictions are appended to a temporary output file, renamed to
    ``out_path`` at the end; on an error nothing is left behind. ``quoting`` and
    ``labels_file`` are passed to :func:`quantformer.io.frames.iter_frames`. Warns how many
    documents were missing (no prediction) and how many were truncated to the model's
    ``max_length``. ``calibrated``: apply the temperature stored by ``quantformer calibrate``
    (see :mod:`quantformer.score.calibration`). ``backend`` and ``quantize`` (used when ``model`` is a path) choose torch or ONNX Runtime (see
    :func:`quantformer.infer.load.load_model`); outputs end with a ``backend`` column (``torch``,
    ``onnx fp32``, ``onnx int8`` or ``onnx fp32 recheck``; with ``precision`` bf16, ``torch
    bf16`` or ``torch fp32 recheck``). ``precision``: as in :func:`predict`. Where a core is
    free for it, the next chunk is read and tokenised while the model runs on this one
    (:mod:`quantformer.infer.pipeline`).
    ``report``: a dict
    that receives the precision used and why (``precision``, ``requested``, ``reason``; the
    CLI writes it into the record ``OUT.json`` beside the output).
    ``chunking``: as in :func:`predict`. ``chunks_out``: with documents read in windows
    (``truncation="chunks"``, trained or asked), a second output file with one row per
    window: ``doc_id``, ``chunk``, ``start``, ``end`` (characters), the window's own
    ``predicted`` and ``prob_<label>``.

    Returns:
        The number of documents written.

    Raises:
        InputError: bad input file or columns, unknown output format, ``chunks_out`` without
            chunks, bad chunking settings (:func:`quantformer.infer.chunked.with_chunking`);
            ModelDirError.
    """
    from tqdm.auto import tqdm

    check_output_file(out_path)
    if chunks_out is not None:
        check_output_file(chunks_out, param="chunks_out")
    # the input is opened (format, columns, ids) before the model loads: a bad file fails fast
    chunks = iter_frames(input_path, chunk_rows=chunk_rows, text_col=text_col, id_col=id_col,
                         label_col=label_col, fmt=fmt, quoting=quoting,
                         labels_file=labels_file)
    clf = model if isinstance(model, Classifier) else load_model(
        model, device=device, backend=backend, quantize=quantize, precision=precision)
    clf = with_chunking(clf, **(chunking or {}))
    if chunks_out is not None and clf.truncation != CHUNKS:
        raise InputError(f"{{chunks_out}} needs documents read in windows; this model reads "
                         f"them with {clf.truncation}: add {{truncation}} chunks",
                         params=["chunks_out", "truncation"])
    if report is not None:
        report.update(precision_record(clf))
    temperature = None
    if calibrated:
        temperature = stored_temperature(clf.record or {}, model)
    n = n_missing = 0
    counts: dict = {}
    bar = tqdm(desc="predicting", unit="doc", total=chunks.total, disable=quiet)
    with FrameWriter(out_path) as writer, contextlib.ExitStack() as stack:
        windows = stack.enter_context(FrameWriter(chunks_out)) if chunks_out else None
        stack.enter_context(dropped_counted())  # warned once for the corpus, below
        # the next chunk read and tokenised while the model runs on this one (where a core is
        # free); the bar advances per batch (run_batches), missing documents once per chunk
        for chunk, probs, missing, rechecked in scored_chunks(clf, chunks, batch_size, bar,
                                                              counts):
            if temperature is not None:
                probs = apply_temperature(probs, temperature)
            writer.write(clf.output_frame(chunk, probs, missing, keep_text, rechecked))
            if windows is not None:
                windows.write(clf.window_rows(chunk, counts))
            n += len(chunk)
            n_missing += int(missing.sum())
            bar.update(int(missing.sum()))
        if n == 0:
            raise InputError(f"'{input_path}' has no documents")
    bar.close()
    warn_missing(n_missing, n)
    clf.warn_truncated(counts, n)
    return n


def precision_record(clf) -> dict:
    """The precision a loaded classifier runs in and why (ONNX Runtime: its graph's)."""
    if getattr(clf.model, "backend", "torch") == "onnx":
        return precision_of(None, clf.model.label)
    return precision_of(clf.precision)

