"""``quantformer tune``: cross-validated grid search over learning rate x epochs
(:func:`quantformer.select.tune.tune`)."""

from __future__ import annotations

from .._core.show import print_table
from ..select.common import parse_list
from ..select.tune import METRIC_NAMES, tune
from .._core.atomic import write_json
from ..io.modeldir import read_record
from ..io.writable import check_results_dir, check_writable
from . import _options as opt


def add_cli(sub) -> None:
    p = sub.add_parser(
        "tune",
        help="cross-validated grid search over learning rate x epochs, refit, test",
        description="Stratified k-fold grid search for fine-tuning (Wankmüller 2022, section "
                    "6.4): every learning rate x epochs pair is fine-tuned on each training "
                    "fold and scored by macro-F1 on the held-out fold; the best (ties: fewer "
                    "epochs, then lower rate) is refit on all training data and scored on "
                    "--test. Writes cv_results.csv/.rds, cv_summary.csv/.rds, best.json, "
                    "model/ and, with --test, test_predictions.csv/.rds (every test document, "
                    "in order) and test_report.json into --out (a new or empty folder, or "
                    "--overwrite).",
    )
    opt.add_labelled_corpora(p, "labelled test corpus file (optional)", test_required=False)
    opt.add_model_option(p)
    p.add_argument("--method", default="standard", choices=("standard", "setfit", "nli"),
                   help="standard fine-tuning; setfit (few-shot; the grid is then over body "
                        "learning rates x pair epochs, default 2e-5,5e-5,1e-4 x 1,2); or nli "
                        "(an NLI --model fine-tuned on the classes as hypotheses, Laurer et al. "
                        "2023; default grid 1e-5,2e-5,5e-5 x 7,10)")
    p.add_argument("--setfit-iterations", type=opt.positive(int), default=None, metavar="N",
                   help="setfit: pairs drawn per training document and direction, in every "
                        "run (5)")
    opt.add_nli_options(p)
    p.add_argument("--lrs", default=None,
                   help="comma-separated learning rates (default by model size: small "
                        "5e-5,8e-5,1e-4; base 1e-5,2e-5,3e-5; large 5e-6,1e-5,2e-5)")
    p.add_argument("--epochs-grid", default=None,
                   help="comma-separated epochs (default: small 3,4,5; base/large 2,3,4)")
    p.add_argument("--folds", type=int, default=5, help="stratified CV folds (5)")
    p.add_argument("--oversample", type=float, default=None,
                   help="oversample training folds to this minority:majority ratio (e.g. "
                        "0.25); validation folds are never oversampled")
    p.add_argument("--max-runs", type=int, default=None,
                   help="refuse to start when the grid needs more fine-tuning runs than this")
    p.add_argument("--seed", type=int, default=1, help="seed of the folds and the runs (1)")
    opt.add_task_options(p, "regression selects the lowest RMSE, multilabel the best macro-F1 "
                        "over labels; both use plain shuffled folds")
    p.add_argument("--batch-size", type=opt.positive(int), default=16,
                   help="training batch size (16)")
    opt.add_selection_training(
        p, max_length_help="tokens per document, special tokens included (512; --method "
                           "setfit: the sentence-transformer's own, 256 for MiniLM)",
        truncation_help="how long documents are cut (head_tail; --method setfit: head); "
                        "chunks: every document read whole as windows, in training and in "
                        "scoring each held-out fold")
    p.add_argument("--record", default=None,
                   help="also write the refit model's run record (its quantformer.json, "
                        "checked) to this JSON file")
    p.set_defaults(func=run)


def run(args) -> int:
    out = check_results_dir(args.out, args.overwrite)
    if args.record:
        check_writable(args.record, "record")
    lrs = parse_list(args.lrs, float, "lrs")
    epochs = parse_list(args.epochs_grid, int, "epochs_grid")
    task = opt.task_kwargs(args)
    train, test = opt.read_train_test(args, task)
    spec = opt.train_spec(args, **opt.nli_kwargs(args))  # every run's settings, built once
    res = tune(train, test, spec=spec, lrs=lrs, epochs_grid=epochs, folds=args.folds,
               max_runs=args.max_runs, scheduler=args.scheduler)
    res.info["train"] = str(args.train)
    if args.test:
        res.info["test"] = str(args.test)
    res.save(out, overwrite=args.overwrite)
    if args.record:  # the checked record, so a caller needs no second call to read it
        write_json(read_record(out / "model"), args.record)
    if not args.quiet:
        # learning rates as written (5e-05), not rounded to the table's 4 decimals
        table = res.cv_summary.assign(lr=[f"{v:g}" for v in res.cv_summary["lr"]])
        name = METRIC_NAMES[res.info.get("metric", "macro_f1")]
        print_table(table.set_index(["lr", "epochs"]),
                    title=f"cross-validated {name} per configuration")
    print(f"wrote {opt.written_files(out)} to {out}")
    return 0
