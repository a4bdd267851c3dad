"""Speed of `annotate`'s label scoring against generating and parsing (section "LLM as a coder").

Documents per second with a codebook of about 1,000 tokens on a randomly initialised Llama of
realistic shape (8 layers, hidden 512, vocabulary 32,000): quantformer's prefix-cached label
scoring (models/llm.py) against the naive way, transformers ``pipeline("text-generation")``
per document followed by a strict parse. Both run in the same process; the ratio is printed.
Labels are compared where the naive way produces one (a random model rarely does).

No language model of useful quality can be had offline here; accuracy against human codes is
measured with a real model by (not run here):

    quantformer annotate --input test.parquet --codebook codebook.json --llm MODEL \\
        --out llm_codes.parquet
    quantformer evaluate --pred llm_codes.parquet --pred-col label --truth test.parquet
    quantformer reliability --codes llm_codes.parquet coder_a.csv coder_b.csv
    quantformer compare --train train.parquet --test test.parquet --models default,svm-bow \\
        --llm MODEL --codebook codebook.json --shots 4 --out compare-llm

Imports only torch, transformers, tokenizers and quantformer's models/infer modules, so it
runs on a machine with those alone: ``python bench/bench_annotate.py --device cuda``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        out = ""
    model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                  if ln.startswith("Model name")), "?")
    flags = next((ln for ln in out.splitlines() if ln.startswith("Flags")), "")
    have = [f for f in ("avx2", "avx512f", "avx512_vnni", "amx_tile") if f" {f}" in flags]
    return f"{model} ({', '.join(have) or 'none of avx2/avx512/vnni/amx'}); load {os.getloadavg()}"


def build(folder: Path, device: str):
    import tiny_models
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tiny_models.build_tiny_llama(folder)  # the tokenizer and chat template
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1408,
                      num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8,
                      max_position_embeddings=4096, bos_token_id=0, eos_token_id=601,
                      pad_token_id=1)
    LlamaForCausalLM(cfg).save_pretrained(folder)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--folder", default="/tmp/qf-bench-annotate-llm")
    a = ap.parse_args()
    import tiny_models
    from transformers import pipeline

    from quantformer.infer.annotate import build_messages
    from quantformer.models.llm import DOC_SLOT, LocalLM, normalise, parse_label

    folder = Path(a.folder)
    build(folder, a.device)
    filler = " ".join(tiny_models._SENTENCES[:8])
    codebook = [{"label": lab, "description": filler, "examples": tiny_models._SENTENCES[:3]}
                for lab in ("pro", "contra", "neutral", "off-topic")]
    docs = [tiny_models.TINY_CORPUS[i % len(tiny_models.TINY_CORPUS)] for i in range(a.docs)]
    labels = [e["label"] for e in codebook]
    llm = LocalLM(str(folder), device=a.device)
    messages = build_messages(codebook)
    head, tail = llm.split_prompt(messages)
    print(f"machine: {machine()}; device {a.device}; codebook prefix "
          f"{len(llm.ids(head))} tokens; {a.docs} documents")
    t0 = time.perf_counter()
    head_ids, label_ids = llm.ids(head), llm.label_ids(labels)
    scored = []
    for d in docs:
        p = normalise(llm.score(head_ids, llm.ids(d + tail), label_ids))
        scored.append(labels[p.index(max(p))])
    t_score = time.perf_counter() - t0
    gen = pipeline("text-generation", model=llm.model, tokenizer=llm.tokenizer,
                   device=llm.model.device)
    width = max(len(x) for x in label_ids)
    t0 = time.perf_counter()
    parsed = []
    for d in docs:
        msgs = [dict(m, content=m["content"].replace(DOC_SLOT, d)) for m in messages]
        out = gen(msgs, max_new_tokens=width, do_sample=False, return_full_text=False)
        parsed.append(parse_label(out[0]["generated_text"], labels))
    t_gen = time.perf_counter() - t0
    both = [(s, g) for s, g in zip(scored, parsed) if g is not None]
    print(f"prefix-cached label scoring: {a.docs / t_score:.2f} docs/s")
    print(f"pipeline('text-generation') + parse: {a.docs / t_gen:.2f} docs/s "
          f"({len(both)} of {a.docs} parsed)")
    print(f"ratio: {t_gen / t_score:.2f}x; identical labels where both produce one: "
          f"{sum(s == g for s, g in both)} of {len(both)}")


if __name__ == "__main__":
    main()
