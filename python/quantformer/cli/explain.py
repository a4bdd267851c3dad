"""``quantformer explain``: word attributions of a fine-tuned model's predictions
(:mod:`quantformer.audit.explain`), an HTML page, a per-class term summary and faithfulness
checks."""

from __future__ import annotations

from pathlib import Path

from .._core.atomic import write_json
from .._core.errors import InputError
from ..audit.explain import check_model, check_steps, explain, load_explainable
from ..audit.explain_check import check
from ..io.writing import write_frame, write_output_record
from ..io.writable import check_output_file
from ..io.frames import read_frame
from ..io.highlight import check_html_path, write_attribution_page
from ..io.highlight_png import FIRST_DOCS, check_png_docs, check_png_path, write_attribution_png
from ..io.writable import check_writable
from ..scale.cluster import check_scheduler_reachable
from ..scale.dask import describe
from ..scale.partitions import is_partitioned
from ..scale.explain import explain_on, explain_partitions
from ..models.tokenize import TRUNCATIONS
from ..score.attributions import by_term, compare_terms
from ..train.bow_terms import fit_bow_terms, read_bow_data
from ._options import (
    add_chunk_options,
    add_corpus_options,
    add_device_option,
    add_partition_options,
    add_precision_option,
    add_quiet_option,
    chunk_kwargs,
    corpus_kwargs,
    positive,
    print_precision,
)


#: --precision bf16 on explain: what it does and what it costs (bench/RESULTS.md, "Precision")
EXPLAIN_BF16 = ("bf16: bf16 autocast of the forward and backward passes (backend 'torch "
                "bf16'): about 1.9x fp32's speed on an AVX-512 BF16 CPU; on 200 Abortion tweets "
                "the same explained classes and completeness gaps, word attributions ranked "
                "alike (Spearman median 1.000, lowest 0.94)")


def add_cli(sub) -> None:
    p = sub.add_parser(
        "explain",
        help="word attributions of a fine-tuned model's predictions (Integrated Gradients)",
        description="Attribute each document's prediction to the words of its text by "
                    "Integrated Gradients (Sundararajan et al. 2017; Captum) over the input "
                    "embeddings, baseline = pad tokens with the special tokens kept. Output: "
                    "one row per word: doc_id, word_id, word, start, end (character offsets "
                    "into the text), attribution (logit units, comparable across documents; "
                    "missing for words outside the window the model saw), target, "
                    "completeness_gap (|sum of attributions - logit difference| relative to "
                    "the logit difference of input and baseline). With --truncation chunks "
                    "(or a model fine-tuned with it) every window is explained, a word's "
                    "attribution is its mean over the windows that read it (word_windows), "
                    "and completeness is the document's, against the aggregate of its "
                    "windows' logits (n_windows).",
    )
    p.add_argument("--model", required=True, help="model directory from `quantformer finetune`")
    add_partition_cli(p)
    add_corpus_options(p, label=False)
    p.add_argument("--out", required=True, help="output file (.parquet, .csv, .rds, ...); a "
                                                "folder for a partitioned --input")
    p.add_argument("--target", default=None,
                   help="class whose logit is explained (default: each document's predicted "
                        "class; every label of a multi-label model)")
    p.add_argument("--steps", type=int, default=None,
                   help="Gauss-Legendre integration steps for every document (default: "
                        "adaptive, the trapezoid rule on 9 points of the path, then 17, 33 "
                        "and 65 (each adding the midpoints, earlier gradients reused) for "
                        "documents whose completeness gap exceeds 5%%)")
    p.add_argument("--html", default=None,
                   help="also write one self-contained HTML page highlighting the words")
    p.add_argument("--by-term", default=None,
                   help="also write per class the terms with the highest mean attribution "
                        "across the documents they occur in (terms in at least 2 documents "
                        "are ranked), with document counts and 95%% bootstrap intervals over "
                        "documents (.parquet, .csv, .rds)")
    p.add_argument("--top", type=positive(int), default=None,
                   help="with --by-term: terms per class (20)")
    _add_terms_and_figure(p)
    p.add_argument("--check", action="store_true",
                   help="faithfulness checks, written to OUT.check.json: deletion test (AOPC "
                        "of the top 5 attributed words vs 5 random words) and model "
                        "randomisation (Spearman rank correlation; Adebayo et al. 2018)")
    p.add_argument("--batch-size", type=positive(int), default=8,
                   help="documents integrated together at most (8)")
    p.add_argument("--backend", default="torch", choices=("torch", "onnx"),
                   help="torch only: Integrated Gradients needs gradients")
    p.add_argument("--truncation", default=None, choices=TRUNCATIONS,
                   help="how long documents are read (default: as the model was fine-tuned; "
                        "another one warns, naming both); chunks: every window of every "
                        "document explained, each word's attribution the mean over the "
                        "windows that read it, completeness against the aggregate (mean: "
                        "of all windows; max: of the window with the largest logit)")
    add_chunk_options(p, training=False, chunks_out=False)
    add_precision_option(p, auto="auto (default: fp32 whatever the hardware: Integrated "
                                 "Gradients needs accurate gradients)",
                         detail=EXPLAIN_BF16, onnx=False)
    add_device_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


