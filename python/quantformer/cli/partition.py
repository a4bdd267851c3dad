"""``quantformer partition``: split a big corpus file into Parquet partitions for the
partitioned path of ``predict``, ``zeroshot`` and ``embed``
(:func:`quantformer.scale.partition.partition_file`)."""

from __future__ import annotations

from ..scale.partition import partition_file
from ._options import positive


def add_cli(sub) -> None:
    p = sub.add_parser(
        "partition",
        help="split a big corpus file into Parquet partitions (for --input FOLDER)",
        description="Split one corpus file into Parquet files of at most --rows rows each, in "
                    "file order, named <stem>-00001.parquet, ... in the folder --out. Give the "
                    "folder to predict, zeroshot or embed as --input to run them partition "
                    "by partition (--scheduler local:N or a Dask cluster).",
    )
    p.add_argument("--input", required=True, help="the corpus file (.csv, .parquet, .rds, ...)")
    p.add_argument("--rows", required=True, type=positive(int),
                   help="rows per partition (e.g. 100000)")
    p.add_argument("--out", required=True, help="the folder to write (new or empty)")
    p.add_argument("--format", dest="in_format", default=None,
                   help="the input's format when its extension does not say it")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    p.set_defaults(func=run)


def run(args) -> int:
    parts = partition_file(args.input, args.out, rows=args.rows, fmt=args.in_format,
                           overwrite=args.overwrite)
    print(f"wrote {len(parts)} partition(s) of at most {args.rows} rows to {args.out}; run "
          f"e.g. `quantformer predict --model M --input {args.out} --out PREDICTIONS_DIR`")
    return 0
