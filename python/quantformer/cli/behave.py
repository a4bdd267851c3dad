"""``quantformer behave``: behavioural tests of a fine-tuned classifier
(:mod:`quantformer.audit.behave`): invariance, directional and minimum-functionality tests."""

from __future__ import annotations

from .._core.atomic import write_json
from .._core.errors import InputError
from .._core.show import print_table
from ..audit.behave import (
    BehaviourTest,
    parse_fill,
    read_substitutions,
    read_suite,
    run_tests,
    summary,
)
from ..audit.perturb import PERTURBATIONS
from ..infer.load import load_model
from ..infer.predict import precision_record
from ..io.frames import read_frame
from ..io.modeldir import read_record
from ..io.writable import check_writable
from ._options import (
    add_corpus_options,
    add_device_option,
    add_precision_option,
    add_quiet_option,
    corpus_kwargs,
    print_precision,
)


def add_cli(sub) -> None:
    p = sub.add_parser(
        "behave",
        help="behavioural tests: invariance, directional and minimum functionality",
        description="Test a fine-tuned classifier the way CheckList does (Ribeiro et al. "
                    "2020): perturb the documents of a corpus and check the predictions stay "
                    "the same (--expect same) or move the probability of a class "
                    "(--expect up:CLASS / down:CLASS), or check texts get their label "
                    "(--expect label: the corpus's label column, or --template). One test "
                    "from the flags, or several from --suite (YAML or CSV). Output: JSON with "
                    "per test n, fail_rate, a Wilson 95% interval and failing examples. "
                    "Exit 0 whatever the fail rates (failures are findings).",
    )
    p.add_argument("--model", required=True, help="model directory from `quantformer finetune`")
    p.add_argument("--input", default=None, help="corpus file (needed by perturbation tests)")
    add_corpus_options(p)
    p.add_argument("--out", required=True, help="results file (.json)")
    p.add_argument("--suite", default=None,
                   help="a suite file (.yaml or .csv) with one test per entry/row: name, "
                        "expect, perturb, substitutions, template, fill, label, tolerance, "
                        "min_change, preserve_case")
    p.add_argument("--perturb", default=None, choices=PERTURBATIONS,
                   help="the perturbation of a test from the flags")
    p.add_argument("--expect", default=None,
                   help="same, up:CLASS, down:CLASS or label")
    p.add_argument("--substitutions", default=None,
                   help="with --perturb substitutions: CSV file with columns from,to (any "
                        "language; whole words; every pair is applied)")
    p.add_argument("--preserve-case", action="store_true",
                   help="with --substitutions: match any case and keep the case of the "
                        "replaced word (GOD -> ALLAH)")
    p.add_argument("--template", default=None,
                   help="with --expect label: a text with {placeholders}, e.g. 'I {verb} it'")
    p.add_argument("--fill", default=None,
                   help="words of each placeholder: 'verb=love|like;obj=this'")
    p.add_argument("--label", default=None, help="the class every filled template must get")
    p.add_argument("--tolerance", type=float, default=0.1,
                   help="directional tests: largest move the wrong way that passes (0.1)")
    p.add_argument("--min-change", type=float, default=None,
                   help="directional tests: the least move of the class's probability the "
                        "expected way that passes (e.g. 0.05; default: none, only "
                        "--tolerance applies)")
    p.add_argument("--name", default=None, help="name of a test from the flags")
    p.add_argument("--seed", type=int, default=1, help="random seed of the perturbations (1)")
    add_device_option(p)
    add_precision_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def tests_from_args(args) -> list:
    """The tests asked for: the suite's, or one from the flags (checked, no model needed)."""
    if args.suite and args.expect:
        raise InputError("give either {suite} or a test from the flags ({expect}), not both",
                         params=["suite", "expect"])
    if args.suite:
        return read_suite(args.suite)
    if not args.expect:
        raise InputError("nothing to test: give {expect} (with {perturb}, or label) or "
                         "{suite}", params=["expect", "perturb", "suite"])
    subs = read_substitutions(args.substitutions) if args.substitutions else []
    name = args.name or (f"{args.perturb}: {args.expect}" if args.perturb else args.expect)
    return [BehaviourTest(name=name, expect=args.expect, perturb=args.perturb,
                          substitutions=subs, template=args.template,
                          fill=parse_fill(args.fill), label=args.label,
                          tolerance=args.tolerance, preserve_case=args.preserve_case,
                          min_change=args.min_change)]


def run(args) -> int:
    if not str(args.out).lower().endswith(".json"):
        raise InputError(f"{{out}} '{args.out}' must end in .json", params=["out"])
    check_writable(args.out)
    tests = tests_from_args(args)
    labels = [str(x) for x in read_record(args.model).get("labels") or []]
    for t in tests:
        t.check(labels)
    frame = read_frame(args.input, **corpus_kwargs(args)) if args.input else None
    if frame is not None and frame["text"].isna().all():
        raise InputError(f"all texts of '{args.input}' are missing", params=["input"])
    clf = load_model(args.model, device=args.device, precision=args.precision)
    results = run_tests(clf, frame, tests, seed=args.seed, progress=not args.quiet)
    used = precision_record(clf)
    write_json({"model": str(args.model), "input": args.input, "seed": args.seed,
                "precision": used, "tests": results}, args.out)
    if not args.quiet:
        print_table(summary(results), title=f"behavioural tests (written to {args.out})")
    print_precision(used)
    return 0
