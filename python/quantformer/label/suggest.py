"""Active learning: which uncoded documents to code next (the ``suggest`` verb).

One round: embed the corpus once (vectors cached beside the corpus file, keyed by the model
and the file's content; :mod:`quantformer.io.embedding_cache`), fit a light classifier over
the frozen embeddings (scikit-learn's logistic regression, milliseconds), and pick ``n``
uncoded documents by a query strategy (:mod:`quantformer.label.strategies`): ``cold`` (k-means
medoids, while fewer than two classes are coded), ``margin`` (default), ``least_confidence``,
``entropy`` or ``random``, the uncertainty strategies with a diversity guard and an optional
``random_share`` of exploration.

Following Vysogorets & Gopal (2024), rounds run on the cheap classifier and the final model is
fine-tuned once at the end. Active learning pays when a class is rare; with few codes of the
rare class, fine-tuning with the classes oversampled to balance (``finetune(oversample=1)``;
random oversampling as in Wankmüller 2022, section 6.4) steadies the final model. The learning
curves against random sampling: see bench/RESULTS.md, "Active learning".

Already coded documents and documents with a missing or empty text are never suggested.

Numeric precision (``precision``, :mod:`quantformer.models.precision`): the embeddings run in
bf16 autocast under ``auto`` where the hardware computes it natively (their cache is keyed by
the precision). The light classifier's uncertainty scores are *not* rechecked in fp32: they
rank documents, no label is read from them as a measurement, and bf16 vectors stay close to
fp32's, so bf16 can only reorder documents of nearly equal uncertainty. A fine-tuned
``model``'s probabilities are rechecked as ``predict``'s are (documents whose top-two margin
is under 0.05 are scored again in fp32), which under the default ``margin`` strategy are
exactly the documents suggested first.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..infer.embed import (
    Encoder,
    check_length,
    embed_texts,
    encoder_precision,
    load_encoder,
    precision_record,
)
from ..infer.load import load_model
from ..io.columns import LABEL_COLUMN
from ..models.precision import DEFAULT_PRECISION, check_precision
from ..infer.predict import precision_record as classifier_precision
from ..io import embedding_cache
from ..io.frames import as_str_series, check_input, read_whole
from ..models.hub import load_config, resolve_device, resolve_model
from ..models.reading import DEFAULT_TRUNCATION
from ..models.tokenize import is_missing
from .strategies import STRATEGIES, UNCERTAINTY, explore, light_classifier, pick, uncertainty

CODE_COL = "code"


class SuggestWarning(UserWarning):
    """A suggestion round that ran differently from what was asked (fewer documents, cold
    start instead of an uncertainty strategy)."""


# ------------------------------------------------------------------------------------------
# labels: which documents are coded


def merge_codes(frame: pd.DataFrame, coded: pd.DataFrame | None, source: str = "CODED"
                ) -> pd.Series:
    """The code of every corpus document: the corpus' ``label`` column, updated by ``coded``.

    Args:
        frame: corpus frame (``doc_id``, ``text``, [``label``]).
        coded: a frame with ``doc_id`` and ``label`` (missing labels ignored), or None.
        source: the name of ``coded`` in error messages.

    Returns:
        object Series aligned with ``frame`` (None = not coded).

    Raises:
        InputError: ``coded`` has doc_ids that are not in the corpus, or codes a document
            differently from the corpus' own label column.
    """
    codes = (frame[LABEL_COLUMN] if LABEL_COLUMN in frame.columns
             else pd.Series([None] * len(frame), dtype=object)).astype(object)
    codes = codes.where(codes.notna(), None).reset_index(drop=True)
    if coded is None:
        return codes
    coded = coded[coded[LABEL_COLUMN].notna()]
    pos = pd.Series(np.arange(len(frame)), index=frame["doc_id"].to_numpy())
    unknown = ~coded["doc_id"].isin(pos.index)
    if unknown.any():
        shown = ", ".join(map(repr, coded.loc[unknown, "doc_id"].head(5)))
        raise InputError(
            f"{int(unknown.sum())} doc_id(s) in {source} are not in the corpus, first: {shown}. "
            "Code documents of this corpus only (same doc_ids), or pass the corpus they came "
            "from as {input}", params=["input"])
    rows = pos[coded["doc_id"].to_numpy()].to_numpy()
    before = codes.iloc[rows].to_numpy()
    clash = np.array([b is not None and b != c for b, c in zip(before, coded[LABEL_COLUMN])],
                     dtype=bool)
    if clash.any():
        first = coded["doc_id"].to_numpy()[clash][0]
        raise InputError(f"{int(clash.sum())} document(s) are coded differently in the corpus' "
                         f"label column and in {source} (first: {first!r}); keep one code per "
                         "document")
    codes.iloc[rows] = coded[LABEL_COLUMN].to_numpy()
    return codes



# ------------------------------------------------------------------------------------------
# embeddings, cached beside the corpus


def cache_path(corpus: str | os.PathLike, model: str | None, max_length: int,
               truncation: str, cache_dir: str | os.PathLike | None = None,
               precision: str = "fp32") -> Path:
    """Where the embeddings of ``corpus`` are cached: a hidden ``.npz`` beside it (or in
    ``cache_dir``), named by a hash of the file's content, the model, the token limit, the
    truncation and the resolved precision (``fp32`` or ``bf16``), so an edited corpus or
    another model never reads stale vectors (:func:`quantformer.io.embedding_cache.cache_file`)."""
    return embedding_cache.cache_file(
        corpus, [str(model or "default"), str(resolve_model(model)), str(max_length),
                 truncation, precision], cache_dir)


def read_cache(path: Path, doc_ids) -> np.ndarray | None:
    """Cached vectors when ``path`` holds them for exactly ``doc_ids``; None when absent,
    and None with a :class:`SuggestWarning` when damaged or stale (the caller recomputes
    them; :func:`quantformer.io.embedding_cache.read_cache`)."""
    return embedding_cache.read_cache(path, doc_ids, SuggestWarning, stacklevel=3)


def embed_corpus(frame: pd.DataFrame, model: str | None = None, *, corpus_path=None,
                 cache: bool = True, cache_dir=None, max_length: int | None = None,
                 truncation: str = DEFAULT_TRUNCATION, batch_size: int = 32, device: str = "auto",
                 quiet: bool = True, precision: str = DEFAULT_PRECISION,
                 report: dict | None = None) -> np.ndarray:
    """Unit-length mean-pooled embeddings of ``frame`` (see :mod:`quantformer.infer.embed`), read
    from / written to the cache beside ``corpus_path`` (or in ``cache_dir``) when
    ``corpus_path`` is given and ``cache`` is True.

    Args:
        precision: ``auto`` (default), ``fp32`` or ``bf16``
            (:func:`quantformer.infer.embed.encoder_precision`); part of the cache's key.
        report: a dict that receives the precision's record (``precision``, ``requested``,
            ``reason``).

    Returns:
        float32 (n_docs, hidden); NaN rows for missing or empty texts.

    Raises:
        InputError: a bad model, device, ``max_length`` or ``precision``.
    """
    # the token limit and the precision from the configuration alone: a cache hit never
    # loads the weights
    shell = Encoder(model=None, tokenizer=None, config=load_config(model),
                    device=resolve_device(device), path=resolve_model(model))
    length = check_length(shell, max_length)
    chosen = encoder_precision(shell, precision)
    where = (cache_path(corpus_path, model, length, truncation, cache_dir, chosen.name)
             if cache and corpus_path is not None else None)
    vecs = read_cache(where, frame["doc_id"]) if where is not None else None
    if vecs is None:
        enc = load_encoder(model, device)
        vecs, _ = embed_texts(enc, frame["text"].tolist(), max_length=length,
                              truncation=truncation, batch_size=batch_size, normalize=True,
                              progress=not quiet, precision=chosen)
        if where is not None:
            embedding_cache.write_cache(where, frame["doc_id"], vecs, SuggestWarning)
    if report is not None:
        report.update(precision_record(shell, chosen))
    return vecs


# ------------------------------------------------------------------------------------------
# the verb


def suggest(frame: pd.DataFrame, vectors: np.ndarray, *, coded: pd.DataFrame | None = None,
            n: int = 50, strategy: str = "margin", seed: int = 1, stratify: str | None = None,
            probs: np.ndarray | None = None, prob_labels: list[str] | None = None,
            diversity: bool = True, random_share: float = 0.0) -> pd.DataFrame:
    """The ``n`` uncoded documents to code next.

    Args:
        frame: corpus frame (``doc_id``, ``text``, docvars, optionally a partly missing
            ``label`` column of codes).
        vectors: (n_docs, hidden) document embeddings in ``frame`` order (NaN rows for
            missing texts), e.g. from :func:`embed_corpus`.
        coded: further codes, a frame with ``doc_id`` and ``label`` (e.g. last round's
            spreadsheet); its doc_ids must be in ``frame``.
        n: documents to suggest (int > 0); more than the uncoded pool returns the whole pool
            with a warning.
        strategy: ``margin`` (default), ``least_confidence``, ``entropy``, ``random`` or
            ``cold`` (see :mod:`quantformer.label.strategies`). An uncertainty strategy with
            fewer than two coded classes runs a cold start instead, with a warning.
        seed: fixes k-means and random sampling (same inputs and seed = same suggestions).
        stratify: a docvar over whose levels a cold start spreads the documents
            (proportionally to their size).
        probs, prob_labels: class probabilities of every document from a fine-tuned model
            (``--model DIR``) instead of the light classifier over ``vectors``.
        diversity: the diversity guard of the uncertainty strategies (True).
        random_share: share of the ``n`` documents of an uncertainty round drawn at random
            from the rest of the pool (0 to 1, default 0; rounded to whole documents); their
            ``strategy`` is ``random`` (see :mod:`quantformer.label.strategies`).

    Returns:
        The suggested documents, most informative first: ``doc_id``, ``text``, the docvars,
        ``rank`` (1..), ``score`` (higher = chosen first; uncertainty, or NaN for cold/random),
        ``strategy`` (the one that chose the document), ``guess`` (the current model's most
        probable class, missing without codes), ``guess_prob`` and an empty ``code`` column to
        fill in.

    Raises:
        InputError: unknown strategy or stratify column, ``n`` < 1, ``random_share`` outside
            0..1, an empty corpus, vectors not matching the frame, unknown doc_ids in ``coded``.
    """
    check_args(frame, vectors, n, strategy, stratify, random_share)
    codes = merge_codes(frame, coded)
    no_text = np.isnan(vectors).any(axis=1)
    pool = np.flatnonzero(codes.isna().to_numpy() & ~no_text)
    check_pool(pool, codes, no_text)
    if n > len(pool):
        warnings.warn(f"asked for {n} documents but only {len(pool)} are uncoded (with a text); "
                      f"suggesting all {len(pool)}", SuggestWarning, stacklevel=2)
        n = len(pool)
    strategy = effective_strategy(strategy, codes, probs)
    if n == 0:
        return output_frame(frame, pool, None, strategy, pool.astype(object), pool * np.nan)
    guess, guess_prob, scores = current_guess(vectors, codes, pool, strategy, seed, probs,
                                              prob_labels)
    picked = pick(strategy, vectors[pool], scores, n, seed,
                  frame[stratify].to_numpy()[pool] if stratify else None, diversity)
    if random_share and strategy not in UNCERTAINTY:
        warnings.warn(f"random_share applies to uncertainty rounds only; this round is "
                      f"'{strategy}' (no codes of two classes yet), so it is not used",
                      SuggestWarning, stacklevel=2)
    picked, chosen_by = explore(picked, len(pool), strategy, random_share, seed)
    return output_frame(frame, pool[picked], scores[picked] if scores is not None else None,
                        chosen_by, guess[picked], guess_prob[picked])


def check_pool(pool: np.ndarray, codes: pd.Series, no_text: np.ndarray,
               warn: bool = True) -> None:
    """Warn about uncoded documents without a text (never suggested, when ``warn``); refuse a
    corpus whose documents are all coded.

    Raises:
        InputError: no uncoded document with a text is left.
    """
    skipped = int((codes.isna().to_numpy() & no_text).sum())
    if skipped and warn:
        warnings.warn(f"{skipped} uncoded document(s) have a missing or empty text and are "
                      "never suggested", SuggestWarning, stacklevel=3)
    if len(pool) == 0 and codes.notna().any():
        raise InputError(f"all {int(codes.notna().sum())} documents with a text are already "
                         "coded, so there is nothing to suggest; add uncoded documents, or "
                         "if the corpus's label column is not your codes, rename it (a "
                         "'label' column in {input} counts as coded)", params=["input"])


def check_args(frame, vectors, n, strategy, stratify, random_share=0.0) -> None:
    if strategy not in STRATEGIES:
        raise InputError(f"unknown {{strategy}} '{strategy}'; use one of: "
                         f"{', '.join(STRATEGIES)}", params=["strategy"])
    if not 0.0 <= random_share <= 1.0:
        raise InputError(f"{{random_share}} must be a share between 0 and 1 (e.g. 0.2 for one "
                         f"document in five drawn at random), not {random_share!r}",
                         params=["random_share"])
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise InputError(f"{{n}} must be a whole number of documents of at least 1, not {n!r}",
                         params=["n"])
    if len(frame) == 0:
        raise InputError("the corpus has no documents; give a corpus with texts to code")
    text = frame["text"] if "text" in frame.columns else pd.Series([], dtype=object)
    if len(text) and not text.fillna("").astype(str).str.strip().ne("").any():
        raise InputError("every document of the corpus has a missing or empty text, so none can "
                         "be suggested; check {text_col} (the column that holds the texts)",
                         params=["text_col"])
    if len(vectors) != len(frame):
        raise InputError(f"{len(vectors)} embedding rows for {len(frame)} documents; embed "
                         "this corpus (same rows, same order)")
    if stratify is not None and stratify not in frame.columns:
        raise InputError(f"{{stratify}} docvar '{stratify}' is not in the corpus; its columns "
                         f"are: {', '.join(map(str, frame.columns))}", params=["stratify"])


def effective_strategy(strategy: str, codes: pd.Series, probs) -> str:
    """The strategy that can run: an uncertainty strategy needs two coded classes (or a
    model's probabilities); otherwise a cold start, said in a warning when one class is coded
    (with nothing coded yet, a cold start is the usual first round and needs no warning)."""
    if strategy in ("cold", "random") or probs is not None:
        return strategy
    n_classes = codes.dropna().nunique()
    if n_classes >= 2:
        return strategy
    if n_classes == 0:  # nothing coded yet: a cold start is the usual first round, not news
        return "cold"
    warnings.warn(f"{strategy} needs codes of at least two classes, and {n_classes} class(es) "
                  "are coded so far: suggesting a cold start (diverse documents) instead",
                  SuggestWarning, stacklevel=3)
    return "cold"


def current_guess(vectors, codes, pool, strategy, seed, probs, prob_labels):
    """(guess, guess_prob, uncertainty or None) for the pool; guesses are None without a
    model (fewer than two coded classes)."""
    none = np.full(len(pool), None, dtype=object)
    if probs is None:
        known = np.flatnonzero(codes.notna().to_numpy())
        if codes.iloc[known].nunique() < 2:
            return none, np.full(len(pool), np.nan), None
        clf = light_classifier(vectors[known], codes.iloc[known].astype(str).to_numpy(), seed)
        probs, prob_labels = clf.predict_proba(vectors[pool]), list(clf.classes_)
    else:
        probs = probs[pool]
    best = probs.argmax(axis=1)
    guess = np.asarray(prob_labels, dtype=object)[best]
    scores = None if strategy in ("cold", "random") else uncertainty(probs, strategy)
    return guess, probs[np.arange(len(pool)), best], scores


def output_frame(frame, rows, scores, strategy, guess, guess_prob) -> pd.DataFrame:
    """The suggestion table (see :func:`suggest`); the corpus' label column is left out (the
    documents are uncoded) and an empty ``code`` column is added last."""
    out = frame.iloc[rows].drop(columns=[LABEL_COLUMN], errors="ignore").reset_index(drop=True)
    out["rank"] = np.arange(1, len(rows) + 1)
    out["score"] = scores if scores is not None else np.nan
    out["strategy"] = strategy
    out["guess"] = pd.Series(guess, dtype="string").to_numpy()
    out["guess_prob"] = np.asarray(guess_prob, dtype=float)
    out[CODE_COL] = pd.Series([None] * len(rows), dtype="string").to_numpy()
    return out


# ------------------------------------------------------------------------------------------
# files


def read_codes(path: str | os.PathLike, coded_label_col: str | None = None,
               coded_id_col: str | None = None) -> pd.DataFrame:
    """A file of codes as a frame of ``doc_id`` and ``label`` (strings; missing codes kept as
    None). The code column is ``coded_label_col``, else ``label``, else ``code`` (the column a
    suggestion spreadsheet has); the id column ``coded_id_col``, else ``doc_id``. Any other
    column (text, docvars) is ignored.

    Raises:
        InputError: missing or unreadable file, no id or no code column.
    """
    p, kind = check_input(path, None)
    df = read_whole(p, kind, None, coded_id_col)
    df.columns = [str(c) for c in df.columns]
    icol = coded_id_col or "doc_id"
    lcol = coded_label_col or next((c for c in (LABEL_COLUMN, CODE_COL) if c in df.columns),
                                   LABEL_COLUMN)
    for col, param in ((icol, "coded_id_col"), (lcol, "coded_label_col")):
        if col not in df.columns:
            raise InputError(f"'{path}' has no '{col}' column; its columns are: "
                             f"{', '.join(df.columns)}. Name it with {{{param}}}",
                             params=[param])
    return pd.DataFrame({"doc_id": as_str_series(df[icol]).to_numpy(),
                         LABEL_COLUMN: as_str_series(df[lcol]).to_numpy()})


def combine_codes(frames: list[pd.DataFrame], sources: list[str]) -> pd.DataFrame | None:
    """Several code files as one; a document coded differently in two files is an error."""
    if not frames:
        return None
    allc = pd.concat(frames, ignore_index=True)
    allc = allc[allc[LABEL_COLUMN].notna()].drop_duplicates()
    dup = allc["doc_id"].duplicated(keep=False)
    if dup.any():
        raise InputError(f"{allc.loc[dup, 'doc_id'].nunique()} document(s) have different codes "
                         f"in {', '.join(sources)} (first: {allc.loc[dup, 'doc_id'].iloc[0]!r}); "
                         "keep one code per document")
    return allc


def model_probs(model_dir: str, frame: pd.DataFrame, device: str = "auto",
                quiet: bool = True, precision: str = DEFAULT_PRECISION,
                report: dict | None = None) -> tuple[np.ndarray, list[str]]:
    """Class probabilities of every document from a fine-tuned model directory, in
    ``precision`` as ``predict`` runs it (bf16 near ties scored again in fp32); ``report``
    receives the precision's record."""
    clf = load_model(model_dir, device=device, precision=precision)
    if report is not None:
        report.update(classifier_precision(clf))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing texts are never suggested anyway
        probs = clf.predict_proba(frame, progress=not quiet)
    return np.nan_to_num(probs, nan=1.0 / len(clf.labels)), list(clf.labels)


