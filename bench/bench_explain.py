"""Benchmarks of ``quantformer explain`` and ``quantformer behave`` (report in bench/RESULTS.md).

Parts (``--parts``, default ``abortion,behave``):

``abortion``  the bundled default model fine-tuned on the TweetEval Abortion training tweets
              (train + val, 653; max_length 128, default settings otherwise), then the 280
              test tweets explained with the default adaptive steps: share of documents whose
              completeness gap is under 5 %, documents per second, the ``--check`` figures
              (deletion AOPC of the top 5 attributed words vs 5 random words; Spearman rank
              correlation with a re-initialised model, Adebayo et al. 2018). Baseline in the
              same run: what transformers-interpret 0.10 computes per document, Captum
              ``LayerIntegratedGradients`` on one document at a time, 50 steps (Captum's
              default Gauss-Legendre rule), the same baseline (pad tokens, special tokens
              kept), with the convergence delta it asks Captum for. Correctness first: with
              50 steps both give the same token attributions (max absolute difference).
              With ``--transformers-interpret``, transformers-interpret 0.10 itself is timed
              on the same tweets too (its ``SequenceClassificationExplainer`` with its
              defaults, one tweet at a time).
``toxic``     the same speed comparison on 100 Jigsaw toxic comments at 512 tokens, with a
              model fine-tuned on 1,000 comments (seeded split as in bench_finetune.py).
``behave``    ``quantformer behave`` on the Abortion model and the 280 test tweets: negation
              (``down:favor``), names and typos (invariance); fail rates with Wilson 95 %
              intervals.

Fine-tuned models are kept in ``--models`` (outside the repository) and reused when there.
Speeds: documents per wall-clock second and per CPU second of this process (``--threads``
torch threads, 2 by default); the CPU figure is robust to other jobs on a shared machine.

Needs ``../shared/data`` next to the repository (never copied into it), or ``--data``.

Method notes. ``explain``'s default steps are adaptive nested trapezoid rules: 9 points of the
integration path for every document, then 17, 33 and 65 for documents whose completeness gap
exceeds 5 %, each level adding the midpoints and reusing the gradients already computed (chosen
on training tweets by ``explain_schedule.py``). The baselines: transformers-interpret 0.10
itself (``--transformers-interpret``; ``SequenceClassificationExplainer(model, tokenizer)(text)``
with its defaults: 50 Gauss-Legendre steps, the predicted class's softmax probability,
L2-normalised, one document at a time; installed for the bench with ``pip install --no-deps
transformers-interpret==0.10.0``; it stops past 512 tokens, so it is not run on Toxic), and the
computation it runs written out: Captum ``LayerIntegratedGradients`` one document at a time,
50 steps, same baseline (pad tokens, special tokens kept), with the convergence delta. The
stand-in attributes the logit so that both runners compute the same thing (same cost per
step); at ``--steps 50`` both give the same token attributions. Its cost came within 4 % of
transformers-interpret's, which confirms that it measures what the package spends. ``--check``
figures: deletion AOPC of the 5 top attributed words vs 5 random words; mean Spearman
correlation with the attributions of a fully re-initialised model (Adebayo et al. 2018).
Earlier runs (2026-12-02): before the nested schedule (commit 98af176, Gauss-Legendre 16, 48,
128) explain ran at 0.92x wall of the per-document computation; with the nested schedule but
two extra forward passes per document (commit 2b9ea05) 2.40x at a low load. At 2 torch threads
on the shared 2-core machine fine-tuning stalled (OpenMP threads waiting at barriers), so the
figures are at one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

BASELINE_STEPS = 50  # transformers-interpret's n_steps default
GAP = 0.05


def model_for(name: str, models: Path, train: pd.DataFrame, **kw):
    """The fine-tuned model ``models/name``: loaded if there, else fine-tuned and saved."""
    import quantformer as qf
    from quantformer.infer.load import load_model

    path = models / name
    if (path / "quantformer.json").exists() or (path / "config.json").exists():
        print(f"{name}: reusing the fine-tuned model", flush=True)
        return load_model(str(path), device="cpu")
    t = time.time()
    clf = qf.finetune(train, seed=1, quiet=True, device="cpu", **kw)
    clf.save(path)
    print(f"{name}: fine-tuned on {len(train)} documents in {time.time() - t:.0f} s "
          f"({kw})", flush=True)
    return load_model(str(path), device="cpu")


class PerDocument:
    """Captum LayerIntegratedGradients one document at a time, as transformers-interpret runs
    it: no padding, all steps in one batch, ``return_convergence_delta=True``. The target is
    the logit (transformers-interpret explains the softmax probability; the cost is the same,
    and the logit makes the attributions comparable with ``explain``)."""

    def __init__(self, clf):
        from captum.attr import LayerIntegratedGradients

        self.clf = clf
        self.lig = LayerIntegratedGradients(self.forward, clf.model.get_input_embeddings())

    def forward(self, ids, mask, types):
        batch = {"input_ids": ids, "attention_mask": mask}
        if types is not None:
            batch["token_type_ids"] = types
        return self.clf.model(**batch).logits.float()

    def attribute(self, win, target: int, steps: int = BASELINE_STEPS):
        import torch

        ids = torch.tensor([win.input_ids])
        base = ids.clone()
        base[0, torch.from_numpy(win.positions)] = self.clf.tokenizer.pad_token_id or 0
        mask = torch.ones_like(ids)
        types = torch.tensor([win.token_type_ids]) if win.token_type_ids else None
        attr, delta = self.lig.attribute(ids, baselines=base, target=int(target),
                                         additional_forward_args=(mask, types), n_steps=steps,
                                         return_convergence_delta=True)
        return attr.sum(-1)[0].detach().numpy().astype(np.float64), float(delta[0])


def clock():
    return time.time(), time.process_time()


def since(t0) -> tuple[float, float]:
    return time.time() - t0[0], time.process_time() - t0[1]


def agreement(clf, frame: pd.DataFrame, n: int) -> float:
    """Max absolute difference of token attributions, explain's batched integration vs the
    per-document computation, both at 50 steps, over the first ``n`` documents."""
    from quantformer.audit.explain import windows
    from quantformer.audit.integrate import Integrator, integrate

    wins, _ = windows(clf, frame["text"].iloc[:n].tolist())
    eng = Integrator(clf)
    logits = eng.all_logits(wins, np.arange(n))
    targets = logits.argmax(axis=1)
    ours = integrate(eng, wins, np.arange(n), targets, steps=BASELINE_STEPS)
    ref = PerDocument(clf)
    return max(float(np.abs(ours["attr"][i] - ref.attribute(wins[i], targets[i])[0]).max())
               for i in range(n))


def the_package(clf, frame: pd.DataFrame) -> dict:
    """transformers-interpret itself: ``SequenceClassificationExplainer`` with its defaults
    (50 Gauss-Legendre steps, the predicted class, all steps in one batch), one document at a
    time, on the same model. Raises ImportError when it is not installed (``pip install
    --no-deps transformers-interpret==0.10.0``: what it needs, captum and transformers, is in
    the environment already)."""
    import importlib.metadata

    from transformers_interpret import SequenceClassificationExplainer

    explainer = SequenceClassificationExplainer(clf.model, clf.tokenizer)
    n = len(frame)
    t0 = clock()
    for text in frame["text"]:
        explainer(str(text))
    wall, cpu = since(t0)
    return {"ti_version": importlib.metadata.version("transformers-interpret"),
            "ti_wall_s": wall, "ti_cpu_s": cpu, "ti_docs_s": n / wall, "ti_docs_cpu_s": n / cpu}


def speed(clf, frame: pd.DataFrame, label: str, check: bool, n_agree: int,
          with_package: bool = False) -> dict:
    """explain (adaptive) vs the per-document 50-step computation on the same documents (and
    ``with_package``: vs transformers-interpret itself)."""
    from quantformer.audit.explain import explain, windows
    from quantformer.audit.explain_check import check as faithfulness

    n = len(frame)
    res = {"task": label, "n_docs": n}
    res["max_abs_diff_50_steps"] = agreement(clf, frame, n_agree)
    print(f"{label}: max |difference| of token attributions at {BASELINE_STEPS} steps, "
          f"{n_agree} documents: {res['max_abs_diff_50_steps']:.2e}", flush=True)
    t0 = clock()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ex = explain(clf, frame)
    wall, cpu = since(t0)
    docs = ex.documents
    res.update(ours_wall_s=wall, ours_cpu_s=cpu, ours_docs_s=n / wall, ours_docs_cpu_s=n / cpu,
               ours_within=float((docs["completeness_gap"] <= GAP).mean()),
               ours_steps=docs["steps"].value_counts().sort_index().to_dict(),
               ours_warnings=[str(w.message)[:160] for w in caught])
    print(f"{label}: explain {n} documents in {wall:.0f} s ({cpu:.0f} CPU s), "
          f"{res['ours_within']:.1%} within 5 %", flush=True)
    diff = (docs["logit"] - docs["baseline_logit"]).to_numpy()
    targets = np.array([clf.labels.index(t) for t in docs["target"]])
    ref = PerDocument(clf)
    t0 = clock()
    wins, _ = windows(clf, frame["text"].tolist())  # tokenising is part of each runner's work
    deltas = np.array([ref.attribute(w, t)[1] for w, t in zip(wins, targets)])
    wall, cpu = since(t0)
    gap = np.abs(deltas) / np.maximum(np.abs(diff), 0.05)
    res.update(base_wall_s=wall, base_cpu_s=cpu, base_docs_s=n / wall, base_docs_cpu_s=n / cpu,
               base_within=float((gap <= GAP).mean()))
    print(f"{label}: per-document 50 steps in {wall:.0f} s ({cpu:.0f} CPU s), "
          f"{res['base_within']:.1%} within 5 %", flush=True)
    res["ratio_wall"] = res["ours_docs_s"] / res["base_docs_s"]
    res["ratio_cpu"] = res["ours_docs_cpu_s"] / res["base_docs_cpu_s"]
    if with_package:
        res.update(the_package(clf, frame))
        res["ratio_ti_wall"] = res["ours_docs_s"] / res["ti_docs_s"]
        res["ratio_ti_cpu"] = res["ours_docs_cpu_s"] / res["ti_docs_cpu_s"]
        print(f"{label}: transformers-interpret {res['ti_version']} in {res['ti_wall_s']:.0f} s "
              f"({res['ti_cpu_s']:.0f} CPU s)", flush=True)
    if check:
        t0 = clock()
        res["check"] = faithfulness(clf, frame, ex)
        res["check_wall_s"] = since(t0)[0]
    return res


def abortion(data: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    import bench_finetune  # the same reader of the TweetEval files

    bench_finetune.DATA = data
    return bench_finetune.abortion()


def toxic(data: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(1,000 training comments, 100 test comments): bench_finetune.py's seeded split."""
    import quantformer as qf

    frame = qf.read_frame(data / "jigsaw_toxic" / "jigsaw_5k.csv", text_col="comment_text",
                          label_col="toxic", id_col="id")
    perm = np.random.default_rng(1).permutation(len(frame))
    return frame.iloc[np.sort(perm[1000:2000])], frame.iloc[np.sort(perm[:100])]


