"""Bench: partitioned `predict` on a Dask LocalCluster, 1 vs 2 worker processes (issue 14).

Prints documents per second (steady state: each cluster is started and its workers have
loaded the model before the clock starts), and documents per CPU-second of the workers (what
a dedicated core would do: on a shared, loaded machine wall-clock rates measure the load), for the single-process partitioned run (no
scheduler, the baseline) and for LocalClusters of 1 and 2 worker processes with 1 thread each,
the scaling efficiency rate(2) / (2 x rate(1)), and the peak RSS of each worker process after
jobs of each size (flat = memory does not grow with the corpus).

The model is all-MiniLM-L6-v2 (the bundled default) fine-tuned for 1 epoch on 32 toy
documents (the throughput of prediction does not depend on how well it was trained); the
documents are synthetic tweets of 12-40 words, max_length 64, Parquet partitions of
``--partition-rows`` documents.

    OMP_NUM_THREADS=1 PYTHONPATH=python python bench/bench_distributed.py \\
        --docs 10000,100000 --partition-rows 5000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

WORDS = ("tax jobs war vote campaign president congress health care economy border climate "
         "rally debate poll senate people america today great new bad crisis plan money "
         "school police rights law vaccine energy oil trade china family freedom party "
         "democrats republicans news fake truth support against win lose").split()


def tweets(n: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(12, 41, size=n)
    texts = [" ".join(rng.choice(WORDS, size=k)) for k in lengths]
    return pd.DataFrame({"doc_id": [f"t{i:08d}" for i in range(n)], "text": texts,
                         "day": rng.integers(1, 366, size=n)})


def write_partitions(n: int, rows: int, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    frame = tweets(n)
    for j, start in enumerate(range(0, n, rows)):
        frame.iloc[start:start + rows].to_parquet(folder / f"part-{j:05d}.parquet", index=False)
    return folder


def make_model(root: Path) -> Path:
    from quantformer.train.finetune import finetune

    docs = tweets(32, seed=2)
    docs["label"] = ["pos" if "great" in t or "win" in t else "neg" for t in docs["text"]]
    docs.loc[:3, "label"] = "pos"
    clf = finetune(docs, epochs=1, max_length=64, quiet=True, device="cpu")
    return clf.save(root / "model")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (load-independent cost of the work)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(model, inputs, out, scheduler) -> float:
    from quantformer.scale.dask import predict_partitions

    t0 = time.perf_counter()
    s = predict_partitions(model, inputs, out, scheduler=scheduler, device="cpu", quiet=True)
    return s["rows"] / (time.perf_counter() - t0)


def bench_cluster(model, sizes, folders, root, workers: int) -> dict:
    from distributed import Client

    from quantformer.scale.dask import local_cluster

    with local_cluster(workers) as lc, Client(lc) as client:
        warm = write_partitions(workers * 64, 64, root / f"warm{workers}")
        timed(model, warm, root / f"warm-out{workers}", lc.scheduler_address)  # load models
        out = {}
        for n in sizes:
            cpu0 = sum(client.run(cpu_seconds).values())
            rate = timed(model, folders[n], root / f"out-{workers}-{n}", lc.scheduler_address)
            cpu = sum(client.run(cpu_seconds).values()) - cpu0
            rss = client.run(peak_rss_mb)
            out[n] = {"docs_per_s": rate, "docs_per_cpu_s": n / cpu,
                      "peak_rss_mb": sorted(rss.values())}
            print(f"  local:{workers} {n} docs: {rate:.1f} docs/s (wall), {n / cpu:.1f} docs "
                  f"per worker CPU-second, peak RSS per worker "
                  f"{', '.join(f'{v:.0f}' for v in sorted(rss.values()))} MB", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", default="10000,100000", help="corpus sizes (comma-separated)")
    ap.add_argument("--partition-rows", type=int, default=5000)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.docs.split(",")]
    root = Path(tempfile.mkdtemp(prefix="bench-dist-"))
    model = make_model(root)
    folders = {n: write_partitions(n, args.partition_rows, root / f"in-{n}") for n in sizes}
    print(f"bench_distributed: sizes {sizes}, partitions of {args.partition_rows} docs, "
          f"{os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}",
          flush=True)
    timed(model, write_partitions(64, 64, root / "warm0"), root / "warm-out0", None)
    cpu0 = cpu_seconds()
    serial = timed(model, folders[sizes[0]], root / "serial", None)
    per_cpu = sizes[0] / (cpu_seconds() - cpu0)
    print(f"  no scheduler (one process) {sizes[0]} docs: {serial:.1f} docs/s (wall), "
          f"{per_cpu:.1f} docs per CPU-second", flush=True)
    res = {"serial": serial, "serial_per_cpu_s": per_cpu, 1: bench_cluster(model, sizes, folders, root, 1),
           2: bench_cluster(model, sizes, folders, root, 2)}
    print("\nratios (same run):")
    for n in sizes:
        r1, r2 = res[1][n]["docs_per_s"], res[2][n]["docs_per_s"]
        print(f"  {n} docs: local:1 / no scheduler = {r1 / serial:.2f}; local:2 / local:1 = "
              f"{r2 / r1:.2f}; scaling efficiency r2 / (2 r1) = {r2 / (2 * r1):.2f}")
    for w in (1, 2):
        rss = [max(res[w][n]["peak_rss_mb"]) for n in sizes]
        print(f"  local:{w} peak RSS per worker, largest / smallest size: "
              f"{rss[-1] / rss[0]:.2f} ({', '.join(f'{v:.0f} MB' for v in rss)})")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
