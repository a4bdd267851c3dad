"""``quantformer explain``: word attributions of a fine-tuned model's predictions
(:mod:`quantformer.infer.explain`), an HTML page, a per-class term summary and faithfulness
checks."""

from __future__ import annotations

from pathlib import Path

from .._core.atomic import write_json
from ..infer.explain import check_model, check_steps, explain, load_explainable
from ..infer.explain_check import check
from ..io.frames import check_output_path, read_frame, write_frame
from ..io.highlight import check_html_path, write_attribution_page
from ..io.writable import check_writable
from ..score.attributions import by_term
from ._options import (
    add_corpus_options,
    add_device_option,
    add_quiet_option,
    corpus_kwargs,
    positive,
)


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
                    "the logit difference of input and baseline).",
    )
    p.add_argument("--model", required=True, help="model directory from `quantformer finetune`")
    p.add_argument("--input", required=True, help="corpus file")
    add_corpus_options(p, label=False)
    p.add_argument("--out", required=True, help="output file (.parquet, .csv, .rds, ...)")
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
                        "across documents, with document counts and bootstrap intervals "
                        "(.parquet, .csv, .rds)")
    p.add_argument("--top", type=positive(int), default=20,
                   help="with --by-term: terms per class (20)")
    p.add_argument("--check", action="store_true",
                   help="faithfulness checks, written to OUT.check.json: deletion test (AOPC "
                        "of the top 5 attributed words vs 5 random words) and model "
                        "randomisation (Spearman rank correlation; Adebayo et al. 2018)")
    p.add_argument("--batch-size", type=positive(int), default=8,
                   help="documents integrated together at most (8)")
    p.add_argument("--backend", default="torch", choices=("torch", "onnx"),
                   help="torch only: Integrated Gradients needs gradients")
    add_device_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def check_path(args) -> Path:
    """Where ``--check`` writes: ``OUT`` without its extension + ``.check.json``."""
    out = Path(args.out)
    return out.with_name(out.name.split(".")[0] + ".check.json")


def _check_args(args) -> None:
    """Every check that needs no model weights, before any work."""
    check_steps(args.steps)
    check_output_path(args.out)
    if args.html:
        check_html_path(args.html)
        check_writable(args.html, "html")
    if args.by_term:
        check_output_path(args.by_term, param="by_term")
    check_model(args.model, args.backend, args.target)


def run(args) -> int:
    _check_args(args)
    frame = read_frame(args.input, **corpus_kwargs(args, label=False))
    clf = load_explainable(args.model, device=args.device, target=args.target)
    ex = explain(clf, frame, target=args.target, steps=args.steps,
                 batch_size=args.batch_size, progress=not args.quiet)
    extra = {}
    if args.check:
        extra["check"] = check(clf, frame, ex)
    if args.by_term:
        extra["by_term"] = by_term(ex.words, top=args.top)
    _write(args, frame, ex, extra, write_frame)
    print(f"wrote {len(ex.words)} word attributions of {ex.documents['doc_id'].nunique()} "
          f"documents to {args.out}")
    return 0


def _write(args, frame, ex, extra, write_frame) -> None:
    """All outputs, once everything is computed (each written atomically)."""
    write_frame(ex.words, args.out)
    if args.html:
        texts = dict(zip(frame["doc_id"].astype(str), frame["text"]))
        write_attribution_page(ex.words, ex.documents, texts, args.html)
    if "by_term" in extra:
        write_frame(extra["by_term"], args.by_term)
    if "check" in extra:
        write_json(extra["check"], check_path(args))
        c = extra["check"]
        print(f"deletion AOPC: top words {_fmt(c['aopc_top'])}, random words "
              f"{_fmt(c['aopc_random'])}; randomisation Spearman "
              f"{_fmt(c['randomisation_spearman'])}")


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.4f}"

