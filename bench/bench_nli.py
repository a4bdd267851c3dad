"""What ``finetune --method nli`` costs against standard fine-tuning (issue 13, Laurer et al. 2023).

No NLI-pretrained model is available offline here, so this measures cost, not accuracy: the
same network (the bundled all-MiniLM-L6-v2 with a new, random 3-way NLI head: contradiction,
neutral, entailment) is trained on the same stratified Abortion sample (TweetEval, 3 classes)
by the standard method and by ``--method nli`` with ``balanced`` and ``all`` pairs, one epoch
each, and then predicts the test set. Printed: training-loop and prediction seconds and their
ratios to the standard method measured in the same run (repeats alternate the order). The
macro-F1 column is printed for completeness only: with a random NLI head it says nothing about
Laurer et al.'s method, which needs a model pretrained on NLI data.

    OMP_NUM_THREADS=1 PYTHONPATH=python .venv/bin/python bench/bench_nli.py \\
        --per-class 16 --test 280 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import bench_compare  # noqa: E402

NLI_LABELS = {0: "contradiction", 1: "neutral", 2: "entailment"}
RUNS = {"standard": {}, "nli balanced": {"method": "nli", "nli_pairs": "balanced"},
        "nli all": {"method": "nli", "nli_pairs": "all"}}


def minilm_with_nli_head(folder: str) -> str:
    """The bundled MiniLM saved with a random 3-way NLI head (an NLI config, untrained head)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from quantformer.io.modeldir import hf_quiet
    from quantformer.models.hub import default_model_path

    path = default_model_path()
    with hf_quiet():
        net = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=3, id2label=NLI_LABELS,
            label2id={v: k for k, v in NLI_LABELS.items()})
    net.save_pretrained(folder)
    AutoTokenizer.from_pretrained(path).save_pretrained(folder)
    return folder


def one_run(name: str, model: str, train, test, args, seed: int) -> dict:
    from quantformer import finetune
    from quantformer.score.evaluate import evaluate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = finetune(train, model=model, epochs=1, max_length=args.max_length, seed=seed,
                       quiet=True, device="cpu", **RUNS[name])
        start = time.perf_counter()
        pred = clf.predict(test, batch_size=64)
        predict_s = time.perf_counter() - start
    f1 = evaluate(test["label"], pred["predicted"], labels=clf.labels).macro_f1
    return {"method": name, "seed": seed, "train_units": clf.record.get("n_pairs", len(train)),
            "train_loop_s": clf.record["train_loop_seconds"], "predict_s": predict_s,
            "macro_f1": f1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get(
        "QUANTFORMER_SHARED_DATA",
        str(Path(__file__).resolve().parents[2] / "shared" / "data")))
    ap.add_argument("--per-class", type=int, default=16)
    ap.add_argument("--test", type=int, default=280)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    print("load at start:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    bench_compare.DATA = Path(args.data)
    train_all, test = bench_compare.load_abortion()
    train = pd.concat(g.sample(n=min(args.per_class, len(g)), random_state=1)
                      for _, g in train_all.groupby("label")).reset_index(drop=True)
    test = test.sample(n=min(args.test, len(test)), random_state=1).reset_index(drop=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = minilm_with_nli_head(tmp)
        for r in range(args.repeats):
            order = list(RUNS) if r % 2 == 0 else list(reversed(RUNS))
            rows += [one_run(name, model, train, test, args, seed=r + 1) for name in order]
    res = pd.DataFrame(rows).groupby("method", sort=False).mean(numeric_only=True)
    base = res.loc["standard"]
    res["train_ratio"] = res["train_loop_s"] / base["train_loop_s"]
    res["predict_ratio"] = res["predict_s"] / base["predict_s"]
    print(f"Abortion, {len(train)} training documents ({args.per_class} per class), "
          f"{len(test)} test documents, max_length {args.max_length}, 1 epoch, "
          f"mean of {args.repeats} repeat(s)")
    print(res.drop(columns="seed").round(3).to_string())
    print("load at end:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
