#!/usr/bin/env bash
# The GPU figures of bench/RESULTS.md in one run, for a machine with a CUDA GPU, PyTorch,
# transformers, sentence-transformers, pandas, pyarrow, numpy and scikit-learn (no model hub):
#   DATA=folder of the benchmark corpora  MODEL=the bundled all-MiniLM-L6-v2 folder (weights may
#   be stored in fp16 to travel; they are loaded as fp32)  OUT=folder for the JSON figures
#   bash bench/gpu_run.sh
# Each part writes OUT/<part>.json and its log OUT/<part>.log; a failing part does not stop
# the others. Parts: precision (predict fp32/bf16/fp16 against the pipeline, issue 37),
# pretrain (base vs adapted encoder, 3 tasks x 3 seeds, issue 33), chunks (HanDeSeT head+tail
# against chunks, issue 34), annotate (prefix-cached label scoring against generation, issue 35).
# PRETRAIN_ARGS adds flags to the pretrain part, e.g. the epochs sweep of Gururangan et al.
# (2020): PRETRAIN_ARGS="--objectives mlm --pretrain-epochs 100 --pretrain-lr 1e-4".
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
: "${DATA:?set DATA}" "${MODEL:?set MODEL}" "${OUT:?set OUT}"
PARTS=${PARTS:-precision pretrain chunks annotate}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)" \
  >> "$OUT/gpu.txt" 2>&1

part() {  # part NAME SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  echo "== $name (at most ${limit}s)"
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "== $name exit $?"; tail -3 "$OUT/$name.log"
}

for p in $PARTS; do
  case $p in
    precision)
      part precision-model 90 python3 - "$MODEL" "$DATA" /tmp/abortion-model <<'PY'
import sys
import pandas as pd
from quantformer.train.finetune import finetune
model, data, out = sys.argv[1:]
d = f"{data}/tweeteval_abortion"
text = [l.rstrip("\n") for s in ("train", "val") for l in open(f"{d}/{s}_text.txt", encoding="utf-8")]
lab = [l.strip() for s in ("train", "val") for l in open(f"{d}/{s}_labels.txt")]
frame = pd.DataFrame({"doc_id": [f"t{i}" for i in range(len(text))], "text": text, "label": lab})
finetune(frame, model=model, epochs=4, seed=1, device="cuda", quiet=True).save(out)
PY
      part precision 150 python3 bench/bench_precision.py --device cuda \
        --model /tmp/abortion-model --data-dir "$DATA" --out "$OUT/precision.json" ;;
    pretrain)
      [ -f bench/bench_pretrain.py ] && part pretrain 240 python3 bench/bench_pretrain.py \
        --accuracy --device cuda --model "$MODEL" --data-dir "$DATA" --out "$OUT/pretrain.json" \
        ${PRETRAIN_ARGS:-} ;;
    chunks)
      [ -f bench/bench_chunks.py ] && part chunks 200 python3 bench/bench_chunks.py \
        --device cuda --model "$MODEL" --data-dir "$DATA" --out "$OUT/chunks.json" ;;
    annotate)
      [ -f bench/bench_annotate.py ] && part annotate 60 python3 bench/bench_annotate.py \
        --device cuda --docs 40 ;;
  esac
done
rm -rf /tmp/abortion-model
