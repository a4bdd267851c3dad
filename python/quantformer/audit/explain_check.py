"""Are the attributions faithful? Two checks of :func:`quantformer.audit.explain.explain`.

* **Deletion test** (Samek et al. 2017; DeYoung et al. 2020): delete a document's ``k`` most
  attributed words (k = 1..K) from its text and measure the drop of the target probability;
  the same with ``k`` words drawn at random. AOPC (area over the perturbation curve) of the top
  words should clearly exceed that of random words.
* **Model randomisation** (Adebayo et al. 2018): the attributions of the same documents and
  targets from a copy of the model whose weights are all re-initialised should not look the
  same: the mean per-document Spearman rank correlation of the word attributions is reported
  (near 0 is good; near 1 means the attributions reflect the input more than the model).
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pandas as pd

from ..infer.classifier import Classifier, PredictionWarning
from ..models.reading import CHUNKS
from ..models.tokenize import ChunkWarning, TruncationWarning
from ..score.attributions import aopc, mean_spearman
from .explain import doc_windows, explain_windows, item_windows, unknown_only
from .explain_frames import Explanation, target_names
from .explain_words import chunk_windows, word_rows
from .integrate import Integrator, integrate

CHECK_K = 5
CHECK_DOCS = 100


def _delete(text: str, spans) -> str:
    """``text`` without the character spans ``(start, end)``."""
    out, pos = [], 0
    for s, e in sorted(spans):
        out.append(text[pos:s])
        pos = e
    out.append(text[pos:])
    return "".join(out)


def _target_scores(clf: Classifier, texts: list, targets: np.ndarray) -> np.ndarray:
    # the texts are copies of the explained documents with words deleted: the explanation
    # already warned about the documents truncated, and a copy with every word deleted is
    # empty by design; a count of copies would only confuse (so would one of windows dropped)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        warnings.simplefilter("ignore", ChunkWarning)
        warnings.simplefilter("ignore", PredictionWarning)
        probs = clf.predict_proba(texts, batch_size=32)
    return probs[np.arange(len(texts)), targets]


#: documents whose deleted copies are scored together
DELETION_CHUNK = 8


def deletion_test(clf: Classifier, texts: dict, ex: Explanation, k: int = CHECK_K,
                  seed: int = 1, progress=None) -> dict:
    """AOPC of deleting the top-``k`` attributed words vs ``k`` random words.

    Only document-target pairs with at least ``k`` words seen by the model are used.

    Args:
        progress: None, or a bar (anything with ``update(n)``) advanced by one per
            document-target pair of ``ex``.

    Returns:
        ``{"aopc_top", "aopc_random", "k", "n_docs"}``.
    """
    rng = np.random.default_rng(seed)
    names = target_names(clf)
    docs, skipped = [], 0
    for (doc_id, target), w in ex.words.groupby(["doc_id", "target"], sort=False,
                                                observed=True):
        w = w[w["attribution"].notna()]
        if len(w) < k:
            skipped += 1
            continue
        spans = list(zip(w["start"], w["end"]))
        top = np.argsort(-w["attribution"].to_numpy(), kind="stable")[:k]
        rand = rng.permutation(len(w))[:k]
        text = texts[doc_id]
        variants = [text]
        for order in (top, rand):
            variants.extend(_delete(text, [spans[i] for i in order[:j]]) for j in range(1, k + 1))
        docs.append((variants, names.index(target)))
    _advance(progress, skipped)
    if not docs:
        return {"aopc_top": None, "aopc_random": None, "k": k, "n_docs": 0}
    scores = []
    for i in range(0, len(docs), DELETION_CHUNK):
        part = docs[i:i + DELETION_CHUNK]
        texts_ = [v for variants, _ in part for v in variants]
        targets = np.repeat([t for _, t in part], 2 * k + 1)
        scores.append(_target_scores(clf, texts_, targets).reshape(len(part), 2 * k + 1))
        _advance(progress, len(part))
    scores = np.concatenate(scores)
    return {"aopc_top": aopc(scores[:, 0], scores[:, 1:k + 1]),
            "aopc_random": aopc(scores[:, 0], scores[:, k + 1:]), "k": k, "n_docs": len(docs)}


def _advance(bar, n: int) -> None:
    if bar is not None and n:
        bar.update(n)


def randomised(clf: Classifier, seed: int = 1) -> Classifier:
    """A copy of ``clf`` (of any kind: standard, NLI, SetFit) whose network weights are all
    re-initialised (every module's ``reset_parameters``; Adebayo et al. 2018's full
    randomisation; a SetFit head keeps its weights)."""
    import torch

    model = copy.deepcopy(clf.model)
    torch.manual_seed(seed)
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    out = copy.copy(clf)
    out.model = model.eval()
    return out


def randomisation_test(clf: Classifier, texts: dict, ex: Explanation,
                       max_docs: int = CHECK_DOCS, seed: int = 1, progress=None) -> dict:
    """Mean Spearman rank correlation between the word attributions of the model and of a
    fully re-initialised copy, over the first ``max_docs`` document-target pairs.

    Args:
        progress: None, or a bar (anything with ``update(n)``) advanced by one per pair.

    Returns:
        ``{"randomisation_spearman", "randomisation_spearman_abs", "n_docs"}`` (the second
        ranks absolute attributions, as Adebayo et al. also report); the correlations are
        None when there is no pair.
    """
    docs = ex.documents.head(max_docs)
    if docs.empty:
        return {"randomisation_spearman": None, "randomisation_spearman_abs": None, "n_docs": 0}
    doc_ids = list(dict.fromkeys(docs["doc_id"]))
    names = target_names(clf)
    item_docs = np.array([doc_ids.index(d) for d in docs["doc_id"]])
    item_targets = np.array([names.index(t) for t in docs["target"]])
    theirs = _randomised_words(randomised(clf, seed), [texts[d] for d in doc_ids], item_docs,
                               item_targets, progress if progress is not None else False)
    pairs, pairs_abs = [], []
    groups = dict(tuple(ex.words.groupby(["doc_id", "target"], sort=False, observed=True)))
    for j, (d, t) in enumerate(zip(docs["doc_id"], docs["target"])):
        mine = groups[(d, t)]["attribution"].to_numpy()
        ok = ~np.isnan(mine) & ~np.isnan(theirs[j])
        pairs.append((mine[ok], theirs[j][ok]))
        pairs_abs.append((np.abs(mine[ok]), np.abs(theirs[j][ok])))
    return {"randomisation_spearman": mean_spearman(pairs),
            "randomisation_spearman_abs": mean_spearman(pairs_abs), "n_docs": len(docs)}


def _randomised_words(rand: Classifier, texts: list, item_docs: np.ndarray,
                      item_targets: np.ndarray, progress=False) -> list:
    """The word attributions (one array per item) of the re-initialised copy ``rand``, its
    documents read as the model reads them (one window, or every window with chunks)."""
    engine = Integrator(rand)
    if rand.truncation == CHUNKS:
        _, parts = explain_windows(engine, texts, chunk_windows(rand, texts), item_docs,
                                   item_targets, progress=progress)
        return [p["attribution"].to_numpy() for p in parts]
    doc_wins, _ = doc_windows(rand, texts)
    wins, outputs = item_windows(engine, doc_wins, item_docs, item_targets)
    res = integrate(engine, wins, np.arange(len(wins)), outputs, progress=progress)
    return [word_rows(texts[d], wins[j], res["attr"][j])["attribution"].to_numpy()
            for j, d in enumerate(item_docs)]


def _unknown_docs(clf: Classifier, texts: dict, ex: Explanation) -> list:
    """The doc_ids of ``ex`` made only of tokens the model does not know: its documents'
    ``unknown_only`` (:func:`quantformer.audit.explain.explain` sets it), else found anew."""
    if "unknown_only" in ex.documents.columns:
        flagged = ex.documents.loc[ex.documents["unknown_only"].astype(bool), "doc_id"]
        return list(dict.fromkeys(flagged.astype(str)))
    return unknown_only(clf, texts)


def check(clf: Classifier, frame: pd.DataFrame, ex: Explanation, k: int = CHECK_K,
          max_docs: int = CHECK_DOCS, seed: int = 1, progress: bool = False) -> dict:
    """Both checks: ``{"aopc_top", "aopc_random", "randomisation_spearman", ...}``.

    Documents made only of tokens unknown to the model (:func:`unknown_only`; ``explain``
    warned about them) are left out of both checks, because their attributions are alike under
    any model and would push the randomisation Spearman towards 1; ``n_unknown_only`` counts
    them.

    Args:
        progress: a tqdm bar on stderr ("checking") over the document-target pairs of both
            checks.
    """
    from tqdm.auto import tqdm

    texts = dict(zip(frame["doc_id"].astype(str), frame["text"]))
    unknown = _unknown_docs(clf, texts, ex)
    if unknown:
        ex = Explanation(words=ex.words[~ex.words["doc_id"].isin(unknown)],
                         documents=ex.documents[~ex.documents["doc_id"].isin(unknown)])
    out = {"method": "deletion test (AOPC, Samek et al. 2017) and model randomisation "
                     "(Adebayo et al. 2018)"}
    n_pairs = ex.words.groupby(["doc_id", "target"], sort=False, observed=True).ngroups
    with tqdm(total=n_pairs + min(max_docs, len(ex.documents)), desc="checking", unit="doc",
              disable=not progress, leave=False) as bar:
        dele = deletion_test(clf, texts, ex, k, seed, progress=bar)
        rand = randomisation_test(clf, texts, ex, max_docs, seed, progress=bar)
    out.update({"aopc_top": dele["aopc_top"], "aopc_random": dele["aopc_random"],
                "aopc_k": k, "aopc_n_docs": dele["n_docs"],
                "randomisation_spearman": rand["randomisation_spearman"],
                "randomisation_spearman_abs": rand["randomisation_spearman_abs"],
                "randomisation_n_docs": rand["n_docs"], "n_unknown_only": len(unknown)})
    return out
