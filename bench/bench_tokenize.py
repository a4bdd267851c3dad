"""Tokenisation throughput: quantformer's encode() (head+tail on token ids) vs the tokenizer's
own ``truncation=True`` (head only), on real corpora, with the bundled all-MiniLM-L6-v2.

Run: nice -n 10 .venv/bin/python bench/bench_tokenize.py [--repeats 3]
Needs ../shared/data. Prints docs/s for both and their ratio (quantformer / tokenizer; 1.0 means
the truncation logic costs nothing over the Rust tokenizer call).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CORPORA = [
    ("jigsaw 5k (short, newlines)", "jigsaw_toxic/jigsaw_5k.csv", {"text_col": "comment_text",
                                                                    "id_col": "id"}),
    ("HanDeSeT 1,251 (long speeches)", "handeset/HanDeSeT.csv", {"text_col": "utt1"}),
    ("SemEval raw 2,814 (cp1252 TSV)", "semeval2016_raw/semeval2016-task6-trainingdata.txt",
     {"text_col": "Tweet", "id_col": "ID"}),
]


def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-length", type=int, default=512)
    args = ap.parse_args()
    import warnings

    from quantformer.io.frames import read_frame
    from quantformer.models.hub import load_tokenizer
    from quantformer.models.tokenize import encode

    tok = load_tokenizer(None)
    print(f"{'corpus':34s} {'read s':>7s} {'docs':>6s} {'trunc %':>7s} "
          f"{'qf docs/s':>10s} {'hf docs/s':>10s} {'ratio':>6s}")
    for name, rel, kw in CORPORA:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            frame = read_frame(DATA / rel, **kw)
            read_s = time.perf_counter() - t
        texts = frame["text"].fillna("").tolist()
        enc = encode(tok, texts, max_length=args.max_length)
        qf = best_of(lambda: encode(tok, texts, max_length=args.max_length), args.repeats)
        hf = best_of(lambda: tok(texts, truncation=True, max_length=args.max_length),
                     args.repeats)
        print(f"{name:34s} {read_s:7.2f} {len(texts):6d} {100 * enc.truncated.mean():7.1f} "
              f"{len(texts) / qf:10.0f} {len(texts) / hf:10.0f} {hf / qf:6.2f}")


if __name__ == "__main__":
    main()
