"""Further pretraining (issue 33): speed against Hugging Face's run_mlm.py recipe, and accuracy.

Speed (default): masked-LM training of the same BERT-shape model with an MLM head (the bundled
all-MiniLM-L6-v2 body loaded as ``BertForMaskedLM``, the same random head on both sides, no
head warm-up) on the same documents (the SemEval-2016 raw training tweets), batch size, length
and number of steps: quantformer's loop (vocabulary projection at the masked positions only,
length-grouped batches) against ``transformers.Trainer`` with ``DataCollatorForLanguageModeling``
(the run_mlm.py recipe: AdamW, linear decay, 6 % warm-up, no weight decay). Prints the training
tokens per second of each and the ratio, and the held-out masked-LM loss of both after the same
steps (the same masks for both). Target: at least 2x, loss within 2 %.

Accuracy (``--accuracy``): for each task, one adapted encoder per objective in
``--objectives`` (``quantformer pretrain`` with its defaults: one epoch, 128 tokens, batch 32,
seed 42; ``auto`` = pretrain's own choice, masked LM for every encoder) on the
task's unlabelled texts. Each encoder, the base model's included, is then scored on the test
set (macro-F1) three ways:

* the unchanged default fine-tuning recipe (``run_one("default")``, as ``quantformer
  compare``), once per seed (``--seeds``, default 1,2,3), on the whole training set;
  ``--finetune-max-length`` (default: the recipe's own, 512 tokens; null in the JSON) shortens
  it, e.g. 128 for HanDeSeT's long speeches on a CPU;
* SetFit with its default recipe (``finetune(method="setfit")``, the encoder's own window,
  256 tokens for the bundled model) on ``--setfit-per-class`` training documents per class
  (16), drawn per seed as bench_fewshot.py draws them (``per_class_sample``);
* the embedding zero-shot (``zeroshot(method="embedding")``, its default standardised
  calibration) with the label phrases of :data:`ZEROSHOT`: one value per encoder
  (deterministic).

The base model's scores are computed once per task and seed and shared by every objective.
Unlabelled corpora: Abortion: the SemEval-2016 raw training tweets of all five targets plus
the Abortion training tweets (never a test tweet); Toxic: the Jigsaw comments outside the
training and test draws; HanDeSeT: the speeches outside the test fold (its training
speeches). ``--out`` is rewritten after every encoder, so a run cut short keeps what finished;
per task it holds the base's scores and, per objective, the adapted encoder's scores, the gain
over the base (means), the pretraining seconds and steps and the held-out loss (masked LM:
and perplexity) before and after. A table (task x encoder: fine-tune and SetFit mean (sd),
zero-shot, gains) ends the run. ``--smoke`` checks the whole path in minutes (:data:`SMOKE`:
10 training documents per class, 30 test documents, 120 unlabelled ones, 2 pretraining steps
at 32 tokens, one fine-tuning epoch at 128 tokens, SetFit on 4 per class with one pair
iteration, seed 1); its figures mean nothing. ``--no-setfit`` and ``--no-zeroshot`` skip those.
``--pretrain-epochs N`` pretrains N epochs instead of pretrain's default of one (the epochs
sweep: Gururangan et al. 2020 ran task-adaptive pretraining for 100), ``--pretrain-batch-size
N`` instead of its batch of 32 (Wang et al. 2021 trained TSDAE with batches of 8) and
``--pretrain-lr`` instead of its learning rate (5e-5 masked LM, 3e-5 TSDAE; Gururangan et al.
pretrained at 1e-4). ``--base-from JSON`` takes the base model's scores from an earlier
``--out`` with the same base model, seeds, fine-tuning length, SetFit size, zero-shot phrases
and device (the recipe is deterministic for a seed on one device; a mismatch is refused
before any work), so a sweep does not score the base again.

Memory (``--memory``): peak resident memory (the kernel's ``VmHWM``) of ``quantformer
pretrain`` (bundled model, objective auto, a few steps, 1 % held out) in a fresh process per
run, on corpora of 10,000 and 100,000 documents (the SemEval-2016 raw training tweets
repeated, each copy numbered), written as Parquet (``--format parquet``, the default) or as CSV
(``--format csv``, the same texts, read by pandas' chunked CSV reader), streamed in buffers of
10,000 documents; the baseline is the 100,000-document corpus read as one buffer
(``--buffer-docs 100000``, as if it were held whole). Prints each peak and the ratios to the
10,000-document run.

    OMP_NUM_THREADS=2 PYTHONPATH=python .venv/bin/python bench/bench_pretrain.py --steps 30
    PYTHONPATH=python python bench/bench_pretrain.py --accuracy --device cuda \\
        --objectives mlm,tsdae --data-dir DATA --out pretrain_accuracy.json
    OMP_NUM_THREADS=1 PYTHONPATH=python .venv/bin/python bench/bench_pretrain.py --accuracy \\
        --tasks handeset --objectives mlm,tsdae --finetune-max-length 128 --data-dir DATA \\
        --out pretrain_accuracy_handeset.json
    OMP_NUM_THREADS=1 PYTHONPATH=python .venv/bin/python bench/bench_pretrain.py --accuracy \\
        --tasks handeset --objectives mlm --pretrain-epochs 10 --finetune-max-length 128 \\
        --base-from pretrain_accuracy_handeset.json --data-dir DATA --out handeset_e10.json
    OMP_NUM_THREADS=1 PYTHONPATH=python .venv/bin/python bench/bench_pretrain.py --accuracy \\
        --smoke --objectives mlm,tsdae --data-dir DATA
    OMP_NUM_THREADS=2 PYTHONPATH=python .venv/bin/python bench/bench_pretrain.py --memory \\
        --steps 3 --data-dir DATA [--format csv]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "bench"))

from bench_fewshot import per_class_sample  # noqa: E402  (the few-shot bench's draw)


def commit() -> str | None:
    """The checkout's commit (None outside a git checkout)."""
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def machine() -> dict:
    """lscpu model name and vector flags, core count and load (the machine is shared)."""
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        info = ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                  if ln.startswith("Model name")), platform.processor())
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines()
                  if ln.startswith("Flags")), [])
    wanted = [f for f in flags if f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni",
                                         "amx_tile", "amx_bf16")]
    return {"cpu": model, "flags": wanted, "cores": os.cpu_count(),
            "load": os.getloadavg(), "threads": os.environ.get("OMP_NUM_THREADS")}


