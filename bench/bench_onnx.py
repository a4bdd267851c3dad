"""Benchmark of the ONNX Runtime backend (issue 16): docs per CPU second, agreement, macro-F1.

Measures, in one run (ratios against baselines measured in the same run; the machine is shared):

1. Prediction with a fine-tuned default model (all-MiniLM-L6-v2) on the Abortion test set (280
   tweets) and the Toxic test set (1,000 comments): ``pipeline("text-classification")`` with its
   defaults (``truncation=True`` added for Toxic, whose longest comments exceed 512 tokens and
   make the pipeline fail otherwise), quantformer torch fp32, ONNX fp32 and ONNX int8. For each:
   documents per CPU second (process time, all threads counted), the ratio to the pipeline,
   top-1 agreement with torch fp32 and macro-F1 against the hand-coded labels.
2. NLI zero-shot on a tiny random RoBERTa-NLI model (built here): torch vs ONNX fp32/int8,
   pairs per CPU second (ratio only: the model is random).
3. Embeddings of the Abortion test tweets with the bundled all-MiniLM-L6-v2:
   ``SentenceTransformer.encode`` vs quantformer torch, ONNX fp32, ONNX int8 (docs per CPU
   second, min cosine with encode's vectors).
4. ``--only int8``: ``quantize_dynamic`` options on the Abortion model's fp32 export (speed
   vs ONNX fp32, agreement, macro-F1), which chose ``onnx_backend.INT8_SETTINGS``.
5. Cold start: seconds from process start to the first prediction (``python -m quantformer
   predict`` on one document, wall clock), torch vs ONNX with the export cached.

The models are copied to a temporary folder, so the ONNX exports (not timed) never touch the
shared model folders. Run (2 threads)::

    OMP_NUM_THREADS=2 PYTHONPATH=python python bench/bench_onnx.py --models /work/models \
        --threads 2 [--toxic-n 1000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def cpu_timed(fn, *args, **kwargs):
    """(result, CPU seconds of this process, wall seconds)."""
    c, w = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.process_time() - c, time.perf_counter() - w


def macro_f1(gold, pred) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(gold, pred, average="macro"))


def bench_predict(name: str, model_dir: Path, test: pd.DataFrame, pipeline_kw: dict) -> dict:
    """Pipeline defaults vs quantformer torch / ONNX fp32 / ONNX int8 on one test set."""
    from transformers import pipeline

    from quantformer.predict import Classifier

    texts = test["text"].tolist()
    pipe = pipeline("text-classification", model=str(model_dir), device=-1)
    pipe(texts[:8], **pipeline_kw)  # warm-up
    ref, pipe_cpu, pipe_wall = cpu_timed(pipe, texts, **pipeline_kw)
    rows = [{"task": name, "runner": "pipeline defaults", "docs_per_cpu_s": len(texts) / pipe_cpu,
             "docs_per_wall_s": len(texts) / pipe_wall,
             "predicted": [r["label"] for r in ref]}]
    for label, kw in [("quantformer torch fp32", {"device": "cpu"}),
                      ("ONNX fp32", {"backend": "onnx"}),
                      ("ONNX int8", {"backend": "onnx", "quantize": "int8"})]:
        clf = Classifier.from_dir(model_dir, **kw)  # exports (untimed) on first use
        clf.predict(test.head(8), warn=False)  # warm-up
        out, cpu, wall = cpu_timed(clf.predict, test, warn=False)
        rows.append({"task": name, "runner": label, "docs_per_cpu_s": len(texts) / cpu,
                     "docs_per_wall_s": len(texts) / wall,
                     "predicted": out["predicted"].tolist()})
    fp32 = rows[1]["predicted"]
    for r in rows:
        r["ratio_vs_pipeline"] = r["docs_per_cpu_s"] / rows[0]["docs_per_cpu_s"]
        r["agreement_with_torch_fp32"] = float(np.mean(np.asarray(r["predicted"]) ==
                                                       np.asarray(fp32)))
        r["macro_f1"] = macro_f1(test["label"].astype(str), r.pop("predicted"))
    return rows


def bench_nli(tmp: Path) -> list[dict]:
    """Tiny random RoBERTa-NLI: pairs per CPU second, torch vs ONNX (ratio only)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
    import tiny_models

    from quantformer.zeroshot import zeroshot

    model = tiny_models.build_tiny_roberta_nli(tmp / "nli")
    docs = pd.DataFrame({"text": [tiny_models.TINY_CORPUS[i % len(tiny_models.TINY_CORPUS)]
                                  for i in range(400)]})
    labels = "economy,war,health,immigration"
    rows, base = [], None
    for label, kw in [("torch fp32", {"device": "cpu"}), ("ONNX fp32", {"backend": "onnx"}),
                      ("ONNX int8", {"backend": "onnx", "quantize": "int8"})]:
        zeroshot(docs.head(4), labels, model=str(model), method="nli", quiet=True, **kw)
        out, cpu, _ = cpu_timed(zeroshot, docs, labels, model=str(model), method="nli",
                                quiet=True, **kw)
        pairs_s = len(docs) * 4 / cpu
        base = base or pairs_s
        rows.append({"task": "NLI zero-shot (tiny RoBERTa-NLI)", "runner": label,
                     "pairs_per_cpu_s": pairs_s, "ratio_vs_torch": pairs_s / base})
    return rows


