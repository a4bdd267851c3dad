"""Conventional baselines: bag-of-words and averaged word vectors with a linear SVM or XGBoost.

These are the comparison models of Wankmüller (2022), section 6.2 and Table 1:

``svm-bow``, ``xgb-bow``
    Bag-of-words: unigrams, lowercased, Snowball-stemmed (PyStemmer), punctuation and numbers
    removed by default (both optional), terms kept when they occur in at least ``min_df``
    documents and at most a ``max_df`` share of documents, binary weights (present/absent).
    The vocabulary is learnt inside each cross-validation fold (a scikit-learn ``Pipeline``),
    so no validation document shapes the features it is scored with.
``svm-vec``, ``xgb-vec``
    Averaged word vectors. The paper averaged 300-d GloVe vectors. With no download allowed,
    the default is the **static input (word-piece) embedding matrix of all-MiniLM-L6-v2**
    (384-d), averaged over a document's word pieces; reports call it "MiniLM input
    embeddings", never GloVe. Pass ``vectors="glove.6B.300d.txt"`` (any GloVe/word2vec text
    file) for the paper's exact setting.

Classifiers and their cross-validated grids (stratified k-fold on the training data, macro-F1,
the best setting refit on all training data):

* SVM: scikit-learn ``LinearSVC``; ``C`` in {0.01, 0.1, 1, 10} x ``class_weight`` in
  {none, balanced}.
* XGBoost (package ``xgboost-cpu``): ``max_depth`` in {3, 6} x (rounds, learning rate) in
  {(100, 0.3), (300, 0.1)}; histogram trees with 64 bins (fast on dense vectors).
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN, PREDICTED_COLUMN
from ..io.modeldir import hf_quiet
from ..models.hub import load_network, load_tokenizer, resolve_model

BASELINES = ("svm-bow", "svm-vec", "xgb-bow", "xgb-vec")
SVM_GRID = {"C": [0.01, 0.1, 1.0, 10.0], "class_weight": [None, "balanced"]}
XGB_GRID = [
    {"max_depth": [3, 6], "n_estimators": [100], "learning_rate": [0.3]},
    {"max_depth": [3, 6], "n_estimators": [300], "learning_rate": [0.1]},
]
_WORDS = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def describe(name: str, vectors: str | None = None) -> str:
    """A human description of a baseline name for reports, naming the vectors honestly."""
    clf = {"svm": "linear SVM", "xgb": "XGBoost"}[name.split("-")[0]]
    if name.endswith("-bow"):
        return f"{clf}, bag-of-words (stemmed unigrams, binary)"
    src = f"averaged vectors from {Path(vectors).name}" if vectors else \
        "averaged MiniLM input embeddings (not GloVe)"
    return f"{clf}, {src}"


# --------------------------------------------------------------------------------------------
# labels and folds


def is_missing_text(values) -> np.ndarray:
    """True where a text is missing (None/NaN) or blank. Shape (n,), bool."""
    return np.array([v is None or (not isinstance(v, str) and pd.isna(v)) or
                     (isinstance(v, str) and not v.strip()) for v in values], dtype=bool)


def unusable_rows(frame: pd.DataFrame, what: str = "training data"):
    """Which documents of a labelled corpus frame cannot be trained on or scored.

    Returns:
        ``(no_label, no_text)``: bool arrays of shape (n,), True where the label is missing,
        and where the text is missing or blank (:func:`is_missing_text`).

    Raises:
        InputError: no ``label`` column (name it with ``--label-col``), or no document has
            both a text and a label.
    """
    if LABEL_COLUMN not in frame.columns:
        raise InputError(f"the {what} has no label column; name it with {{label_col}}",
                         params=["label_col"])
    no_label = frame[LABEL_COLUMN].isna().to_numpy()
    no_text = is_missing_text(frame["text"])
    if (no_label | no_text).all():
        raise InputError(f"the {what} has no document with both a text and a label; give "
                         "coded documents (or name the columns with {text_col}/{label_col})",
                         params=["text_col", "label_col"])
    return no_label, no_text


def training_rows(frame: pd.DataFrame, what: str = "training data",
                  left_out: str = "left out") -> pd.DataFrame:
    """The rows of a labelled corpus frame usable for training or scoring.

    Documents with a missing label or a missing/blank text are left out, with one warning that
    counts them (they are never dropped silently).

    Args:
        frame: corpus frame with ``text`` and ``label``.
        what: what the frame is, for messages (default ``"training data"``).
        left_out: how the warning says what happens to them (default ``"left out"``).

    Raises:
        InputError: no ``label`` column, or no usable document is left.
    """
    no_label, no_text = unusable_rows(frame, what)
    keep = ~(no_label | no_text)
    if (~keep).any():
        warnings.warn(f"{int((~keep).sum())} document(s) of the {what} {left_out}: "
                      f"{int(no_label.sum())} without a label, "
                      f"{int((no_text & ~no_label).sum())} with a missing or empty text",
                      stacklevel=2)
    return frame.loc[keep].reset_index(drop=True)


def check_folds(labels, folds: int, where: str = "the training data") -> None:
    """Check that stratified ``folds``-fold CV is possible for these labels.

    Raises:
        InputError: ``folds`` < 2, fewer than two classes, or a class with fewer members than
            ``folds`` (the message names the class and suggests a smaller ``--folds``).
    """
    if not isinstance(folds, (int, np.integer)) or folds < 2:
        raise InputError(f"{{folds}} must be a whole number of at least 2, not {folds}",
                         params=["folds"])
    counts = pd.Series(list(labels)).value_counts()
    if len(counts) < 2:
        raise InputError(f"{where} has only one class ({', '.join(map(repr, counts.index))}); "
                         "a classifier needs at least two: code documents of at least one "
                         "other class, or check {label_col}", params=["label_col"])
    small = counts[counts < folds]
    if len(small):
        cls, n = small.index[-1], int(small.iloc[-1])
        fix = (f"use {{folds}} {n} or fewer" if n >= 2 else
               "code more documents of that class or remove it")
        raise InputError(
            f"class '{cls}' has only {n} document(s) in {where}, fewer than the {folds} "
            f"cross-validation folds (each fold needs one of every class); {fix}",
            params=["folds"] if n >= 2 else ())


def stratified_folds(labels, folds: int, seed: int):
    """scikit-learn ``StratifiedKFold`` (shuffled with ``seed``) after :func:`check_folds`."""
    from sklearn.model_selection import StratifiedKFold

    check_folds(labels, folds)
    return StratifiedKFold(n_splits=int(folds), shuffle=True, random_state=seed)


# --------------------------------------------------------------------------------------------
# features


class BowTokenizer:
    """Lowercase, split into words, optionally drop punctuation and numbers, Snowball-stem.

    Args:
        remove_punct: drop tokens made of punctuation only (default True).
        remove_numbers: drop tokens made of digits only (default True).
        language: Snowball stemmer language (PyStemmer), ``None`` for no stemming.
    """

    def __init__(self, remove_punct: bool = True, remove_numbers: bool = True,
                 language: str | None = "english"):
        self.remove_punct = remove_punct
        self.remove_numbers = remove_numbers
        self.language = language
        self._stemmer = None

    def __call__(self, text: str) -> list[str]:
        toks = _WORDS.findall(text.lower())
        if self.remove_punct:
            toks = [t for t in toks if not re.fullmatch(r"[^\w]|_+", t)]
        if self.remove_numbers:
            toks = [t for t in toks if not t.isdigit()]
        if self.language:
            if self._stemmer is None:
                import Stemmer

                try:
                    self._stemmer = Stemmer.Stemmer(self.language)
                except KeyError as exc:
                    raise InputError(
                        f"no Snowball stemmer for '{self.language}'; use one of "
                        f"{', '.join(Stemmer.algorithms())}") from exc
            toks = self._stemmer.stemWords(toks)
        return toks

    def __getstate__(self):  # the PyStemmer object does not pickle; rebuild it on use
        return {**self.__dict__, "_stemmer": None}


def bow_vectorizer(min_df: int | float = 2, max_df: int | float = 0.9, **tok):
    """A binary unigram ``CountVectorizer`` using :class:`BowTokenizer` (paper section 6.2)."""
    from sklearn.feature_extraction.text import CountVectorizer

    return CountVectorizer(tokenizer=BowTokenizer(**tok), lowercase=False, token_pattern=None,
                           min_df=min_df, max_df=max_df, binary=True, dtype=np.float32)


@lru_cache(maxsize=4)
def _input_embeddings(model: str | None):
    with hf_quiet():  # no "Loading weights" bar: it is a quick internal load
        m = load_network(resolve_model(model))
    return m.get_input_embeddings().weight.detach().float().numpy()


class ModelEmbeddings:
    """Averaged static input (word-piece) embeddings of a Transformer (default all-MiniLM-L6-v2).

    Each document becomes the mean of the embedding-matrix rows of its word pieces (no special
    tokens, no truncation, no contextualisation); an empty document is the zero vector.
    """

    def __init__(self, model: str | None = None):
        self.model = model
        self.name = "MiniLM input embeddings" if model is None else f"{model} input embeddings"

    def transform(self, texts) -> np.ndarray:
        """Array (n, hidden) of float32, one row per text."""
        tok = load_tokenizer(self.model)
        emb = _input_embeddings(self.model)
        texts = ["" if m else t for t, m in zip(texts, is_missing_text(texts))]
        ids = tok(texts, add_special_tokens=False, truncation=False,
                  return_attention_mask=False, verbose=False)["input_ids"]
        out = np.zeros((len(texts), emb.shape[1]), dtype=np.float32)
        for i, row in enumerate(ids):
            if row:
                out[i] = emb[row].mean(axis=0)
        return out


class WordVectors:
    """Averaged word vectors from a GloVe/word2vec text file (``word v1 v2 ... vd`` a line).

    Documents are lowercased and split into words and punctuation (GloVe's vocabulary has
    both); words without a vector are skipped; a document with none is the zero vector.
    Only the vectors of words in the documents passed to :meth:`transform` are kept in memory,
    but every line of the file is checked.

    Raises (on first use):
        InputError: missing file, a line with a different number of values than the first, or
            a value that is not a number.
    """

    def __init__(self, path: str):
        self.path = str(path)
        self.name = f"{Path(path).name} vectors"
        if not Path(path).is_file():
            raise InputError(f"{{vectors}} file not found: '{path}'", params=["vectors"])
        self._vecs: dict[str, np.ndarray] = {}
        self.dim: int | None = None
        self._seen: set[str] = set()

    def _load(self, words: set[str]) -> None:
        need = words - self._seen
        if not need and self.dim is not None:
            return
        self._seen |= need
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, start=1):
                parts = line.rstrip("\n").rstrip().split(" ")
                if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    continue  # word2vec header "count dim"
                if len(parts) < 2:
                    if not line.strip():
                        continue
                    raise InputError(f"line {lineno} of '{self.path}' has a word but no values; "
                                     "each line must be a word followed by its vector")
                d = len(parts) - 1
                if self.dim is None:
                    self.dim = d
                elif d != self.dim:
                    raise InputError(
                        f"line {lineno} of '{self.path}' has {d} values but the first vector "
                        f"has {self.dim}; every line must be a word followed by the same "
                        "number of values (is the file truncated or are there spaces in a "
                        "word?)")
                if parts[0] in need:
                    try:
                        self._vecs[parts[0]] = np.asarray(parts[1:], dtype=np.float32)
                    except ValueError as exc:
                        raise InputError(f"line {lineno} of '{self.path}' has a value that is "
                                         "not a number; give a GloVe text file") from exc
        if self.dim is None:
            raise InputError(f"{{vectors}} file '{self.path}' has no vectors",
                             params=["vectors"])

    def transform(self, texts) -> np.ndarray:
        """Array (n, dim) of float32, one row per text."""
        toks = [[] if m else _WORDS.findall(t.lower())
                for t, m in zip(texts, is_missing_text(texts))]
        self._load({w for ts in toks for w in ts})
        out = np.zeros((len(toks), self.dim), dtype=np.float32)
        for i, ts in enumerate(toks):
            rows = [self._vecs[w] for w in ts if w in self._vecs]
            if rows:
                out[i] = np.mean(rows, axis=0)
        return out


def make_vectors(vectors: str | None = None):
    """:class:`WordVectors` for a file path, else :class:`ModelEmbeddings` of the default model."""
    return WordVectors(vectors) if vectors else ModelEmbeddings()


# --------------------------------------------------------------------------------------------
# models


@dataclass
class BaselineModel:
    """A fitted baseline.

    Attributes:
        name: ``svm-bow``, ``svm-vec``, ``xgb-bow`` or ``xgb-vec``.
        labels: the classes, sorted (column order of any scores).
        estimator: the refit scikit-learn estimator (a ``Pipeline`` for bag-of-words).
        vectors: the vector featuriser for ``-vec`` models, else None.
        best_params: the hyperparameters chosen by cross-validation.
        cv_score: their mean macro-F1 over the folds.
        cv_results: one row per grid point: the parameters, ``mean_macro_f1``, ``sd_macro_f1``.
        seconds: wall time of tuning and refitting.
    """

    name: str
    labels: list[str]
    estimator: object
    vectors: object | None
    best_params: dict
    cv_score: float
    cv_results: pd.DataFrame
    seconds: float
    description: str = ""
    extra: dict = field(default_factory=dict)

    def _features(self, texts):
        return self.vectors.transform(texts) if self.vectors is not None else list(texts)

    def predict_labels(self, texts) -> np.ndarray:
        """Predicted class per text (object array of str, None for missing/blank texts)."""
        texts = list(texts)
        miss = is_missing_text(texts)
        out = np.full(len(texts), None, dtype=object)
        if (~miss).any():
            keep = [t for t, m in zip(texts, miss) if not m]
            codes = self.estimator.predict(self._features(keep))
            out[~miss] = np.asarray(self.labels, dtype=object)[np.asarray(codes, dtype=int)]
        return out

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``doc_id``, ``predicted`` (missing for missing texts, with a warning), then docvars."""
        pred = self.predict_labels(frame["text"].tolist())
        n_miss = int(pd.isna(pred).sum())
        if n_miss:
            warnings.warn(f"{n_miss} document(s) with a missing or empty text get no prediction",
                          stacklevel=2)
        out = pd.DataFrame({"doc_id": frame["doc_id"].to_numpy(),
                            PREDICTED_COLUMN: pd.Series(pred, dtype="string").to_numpy()})
        for c in frame.columns:
            if c not in ("doc_id", "text"):
                out[c] = frame[c].to_numpy()
        return out