# ------------------------------------------------------------------------------------------
# data


def semeval_raw(data: Path) -> pd.DataFrame:
    from quantformer.io.frames import read_frame

    return read_frame(data / "semeval2016_raw" / "semeval2016-task6-trainingdata.txt",
                      fmt="tsv", text_col="Tweet", id_col="ID")


def abortion(data: Path):
    """(train, test, unlabelled corpus): TweetEval Abortion; corpus = SemEval-2016 raw
    training tweets of all five targets + the Abortion training tweets, test tweets removed."""
    d = data / "tweeteval_abortion"
    names = dict(line.split("\t") for line in (d / "mapping.txt").read_text().split("\n")
                 if line.strip())

    def split(name):
        texts = (d / f"{name}_text.txt").read_text(encoding="utf-8").split("\n")
        labels = (d / f"{name}_labels.txt").read_text().split()
        return pd.DataFrame({"doc_id": [f"{name}{i + 1}" for i in range(len(labels))],
                             "text": texts[:len(labels)],
                             "label": [names[x].strip() for x in labels]})

    train = pd.concat([split("train"), split("val")], ignore_index=True)
    test = split("test")
    corpus = pd.concat([semeval_raw(data)["text"], train["text"]]).drop_duplicates()
    corpus = corpus[~corpus.isin(set(test["text"]))]
    return train, test, corpus.tolist()


def toxic(data: Path, seed: int = 1, n_train: int = 1000):
    """Jigsaw 5k: test 1,000 (as bench_compare), training draw 1,000; corpus = the rest."""
    from sklearn.model_selection import train_test_split

    from quantformer.io.frames import read_frame

    f = read_frame(data / "jigsaw_toxic" / "jigsaw_5k.csv", text_col="comment_text",
                   label_col="toxic", id_col="id")[["doc_id", "text", "label"]]
    rest, test = train_test_split(f, test_size=1000, stratify=f["label"], random_state=1)
    train, outside = train_test_split(rest, train_size=n_train, stratify=rest["label"],
                                      random_state=seed)
    return train, test, outside["text"].tolist()


