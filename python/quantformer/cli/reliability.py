"""``quantformer reliability``: intercoder reliability of every pair of coders, human or
machine (:func:`quantformer.score.reliability.coder_agreement`), from their code files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from .._core.checks import check_level
from .._core.errors import InputError
from ..io.codes import CODER_COLUMN, read_machine_codes
from ..io.columns import ID_COLUMN, LABEL_COLUMN
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
                    "model's codes (quantformer annotate: label), predictions (predict or "
                    "zeroshot: predicted) or any file of codes, as they are. Output columns: coder_1, coder_2, "
                    "n_documents, percent_agreement, krippendorff_alpha, alpha_ci_low, "
                    "alpha_ci_high, cohen_kappa, kappa_ci_low, kappa_ci_high.",
    )
    p.add_argument("--codes", required=True, nargs="+", metavar="FILE",
                   help="code files: doc_id, a label column and, for several coders in one "
                        "file, a coder column; a file without one is one coder named after "
                        "the file")
    p.add_argument("--label-col", default=None,
                   help="label column of the files (default: predicted where a file has it, "
                        "else label)")
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


def read_codes(paths: list[str], *, label_col: str | None, id_col: str, coder_col: str):
    """One long frame (doc_id, coder, label) of the code files, each read as a machine
    coder's output is (:func:`quantformer.io.codes.read_machine_codes`: ``predicted``, else
    ``label``, unless ``label_col`` names another; an ``unparsed`` row is no code); a coder
    named in two files gets the file's name added, so that, e.g., zero- and k-shot runs of one
    model differ."""
    seen = Counter(Path(p).resolve() for p in paths)
    same = [p for p in paths if seen[Path(p).resolve()] > 1]
    if same:
        raise InputError(f"{{codes}} names the file '{same[0]}' more than once; give each "
                         "code file once", params=["codes"])
    parts = []
    for path in paths:
        frame = read_table_file(path)
        if id_col != ID_COLUMN and id_col in frame.columns:
            frame = frame.drop(columns=[ID_COLUMN], errors="ignore").rename(
                columns={id_col: ID_COLUMN})
        if ID_COLUMN not in frame.columns or (label_col and label_col not in frame.columns):
            missing = [c for c in (id_col, label_col) if c and c not in frame.columns]
            raise InputError(f"--codes '{path}' has no column {', '.join(missing)}; its "
                             f"columns are: {', '.join(map(str, frame.columns))}. Name them "
                             "with --id-col and --label-col")
        codes = read_machine_codes(frame, f"--codes '{path}'", label_col=label_col,
                                   probabilities=False)
        coder = frame[coder_col].astype(str) if coder_col in frame.columns else Path(path).stem
        parts.append(pd.DataFrame({ID_COLUMN: codes.frame[ID_COLUMN], CODER_COLUMN: coder,
                                   LABEL_COLUMN: codes.label, "file": Path(path).stem}))
    codes = pd.concat(parts, ignore_index=True)
    files = codes.groupby(CODER_COLUMN)["file"].nunique()
    shared = codes[CODER_COLUMN].isin(files[files > 1].index)
    codes.loc[shared, CODER_COLUMN] = (codes[CODER_COLUMN][shared] + " ("
                                       + codes["file"][shared] + ")")
    return codes.drop(columns="file")
