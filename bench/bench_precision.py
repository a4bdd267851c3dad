"""Benchmark of numeric precision chosen for the processor (issue 37): bf16 against fp32 and
against Hugging Face's ``pipeline``, each figure also as a fraction of the machine's measured
dense-matmul peak.

Parts (``--parts``, CPU mode, default ``predict,margin,emulated``):

``predict``   the machine (CPU model, instruction sets, load average at start and end, threads)
              and its dense-matmul peak (2048 x 2048, fp32 and bf16, GFLOP/s); then, per task,
              prediction end to end (``predict_file``: read a Parquet file, tokenise, forward
              passes, write a Parquet file; the model loaded beforehand) with ``--precision``
              fp32, auto and bf16, and ``pipeline("text-classification")`` with batch size 64
              (the baseline), plus the bare forward pass on pre-tokenised batches (fp32, bf16):
              docs/s, ratio to the pipeline, top-1 agreement with fp32, rows rechecked in fp32,
              and achieved GFLOP/s as a fraction of the peak of the same precision.
              Tasks: the 280 TweetEval Abortion test tweets (the bundled all-MiniLM-L6-v2
              fine-tuned on the 653 training tweets, 4 epochs) and 4,000 Jigsaw Toxic comments
              at 256 tokens (the same model fine-tuned on the other 1,000 comments at 256
              tokens). The fine-tuned models are cached in ``--cache``.
``margin``    pure bf16 against fp32 on the 653 Abortion *training* tweets: the largest change
              of a probability, the labels changed and their bf16 top-two margins (the
              evidence for the recheck margin, chosen on training data).
``emulated``  the same peak and bare forward pass in a child process limited to AVX2
              (``ONEDNN_MAX_CPU_ISA=AVX2``, ``ATEN_CPU_CAPABILITY=avx2``): what bf16 costs on a
              CPU that must emulate it.
``int8``      torch with ``--precision auto`` against ONNX Runtime fp32 and int8 (its default
              settings, with the fp32 recheck), end to end, on Abortion and ``--int8-n``
              Jigsaw comments: where int8 beats bf16.
``overlap``   12,000 Jigsaw comments (the 4,000 three times: 3 chunks) streamed with and
              without reading and tokenising the next chunk while the model runs, against the
              bare forward pass, ``--precision auto``.
``train``     fine-tuning 4 epochs on Abortion, fp32 against bf16 autocast, seeds 1-3: whole
              ``finetune`` time and macro-F1 on the test tweets.

``--device cuda`` (for a GPU machine without the project's other dependencies and without a
model hub: it imports torch, transformers, numpy, pandas, pyarrow, scikit-learn and quantformer's
own modules only): the GPU's matmul peak in fp32, bf16 and fp16, and prediction of both tasks
with the model given by ``--model`` (a fine-tuned model directory; ``--export-half DIR`` in CPU
mode writes the Abortion model with fp16 weights, small enough to carry) in fp32, bf16 and fp16
against the pipeline on the GPU. Figures are written to ``--out`` as JSON.

Run (the machine is shared: 2 threads)::

    PYTHONPATH=python OMP_NUM_THREADS=2 python bench/bench_precision.py --threads 2 \
        --data-dir ../shared/data --out /tmp/precision.json
    python bench/bench_precision.py --device cuda --model DIR --data-dir DATA --out gpu.json

Method notes. Each run records the load average and measures the dense-matmul peak (2048 x
2048, best of 5) in fp32 and bf16 in the same process; speeds are also given as achieved
GFLOP/s (2 x weights outside the embeddings x tokens, plus attention's 4 x layers x tokens² x
hidden, at each document's own length) and as a fraction of the peak of its precision. "End to
end" is ``predict_file`` on a loaded model (read Parquet, tokenise, forward, write Parquet); the
pipeline is ``pipeline("text-classification")`` with ``batch_size=64``. The bf16 recheck margin
(``--parts margin``) was chosen on the 653 Abortion training tweets: pure bf16 moved no
probability by more than 0.0057 and changed no label, so int8's margin 0.05 keeps a 4x safety
factor. For the GPU run, write the model with fp16 weights (44 MB instead of 87 MB) and carry
it with the data::

    python bench/bench_precision.py --data-dir DATA --parts none --export-half runs/gpu/model
    cp -r DATA/tweeteval_abortion DATA/jigsaw_toxic runs/gpu/data/
    PYTHONPATH=python python bench/bench_precision.py --device cuda --model runs/gpu/model \
        --data-dir runs/gpu/data --out $OUT/gpu.json

int8 settings revisited on this VNNI CPU (``bench_onnx.py --only int8 --tasks abortion
--rounds 2``, 2026-12-04 12:37 UTC, load 1.1-1.3, commit 3094a88; speed relative to fused ONNX
fp32 at 200.1 docs/s, agreement with it, macro-F1 with fp32 at 0.6199, no recheck): ORT defaults
1.39x, 0.971, 0.6038; MatMul per channel 1.56x, 0.964, 0.6151; plus reduce_range 1.55x, 0.975,
0.6148; the same with the first layer fp32 (chosen, ``INT8_SETTINGS``) 1.38x, 0.982, 0.6123;
chosen without reduce_range 1.44x, 0.971, 0.6126; unfused fp32 0.91x, 1.000, 0.6199; chosen
settings on the unfused graph 1.50x, 0.979, 0.6158. ``reduce_range`` costs nothing measurable
with VNNI and dropping it changes more labels, so the settings stay.

Training, per seed (``--parts train``, 4 epochs on the 653 Abortion training tweets, macro-F1 on
the 280 test tweets; 2026-12-04 12:37-12:43 UTC, load 1.8-2.1, commit 3094a88): seed 1 fp32
58.6 s / bf16 33.1 s (1.77x), macro-F1 0.6199 / 0.6171; seed 2 51.8 / 38.2 s (1.36x), 0.6098 /
0.6098; seed 3 68.7 / 41.3 s (1.66x), 0.6102 / 0.6102.

Prediction, further rows of the same run (commit c3b821b): ``--precision bf16`` without ``auto``'s
choice 306.8 tweets/s (2.02x the pipeline) and 135.1 Jigsaw docs/s (7.19x); the bare fp32
forward pass 203.2 and 70.0 docs/s (0.86 and 0.76 of the fp32 peak).

The ``--device cuda`` mode imports torch, transformers, numpy, pandas, pyarrow, scikit-learn and
quantformer only; it measures the GPU's matmul peak (8192 x 8192) in fp32, bf16 and fp16 and
predicts both tasks in fp32, ``auto``, bf16 and fp16 (autocast, fp32 recheck) against the
pipeline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

# ------------------------------------------------------------------------------------------
# the machine


def load() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def machine(threads: int) -> dict:
    import torch

    from quantformer.models.precision import describe_hardware

    out = describe_hardware()
    out.update({"threads": threads, "load_start": load(), "torch": torch.__version__})
    return out


def matmul_peak(device: str, dtypes=("fp32", "bf16"), n: int = 2048, reps: int = 5) -> dict:
    """Dense matmul GFLOP/s (n x n by n x n, the best of ``reps`` timed products)."""
    import torch

    names = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    out = {}
    for name in dtypes:
        a = torch.randn(n, n, device=device).to(names[name])
        b = torch.randn(n, n, device=device).to(names[name])
        best = float("inf")
        for _ in range(reps + 1):
            if device != "cpu":
                torch.cuda.synchronize()
            t = time.perf_counter()
            a @ b
            if device != "cpu":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t)
        out[name] = round(2 * n ** 3 / best / 1e9, 1)
    return out


# ------------------------------------------------------------------------------------------
# data and models


def abortion(data: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the 653 training tweets, the 280 test tweets) of TweetEval Abortion."""
    d = data / "tweeteval_abortion"
    names = dict(line.split(maxsplit=1) for line in
                 (d / "mapping.txt").read_text().splitlines() if line.strip())

    def part(split):
        labels = [x.strip() for x in (d / f"{split}_labels.txt").read_text().split("\n")
                  if x.strip()]
        texts = (d / f"{split}_text.txt").read_text(encoding="utf-8").split("\n")[:len(labels)]
        return pd.DataFrame({"doc_id": [f"{split}{i + 1}" for i in range(len(texts))],
                             "text": texts, "label": [names[x].strip() for x in labels]})

    return pd.concat([part("train"), part("val")], ignore_index=True), part("test")


