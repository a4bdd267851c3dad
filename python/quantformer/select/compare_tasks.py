"""``compare --task regression|multilabel``: the fine-tuned Transformer against bag-of-words
baselines for continuous scores and several labels per document (issue 15).

The design is :mod:`quantformer.select.compare`'s (training sizes x repeats, every model on the same
samples, scored on the whole test set), with the task's metrics
(:mod:`quantformer.select.scoring`) and baselines (:mod:`quantformer.train.task_baselines`):

==========  =====================  ================================================
task        table (selection)      ``results`` columns
==========  =====================  ================================================
regression  RMSE (lower: better)   rmse, mae, pearson, spearman, r2
multilabel  macro-F1 over labels   macro_f1, micro_f1, subset_accuracy, hamming_loss,
                                   f1_<label> per label
==========  =====================  ================================================

Samples are plain (not stratified) random draws, seeded as in classification.
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace

import pandas as pd

from ..models.hub import model_label
from ..scale.cluster import map_runs
from ..train.finetune import default_hyperparameters, finetune_spec
from ..train.spec import TrainSpec
from .scoring import summary_of
from ..train.task_baselines import check_task_models, describe, fit_task_baseline
from .common import CompareResult, build_table, check_sizes, draw_sample, margins

RESULT_KEYS = {"regression": ("rmse", "mae", "pearson", "spearman", "r2"),
               "multilabel": ("macro_f1", "micro_f1", "subset_accuracy", "hamming_loss")}


def run_task_one(run: tuple, *, samples: dict, test: pd.DataFrame, scoring, seed: int,
                 folds: int, spec: TrainSpec) -> dict:
    """Train one model on one sample and score it on ``test`` (a Dask task with a scheduler).

    Returns:
        ``{"metrics": {...}, "seconds", "params"}``.
    """
    size, repeat, name = run
    sample = samples[(size, repeat)]
    t0 = time.perf_counter()
    if name == "default":
        clf = finetune_spec(scoring.fit_frame(sample),
                            replace(spec, seed=seed + repeat, quiet=True))
        hp = default_hyperparameters(spec.model)
        params = {"lr": spec.lr or hp["lr"], "epochs": spec.epochs or hp["epochs"]}
    else:
        clf = fit_task_baseline(sample, name, scoring.fitted(sample), folds=folds,
                                seed=seed + repeat)
        params = dict(clf.params)
    seconds = time.perf_counter() - t0
    metrics = summary_of(scoring.score(clf, test), RESULT_KEYS[scoring.task])
    return {"metrics": metrics, "seconds": seconds, "params": params}


def compare_task(train, test, *, scoring, names, spec, train_sizes, repeats, seed, folds,
                 quiet, title, scheduler):
    """The regression / multi-label comparison (arguments as :func:`quantformer.select.compare`).

    Raises:
        InputError: a model that is classification only, sizes larger than the training data,
            a sample in which a label has one value only (or the outcome one number), an
            empty bag-of-words.
    """
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    model = spec.model
    check_task_models(names, scoring.task)
    data = scoring.rows(train, "training data")
    n_test_all = len(test)
    test = scoring.rows(test, "test data", "cannot be scored and are left out of the scores")
    sizes = check_sizes(train_sizes, len(data))
    samples = {(s, r): draw_sample(data, s, r, seed, stratify=False)
               for s in sizes for r in range(1, repeats + 1)}
    for (s, r), smp in samples.items():  # every sample can be trained on, before any run
        where = f"the training sample of {s} documents (repeat {r})"
        if any(n != "default" for n in names):
            scoring.check(smp, folds, where=where)  # the baselines' CV folds too
        else:
            scoring.fitted(smp, where=where)
    descriptions = {n: f"{model_label(model)}, fine-tuned" if n == "default" else describe(n)
                    for n in names}
    plan = [(s, r, name) for (s, r) in samples for name in names]
    say(f"compare --task {scoring.task}: {len(names)} model(s) x {len(sizes)} size(s) x "
        f"{repeats} repeat(s) = {len(plan)} runs; test set {len(test)} documents")
    m, done = scoring.metric, []

    def report(i: int, res: dict) -> None:
        done.append(i)
        s, r, name = plan[i]
        say(f"  run {len(done)}/{len(plan)}: {name}, n = {s}, repeat {r}: {m} "
            f"{res['metrics'][m]:.4f} ({res['seconds']:.0f} s)")

    task = functools.partial(run_task_one, samples=samples, test=test, scoring=scoring,
                             seed=seed, folds=folds, spec=spec)
    rows, runs = [], []
    for (s, r, name), res in zip(plan, map_runs(task, plan, scheduler, on_result=report)):
        rows.append({"model": name, "train_size": int(s), "repeat": int(r), **res["metrics"],
                     "seconds": res["seconds"]})
        runs.append({"model": name, "train_size": s, "repeat": r, **res["params"]})
    results = pd.DataFrame(rows)
    labels = scoring.labels(data)
    summary = {"title": title, "task": scoring.task, "metric": m,
               "higher_is_better": scoring.higher_is_better, "models": descriptions,
               "transformer": model_label(model), "train_sizes": sizes, "repeats": repeats,
               "seed": seed, "folds": folds, "n_train": len(data), "n_test": len(test),
               "n_test_unscored": n_test_all - len(test), "labels": labels,
               "by_size": margins(results, m, scoring.higher_is_better)}
    return CompareResult(results=results, table=build_table(results, names, descriptions, m),
                         runs=runs, summary=summary)