# ------------------------------------------------------------------------------------------
# one round from files


def suggest_round(frame: pd.DataFrame, *, corpus_path: str | os.PathLike | None = None,
                  labelled=(), coded_label_col: str | None = None,
                  coded_id_col: str | None = None, n: int = 50, strategy: str = "margin",
                  seed: int = 1, stratify: str | None = None, diversity: bool = True,
                  random_share: float = 0.0, model: str | None = None,
                  embed_model: str | None = None, max_length: int | None = None,
                  truncation: str = DEFAULT_TRUNCATION, batch_size: int = 32,
                  cache: bool = True,
                  cache_dir: str | os.PathLike | None = None, device: str = "auto",
                  quiet: bool = False, precision: str = DEFAULT_PRECISION) -> pd.DataFrame:
    """One round of the ``suggest`` verb: the codes files read, the corpus embedded (cached
    beside ``corpus_path``), the documents to code next chosen (:func:`suggest`).

    The arguments and the codes are checked before any model loads.

    Args:
        frame: corpus frame read from ``corpus_path`` (``doc_id``, ``text``, docvars, maybe
            a partly coded ``label`` column).
        corpus_path: the corpus file, whose content keys the embedding cache (None: no cache).
        labelled: files of codes (see :func:`read_codes`), e.g. filled-in suggestion sheets.
        coded_label_col, coded_id_col: the code and id columns of the ``labelled`` files.
        n, strategy, seed, stratify, diversity, random_share: as in :func:`suggest`.
        model: a fine-tuned model directory whose class probabilities replace the light
            classifier (None: logistic regression over the embeddings).
        embed_model, max_length, truncation, batch_size, cache, cache_dir, device, quiet: the
            embeddings, as in :func:`embed_corpus` (``embed_model`` is its ``model``).
        precision: ``auto`` (default), ``fp32`` or ``bf16``: of the embeddings and of
            ``model`` (see the module's description).

    Returns:
        The suggestion table of :func:`suggest`; ``attrs["quantformer"]["precision"]`` holds
        the precision of the embeddings (``embeddings``) and of ``model`` (``model``), each
        as ``precision``, ``requested`` and ``reason``.

    Raises:
        InputError: see :func:`suggest`, :func:`read_codes` and :func:`combine_codes`.
    """
    labelled = [str(f) for f in labelled]
    coded = combine_codes([read_codes(f, coded_label_col, coded_id_col) for f in labelled],
                          labelled)
    check_args(frame, np.zeros((len(frame), 1)), n, strategy, stratify, random_share)
    # errors before any model loads, and before the corpus is embedded (issue 27, point 8)
    codes = merge_codes(frame, coded, ", ".join(labelled))
    no_text = np.array([is_missing(t) for t in frame["text"]], dtype=bool)
    check_pool(np.flatnonzero(codes.isna().to_numpy() & ~no_text), codes, no_text, warn=False)
    check_precision(precision)
    used: dict = {"embeddings": {}}
    vectors = embed_corpus(frame, embed_model, corpus_path=corpus_path, cache=cache,
                           cache_dir=cache_dir, max_length=max_length, truncation=truncation,
                           batch_size=batch_size, device=device, quiet=quiet,
                           precision=precision, report=used["embeddings"])
    probs = labels = None
    if model:
        used["model"] = {}
        probs, labels = model_probs(model, frame, device, quiet, precision, used["model"])
    out = suggest(frame, vectors, coded=coded, n=n, strategy=strategy, seed=seed,
                  stratify=stratify, probs=probs, prob_labels=labels, diversity=diversity,
                  random_share=random_share)
    out.attrs["quantformer"] = {"precision": used}
    return out



