"""``quantformer embed``: mean-pooled document embeddings (one vector per document)."""

from __future__ import annotations

from ..infer.embed import embed_file
from ..infer.embedding_table import LAYOUTS
from ..io.writing import write_output_record
from ..models.reading import CHUNKS
from ..models.hub import model_label
from ..scale.dask import describe, embed_partitions
from ._options import (
    add_chunk_options,
    add_corpus_options,
    add_model_option,
    add_partition_options,
    add_precision_option,
    add_run_options,
    corpus_kwargs,
    max_length_arg,
    partitioned,
    positive,
    print_precision,
    refuse_partitioned_chunks_out,
)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "embed",
        help="mean-pooled document embeddings (one vector per document)",
        description="Embed every document as the mean of the encoder's last-layer token "
                    "vectors (sentence-transformers pooling). Output: doc_id, docvars, then a "
                    "float32 list column 'embedding' (Parquet, JSONL) or columns dim_1..dim_H "
                    "(CSV, TSV, RDS); H = 384 for the default model. Missing or empty texts "
                    "get NaN.",
    )
    add_partition_options(p)
    add_corpus_options(p, label=False)
    add_model_option(p)
    p.add_argument("--batch-size", type=positive(int), default=32,
                   help="documents per forward pass at most (32; fewer for long documents: "
                        "at most 4096 padded tokens per pass)")
    p.add_argument("--max-length", type=max_length_arg, default=None,
                   help="token limit, special tokens included (default: the model's "
                        "sentence-transformers max_seq_length, 256 for the default model, "
                        "else 512)")
    p.add_argument("--normalize", action="store_true",
                   help="unit-length vectors (cosine similarity = dot product)")
    p.add_argument("--layout", default="auto", choices=LAYOUTS,
                   help="'list': one list column 'embedding'; 'wide': one column per "
                        "dimension dim_1..dim_H; 'auto' (default): list for .parquet/.jsonl, "
                        "wide for .csv/.tsv/.rds")
    add_run_options(p)
    add_chunk_options(p, training=False, aggregate=False)
    add_precision_option(p, detail="Embeddings have no labels to recheck: bf16 vectors keep a "
                                   "cosine similarity with fp32's of at least 0.99997 with the "
                                   "default model on test documents; "
                                   "the output's backend column says torch or torch bf16")
    p.set_defaults(func=run)


def run(args) -> int:
    options = {"batch_size": args.batch_size, "max_length": args.max_length,
               "layout": args.layout, "truncation": args.truncation,
               "normalize": args.normalize, "keep_text": args.keep_text,
               "device": args.device, "quiet": args.quiet, "backend": args.backend,
               "quantize": args.quantize, "precision": args.precision, "stride": args.stride,
               "max_chunks": args.max_chunks, **corpus_kwargs(args, label=False)}
    if partitioned(args):
        refuse_partitioned_chunks_out(args)
        print(describe(embed_partitions(args.input, args.out, args.model,
                                        scheduler=args.scheduler, resume=args.resume,
                                        **options)))
        return 0
    counts = embed_file(args.input, args.out, args.model, chunks_out=args.chunks_out,
                        **options)
    cut = (f"{counts['n_windows']} windows of {counts['max_length']} tokens, "
           f"{counts['n_truncated']} documents over --max-chunks" if args.truncation == CHUNKS
           else f"{counts['n_truncated']} truncated ({args.truncation})")
    print(f"embedded {counts['n_docs']} documents with {model_label(args.model)} (mean "
          f"pooling, {counts['hidden']} dimensions, max {counts['max_length']} tokens): "
          f"{counts['n_missing']} missing or empty, {cut}; wrote {args.out}"
          + (f" and {args.chunks_out}" if args.chunks_out else ""))
    write_output_record(args.out, "embed", counts["precision"], model=model_label(args.model),
                        input=str(args.input), documents=counts["n_docs"],
                        chunks_out=args.chunks_out)
    print_precision(counts["precision"])
    return 0
