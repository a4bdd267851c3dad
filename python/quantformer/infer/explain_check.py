"""Are the attributions faithful? Two checks of :func:`quantformer.infer.explain.explain`.

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

from ..models.tokenize import CHUNKS, ChunkWarning, TruncationWarning
from ..score.attributions import aopc, mean_spearman
from .classifier import Classifier, PredictionWarning
from .explain import (
    Explanation,
    Integrator,
    chunk_windows,
    doc_windows,
    explain_windows,
    integrate,
    item_windows,
    word_rows,
)

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


def deletion_test(clf: Classifier, texts: dict, ex: Explanation, k: int = CHECK_K,
                  seed: int = 1) -> dict:
    """AOPC of deleting the top-``k`` attributed words vs ``k`` random words.

    Only document-target pairs with at least ``k`` words seen by the model are used.

    Returns:
        ``{"aopc_top", "aopc_random", "k", "n_docs"}``.
    """
    rng = np.random.default_rng(seed)
    names = ["predicted"] if clf.task.name == "regression" else clf.labels
    variants, targets, n = [], [], 0
    for (doc_id, target), w in ex.words.groupby(["doc_id", "target"], sort=False,
                                                observed=True):
        w = w[w["attribution"].notna()]
        if len(w) < k:
            continue
        spans = list(zip(w["start"], w["end"]))
        top = np.argsort(-w["attribution"].to_numpy(), kind="stable")[:k]
        rand = rng.permutation(len(w))[:k]
        text = texts[doc_id]
        variants.append(text)
        for order in (top, rand):
            variants.extend(_delete(text, [spans[i] for i in order[:j]]) for j in range(1, k + 1))
        targets.extend([names.index(target)] * (2 * k + 1))
        n += 1
    if not n:
        return {"aopc_top": None, "aopc_random": None, "k": k, "n_docs": 0}
    scores = _target_scores(clf, variants, np.asarray(targets)).reshape(n, 2 * k + 1)
    return {"aopc_top": aopc(scores[:, 0], scores[:, 1:k + 1]),
            "aopc_random": aopc(scores[:, 0], scores[:, k + 1:]), "k": k, "n_docs": n}


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
                       max_docs: int = CHECK_DOCS, seed: int = 1) -> dict:
    """Mean Spearman rank correlation between the word attributions of the model and of a
    fully re-initialised copy, over the first ``max_docs`` document-target pairs.

    Returns:
        ``{"randomisation_spearman", "randomisation_spearman_abs", "n_docs"}`` (the second
        ranks absolute attributions, as Adebayo et al. also report).
    """
    docs = ex.documents.head(max_docs)
    doc_ids = list(dict.fromkeys(docs["doc_id"]))
    names = ["predicted"] if clf.task.name == "regression" else clf.labels
    item_docs = np.array([doc_ids.index(d) for d in docs["doc_id"]])
    item_targets = np.array([names.index(t) for t in docs["target"]])
    theirs = _randomised_words(randomised(clf, seed), [texts[d] for d in doc_ids], item_docs,
                               item_targets)
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
                      item_targets: np.ndarray) -> list:
    """The word attributions (one array per item) of the re-initialised copy ``rand``, its
    documents read as the model reads them (one window, or every window with chunks)."""
    engine = Integrator(rand)
    if rand.truncation == CHUNKS:
        _, parts = explain_windows(engine, texts, chunk_windows(rand, texts), item_docs,
                                   item_targets)
        return [p["attribution"].to_numpy() for p in parts]
    doc_wins, _ = doc_windows(rand, texts)
    wins, outputs = item_windows(engine, doc_wins, item_docs, item_targets)
    res = integrate(engine, wins, np.arange(len(wins)), outputs)
    return [word_rows(texts[d], wins[j], res["attr"][j])["attribution"].to_numpy()
            for j, d in enumerate(item_docs)]


def unknown_only(clf: Classifier, texts: dict) -> list[str]:
    """The doc_ids whose every token is the tokenizer's unknown token (e.g. emoji-only texts
    for a vocabulary without emoji): their attributions say nothing about the words."""
    tok = getattr(clf, "tokenizer", None)
    unk = getattr(tok, "unk_token_id", None)
    if unk is None:
        return []
    out = []
    for doc_id, text in texts.items():
        if isinstance(text, str) and text.strip():
            ids = tok(text, add_special_tokens=False)["input_ids"]
            if ids and all(i == unk for i in ids):
                out.append(doc_id)
    return out


def check(clf: Classifier, frame: pd.DataFrame, ex: Explanation, k: int = CHECK_K,
          max_docs: int = CHECK_DOCS, seed: int = 1) -> dict:
    """Both checks: ``{"aopc_top", "aopc_random", "randomisation_spearman", ...}``.

    Documents made only of tokens unknown to the model (:func:`unknown_only`) are left out of
    both checks with a warning (their attributions are alike under any model, which would push
    the randomisation Spearman towards 1); ``n_unknown_only`` counts them.
    """
    texts = dict(zip(frame["doc_id"].astype(str), frame["text"]))
    unknown = unknown_only(clf, texts)
    if unknown:
        warnings.warn(f"{len(unknown)} of {len(texts)} document(s) consist only of tokens the "
                      f"model does not know (e.g. '{unknown[0]}'); they are left out of the "
                      "checks", UserWarning, stacklevel=2)
        ex = Explanation(words=ex.words[~ex.words["doc_id"].isin(unknown)],
                         documents=ex.documents[~ex.documents["doc_id"].isin(unknown)])
    out = {"method": "deletion test (AOPC, Samek et al. 2017) and model randomisation "
                     "(Adebayo et al. 2018)"}
    dele = deletion_test(clf, texts, ex, k, seed)
    rand = randomisation_test(clf, texts, ex, max_docs, seed)
    out.update({"aopc_top": dele["aopc_top"], "aopc_random": dele["aopc_random"],
                "aopc_k": k, "aopc_n_docs": dele["n_docs"],
                "randomisation_spearman": rand["randomisation_spearman"],
                "randomisation_spearman_abs": rand["randomisation_spearman_abs"],
                "randomisation_n_docs": rand["n_docs"], "n_unknown_only": len(unknown)})
    return out
