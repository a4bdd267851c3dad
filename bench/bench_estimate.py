"""Bench (issue 12): naive vs gold-only vs PPI prevalence on a corpus whose every label is known.

For gold samples of 100 / 200 / 500 documents drawn at random many times from the corpus, it
prints per method the bias of the estimate, the mean 95 % interval width and the coverage of the
true prevalence of one class, and PPI's width relative to gold-only (the share of hand-coding it
saves: a width ratio r means the gold sample alone would need about 1/r^2 times as many codes).

    python bench/bench_estimate.py --pred PRED --truth TRUTH --class toxic [--draws 300]
    python bench/bench_estimate.py --toxic-bow ../shared/data/jigsaw_toxic/jigsaw_5k.csv

PRED: a prediction file (doc_id, predicted, prob_*) of the whole corpus; TRUTH: doc_id and
label for every document. ``--toxic-bow`` builds both from the Toxic comments with a
bag-of-words logistic regression trained on 300 of them (a stand-in when no fine-tuned model's
predictions are at hand).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

import quantformer


def toxic_bow(path: str, n_train: int = 300, seed: int = 7):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    df = pd.read_csv(path, dtype={"id": str})
    truth = np.where(df["toxic"] == 1, "toxic", "nontoxic")
    train = np.random.default_rng(seed).choice(len(df), n_train, replace=False)
    x = TfidfVectorizer(min_df=2).fit_transform(df["comment_text"].fillna(""))
    model = LogisticRegression(max_iter=1000).fit(x[train], truth[train])
    proba = model.predict_proba(x)
    pred = pd.DataFrame({"doc_id": df["id"], "predicted": model.classes_[proba.argmax(1)],
                         **{f"prob_{c}": proba[:, j] for j, c in enumerate(model.classes_)}})
    return pred, pd.DataFrame({"doc_id": df["id"], "label": truth})


def run(pred: pd.DataFrame, truth: pd.DataFrame, cls: str, sizes, draws: int, seed: int):
    truth = truth.set_index("doc_id").loc[pred["doc_id"].astype(str)].reset_index()
    true = float(np.mean(truth["label"] == cls))
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        stats = {m: [] for m in ("naive", "gold", "ppi")}
        for _ in range(draws):
            gold = truth.iloc[rng.choice(len(truth), n, replace=False)]
            for method in stats:
                t = quantformer.estimate(pred, gold, method=method)
                t = t[t["class"] == cls].iloc[0]
                stats[method].append((t["estimate"], t["ci_high"] - t["ci_low"],
                                      t["ci_low"] <= true <= t["ci_high"]))
        for method, values in stats.items():
            est, width, hit = (np.array(v, float) for v in zip(*values))
            rows.append({"n_gold": n, "method": method, "bias": est.mean() - true,
                         "mean_width": width.mean(), "coverage": hit.mean()})
    table = pd.DataFrame(rows)
    ratio = (table[table.method == "ppi"].set_index("n_gold")["mean_width"]
             / table[table.method == "gold"].set_index("n_gold")["mean_width"])
    return true, table, ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pred")
    ap.add_argument("--truth")
    ap.add_argument("--toxic-bow", help="jigsaw_5k.csv: build a bag-of-words stand-in")
    ap.add_argument("--class", dest="cls", default="toxic")
    ap.add_argument("--sizes", default="100,200,500")
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.toxic_bow:
        pred, truth = toxic_bow(args.toxic_bow)
    else:
        pred = pd.read_parquet(args.pred) if args.pred.endswith(".parquet") else \
            pd.read_csv(args.pred)
        truth = pd.read_parquet(args.truth) if args.truth.endswith(".parquet") else \
            pd.read_csv(args.truth)
        truth = truth[["doc_id", "label"]].astype({"doc_id": str})
    start = time.time()
    true, table, ratio = run(pred, truth, args.cls, [int(s) for s in args.sizes.split(",")],
                             args.draws, args.seed)
    print(f"corpus: {len(pred)} documents, true prevalence of '{args.cls}' {true:.4f}; "
          f"{args.draws} draws per gold size; {time.time() - start:.0f} s")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print("PPI width / gold-only width (ratio; gold-only needs ~1/ratio^2 times the codes):")
    print(ratio.to_string(float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