def handeset(data: Path, seed: int = 1):
    """HanDeSeT: the five utterances of a speech as one text, label 'manual speech'; test
    fold 20 %; corpus = the speeches outside the test fold (the training speeches' texts)."""
    from sklearn.model_selection import train_test_split

    f = pd.read_csv(data / "handeset" / "HanDeSeT.csv")
    utts = [c for c in f.columns if c.startswith("utt")]
    text = f[utts].fillna("").astype(str).agg(" ".join, axis=1).str.strip()
    frame = pd.DataFrame({"doc_id": f["id"].astype(str), "text": text,
                          "label": f["manual speech"].astype(str)})
    train, test = train_test_split(frame, test_size=0.2, stratify=frame["label"],
                                   random_state=seed)
    return train, test, train["text"].tolist()


TASKS = {"abortion": abortion, "toxic": toxic, "handeset": handeset}


# ------------------------------------------------------------------------------------------
# speed


def heldout_mlm_loss(model, tok, texts, max_length: int, batch_size: int, seed: int) -> float:
    """Mean cross-entropy over masked tokens, the same masks for every model (fixed seed)."""
    import torch
    from transformers import DataCollatorForLanguageModeling

    collate = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, seed=seed)
    total, count = 0.0, 0
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            enc = tok(texts[i:i + batch_size], truncation=True, max_length=max_length)
            batch = collate([{k: enc[k][j] for k in enc} for j in range(len(enc["input_ids"]))])
            n = int((batch["labels"] != -100).sum())
            total += float(model(**batch).loss) * n
            count += n
    return total / count


def hf_trainer(base: str, texts, args, out: Path) -> tuple[float, object]:
    """Hugging Face Trainer + DataCollatorForLanguageModeling (run_mlm.py), timed training."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForMaskedLM.from_pretrained(base)
    enc = tok(texts, truncation=True, max_length=args.max_length, return_special_tokens_mask=True)
    data = [{k: enc[k][i] for k in enc} for i in range(len(texts))]
    targs = TrainingArguments(
        output_dir=str(out / "hf"), per_device_train_batch_size=args.batch_size,
        max_steps=args.steps, learning_rate=5e-5, warmup_steps=int(0.06 * args.steps),
        weight_decay=0.0,
        lr_scheduler_type="linear", seed=args.seed, report_to=[], save_strategy="no",
        logging_strategy="no", disable_tqdm=True, use_cpu=args.device == "cpu",
        dataloader_num_workers=0)
    trainer = Trainer(model=model, args=targs, train_dataset=data,
                      data_collator=DataCollatorForLanguageModeling(tok, mlm_probability=0.15))
    t0 = time.perf_counter()
    trainer.train()
    return time.perf_counter() - t0, trainer.model


def speed(args) -> dict:
    """quantformer's masked-LM loop against the Trainer on the same model, data and steps."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from quantformer.models.hub import resolve_model
    from quantformer.train.pretrain import pretrain
    from quantformer.train.pretrain_corpus import split

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    texts = semeval_raw(Path(args.data_dir))["text"].tolist()
    train_idx, valid_idx = split(len(texts), 0.05, args.seed)
    valid = [texts[i] for i in valid_idx]
    work = Path(tempfile.mkdtemp(prefix="bench-pretrain-"))
    base = work / "base"  # the default body with one random MLM head, shared by both sides
    torch.manual_seed(args.seed)
    from quantformer.io.modeldir import hf_quiet

    with hf_quiet():
        AutoModelForMaskedLM.from_pretrained(resolve_model(args.model)).save_pretrained(base)
        AutoTokenizer.from_pretrained(resolve_model(args.model)).save_pretrained(base)
    tok = AutoTokenizer.from_pretrained(base)
    hf_seconds, hf_model = hf_trainer(str(base), [texts[i] for i in train_idx], args, work)
    ours = pretrain(pd.DataFrame({"text": texts}), work / "ours", str(base), objective="mlm",
                    max_steps=args.steps, max_length=args.max_length, batch_size=args.batch_size,
                    head_steps=0, seed=args.seed, device=args.device, quiet=True,
                    checkpoint_every=10 ** 9, say=lambda *_: None)
    our_model = AutoModelForMaskedLM.from_pretrained(work / "ours")
    n_tokens = int(np.mean([len(x) for x in tok([texts[i] for i in train_idx], truncation=True,
                                                 max_length=args.max_length)["input_ids"]])
                   * args.steps * args.batch_size)
    loss_hf = heldout_mlm_loss(hf_model.cpu(), tok, valid, args.max_length, 64, args.seed)
    loss_ours = heldout_mlm_loss(our_model, tok, valid, args.max_length, 64, args.seed)
    result = {
        "steps": args.steps, "batch_size": args.batch_size, "max_length": args.max_length,
        "documents": len(texts), "train_tokens_approx": n_tokens,
        "hf_trainer_seconds": round(hf_seconds, 2),
        "quantformer_seconds": ours["train_seconds"],
        "hf_tokens_per_s": round(n_tokens / hf_seconds, 1),
        "quantformer_tokens_per_s": round(n_tokens / ours["train_seconds"], 1),
        "speedup": round(hf_seconds / ours["train_seconds"], 2),
        "heldout_loss_hf": round(loss_hf, 4), "heldout_loss_quantformer": round(loss_ours, 4),
        "loss_ratio": round(loss_ours / loss_hf, 4), "machine": machine(),
    }
    return result


