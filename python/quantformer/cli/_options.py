"""The options several verbs share (corpus columns, model, device, partitions, Dask, task),
identical wherever they appear, and the argparse converters."""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from pathlib import Path

from .._core.errors import InputError
from .._core.show import print_table
from ..io.columns import LABEL_COLUMN
from ..io.frames import read_frame
from ..io.writing import write_frame
from ..models.hub import MAX_LENGTH_RULE, check_length_value
from ..models.onnx import backend as onnx_backend
from ..models.precision import PRECISIONS
from ..models.tasks import Multilabel
from ..models.reading import DEFAULT_TRUNCATION, TRUNCATIONS, WINDOW_FIELDS
from ..scale.partitions import is_partitioned
from ..models.arguments import TASKS
from ..train import nli
from ..train.chunks import DEFAULT_CHUNK_TRAINING
from ..train.spec import READING_FIELDS, TrainSpec


def add_corpus_options(p: argparse.ArgumentParser, *, label: bool = True) -> None:
    """--text-col, --label-col, --id-col and --format, identical for every verb."""
    g = p.add_argument_group("corpus columns")
    g.add_argument("--text-col", default=None, help="text column (default: text)")
    if label:
        g.add_argument("--label-col", default=None,
                       help="label column (default: label, when it exists)")
    g.add_argument("--id-col", default=None,
                   help="document id column (default: doc_id when it exists, else text1..textN)")
    g.add_argument("--format", dest="in_format", default=None,
                   help="input format when the extension does not tell: parquet, csv, tsv, "
                        "txt (sniffed), lines (one document a line), jsonl, rds")
    g.add_argument("--quoting", default="auto", choices=["auto", "csv", "none"],
                   help="quotes in CSV/TSV: csv (RFC 4180), none (every line is one row, "
                        "quotes are text: files made with paste or exported unquoted), auto "
                        "(csv, but refuses a TSV where a quote would merge lines) (auto)")


def add_labels_file_option(p: argparse.ArgumentParser, corpus: str = "--input") -> None:
    """--labels-file: labels one a line in a file of their own (train_text.txt +
    train_labels.txt), for the corpus given with ``corpus``."""
    p.add_argument("--labels-file", default=None,
                   help=f"labels of the {corpus} documents in a file of their own, one a line "
                        f"in document order (e.g. {corpus} train_text.txt --labels-file "
                        "train_labels.txt); instead of --label-col")


def corpus_kwargs(args, *, label: bool = True) -> dict:
    """The read_frame keyword arguments from the shared corpus options (``labels_file`` is
    left out: it belongs to one input of the verb, which passes it itself)."""
    kw = {"text_col": args.text_col, "id_col": args.id_col, "fmt": args.in_format,
          "quoting": args.quoting}
    if label:
        kw["label_col"] = getattr(args, "label_col", None)
    return kw


def add_task_options(p: argparse.ArgumentParser, how: str) -> None:
    """--task, --label-cols, --label-sep (tune, compare, evaluate; see
    :mod:`quantformer.models.tasks`); ``how`` says what the task changes for the verb."""
    g = p.add_argument_group("what is measured")
    g.add_argument("--task", default="classification", choices=TASKS,
                   help=f"classification (default), regression or multilabel; {how}")
    g.add_argument("--label-cols", default=None,
                   help="multilabel: comma-separated 0/1 columns, one per label")
    g.add_argument("--label-sep", default=None,
                   help="multilabel: separator of the labels in one label column (e.g. '|')")


def task_kwargs(args) -> dict:
    """``task``, ``label_cols`` (a list) and ``label_sep`` from :func:`add_task_options`,
    checked by :func:`check_task_flags`."""
    cols = check_task_flags(args)
    return {"task": args.task, "label_cols": cols, "label_sep": args.label_sep}


def check_task_flags(args) -> list[str] | None:
    """``--label-cols`` as a list, after checking that ``--task multilabel`` has exactly one of
    ``--label-cols`` and ``--label-sep``: checked before any file is read, so the error names
    them rather than a missing ``--label-col``.

    Raises:
        InputError: naming ``--label-cols`` and ``--label-sep``.
    """
    cols = [c.strip() for c in args.label_cols.split(",") if c.strip()] \
        if args.label_cols else None
    if args.task == "multilabel":
        Multilabel.for_training(None, cols, args.label_sep)
    return cols