def jigsaw(data: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(1,000 training comments, 4,000 comments to predict) of the Jigsaw 5k sample."""
    from sklearn.model_selection import train_test_split

    f = pd.read_csv(data / "jigsaw_toxic" / "jigsaw_5k.csv")
    f = pd.DataFrame({"doc_id": f["id"].astype(str), "text": f["comment_text"].astype(str),
                      "label": np.where(f["toxic"] == 1, "toxic", "not")})
    tr, te = train_test_split(f, test_size=4000, stratify=f["label"], random_state=1)
    return tr.reset_index(drop=True), te.reset_index(drop=True)


def fine_tuned(cache: Path, name: str, train: pd.DataFrame, **kw) -> Path:
    """The bundled default fine-tuned on ``train`` (fp32, seed 1), cached under ``cache``."""
    path = cache / name
    if not (path / "quantformer.json").exists():
        from quantformer.train.finetune import finetune

        t = time.perf_counter()
        clf = finetune(train, seed=1, quiet=True, device="cpu", precision="fp32", **kw)
        clf.save(path, overwrite=True)
        print(f"fine-tuned {name} in {time.perf_counter() - t:.0f} s", flush=True)
    return path


# ------------------------------------------------------------------------------------------
# prediction


def load_classifier(model: Path, device: str, precision: str):
    """A Classifier in ``precision`` (fp16: autocast to float16, CUDA only, for the GPU)."""
    from quantformer.infer.classifier import Classifier
    from quantformer.models.precision import Precision, TorchPrecision

    clf = Classifier.from_dir(model, device=device,
                              precision="fp32" if precision == "fp16" else precision)
    clf.model.float()  # weights stored in fp16 (--export-half) run as fp32 masters
    if precision == "fp16":
        clf.precision = TorchPrecision(Precision("fp16", "fp16", "fp16 autocast"))
    return clf


def forward_flops(clf, texts: list) -> float:
    """FLOPs of the forward passes over ``texts`` at their own token lengths: 2 x weights
    outside the embeddings x tokens, plus attention's 4 x layers x tokens^2 x hidden."""
    from quantformer.models.tokenize import encode

    cfg = clf.model.config
    enc = encode(clf.tokenizer, texts, max_length=clf.max_length, truncation=clf.truncation)
    lengths = np.array([len(x) for x in enc.input_ids], dtype=float)
    dense = sum(p.numel() for n, p in clf.model.named_parameters() if "embeddings" not in n)
    return float((2 * dense * lengths + 4 * cfg.num_hidden_layers * lengths ** 2
                  * cfg.hidden_size).sum())


def pipeline_runner(model: Path, device: str, max_length: int):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

    net = AutoModelForSequenceClassification.from_pretrained(str(model)).float()
    tok = AutoTokenizer.from_pretrained(str(model))
    pipe = pipeline("text-classification", model=net, tokenizer=tok,
                    device=0 if device.startswith("cuda") else -1)
    labels = json.loads((model / "quantformer.json").read_text())["labels"]

    def run(texts):
        out = pipe(texts, batch_size=64, truncation=True, max_length=max_length)
        return [labels[int(r["label"].split("_")[-1])] if r["label"].startswith("LABEL_")
                else r["label"] for r in out]

    return run


def end_to_end(clf, src: Path, dst: Path):
    """predict_file on a loaded classifier: the output frame."""
    from quantformer.infer.predict import predict_file

    predict_file(clf, src, dst, quiet=True, batch_size=64)
    return pd.read_parquet(dst)


def bare_forward(clf, texts: list, cast: bool = True):
    """The forward passes alone, on ids tokenised beforehand (the bound of end to end)."""
    from quantformer.models.batching import run_batches
    from quantformer.models.tokenize import encode

    enc = encode(clf.tokenizer, texts, max_length=clf.max_length, truncation=clf.truncation)
    ids = enc.input_ids
    types = enc.token_type_ids or None

    def run():
        with clf.precision.context(clf.device, cast):
            return run_batches(clf.model, ids, types, fn=lambda m, b: m(**b).logits.float(),
                               batch_size=64, device=clf.device,
                               pad_id=clf.tokenizer.pad_token_id or 0)
    return run


def timed(fn, sync=None) -> tuple[object, float]:
    t = time.perf_counter()
    out = fn()
    if sync:
        sync()
    return out, time.perf_counter() - t


def predict_task(name: str, model: Path, frame: pd.DataFrame, device: str, precisions: list,
                 peak: dict, tmp: Path, rounds: int) -> dict:
    """One task's prediction figures (see the module docstring)."""
    sync = None
    if device.startswith("cuda"):
        import torch

        sync = torch.cuda.synchronize
    src = tmp / f"{name}.parquet"
    frame.drop(columns="label").to_parquet(src)
    texts = frame["text"].tolist()
    clfs = {p: load_classifier(model, device, p) for p in precisions}
    flops = forward_flops(clfs["fp32"], texts)
    pipe = pipeline_runner(model, device, clfs["fp32"].max_length)
    jobs = {"pipeline (batch 64)": lambda: pipe(texts)}
    for p, clf in clfs.items():
        jobs[f"quantformer {p}"] = (lambda c=clf, p=p:
                                    end_to_end(c, src, tmp / f"{name}-{p}.parquet"))
        if p != "auto":
            jobs[f"bare forward {p}"] = bare_forward(clf, texts)
    times = {k: [] for k in jobs}
    outs = {}
    for _ in range(rounds):  # interleaved rounds: a change of load hits every runner alike
        for k, fn in jobs.items():
            out, s = timed(fn, sync)
            outs.setdefault(k, out)
            times[k].append(s)
    return summarise(name, frame, clfs, outs, times, flops, peak)


def summarise(name, frame, clfs, outs, times, flops, peak) -> dict:
    n = len(frame)
    ref = outs["quantformer fp32"]["predicted"].to_numpy()
    base = n / statistics.median(times["pipeline (batch 64)"])
    rows = []
    for k, ts in times.items():
        rate = n / statistics.median(ts)
        row = {"runner": k, "docs_per_s": round(rate, 1), "x_pipeline": round(rate / base, 2)}
        prec = k.split()[-1] if k.startswith(("quantformer", "bare")) else "fp32"
        if prec == "auto":
            prec = clfs["auto"].precision.name
        if prec in peak:
            row["gflops"] = round(flops / n * rate / 1e9, 1)
            row["frac_peak"] = round(row["gflops"] / peak[prec], 3)
            row["peak_used"] = prec
        out = outs[k]
        if isinstance(out, pd.DataFrame):
            row["agree_fp32"] = round(float((out["predicted"].to_numpy() == ref).mean()), 4)
            row["rechecked"] = int((out["backend"] == "torch fp32 recheck").sum())
            row["backend"] = sorted(set(out["backend"]))
        elif isinstance(out, list):
            row["agree_fp32"] = round(float((np.asarray(out) == ref).mean()), 4)
        rows.append(row)
    bf = outs.get("bare forward bf16")
    if bf is not None:  # pure bf16 (no recheck) against fp32, on the logits
        agree = (bf.argmax(1) == outs["bare forward fp32"].argmax(1)).mean()
        rows.append({"runner": "pure bf16 (no recheck) top-1 agreement with fp32",
                     "agree_fp32": round(float(agree), 4)})
    for r in rows:
        print(f"  {name:<9} {r['runner']:<22} " + "  ".join(
            f"{k} {v}" for k, v in r.items() if k != "runner"), flush=True)
    macro = _macro_f1(frame["label"], outs["quantformer fp32"]["predicted"])
    return {"task": name, "n": n, "flops_per_doc": round(flops / n), "rows": rows,
            "macro_f1_fp32": macro, "auto": clfs.get("auto") and str(clfs["auto"].precision.chosen)}


def _macro_f1(y, p) -> float:
    from sklearn.metrics import f1_score

    return round(float(f1_score(y, p, average="macro")), 4)


# ------------------------------------------------------------------------------------------
# the parts


def part_predict(args, data: Path, cache: Path, tmp: Path, peak: dict) -> list:
    atrain, atest = abortion(data)
    jtrain, jtest = jigsaw(data)
    amodel = fine_tuned(cache, "abortion", atrain, epochs=4)
    jmodel = fine_tuned(cache, "jigsaw256", jtrain, epochs=2, max_length=256)
    out = []
    for name, model, frame in (("abortion", amodel, atest), ("jigsaw", jmodel, jtest)):
        if name in args.tasks:
            out.append(predict_task(name, model, frame, "cpu", ["fp32", "auto", "bf16"],
                                    peak, tmp, args.rounds))
    return out


def part_emulated(args) -> dict:
    """The peak and Abortion's bare forward pass, fp32 and bf16, limited to AVX2."""
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2")
    cmd = [sys.executable, __file__, "--child-emulated", "--data-dir", args.data_dir,
           "--cache", args.cache, "--threads", str(args.threads)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def child_emulated(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    peak = matmul_peak("cpu")
    _, test = abortion(Path(args.data_dir))
    model = Path(args.cache) / "abortion"
    rates = {}
    for p in ("fp32", "bf16"):
        with __import__("warnings").catch_warnings():
            __import__("warnings").simplefilter("ignore")
            clf = load_classifier(model, "cpu", p)
        run = bare_forward(clf, test["text"].tolist())
        run()
        rates[p] = round(len(test) / min(timed(run)[1] for _ in range(args.rounds)), 1)
    print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "peak": peak,
                      "abortion_bare_forward_docs_per_s": rates}))


