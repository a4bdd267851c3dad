"""Learning curves: active learning (``quantformer suggest``) vs random sampling (issue 13).

For each task and seed, starting from zero codes, documents of the training pool are "coded"
(their true label revealed) in rounds of ``--batch`` documents chosen either by
``suggest(strategy="margin")`` (a cold start while fewer than two classes are coded) or by
``suggest(strategy="random")``. After every round the light classifier (logistic regression
over the frozen MiniLM embeddings, the one suggest uses) is scored on the test set (macro-F1);
at the ``--finetune-at`` checkpoints the default model is also fine-tuned (default settings) on
the codes so far and scored.

Tasks (``../shared/data``, never copied into the repository): Abortion (pool = TweetEval
train + val, 653; test 280) and Toxic (Jigsaw 5k: pool 4,000, test 1,000, 9.6 % toxic).

Prints per task the mean curve of each strategy and the ratio the issue targets: the number
of codes active learning needs to reach random's macro-F1 at ``--target`` codes, divided by
``--target`` (<= 0.60 on Toxic is the target). Example:

    OMP_NUM_THREADS=1 PYTHONPATH=python .venv/bin/python bench/bench_suggest.py \\
        --tasks abortion,toxic --seeds 1,2,3 --finetune-at 300 --finetune-seeds 1
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import bench_compare  # noqa: E402
from bench_compare import load_abortion, load_toxic  # noqa: E402


def embed_task(pool: pd.DataFrame, test: pd.DataFrame, cache_dir: Path):
    """Unit-length MiniLM embeddings of pool and test (cached in ``cache_dir``)."""
    from quantformer.suggest import embed_corpus

    out = []
    for name, frame in (("pool", pool), ("test", test)):
        path = cache_dir / f"{name}-{len(frame)}.parquet"
        if not path.exists():
            frame[["doc_id", "text"]].to_parquet(path)
        out.append(embed_corpus(frame, corpus_path=path, cache_dir=cache_dir, device="cpu"))
    return out


def light_f1(vecs, labels, test_vecs, test_labels, seed) -> float:
    from sklearn.metrics import f1_score

    from quantformer.suggest import light_classifier

    if len(set(labels)) < 2:
        return float("nan")
    clf = light_classifier(vecs, np.asarray(labels), seed)
    return float(f1_score(test_labels, clf.predict(test_vecs), average="macro"))


def finetune_f1(pool, coded_rows, test, seed) -> float:
    from sklearn.metrics import f1_score

    from quantformer.finetune import finetune

    train = pool.iloc[coded_rows][["doc_id", "text", "label"]].reset_index(drop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = finetune(train, seed=seed, quiet=True, device="cpu")
        pred = clf.predict(test, warn=False)
    return float(f1_score(test["label"], pred["predicted"], average="macro"))


def curve(pool, vecs, test, test_vecs, strategy, seed, batch, total, finetune_at):
    """One learning curve: rows (codes, light macro-F1, fine-tuned macro-F1 or NaN).
    ``strategy`` is a suggest strategy, with ``-nodiv`` appended for no diversity guard."""
    from quantformer.suggest import suggest

    frame = pool[["doc_id", "text"]].copy()
    coded: list[int] = []
    rows = []
    pos = {d: i for i, d in enumerate(pool["doc_id"])}
    while len(coded) < total:
        codes = pd.DataFrame({"doc_id": pool["doc_id"].iloc[coded],
                              "label": pool["label"].iloc[coded]})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            picks = suggest(frame, vecs, coded=codes, n=min(batch, total - len(coded)),
                            strategy=strategy.removesuffix("-nodiv"), seed=seed,
                            diversity=not strategy.endswith("-nodiv"))
        coded += [pos[d] for d in picks["doc_id"]]
        n = len(coded)
        f1 = light_f1(vecs[coded], pool["label"].iloc[coded], test_vecs, test["label"], seed)
        ft = finetune_f1(pool, coded, test, seed) if n in finetune_at else float("nan")
        rows.append({"codes": n, "light_f1": f1, "finetuned_f1": ft,
                     "n_minority": int(pool["label"].iloc[coded].value_counts().min())
                     if pool["label"].iloc[coded].nunique() > 1 else 0})
    return rows


def codes_to_reach(curve_df: pd.DataFrame, level: float) -> float:
    """Fewest codes at which a mean curve reaches ``level`` (NaN when it never does)."""
    hit = curve_df.loc[curve_df["light_f1"] >= level - 1e-9, "codes"]
    return float(hit.min()) if len(hit) else float("nan")


def run_task(name, seeds, batch, total, finetune_at, finetune_seeds, cache_dir,
             strategies=("margin", "random")):
    pool, test = {"abortion": load_abortion, "toxic": load_toxic}[name]()
    t0 = time.time()
    vecs, test_vecs = embed_task(pool, test, cache_dir)
    print(f"{name}: pool {len(pool)}, test {len(test)}, embedded in {time.time() - t0:.0f} s",
          flush=True)
    rows = []
    for seed in seeds:
        for strategy in strategies:
            fa = finetune_at if seed in finetune_seeds else set()
            for r in curve(pool, vecs, test, test_vecs, strategy, seed, batch, total, fa):
                rows.append({"task": name, "strategy": strategy, "seed": seed, **r})
            print(f"  seed {seed} {strategy}: done ({time.time() - t0:.0f} s)", flush=True)
    return pd.DataFrame(rows)


def main_strategy(mean: pd.DataFrame) -> str:
    """The active-learning strategy the target ratio is computed for: margin when it ran."""
    names = [s for s in mean["strategy"].unique() if s != "random"]
    return "margin" if "margin" in names else names[0]


def report(df: pd.DataFrame, target: int) -> dict:
    summary = {}
    for task, d in df.groupby("task"):
        mean = d.groupby(["strategy", "codes"])[["light_f1", "finetuned_f1", "n_minority"]] \
            .mean().reset_index()
        table = mean.pivot(index="codes", columns="strategy",
                           values=["light_f1", "n_minority"])
        for s in set(mean["strategy"]) - {"random"}:
            print(f"{s}: mean light macro-F1 over all rounds, minus random's: "
                  f"{(table[('light_f1', s)] - table[('light_f1', 'random')]).mean():+.4f}")
        print(f"\n== {task}: mean over seeds {sorted(d['seed'].unique())} ==")
        print(table.round(4).to_string())
        ft = d.dropna(subset=["finetuned_f1"])
        if len(ft):
            print("fine-tuned default model:")
            print(ft[["strategy", "seed", "codes", "finetuned_f1"]].to_string(index=False))
        rnd = mean[mean["strategy"] == "random"]
        level = float(rnd.loc[rnd["codes"] == target, "light_f1"].iloc[0])
        need = codes_to_reach(mean[mean["strategy"] == main_strategy(mean)], level)
        ratio = need / target
        print(f"random's light macro-F1 at {target} codes: {level:.4f}; active learning reaches "
              f"it with {need:.0f} codes: ratio {ratio:.2f} (target <= 0.60 on Toxic)")
        summary[task] = {"random_at_target": level, "al_codes_needed": need, "ratio": ratio}
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", default="abortion,toxic")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--batch", type=int, default=25, help="documents coded per round (25)")
    p.add_argument("--total", type=int, default=300, help="codes at the end (300)")
    p.add_argument("--target", type=int, default=300,
                   help="random's codes whose macro-F1 active learning must reach (300)")
    p.add_argument("--finetune-at", default="", help="checkpoints to fine-tune at, e.g. 50,300")
    p.add_argument("--finetune-seeds", default="1")
    p.add_argument("--strategies", default="margin,random",
                   help="suggest strategies to compare (random included); '-nodiv' appended "
                        "turns off the diversity guard, e.g. margin-nodiv")
    p.add_argument("--out", default=None, help="CSV of all curve points")
    p.add_argument("--data", default=str(bench_compare.DATA),
                   help="the shared data folder (default: ../shared/data of the repository)")
    args = p.parse_args(argv)
    bench_compare.DATA = Path(args.data)
    if not bench_compare.DATA.is_dir():
        sys.exit(f"{args.data} is absent; the benchmark needs the shared data")
    seeds = [int(s) for s in args.seeds.split(",")]
    fa = {int(s) for s in args.finetune_at.split(",") if s}
    fs = {int(s) for s in args.finetune_seeds.split(",") if s}
    cache_dir = Path(tempfile.gettempdir()) / "quantformer-bench-suggest"
    cache_dir.mkdir(exist_ok=True)
    strategies = args.strategies.split(",")
    df = pd.concat([run_task(t, seeds, args.batch, args.total, fa, fs, cache_dir, strategies)
                    for t in args.tasks.split(",")], ignore_index=True)
    if args.out:
        df.to_csv(args.out, index=False)
    print(json.dumps(report(df, args.target), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
