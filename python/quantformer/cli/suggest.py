"""``quantformer suggest``: active learning, the uncoded documents to code next
(:func:`quantformer.label.suggest.suggest_round`)."""

from __future__ import annotations

from ..io.writing import write_frame
from ..io.writable import check_output_file
from ..io.frames import read_frame
from ..label.strategies import STRATEGIES
from ..label.suggest import CODE_COL, suggest_round
from ..models.reading import DEFAULT_TRUNCATION, STRATEGIES as TRUNCATIONS
from ._options import (
    RECHECK,
    add_corpus_options,
    add_device_option,
    add_embedding_cache_options,
    add_precision_option,
    add_quiet_option,
    corpus_kwargs,
    max_length_arg,
    positive,
    print_precision,
)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "suggest",
        help="active learning: the uncoded documents to code next",
        description="Choose the N uncoded documents to code next: a cold start (k-means "
                    "centres of the embeddings) without codes, then uncertainty sampling "
                    "(margin, least confidence, entropy) of a logistic regression over cached "
                    "embeddings, with a diversity guard. Output: doc_id, text, docvars, rank, "
                    "score, strategy, guess, guess_prob and an empty 'code' column to fill in.",
    )
    p.add_argument("--input", required=True, help="corpus file (may hold a partly coded label "
                                                  "column, see --label-col)")
    add_corpus_options(p)
    p.add_argument("--labelled", action="append", default=[], metavar="CODED",
                   help="file of codes (doc_id + label, or a filled-in suggestion spreadsheet "
                        "with its 'code' column); repeat for several rounds")
    p.add_argument("--coded-label-col", default=None,
                   help="code column of the --labelled files (default: label, else code)")
    p.add_argument("--coded-id-col", default=None,
                   help="id column of the --labelled files (default: doc_id)")
    p.add_argument("--n", type=positive(int), default=50, help="documents to suggest (50)")
    p.add_argument("--strategy", default="margin", choices=STRATEGIES,
                   help="margin (default), least_confidence, entropy, random, or cold (k-means "
                        "centres; used automatically while fewer than two classes are coded)")
    p.add_argument("--stratify", default=None,
                   help="docvar whose levels a cold start spreads the documents over")
    p.add_argument("--no-diversity", action="store_true",
                   help="turn off the diversity guard (plain top-N uncertainty)")
    p.add_argument("--random-share", type=float, default=0.0, metavar="SHARE",
                   help="share of an uncertainty batch drawn at random from the pool instead "
                        "(0 to 1; default 0): epsilon-greedy exploration")
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    p.add_argument("--model", default=None,
                   help="a fine-tuned model directory whose probabilities replace the light "
                        "classifier (default: logistic regression over the embeddings)")
    p.add_argument("--embed-model", default=None,
                   help="model for the embeddings (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument("--max-length", type=max_length_arg, default=None,
                   help="token limit of the embeddings (default: the model's, 256 for MiniLM)")
    p.add_argument("--truncation", default=DEFAULT_TRUNCATION, choices=TRUNCATIONS,
                   help=f"how long documents are cut for the embeddings ({DEFAULT_TRUNCATION})")
    p.add_argument("--batch-size", type=positive(int), default=32,
                   help="documents per forward pass (32)")
    add_embedding_cache_options(p)
    add_device_option(p)
    add_precision_option(p, detail="The embeddings' uncertainty scores are not rechecked (they "
                                   "rank documents; bf16 vectors keep a cosine similarity above "
                                   "0.99 with fp32's); with --model, " + RECHECK.format(
                                       done="scored") + ", as predict does", onnx=False)
    add_quiet_option(p)
    p.add_argument("--out", required=True, help="output file (.csv for a spreadsheet, .rds, ...)")
    p.set_defaults(func=run)


def run(args) -> int:
    check_output_file(args.out)
    frame = read_frame(args.input, **corpus_kwargs(args))
    out = suggest_round(frame, corpus_path=args.input, labelled=args.labelled,
                        coded_label_col=args.coded_label_col, coded_id_col=args.coded_id_col,
                        n=args.n, strategy=args.strategy, seed=args.seed,
                        stratify=args.stratify, diversity=not args.no_diversity,
                        random_share=args.random_share, model=args.model,
                        embed_model=args.embed_model, max_length=args.max_length,
                        truncation=args.truncation, batch_size=args.batch_size,
                        cache=not args.no_cache, cache_dir=args.cache_dir,
                        device=args.device, quiet=args.quiet, precision=args.precision)
    used = out.attrs.pop("quantformer")["precision"]
    write_frame(out, args.out)
    ran = out["strategy"].iloc[0] if len(out) else args.strategy
    print(f"suggested {len(out)} document(s) to code next ({ran}); wrote {args.out}: fill in "
          f"its '{CODE_COL}' column and pass it back with --labelled")
    for what, record in used.items():
        print_precision(record, "the embeddings" if what == "embeddings" else "--model")
    return 0