def _estimator(kind: str, seed: int, n_jobs: int):
    if kind == "svm":
        from sklearn.svm import LinearSVC

        return LinearSVC(random_state=seed, max_iter=5000), SVM_GRID
    from xgboost import XGBClassifier

    return XGBClassifier(tree_method="hist", max_bin=64, random_state=seed, n_jobs=n_jobs,
                         verbosity=0), XGB_GRID


def fit_quietly(est, X, y, min_df=2, max_df=0.9) -> None:
    """``est.fit(X, y)`` without convergence / ill-defined-score / absent-label warnings.

    Raises:
        InputError: the bag-of-words is empty after the document-frequency filters.
    """
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*(converge|ill-defined|not present).*")
            est.fit(X, y)
    except ValueError as exc:
        if any(k in str(exc) for k in ("no terms remain", "empty vocabulary", "max_df corr")):
            raise InputError(
                f"the bag-of-words of a training fold is empty after the document-frequency "
                f"filters (min_df={min_df}, max_df={max_df}); lower min_df or raise max_df, "
                "or use more documents") from exc
        raise


def fit_baseline(
    frame: pd.DataFrame,
    name: str = "svm-bow",
    *,
    folds: int = 5,
    seed: int = 1,
    vectors: str | object | None = None,
    min_df: int | float = 2,
    max_df: int | float = 0.9,
    remove_punct: bool = True,
    remove_numbers: bool = True,
    stem_language: str | None = "english",
    n_jobs: int = 1,
) -> BaselineModel:
    """Tune a baseline by stratified k-fold CV (macro-F1) and refit it on all the data.

    Args:
        frame: labelled corpus frame (``doc_id``, ``text``, ``label``); rows without a label
            or text are left out with a warning.
        name: one of :data:`BASELINES`.
        folds: CV folds (default 5), stratified and shuffled with ``seed``.
        vectors: for ``-vec`` models, a GloVe/word2vec text file, a featuriser object with
            ``transform(texts)``, or None for the default model's input embeddings.
        min_df, max_df: document-frequency filters of the bag-of-words (int: documents,
            float: share of documents); defaults 2 and 0.9.
        remove_punct, remove_numbers, stem_language: bag-of-words tokenisation.
        n_jobs: threads for XGBoost (default 1: the folds run one after the other).

    Returns:
        A :class:`BaselineModel`.

    Raises:
        InputError: unknown name (lists the valid ones), a class with fewer documents than
            ``folds``, an empty vocabulary after the frequency filters, a bad vectors file.
    """
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline

    if name not in BASELINES:
        raise InputError(f"unknown baseline '{name}'; use one of: {', '.join(BASELINES)}")
    t0 = time.perf_counter()
    data = training_rows(frame)
    labels = sorted(data[LABEL_COLUMN].unique().tolist())
    y = data[LABEL_COLUMN].map({lab: i for i, lab in enumerate(labels)}).to_numpy()
    cv = stratified_folds(data[LABEL_COLUMN], folds, seed)
    kind, rep = name.split("-")
    clf, grid = _estimator(kind, seed, n_jobs)
    vec = None
    if rep == "bow":
        est = Pipeline([("bow", bow_vectorizer(min_df, max_df, remove_punct=remove_punct,
                                               remove_numbers=remove_numbers,
                                               language=stem_language)),
                        ("clf", clf)])
        grid = ([{f"clf__{k}": v for k, v in g.items()} for g in grid]
                if isinstance(grid, list) else {f"clf__{k}": v for k, v in grid.items()})
        X = data["text"].tolist()
    else:
        vec = make_vectors(vectors) if vectors is None or isinstance(vectors, (str, Path)) \
            else vectors
        est = clf
        X = vec.transform(data["text"].tolist())
    search = GridSearchCV(est, grid, scoring="f1_macro", cv=cv, refit=True, n_jobs=1,
                          error_score="raise")
    fit_quietly(search, X, y, min_df, max_df)
    res = search.cv_results_
    rows = pd.DataFrame([{k.replace("clf__", ""): v for k, v in p.items()}
                         for p in res["params"]])
    rows["mean_macro_f1"] = res["mean_test_score"]
    rows["sd_macro_f1"] = res["std_test_score"]
    best = {k.replace("clf__", ""): v for k, v in search.best_params_.items()}
    return BaselineModel(name=name, labels=labels, estimator=search.best_estimator_,
                         vectors=vec, best_params=best, cv_score=float(search.best_score_),
                         cv_results=rows, seconds=time.perf_counter() - t0,
                         description=describe(name, getattr(vec, "path", None)))