# ------------------------------------------------------------------------------------------
# accuracy


# Embedding zero-shot (``zeroshot(method="embedding")``): per task the template and the label
# phrase of each class, the same for every encoder. Abortion and Toxic: the content-describing
# phrases of bench_zeroshot.py (its "default template" rows, bench/RESULTS.md "Zero-shot");
# HanDeSeT's `manual speech` is the speaker's sentiment towards the motion (1 = positive),
# phrased from that definition (not tuned on any test document).
ZEROSHOT = {
    "abortion": ("This text is about {}.",
                 {"favor": "legal abortion and women's right to choose",
                  "against": "protecting the unborn", "none": "something else"}),
    "toxic": ("This text is about {}.",
              {"0": "a normal discussion", "1": "insults and obscenities"}),
    "handeset": ("This speech {} the motion.",
                 {"1": "supports and welcomes", "0": "opposes and criticises"}),
}
SMOKE = {"train_per_class": 10, "test": 30, "corpus": 120, "pretrain_steps": 2,
         "pretrain_max_length": 32, "pretrain_batch_size": 8, "finetune_epochs": 1,
         "setfit_per_class": 4, "setfit_iterations": 1, "finetune_max_length": 128}


def task_data(args, task: str):
    """(train, test, unlabelled corpus) of ``task``, no test text in the corpus; --smoke: a
    few documents of each (SMOKE)."""
    train, test, corpus = TASKS[task](Path(args.data_dir))
    held_out = set(test["text"])  # a test text that also appears elsewhere stays out
    corpus = [t for t in corpus if t not in held_out]
    if args.smoke:
        train = per_class_sample(train, SMOKE["train_per_class"], 1)
        test = test.sample(n=min(SMOKE["test"], len(test)), random_state=1)
        corpus = corpus[:SMOKE["corpus"]]
    return train.reset_index(drop=True), test.reset_index(drop=True), corpus


def spread(scores: list[float]) -> dict:
    """The seeds' macro-F1 values, their mean and sample standard deviation (0 for one)."""
    return {"macro_f1": [round(x, 4) for x in scores], "mean": round(float(np.mean(scores)), 4),
            "sd": round(float(np.std(scores, ddof=1)) if len(scores) > 1 else 0.0, 4)}