def add_partition_options(p: argparse.ArgumentParser) -> None:
    """--input (one file, or a folder / glob / several files = a partitioned corpus),
    --scheduler and --resume, identical for predict, zeroshot and embed
    (see :mod:`quantformer.scale.dask`)."""
    p.add_argument("--input", required=True, nargs="+",
                   help="corpus file; or a folder, a quoted glob ('tweets/*.parquet') or "
                        "several files: a partitioned corpus, then --out is a folder with one "
                        "Parquet file per partition and a manifest.json (also with one file "
                        "when --out is a folder or has no extension)")
    g = add_scheduler_option(p, "partitions")
    g.add_argument("--resume", action="store_true",
                   help="continue a partitioned run in --out: skip partitions whose output is "
                        "complete (without it a non-empty --out is refused)")


def add_scheduler_option(p: argparse.ArgumentParser, what: str = "runs"):
    """--scheduler (``local:N`` or a Dask scheduler address); returns its argument group."""
    g = p.add_argument_group("Dask")
    g.add_argument("--scheduler", default=None,
                   help="local:N (N worker processes here) or tcp://host:8786 (a running Dask "
                        f"scheduler); default: {what} one after another in this process")
    return g


def partitioned(args) -> bool:
    """True when the verb's arguments ask for a partitioned run; else sets ``args.input`` to
    the one corpus file (today's single-file path)."""
    if is_partitioned(args.input, args.scheduler, args.resume, args.out):
        return True
    args.input = args.input[0]
    return False


def add_model_option(p: argparse.ArgumentParser, help_extra: str = "") -> None:
    p.add_argument("--model", default=None,
                   help="hub id or local model folder (default: the bundled all-MiniLM-L6-v2)"
                        + help_extra)


def add_device_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto",
                   help="auto (CUDA, else MPS, else CPU), cpu, cuda, cuda:N or mps (auto)")


def add_quiet_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def add_results_dir_options(p: argparse.ArgumentParser) -> None:
    """``--out`` (a results folder, new or empty) and ``--overwrite`` (tune, compare)."""
    p.add_argument("--out", required=True, help="output folder (new or empty)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out folder (no earlier file is kept)")


def positive(kind):
    """argparse type: a number > 0 of ``kind`` (int or float).

    Args:
        kind: ``int`` or ``float``.

    Returns:
        A converter that raises ``argparse.ArgumentTypeError`` ("'1.5' is not an integer",
        "'x' is not a number", "must be greater than 0, not 0") for a bad value.
    """
    noun = {int: "an integer", float: "a number"}.get(kind, f"a {kind.__name__}")

    def conv(s: str):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{s}' is not {noun}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, not {s}")
        return v

    conv.__name__ = f"positive {kind.__name__}"
    return conv


def max_length_arg(s: str) -> int:
    """argparse type of every verb's ``--max-length``: the rule of
    :func:`quantformer.models.hub.check_length_value`, with its wording, before any work."""
    try:
        return check_length_value(int(s))
    except (ValueError, InputError):
        raise argparse.ArgumentTypeError(f"{MAX_LENGTH_RULE}, not {s}") from None


def add_backend_options(p) -> None:
    """``--backend`` and ``--quantize`` for the inference verbs (predict, zeroshot, embed)."""
    p.add_argument("--backend", default="torch", choices=onnx_backend.BACKENDS,
                   help="torch (default) or onnx: ONNX Runtime on the CPU, exported once and "
                        "cached (faster; outputs get a 'backend' column)")
    p.add_argument("--quantize", default="none", choices=onnx_backend.QUANTIZE,
                   help="with --backend onnx: int8 = dynamic int8 quantization (about 1.2x "
                        "faster than fp32 on a CPU without VNNI; labels agreed with fp32 on "
                        "98.2-98.9%% of the Abortion test tweets and 99.3-99.7%% of Toxic "
                        "comments; predict runs documents whose int8 top-two margin is under "
                        "0.05 again in fp32, backend 'onnx fp32 recheck': fewer changed labels, "
                        "about fp32's speed)")


#: --precision auto's help on the verbs that follow the hardware
AUTO_BF16 = ("auto (default: bf16 autocast where the CPU has AMX or AVX-512 BF16 or the GPU "
             "supports bf16, fp32 elsewhere; `quantformer info` says which)")
