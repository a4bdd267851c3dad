"""The paper's comparison in one call: fine-tuned Transformer vs SVM and XGBoost baselines.

Wankmüller (2022), Table 1 and Figure 10: macro-F1 on a fixed test set for each model, for
training sets of several sizes drawn from the training data, repeated with different draws.

For every training size ``s`` and repeat ``r`` one stratified sample of ``s`` training
documents is drawn (scikit-learn ``train_test_split``, seeded by ``(seed, s, r)``, so every
model sees the same sample and a partial re-run draws the same samples); each model is trained
on it and scored on the whole test set. Models:

``default``
    the Transformer (``model``, default all-MiniLM-L6-v2) fine-tuned with its size-based
    default learning rate and epochs (:func:`quantformer.train.finetune.default_hyperparameters`),
    seed ``seed + r``. Use :func:`quantformer.select.tune` to tune it by cross-validation.
``svm-bow``, ``svm-vec``, ``xgb-bow``, ``xgb-vec``
    the baselines of :mod:`quantformer.train.baselines`, each tuned by stratified ``folds``-fold CV
    on the sample (the vectors are averaged MiniLM input embeddings unless ``vectors`` names a
    GloVe file).

``seconds`` is the wall time of training (including the baselines' CV tuning), not prediction.

With ``llm`` a large language model codes the test documents from the codebook, zero-shot and
k-shot, in rows ``llm`` and ``llm-<k>shot`` beside these (:mod:`quantformer.select.compare_llm`).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd

from .._core.errors import InputError, unused_error
from ..io.columns import LABEL_COLUMN
from ..io.modeldir import hf_quiet
from ..models.hub import model_label
from ..scale.cluster import map_runs
from ..score.metrics import macro_f1, predicted_labels
from ..train.baselines import BASELINES, WordVectors, check_folds, fit_baseline, training_rows
from ..train.baselines import describe as describe_baseline
from ..train.finetune import finetune_spec
from ..train.spec import TrainSpec
from ..train.task_baselines import TASK_BASELINES, check_task_models
from .common import (
    TRANSFORMERS,
    CompareResult,
    build_table,
    check_sizes,
    draw_sample,
    margins,
)
from .compare_llm import check_llm_options, describe_llm, llm_names, llm_summary, open_llm
from .compare_llm import options_given, run_llm
from .compare_tasks import compare_task
from .methods import compare_kwargs, sample_kwargs
from .scoring import make_scoring

MODELS = ("default", *BASELINES)
KNOWN = (*MODELS, "setfit", "nli")
#: compare's own settings, which reach the fine-tuned runs but are no fine-tuning setting
OWN_SETTINGS = ("seed", "quiet", "device", "task", "label_cols", "label_sep", "hypothesis",
                "label_phrases", "nli_pairs")


def _check_repeats(repeats, name: str) -> None:
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise InputError(f"{{{name}}} must be a whole number of at least 1, not {repeats!r}",
                         params=[name])


#: the rules of compare's values: fine-tuning's, and its repeats
COMPARE_PARAMETERS = {**TrainSpec.PARAMETERS, "repeats": _check_repeats}


def parse_models(models) -> list[str]:
    """Validate model names (a list or a comma-separated string), keeping their order.

    Raises:
        InputError: an unknown or repeated name (the message lists the valid ones).
    """
    names = split_names(models)
    bad = [m for m in names if m not in KNOWN]
    if bad or not names:
        raise InputError(f"unknown model name(s) in {{models}}: {', '.join(bad) or '(none)'}; "
                         f"valid names are: {', '.join(KNOWN)}", params=["models"])
    if len(set(names)) != len(names):
        raise InputError("{models} names a model twice; list each once", params=["models"])
    return names


def split_names(models) -> list[str]:
    """Model names from a list or a comma-separated string, blanks dropped, in order."""
    names = [m.strip() for m in models.split(",")] if isinstance(models, str) else \
        [str(m).strip() for m in models]
    return [m for m in names if m]


def describe(name: str, model: str | None = None, vectors: str | None = None) -> str:
    """The report name of a model: what it is, naming the vectors and the Transformer."""
    if name == "default":
        return f"{model_label(model)}, fine-tuned"
    if name == "setfit":
        return f"{model_label(model)}, SetFit few-shot (Tunstall et al. 2022)"
    if name == "nli":
        return f"{model_label(model)}, NLI on class hypotheses (Laurer et al. 2023)"
    return describe_baseline(name, vectors)


def run_one(name: str, sample: pd.DataFrame, test: pd.DataFrame, *, repeat: int, seed: int,
            folds: int, vectors, spec: TrainSpec, fitters: dict | None, quiet: bool,
            method_options: dict | None = None) -> dict:
    """Train one model on one sample and score it on ``test`` (rows with text and label).

    ``spec``: the fine-tuning settings of the fine-tuned models (their ``model`` among them).

    ``method_options``: ``{model name: finetune arguments}`` of the fine-tuned models (the
    ``nli`` model's hypothesis, label phrases and pairs; :func:`quantformer.tune_methods.
    compare_kwargs`).

    Returns:
        ``{"macro_f1", "accuracy", "seconds", "params"}``.
    """
    from sklearn.metrics import accuracy_score

    labels = sorted(set(sample[LABEL_COLUMN]) | set(test[LABEL_COLUMN]))
    t0 = time.perf_counter()
    if fitters and name in fitters:
        clf = fitters[name](sample, seed=seed + repeat)
        params = dict(getattr(clf, "params", {}) or {})
    elif name in TRANSFORMERS:
        options = sample_kwargs((method_options or {}).get(name, {}),
                                sample[LABEL_COLUMN].unique())
        method = name if name in ("setfit", "nli") else "standard"
        run = replace(spec, seed=seed + repeat, quiet=quiet, method=method).with_keywords(
            **options)
        clf = finetune_spec(sample, run)
        record = getattr(clf, "record", None) or {}
        hp = record.get("hyperparameters", {})
        params = {"lr": hp.get("lr", hp.get("body_lr")), "epochs": hp.get("epochs")}
        if "n_pairs" in record:  # nli: the premise-hypothesis pairs trained on
            params["n_pairs"] = record["n_pairs"]
    else:
        clf = fit_baseline(sample, name, folds=folds, seed=seed + repeat, vectors=vectors)
        params = {**clf.best_params, "cv_macro_f1": clf.cv_score}
    seconds = time.perf_counter() - t0
    if hasattr(clf, "predict_labels"):
        pred = clf.predict_labels(test["text"].tolist())
    else:
        pred = predicted_labels(clf, test)
    truth = test[LABEL_COLUMN].astype(str).tolist()
    acc = float(accuracy_score(truth, ["\0" if p is None else p for p in pred]))
    return {"macro_f1": macro_f1(truth, pred, labels), "accuracy": acc, "seconds": seconds,
            "params": params}


def _run_planned(run: tuple, *, samples: dict, test: pd.DataFrame, **kw) -> dict:
    """:func:`run_one` for one (size, repeat, model) of the plan (a Dask task with a
    scheduler)."""
    s, r, name = run
    return run_one(name, samples[(s, r)], test, repeat=r, quiet=True, **kw)


def compare(
    train: pd.DataFrame,
    test: pd.DataFrame,
    *,
    models=None,
    model: str | None = None,
    train_sizes=None,
    repeats: int = 5,
    seed: int = 1,
    folds: int = 5,
    vectors: str | None = None,
    quiet: bool = False,
    finetune_kwargs: dict | None = None,
    spec: TrainSpec | None = None,
    fitters: dict | None = None,
    title: str | None = None,
    scheduler: str | None = None,
    task: str = "classification",
    label_cols: list[str] | None = None,
    label_sep: str | None = None,
    hypothesis: str | None = None,
    label_phrases=None,
    nli_pairs: str = "balanced",
    llm: str | None = None,
    codebook: list | None = None,
    shots: int = 0,
    endpoint: str | None = None,
    api_key_env: str | None = None,
) -> CompareResult:
    """Train every model on samples of every size, score each on the test set (Table 1).

    Args:
        train, test: labelled corpus frames. Documents without a label or text are left out
            of training and of the scores (a warning counts them; ``summary["n_test"]`` is
            the number of test documents scored, ``n_test_unscored`` the others).
        models: names from :data:`MODELS` (list or comma-separated string), in table order;
            ``None`` = all of the task's models (classification: :data:`MODELS`; regression:
            ``default``, ``ridge-bow``; multilabel: ``default``, ``logit-bow``, ``svm-bow``;
            see :mod:`quantformer.train.task_baselines`).
        model: the Transformer for ``default`` (``None`` = bundled all-MiniLM-L6-v2).
        train_sizes: training-set sizes (e.g. ``[500, 1000, 2000]``); ``None`` = all training
            documents once.
        repeats: samples per size (5, as in the paper); with all documents, repeats differ
            only in the seeds.
        seed: base seed of the samples, the CV folds and the fine-tuning runs.
        folds: CV folds for tuning the baselines (5).
        vectors: GloVe/word2vec text file for the ``-vec`` baselines; default the averaged
            MiniLM input embeddings.
        quiet: no progress lines and no transformers progress bars.
        finetune_kwargs: extra arguments for :func:`quantformer.train.finetune.finetune` (e.g.
            ``max_length``, ``epochs``, ``lr``, ``device``; ``truncation="chunks"`` with
            ``stride``, ``max_chunks``, ``aggregate``, ``chunk_training``: the fine-tuned
            candidates read every document whole in windows, in training and on the test
            set; the baselines read the whole text anyway and are unaffected).
        spec: the fine-tuning settings as one value
            (:class:`~quantformer.train.spec.TrainSpec`, default finetune's defaults), with
            ``model``, the task's labels and ``finetune_kwargs`` applied over it.
        fitters: ``{name: fit(sample, seed=...) -> classifier}`` to add or replace models
            (the classifier needs ``labels`` + ``predict_proba`` or ``predict_labels``).
        title: figure title.
        scheduler: ``None`` (runs one after another here), ``"local:N"`` or
            ``"tcp://host:port"``: every (model, size, repeat) run is a Dask task
            (:func:`quantformer.scale.dask.map_runs`); each is seeded as in the serial run, so
            the results equal it (``seconds`` aside).
        task: ``classification`` (default), ``regression`` (RMSE, MAE, Pearson, Spearman,
            R^2; the table by RMSE) or ``multilabel`` (macro-/micro-F1, subset accuracy,
            Hamming loss, per-label F1; the table by macro-F1 over labels); see
            :mod:`quantformer.select.compare_tasks`.
        label_cols, label_sep: multilabel labels, as in :func:`quantformer.train.finetune.finetune`.
        hypothesis, label_phrases, nli_pairs: the ``nli`` model's template (one ``{}``,
            default ``"This text is about {}."``), class -> label phrase (a dict, ``"a=x,b=y"``
            or a list of ``"a=x"``; default: the class names) and training pairs
            (``balanced`` or ``all``), the same in every run, as ``finetune --method nli``
            takes them (Laurer et al. 2023; :func:`quantformer.train.nli.nli_finetune`).
            Recorded in ``summary["nli"]`` and under the Markdown table.
        llm: a large language model (a causal LM's Hugging Face id or folder, or with
            ``endpoint`` the model name the server serves) that codes the test documents from
            ``codebook``: rows ``llm`` (zero-shot) and, with ``shots``, ``llm-<k>shot``
            (:mod:`quantformer.select.compare_llm`, which codes with
            :func:`quantformer.infer.annotate.annotate`). Classification only; the LLM runs
            in this process after the other runs (on ``finetune_kwargs["device"]``).
        codebook: the codebook entries (``{"label", "description"?, "examples"?}``, as
            :func:`quantformer.io.codebook.make_codebook` reads them); its labels
            must include every class of the corpus.
        shots: k-shot examples drawn from each training sample's human codes (default 0:
            zero-shot only); never a test document.
        endpoint, api_key_env: an OpenAI-compatible server's base URL and the name of the
            environment variable holding its key (never the key itself), as for
            ``quantformer annotate``.

    Returns:
        :class:`CompareResult` (for regression and multilabel the ``results`` metric columns
        and the table's ``rmse_*`` / ``f1_*`` columns are the task's, see
        :mod:`quantformer.select.compare_tasks`).

    Raises:
        InputError: unknown model names (lists the valid ones), sizes larger than the training
            data, a class with fewer documents than ``folds`` in some sample (names it and
            suggests fewer folds), a bad vectors file, repeats < 1, a model that is
            classification only with another task (names the valid ones), a label with one
            value only in a multi-label sample; NLI options without ``nli`` in ``models``, a
            bad template or label phrase, a class without a phrase, an ``nli`` model without
            an entailment output (all before any run); the LLM options' problems of
            :func:`quantformer.select.compare_llm.check_llm_options`, an endpoint that does not
            answer, an ``llm`` that is not a causal LM (before any run).
    """
    import contextlib

    _refuse_own_options(finetune_kwargs)
    spec = (spec or TrainSpec()).with_keywords(
        task=task, label_cols=label_cols, label_sep=label_sep,
        **({} if model is None else {"model": model}), **(finetune_kwargs or {}))
    with hf_quiet() if quiet else contextlib.nullcontext():
        return _compare(train, test, spec, models=models, train_sizes=train_sizes,
                        repeats=repeats, seed=seed, folds=folds, vectors=vectors, quiet=quiet,
                        fitters=fitters, title=title, scheduler=scheduler, nli_options=dict(
                            hypothesis=hypothesis, label_phrases=label_phrases,
                            nli_pairs=nli_pairs), llm_options=dict(
                            llm=llm, codebook=codebook, shots=shots, endpoint=endpoint,
                            api_key_env=api_key_env))


def _compare(train, test, spec: TrainSpec, *, models, train_sizes, repeats, seed, folds,
             vectors, quiet, fitters, title, scheduler=None, nli_options=None,
             llm_options=None) -> CompareResult:
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    task, model = spec.task, spec.model
    scoring = make_scoring(task, spec.label_cols, spec.label_sep)
    _check_finetuned_among(task_model_names(models, task) if task != "classification"
                           else parse_models(MODELS if models is None else models), spec)
    spec.check_values(COMPARE_PARAMETERS, repeats=repeats)  # before any run
    llm_options = llm_options or {}
    if task != "classification":
        given = options_given(llm_options)
        if given:
            rows = "for the language model's rows of a classification comparison"
            raise unused_error(given, f"is {rows}; leave it out with {{task}} {task}",
                               f"are {rows}; leave them out with {{task}} {task}",
                               also=["task"])
        return _compare_task(train, test, scoring=scoring, models=models, spec=spec,
                             train_sizes=train_sizes, repeats=repeats, seed=seed, folds=folds,
                             quiet=quiet, fitters=fitters, title=title, scheduler=scheduler,
                             nli_options=nli_options)
    names = parse_models(MODELS if models is None else models)
    if fitters:
        names = names + [n for n in fitters if n not in names and n not in KNOWN]
    data, test, n_test_all, sizes, method_options, vec, samples = _prepare(
        train, test, names=names, model=model, train_sizes=train_sizes, repeats=repeats,
        seed=seed, folds=folds, vectors=vectors, nli_options=nli_options)
    descriptions = {n: describe(n, model, vectors) if n in KNOWN else n for n in names}
    coder = _open_llm(llm_options, data=data, test=test, samples=samples, device=spec.device)
    say(f"compare: {len(names)} model(s) x {len(sizes)} size(s) x {repeats} repeat(s) = "
        f"{len(names) * len(samples)} runs; test set {len(test)} documents")
    results, runs = _run_plan(names, samples, test, say=say, scheduler=scheduler, seed=seed,
                              folds=folds, vectors=vec, spec=spec, fitters=fitters,
                              method_options=method_options)
    if coder is not None:
        results, runs, names = _add_llm_rows(coder, llm_options, results, runs, names,
                                             descriptions, samples=samples, test=test,
                                             seed=seed, say=say, quiet=quiet)
    table = build_table(results, names, descriptions)
    summary = _summary(results, descriptions, data=data, test=test, n_test_all=n_test_all,
                       sizes=sizes, names=names, title=title, model=model, repeats=repeats,
                       seed=seed, folds=folds, vectors=vectors)
    if "nli" in method_options:
        summary["nli"] = {k: v for k, v in method_options["nli"].items() if k != "method"}
    if coder is not None:
        summary["llm"] = llm_summary(llm_options["llm"], llm_options.get("endpoint"),
                                     llm_options["codebook"], llm_options.get("shots") or 0)
    return CompareResult(results=results, table=table, runs=runs, summary=summary)


def _open_llm(llm_options: dict, *, data, test, samples, device: str):
    """The LLM options checked and the coder opened (None without ``llm``), before any run."""
    o = llm_options
    classes = sorted(set(data[LABEL_COLUMN].astype(str)) | set(test[LABEL_COLUMN].astype(str)))
    _, key = check_llm_options(o.get("llm"), o.get("codebook"), o.get("shots") or 0,
                               o.get("endpoint"), o.get("api_key_env"), classes=classes,
                               samples=samples, test=test)
    if o.get("llm") is None:
        return None
    return open_llm(o["llm"], o.get("endpoint"), key, device)


def _add_llm_rows(coder, llm_options, results, runs, names, descriptions, *, samples, test,
                  seed, say, quiet):
    """The LLM's rows appended to the results, its runs and its names (with descriptions)."""
    shots = int(llm_options.get("shots") or 0)
    labels = sorted(set(test[LABEL_COLUMN].astype(str)).union(
        *(s[LABEL_COLUMN].astype(str) for s in samples.values())))
    rows, llm_runs = run_llm(coder, llm_options["codebook"], samples, test, shots=shots,
                             seed=seed, labels=labels, say=say, quiet=quiet)
    extra = llm_names(shots)
    for n in extra:
        descriptions[n] = describe_llm(n, llm_options["llm"], llm_options.get("endpoint"))
    results = pd.concat([results, pd.DataFrame(rows, columns=results.columns)],
                        ignore_index=True)
    return results, runs + llm_runs, names + extra


def _refuse_own_options(finetune_kwargs: dict | None) -> None:
    """Refuse compare's own options in ``finetune_kwargs``."""
    given = sorted({"task", "label_cols", "label_sep", "hypothesis", "label_phrases",
                    "nli_pairs"} & set(finetune_kwargs or {}))
    if given:
        raise InputError(f"give {', '.join('{' + g + '}' for g in given)} to compare itself, "
                         "not in finetune_kwargs", params=given)


def _check_finetuned_among(names, spec: TrainSpec) -> None:
    """Fine-tuning settings (the ``model`` to fine-tune among them) used only by the
    fine-tuned candidates (``default``, ``setfit``, ``nli``) refused when ``names`` has none
    (compare's own settings aside, :data:`OWN_SETTINGS`).

    Raises:
        InputError: naming the settings given and the fix.
    """
    if any(n in TRANSFORMERS for n in names):
        return
    given = spec.given(leave_out=OWN_SETTINGS)
    if given:
        whose = (f"of the fine-tuned candidates ({', '.join(TRANSFORMERS)}), and {{models}} "
                 "has none")
        raise unused_error(given, f"is a setting {whose}: add one or leave it out",
                           f"are settings {whose}: add one or leave them out", also=["models"])


def _compare_task(train, test, *, scoring, models, spec, fitters, nli_options,
                  **kw) -> CompareResult:
    """A regression or multi-label comparison (:func:`quantformer.select.compare_tasks.
    compare_task`), after refusing the options that are for classification only."""
    names = task_model_names(models, scoring.task)
    compare_kwargs(names, model=spec.model, labels=[], **(nli_options or {}))  # refused
    if fitters:
        raise InputError("fitters= (extra models) are for classification comparisons")
    return compare_task(train, test, scoring=scoring, names=names, spec=spec, **kw)


def _prepare(train, test, *, names, model, train_sizes, repeats, seed, folds, vectors,
             nli_options):
    """Everything checked before the first run: the training and test rows, the sizes, the
    fine-tuned models' options, the word vectors and the samples (with their CV folds).

    Returns:
        ``(data, test, n_test_all, sizes, method_options, vectors, samples)``; ``samples``
        maps ``(size, repeat)`` to a training sample.
    """
    data = training_rows(train, "training data")
    n_test_all = len(test)
    test = training_rows(test, "test data", "cannot be scored and are left out of the scores")
    sizes = check_sizes(train_sizes, len(data))
    method_options = compare_kwargs(names, model=model, labels=sorted(set(data[LABEL_COLUMN])),
                                    **(nli_options or {}))
    vec = None
    if any(n.endswith("-vec") for n in names):
        vec = WordVectors(vectors) if vectors else None
        if vec is not None:  # validate the whole file before any training
            vec.transform(test["text"].tolist())
    samples = {(s, r): draw_sample(data, s, r, seed) for s in sizes for r in range(1, repeats + 1)}
    if any(n in BASELINES for n in names):
        for (s, r), smp in samples.items():
            check_folds(smp[LABEL_COLUMN], folds,
                        where=f"the training sample of {s} documents (repeat {r})")
    return data, test, n_test_all, sizes, method_options, vec, samples


def _run_plan(names, samples, test, *, say, scheduler, **kw) -> tuple[pd.DataFrame, list]:
    """Every (size, repeat, model) run, serially or over ``scheduler``, with a progress line
    as each finishes: the long results frame and the runs' hyperparameters."""
    import functools

    plan = [(s, r, name) for (s, r) in samples for name in names]
    done = []

    def report(i: int, res: dict) -> None:
        done.append(i)
        s, r, name = plan[i]
        say(f"  run {len(done)}/{len(plan)}: {name}, n = {s}, repeat {r}: macro-F1 "
            f"{res['macro_f1']:.4f} ({res['seconds']:.0f} s)")

    task = functools.partial(_run_planned, samples=samples, test=test, **kw)
    rows, runs = [], []
    for (s, r, name), res in zip(plan, map_runs(task, plan, scheduler, on_result=report)):
        rows.append({"model": name, "train_size": s, "repeat": r,
                     "macro_f1": res["macro_f1"], "accuracy": res["accuracy"],
                     "seconds": res["seconds"]})
        runs.append({"model": name, "train_size": s, "repeat": r, **res["params"]})
    results = pd.DataFrame(rows, columns=["model", "train_size", "repeat", "macro_f1",
                                          "accuracy", "seconds"])
    results["train_size"] = results["train_size"].astype("int64")
    results["repeat"] = results["repeat"].astype("int64")
    return results, runs


def _summary(results, descriptions, *, data, test, n_test_all, sizes, names, title, model,
             repeats, seed, folds, vectors) -> dict:
    """``summary`` of :class:`CompareResult`: settings, counts and the margins per size."""
    return {"title": title, "models": descriptions, "transformer": model_label(model),
            "train_sizes": sizes, "repeats": repeats, "seed": seed, "folds": folds,
            "vectors": (vectors or "MiniLM input embeddings (all-MiniLM-L6-v2)")
            if any(n.endswith("-vec") for n in names) else None,
            "n_train": len(data), "n_test": len(test),
            "n_test_unscored": n_test_all - len(test),
            "labels": sorted(set(data[LABEL_COLUMN]) | set(test[LABEL_COLUMN])),
            "by_size": margins(results)}


def task_model_names(models, task: str) -> list[str]:
    """The models of a regression / multi-label comparison (``None``: all of the task's).

    Raises:
        InputError: a model that is classification only, or a model named twice.
    """
    if models is None:
        return ["default", *TASK_BASELINES[task]]
    names = split_names(models)
    check_task_models(names, task)
    if not names or len(set(names)) != len(names):
        raise InputError("{models} must name each model once", params=["models"])
    return names


