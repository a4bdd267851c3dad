"""Dev search for SetFit's defaults at 8-64 codes per class, on data disjoint from the test sets.

Issue 13 asks for SetFit defaults tuned for 8-64 examples per class, chosen without looking
at the test sets. Here each task's *training pool* is split once (stratified, seed 0) into a
dev set (``--dev-size`` documents) and a sampling pool; k documents per class are drawn from
the pool (seeded), a SetFit body is trained on them, and several heads are fitted on the same
body's embeddings, so the head's knob costs no extra training:

* body configurations ``--bodies``: ``frozen`` (no contrastive training: the bundled MiniLM as
  it is, the SetFit paper's "no fine-tuning" ablation) or ``it=5,lr=2e-5,ep=1`` (setfit's
  ``num_iterations``, ``body_learning_rate``, ``num_epochs``; Tunstall et al. 2022 use 20,
  2e-5, 1);
* heads: scikit-learn ``LogisticRegression`` (setfit's default head) with ``C`` in ``--cs``.

Every row (task, k, seed, body, C, dev macro-F1, seconds) is appended to ``--out`` as soon as
it exists, so a run cut short keeps what finished. The test sets are never read.

    OMP_NUM_THREADS=1 PYTHONPATH=python .venv/bin/python bench/devsearch_setfit.py \\
        --data ../shared/data --tasks abortion,toxic --per-class 8 --seeds 1,2 \\
        --bodies frozen,it=5,it=5;lr=1e-4,it=20 --max-length 128 --out dev.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import bench_compare  # noqa: E402
import bench_fewshot  # noqa: E402

BODY_KEYS = {"it": "num_iterations", "lr": "body_learning_rate", "ep": "num_epochs"}
PAPER = {"num_iterations": 20, "body_learning_rate": 2e-5, "num_epochs": 1}


def parse_body(spec: str) -> dict | None:
    """``"it=5;lr=1e-4"`` -> setfit arguments (paper values for the keys left out);
    ``"frozen"`` -> None."""
    if spec == "frozen":
        return None
    out = dict(PAPER)
    for part in spec.split(";"):
        key, value = part.split("=")
        out[BODY_KEYS[key]] = float(value) if key == "lr" else int(value)
    return out


def dev_split(train: pd.DataFrame, dev_size: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(sampling pool, dev set): a stratified split of the training pool, seed 0."""
    from sklearn.model_selection import train_test_split

    pool, dev = train_test_split(train, test_size=dev_size, stratify=train["label"],
                                 random_state=0)
    return pool.reset_index(drop=True), dev.reset_index(drop=True)


def train_body(sample: pd.DataFrame, body: dict | None, seed: int, max_length: int):
    """A SentenceTransformer: the bundled MiniLM, contrastively trained by setfit unless
    ``body`` is None."""
    import logging
    import tempfile

    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments
    from transformers import set_seed

    from quantformer.models.hub import resolve_model

    set_seed(seed)
    logging.getLogger("setfit").setLevel(logging.ERROR)
    net = SetFitModel.from_pretrained(resolve_model(None), device="cpu")
    net.model_body.max_seq_length = max_length
    if body is not None:
        args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="devsearch-"),
                                 batch_size=16, seed=seed, show_progress_bar=False,
                                 report_to="none", save_strategy="no", logging_strategy="no",
                                 max_length=max_length, **body)
        Trainer(model=net, args=args,
                train_dataset=Dataset.from_pandas(sample[["text", "label"]])).train()
    return net.model_body


def head_scores(body, sample, dev, cs, seed) -> dict[float, float]:
    """Dev macro-F1 of a logistic-regression head per C, on the body's embeddings."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    x_train = body.encode(sample["text"].tolist(), batch_size=32)
    x_dev = body.encode(dev["text"].tolist(), batch_size=32)
    out = {}
    for c in cs:
        head = LogisticRegression(C=c, max_iter=1000, random_state=seed)
        head.fit(x_train, sample["label"].astype(str))
        out[c] = float(f1_score(dev["label"].astype(str), head.predict(x_dev), average="macro"))
    return out


def run(args) -> None:
    cs = [float(c) for c in args.cs.split(",")]
    out = Path(args.out)
    for task in args.tasks.split(","):
        train, _test = bench_fewshot.LOADERS[task]()  # the test set is not used
        pool, dev = dev_split(train, args.dev_size)
        for k in [int(x) for x in args.per_class.split(",")]:
            for seed in [int(s) for s in args.seeds.split(",")]:
                sample = bench_fewshot.per_class_sample(pool, k, seed)
                for spec in args.bodies.split(","):
                    t0 = time.time()
                    body = train_body(sample, parse_body(spec), seed, args.max_length)
                    scores = head_scores(body, sample, dev, cs, seed)
                    took = time.time() - t0
                    rows = pd.DataFrame([{"task": task, "per_class": k, "seed": seed,
                                          "body": spec, "C": c, "dev_macro_f1": f,
                                          "seconds": took} for c, f in scores.items()])
                    rows.to_csv(out, mode="a", header=not out.exists(), index=False)
                    best = max(scores, key=scores.get)
                    print(f"{task} k={k} seed={seed} {spec}: dev macro-F1 "
                          + ", ".join(f"C={c:g} {f:.3f}" for c, f in scores.items())
                          + f" (best C={best:g}; {took:.0f} s)", flush=True)


def report(path: str) -> None:
    df = pd.read_csv(path)
    table = df.pivot_table(index=["task", "per_class", "body"], columns="C",
                           values="dev_macro_f1", aggfunc="mean")
    print("mean dev macro-F1 over seeds (columns: head C)")
    print(table.round(3).to_string())
    print("\nmean over tasks and k:")
    print(df.pivot_table(index="body", columns="C", values="dev_macro_f1",
                         aggfunc="mean").round(3).to_string())
    print("\nseconds per body (mean):", df.groupby("body")["seconds"].mean().round(0).to_dict())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(bench_compare.DATA))
    p.add_argument("--tasks", default="abortion,toxic")
    p.add_argument("--per-class", default="8")
    p.add_argument("--seeds", default="1,2")
    p.add_argument("--bodies", default="frozen,it=5,it=5;lr=1e-4,it=20")
    p.add_argument("--cs", default="0.1,1,10,100")
    p.add_argument("--dev-size", type=int, default=200)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--out", default="devsearch_setfit.csv")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    bench_compare.DATA = Path(args.data)
    if not args.report_only:
        if not bench_compare.DATA.is_dir():
            sys.exit(f"{args.data} is absent; the dev search needs the shared data")
        run(args)
    report(args.out)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
