"""``quantformer tokenize``: subword counts per document and how many exceed --max-length."""

from __future__ import annotations

from .._core.show import print_table
from ..io.writing import write_frame
from ..io.writable import check_output_file
from ..io.frames import read_frame
from ..io.modeldir import record_hypotheses
from ..models.hub import check_max_length, load_config, load_tokenizer, model_label
from ..models.reading import TRUNCATIONS, Reading
from ..models.template import count_subwords, longest_hypothesis
from ..models.tokenize import corpus_token_stats, model_record, summarise
from ..train.chunks import DEFAULT_CHUNK_TRAINING, check_training_reading
from ._options import (
    add_chunk_options,
    add_corpus_options,
    add_labels_file_option,
    add_model_option,
    corpus_kwargs,
    max_length_arg,
)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "tokenize",
        help="subword counts per document and how many exceed --max-length",
        description="Count subword tokens per document (special tokens included) and flag "
                    "documents longer than --max-length, which training and prediction "
                    "truncate (head+tail by default, Wankmüller 2022 section 6.3). With a "
                    "fine-tuned --model, the truncated column marks the documents `predict` "
                    "cuts; for a model fine-tuned with --method nli each document is counted "
                    "with its longest class hypothesis, as prediction pairs them.",
    )
    p.add_argument("--input", required=True, help="corpus file")
    add_corpus_options(p)
    add_labels_file_option(p)
    add_model_option(p)
    p.add_argument("--max-length", type=max_length_arg, default=None,
                   help="token limit, special tokens included (default: the limit a "
                        "fine-tuned --model was trained and predicts with, else 512)")
    p.add_argument("--truncation", default=None, choices=TRUNCATIONS,
                   help="strategy applied to the ids written by --ids (default: a fine-tuned "
                        "--model's, else head_tail); chunks: an n_windows column counts the "
                        "windows each document is read in (with --stride, else the model's)")
    add_chunk_options(p, training=False, aggregate=False, chunks_out=False)
    p.add_argument("--ids", action="store_true",
                   help="also write the token ids after truncation as a list column")
    p.add_argument("--out", default=None,
                   help="per-document output file (.parquet, .csv, .rds, ...); optional")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.out:
        check_output_file(args.out)
    reading = _reading(args)
    frame = read_frame(args.input, labels_file=args.labels_file, **corpus_kwargs(args))
    check_max_length(reading.max_length, load_config(args.model))
    tokenizer = load_tokenizer(args.model)
    stats = corpus_token_stats(frame, tokenizer, reading=reading, with_ids=args.ids,
                               hypotheses=_nli_hypotheses(args.model, tokenizer))
    print_table(summarise(stats, reading.max_length),
                title=f"subword tokens per document ({model_label(args.model)}, "
                      f"{args.input})", floatfmt="{:.1f}")
    if args.out:
        write_frame(stats, args.out)
        print(f"wrote {len(stats)} rows to {args.out}")
    return 0


def _reading(args) -> Reading:
    """How documents are counted: the options given, checked before any load, else as a
    fine-tuned ``--model`` reads them (its record), else the defaults; with chunks the
    ``stride`` and ``max_chunks`` not given are those of a model fine-tuned with chunks.

    Raises:
        InputError: window options without chunks, or a bad ``stride``/``max_chunks``.
    """
    recorded = Reading.from_record(model_record(args.model))
    given = Reading(recorded.truncation if args.truncation is None else args.truncation,
                    recorded.max_length if args.max_length is None else args.max_length,
                    args.stride, args.max_chunks)
    check_training_reading(given, DEFAULT_CHUNK_TRAINING)
    if not given.chunks or not recorded.chunks:
        return given
    return given.replace(stride=recorded.stride if args.stride is None else args.stride,
                         max_chunks=(recorded.max_chunks if args.max_chunks is None
                                     else args.max_chunks))


def _nli_hypotheses(model: str | None, tokenizer) -> list[str] | None:
    """The class hypotheses of a model fine-tuned with ``--method nli`` (None for others),
    with a line saying which one the counts include."""
    hypotheses = record_hypotheses(model_record(model))
    if hypotheses:
        longest = longest_hypothesis(tokenizer, hypotheses)
        print(f"NLI model: each document is counted with its longest class hypothesis, "
              f"'{longest}' ({count_subwords(tokenizer, [longest])[0]} tokens), the pair "
              "prediction cuts first")
    return hypotheses