def zeroshot_f1(args, model, task: str, test: pd.DataFrame) -> float:
    """Macro-F1 of the embedding zero-shot with ZEROSHOT[task] on ``test`` (deterministic)."""
    import quantformer
    from quantformer.score.metrics import macro_f1

    template, phrases = ZEROSHOT[task]
    res = quantformer.zeroshot(test[["doc_id", "text"]], list(phrases.values()), template,
                               model=model, method="embedding", device=args.device, quiet=True)
    back = {phrase: label for label, phrase in phrases.items()}
    truth = test["label"].astype(str).tolist()
    return round(macro_f1(truth, [back[p] for p in res["predicted"]], sorted(set(truth))), 4)


def evaluate(args, model, task: str, train: pd.DataFrame, test: pd.DataFrame) -> dict:
    """One encoder (None: the base model): the default fine-tuning recipe and SetFit on a
    per-class sample, once per seed, and the embedding zero-shot, each macro-F1 on ``test``."""
    from quantformer.select.compare import run_one

    def score(name, sample, seed, kwargs):
        return run_one(name, sample, test, repeat=0, seed=seed, folds=5, vectors=None,
                       model=model, finetune_kwargs={"device": args.device, **kwargs},
                       fitters=None, quiet=True)["macro_f1"]

    out, t0 = {}, time.perf_counter()
    ft = {"max_length": args.finetune_max_length} if args.finetune_max_length else {}
    if args.smoke:
        ft["epochs"] = SMOKE["finetune_epochs"]
    out["finetune"] = spread([score("default", train, s, ft) for s in args.seed_list])
    if not args.no_setfit:
        sf = {"setfit_iterations": SMOKE["setfit_iterations"]} if args.smoke else {}
        out["setfit"] = spread([score("setfit", per_class_sample(train, args.setfit_per_class, s),
                                      s, sf) for s in args.seed_list])
    if not args.no_zeroshot:
        out["zeroshot"] = zeroshot_f1(args, model, task, test)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["peak_rss_mib"] = _peak_rss_mb()  # of the whole run so far
    out["load"] = round(os.getloadavg()[0], 2)  # the machine is shared
    return out


def adapt(args, task: str, objective: str, corpus: list[str], work: Path) -> tuple[str, dict]:
    """Pretrain the base model further on ``corpus`` with ``objective``: (folder, record)."""
    from quantformer.train.pretrain import pretrain

    folder = work / f"{task}-{objective}"
    t0 = time.perf_counter()
    record = pretrain(pd.DataFrame({"text": corpus}), folder, args.model, objective=objective,
                      device=args.device, quiet=True,
                      **({"max_steps": SMOKE["pretrain_steps"], "batch_size":
                          SMOKE["pretrain_batch_size"], "max_length": SMOKE["pretrain_max_length"]}
                         if args.smoke else {"epochs": args.pretrain_epochs,
                                             "lr": args.pretrain_lr,
                                             **({"batch_size": args.pretrain_batch_size}
                                                if args.pretrain_batch_size is not None
                                                else {})}))
    return str(folder), {"objective": record["objective"],
                         "pretrain_seconds": round(time.perf_counter() - t0, 1),
                         "pretrain_steps": record["settings"]["steps"],
                         "pretrain_epochs": record["settings"].get("epochs"),
                         "pretrain_batch_size": record["settings"]["batch_size"],
                         "pretrain_lr": record["settings"]["lr"],
                         "valid_before": record["valid_before"],
                         "valid_after": record["valid_after"]}


def gains(adapted: dict, base: dict) -> dict:
    """Adapted minus base: mean macro-F1 of fine-tuning and SetFit, the zero-shot value."""
    out = {}
    for kind in ("finetune", "setfit", "zeroshot"):
        if kind in base and kind in adapted:
            a, b = adapted[kind], base[kind]
            out[kind] = round(a["mean"] - b["mean"] if isinstance(a, dict) else a - b, 4)
    return out


def write_json(path, result: dict) -> None:
    """Write ``result`` to ``path`` (whole, replaced): a run cut short keeps what finished."""
    if path:
        tmp = Path(f"{path}.tmp")
        tmp.write_text(json.dumps(result, indent=2), encoding="utf-8")
        tmp.replace(path)


BASE_KEYS = {  # what the base's scores depend on: the JSON key and the flag that sets it
    "model": "--model", "seeds": "--seeds", "finetune_max_length": "--finetune-max-length",
    "setfit_per_class": "--setfit-per-class/--no-setfit",
    "zeroshot": "--no-zeroshot (or the phrases)", "smoke": "--smoke", "device": "--device"}


