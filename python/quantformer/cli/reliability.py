"""``quantformer reliability``: intercoder reliability of every pair of coders, human or
machine (:func:`quantformer.score.reliability.coder_agreement`), from their code files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from .._core.checks import check_level
from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from ..io.formats import read_table_file
from ..io.writable import check_output_file
from ..score.reliability import DOCUMENTS, N_BOOT, coder_agreement
from ._options import add_table_out_option, positive, show_and_write_table


def add_cli(sub) -> None:
    p = sub.add_parser(
        "reliability",
        help="Krippendorff's alpha and Cohen's kappa of every pair of coders (human or LLM)",
        description="Intercoder reliability of every pair of coders on the same documents: "
                    "the coding room's export (--export: doc_id, label, coder), a language "
                    "model's codes (quantformer annotate), predictions (--label-col "
                    "predicted) or any file of codes. Output columns: coder_1, coder_2, "
                    "n_documents, percent_agreement, krippendorff_alpha, alpha_ci_low, "
                    "alpha_ci_high, cohen_kappa, kappa_ci_low, kappa_ci_high.",
    )
    p.add_argument("--codes", required=True, nargs="+", metavar="FILE",
                   help="code files: doc_id, a label column and, for several coders in one "
                        "file, a coder column; a file without one is one coder named after "
                        "the file")
    p.add_argument("--label-col", default=LABEL_COLUMN, help="label column of the files (label)")
    p.add_argument("--id-col", default="doc_id", help="document id column (doc_id)")
    p.add_argument("--coder-col", default="coder", help="coder column (coder)")
    p.add_argument("--documents", default="common", choices=DOCUMENTS,
                   help="common (default): every pair on the documents every coder coded; "
                        "pair: each pair on the documents both coded")
    p.add_argument("--level", type=float, default=0.95,
                   help="confidence level of the bootstrap intervals (0.95)")
    p.add_argument("--n-boot", type=positive(int), default=N_BOOT,
                   help=f"bootstrap resamples of the documents ({N_BOOT})")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling (0)")
    add_table_out_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    check_level(args.level)
    if args.out:
        check_output_file(args.out)
    codes = read_codes(args.codes, label_col=args.label_col, id_col=args.id_col,
                       coder_col=args.coder_col)
    table = coder_agreement(codes, documents=args.documents, level=args.level,
                            n_boot=args.n_boot, seed=args.seed)
    show_and_write_table(table, args.out, f"intercoder reliability ({args.level:.0%} "
                         f"bootstrap intervals, {args.documents} documents)")
    return 0


def read_codes(paths: list[str], *, label_col: str, id_col: str, coder_col: str):
    """One long frame (doc_id, coder, label) of the code files; a coder named in two files
    gets the file's name added, so that, e.g., zero- and k-shot runs of one model differ."""
    seen = Counter(Path(p).resolve() for p in paths)
    same = [p for p in paths if seen[Path(p).resolve()] > 1]
    if same:
        raise InputError(f"{{codes}} names the file '{same[0]}' more than once; give each "
                         "code file once", params=["codes"])
    parts = []
    for path in paths:
        frame = read_table_file(path)
        missing = [c for c in (id_col, label_col) if c not in frame.columns]
        if missing:
            raise InputError(f"--codes '{path}' has no column {', '.join(missing)}; its "
                             f"columns are: {', '.join(map(str, frame.columns))}. Name them "
                             "with --id-col and --label-col")
        coder = frame[coder_col].astype(str) if coder_col in frame.columns else Path(path).stem
        parts.append(pd.DataFrame({"doc_id": frame[id_col].astype(str), "coder": coder,
                                   LABEL_COLUMN: frame[label_col], "file": Path(path).stem}))
    codes = pd.concat(parts, ignore_index=True)
    files = codes.groupby("coder")["file"].nunique()
    shared = codes["coder"].isin(files[files > 1].index)
    codes.loc[shared, "coder"] = codes["coder"][shared] + " (" + codes["file"][shared] + ")"
    return codes.drop(columns="file")
