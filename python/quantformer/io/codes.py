"""A machine coder's output, read one way wherever it is read (``estimate``, ``regress``,
``evaluate``, ``reliability``, ``code --add-coder``).

Two shapes are accepted, with no renaming:

* a predictions frame (``predict``, ``zeroshot``): ``doc_id``, ``predicted`` and, optionally,
  ``prob_<class>`` for every class, besides docvars and ``backend``;
* a codes frame (``annotate``, local or through an endpoint): ``doc_id``, ``label``,
  ``prob_<label>`` (missing, NaN, where an endpoint gave no token log-probabilities),
  ``unparsed`` (a row marked so has no code), ``coder`` and optional ``raw`` and ``text``.

The hard label is ``predicted`` when the frame has that column, else ``label`` (a predictions
frame of a labelled corpus keeps the hand codes in ``label``: they are not the machine's);
``label_col`` names another. The classes are those of the ``prob_<class>`` columns, in their
order, else the labels' sorted values. A document's prediction for an estimator is its
probabilities where it has them all, else the 0/1 indicator of its hard label (Egami et al.
2023, "Using imperfect surrogates for downstream inference", NeurIPS: any surrogate, a
probability or a label, is corrected by the gold sample alike); :attr:`MachineCodes.source`
says which was used. A document with neither (an empty text, an unparsed answer) has no
prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.errors import InputError
from .columns import ID_COLUMN, LABEL_COLUMN, PREDICTED_COLUMN, PROB_PREFIX, as_str_series, \
    prob_column
from .formats import detect_format, read_raw

#: the column of an annotate codes frame that marks an answer that did not parse
UNPARSED_COLUMN = "unparsed"
#: the column of a codes frame that names its coder
CODER_COLUMN = "coder"
#: what a machine coder's output may look like (for messages)
SHAPES = (f"a predictions file ({ID_COLUMN}, {PREDICTED_COLUMN}, optional "
          f"{PROB_PREFIX}<class>: `quantformer predict` or `zeroshot`) or a codes file "
          f"({ID_COLUMN}, {LABEL_COLUMN}, optional {PROB_PREFIX}<label>: `quantformer "
          "annotate`)")


def read_table(obj, what: str, fmt: str | None = None) -> pd.DataFrame:
    """A DataFrame as is, or a file (any frame format; no text column needed)."""
    if isinstance(obj, pd.DataFrame):
        return obj.reset_index(drop=True)
    p = Path(obj)
    if not p.is_file():
        raise InputError(f"{what} file not found: '{obj}'")
    df = read_raw(p, detect_format(p, fmt), None)
    df.columns = [str(c) for c in df.columns]
    return df


@dataclass
class MachineCodes:
    """A machine coder's output in one shape.

    Attributes:
        frame: the frame as read (its docvars, ``coder``, ... kept), ``doc_id`` as strings.
        label: the hard label of each row (strings; None: no code).
        classes: the classes, in ``prob_<class>`` column order (else the labels sorted).
        probs: float array (n, n_classes) of the probabilities, NaN in a row without them;
            None when no row has them (no ``prob_`` columns, or all missing).
        label_column: the column the hard labels were read from.
    """

    frame: pd.DataFrame
    label: np.ndarray
    classes: list
    probs: np.ndarray | None
    label_column: str | None

    def with_probs(self) -> np.ndarray:
        """Whether each row has all its probabilities."""
        if self.probs is None:
            return np.zeros(len(self.frame), dtype=bool)
        return ~np.isnan(self.probs).any(axis=1)

    @property
    def n_hard(self) -> int:
        """Rows whose prediction is the hard label (a label, no probabilities)."""
        return int((~self.with_probs() & pd.notna(self.label)).sum())

    @property
    def source(self) -> str:
        """Which prediction was used: the probabilities, the hard labels, or both."""
        n_hard, n = self.n_hard, int(pd.notna(self.predicted()).sum())
        if self.probs is None or n_hard == n:
            return "hard labels (no probabilities)"
        if n_hard == 0:
            return "probabilities"
        return (f"probabilities; the hard label for {n_hard} of {n} document(s) without "
                "probabilities")

    def predicted(self) -> np.ndarray:
        """The hard label of each row, the most probable class where a row has only
        probabilities (None: no prediction)."""
        out = self.label.copy()
        if self.probs is not None:
            fill = pd.isna(out) & self.with_probs()
            out[fill] = np.asarray(self.classes, dtype=object)[self.probs[fill].argmax(1)]
        return out

    def yhat(self) -> np.ndarray:
        """(n, n_classes): the probabilities where a row has them, else the 0/1 indicator of
        its hard label; NaN in a row with neither."""
        hard = np.column_stack([(self.label == c).astype(float) for c in self.classes])
        hard[pd.isna(self.label)] = np.nan
        if self.probs is None:
            return hard
        return np.where(self.with_probs()[:, None], self.probs, hard)


def _label_column(df: pd.DataFrame, label_col: str | None, what: str) -> str | None:
    if label_col is not None:
        if label_col not in df.columns:
            raise InputError(f"the {what} has no '{label_col}' column (it has: "
                             f"{', '.join(map(str, df.columns))}); give {SHAPES}")
        return label_col
    for col in (PREDICTED_COLUMN, LABEL_COLUMN):
        if col in df.columns:
            return col
    return None


def read_machine_codes(obj, what: str = "prediction file", *, label_col: str | None = None,
                       fmt: str | None = None, probabilities: bool = True) -> MachineCodes:
    """Read a machine coder's output (see the module docstring for the shapes accepted).

    Args:
        obj: a DataFrame or a file (any frame format).
        what: the input's name in messages (e.g. ``"prediction file"``, ``"--codes 'x.csv'"``).
        label_col: the hard label's column (default: ``predicted``, else ``label``).
        fmt: the file's format (default: from its extension).
        probabilities: read the ``prob_`` columns (default); False: the hard labels only
            (the classes are then the labels', and ``probs`` is None).

    Returns:
        :class:`MachineCodes`.

    Raises:
        InputError: no ``doc_id`` column; neither a label column nor ``prob_`` columns;
            labels outside the ``prob_`` columns' classes where some row has probabilities.
    """
    df = read_table(obj, what, fmt)
    if ID_COLUMN not in df.columns:
        raise InputError(f"the {what} has no {ID_COLUMN} column (it has: "
                         f"{', '.join(map(str, df.columns))}); give {SHAPES}")
    df = df.assign(**{ID_COLUMN: np.asarray(as_str_series(df[ID_COLUMN]), dtype=object)})
    column = _label_column(df, label_col, what)
    classes = [str(c)[len(PROB_PREFIX):] for c in df.columns
               if probabilities and str(c).startswith(PROB_PREFIX)]
    if column is None and not classes:
        raise InputError(f"the {what} has neither '{PREDICTED_COLUMN}', '{LABEL_COLUMN}' nor "
                         f"'{PROB_PREFIX}<class>' columns (it has: "
                         f"{', '.join(map(str, df.columns))}); give {SHAPES}")
    label = (np.array(as_str_series(df[column]).tolist(), dtype=object) if column
             else np.full(len(df), None, dtype=object))
    unparsed = (df[UNPARSED_COLUMN].fillna(False).astype(bool).to_numpy()
                if UNPARSED_COLUMN in df.columns else np.zeros(len(df), bool))
    label[unparsed] = None
    probs = None
    if classes:
        probs = df[[prob_column(c) for c in classes]].apply(
            pd.to_numeric, errors="coerce").to_numpy(float, copy=True)
        probs[unparsed] = np.nan
        if np.isnan(probs).any(axis=1).all():
            probs = None
        strange = sorted(set(label[pd.notna(label)]) - set(classes))
        if strange and probs is None:  # labels only: every label is a class
            classes = classes + strange
        elif strange:
            raise InputError(f"the {what} has label(s) {', '.join(strange[:5])} in "
                             f"'{column}' without a '{PROB_PREFIX}<label>' column (its "
                             f"classes: {', '.join(classes)}); give the file as the coder "
                             "wrote it")
    else:
        classes = sorted(set(label[pd.notna(label)]))
    return MachineCodes(frame=df, label=label, classes=classes, probs=probs,
                        label_column=column)