def base_from(path: str | None, out: dict) -> dict:
    """The base model's scores per task from an earlier ``--out`` of this script (``{}``
    without ``--base-from``). The fine-tuning recipe is deterministic for a seed on one
    device, so an earlier run's base scores stand for this run's when its settings
    (:data:`BASE_KEYS`) are this run's; a mismatch is refused before any work."""
    if not path:
        return {}
    try:
        earlier = json.loads(Path(path).read_text(encoding="utf-8"))
        tasks = earlier["tasks"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"--base-from {path}: not the --out JSON of an --accuracy run ({e})")
    differ = [f"{flag} ({earlier.get(k)!r} there, {out.get(k)!r} here)"
              for k, flag in BASE_KEYS.items()  # compared as JSON holds them (tuples: lists)
              if earlier.get(k) != json.loads(json.dumps(out.get(k)))]
    if differ:
        raise SystemExit(f"--base-from {path}: the base was scored with other settings: "
                         f"{'; '.join(differ)}; run the base again (drop --base-from) or "
                         "match the flags")
    return {task: row["base"] for task, row in tasks.items() if row.get("base")}


def accuracy(args) -> dict:
    """Base vs adapted encoders per task: the base model's scores once per task and seed
    (or from ``--base-from``), shared by every objective's adapted encoder."""
    out = {"machine": machine(), "commit": commit(), "device": args.device, "model": args.model,
           "seeds": args.seed_list, "pretrain_epochs": args.pretrain_epochs,
           "base_from": args.base_from,
           "objectives": args.objective_list, "finetune_max_length": args.finetune_max_length,
           "setfit_per_class": None if args.no_setfit else args.setfit_per_class,
           "zeroshot": None if args.no_zeroshot else ZEROSHOT,
           "smoke": SMOKE if args.smoke else None, "tasks": {}}
    earlier = base_from(args.base_from, out)
    work = Path(tempfile.mkdtemp(prefix="bench-pretrain-acc-"))
    for task in args.tasks.split(","):
        train, test, corpus = task_data(args, task)
        row = out["tasks"][task] = {"n_train": len(train), "n_test": len(test),
                                    "corpus_docs": len(corpus), "base": None, "adapted": {}}
        row["base"] = earlier.get(task) or evaluate(args, args.model, task, train, test)
        print(task, "base", json.dumps(row["base"]), flush=True)
        write_json(args.out, out)
        for objective in args.objective_list:
            folder, info = adapt(args, task, objective, corpus, work)
            info.update(evaluate(args, folder, task, train, test))
            info["gain"] = gains(info, row["base"])
            row["adapted"][objective] = info
            print(task, objective, json.dumps(info), flush=True)
            write_json(args.out, out)
    return out


def summary(result: dict) -> str:
    """Task x encoder: fine-tune and SetFit mean (sd) over seeds, zero-shot macro-F1, gains."""
    def cell(v):
        if v is None:
            return "-"
        return f"{v['mean']:.4f} ({v['sd']:.4f})" if isinstance(v, dict) else f"{v:.4f}"

    kinds = ("finetune", "setfit", "zeroshot")
    rows = []
    for task, row in result["tasks"].items():
        for name, enc in [("base", row.get("base") or {}), *row.get("adapted", {}).items()]:
            gain = enc.get("gain")
            rows.append({"task": task, "encoder": name, "fine-tune": cell(enc.get("finetune")),
                         "SetFit": cell(enc.get("setfit")), "zero-shot": cell(enc.get("zeroshot")),
                         "gain (fine-tune, SetFit, zero-shot)": "" if gain is None else
                         ", ".join(f"{gain[k]:+.4f}" if k in gain else "-" for k in kinds)})
    return pd.DataFrame(rows).to_string(index=False)


# ------------------------------------------------------------------------------------------
# memory


