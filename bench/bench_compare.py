"""Benchmark: the paper's Table 1 comparison on Abortion and Toxic (issue 6).

Runs quantformer's ``compare`` machinery (same samples, same models, same scoring) one run at
a time and appends each finished run to a CSV cache, so the script can be stopped and resumed,
or run in parts (``--tasks``, ``--sizes``, ``--repeats``, ``--models``). At the end it prints a
Markdown table per task next to the paper's numbers (Wankmüller 2022, Table 1).

    nice -n 10 .venv/bin/python bench/bench_compare.py --tasks abortion,toxic \
        --sizes 500,1000,2000 --repeats 3 --cache /tmp/bench_compare.csv

Data: ``../shared/data`` (never copied into the repository). Abortion: train = TweetEval train +
val (653), test 280. Toxic: ``jigsaw_5k.csv``, label ``toxic``, a stratified test set of 1,000
(seed 1), training samples drawn from the other 4,000.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PAPER = {  # Wankmüller (2022) Table 1, macro-F1 (see ../shared/data/README.md)
    "abortion": {"all": {"SVM BOW": 0.526, "SVM GloVe": 0.545, "XGBoost BOW": 0.540,
                         "BERT": 0.593, "RoBERTa": 0.617}},
    "toxic": {"500": {"SVM BOW": 0.711, "BERT": 0.832, "Longformer": 0.849},
              "1000": {"SVM BOW": 0.754, "BERT": 0.857, "Longformer": 0.875},
              "2000": {"SVM BOW": 0.782, "BERT": 0.888, "Longformer": 0.884}},
}
COLS = ["task", "model", "train_size", "repeat", "macro_f1", "accuracy", "seconds", "params"]


def load_abortion():
    d = DATA / "tweeteval_abortion"
    names = dict(line.split("\t") for line in (d / "mapping.txt").read_text().split("\n")
                 if line.strip())

    def split(name):
        texts = (d / f"{name}_text.txt").read_text(encoding="utf-8").split("\n")
        labels = (d / f"{name}_labels.txt").read_text().split()
        texts = texts[:len(labels)]
        return pd.DataFrame({"doc_id": [f"{name}{i + 1}" for i in range(len(labels))],
                             "text": texts, "label": [names[x].strip() for x in labels]})

    return pd.concat([split("train"), split("val")], ignore_index=True), split("test")


def load_toxic():
    from sklearn.model_selection import train_test_split

    from quantformer import read_frame

    f = read_frame(DATA / "jigsaw_toxic" / "jigsaw_5k.csv", text_col="comment_text",
                   label_col="toxic", id_col="id")
    f = f[["doc_id", "text", "label"]]
    tr, te = train_test_split(f, test_size=1000, stratify=f["label"], random_state=1)
    return tr.reset_index(drop=True), te.reset_index(drop=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="abortion,toxic")
    ap.add_argument("--sizes", default="500,1000,2000", help="Toxic training sizes")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only-repeats", default=None,
                    help="run only these repeats, e.g. 2,3 (to run repeats in parallel "
                         "processes with separate caches; the report uses --repeats)")
    ap.add_argument("--models", default="svm-bow,svm-vec,xgb-bow,xgb-vec,default")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache", default="/tmp/bench_compare.csv")
    ap.add_argument("--report-only", action="store_true", help="print tables from the cache")
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        print(f"data folder {DATA} absent", file=sys.stderr)
        return 1

    from quantformer.train.baselines import training_rows
    from quantformer.select.compare import (CompareResult, build_table, describe, draw_sample,
                                     margins, parse_models, run_one)

    models = parse_models(args.models)
    cache = Path(args.cache)
    done = pd.read_csv(cache) if cache.exists() else pd.DataFrame(columns=COLS)
    for task in [t.strip() for t in args.tasks.split(",") if t.strip()]:
        train, test = {"abortion": load_abortion, "toxic": load_toxic}[task]()
        train, test = training_rows(train), training_rows(test, "test data")
        sizes = [len(train)] if task == "abortion" else \
            [int(s) for s in args.sizes.split(",")]
        for s in sizes:
            for r in range(1, args.repeats + 1):
                if args.only_repeats and str(r) not in args.only_repeats.split(","):
                    continue
                sample = draw_sample(train, s, r, args.seed)
                for m in models:
                    hit = done[(done.task == task) & (done.model == m) &
                               (done.train_size == s) & (done["repeat"] == r)]
                    if args.report_only or len(hit):
                        continue
                    t0 = time.time()
                    res = run_one(m, sample, test, repeat=r, seed=args.seed, folds=5,
                                  vectors=None, model=None, finetune_kwargs=None,
                                  fitters=None, quiet=True)
                    row = {"task": task, "model": m, "train_size": s, "repeat": r,
                           "macro_f1": res["macro_f1"], "accuracy": res["accuracy"],
                           "seconds": res["seconds"], "params": str(res["params"])}
                    done = pd.concat([done, pd.DataFrame([row])], ignore_index=True)
                    done.to_csv(cache, index=False)
                    print(f"{task} {m} n={s} r={r}: macro-F1 {res['macro_f1']:.4f} "
                          f"({time.time() - t0:.0f} s)", flush=True)
        part = done[done.task == task]
        if part.empty:
            continue
        names = [m for m in models if m in set(part.model)]
        table = build_table(part, names, {m: describe(m) for m in names})
        sizes_done = sorted(part.train_size.unique().tolist())
        reps = part.groupby(["model", "train_size"]).size()
        res = CompareResult(results=part, table=table,
                            summary={"train_sizes": sizes_done, "n_test": len(test),
                                     "repeats": f"{reps.min()}-{reps.max()}"
                                     if reps.min() != reps.max() else int(reps.min())})
        print(f"\n### {task}: n_train {len(train)}, n_test {len(test)}\n")
        print(res.markdown())
        print("\nPaper (Table 1):", PAPER[task])
        print("Margins:", {k: {"best_conventional": v["best_conventional"],
                               "transformer_margin": v["transformer_margin"]}
                           for k, v in margins(part).items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