def part_margin(args, data: Path, cache: Path) -> dict:
    """Pure bf16 (no recheck) against fp32 on the 653 Abortion *training* tweets: how far
    probabilities move, which labels change and the bf16 margins of those documents (the
    evidence for the recheck margin, chosen on training data as int8's was)."""
    train, _ = abortion(data)
    model = fine_tuned(cache, "abortion", train, epochs=4)
    texts = train["text"].tolist()
    p32 = load_classifier(model, "cpu", "fp32")._proba(texts, 64, False)[0]
    bf = load_classifier(model, "cpu", "bf16")
    p16 = bf._proba(texts, 64, False)[0]
    changed = p16.argmax(1) != p32.argmax(1)
    top2 = np.sort(p16, axis=1)[:, -2:]
    margins = top2[:, 1] - top2[:, 0]
    out = {"n": len(texts), "max_abs_prob_diff": round(float(np.abs(p16 - p32).max()), 4),
           "p99_abs_prob_diff": round(float(np.quantile(np.abs(p16 - p32).max(1), 0.99)), 4),
           "labels_changed": int(changed.sum()),
           "bf16_margins_of_changed": [round(float(m), 4) for m in margins[changed]],
           "share_under_0.05": round(float((margins < 0.05).mean()), 4),
           "share_under_0.02": round(float((margins < 0.02).mean()), 4)}
    print("  margin evidence (training tweets):", out, flush=True)
    return out