def _peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def memory_child(args) -> dict:
    """One run in this (fresh) process: pretrain on ``args.corpus``, then the peak RSS."""
    from quantformer.train.pretrain import pretrain

    t0 = time.perf_counter()
    record = pretrain(args.corpus, Path(args.out), args.model, max_steps=args.steps,
                      max_length=args.max_length, batch_size=args.batch_size,
                      buffer_docs=args.buffer_docs, valid_fraction=0.01, seed=args.seed,
                      device=args.device, quiet=True, checkpoint_every=10 ** 9,
                      say=lambda *_: None)
    return {"documents": record["corpus"]["n_docs"], "buffer_docs": args.buffer_docs,
            "objective": record["objective"], "steps": args.steps,
            "seconds": round(time.perf_counter() - t0, 1), "peak_rss_mib": _peak_rss_mb()}


def memory(args) -> dict:
    """Peak RSS of 10,000 vs 100,000 streamed documents, and 100,000 as one buffer."""
    tweets = semeval_raw(Path(args.data_dir))["text"].tolist()
    work = Path(tempfile.mkdtemp(prefix="bench-pretrain-mem-"))
    runs = []
    for n, buffer in ((10_000, 10_000), (100_000, 10_000), (100_000, 100_000)):
        corpus = work / f"corpus{n}.{args.format}"
        if not corpus.exists():
            texts = [f"{tweets[i % len(tweets)]} ({i // len(tweets) + 1})" for i in range(n)]
            if args.format == "csv":
                pd.DataFrame({"text": texts}).to_csv(corpus, index=False)
            else:
                pd.DataFrame({"text": texts}).to_parquet(corpus, row_group_size=2048)
        cmd = [sys.executable, __file__, "--memory-child", str(corpus), "--out",
               str(work / f"enc{n}-{buffer}"), "--buffer-docs", str(buffer),
               "--steps", str(args.steps), "--batch-size", str(args.batch_size),
               "--max-length", str(args.max_length), "--seed", str(args.seed),
               "--device", args.device, *(["--model", args.model] if args.model else [])]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        row["load"] = os.getloadavg()[0]
        row["format"] = args.format
        print(json.dumps(row), flush=True)
        runs.append(row)
    base = runs[0]["peak_rss_mib"]
    return {"runs": runs, "ratio_100k_streamed": round(runs[1]["peak_rss_mib"] / base, 3),
            "ratio_100k_one_buffer": round(runs[2]["peak_rss_mib"] / base, 3),
            "machine": machine()}


OBJECTIVES = ("auto", "mlm", "tsdae")


def flags_given(args, *names: str) -> list[str]:
    """The flags among ``names`` (argparse destinations) given on the command line."""
    return [f"--{k.replace('_', '-')}" for k in names if getattr(args, k) is not None]


def accuracy_settings(p: argparse.ArgumentParser, args) -> None:
    """``args.objective_list`` and ``args.seed_list`` from the flags; --smoke's defaults for
    the flags not given (SMOKE); a bad value is refused before any work."""
    objectives = (args.objectives or args.objective).split(",")
    bad = [o for o in objectives if o not in OBJECTIVES]
    if bad:
        p.error(f"--objectives: unknown {', '.join(bad)}; choose among {', '.join(OBJECTIVES)}")
    args.objective_list = list(dict.fromkeys(objectives))
    try:
        args.seed_list = ([int(x) for x in args.seeds.split(",")] if args.seeds
                          else [1] if args.smoke else [1, 2, 3])
    except ValueError:
        p.error(f"--seeds: integers separated by commas, not {args.seeds!r}")
    unknown = [t for t in args.tasks.split(",") if t not in TASKS]
    if unknown:
        p.error(f"--tasks: unknown {', '.join(unknown)}; choose among {', '.join(TASKS)}")
    if args.setfit_per_class is None:
        args.setfit_per_class = SMOKE["setfit_per_class"] if args.smoke else 16
    if args.smoke and args.finetune_max_length is None:
        args.finetune_max_length = SMOKE["finetune_max_length"]
    pretrain_flags = flags_given(args, "pretrain_epochs", "pretrain_batch_size", "pretrain_lr")
    if args.smoke and pretrain_flags:
        p.error(f"{', '.join(pretrain_flags)}: --smoke pretrains 2 steps of 8 documents with "
                "pretrain's other defaults; drop --smoke or these")
    given = pretrain_flags + flags_given(args, "base_from", "seeds", "objectives")
    if given and not args.accuracy:
        p.error(f"{', '.join(given)}: options of --accuracy; add --accuracy or drop them")
    if args.base_from and not Path(args.base_from).is_file():
        p.error(f"--base-from: no file {args.base_from!r}; give the --out JSON of an earlier "
                "--accuracy run")
    if min(args.setfit_per_class, args.finetune_max_length or 8) < 1:
        p.error("--setfit-per-class and --finetune-max-length: positive integers")


