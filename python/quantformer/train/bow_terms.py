"""The bag-of-words baseline's terms per class, to set beside what a fine-tuned model keys on.

A multinomial (binary: plain) logistic regression with an L2 penalty (``C`` = 1) is fitted on
the binary bag-of-words features of the paper's baselines (Wankmüller 2022, section 6.2:
unigrams, lowercased, Snowball-stemmed, punctuation and numbers removed, terms in at least 2
documents and at most 90 % of them; :func:`quantformer.train.baselines.bow_vectorizer`). A
term's coefficient for a class is its weight in that class's linear score (log-odds units); a
binary model's single coefficient vector belongs to the second class and its negative to the
first. The same tokenizer maps a fine-tuned model's attributed words onto these terms
(:func:`quantformer.score.attributions.compare_terms`), so both lists use one vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError
from ..io.columns import LABEL_COLUMN
from ..io.frames import read_frame
from .baselines import BowTokenizer, bow_vectorizer, fit_quietly, training_rows

#: inverse L2 penalty strength of the logistic regression (scikit-learn's default)
LOGIT_C = 1.0


@dataclass
class BowTerms:
    """What :func:`fit_bow_terms` returns.

    Attributes:
        coefs: one row per class and vocabulary term: ``target``, ``term``, ``bow_coef``
            (log-odds units), ``bow_rank`` (1 = largest coefficient of the class).
        analyzer: the bag-of-words tokenizer (a text -> its terms), to map attributed words
            onto the same terms.
        labels: the classes, sorted. n_docs: the training documents used.
    """

    coefs: pd.DataFrame
    analyzer: BowTokenizer
    labels: list
    n_docs: int


def read_bow_data(path, record: dict, **read_kw) -> pd.DataFrame:
    """Read the bag-of-words training data file and check it (:func:`check_bow_data`).

    Args:
        path: a corpus file with ``text`` and ``label`` columns.
        record: the model's record. read_kw: :func:`quantformer.io.frames.read_frame` options.

    Raises:
        InputError: the file does not exist, or as :func:`check_bow_data`.
    """
    if not Path(path).is_file():
        raise InputError(f"{{bow_data}} '{path}' does not exist; give the labelled training "
                         "data (text and label columns)", params=["bow_data"])
    return check_bow_data(read_frame(path, **read_kw), record, f"'{path}'")


def check_bow_data(frame: pd.DataFrame, record: dict, source: str = "") -> pd.DataFrame:
    """The usable rows of the bag-of-words training data, checked against the model's classes
    before any model is loaded.

    Args:
        frame: a corpus frame (``doc_id``, ``text``, ``label``).
        record: the model's record (``task``, ``labels``) from its ``quantformer.json``.
        source: the file name, for messages.

    Raises:
        InputError: a regression or multi-label model, no label column, no labelled text,
            fewer than two classes, or a label that is not one of the model's classes.
    """
    if record.get("task", "classification") != "classification":
        raise InputError(f"{{bow_data}} compares a classifier's classes with a bag-of-words "
                         f"model; the model is a {record.get('task')} model; leave it out",
                         params=["bow_data"])
    if LABEL_COLUMN not in frame.columns:
        raise InputError(f"{{bow_data}} {source} has no label column; give the coded training "
                         "data with a 'label' column", params=["bow_data"])
    data = training_rows(frame, what="bag-of-words training data")
    model_labels = [str(x) for x in record.get("labels") or []]
    found = sorted({str(x) for x in data[LABEL_COLUMN]})
    unknown = [x for x in found if x not in model_labels]
    if unknown:
        raise InputError(f"the labels of {{bow_data}} {source} are not the model's classes: "
                         f"{', '.join(unknown[:5])} (the model's: {', '.join(model_labels)}); "
                         "give the data the model was trained on", params=["bow_data"])
    if len(found) < 2:
        raise InputError(f"{{bow_data}} {source} has one class only ({found[0]}); a "
                         "bag-of-words model needs documents of at least two classes",
                         params=["bow_data"])
    return data.assign(**{LABEL_COLUMN: data[LABEL_COLUMN].astype(str)})


def fit_bow_terms(data: pd.DataFrame, *, min_df: int | float = 2, max_df: int | float = 0.9,
                  C: float = LOGIT_C, seed: int = 1) -> BowTerms:
    """Fit the bag-of-words logistic regression and return each class's term coefficients.

    Args:
        data: labelled rows from :func:`check_bow_data`.
        min_df, max_df: document-frequency filters (int: documents, float: share); 2 and 0.9.
        C: inverse L2 penalty (default :data:`LOGIT_C`). seed: the solver's seed.

    Raises:
        InputError: an empty vocabulary after the frequency filters.
    """
    from sklearn.linear_model import LogisticRegression

    vec = bow_vectorizer(min_df, max_df)
    labels = sorted(data[LABEL_COLUMN].unique().tolist())
    y = data[LABEL_COLUMN].map({lab: i for i, lab in enumerate(labels)}).to_numpy()
    texts = data["text"].tolist()
    fit_quietly(vec, texts, None, min_df, max_df)  # an empty vocabulary: InputError
    X = vec.transform(texts)
    clf = LogisticRegression(C=C, max_iter=2000, random_state=seed)
    fit_quietly(clf, X, y, min_df, max_df)
    coef = np.asarray(clf.coef_, dtype=np.float64)
    coef = coef if len(labels) > 2 else np.vstack([-coef[0], coef[0]])
    terms = vec.get_feature_names_out()
    rows = []
    for k, lab in enumerate(labels):
        order = np.argsort(-coef[k], kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(1, len(order) + 1)
        rows.append(pd.DataFrame({"target": lab, "term": terms, "bow_coef": coef[k],
                                  "bow_rank": rank}))
    return BowTerms(coefs=pd.concat(rows, ignore_index=True), analyzer=vec.tokenizer,
                    labels=labels, n_docs=len(data))