#: what bf16 costs in reproducibility, and where the precision used is recorded
REPRODUCIBLE = ("In bf16 probabilities can differ in the third decimal with the batch size "
                "and the partitioning (labels do not); fp32 is the reproducible choice. The "
                "output's record names the precision used (predict, zeroshot, embed, "
                "explain: OUT.json beside --out; a partitioned run: manifest.json)")
#: the fp32 recheck of near ties, in words
#: what the recheck does to a classifier's documents (a word of the help text, not a column)
RECHECK_VERB = "predicted"
RECHECK = ("In bf16, documents whose top-two probability margin is under 0.05 are {done} "
           "again in fp32 (backend 'torch fp32 recheck')")


def add_precision_option(p, what: str = "classifiers fine-tuned the standard way", *,
                         detail: str | None = None, auto: str = AUTO_BF16,
                         onnx: bool = True) -> None:
    """``--precision auto|fp32|bf16`` (see :mod:`quantformer.models.precision`): ``auto``'s
    meaning, then ``detail`` (default: the fp32 recheck of near ties, applying to ``what``)
    and, with ``onnx``, that ``--quantize`` sets the precision of ``--backend onnx``."""
    if detail is None:
        detail = RECHECK.format(done=RECHECK_VERB) + f"; applies to {what}"
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help=f"numeric precision of the torch backend: {auto}, fp32 or bf16 "
                        "(allowed without native bf16, with a warning: emulated, slower). "
                        + detail + ("; with --backend onnx, --quantize sets the precision"
                                    if onnx else "") + ". " + REPRODUCIBLE)


def print_precision(used: dict, what: str | None = None, file=None) -> None:
    """The line every verb that runs a model prints: ``precision: <name> (<reason>)``, or
    ``precision of <what>: ...`` (on ``file``; None: stdout)."""
    print(f"precision{' of ' + what if what else ''}: {used['precision']} ({used['reason']})",
          file=file)


def add_endpoint_options(p) -> None:
    """``--endpoint`` and ``--api-key-env``: an OpenAI-compatible server for ``--llm`` (annotate,
    compare)."""
    p.add_argument("--endpoint", default=None,
                   help="base URL of an OpenAI-compatible server, e.g. "
                        "http://127.0.0.1:11434/v1 (default: load --llm locally)")
    p.add_argument("--api-key-env", default=None,
                   help="name of the environment variable holding the endpoint's API key "
                        "(the key itself is never taken on the command line)")


def add_nli_options(p, used_by: str = "--method nli") -> None:
    """``--hypothesis``, ``--label-phrases``/``--label-phrases-file``, ``--nli-pairs`` (their
    help group names ``used_by``: what they are for)."""
    g = p.add_argument_group(f"{used_by} (Laurer et al. 2023): classes as NLI hypotheses")
    g.add_argument("--hypothesis", default=None,
                   help="template with one {} for the class's label phrase (default: 'This "
                        "text is about {}.')")
    x = g.add_mutually_exclusive_group()
    x.add_argument("--label-phrases", default=None,
                   help="comma-separated CLASS=PHRASE items, e.g. 'pro=in favor of,con=against' "
                        "(default: each class name is its phrase)")
    x.add_argument("--label-phrases-file", default=None,
                   help="file with one CLASS=PHRASE a line (phrases may contain commas)")
    g.add_argument("--nli-pairs", default="balanced", choices=nli.PAIRS,
                   help="training pairs: balanced (each class's documents with its hypothesis "
                        "plus as many documents of other classes; Laurer et al.) or all "
                        "(every document with every hypothesis)")


def nli_kwargs(args) -> dict:
    """The :func:`quantformer.train.finetune` arguments of the ``--method nli`` options.

    Raises:
        InputError: NLI options given with another method.
    """
    phrases = (nli.read_label_phrases_file(args.label_phrases_file) if args.label_phrases_file
               else nli.parse_label_phrases(args.label_phrases))
    return {"hypothesis": args.hypothesis, "label_phrases": phrases or None,
            "nli_pairs": args.nli_pairs}