def part_explain(args, data: Path, cache: Path) -> dict:
    """Integrated Gradients (``explain``, adaptive steps) in fp32 and under bf16 autocast on
    ``--explain-n`` Abortion test tweets, ``--rounds`` interleaved rounds: time (best round),
    completeness gaps, the explained logit's change and the agreement of word attributions
    (Spearman per document and target, against fp32; the top word)."""
    from scipy.stats import spearmanr

    from quantformer.audit.explain import explain

    train, test = abortion(data)
    model = fine_tuned(cache, "abortion", train, epochs=4)
    frame = test.head(args.explain_n)
    res, words, times = {}, {}, {"fp32": [], "bf16": []}
    clf = load_classifier(model, "cpu", "fp32")
    explain(clf, frame.head(4), precision="fp32")  # warm-up
    # interleaved rounds (--rounds): the machine's load moves; the best round of each is kept
    for name in ("fp32", "bf16") * args.rounds:
        t = time.perf_counter()
        ex = explain(clf, frame, precision=name)
        times[name].append(round(time.perf_counter() - t, 1))
        res[name] = {"seconds": min(times[name]), "rounds": times[name],
                     "gap_median": round(float(ex.documents["completeness_gap"].median()), 4),
                     "gap_over_5pct": round(float((ex.documents["completeness_gap"]
                                                   > 0.05).mean()), 4),
                     "mean_steps": round(float(ex.documents["steps"].mean()), 1)}
        words[name] = ex
    a, b = words["fp32"], words["bf16"]
    same = a.documents["target"].to_numpy() == b.documents["target"].to_numpy()
    rhos, top = [], []
    for doc in a.documents.loc[same, "doc_id"]:
        wa = a.words[a.words["doc_id"] == doc]["attribution"].to_numpy()
        wb = b.words[b.words["doc_id"] == doc]["attribution"].to_numpy()
        ok = ~(np.isnan(wa) | np.isnan(wb))
        if ok.sum() >= 3:
            rhos.append(spearmanr(wa[ok], wb[ok])[0])
        top.append(int(np.nanargmax(np.abs(wa)) == np.nanargmax(np.abs(wb))))
    dl = np.abs(a.documents["logit"].to_numpy() - b.documents["logit"].to_numpy())
    out = {"n": len(frame), **{f"{k}_{m}": v for k, r in res.items() for m, v in r.items()},
           "target_changed": int((~same).sum()),
           "spearman_median": round(float(np.median(rhos)), 4),
           "spearman_p10": round(float(np.quantile(rhos, 0.1)), 4),
           "spearman_min": round(float(np.min(rhos)), 4),
           "top_word_same": round(float(np.mean(top)), 4),
           "logit_abs_diff_max": round(float(dl.max()), 4)}
    print("  explain fp32 vs bf16:", out, flush=True)
    return out


