"""Benchmarks of the issue-15 tasks (report in bench/RESULTS.md, section "Regression and
multi-label").

``sotu``       Regression: the year of State of the Union paragraphs (addresses since 1900, from
               the ``sotu`` package). 20 addresses held out (seeded); 800 training paragraphs
               drawn from the other addresses. quantformer ``--task regression`` with the
               issue's recipe (2 epochs, 128 tokens, lr 8e-5) and with the package defaults
               (4 epochs, 512 tokens, lr 8e-5), against a ridge regression (RidgeCV) on binary
               bag-of-words on the same split. Prints Pearson r, RMSE in years and the ratios
               against the ridge baseline measured in the same run.
``jigsaw``     Multi-label: the six Jigsaw labels (shared data), quantformer ``--task
               multilabel`` against a bag-of-words one-vs-rest logistic regression and (with
               ``--binary toxic,obscene,...``) one single-label fine-tuned model per label;
               per-label F1 and macro-F1 (``--n-train``, ``--n-test``). ``--lead-split`` tests
               on the ``toxic_test1000`` comments (the test set of the single-label Toxic model), so the toxic label can be checked
               against the single-label toxic-1000 model (in --models). Results are written
               to ``--out`` after each model, so a run stopped early keeps what finished.

Run e.g. ``OMP_NUM_THREADS=1 PYTHONPATH=python .venv/bin/python bench/bench_tasks.py --only
sotu``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
LABELS = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]


def sotu_split(seed: int = 1, n_train: int = 800, n_held: int = 20):
    from quantformer.io.datasets import sotu

    frame = sotu(since=1900, label="year")
    rng = np.random.default_rng(seed)
    addresses = frame["address"].unique()
    held = set(rng.choice(addresses, size=n_held, replace=False))
    test = frame[frame["address"].isin(held)].reset_index(drop=True)
    pool = frame[~frame["address"].isin(held)]
    train = pool.iloc[np.sort(rng.choice(len(pool), size=n_train, replace=False))]
    return train.reset_index(drop=True), test


def ridge_bow(train, test) -> np.ndarray:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import RidgeCV

    vec = CountVectorizer(binary=True, min_df=2)
    x = vec.fit_transform(train["text"])
    model = RidgeCV(alphas=np.logspace(-2, 3, 11)).fit(x, train["label"].astype(float))
    return model.predict(vec.transform(test["text"]))


def run_sotu(seed: int, which: str = "recipe,defaults") -> dict:
    from quantformer.train.finetune import finetune
    from quantformer.score.metrics import regression_metrics

    train, test = sotu_split(seed)
    truth = test["label"].astype(float)
    out = {"n_train": len(train), "n_test": len(test), "n_test_addresses": 20, "seed": seed}
    out["ridge_bow"] = regression_metrics(truth, ridge_bow(train, test))
    runs = {"recipe (2 epochs, 128 tokens)": {"epochs": 2, "max_length": 128, "lr": 8e-5},
            "defaults (4 epochs, 512 tokens)": {}}
    runs = {k: v for k, v in runs.items() if k.split()[0] in which.split(",")}
    for name, kw in runs.items():
        started = time.process_time()
        clf = finetune(train, task="regression", seed=seed, device="cpu", quiet=True, **kw)
        pred = clf.predict(test)["predicted"]
        out[name] = {**regression_metrics(truth, pred),
                     "cpu_seconds": round(time.process_time() - started, 1)}
        print(name, json.dumps(out[name]), flush=True)
    base = out["ridge_bow"]
    for name in runs:
        m = out[name]
        print(f"{name}: r {m['pearson']:.3f} (ridge {base['pearson']:.3f}, ratio "
              f"{m['pearson'] / base['pearson']:.3f}); RMSE {m['rmse']:.1f} years (ridge "
              f"{base['rmse']:.1f}, ratio {m['rmse'] / base['rmse']:.3f})", flush=True)
    return out


def jigsaw_split(data: Path, seed: int, n_train: int, n_test: int, lead_split: bool):
    """Train and test frames from the shared 5k sample. ``lead_split``: the test set is
    ``toxic_test1000`` (rows 1,001-2,000 of the seed-1 permutation, the split of the
    single-label Toxic model) and training comments come from the other rows, so the toxic label
    can be checked against the single-label toxic-1000 model on the same test comments."""
    raw = pd.read_csv(data / "jigsaw_toxic" / "jigsaw_5k.csv", dtype={"id": str})
    raw = raw.rename(columns={"comment_text": "text", "id": "doc_id"})
    order = np.random.default_rng(seed).permutation(len(raw))
    if lead_split:
        test_rows = order[1000:1000 + n_test]
        train_rows = np.concatenate([order[:1000], order[2000:]])[:n_train]
    else:
        test_rows, train_rows = order[:n_test], order[n_test:n_test + n_train]
    return (raw.iloc[train_rows].reset_index(drop=True),
            raw.iloc[test_rows].reset_index(drop=True))


def binary_f1(train, test, label: str, seed: int, epochs: int, max_length: int) -> dict:
    """One single-label (yes/no) fine-tuned model for ``label``: F1 of the positive class and
    the two-class macro-F1 on the test comments."""
    from sklearn.metrics import f1_score

    from quantformer.train.finetune import finetune

    started = time.process_time()
    frame = train.assign(label=np.where(train[label] == 1, "yes", "no"))
    clf = finetune(frame, seed=seed, device="cpu", quiet=True, epochs=epochs,
                   max_length=max_length)
    pred = (clf.predict(test)["predicted"].astype(str) == "yes").to_numpy().astype(int)
    truth = test[label].to_numpy().astype(int)
    return {"f1": float(f1_score(truth, pred, zero_division=0)),
            "macro_f1_two_class": float(f1_score(truth, pred, average="macro")),
            "cpu_seconds": round(time.process_time() - started, 1)}


def run_jigsaw(seed: int, n_train: int, n_test: int, epochs: int, max_length: int,
               data: Path, tune: bool = False, lead_split: bool = False,
               binary: str = "", out_path: str | None = None) -> dict:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.multiclass import OneVsRestClassifier

    from quantformer.train.finetune import finetune
    from quantformer.score.metrics import multilabel_metrics

    train, test = jigsaw_split(data, seed, n_train, n_test, lead_split)
    labels = [lab for lab in LABELS if 0 < train[lab].sum() < len(train)]
    truth = test[labels].to_numpy()
    vec = CountVectorizer(min_df=2)
    ovr = OneVsRestClassifier(LogisticRegression(max_iter=2000, class_weight="balanced"))
    ovr.fit(vec.fit_transform(train["text"]), train[labels].to_numpy())
    out = {"labels": labels, "n_train": len(train), "n_test": len(test),
           "train_support": {lab: int(train[lab].sum()) for lab in labels},
           "test_support": {lab: int(test[lab].sum()) for lab in labels},
           "bow_one_vs_rest": multilabel_metrics(truth, ovr.predict(vec.transform(test["text"])),
                                                 labels)}
    save = (lambda: Path(out_path).write_text(json.dumps(out, indent=2))) if out_path else (
        lambda: None)
    save()
    started = time.process_time()
    extra = {"valid_fraction": 0.2, "tune_thresholds": True} if tune else {}
    clf = finetune(train, task="multilabel", label_cols=labels, seed=seed, device="cpu",
                   quiet=True, epochs=epochs, max_length=max_length, **extra)
    pred = clf.predict(test)[[f"predicted_{lab}" for lab in labels]].astype(float).to_numpy()
    out["quantformer_multilabel"] = {**multilabel_metrics(truth, pred, labels),
                                     "thresholds": clf.record.get("thresholds"),
                                     "cpu_seconds": round(time.process_time() - started, 1)}
    if "toxic" in labels:
        out["quantformer_multilabel"]["toxic_macro_f1_two_class"] = float(f1_score(
            truth[:, labels.index("toxic")], pred[:, labels.index("toxic")], average="macro"))
    save()
    for name in ("bow_one_vs_rest", "quantformer_multilabel"):
        m = out[name]
        per = ", ".join(f"{lab} {v['f1']:.3f}" for lab, v in m["per_label"].items())
        print(f"{name}: macro-F1 {m['macro_f1']:.3f}, micro-F1 {m['micro_f1']:.3f} ({per})",
              flush=True)
    out["binary_per_label"] = {}
    for lab in [x for x in binary.split(",") if x]:
        out["binary_per_label"][lab] = binary_f1(train, test, lab, seed, epochs, max_length)
        save()
        print(f"binary {lab}: {json.dumps(out['binary_per_label'][lab])}", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--only", choices=["sotu", "jigsaw"], required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--n-train", type=int, default=1000)
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--sotu-runs", default="recipe,defaults",
                   help="which quantformer runs of the sotu part: recipe, defaults or both")
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data"),
                   help="the shared data folder (default ../shared/data)")
    p.add_argument("--tune-thresholds", action="store_true",
                   help="jigsaw: hold out 20 %% of the training sample and tune thresholds")
    p.add_argument("--lead-split", action="store_true",
                   help="jigsaw: test on the toxic_test1000 comments (see jigsaw_split)")
    p.add_argument("--binary", default="",
                   help="jigsaw: comma-separated labels that also get one binary model each")
    p.add_argument("--out", default=None, help="write the numbers as JSON here")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    result = (run_sotu(args.seed, args.sotu_runs) if args.only == "sotu"
              else run_jigsaw(args.seed, args.n_train, args.n_test, args.epochs,
                              args.max_length, Path(args.data), args.tune_thresholds,
                              args.lead_split, args.binary, args.out))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