# --- partitioned corpora and Dask ---------------------------------------------------------

#: terms per class of --by-term when --top is not given
TOP_TERMS = 20
#: the outputs that need every document at once, refused with a partitioned --input
WHOLE_CORPUS_FLAGS = (("html", "--html"), ("by_term", "--by-term"), ("check", "--check"),
                      ("png", "--png"), ("docs", "--docs"), ("bow_data", "--bow-data"))


def add_partition_cli(p) -> None:
    """--input (one file, or a partitioned corpus), --scheduler and --resume, as predict's;
    with one file --scheduler runs the explanation as one task there."""
    add_partition_options(p)


def folder_input(args) -> bool:
    """True for a partitioned --input (a folder, a glob, several files, --resume, or a folder
    --out); else ``args.input`` becomes the one file (--scheduler alone keeps one file)."""
    if is_partitioned(args.input, None, args.resume, args.out):
        given = [flag for dest, flag in WHOLE_CORPUS_FLAGS if getattr(args, dest)]
        if given:
            needs, are = ("needs", "is") if len(given) == 1 else ("need", "are")
            raise InputError(f"{', '.join(given)} {needs} the whole corpus at once and {are} "
                             "not supported with a partitioned --input: run explain on one file, "
                             "or read the outputs with quantformer.read_explanation(OUT) and "
                             "summarise them there")
        return True
    args.input = args.input[0]
    check_scheduler_reachable(args.scheduler)  # before the model loads
    return False


def run_partitioned(args) -> int:
    kw = corpus_kwargs(args, label=False)
    print(describe(explain_partitions(
        args.model, args.input, args.out, scheduler=args.scheduler, resume=args.resume,
        target=args.target, steps=args.steps, batch_size=args.batch_size, device=args.device,
        quiet=args.quiet, text_col=kw["text_col"], id_col=kw["id_col"], fmt=kw["fmt"],
        quoting=kw["quoting"], chunking=chunking_of_args(args), precision=args.precision)))
    return 0


def chunking_of_args(args) -> dict:
    """--truncation and the window options as :func:`quantformer.audit.explain.explain`'s
    ``chunking``."""
    return {"truncation": args.truncation, **chunk_kwargs(args)}


def explain_file(args, frame, record: dict | None = None) -> tuple:
    """(Explanation, the checks' dict or None) of one corpus, here or on --scheduler."""
    if args.scheduler:
        return explain_on(args.scheduler, args.model, frame, target=args.target,
                          steps=args.steps, batch_size=args.batch_size, device=args.device,
                          with_check=args.check, chunking=chunking_of_args(args),
                          precision=args.precision)
    clf = load_explainable(args.model, device=args.device, target=args.target, record=record,
                           chunking=chunking_of_args(args))
    ex = explain(clf, frame, target=args.target, steps=args.steps,
                 batch_size=args.batch_size, progress=not args.quiet, precision=args.precision)
    return ex, check(clf, frame, ex, progress=not args.quiet) if args.check else None


def _add_terms_and_figure(p) -> None:
    """--bow-data (a bag-of-words model beside --by-term), --png and --docs (a figure)."""
    g = p.add_argument_group("what the model keys on, beside a bag-of-words model; a figure")
    g.add_argument("--bow-data", default=None,
                   help="with --by-term: labelled training data (text and label columns; "
                        "its labels must be the model's classes) to fit the bag-of-words "
                        "logistic regression on (stemmed binary unigrams, as the paper's "
                        "baselines); --by-term then maps words onto its terms and adds per "
                        "class the top terms by coefficient, bow_coef, bow_rank, in_top, "
                        "in_bow_top and the agreement of the two lists: top_overlap (share "
                        "of the --top attributed terms also in the coefficient top) and "
                        "spearman (rank correlation of mean attribution and coefficient over "
                        "the n_common terms with both)")
    g.add_argument("--png", default=None,
                   help="also write a figure for papers (.png, 1600 pixels wide): the words "
                        "of the --docs documents highlighted by sign (blue towards, orange "
                        "against the explained class) and size of their attributions, with "
                        "the prediction and its probability above each document")
    g.add_argument("--docs", default=None,
                   help=f"with --png: document ids shown, separated by commas (default: the "
                        f"first {FIRST_DOCS} documents)")


