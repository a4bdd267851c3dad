"""The main job end to end on the embedded example (``quantformer demo``, ``make demo``).

State of the Union paragraphs since 1861 are labelled with the president's party (Democratic vs
Republican; the classes are about even, 53 : 47). Addresses, not paragraphs, are split into training and test sets
(:func:`quantformer.io.datasets.split_by_group`), so no address has paragraphs on both sides and the
test measures how well the party is recognised in unseen speeches. The bundled default model is
fine-tuned with the default recipe on a seeded sample of the training paragraphs (so the demo
finishes in a few minutes on a laptop CPU; ``--train-docs all`` uses every one), every held-out
paragraph is predicted, and the evaluation table is printed. The bag-of-words SVM baseline
(``svm-bow``, Wankmüller 2022 section 6.2, tuned by 5-fold CV as in ``compare``) is trained on
the same paragraphs and scored on the same test set, and a table shows the fine-tuned model, the
SVM and always answering the training sample's larger class side by side.

The task, sample and recipe were chosen so that the point of transfer learning shows within the
demo's budget (``bench/RESULTS.md``, "Demo task"): on the same 400 paragraphs the fine-tuned
model scores macro-F1 0.677 and the SVM 0.652, and the SVM stays below the fine-tuned model
even when it trains on 2,000 paragraphs (0.662). On the earlier task (since 1913, 800
paragraphs at 256 tokens) both scored 0.556. Written to ``--out``:

``predictions.parquet``, ``predictions.rds``
    one row per held-out paragraph: ``doc_id``, ``label`` (true party), docvars, ``predicted``,
    ``prob_Democratic``, ``prob_Republican``, ``backend`` (``torch``).
``evaluation.json``, ``confusion.png``
    the evaluation report and the confusion-matrix heat map of the fine-tuned model.
``comparison.csv``, ``comparison.png``
    macro-F1 and accuracy of the fine-tuned model, the SVM baseline and the majority guess on
    the same test paragraphs, as a table and a bar chart.
``model/``
    the fine-tuned model directory (loadable with ``quantformer predict --model``).
"""

from __future__ import annotations

import time
from pathlib import Path

from .._core.errors import InputError
from .._core.show import print_table
from ..io.columns import LABEL_COLUMN, PREDICTED_COLUMN
from ..io.datasets import sotu, split_by_group
from ..io.writing import write_figure, write_frame
from ..io.writable import check_writable
from ..score.evaluate import evaluate
from ..train.baselines import fit_baseline
from ..train.finetune import finetune

SINCE = 1861
PARTIES = ("Democratic", "Republican")
TRAIN_DOCS = 400
MAX_LENGTH = 128


def run_demo(out: str | Path, *, train_docs: int | None = TRAIN_DOCS,
             test_docs: int | None = None, model: str | None = None,
             epochs: int | None = None, max_length: int = MAX_LENGTH, seed: int = 1,
             device: str = "auto", quiet: bool = False) -> dict:
    """Run the main job on the SOTU example and write its outputs into ``out``.

    Args:
        out: output folder (created; the demo's files in it are replaced).
        train_docs: training paragraphs sampled (seeded) from the training addresses;
            ``None`` for all of them (default 400: the demo then takes a few minutes on 2 CPU
            cores).
        test_docs: held-out paragraphs predicted, sampled (seeded); ``None`` for all.
        model, epochs: as in :func:`quantformer.train.finetune` (default model and epochs).
        max_length: tokens per paragraph (128: the median paragraph has 73 tokens; the 20 %
            longer ones, mostly 19th-century, are cut head+tail, and prediction says how many).
        seed: the split, the samples and training.

    Returns:
        ``{"report": Report, "n_train": int, "n_test": int, "seconds": float, "files": [...]}``.
    """
    t0 = time.time()
    def say(*a):
        print(*a, flush=True)

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{{out}} '{out}' is a file; give a folder for the demo's outputs",
                         params=["out"])
    check_writable(out)
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
    report = evaluate(test[LABEL_COLUMN], preds[PREDICTED_COLUMN], labels=clf.labels)
    baseline = baseline_reports(train, test, clf.labels, seed)
    table = comparison_table(report, clf.record["train_seconds"], baseline)
    files = [write_frame(preds, out / "predictions.parquet"),
             write_frame(preds, out / "predictions.rds"),
             report.save(out / "evaluation.json"), report.plot(out / "confusion.png"),
             write_frame(table.reset_index(), out / "comparison.csv"),
             plot_comparison(table, out / "comparison.png")]
    seconds = time.time() - t0
    report.print(title=f"held-out addresses: {report.n} paragraphs, party predicted by the "
                       f"fine-tuned {clf.record['model']}")
    _print_comparison(table, len(train), say)
    say(f"fine-tuning took {clf.record['train_seconds']:.0f} s, prediction "
        f"{time.time() - t1:.0f} s, {seconds:.0f} s in all")
    say("wrote " + ", ".join(str(f) for f in files) + f" and the model in {out / 'model'}")
    say(f"evaluation plots: {out / 'confusion.png'} (the fine-tuned model's confusion matrix) "
        f"and {out / 'comparison.png'} (the three side by side)")
    say(WHAT_NEXT)
    return {"report": report, "n_train": len(train), "n_test": len(test), "seconds": seconds,
            "comparison": table, "files": [str(f) for f in files]}


