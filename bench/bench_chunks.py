"""Benchmark of long documents read whole (``--truncation chunks``, issue 34) on HanDeSeT.

HanDeSeT (Abercrombie & Batista-Navarro 2018): 1,251 UK House of Commons debate speeches,
each the five utterances ``utt1``..``utt5`` joined by a space; the label is ``manual speech``
(the speaker's sentiment towards the motion, 0/1, hand-coded). One fixed stratified split
(80 % train, 20 % test, ``random_state`` 0), fine-tuned with the standard recipe and seeds
``--seeds`` (default 1, 2, 3). Configurations, each fine-tuned and predicted the same way:

``head_tail@128``  the baseline: head+tail truncation at ``max_length`` 128;
``chunks@128``     the whole speech in windows of 128 tokens (stride: a quarter), the loss on
                   the mean of each speech's window logits, the same at prediction;
``head_tail@512``  head+tail at 512 (what chunks@128 should come close to at less cost).

Reported per configuration and seed: macro-F1 on all test speeches and on those longer than
128 tokens (with the default tokenizer), fine-tuning seconds and test documents per second
at prediction; then the mean and spread (min-max) over seeds and the ratios against
``head_tail@128`` measured in the same run.

``--explain N`` also explains, with each configuration's first seed, the first ``N`` test
speeches longer than 128 tokens (``quantformer.explain``, adaptive steps): the share of
speeches whose completeness gap is within 5 % (with chunks: the document's, against the mean
of its window logits), the median gap, the mean integration points, the share of words with
an attribution (head+tail leaves the middle of a long speech unseen) and seconds per speech,
with the ratio of seconds against ``head_tail@128``. The machine (CPU model, instruction sets, load at
start and end, threads; the GPU's name with ``--device cuda``) is recorded with the figures.

It imports torch, transformers, numpy, pandas, pyarrow, scikit-learn and quantformer only.

Run (the machine is shared: say so with the figures)::

    PYTHONPATH=python OMP_NUM_THREADS=2 python bench/bench_chunks.py --data-dir ../shared/data \
        --threads 2 --out /tmp/chunks.json
    python bench/bench_chunks.py --device cuda --model DIR --data-dir DATA --out gpu.json
    python bench/bench_chunks.py --smoke --data-dir ../shared/data   # a tiny sample, 1 epoch
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

CONFIGS = (("head_tail@128", "head_tail", 128), ("chunks@128", "chunks", 128),
           ("head_tail@512", "head_tail", 512))
BASELINE = "head_tail@128"


def load() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def machine(device: str, threads: int) -> dict:
    import torch

    from quantformer.models.precision import describe_hardware

    out = describe_hardware()
    out.update({"threads": threads, "load_start": load(), "torch": torch.__version__,
                "device": device})
    if device.startswith("cuda") and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def handeset(data_dir: Path) -> pd.DataFrame:
    """The speeches as a corpus frame: ``doc_id``, ``text`` (utt1..utt5), ``label``."""
    raw = pd.read_csv(data_dir / "handeset" / "HanDeSeT.csv")
    utts = raw[[f"utt{i}" for i in range(1, 6)]].fillna("").astype(str)
    text = utts.apply(lambda r: " ".join(t.strip() for t in r if t.strip()), axis=1)
    return pd.DataFrame({"doc_id": raw["id"].astype(str), "text": text,
                         "label": raw["manual speech"].astype(str)})


def split(frame: pd.DataFrame, smoke: bool, train_n: int | None = None):
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(frame, test_size=0.2, random_state=0,
                                   stratify=frame["label"])
    if train_n and train_n < len(train):  # a stratified subsample of the training speeches
        train, _ = train_test_split(train, train_size=train_n, random_state=0,
                                    stratify=train["label"])
    if smoke:
        train = train.groupby("label", group_keys=False).head(12)
        test = test.groupby("label", group_keys=False).head(6)
    return train.reset_index(drop=True), test.reset_index(drop=True)


def n_tokens(model: str | None, texts) -> np.ndarray:
    from quantformer.models.hub import load_tokenizer
    from quantformer.models.tokenize import count_subwords

    return np.asarray(count_subwords(load_tokenizer(model), list(texts))) + 2


def explain_figures(clf, docs: pd.DataFrame) -> dict:
    """Completeness, coverage and time of explaining ``docs`` with ``clf`` (adaptive steps)."""
    from quantformer.infer.explain import GAP_TOLERANCE, explain

    t = time.perf_counter()
    ex = explain(clf, docs)
    seconds = time.perf_counter() - t
    gap = ex.documents["completeness_gap"].to_numpy()
    return {"n_docs": len(docs), "share_gap_within_5pct": round(float(
                (gap <= GAP_TOLERANCE).mean()), 4),
            "median_gap": round(float(np.median(gap)), 5),
            "mean_steps": round(float(ex.documents["steps"].mean()), 1),
            "share_words_attributed": round(float(ex.words["attribution"].notna().mean()), 4),
            "s_per_doc": round(seconds / len(docs), 2)}


def run_one(train, test, long_mask, *, model, truncation, max_length, seed, epochs, device,
            batch_size, precision="fp32", explain_docs=None) -> dict:
    from sklearn.metrics import f1_score

    from quantformer.train.finetune import finetune

    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = finetune(train, model=model, epochs=epochs, max_length=max_length,
                       truncation=truncation, seed=seed, device=device, quiet=True,
                       precision=precision)
        trained = time.perf_counter() - started
        t = time.perf_counter()
        pred = clf.predict(test, batch_size=batch_size, warn=False)
        seconds = time.perf_counter() - t
        explained = explain_figures(clf, explain_docs) if explain_docs is not None else None
    y, p = test["label"].to_numpy(), pred["predicted"].astype(str).to_numpy()
    return {**({"explain": explained} if explained else {}), "macro_f1": round(float(f1_score(y, p, average="macro")), 4),
            "macro_f1_long": round(float(f1_score(y[long_mask], p[long_mask],
                                                  average="macro")), 4),
            "train_s": round(trained, 1), "predict_docs_per_s": round(len(test) / seconds, 1)}


def summarise(runs: dict) -> dict:
    out = {}
    for name, per_seed in runs.items():
        row = {}
        for key in ("macro_f1", "macro_f1_long", "train_s", "predict_docs_per_s"):
            vals = [r[key] for r in per_seed]
            row[key] = {"mean": round(statistics.mean(vals), 4), "min": min(vals),
                        "max": max(vals)}
        out[name] = row
    base = out[BASELINE]
    for name, row in out.items():
        row["vs_" + BASELINE] = {
            "macro_f1_diff": round(row["macro_f1"]["mean"] - base["macro_f1"]["mean"], 4),
            "macro_f1_long_diff": round(row["macro_f1_long"]["mean"]
                                        - base["macro_f1_long"]["mean"], 4),
            "predict_speed_ratio": round(row["predict_docs_per_s"]["mean"]
                                         / base["predict_docs_per_s"]["mean"], 3)}
        ex, base_ex = runs[name][0].get("explain"), runs[BASELINE][0].get("explain")
        if ex and base_ex:
            row["explain"] = {**ex, "s_per_doc_ratio_vs_" + BASELINE: round(
                ex["s_per_doc"] / base_ex["s_per_doc"], 3)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True,
                    help="folder holding handeset/HanDeSeT.csv")
    ap.add_argument("--model", default=None, help="base model folder (default: bundled)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--epochs", type=int, default=None, help="default: by model size")
    ap.add_argument("--batch-size", type=int, default=64, help="prediction batch size")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "auto"),
                    help="fine-tuning precision (the same for every configuration; prediction in fp32)")
    ap.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    ap.add_argument("--train-n", type=int, default=None,
                    help="fine-tune on a stratified sample of this many training speeches "
                         "(default: all 1,000; the test speeches stay all 251)")
    ap.add_argument("--smoke", action="store_true",
                    help="24 training and 12 test speeches, 1 epoch, seed 1 (a check that it "
                         "runs, not figures)")
    ap.add_argument("--explain", type=int, default=0, metavar="N",
                    help="also explain the first N test speeches longer than 128 tokens with "
                         "each configuration's first seed (completeness, coverage, time)")
    ap.add_argument("--out", default=None, help="JSON file for the figures")
    args = ap.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    seeds = [1] if args.smoke else [int(s) for s in args.seeds.split(",")]
    epochs = 1 if args.smoke else args.epochs
    info = machine(args.device, torch.get_num_threads())
    train, test = split(handeset(args.data_dir), args.smoke, args.train_n)
    long_mask = n_tokens(args.model, test["text"]) > 128
    chosen = [c for c in CONFIGS if c[0] in args.configs.split(",")]
    if BASELINE not in [c[0] for c in chosen]:
        chosen.insert(0, CONFIGS[0])
    runs: dict = {}
    long_docs = test[long_mask].head(args.explain) if args.explain else None
    for name, truncation, max_length in chosen:
        for seed in seeds:
            r = run_one(train, test, long_mask, model=args.model, truncation=truncation,
                        max_length=max_length, seed=seed, epochs=epochs, device=args.device,
                        batch_size=args.batch_size, precision=args.precision,
                        explain_docs=long_docs if seed == seeds[0] else None)
            runs.setdefault(name, []).append({"seed": seed, **r})
            print(f"{name:14s} seed {seed}: {r}", flush=True)
    info["load_end"] = load()
    result = {"bench": "chunks", "data": "HanDeSeT manual speech", "smoke": args.smoke,
              "precision": args.precision,
              "n_train": len(train), "n_test": len(test),
              "n_test_longer_than_128": int(long_mask.sum()), "seeds": seeds,
              "machine": info, "runs": runs, "summary": summarise(runs)}
    print(json.dumps(result["summary"], indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
