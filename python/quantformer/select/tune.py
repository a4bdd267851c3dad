"""Cross-validated grid search over learning rate x epochs for fine-tuning (paper section 6.4).

Every (learning rate, epochs) pair is its own fine-tuning run with its own linear schedule, on
each of ``folds`` stratified folds of the training data (shuffled with ``seed``), scored by
macro-F1 on the held-out fold. Oversampling, when asked for, is done by
:func:`quantformer.train.finetune.finetune` on the training folds only; the validation fold is scored
as it is. The configuration with the best mean macro-F1 wins; ties go to fewer epochs, then to
the lower rate. It is then refit on all training data and, when a test set is given, scored on
it. With ``task="regression"`` the lowest mean RMSE wins, with ``task="multilabel"`` the best
macro-F1 over labels, on plain shuffled folds (:mod:`quantformer.train.scoring`).

Default grid, by model size (:func:`quantformer.train.finetune.model_size`, from the hidden size):

=======  ====================  ===========
size     learning rates        epochs
=======  ====================  ===========
small    5e-5, 8e-5, 1e-4      3, 4, 5
base     1e-5, 2e-5, 3e-5      2, 3, 4
large    5e-6, 1e-5, 2e-5      2, 3, 4
=======  ====================  ===========

The base grid is the paper's. Small models such as the bundled all-MiniLM-L6-v2 underfit at the
paper's rates (on Abortion: 2e-5 x 3 epochs -> macro-F1 0.44, 8e-5 x 4 -> 0.62), so their grid is
centred on the small-model default of 8e-5 x 4.

``method="setfit"`` (``tune --method setfit``) tunes SetFit (:mod:`quantformer.train.setfit`) the same
way: the learning rate is the body's, the epochs are epochs over the contrastive pairs, and the
default grid is :data:`quantformer.train.setfit.GRID` (body rates 2e-5, 5e-5, 1e-4 x 1, 2 epochs:
from Tunstall et al. 2022's 2e-5 to quantformer's default 1e-4); ``setfit_iterations`` is passed
to every run. ``method="nli"`` (``tune --method nli``) tunes an NLI model fine-tuned on the
classes as hypotheses (Laurer et al. 2023, :mod:`quantformer.train.nli`) over
:data:`quantformer.select.methods.GRID_NLI` (1e-5, 2e-5, 5e-5 x 7, 10 epochs), with the same
``hypothesis``, ``label_phrases`` and ``nli_pairs`` in every run (:mod:`quantformer.select.methods`).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.atomic import write_json
from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN, PREDICTED_COLUMN
from ..io.modeldir import hf_quiet
from ..models.hub import model_label
from ..scale.cluster import map_runs
from ..score.evaluate import evaluate
from ..score.metrics import predicted_labels
from ..train.baselines import is_missing_text, unusable_rows
from ..train.finetune import finetune_spec, model_size
from ..train.spec import TrainSpec
from .common import SavedResult, format_seconds, parse_list, write_table
from .methods import check_nli_model, method_grid, method_kwargs
from .scoring import ClassificationScoring, make_scoring
from .timing import estimate_seconds, step_seconds

GRIDS = {
    "small": ((5e-5, 8e-5, 1e-4), (3, 4, 5)),
    "base": ((1e-5, 2e-5, 3e-5), (2, 3, 4)),
    "large": ((5e-6, 1e-5, 2e-5), (2, 3, 4)),
}


def default_grid(model: str | None = None,
                 method: str = "standard") -> tuple[list[float], list[int]]:
    """``(learning rates, epochs)`` of the default grid for a model and fine-tuning method
    (see the module table and :mod:`quantformer.select.methods`)."""
    grid = method_grid(method)
    lrs, epochs = grid if grid is not None else GRIDS[model_size(model)]
    return list(lrs), list(epochs)


# --------------------------------------------------------------------------------------------
# the search


@dataclass
class TuneResult(SavedResult):
    """What :func:`tune` returns; :meth:`save` writes it as a results folder
    (:meth:`write_files`).

    Attributes:
        cv_results: one row per configuration x fold: ``lr``, ``epochs``, ``fold`` (1-based),
            the task's metric (``macro_f1``; regression ``rmse``, ``pearson``; multilabel
            ``macro_f1``, ``micro_f1``), ``seconds``.
        cv_summary: one row per configuration: ``lr``, ``epochs``, ``mean_<metric>``,
            ``sd_<metric>`` (sample sd over folds; metric ``macro_f1`` or, for regression,
            ``rmse``), ``mean_pearson`` (regression) or ``mean_micro_f1`` (multilabel),
            ``folds``, ``rank`` (1 = chosen).
        best: ``{"lr", "epochs", "mean_<metric>", "sd_<metric>"}`` (+ the other mean).
        model: the classifier refit on all training data with the best configuration (None
            when ``refit=False``).
        test_predictions: predictions on the test set (``doc_id``, docvars incl. ``label``,
            ``predicted``, ``prob_<label>``), or None.
        test_report: :class:`quantformer.score.evaluate.Report` on the test set (regression and
            multilabel: the dict of :mod:`quantformer.score.metrics`), or None.
        info: settings and counts (model, folds, seed, grid, runs, seconds).
    """

    cv_results: pd.DataFrame
    cv_summary: pd.DataFrame
    best: dict
    model: object = None
    test_predictions: pd.DataFrame | None = None
    test_report: object = None
    info: dict = field(default_factory=dict)

    def write_files(self, d: Path) -> None:
        """``cv_results.csv/.rds``, ``cv_summary.csv/.rds``, ``best.json``, ``model/`` (when
        refit) and, with a test set, ``test_predictions.csv/.rds`` and ``test_report.json``."""
        write_table(self.cv_results, d, "cv_results")
        write_table(self.cv_summary, d, "cv_summary")
        best = {**self.best, **self.info}
        if isinstance(self.test_report, dict):  # regression and multi-label
            best["test"] = {k: v for k, v in self.test_report.items()
                            if k not in ("per_label", "task")}
        elif self.test_report is not None:
            best["test"] = {"macro_f1": self.test_report.macro_f1,
                            "accuracy": self.test_report.accuracy, "n": self.test_report.n}
        write_json(best, d / "best.json")
        if self.model is not None and hasattr(self.model, "save"):
            self.model.save(d / "model")
        if self.test_predictions is not None:
            write_table(self.test_predictions, d, "test_predictions")
        if isinstance(self.test_report, dict):
            write_json(self.test_report, d / "test_report.json")
        elif self.test_report is not None:
            self.test_report.save(d / "test_report.json")


def _finetune_fit(frame, *, lr, epochs, spec: TrainSpec):
    """One run of the grid: ``spec`` at one learning rate and number of epochs."""
    return finetune_spec(frame, replace(spec, lr=lr, epochs=epochs))


def _check_grid_values(kind):
    def rule(values, name: str) -> None:
        parse_list(",".join(map(str, values)), kind, name)
    return rule


#: the rules of tune's values: fine-tuning's, the grid's in place of one rate and epochs
TUNE_PARAMETERS = {**{k: v for k, v in TrainSpec.PARAMETERS.items() if k not in ("lr", "epochs")},
                   "lrs": _check_grid_values(float), "epochs_grid": _check_grid_values(int)}


def summarise_cv(cv: pd.DataFrame, metric: str = "macro_f1", higher_is_better: bool = True,
                 also=()) -> pd.DataFrame:
    """Mean and sd of ``metric`` (and the mean of each of ``also``) per (lr, epochs), ranked:
    best mean first (highest, or lowest when ``higher_is_better`` is False, as for RMSE); ties
    (equal to 1e-9) go to fewer epochs, then to the lower learning rate."""
    groups = cv.groupby(["lr", "epochs"], sort=True)
    g = groups[metric]
    s = pd.DataFrame({f"mean_{metric}": g.mean(), f"sd_{metric}": g.std(ddof=1),
                      **{f"mean_{k}": groups[k].mean() for k in also},
                      "folds": g.size()}).reset_index()
    s["_key"] = (-1 if higher_is_better else 1) * s[f"mean_{metric}"].round(9)
    s = s.sort_values(["_key", "epochs", "lr"], kind="stable").drop(columns="_key")
    s["rank"] = np.arange(1, len(s) + 1)
    return s.reset_index(drop=True)


def tune(
    train: pd.DataFrame,
    test: pd.DataFrame | None = None,
    *,
    lrs=None,
    epochs_grid=None,
    folds: int = 5,
    max_runs: int | None = None,
    refit: bool = True,
    estimate: bool = True,
    fit_fn=None,
    scheduler: str | None = None,
    spec: TrainSpec | None = None,
    **settings,
) -> TuneResult:
    """Stratified k-fold grid search over learning rate x epochs, refit, test (section 6.4).

    Args:
        train: labelled corpus frame (``doc_id``, ``text``, ``label``); documents without a
            label or text are left out with a warning.
        test: optional labelled frame predicted and scored by the refit model. Every row is
            predicted, in order (``predicted`` is missing for a missing or empty text); rows
            without a label or text are left out of the test report only; one warning counts
            both.
        lrs, epochs_grid: the grid; default by model size (module docstring).
        folds: stratified CV folds (5), shuffled with ``seed``.
        spec: the fine-tuning settings of every run
            (:class:`~quantformer.train.spec.TrainSpec`; default: finetune's defaults), with
            ``settings`` changed; its ``lr`` and ``epochs`` are the grid's.
        **settings: the fine-tuning settings of every run as
            :func:`quantformer.train.finetune.finetune` takes them, but ``lr`` and ``epochs``
            (a TypeError); as tune reads them:
        model: model name or folder (``None`` = the bundled all-MiniLM-L6-v2).
        oversample: minority:majority ratio for random oversampling of each *training* fold
            and of the refit (the paper's 0.25); None for none.
        max_runs: refuse to start when the grid needs more fine-tuning runs than this
            (configurations x folds + 1 refit); None for no limit.
        seed: CV split and every run's seed.
        batch_size, max_length, truncation, device: passed to fine-tuning (``max_length`` and
            ``truncation``: ``None`` for the method's defaults, see
            :func:`quantformer.train.finetune.finetune`); ``truncation="chunks"`` reads every
            document whole in windows in training and in scoring the held-out fold (no time
            estimate is printed: the windows per document vary).
        stride, max_chunks, aggregate, chunk_training: ``truncation="chunks"`` only, passed
            to every run (see :func:`quantformer.train.finetune.finetune`; None: its
            defaults).
        quiet: no progress lines and no transformers progress bars (the plan and estimate
            are printed unless quiet).
        refit: refit the best configuration on all training data (default True).
        estimate: measure one training step to print a time estimate (default True).
        fit_fn: ``fit_fn(frame, *, lr, epochs, **finetune_kwargs)`` returning an object with
            ``labels`` and ``predict_proba``; default :func:`quantformer.train.finetune.finetune`.
        scheduler: ``None`` (runs one after another here), ``"local:N"`` or
            ``"tcp://host:port"``: the cross-validation runs are Dask tasks
            (:func:`quantformer.scale.dask.map_runs`); each run is seeded with ``seed``, so
            the table equals the serial one. The refit runs here.
        task: ``classification`` (default: stratified folds, macro-F1), ``regression``
            (plain shuffled folds; selects the lowest RMSE, reports Pearson r) or
            ``multilabel`` (plain shuffled folds; macro-F1 over labels, reports micro-F1);
            see :mod:`quantformer.train.scoring`. ``oversample`` is refused for the latter two.
        label_cols, label_sep: multilabel labels, as in :func:`quantformer.train.finetune.finetune`.
        method: ``standard`` (this recipe), ``setfit`` (SetFit, :mod:`quantformer.train.setfit`:
            ``lrs`` are body learning rates, ``epochs_grid`` epochs over the pairs; no
            oversampling; ``max_length`` and ``truncation`` apply to the body) or ``nli`` (an NLI
            ``model`` fine-tuned on the classes as hypotheses, Laurer et al. 2023; no
            oversampling; ``batch_size`` counts premise-hypothesis pairs).
        setfit_iterations: ``method="setfit"`` only: pairs per training document and
            direction in every run (default 5, :mod:`quantformer.train.setfit`).
        hypothesis, label_phrases, nli_pairs: ``method="nli"`` only, the same in every run:
            the template with one ``{}`` (default ``"This text is about {}."``), class ->
            phrase (a dict or ``"a=x,b=y"``; default the class names) and the training pairs
            (``balanced`` or ``all``); see :func:`quantformer.train.nli.nli_finetune`.

    Returns:
        :class:`TuneResult`.

    Raises:
        InputError: a class with fewer documents than ``folds`` (names it, suggests fewer
            folds), a multi-label label or a regression outcome with one value only,
            ``oversample`` with regression or multilabel, a bad grid value, more runs than
            ``max_runs``, a test set without a label column or without a document that has a
            text and a label, an option of another method, for ``nli`` a model without an
            entailment output or a class without a label phrase, and anything fine-tuning
            rejects (checked on the first run).
    """
    if "lr" in settings or "epochs" in settings:
        raise TypeError("tune() takes the grid (lrs, epochs_grid), not lr or epochs")
    spec = (spec or TrainSpec()).with_keywords(**settings)
    with hf_quiet() if spec.quiet else contextlib.nullcontext():
        return _tune(train, test, spec, lrs=lrs, epochs_grid=epochs_grid, folds=folds,
                     max_runs=max_runs, refit=refit, estimate=estimate, fit_fn=fit_fn,
                     scheduler=scheduler)


def _tune(train, test, spec: TrainSpec, *, lrs, epochs_grid, folds, max_runs, refit,
          estimate, fit_fn, scheduler=None) -> TuneResult:
    say = (lambda *a: None) if spec.quiet else (lambda *a: print(*a, flush=True))
    t_start = time.perf_counter()
    spec.check_values(TUNE_PARAMETERS, lrs=lrs, epochs_grid=epochs_grid)
    method_kw = method_kwargs(spec.method, task=spec.task, oversample=spec.oversample,
                              setfit_iterations=spec.setfit_iterations,
                              hypothesis=spec.hypothesis, label_phrases=spec.label_phrases,
                              nli_pairs=spec.nli_pairs)
    spec = spec.with_keywords(**method_kw)
    model, method, task, seed = spec.model, spec.method, spec.task, spec.seed
    scoring = make_scoring(task, spec.label_cols, spec.label_sep)
    data = scoring.rows(train)
    labels = scoring.labels(data)
    scoring.check(data, folds, spec.oversample)
    if method == "nli" and fit_fn is None:
        check_nli_model(model, labels, method_kw["label_phrases"])
    lrs, epochs_grid = _grid(model, method, lrs, epochs_grid)
    configs = [(lr, ep) for ep in epochs_grid for lr in lrs]
    n_runs = len(configs) * folds + (1 if refit else 0)
    _check_max_runs(n_runs, max_runs, len(lrs), len(epochs_grid), folds, refit)
    if test is not None:  # checked before any run; every row is predicted after the refit
        test = test.reset_index(drop=True)
        test_rows = _test_rows(scoring, test)
    runs = replace(spec, quiet=True)  # every run's settings: a fit_fn takes them as keywords
    kw = ({"spec": runs} if fit_fn is None else
          {k: v for k, v in runs.keywords().items() if k not in ("lr", "epochs")})
    fit = fit_fn or _finetune_fit
    splits = scoring.splits(data, folds, seed)
    plan = [(len(tr), ep) for _, ep in configs for tr, _ in splits]
    if refit:
        plan.append((len(data), max(epochs_grid)))
    msg = (f"tune: {len(lrs)} learning rates x {len(epochs_grid)} epochs x {folds} folds"
           f"{' + 1 refit' if refit else ''} = {n_runs} fine-tuning runs of "
           f"{model_label(model)} on {len(data)} documents")
    if estimate and fit_fn is None and method == "standard" and not spec.reading.chunks:
        reading = spec.with_defaults().reading
        msg += _estimate_note(model, data, plan, seed=seed, batch_size=spec.batch_size,
                              max_length=reading.max_length, truncation=reading.truncation,
                              device=spec.device, n_labels=len(labels))
    say(msg)
    cv_runs = [(lr, ep, k, tr, va) for lr, ep in configs
               for k, (tr, va) in enumerate(splits, start=1)]
    rows = _run_cv(cv_runs, data, labels, fit, kw, plan, scheduler, say, n_runs, scoring)
    cv = pd.DataFrame(rows)
    summary = summarise_cv(cv, scoring.metric, scoring.higher_is_better, scoring.also)
    best = _best(summary.iloc[0], scoring)
    m = scoring.metric
    say(f"best: lr {best['lr']:g}, {best['epochs']} epochs, mean {METRIC_NAMES[m]} "
        f"{best[f'mean_{m}']:.4f} over {folds} folds")
    result = TuneResult(cv_results=cv, cv_summary=summary, best=best)
    if refit:
        say(f"  run {n_runs}/{n_runs}: refit on all {len(data)} training documents")
        result.model = fit(scoring.fit_frame(data), lr=best["lr"], epochs=best["epochs"], **kw)
        if test is not None:
            _score_test(result, scoring, test, test_rows, say)
    result.info = {"model": model_label(model), "method": method, "folds": folds, "seed": seed,
                   "oversample": spec.oversample, "lrs": lrs, "epochs_grid": epochs_grid,
                   "runs": n_runs, "n_train": len(data),
                   "n_test": None if test is None else len(test), "labels": labels,
                   "task": task, "metric": scoring.metric,
                   **{k: v for k, v in method_kw.items() if k != "method"},
                   "seconds": time.perf_counter() - t_start}
    if task == "classification":
        del result.info["task"], result.info["metric"]  # best.json as before for classifiers
    return result


METRIC_NAMES = {"macro_f1": "macro-F1", "rmse": "RMSE", "pearson": "Pearson r",
                "micro_f1": "micro-F1"}


def _grid(model, method: str, lrs, epochs_grid) -> tuple[list[float], list[int]]:
    """The grid's learning rates and epochs, sorted and checked; the method's and model's
    default for the one not given."""
    if lrs is None or epochs_grid is None:
        d_lrs, d_epochs = default_grid(model, method)
        lrs = d_lrs if lrs is None else lrs
        epochs_grid = d_epochs if epochs_grid is None else epochs_grid
    lrs = sorted(set(float(x) for x in parse_list(",".join(map(str, lrs)), float, "lrs")))
    epochs_grid = sorted(set(parse_list(",".join(map(str, epochs_grid)), int, "epochs_grid")))
    return lrs, epochs_grid


def _check_max_runs(n_runs: int, max_runs: int | None, n_lrs: int, n_epochs: int, folds: int,
                    refit: bool) -> None:
    """Refuse a grid that needs more than ``max_runs`` fine-tuning runs."""
    if max_runs is not None and n_runs > max_runs:
        raise InputError(
            f"the grid needs {n_runs} fine-tuning runs ({n_lrs} learning rates x "
            f"{n_epochs} epochs x {folds} folds{' + 1 refit' if refit else ''}), more "
            f"than {{max_runs}} {max_runs}; shrink {{lrs}} or {{epochs_grid}}, use fewer "
            "{folds}, or raise {max_runs}", params=["max_runs", "lrs", "epochs_grid", "folds"])


def _estimate_note(model, data: pd.DataFrame, plan, *, seed: int, batch_size: int,
                   max_length: int, truncation: str, device: str, n_labels: int) -> str:
    """``"; estimated 12 min (0.40 s per training step of 16 documents)"``: one training step
    measured on a seeded batch of ``data``, scaled to the runs of ``plan``."""
    rng = np.random.default_rng(seed)
    sample = data["text"].to_numpy()[rng.permutation(len(data))[:batch_size]].tolist()
    step = step_seconds(model, sample, batch_size=batch_size, max_length=max_length,
                        truncation=truncation, device=device,
                        n_labels=max(n_labels, 2))  # the head hardly changes the time
    return (f"; estimated {format_seconds(estimate_seconds(plan, step, batch_size))} "
            f"({step:.2f} s per training step of {batch_size} documents)")


def _best(top: pd.Series, scoring) -> dict:
    """``best`` of :class:`TuneResult` from the top row of the summary."""
    m = scoring.metric
    best = {"lr": float(top["lr"]), "epochs": int(top["epochs"]),
            f"mean_{m}": float(top[f"mean_{m}"]),
            f"sd_{m}": float(top[f"sd_{m}"]) if pd.notna(top[f"sd_{m}"]) else None}
    best.update({f"mean_{k}": float(top[f"mean_{k}"]) for k in scoring.also})
    return best


def _test_rows(scoring, test: pd.DataFrame):
    """Which test rows have no label and no text (classification), or the scorable rows and
    their mask (other tasks); checked before any run."""
    if scoring.task == "classification":
        return unusable_rows(test, "test data")
    no_label = scoring.kind.missing_labels(test, "test data")
    no_text = is_missing_text(test["text"])
    rows = scoring.rows(test.loc[~no_label & ~no_text].reset_index(drop=True), "test data")
    return no_label, no_text, rows


def _score_test(result: TuneResult, scoring, test: pd.DataFrame, test_rows, say) -> None:
    """Predict every test row with the refit model and score the scorable ones."""
    no_label, no_text = test_rows[:2]
    result.test_predictions = _predict_frame(result.model, test, no_text)
    _warn_test_rows(no_label, no_text)
    if scoring.task == "classification":
        scored = ~(no_label | no_text)
        result.test_report = evaluate(
            test[LABEL_COLUMN][scored], result.test_predictions[PREDICTED_COLUMN][scored],
            labels=result.model.labels)
        say(f"test: macro-F1 {result.test_report.macro_f1:.4f}, accuracy "
            f"{result.test_report.accuracy:.4f} on {result.test_report.n} documents")
        return
    result.test_report = {"task": scoring.task,
                          **scoring.score(result.model, test_rows[2])}
    m = scoring.metric
    say(f"test: {METRIC_NAMES[m]} {result.test_report[m]:.4f} on {result.test_report['n']} "
        "documents")


def _cv_run(run: tuple, *, data: pd.DataFrame, labels: list, fit, kw: dict,
            scoring=None) -> dict:
    """One cross-validation run: fine-tune on the training folds, score the held-out fold by
    the task's metrics (macro-F1 for classification; a Dask task with ``scheduler``)."""
    scoring = scoring or ClassificationScoring()
    lr, ep, k, tr, va = run
    t0 = time.perf_counter()
    clf = fit(scoring.fit_frame(data.iloc[tr].reset_index(drop=True)), lr=lr, epochs=ep, **kw)
    score = scoring.score(clf, data.iloc[va].reset_index(drop=True), labels)
    return {"lr": lr, "epochs": ep, "fold": k,
            **{key: score[key] for key in (scoring.metric, *scoring.also)},
            "seconds": time.perf_counter() - t0}


def _run_cv(cv_runs, data, labels, fit, kw, plan, scheduler, say, n_runs,
            scoring=None) -> list[dict]:
    """The cross-validation runs, in order, serially or over ``scheduler``
    (:func:`quantformer.scale.dask.map_runs`), with a progress line as each finishes."""
    import functools

    done: list[int] = []
    t0 = time.perf_counter()

    def report(i: int, row: dict) -> None:
        done.append(i)
        # remaining time scaled by training work (documents x epochs) still to do
        work_done = sum(plan[j][0] * plan[j][1] for j in done)
        work_left = sum(n * e for n, e in plan) - work_done
        left = (time.perf_counter() - t0) / max(work_done, 1) * work_left
        m = scoring.metric if scoring is not None else "macro_f1"
        say(f"  run {len(done)}/{n_runs}: lr {row['lr']:g}, {row['epochs']} epochs, fold "
            f"{row['fold']}: {METRIC_NAMES[m]} {row[m]:.4f} ({row['seconds']:.0f} s; about "
            f"{format_seconds(left)} left)")

    task = functools.partial(_cv_run, data=data, labels=labels, fit=fit, kw=kw,
                             scoring=scoring)
    return map_runs(task, cv_runs, scheduler, on_result=report)


def _predict_frame(clf, frame: pd.DataFrame, no_text: np.ndarray) -> pd.DataFrame:
    """Predictions for every row of ``frame`` in order; ``predicted`` missing where
    ``no_text``. A :class:`~quantformer.infer.classifier.Classifier` gives its full output (docvars,
    ``prob_<label>``); any other ``fit_fn`` result gives ``doc_id``, ``label``, ``predicted``."""
    if hasattr(clf, "predict") and hasattr(clf, "output_frame"):
        return clf.predict(frame, warn=False)
    pred = np.full(len(frame), None, dtype=object)
    if (~no_text).any():
        pred[~no_text] = predicted_labels(clf, frame.loc[~no_text].reset_index(drop=True))
    return pd.DataFrame({"doc_id": frame["doc_id"].to_numpy(),
                         LABEL_COLUMN: frame[LABEL_COLUMN].to_numpy(),
                         PREDICTED_COLUMN: pd.Series(pred, dtype="string").to_numpy()})


def _warn_test_rows(no_label: np.ndarray, no_text: np.ndarray) -> None:
    """One warning counting the test documents that get no prediction or no score."""
    n_text, n_out = int(no_text.sum()), int((no_label | no_text).sum())
    if not n_out:
        return
    parts = []
    if n_text:
        parts.append(f"{n_text} have a missing or empty text and are kept in test_predictions "
                     "with a missing prediction")
    parts.append(f"{n_out} ({int(no_label.sum())} without a label, "
                 f"{int((no_text & ~no_label).sum())} labelled but without a text) are left "
                 f"out of the test report, which scores the other {len(no_label) - n_out}")
    warnings.warn(f"of the {len(no_label)} test document(s), " + "; ".join(parts),
                  stacklevel=3)