def part_int8(args, data: Path, cache: Path, tmp: Path) -> list:
    """torch bf16 (``auto`` here) against ONNX Runtime fp32 and int8 (the default settings,
    with the fp32 recheck of near ties), end to end, interleaved rounds; agreement with torch
    fp32. The models are copied to ``tmp`` so the exports never touch the cache."""
    import shutil

    from quantformer.infer.classifier import Classifier

    atrain, atest = abortion(data)
    jtrain, jtest = jigsaw(data)
    rows = []
    for name, folder, frame in (("abortion", "abortion", atest),
                                ("jigsaw", "jigsaw256", jtest.head(args.int8_n))):
        model = tmp / folder
        shutil.copytree(cache / folder, model, dirs_exist_ok=True)
        src = tmp / f"{name}.parquet"
        frame.drop(columns="label").to_parquet(src)
        clfs = {"torch fp32": load_classifier(model, "cpu", "fp32"),
                "torch auto": load_classifier(model, "cpu", "auto"),
                "onnx fp32": Classifier.from_dir(model, backend="onnx"),
                "onnx int8": Classifier.from_dir(model, backend="onnx", quantize="int8")}
        times = {k: [] for k in clfs}
        outs = {}
        for _ in range(args.rounds):
            for k, clf in clfs.items():
                out, secs = timed(lambda c=clf, k=k: end_to_end(c, src, tmp / f"{name}-{k}.pq"))
                outs.setdefault(k, out)
                times[k].append(secs)
        ref = outs["torch fp32"]["predicted"].to_numpy()
        base = len(frame) / statistics.median(times["torch auto"])
        for k, ts in times.items():
            rate = len(frame) / statistics.median(ts)
            rows.append({"task": name, "n": len(frame), "runner": k,
                         "docs_per_s": round(rate, 1), "x_torch_auto": round(rate / base, 2),
                         "agree_fp32": round(float((outs[k]["predicted"].to_numpy()
                                                    == ref).mean()), 4),
                         "backend": sorted(set(outs[k]["backend"]))})
            print(f"  int8 {rows[-1]}", flush=True)
    return rows


