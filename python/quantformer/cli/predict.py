"""``quantformer predict``: classify a corpus with a fine-tuned model directory."""

from __future__ import annotations

from .._core.errors import InputError
from ..infer.predict import predict_file
from ..io.writing import write_output_record
from ..scale.dask import describe, predict_partitions
from ..models.reading import TRUNCATIONS
from ._options import (
    add_backend_options,
    add_chunk_options,
    add_corpus_options,
    add_device_option,
    add_labels_file_option,
    add_partition_options,
    add_precision_option,
    add_quiet_option,
    chunking_args,
    corpus_kwargs,
    partitioned,
    positive,
    print_precision,
    refuse_partitioned_chunks_out,
)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "predict",
        help="classify a corpus with a fine-tuned model directory",
        description="Classify every document of a corpus file with a model written by "
                    "`quantformer finetune`. Streams the input in chunks. Output: doc_id, the "
                    "docvars, [text], predicted (label; missing for empty texts), prob_<label>. "
                    "Warns how many documents were longer than the model's max_length and "
                    "truncated (`quantformer tokenize --model` shows which).",
    )
    p.add_argument("--model", required=True, help="model directory from `quantformer finetune`")
    add_partition_options(p)
    add_corpus_options(p)
    add_labels_file_option(p)
    p.add_argument("--out", required=True, help="output file (.parquet, .csv, .rds, ...); a "
                                                "folder for a partitioned --input")

    p.add_argument("--batch-size", type=positive(int), default=64,
                   help="documents per forward pass at most (64; fewer for long documents: "
                        "at most 4096 padded tokens per pass)")
    p.add_argument("--keep-text", action="store_true", help="keep the text column in the output")
    p.add_argument("--calibrated", action="store_true",
                   help="apply the temperature stored by `quantformer calibrate`")
    add_device_option(p)
    add_quiet_option(p)
    add_backend_options(p)
    add_precision_option(p)
    p.add_argument("--truncation", default=None, choices=TRUNCATIONS,
                   help="how long documents are read (default: as the model was fine-tuned; "
                        "another one warns, naming both); chunks: every window of every "
                        "document, one row per document")
    add_chunk_options(p, training=False)
    p.set_defaults(func=run)


def run(args) -> int:
    kw = corpus_kwargs(args)
    chunking = chunking_args(args)
    if partitioned(args):
        refuse_partitioned_chunks_out(args)
        if args.calibrated or args.labels_file:
            flag = "--calibrated" if args.calibrated else "--labels-file"
            raise InputError(f"{flag} is not supported with a partitioned --input yet; predict "
                             "each file on its own")

        print(describe(predict_partitions(
            args.model, args.input, args.out, scheduler=args.scheduler, resume=args.resume,
            batch_size=args.batch_size, keep_text=args.keep_text, device=args.device,
            quiet=args.quiet, backend=args.backend, quantize=args.quantize,
            precision=args.precision, chunking=chunking, **kw)))
        return 0
    used: dict = {}
    n = predict_file(args.model, args.input, args.out, text_col=kw["text_col"],
                     id_col=kw["id_col"], label_col=kw["label_col"], fmt=kw["fmt"],
                     batch_size=args.batch_size, keep_text=args.keep_text, device=args.device,
                     quiet=args.quiet, quoting=kw["quoting"], labels_file=args.labels_file,
                     calibrated=args.calibrated, backend=args.backend,
                     quantize=args.quantize, precision=args.precision, report=used,
                     chunking=chunking, chunks_out=args.chunks_out)
    write_output_record(args.out, "predict", used, model=str(args.model),
                        input=str(args.input), documents=n, chunks_out=args.chunks_out,
                        calibrated=bool(args.calibrated))
    print(f"wrote predictions for {n} documents to {args.out}")
    print_precision(used)
    return 0
