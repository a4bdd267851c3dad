"""The query strategies of active learning: which uncoded documents a round picks, given
document embeddings and, once two classes are coded, class probabilities.

``cold``
    no usable codes yet: the documents nearest the ``n`` k-means centres of the embeddings
    (diverse, typical documents; the "cold start" of Zhu et al. 2008 and Yuan, Lin &
    Boyd-Graber 2020), optionally allocated across the levels of a docvar (``stratify``).
``margin`` (default)
    smallest difference between the two most probable classes ("breaking ties", Scheffer et
    al. 2001), the strongest simple strategy in Schröder, Niekler & Potthast (2022).
``least_confidence``
    lowest probability of the most probable class (Lewis & Gale 1994).
``entropy``
    highest entropy of the class probabilities (Settles 2009, section 3.1).
``random``
    a simple random sample of the uncoded documents (the comparison baseline).

The uncertainty strategies carry a diversity guard (Zhdanov 2019, "Diverse mini-batch active
learning"): the ``10 n`` most uncertain documents are clustered into ``n`` k-means clusters and
the most uncertain document of each cluster is chosen, so a batch is not ``n`` near-duplicates.
``random_share`` (0 by default) mixes exploration into an uncertainty batch: that share of
the ``n`` documents is drawn at random from the rest of the pool ("epsilon-greedy" active
learning, Osugi, Kim & Scott 2005; Bouneffouf et al. 2014), which keeps the coded sample
partly representative where pure uncertainty sampling over-samples ambiguous, noisy documents
(Karamcheti et al. 2021) or the budget is small for the task (Hacohen, Dekel & Weinshall 2022).

The probabilities come from a light classifier over the frozen embeddings (scikit-learn's
logistic regression, milliseconds). The strategies are written here with scikit-learn (a few
lines each) rather than with small-text, which would add a dependency for four formulas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._core.errors import InputError

STRATEGIES = ("margin", "least_confidence", "entropy", "random", "cold")
UNCERTAINTY = ("margin", "least_confidence", "entropy")
DIVERSITY_POOL = 10  # the diversity guard clusters the DIVERSITY_POOL * n most uncertain


# ------------------------------------------------------------------------------------------
# scores


def light_classifier(vectors: np.ndarray, codes: np.ndarray, seed: int = 1):
    """Logistic regression (L2, C = 1, balanced class weights, so a rare class is not
    ignored) over frozen embeddings; scikit-learn's ``LogisticRegression``."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000, random_state=seed)
    return clf.fit(vectors, codes)


def uncertainty(probs: np.ndarray, strategy: str) -> np.ndarray:
    """How uncertain each row of class probabilities is, higher = more uncertain (so that
    documents are picked by the highest score): ``1 - (p1 - p2)`` for margin, ``1 - p1`` for
    least confidence, ``-sum p log p`` for entropy."""
    top = np.sort(probs, axis=1)[:, ::-1]
    if strategy == "margin":
        return 1.0 - (top[:, 0] - top[:, 1])
    if strategy == "least_confidence":
        return 1.0 - top[:, 0]
    if strategy == "entropy":
        return -np.sum(probs * np.log(np.clip(probs, 1e-12, 1.0)), axis=1)
    raise InputError(f"unknown strategy '{strategy}'; use one of: {', '.join(STRATEGIES)}")


# ------------------------------------------------------------------------------------------
# selection (positions into the candidate pool)


