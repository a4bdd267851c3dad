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
import re
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
    from quantformer.label.suggest import embed_corpus

    out = []
    for name, frame in (("pool", pool), ("test", test)):
        path = cache_dir / f"{name}-{len(frame)}.parquet"
        if not path.exists():
            frame[["doc_id", "text"]].to_parquet(path)
        out.append(embed_corpus(frame, corpus_path=path, cache_dir=cache_dir, device="cpu"))
    return out


def light_f1(vecs, labels, test_vecs, test_labels, seed) -> float:
    from sklearn.metrics import f1_score

    from quantformer.label.strategies import light_classifier

    if len(set(labels)) < 2:
        return float("nan")
    clf = light_classifier(vecs, np.asarray(labels), seed)
    return float(f1_score(test_labels, clf.predict(test_vecs), average="macro"))


#: package defaults except what --ft-max-length, --ft-epochs and --ft-oversample set
FINETUNE = {"max_length": 512}


def finetune_f1(pool, coded_rows, test, seed, pool_probs=False):
    """(macro-F1 on the test set, seconds) of the default model fine-tuned on the codes;
    with ``pool_probs``, also (its class probabilities for every pool document, its labels),
    which a ``-ft`` strategy chooses the next codes by (else None)."""
    from sklearn.metrics import f1_score

    from quantformer.train.finetune import finetune

    t0 = time.time()
    train = pool.iloc[coded_rows][["doc_id", "text", "label"]].reset_index(drop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = finetune(train, seed=seed, quiet=True, device="cpu", **FINETUNE)
        pred = clf.predict(test, warn=False)
        probs = ((clf.predict_proba(pool[["doc_id", "text"]], progress=False),
                  list(clf.labels)) if pool_probs else None)
    f1 = float(f1_score(test["label"], pred["predicted"], average="macro"))
    return f1, time.time() - t0, probs


FT_EVERY = 100  # a -ft strategy fine-tunes every FT_EVERY codes (--ft-every)
STRATEGY = re.compile(r"(?:cold(?P<cold>\d+)-)?(?P<name>[a-z_]+?)(?P<nodiv>-nodiv)?"
                      r"(?P<ft>-ft)?(?:@(?P<share>[0-9.]+))?")


def strategy_options(strategy: str) -> tuple[dict, int, bool]:
    """(suggest() arguments, cold-start codes, fine-tuned selection) of a bench strategy name:
    a suggest strategy; ``-nodiv`` appended for no diversity guard; ``@S`` for a random share
    S (``margin@0.2``); ``cold<N>-`` in front: the first N codes are one cold-start batch
    (k-means medoids; a longer diverse phase for a small budget, Hacohen, Dekel & Weinshall
    2022), e.g. ``cold100-margin``; ``-ft``: from ``FT_EVERY`` codes on, the default model is
    fine-tuned every ``FT_EVERY`` codes and the next ``FT_EVERY`` are chosen by its
    probabilities (``suggest(probs=...)``, as ``suggest --model DIR``; the model that will be
    used chooses, Lowell, Lipton & Wallace 2019), e.g. ``margin-ft``."""
    m = STRATEGY.fullmatch(strategy)
    if m is None:
        sys.exit(f"unknown bench strategy {strategy!r}: [cold<N>-]NAME[-nodiv][-ft][@SHARE]")
    return ({"strategy": m["name"], "diversity": not m["nodiv"],
             "random_share": float(m["share"] or 0)}, int(m["cold"] or 0), bool(m["ft"]))


def curve(pool, vecs, test, test_vecs, strategy, seed, batch, total):
    """One learning curve of the light classifier: rows (codes, light macro-F1, rarest
    class's codes, the coded pool positions) for a bench strategy name (see
    :func:`strategy_options`)."""
    from quantformer.label.suggest import suggest

    options, cold_until, ft = strategy_options(strategy)
    frame = pool[["doc_id", "text"]].copy()
    coded: list[int] = []
    rows = []
    pos = {d: i for i, d in enumerate(pool["doc_id"])}
    model = None  # (pool probabilities, labels) of the last fine-tuned checkpoint (-ft)
    while len(coded) < total:
        codes = pd.DataFrame({"doc_id": pool["doc_id"].iloc[coded],
                              "label": pool["label"].iloc[coded]})
        n, kw = min(batch, total - len(coded)), dict(options)
        if len(coded) < cold_until:
            n, kw = min(cold_until, total) - len(coded), {"strategy": "cold"}
        elif model is not None:
            n, kw = min(FT_EVERY, total - len(coded)), {**kw, "probs": model[0],
                                                        "prob_labels": model[1]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            picks = suggest(frame, vecs, coded=codes, n=n, seed=seed, **kw)
        coded += [pos[d] for d in picks["doc_id"]]
        labels = pool["label"].iloc[coded]
        row = {"codes": len(coded),
               "light_f1": light_f1(vecs[coded], labels, test_vecs, test["label"], seed),
               "finetuned_f1": float("nan"), "finetune_s": float("nan"),
               "n_minority": int(labels.value_counts().min())
               if labels.nunique() > 1 else 0, "_coded": list(coded)}
        if ft and len(coded) % FT_EVERY == 0:
            row["finetuned_f1"], row["finetune_s"], model = finetune_f1(
                pool, coded, test, seed, pool_probs=len(coded) < total)
            print(f"    {strategy} seed {seed}: {len(coded)} codes, fine-tuned macro-F1 "
                  f"{row['finetuned_f1']:.4f} ({row['finetune_s']:.0f} s)", flush=True)
        rows.append(row)
    return rows


def parse_plan(plan: str, seeds) -> list[tuple[str, int, list[int]]]:
    """Fine-tuning jobs in the order to run them: ``strategy:codes[:seed/seed...]`` items,
    comma-separated (all ``seeds`` when none are named), e.g. ``margin:100,random:300:1/2``."""
    jobs = []
    for item in filter(None, plan.split(",")):
        parts = item.split(":")
        jobs.append((parts[0], int(parts[1]),
                     [int(x) for x in parts[2].split("/")] if len(parts) > 2 else list(seeds)))
    return jobs


def run_finetunes(rows, plan, pool, test, out, t0, fold=0):
    """Fine-tune the default model at the checkpoints of ``plan`` (in its order), writing
    each result into its curve row and ``out`` as soon as it is known."""
    index = {(r["strategy"], r["seed"], r["codes"]): r for r in rows if r["fold"] == fold}
    for strategy, codes, seeds in plan:
        for seed in seeds:
            row = index[(strategy, seed, codes)]
            row["finetuned_f1"], row["finetune_s"], _ = finetune_f1(pool, row["_coded"],
                                                                    test, seed)
            print(f"    {strategy} seed {seed}: {codes} codes, fine-tuned macro-F1 "
                  f"{row['finetuned_f1']:.4f} ({row['finetune_s']:.0f} s; "
                  f"{time.time() - t0:.0f} s in all)", flush=True)
            write_rows(rows, out)


def write_rows(rows, out) -> pd.DataFrame:
    df = pd.DataFrame(rows).drop(columns="_coded")
    if out:
        df.to_csv(out, index=False)
    return df


def codes_to_reach(curve_df: pd.DataFrame, level: float, col: str = "light_f1") -> float:
    """Fewest codes at which a mean curve reaches ``level`` (NaN when it never does)."""
    hit = curve_df.loc[curve_df[col] >= level - 1e-9, "codes"]
    return float(hit.min()) if len(hit) else float("nan")


def cv_splits(pool, vecs, folds: int):
    """(fold, pool, vectors, held-out frame, its vectors) for ``folds``-fold stratified
    cross-validation within the pool (fixed folds), so strategies can be compared without
    the test set."""
    from sklearn.model_selection import StratifiedKFold

    kf = StratifiedKFold(n_splits=folds, shuffle=True, random_state=0)
    for fold, (tr, te) in enumerate(kf.split(pool, pool["label"]), start=1):
        yield (fold, pool.iloc[tr].reset_index(drop=True), vecs[tr],
               pool.iloc[te].reset_index(drop=True), vecs[te])


def shift_auc(name, cache_dir) -> float:
    """How well a logistic regression on the embeddings tells test documents from pool
    documents (5-fold cross-validated ROC AUC; 0.5 = the same distribution)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    pool, test = {"abortion": load_abortion, "toxic": load_toxic}[name]()
    vecs, test_vecs = embed_task(pool, test, cache_dir)
    x, y = np.vstack([vecs, test_vecs]), np.r_[np.zeros(len(vecs)), np.ones(len(test_vecs))]
    clf = LogisticRegression(max_iter=2000, class_weight="balanced")
    auc = cross_val_score(clf, x, y, scoring="roc_auc",
                          cv=StratifiedKFold(5, shuffle=True, random_state=0)).mean()
    shares = {k: f.label.value_counts(normalize=True).round(3).to_dict()
              for k, f in (("pool", pool), ("test", test))}
    print(f"{name}: pool-vs-test ROC AUC {auc:.3f}; label shares {shares}", flush=True)
    return float(auc)


def run_task(name, seeds, batch, total, plan, cache_dir, strategies=("margin", "random"),
             out=None, cv=0, folds=None):
    """All curves of one task (on the test set, or with ``cv`` folds within the pool), then
    the fine-tuning ``plan`` (test set only); with ``out``, the points so far are written
    there after each curve and each fine-tuning (a run stopped early keeps what finished)."""
    pool, test = {"abortion": load_abortion, "toxic": load_toxic}[name]()
    t0 = time.time()
    vecs, test_vecs = embed_task(pool, test, cache_dir)
    print(f"{name}: pool {len(pool)}, test {len(test)}, embedded in {time.time() - t0:.0f} s",
          flush=True)
    splits = list(cv_splits(pool, vecs, cv)) if cv else [(0, pool, vecs, test, test_vecs)]
    splits = [s for s in splits if not folds or s[0] in folds]
    rows = []
    for (fold, p, v, t, tv), seed in ((s, seed) for s in splits for seed in seeds):
        for strategy in strategies:
            rows += [{"task": name, "strategy": strategy, "seed": seed, "fold": fold, **r}
                     for r in curve(p, v, t, tv, strategy, seed, batch, total)]
            write_rows(rows, out)
            print(f"  fold {fold} seed {seed} {strategy}: done ({time.time() - t0:.0f} s)",
                  flush=True)
    for fold, p, _, t, _ in splits if plan else []:
        run_finetunes(rows, plan, p, t, out, t0, fold)
    return write_rows(rows, None)


def main_strategy(mean: pd.DataFrame) -> str:
    """The active-learning strategy the target ratio is computed for: margin when it ran."""
    names = [s for s in mean["strategy"].unique() if s != "random"]
    return "margin" if "margin" in names else names[0]


def ratio_to(mean: pd.DataFrame, target: int, col: str) -> dict:
    """Codes active learning needs to reach random's mean ``col`` at ``target`` codes."""
    rnd = mean[(mean["strategy"] == "random") & (mean["codes"] == target)][col].dropna()
    if rnd.empty:
        return {"random_at_target": float("nan"), "al_codes_needed": float("nan"),
                "ratio": float("nan")}
    level = float(rnd.iloc[0])
    need = codes_to_reach(mean[mean["strategy"] == main_strategy(mean)], level, col)
    return {"random_at_target": level, "al_codes_needed": need, "ratio": need / target}


def finetuned_table(d: pd.DataFrame) -> pd.DataFrame:
    """Fine-tuned macro-F1 per strategy and checkpoint: mean, min, max, seeds."""
    ft = d.dropna(subset=["finetuned_f1"])
    return ft.groupby(["codes", "strategy"])["finetuned_f1"].agg(
        ["mean", "min", "max", "count"]).unstack("strategy").round(4)


def report(df: pd.DataFrame, target: int) -> dict:
    summary = {}
    for task, d in df.groupby("task"):
        mean = d.groupby(["strategy", "codes"])[["light_f1", "finetuned_f1", "n_minority"]] \
            .mean().reset_index()
        table = mean.pivot(index="codes", columns="strategy",
                           values=["light_f1", "n_minority"])
        print(f"\n== {task}: mean over seeds {sorted(d['seed'].unique())}, folds "
              f"{sorted(d['fold'].unique()) if 'fold' in d else [0]} ==")
        for s in set(mean["strategy"]) - {"random"}:
            print(f"{s}: mean light macro-F1 over all rounds, minus random's: "
                  f"{(table[('light_f1', s)] - table[('light_f1', 'random')]).mean():+.4f}")
        print(table.round(4).to_string())
        summary[task] = {"light": ratio_to(mean, target, "light_f1")}
        if d["finetuned_f1"].notna().any():
            print("fine-tuned default model (macro-F1 over seeds):")
            print(finetuned_table(d).to_string())
            summary[task]["finetuned"] = ratio_to(mean, target, "finetuned_f1")
        for kind, r in summary[task].items():
            print(f"{kind}: random's mean macro-F1 at {target} codes {r['random_at_target']:.4f}"
                  f"; active learning reaches it with {r['al_codes_needed']:.0f} codes: ratio "
                  f"{r['ratio']:.2f} (target <= 0.60 on Toxic)")
    return summary


def main(argv=None) -> int:
    global FT_EVERY
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", default="abortion,toxic")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--batch", type=int, default=25, help="documents coded per round (25)")
    p.add_argument("--total", type=int, default=300, help="codes at the end (300)")
    p.add_argument("--target", type=int, default=300,
                   help="random's codes whose macro-F1 active learning must reach (300)")
    p.add_argument("--finetune-at", default="", help="checkpoints to fine-tune at, e.g. 50,300")
    p.add_argument("--finetune-seeds", default="1")
    p.add_argument("--finetune-plan", default="",
                   help="fine-tuning jobs in the order to run them instead of --finetune-at: "
                        "strategy:codes[:seed/seed...] items, e.g. "
                        "margin:100,random:300,margin:50:1 (all --seeds when none are named)")
    p.add_argument("--strategies", default="margin,random",
                   help="suggest strategies to compare (random included); '-nodiv' appended "
                        "turns off the diversity guard, e.g. margin-nodiv")
    p.add_argument("--ft-max-length", type=int, default=512,
                   help="tokens per document when fine-tuning (512, the package default; "
                        "128 suits tweets and short comments)")
    p.add_argument("--ft-every", type=int, default=FT_EVERY,
                   help="a -ft strategy fine-tunes every this many codes and chooses the next "
                        "as many by the fine-tuned model (100)")
    p.add_argument("--ft-epochs", type=int, default=None,
                   help="fine-tuning epochs (default: the package's, 4 for MiniLM)")
    p.add_argument("--ft-oversample", type=float, default=None,
                   help="fine-tune with random oversampling to this minority:majority ratio, "
                        "e.g. 1 (Wankmueller 2022, section 6.4; default: none, the package's)")
    p.add_argument("--cv", type=int, default=0,
                   help="compare on K-fold cross-validation within the pool instead of the "
                        "test set (to choose a strategy without the test set)")
    p.add_argument("--folds", default="",
                   help="with --cv: run only these folds, e.g. 1 (default: all)")
    p.add_argument("--shift", action="store_true",
                   help="only print how distinguishable test and pool documents are (ROC AUC "
                        "of a pool-vs-test classifier on the embeddings) and the label shares")
    p.add_argument("--out", default=None, help="CSV of all curve points")
    p.add_argument("--report", default=None,
                   help="only print the report of these comma-separated --out CSVs (e.g. of "
                        "seeds run in parallel processes)")
    p.add_argument("--data", default=str(bench_compare.DATA),
                   help="the shared data folder (default: ../shared/data of the repository)")
    args = p.parse_args(argv)
    if args.report:
        df = pd.concat([pd.read_csv(f) for f in args.report.split(",")], ignore_index=True)
        # processes that ran other fine-tuning jobs on the same curves: one row per point
        df = df.groupby(["task", "strategy", "seed", "fold", "codes"], as_index=False).first()
        print(json.dumps(report(df, args.target), indent=2))
        return 0
    FT_EVERY = args.ft_every
    FINETUNE.update(max_length=args.ft_max_length,
                    **({"epochs": args.ft_epochs} if args.ft_epochs else {}),
                    **({"oversample": args.ft_oversample} if args.ft_oversample else {}))
    bench_compare.DATA = Path(args.data)
    if not bench_compare.DATA.is_dir():
        sys.exit(f"{args.data} is absent; the benchmark needs the shared data")
    seeds = [int(s) for s in args.seeds.split(",")]
    strategies = args.strategies.split(",")
    fs = [int(s) for s in args.finetune_seeds.split(",") if s]
    plan = parse_plan(args.finetune_plan or ",".join(
        f"{s}:{c}:{'/'.join(map(str, fs))}" for s in strategies
        for c in args.finetune_at.split(",") if c), seeds)
    cache_dir = Path(tempfile.gettempdir()) / "quantformer-bench-suggest"
    cache_dir.mkdir(exist_ok=True)
    if args.shift:
        for t in args.tasks.split(","):
            shift_auc(t, cache_dir)
        return 0
    df = pd.concat([run_task(t, seeds, args.batch, args.total, plan, cache_dir, strategies,
                             args.out if len(args.tasks.split(",")) == 1 else None, args.cv,
                             {int(f) for f in args.folds.split(",") if f})
                    for t in args.tasks.split(",")], ignore_index=True)
    if args.out:
        df.to_csv(args.out, index=False)
    print(json.dumps(report(df, args.target), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
