"""``quantformer example``: write an example corpus (State of the Union paragraphs) to a file."""

from __future__ import annotations

from ..io.datasets import sotu
from ..io.writing import write_frame
from ..io.writable import check_output_file


def add_cli(sub) -> None:
    p = sub.add_parser(
        "example",
        help="write an example corpus (State of the Union paragraphs) to a file",
        description="Write State of the Union paragraphs from the `sotu` package as a corpus "
                    "file (doc_id, text, [label], year, president, party, address, paragraph).",
    )
    p.add_argument("name", choices=["sotu"], help="the example corpus")
    p.add_argument("--out", required=True, help="output file (.parquet, .csv, .rds, ...)")
    p.add_argument("--since", type=int, default=None, help="first year kept")
    p.add_argument("--until", type=int, default=None, help="last year kept")
    p.add_argument("--parties", default=None,
                   help="comma-separated parties to keep, e.g. Democratic,Republican")
    p.add_argument("--min-words", type=int, default=8, help="drop shorter paragraphs (8)")
    p.add_argument("--label", default=None, help="docvar to copy into a label column (party)")
    p.set_defaults(func=run)


def run(args) -> int:
    check_output_file(args.out)
    parties = [s.strip() for s in args.parties.split(",")] if args.parties else None
    frame = sotu(since=args.since, until=args.until, parties=parties,
                 min_words=args.min_words, label=args.label)
    write_frame(frame, args.out)
    print(f"wrote {len(frame)} paragraphs from {frame['address'].nunique()} addresses "
          f"to {args.out}")
    return 0