def sequential_file(clf, src: Path, dst: Path) -> int:
    """The streamed prediction without the tokenise-ahead thread (read, tokenise, forward,
    write, one chunk after another): the baseline of part ``overlap``."""
    from quantformer.infer.classifier import CHUNK_ROWS
    from quantformer.io.frames import FrameWriter, iter_frames

    n = 0
    with FrameWriter(dst) as writer:
        for chunk in iter_frames(src, chunk_rows=CHUNK_ROWS):
            probs, missing, again = clf.scored(chunk["text"].tolist(), 64, False, {})
            writer.write(clf.output_frame(chunk, probs, missing, False, again))
            n += len(chunk)
    return n


def part_overlap(args, data: Path, cache: Path, tmp: Path) -> list:
    """Streamed prediction of the 4,000 Jigsaw comments three times over (12,000 documents,
    3 chunks) with and without reading and tokenising the next chunk ahead, against the bare
    forward pass, in ``--precision auto``; interleaved rounds."""
    _, test = jigsaw(data)
    frame = pd.concat([test.assign(doc_id=test["doc_id"] + f"-{i}") for i in range(3)],
                      ignore_index=True)
    src = tmp / "jigsaw12k.parquet"
    frame.drop(columns="label").to_parquet(src)
    clf = load_classifier(cache / "jigsaw256", "cpu", "auto")
    jobs = {"sequential (before)": lambda: sequential_file(clf, src, tmp / "seq.parquet"),
            "tokenise ahead (predict)": lambda: end_to_end(clf, src, tmp / "ahead.parquet"),
            "bare forward": bare_forward(clf, frame["text"].tolist())}
    times = {k: [] for k in jobs}
    for _ in range(args.rounds):
        for k, fn in jobs.items():
            times[k].append(timed(fn)[1])
    bare = len(frame) / statistics.median(times["bare forward"])
    rows = [{"runner": k, "docs_per_s": round(len(frame) / statistics.median(ts), 1),
             "of_bare_forward": round(len(frame) / statistics.median(ts) / bare, 3)}
            for k, ts in times.items()]
    for r in rows:
        print(f"  overlap {r}", flush=True)
    return rows