#: compression suffixes that belong to the extension before them (``words.csv.gz``)
COMPRESSED = (".gz", ".bz2", ".xz", ".zst")


def check_path(args) -> Path:
    """Where ``--check`` writes: ``OUT`` without its extension + ``.check.json``
    (``words.v2.parquet`` -> ``words.v2.check.json``; ``words.csv.gz`` -> ``words.check.json``)."""
    out = Path(args.out)
    stem = out.with_suffix("") if out.suffix.lower() not in COMPRESSED \
        else out.with_suffix("").with_suffix("")
    return stem.with_name(stem.name + ".check.json")


def _check_args(args) -> None:
    """Every check that needs no model weights, before any work."""
    check_steps(args.steps)
    check_output_file(args.out)
    if args.html:
        check_html_path(args.html)
        check_writable(args.html, "html")
    if args.by_term:
        check_output_file(args.by_term, param="by_term")
    if args.bow_data and not args.by_term:
        raise InputError("{bow_data} is set beside the per-class terms; add {by_term} FILE",
                         params=["bow_data", "by_term"])
    if args.docs is not None and not args.png:
        raise InputError("{docs} chooses the documents of the figure; add {png} FILE.png",
                         params=["docs", "png"])
    if args.png:
        check_png_path(args.png)
    return check_model(args.model, args.backend, args.target, chunking_of_args(args))


def _bow_terms(args, record):
    """The bag-of-words terms of --bow-data (checked against the model's classes), or None."""
    if not args.bow_data:
        return None
    return fit_bow_terms(read_bow_data(args.bow_data, record, text_col=args.text_col,
                                       quoting=args.quoting))


def _terms(args, ex, bow):
    top = args.top or TOP_TERMS
    if bow is None:
        return by_term(ex.words, top=top)
    t = compare_terms(ex.words, bow.coefs, bow.analyzer, top=top)
    for target, g in t.groupby("target", sort=False):
        print(f"{target}: top-{top} overlap with the bag-of-words "
              f"{_fmt(g['top_overlap'].iloc[0])}, Spearman {_fmt(g['spearman'].iloc[0])} "
              f"over {int(g['n_common'].iloc[0])} terms")
    return t


def run(args) -> int:
    if args.top is not None and not args.by_term:  # one file or partitions: never used
        raise InputError("{top} is the number of terms per class of {by_term}; add {by_term} "
                         "FILE or leave {top} out", params=["top", "by_term"])
    if folder_input(args):
        return run_partitioned(args)
    record = _check_args(args)
    bow = _bow_terms(args, record)
    frame = read_frame(args.input, **corpus_kwargs(args, label=False))
    docs = check_png_docs(args.docs.split(",") if args.docs else None, frame["doc_id"]) \
        if args.png else None
    ex, checks = explain_file(args, frame, record)
    extra = {}
    if checks is not None:
        extra["check"] = checks
    if args.by_term:
        extra["by_term"] = _terms(args, ex, bow)
    if args.png:
        extra["png_docs"] = docs
    _write(args, frame, ex, extra, write_frame)
    write_output_record(args.out, "explain", ex.precision, model=str(args.model),
                        input=str(args.input), documents=int(ex.documents["doc_id"].nunique()),
                        words=len(ex.words))
    print(f"wrote {len(ex.words)} word attributions of {ex.documents['doc_id'].nunique()} "
          f"documents to {args.out}")
    print_precision(ex.precision)
    for what, path in (("the highlighted words", args.html), ("the terms", args.by_term),
                       ("the figure", args.png),
                       ("the checks", check_path(args) if "check" in extra else None)):
        if path:
            print(f"wrote {what} to {path}")
    return 0


def _write(args, frame, ex, extra, write_frame) -> None:
    """All outputs, once everything is computed (each written atomically)."""
    write_frame(ex.words, args.out)
    if args.html:
        texts = dict(zip(frame["doc_id"].astype(str), frame["text"]))
        write_attribution_page(ex.words, ex.documents, texts, args.html)
    if "by_term" in extra:
        write_frame(extra["by_term"], args.by_term)
    if "png_docs" in extra:
        write_attribution_png(ex.words, ex.documents, args.png, extra["png_docs"])
    if "check" in extra:
        write_json(extra["check"], check_path(args))
        c = extra["check"]
        print(f"deletion AOPC: top words {_fmt(c['aopc_top'])}, random words "
              f"{_fmt(c['aopc_random'])}; randomisation Spearman "
              f"{_fmt(c['randomisation_spearman'])}"
              + (f" ({c['n_unknown_only']} document(s) made only of tokens the model does "
                 "not know left out)" if c.get("n_unknown_only") else ""))


def _fmt(v) -> str:
    return "n/a" if v is None or v != v else f"{v:.4f}"