def bench_embed(texts: list[str]) -> list[dict]:
    """Bundled all-MiniLM-L6-v2: sentence-transformers encode vs quantformer backends."""
    from sentence_transformers import SentenceTransformer

    from quantformer.embed import embed
    from quantformer.models import default_model_path

    st = SentenceTransformer(default_model_path(), device="cpu")
    st.encode(texts[:8])
    ref, cpu, _ = cpu_timed(st.encode, texts, normalize_embeddings=True)
    rows = [{"task": "embeddings (all-MiniLM-L6-v2)", "runner": "sentence-transformers encode",
             "docs_per_cpu_s": len(texts) / cpu, "min_cosine_vs_encode": 1.0}]
    for label, kw in [("quantformer torch fp32", {"device": "cpu"}),
                      ("ONNX fp32", {"backend": "onnx"}),
                      ("ONNX int8", {"backend": "onnx", "quantize": "int8"})]:
        embed(texts[:8], normalize=True, quiet=True, **kw)
        vecs, cpu, _ = cpu_timed(embed, texts, normalize=True, quiet=True, **kw)
        rows.append({"task": "embeddings (all-MiniLM-L6-v2)", "runner": label,
                     "docs_per_cpu_s": len(texts) / cpu,
                     "min_cosine_vs_encode": float((vecs * ref).sum(1).min())})
    for r in rows:
        r["ratio_vs_encode"] = r["docs_per_cpu_s"] / rows[0]["docs_per_cpu_s"]
    return rows


INT8_VARIANTS = {
    "defaults": {},
    "per_channel": {"per_channel": True},
    "MatMul only": {"op_types_to_quantize": ["MatMul"]},
    "MatMul only, per_channel": {"op_types_to_quantize": ["MatMul"], "per_channel": True},
    "MatMul only, per_channel, reduce_range": {"op_types_to_quantize": ["MatMul"],
                                               "per_channel": True, "reduce_range": True},
    "per_channel, reduce_range": {"per_channel": True, "reduce_range": True},
}


