"""The main job end to end on the embedded example (``quantformer demo``, ``make demo``).

State of the Union paragraphs since 1913 are labelled with the president's party (Democratic vs
Republican). Addresses, not paragraphs, are split into training and test sets
(:func:`quantformer.datasets.split_by_group`), so no address has paragraphs on both sides and the
test measures how well the party is recognised in unseen speeches. The bundled default model is
fine-tuned with the default recipe on a seeded sample of the training paragraphs (so the demo
finishes in a few minutes on a laptop CPU; ``--train-docs all`` uses every one), every held-out
paragraph is predicted, and the evaluation table is printed. Written to ``--out``:

``predictions.parquet``, ``predictions.rds``
    one row per held-out paragraph: ``doc_id``, ``label`` (true party), docvars, ``predicted``,
    ``prob_Democratic``, ``prob_Republican``.
``evaluation.json``, ``confusion.png``
    the evaluation report and the confusion-matrix heat map.
``model/``
    the fine-tuned model directory (loadable with ``quantformer predict --model``).
"""

from __future__ import annotations

import time
from pathlib import Path

from .errors import InputError

SINCE = 1913
PARTIES = ("Democratic", "Republican")
TRAIN_DOCS = 800
MAX_LENGTH = 256


def majority_macro_f1(counts) -> float:
    """Macro-F1 of always predicting the most frequent class, from class counts (a Series).

    The majority class gets F1 = 2p/(1+p) with precision p = its share and recall 1; every other
    class gets 0.
    """
    p = float(counts.iloc[0]) / float(counts.sum())
    return (2 * p / (1 + p)) / len(counts)


def run_demo(out: str | Path, *, train_docs: int | None = TRAIN_DOCS,
             test_docs: int | None = None, model: str | None = None,
             epochs: int | None = None, max_length: int = MAX_LENGTH, seed: int = 1,
             device: str = "auto", quiet: bool = False) -> dict:
    """Run the main job on the SOTU example and write its outputs into ``out``.

    Args:
        out: output folder (created; the demo's files in it are replaced).
        train_docs: training paragraphs sampled (seeded) from the training addresses;
            ``None`` for all of them (default 800: the demo then takes a few minutes on 2 CPU
            cores).
        test_docs: held-out paragraphs predicted, sampled (seeded); ``None`` for all.
        model, epochs: as in :func:`quantformer.finetune` (default model and epochs).
        max_length: tokens per paragraph (256: 99 % of these paragraphs have at most 233
            tokens; the 0.7 % longer ones are cut head+tail).
        seed: the split, the samples and training.

    Returns:
        ``{"report": Report, "n_train": int, "n_test": int, "seconds": float, "files": [...]}``.
    """
    from .datasets import sotu, split_by_group
    from .evaluate import evaluate
    from .finetune import finetune
    from .frames import write_frame

    t0 = time.time()
    def say(*a):
        print(*a, flush=True)

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out '{out}' is a file; give a folder for the demo's outputs")
    frame = sotu(since=SINCE, parties=PARTIES, label="party")
    train, test = split_by_group(frame, "address", test_share=0.2, seed=seed)
    overlap = set(train["address"]) & set(test["address"])
    assert not overlap, "an address is on both sides of the split"
    say(f"State of the Union paragraphs since {SINCE}, {' vs '.join(PARTIES)}: {len(frame)} "
        f"paragraphs from {frame['address'].nunique()} addresses; split by address into "
        f"{len(train)} training paragraphs ({train['address'].nunique()} addresses) and "
        f"{len(test)} test paragraphs ({test['address'].nunique()} addresses)")
    if train_docs is not None and train_docs < len(train):
        train = train.sample(n=train_docs, random_state=seed).sort_index()
        say(f"training on a random sample of {train_docs} training paragraphs so the demo "
            "finishes in minutes on a CPU (pass --train-docs all to use every one)")
    if test_docs is not None and test_docs < len(test):
        test = test.sample(n=test_docs, random_state=seed).sort_index()
        say(f"predicting a random sample of {test_docs} test paragraphs")
    clf = finetune(train, model=model, epochs=epochs, max_length=max_length, seed=seed,
                   device=device, quiet=quiet, source=f"quantformer.sotu(since={SINCE})")
    out.mkdir(parents=True, exist_ok=True)
    clf.save(out / "model", overwrite=True)
    t1 = time.time()
    preds = clf.predict(test, progress=not quiet)
    report = evaluate(test["label"], preds["predicted"], labels=clf.labels)
    files = [write_frame(preds, out / "predictions.parquet"),
             write_frame(preds, out / "predictions.rds"),
             report.save(out / "evaluation.json"), report.plot(out / "confusion.png")]
    seconds = time.time() - t0
    report.print(title=f"held-out addresses: {report.n} paragraphs, party predicted by the "
                       f"fine-tuned {clf.record['model']}")
    counts = test["label"].value_counts()
    say(f"for comparison, always answering '{counts.index[0]}' (the larger class) would score "
        f"accuracy {counts.iloc[0] / counts.sum():.3f} but macro-F1 "
        f"{majority_macro_f1(counts):.3f}: with unequal classes, macro-F1 is the measure to "
        "read (Wankmüller 2022, section 6.5)")
    say(f"fine-tuning took {clf.record['train_seconds']:.0f} s, prediction "
        f"{time.time() - t1:.0f} s, {seconds:.0f} s in all")
    say("wrote " + ", ".join(str(f) for f in files) + f" and the model in {out / 'model'}")
    return {"report": report, "n_train": len(train), "n_test": len(test), "seconds": seconds,
            "files": [str(f) for f in files]}


# ------------------------------------------------------------------------------------------
# CLI


def _count_or_all(s: str) -> int | None:
    import argparse

    if s.lower() == "all":
        return None
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a whole number or 'all', not '{s}'") from None
    if v < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2, not {s}")
    return v


def add_cli(sub) -> None:
    from .cli import add_device_option, add_model_option, add_quiet_option, positive

    p = sub.add_parser(
        "demo",
        help="the main job on the SOTU example: fine-tune, predict held-out addresses, evaluate",
        description="Fine-tune the default model to recognise the president's party in State "
                    f"of the Union paragraphs since {SINCE} (train and test split by address), "
                    "predict the held-out addresses and print the evaluation. Writes "
                    "predictions (.parquet, .rds), evaluation.json, confusion.png and model/.",
    )
    p.add_argument("--out", required=True, help="output folder (created; its demo files are "
                                                "replaced)")
    p.add_argument("--train-docs", type=_count_or_all, default=TRAIN_DOCS,
                   help=f"training paragraphs sampled, or 'all' ({TRAIN_DOCS})")
    p.add_argument("--test-docs", type=_count_or_all, default=None,
                   help="test paragraphs sampled, or 'all' (all)")
    add_model_option(p)
    p.add_argument("--epochs", type=positive(int), default=None,
                   help="epochs (default: by model size, as finetune)")
    p.add_argument("--max-length", type=int, default=MAX_LENGTH,
                   help=f"tokens per paragraph ({MAX_LENGTH})")
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    add_device_option(p)
    add_quiet_option(p)
    p.set_defaults(func=_run_demo)


def _run_demo(args) -> int:
    run_demo(args.out, train_docs=args.train_docs, test_docs=args.test_docs, model=args.model,
             epochs=args.epochs, max_length=args.max_length, seed=args.seed,
             device=args.device, quiet=args.quiet)
    return 0