def part_train(args, data: Path) -> list:
    from quantformer.train.finetune import finetune

    train, test = abortion(data)
    rows = []
    for seed in (1, 2, 3):
        for prec in ("fp32", "bf16"):
            t = time.perf_counter()
            clf = finetune(train, seed=seed, quiet=True, device="cpu", precision=prec, epochs=4)
            secs = time.perf_counter() - t
            pred = clf.predict(test)
            rows.append({"seed": seed, "precision": prec, "seconds": round(secs, 1),
                         "macro_f1": _macro_f1(test["label"], pred["predicted"]),
                         "load": load()})
            print(f"  train seed {seed} {prec}: {rows[-1]}", flush=True)
    return rows


def export_half(cache: Path, out: Path) -> None:
    """The cached Abortion model with fp16 weights (to carry to a GPU machine)."""
    import shutil

    from transformers import AutoModelForSequenceClassification

    src = cache / "abortion"
    shutil.copytree(src, out, dirs_exist_ok=True)
    net = AutoModelForSequenceClassification.from_pretrained(str(src)).half()
    net.save_pretrained(str(out))
    print(f"wrote {out}")


def run_cuda(args) -> dict:
    import torch

    data = Path(args.data_dir)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "peak": matmul_peak("cuda", ("fp32", "bf16", "fp16"), n=8192)}
    print(res, flush=True)
    _, atest = abortion(data)
    _, jtest = jigsaw(data)
    with tempfile.TemporaryDirectory() as tmp:
        res["tasks"] = [predict_task(name, Path(args.model), frame, "cuda",
                                     ["fp32", "auto", "bf16", "fp16"], res["peak"], Path(tmp),
                                     args.rounds)
                        for name, frame in (("abortion", atest), ("jigsaw", jtest))]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--parts", default="predict,margin,emulated",
                    help="predict, margin, emulated, int8, overlap, train, explain")
    ap.add_argument("--tasks", default="abortion,jigsaw")
    ap.add_argument("--data-dir", required=True,
                    help="the shared data folder (tweeteval_abortion/, jigsaw_toxic/)")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir())
                                           / "quantformer-bench-precision"))
    ap.add_argument("--model", default=None, help="--device cuda: a fine-tuned model folder")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--int8-n", type=int, default=1000, help="Jigsaw comments in part int8")
    ap.add_argument("--explain-n", type=int, default=100, help="Abortion tweets in part explain")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", default=None, help="write the figures as JSON")
    ap.add_argument("--export-half", default=None, help="write the Abortion model in fp16 here")
    ap.add_argument("--child-emulated", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    import torch

    if args.child_emulated:
        return child_emulated(args)
    if args.device == "cuda":
        res = run_cuda(args)
    else:
        torch.set_num_threads(args.threads)
        res = cpu_run(args)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))


def cpu_run(args) -> dict:
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    data = Path(args.data_dir)
    res = {"machine": machine(args.threads), "peak": matmul_peak("cpu")}
    print(json.dumps(res), flush=True)
    if args.export_half:
        export_half(cache, Path(args.export_half))
    parts = args.parts.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if "predict" in parts:
            res["predict"] = part_predict(args, data, cache, Path(tmp), res["peak"])
        if "overlap" in parts:
            res["overlap"] = part_overlap(args, data, cache, Path(tmp))
        if "int8" in parts:
            res["int8"] = part_int8(args, data, cache, Path(tmp))
    if "margin" in parts:
        res["margin"] = part_margin(args, data, cache)
    if "emulated" in parts:
        res["emulated_avx2"] = part_emulated(args)
        print("  emulated (AVX2 only):", res["emulated_avx2"], flush=True)
    if "train" in parts:
        res["train"] = part_train(args, data)
    if "explain" in parts:
        res["explain"] = part_explain(args, data, cache)
    res["machine"]["load_end"] = load()
    return res


if __name__ == "__main__":
    main()