def bench_int8_variants(model_dir: Path, test: pd.DataFrame) -> list[dict]:
    """quantize_dynamic options on the fp32 export: speed vs fp32, agreement, macro-F1."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from quantformer.onnx_backend import OnnxModel
    from quantformer.predict import Classifier

    fp32 = Classifier.from_dir(model_dir, backend="onnx")
    src = fp32.model.folder

    def run(clf):
        out, cpu, _ = cpu_timed(clf.predict, test, warn=False)
        return out["predicted"].to_numpy(), len(test) / cpu

    ref, base = run(fp32)
    rows = [{"task": "int8 variants", "runner": "ONNX fp32", "docs_per_cpu_s": base,
             "ratio_vs_fp32": 1.0, "agreement_with_torch_fp32": 1.0,
             "macro_f1": macro_f1(test["label"].astype(str), ref)}]
    for name, options in INT8_VARIANTS.items():
        folder = src.parent / f".variant-{len(rows)}"
        shutil.copytree(src, folder)
        quantize_dynamic(str(src / "model.onnx"), str(folder / "model.onnx"),
                         weight_type=QuantType.QInt8, **options)
        net = OnnxModel(folder, json.loads((folder / "manifest.json").read_text()),
                        fp32.model.config)
        pred, speed = run(Classifier(net, net.tokenizer, fp32.labels,
                                     max_length=fp32.max_length, truncation=fp32.truncation))
        rows.append({"task": "int8 variants", "runner": name, "docs_per_cpu_s": speed,
                     "ratio_vs_fp32": speed / base,
                     "agreement_with_torch_fp32": float(np.mean(pred == ref)),
                     "macro_f1": macro_f1(test["label"].astype(str), pred)})
    return rows


def cold_start(model_dir: Path, tmp: Path, repeats: int = 2) -> list[dict]:
    """Wall seconds of ``python -m quantformer predict`` on one document, torch vs onnx."""
    doc = tmp / "one.csv"
    pd.DataFrame({"text": ["Every life is sacred."]}).to_csv(doc, index=False)
    rows = []
    for label, flags in [("torch", []), ("ONNX fp32", ["--backend", "onnx"]),
                         ("ONNX int8", ["--backend", "onnx", "--quantize", "int8"])]:
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "quantformer", "predict", "--model",
                            str(model_dir), "--input", str(doc), "--out",
                            str(tmp / "one_out.csv"), "--quiet", *flags], check=True,
                           capture_output=True)
            times.append(time.perf_counter() - t)
        rows.append({"task": "cold start (1 document)", "runner": label,
                     "seconds": min(times)})
    for r in rows:
        r["ratio_vs_torch"] = rows[0]["seconds"] / r["seconds"]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="/work/models", help="folder of the lead's models")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--toxic-n", type=int, default=1000, help="Toxic test documents (1000)")
    ap.add_argument("--only", default="predict,nli,embed,cold",
                    help="comma-separated parts to run")
    ap.add_argument("--tasks", default="abortion,toxic", help="prediction test sets to run")
    ap.add_argument("--json", default=None, help="write the rows here too")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # ONNX Runtime reads it per session
    import torch

    torch.set_num_threads(args.threads)
    parts = set(args.only.split(","))
    root = Path(args.models)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.environ["QUANTFORMER_CACHE"] = str(tmp / "cache")
        abortion = pd.read_parquet(root / "data" / "abortion_test.parquet")
        tasks = [("Abortion (280)", "abortion", abortion, {})] if "abortion" in args.tasks else []
        if "toxic" not in args.tasks:
            pass
        elif (root / "toxic-1000" / "quantformer.json").exists():
            toxic = pd.read_parquet(root / "data" / "toxic_test1000.parquet").head(args.toxic_n)
            tasks.append((f"Toxic ({len(toxic)})", "toxic-1000", toxic, {"truncation": True}))
        else:
            print("toxic-1000 model not ready: Toxic skipped", flush=True)
        if "predict" in parts:
            for name, folder, test, pkw in tasks:
                model = Path(shutil.copytree(root / folder, tmp / folder))
                rows += bench_predict(name, model, test, pkw)
                print(pd.DataFrame(rows).to_string(), flush=True)
        if "int8" in parts:
            model = tmp / "abortion"
            if not model.exists():
                shutil.copytree(root / "abortion", model)
            rows += bench_int8_variants(model, abortion)
        if "nli" in parts:
            rows += bench_nli(tmp)
        if "embed" in parts:
            rows += bench_embed(abortion["text"].tolist())
        if "cold" in parts:
            model = tmp / "abortion"
            if not model.exists():
                shutil.copytree(root / "abortion", model)
            rows += cold_start(model, tmp)
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(table.round(4).to_string(index=False))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