def kmeans_medoids(vectors: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Positions of the ``k`` rows nearest the ``k`` k-means centres (distinct rows)."""
    from sklearn.cluster import KMeans

    if k >= len(vectors):
        return np.arange(len(vectors))
    km = KMeans(n_clusters=k, n_init=3, random_state=seed).fit(vectors)
    dist = km.transform(vectors)  # (n, k) distance to each centre
    chosen: list[int] = []
    for c in np.argsort(np.bincount(km.labels_, minlength=k))[::-1]:  # big clusters first
        order = np.argsort(dist[:, c], kind="stable")
        chosen.append(next(int(i) for i in order if i not in chosen))
    return np.asarray(chosen)


def allocate(sizes: pd.Series, n: int, seed: int = 1) -> pd.Series:
    """Split ``n`` over strata proportionally to ``sizes`` (largest remainders, ties broken at
    random with ``seed``), at least one per stratum while ``n`` allows, never more than a
    stratum holds."""
    quota = sizes / sizes.sum() * n
    take = np.minimum(np.floor(quota), sizes).astype(int)
    if n >= len(sizes):
        take = np.maximum(take, 1)
    shuffled = (quota - np.floor(quota)).sample(frac=1.0, random_state=seed)
    order = shuffled.sort_values(ascending=False, kind="stable").index
    while take.sum() < n:
        grew = False
        for s in order:
            if take.sum() < n and take[s] < sizes[s]:
                take[s] += 1
                grew = True
        if not grew:
            break
    while take.sum() > n:
        take[take.idxmax()] -= 1
    return take


def cold_start(vectors: np.ndarray, n: int, seed: int, strata=None) -> np.ndarray:
    """Positions of ``n`` diverse documents: k-means medoids, per stratum when ``strata``."""
    if strata is None:
        return kmeans_medoids(vectors, n, seed)
    strata = pd.Series(strata, dtype=object)
    strata = strata.where(strata.notna(), "(missing)").astype(str).to_numpy()  # a level too
    groups = pd.Series(np.arange(len(vectors))).groupby(strata)
    sizes = groups.size()
    take = allocate(sizes, n, seed)
    out = [members.to_numpy()[kmeans_medoids(vectors[members.to_numpy()], int(take[key]), seed)]
           for key, members in groups if take[key] > 0]
    return np.concatenate(out) if out else np.arange(0)


def diverse_top(vectors: np.ndarray, scores: np.ndarray, n: int, seed: int) -> np.ndarray:
    """The diversity guard: cluster the ``DIVERSITY_POOL * n`` highest-scoring rows into ``n``
    clusters and take the highest-scoring row of each (Zhdanov 2019); highest score first."""
    from sklearn.cluster import KMeans

    order = np.argsort(-scores, kind="stable")
    pool = order[:DIVERSITY_POOL * n]
    if n >= len(pool):
        return pool[:n]
    km = KMeans(n_clusters=n, n_init=3, random_state=seed).fit(vectors[pool])
    best = pd.Series(scores[pool]).groupby(km.labels_).idxmax().to_numpy()
    picked = pool[best]
    return picked[np.argsort(-scores[picked], kind="stable")]



def pick(strategy, vectors, scores, n, seed, strata, diversity) -> np.ndarray:
    """Positions (into the pool) of the ``n`` documents the strategy chooses."""
    if n == 0:
        return np.arange(0)
    if strategy == "random":
        return np.random.default_rng(seed).choice(len(vectors), size=n, replace=False)
    if strategy == "cold":
        return cold_start(vectors, n, seed, strata)
    if diversity:
        return diverse_top(vectors, scores, n, seed)
    return np.argsort(-scores, kind="stable")[:n]


def explore(picked: np.ndarray, pool_size: int, strategy: str, random_share: float,
            seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Replace the last ``round(random_share * n)`` uncertainty picks (the least uncertain of
    the batch) by documents drawn at random from the rest of the pool ("epsilon-greedy",
    Osugi, Kim & Scott 2005). Returns the positions and, per document, the strategy that
    chose it."""
    k = int(round(random_share * len(picked))) if strategy in UNCERTAINTY else 0
    keep = picked[:len(picked) - k]
    rest = np.setdiff1d(np.arange(pool_size), keep)
    drawn = np.random.default_rng(seed).choice(rest, size=min(k, len(rest)), replace=False)
    by = np.array([strategy] * len(keep) + ["random"] * len(drawn), dtype=object)
    return np.concatenate([keep, drawn]).astype(int), by