WHAT_NEXT = ("what to try next: your own coded documents with `quantformer compare --train F "
             "--test G` (Transformer vs these baselines at several training sizes), or "
             "`quantformer demo --train-docs all` here (about 35 times the training time)")


def baseline_reports(train, test, labels, seed: int) -> dict:
    """Reports of the bag-of-words SVM (trained on ``train``) and of always answering the
    training sample's larger class, both on ``test``: ``{name: (Report, train seconds)}``."""
    svm = fit_baseline(train, "svm-bow", seed=seed)
    majority = train[LABEL_COLUMN].value_counts().index[0]
    return {
        "SVM, bag of words": (evaluate(test[LABEL_COLUMN], svm.predict_labels(test["text"]),
                                       labels=labels), svm.seconds),
        f"always '{majority}'": (evaluate(test[LABEL_COLUMN], [majority] * len(test),
                                          labels=labels), 0.0),
    }


def comparison_table(report, train_seconds: float, baselines: dict):
    """One row per model: macro-F1, accuracy, training seconds (fine-tuned model first)."""
    import pandas as pd

    rows = {"fine-tuned Transformer": (report, train_seconds), **baselines}
    return pd.DataFrame({"macro_f1": [r.macro_f1 for r, _ in rows.values()],
                         "accuracy": [r.accuracy for r, _ in rows.values()],
                         "train_seconds": [round(s) for _, s in rows.values()]},
                        index=pd.Index(list(rows), name="model"))


def _print_comparison(table, n_train: int, say) -> None:
    print_table(table, title=f"the same {n_train} training paragraphs, the same test "
                             "paragraphs:", floatfmt="{:.3f}")
    ft, svm = table["macro_f1"].iloc[0], table["macro_f1"].iloc[1]
    guess_acc, guess_f1 = table["accuracy"].iloc[2], table["macro_f1"].iloc[2]
    say(f"macro-F1: the fine-tuned Transformer {ft - svm:+.3f} against the bag-of-words SVM. "
        f"Always answering the larger class scores accuracy {guess_acc:.3f} but macro-F1 "
        f"{guess_f1:.3f}: weighing every class equally, macro-F1 is the measure to read "
        "(Wankmüller 2022, section 6.5)")


def plot_comparison(table, path) -> Path:
    """A bar chart of macro-F1 and accuracy per model (PNG, written atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 3.2))
    y = np.arange(len(table))
    ax.barh(y - 0.2, table["macro_f1"], height=0.4, label="macro-F1", color="#1f77b4")
    ax.barh(y + 0.2, table["accuracy"], height=0.4, label="accuracy", color="#c7c7c7")
    for i, v in enumerate(table["macro_f1"]):
        ax.text(v + 0.01, i - 0.2, f"{v:.3f}", va="center", fontsize=9)
    ax.set_yticks(y, labels=list(table.index))
    ax.invert_yaxis()
    ax.set_xlim(0, 1.08)
    ax.set_xlabel("held-out paragraphs")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return write_figure(fig, path)