SUITE = """\
- name: "negation: adding a negation lowers favor"
  perturb: negation
  expect: "down:favor"
- name: "names: another first name"
  perturb: names
  expect: same
- name: "typos: two letters swapped"
  perturb: typos
  expect: same
"""


def behave(model: Path, test: pd.DataFrame) -> list[dict]:
    """``quantformer behave --suite`` on the test tweets, through the CLI."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        test[["doc_id", "text", "label"]].to_csv(tmp / "test.csv", index=False)
        (tmp / "suite.yaml").write_text(SUITE)
        cmd = [sys.executable, "-m", "quantformer", "behave", "--model", str(model),
               "--input", str(tmp / "test.csv"), "--suite", str(tmp / "suite.yaml"),
               "--out", str(tmp / "out.json"), "--device", "cpu"]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
        subprocess.run(cmd, check=True, env=env)
        return json.loads((tmp / "out.json").read_text())["tests"]


def show_speed(rows: list[dict]) -> None:
    from quantformer._core.show import print_table

    table = pd.DataFrame([{
        "task": r["task"], "docs": r["n_docs"], "explain docs/s": r["ours_docs_s"],
        "per-doc 50 docs/s": r["base_docs_s"], "ratio (wall)": r["ratio_wall"],
        "ratio (CPU)": r["ratio_cpu"], "explain within 5%": r["ours_within"],
        "per-doc within 5%": r["base_within"], "max |diff| @50": r["max_abs_diff_50_steps"],
    } for r in rows])
    print_table(table, title="explain (adaptive steps) vs per-document Captum LIG, 50 steps")
    for r in rows:
        if "ti_docs_s" in r:
            print(f"{r['task']}: transformers-interpret {r['ti_version']} itself "
                  f"{r['ti_docs_s']:.2f} docs/s ({r['ti_docs_cpu_s']:.2f} per CPU s): explain "
                  f"{r['ratio_ti_wall']:.2f}x wall, {r['ratio_ti_cpu']:.2f}x CPU", flush=True)
    for r in rows:
        print(f"{r['task']}: steps used {r['ours_steps']}; explain {r['ours_wall_s']:.0f} s "
              f"wall / {r['ours_cpu_s']:.0f} CPU s, per-document {r['base_wall_s']:.0f} s / "
              f"{r['base_cpu_s']:.0f} CPU s; warnings: {r['ours_warnings']}")
        if "check" in r:
            c = r["check"]
            print(f"{r['task']} --check: AOPC top {c['aopc_top']:.4f} vs random "
                  f"{c['aopc_random']:.4f} (ratio {c['aopc_top'] / c['aopc_random']:.2f}, "
                  f"target >= 2; {c['aopc_n_docs']} documents), randomisation Spearman "
                  f"{c['randomisation_spearman']:.3f} (absolute values "
                  f"{c['randomisation_spearman_abs']:.3f}; {c['randomisation_n_docs']} "
                  f"documents) ({r['check_wall_s']:.0f} s)", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(DATA), help="the shared data folder")
    p.add_argument("--models", default=str(ROOT.parent / "models"),
                   help="folder for the fine-tuned models (outside the repository)")
    p.add_argument("--parts", default="abortion,behave", help="abortion, toxic, behave")
    p.add_argument("--threads", type=int, default=2, help="torch threads (2)")
    p.add_argument("--agree-docs", type=int, default=20,
                   help="documents of the 50-step agreement check (20)")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.add_argument("--transformers-interpret", action="store_true",
                   help="abortion: also time transformers-interpret 0.10 itself on the same "
                        "tweets (pip install --no-deps transformers-interpret==0.10.0; it "
                        "stops past 512 tokens, so it is not run on the Toxic comments)")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    data, models = Path(args.data), Path(args.models)
    models.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    rows, out = [], {}
    if "abortion" in parts or "behave" in parts:
        train, test = abortion(data)
        clf = model_for("explain-abortion", models, train, max_length=128)
    if "abortion" in parts:
        rows.append(speed(clf, test[["doc_id", "text"]], "Abortion", True, args.agree_docs,
                          with_package=args.transformers_interpret))
    if "toxic" in parts:
        ttrain, ttest = toxic(data)
        tclf = model_for("explain-toxic-1000", models, ttrain, max_length=512)
        rows.append(speed(tclf, ttest[["doc_id", "text"]], "Toxic (512)", False,
                          min(args.agree_docs, 5)))
    if rows:
        show_speed(rows)
        out["speed"] = rows
    if "behave" in parts:
        out["behave"] = behave(models / "explain-abortion", test)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