EXTRA = ("pyreadr", "xgboost", "captum", "setfit", "krippendorff", "ppi_py", "Stemmer",
         "charset_normalizer", "yaml", "dask", "distributed", "onnxruntime", "matplotlib")


def main(argv=None) -> int:
    from quantformer.cli._options import positive  # the CLI's own check of a count

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--accuracy", action="store_true", help="base vs adapted macro-F1")
    p.add_argument("--objective", default="auto", choices=OBJECTIVES,
                   help="--accuracy: the pretraining objective (auto: pretrain's own choice)")
    p.add_argument("--objectives", default=None,
                   help="--accuracy: several objectives, e.g. mlm,tsdae (replaces --objective)")
    p.add_argument("--seeds", default=None, help="--accuracy: seeds (default 1,2,3; smoke 1)")
    p.add_argument("--pretrain-epochs", type=positive(float), default=None,
                   help="--accuracy: pretraining epochs (default: pretrain's own, 1)")
    p.add_argument("--pretrain-batch-size", type=positive(int), default=None,
                   help="--accuracy: pretraining batch size (default: pretrain's own, 32)")
    p.add_argument("--pretrain-lr", type=positive(float), default=None,
                   help="--accuracy: pretraining learning rate (default: pretrain's own, "
                        "5e-5 masked LM, 3e-5 TSDAE)")
    p.add_argument("--base-from", default=None,
                   help="--accuracy: the base model's scores from an earlier --out JSON")
    p.add_argument("--finetune-max-length", type=int, default=None,
                   help="--accuracy: tokens per document of the fine-tuning (default: the "
                        "recipe's 512; smoke 128)")
    p.add_argument("--setfit-per-class", type=int, default=None,
                   help="--accuracy: SetFit's training documents per class (16; smoke 4)")
    p.add_argument("--no-setfit", action="store_true", help="--accuracy: skip SetFit")
    p.add_argument("--no-zeroshot", action="store_true",
                   help="--accuracy: skip the embedding zero-shot")
    p.add_argument("--memory", action="store_true", help="peak RSS, 10k vs 100k documents")
    p.add_argument("--format", default="parquet", choices=("parquet", "csv"),
                   help="--memory: the corpora's file format")
    p.add_argument("--memory-child", dest="corpus", default=None, help=argparse.SUPPRESS)
    p.add_argument("--buffer-docs", type=int, default=10_000, help=argparse.SUPPRESS)
    p.add_argument("--smoke", action="store_true", help="one seed, few documents (a check)")
    p.add_argument("--tasks", default="abortion,toxic,handeset")
    p.add_argument("--steps", type=int, default=30, help="speed and --memory: steps (30)")
    p.add_argument("--batch-size", type=int, default=32,
                   help="speed and --memory: batch size (32; --accuracy: --pretrain-batch-size)")
    p.add_argument("--max-length", type=int, default=64,
                   help="speed and --memory: tokens per document (64)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default=None, help="base model folder (default: bundled)")
    p.add_argument("--data-dir", default=str(DATA))
    p.add_argument("--out", default=None, help="write the result as JSON here")
    args = p.parse_args(argv)
    accuracy_settings(p, args)
    if args.corpus:  # one run of --memory, in its own process
        print(json.dumps(memory_child(args)))
        return 0
    result = (accuracy(args) if args.accuracy else memory(args) if args.memory
              else speed(args))
    result["imported_extras"] = sorted(m for m in EXTRA if m in sys.modules)
    print(json.dumps(result, indent=2))
    write_json(args.out, result)
    if args.accuracy:
        print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