def written_files(folder: str | os.PathLike) -> str:
    """``"a.csv, b.rds and model/"``: the files and folders in ``folder``, sorted (for the
    closing line of the verbs that write a results folder)."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in Path(folder).iterdir()
                   if not p.name.startswith("."))
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def add_train_test_labels_options(p: argparse.ArgumentParser) -> None:
    """--labels-file (of --train) and --test-labels-file (of --test): tune and compare."""
    add_labels_file_option(p, "--train")
    p.add_argument("--test-labels-file", default=None,
                   help="labels of the --test documents in a file of their own, one a line in "
                        "document order; instead of --label-col")


def read_train_test(args, task: dict) -> tuple:
    """The ``--train`` and ``--test`` corpora of tune and compare (``--test`` None when not
    given), read with the shared corpus options and their labels files; each needs a label
    column unless ``task`` (from :func:`task_kwargs`) names the label columns."""
    needs_label = task["label_cols"] is None
    train = read_frame(args.train, require_label=needs_label,
                       labels_file=args.labels_file, **corpus_kwargs(args))
    if args.test_labels_file and not args.test:
        raise InputError("--test-labels-file labels the --test documents; give --test too")
    test = (read_frame(args.test, require_label=needs_label,
                       labels_file=args.test_labels_file, **corpus_kwargs(args))
            if args.test else None)
    return train, test


def add_gold_options(p) -> None:
    """--pred, --gold, --label-col, --id-col, --weight-col, --level (estimate, regress)."""
    p.add_argument("--pred", required=True,
                   help="prediction file of the whole corpus (output of predict or zeroshot, or "
                        "annotate's codes)")
    p.add_argument("--gold", required=True,
                   help="hand-coded random sample of its documents (doc_id and a label column)")
    p.add_argument("--label-col", default=LABEL_COLUMN, help="label column of --gold (label)")
    p.add_argument("--id-col", default=None, help="id column of both files (doc_id)")
    p.add_argument("--weight-col", default=None,
                   help="column of --gold with each document's inclusion probability, for a "
                        "stratified sample (default: a simple random sample)")
    p.add_argument("--level", type=float, default=0.95, help="confidence level (0.95)")


def add_table_out_option(p) -> None:
    """--out for a verb that prints a table (estimate, regress)."""
    p.add_argument("--out", default=None, help="write the table here (.csv, .parquet, .rds)")


def gold_kwargs(args) -> dict:
    """The keyword arguments of :func:`add_gold_options` that estimate and regress share."""
    return {"level": args.level, "label_col": args.label_col, "weight_col": args.weight_col,
            "id_col": args.id_col}


def show_and_write_table(table, out, title: str, shown=None) -> None:
    """Print ``table`` (or the ``shown`` part of it) under ``title``; write ``table`` to
    ``out`` when given (a path checked with :func:`quantformer.io.frames.check_output_file`
    before the work began)."""
    print_table(table if shown is None else shown, title=title)
    if out:
        write_frame(table, out)
        print(f"wrote {out}")


def add_run_options(p) -> None:
    """Options the ``embed`` and ``zeroshot`` verbs share: --truncation, --keep-text,
    --device, --quiet, --backend, --quantize and --out."""
    p.add_argument("--truncation", default=DEFAULT_TRUNCATION, choices=TRUNCATIONS,
                   help="how long documents are cut (head_tail); chunks: read whole as "
                        "overlapping windows of --max-length tokens, one row per document")
    p.add_argument("--keep-text", action="store_true", help="keep the text column")
    add_device_option(p)
    add_quiet_option(p)
    add_backend_options(p)
    p.add_argument("--out", required=True, help="output file (.parquet, .csv, .rds, ...)")


def add_chunk_options(p, *, training: bool, aggregate: bool = True,
                      chunks_out: bool = True) -> None:
    """``--stride``, ``--max-chunks``, ``--aggregate`` (not with ``aggregate=False``: embed
    averages windows) and for training ``--chunk-training``, else ``--chunks-out`` (not with
    ``chunks_out=False``: explain): how ``--truncation chunks`` reads long documents as
    windows."""
    g = p.add_argument_group("long documents as windows (--truncation chunks)")
    g.add_argument("--stride", type=int, default=None, metavar="N",
                   help="tokens shared by neighbouring windows (default: a quarter of the "
                        "window); smaller than the window")
    g.add_argument("--max-chunks", type=int, default=None, metavar="N",
                   help="the first N windows per document at most (default: all; a warning "
                        "counts the documents with more)")
    if aggregate:
        g.add_argument("--aggregate", default=None, metavar="{mean,max}",
                       help="of the window logits into the document's (mean; regression: the "
                            "mean output)" + ("" if training else "; default: as trained"))
    if training:
        g.add_argument("--chunk-training", default=DEFAULT_CHUNK_TRAINING,
                       metavar="{aggregate,labels}",
                       help="aggregate: the loss on each document's aggregate of its windows "
                            "(default); labels: each window with its document's label")
    elif chunks_out:
        g.add_argument("--chunks-out", default=None, metavar="FILE",
                       help="also write one row per window: doc_id, chunk, start, end "
                            "(characters), then the window's own output (predicted and "
                            "prob_<label>; embed: its embedding)")


def add_truncation_options(p, help_text: str) -> None:
    """``--truncation`` (default: the method's) and the window options of training
    (:func:`add_chunk_options`), for tune and compare."""
    p.add_argument("--truncation", default=None, choices=TRUNCATIONS, help=help_text)
    add_chunk_options(p, training=True)


def refuse_partitioned_chunks_out(args) -> None:
    """``--chunks-out`` names one file; a partitioned ``--input`` writes a folder."""
    if getattr(args, "chunks_out", None):
        raise InputError("--chunks-out is not supported with a partitioned --input yet; "
                         "run the verb on each file for its windows")


def chunk_kwargs(args) -> dict:
    """The window settings of :func:`add_chunk_options` as library keywords (None: unset):
    the fields of :data:`~quantformer.models.reading.WINDOW_FIELDS`."""
    return {k: getattr(args, k, None) for k in WINDOW_FIELDS}


def chunking_args(args) -> dict:
    """How a fine-tuned model is asked to read documents at prediction: ``--truncation`` and
    the window options, None each for as trained (the ``chunking`` of
    :func:`quantformer.infer.chunked.with_chunking`)."""
    return {"truncation": args.truncation, **chunk_kwargs(args)}


def add_embedding_cache_options(p) -> None:
    """--no-cache and --cache-dir: the embedding cache of suggest and the coding room."""
    p.add_argument("--no-cache", action="store_true",
                   help="do not read or write the embedding cache beside the corpus")
    p.add_argument("--cache-dir", default=None,
                   help="folder for the embedding cache (default: beside the corpus file)")


def add_labelled_corpora(p, test_help: str, test_required: bool) -> None:
    """``--train`` and ``--test`` (labelled corpus files), the corpus options and the labels
    files of both: what ``tune`` and ``compare`` read."""
    p.add_argument("--train", required=True, help="labelled training corpus file")
    p.add_argument("--test", required=test_required, default=None, help=test_help)
    add_corpus_options(p)
    add_train_test_labels_options(p)


def add_selection_run_options(p) -> None:
    """``--device``, ``--quiet``, ``--scheduler`` and the results folder: how ``tune`` and
    ``compare`` run their many fine-tuning runs and where they write."""
    add_device_option(p)
    add_quiet_option(p)
    add_scheduler_option(p)
    add_results_dir_options(p)


# ------------------------------------------------------------------------------------------
# the training settings as one value (finetune, tune, compare)


#: TrainSpec fields no option of their name sets: the reading (its own options) and the NLI
#: options, which :func:`nli_kwargs` reads (compare gives them to its nli model only)
_NOT_BY_NAME = ("reading", "hypothesis", "label_phrases", "nli_pairs")


def train_spec(args, **changes) -> TrainSpec:
    """The :class:`~quantformer.train.spec.TrainSpec` of a verb's training options, built
    once: every setting the verb has an option of that name for, the reading from
    ``--truncation``, ``--max-length`` and the window options, the task from
    :func:`task_kwargs` (checked), ``--labels`` as a list; then ``changes`` (flat keywords,
    e.g. :func:`nli_kwargs`)."""
    settings = {f.name: getattr(args, f.name) for f in fields(TrainSpec)
                if f.name not in _NOT_BY_NAME and hasattr(args, f.name)}
    if hasattr(args, "task"):
        settings.update(task_kwargs(args))
    if isinstance(settings.get("labels"), str):
        settings["labels"] = [s.strip() for s in settings["labels"].split(",")
                              if s.strip()] or None
    reading = {name: getattr(args, name) for name in READING_FIELDS if hasattr(args, name)}
    return TrainSpec(**settings).with_keywords(**reading, **changes)


def add_selection_training(p, *, max_length_help: str, truncation_help: str) -> None:
    """``--max-length``, ``--truncation`` with the window options, and how the runs run
    (:func:`add_selection_run_options`): the training options tune and compare share."""
    p.add_argument("--max-length", type=max_length_arg, default=None, help=max_length_help)
    add_truncation_options(p, truncation_help)
    add_selection_run_options(p)
