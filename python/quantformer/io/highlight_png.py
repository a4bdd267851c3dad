"""A PNG figure for papers: the words of chosen documents highlighted by their attributions.

Drawn with matplotlib's Agg canvas (no display needed, the global backend left alone). Each
word sits on a background whose hue gives the sign of its attribution (blue: towards the explained class, orange: against it;
the colour-blind-safe pair of the HTML page, :mod:`quantformer.io.highlight`) and whose
strength and font size grow with its absolute attribution, on one scale for the whole figure
(the largest absolute attribution shown), so documents compare. Words the model did not see
(outside its window) are grey. Above each document: its id, the explained class, the
prediction and its probability. A key at the foot gives the scale in logits.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from .._core.atomic import atomic_file
from .._core.errors import InputError
from .columns import ID_COLUMN, PREDICTED_COLUMN, prob_column
from .writable import check_writable

#: figure width (inches) and resolution (dots per inch): 1600 pixels wide
WIDTH_IN, DPI = 8.0, 200
#: documents shown when none are named; words shown per document at most
FIRST_DOCS, MAX_WORDS = 3, 150
_BLUE, _ORANGE = (33 / 255, 102 / 255, 172 / 255), (230 / 255, 97 / 255, 1 / 255)
_SIZE, _GROW, _MARGIN, _LINE = 7.0, 5.0, 0.25, 1.55  # points, points, inches, x font size


def check_png_path(path: str | os.PathLike) -> Path:
    """Raises InputError unless ``path`` ends in ``.png`` and its folder can be written."""
    if not str(path).lower().endswith(".png"):
        raise InputError(f"{{png}} '{path}' must end in .png", params=["png"])
    return check_writable(path, "png")


def check_png_docs(docs, doc_ids) -> list[str]:
    """The documents the figure shows: ``docs`` (ids, all of which must be in ``doc_ids``) or,
    when None, the first :data:`FIRST_DOCS` of ``doc_ids``.

    Raises:
        InputError: an id that is not a document of the corpus, or an empty list.
    """
    ids = [str(x) for x in doc_ids]
    if docs is None:
        return ids[:FIRST_DOCS]
    docs = [str(d).strip() for d in docs if str(d).strip()]
    if not docs:
        raise InputError("{docs} names no document; give document ids separated by commas",
                         params=["docs"])
    known = set(ids)
    missing = [d for d in docs if d not in known]
    if missing:
        raise InputError(f"{{docs}}: {', '.join(missing[:5])} is not a document id of the "
                         f"corpus (its first ids: {', '.join(ids[:3])})", params=["docs"])
    return docs


def _header(doc: pd.Series) -> str:
    pred = doc.get(PREDICTED_COLUMN)
    prob = doc.get(prob_column(pred))
    p = f" (p = {prob:.2f})" if prob is not None and pd.notna(prob) else ""
    shown = f"{pred:.3g}" if isinstance(pred, float) else str(pred)
    return f"{doc['doc_id']}  ·  explained: {doc['target']}  ·  predicted: {shown}{p}"


def _layout(blocks: list, measure) -> tuple[list, float]:
    """Positions (inches from the top left) of every piece of text; the figure's height."""
    placed, y = [], _MARGIN
    right = WIDTH_IN - _MARGIN
    for header, words in blocks:
        y += _SIZE * _LINE / 72
        placed.append((header, _MARGIN, y, _SIZE + 1, None, True))
        x, y = _MARGIN, y + (_SIZE + _GROW) * _LINE / 72
        for word, strength, a, spaced in words:
            size = _SIZE + _GROW * strength
            w = measure(word, size)
            if spaced and x > _MARGIN:  # a space where the text has one, none where it has none
                x += measure(" ", size)
            if x + w > right and x > _MARGIN:
                x, y = _MARGIN, y + (_SIZE + _GROW) * _LINE / 72
            placed.append((word, x, y, size, a, False))
            x += w
        y += _SIZE * _LINE / 72
    return placed, y + _MARGIN


def _blocks(words: pd.DataFrame, documents: pd.DataFrame, docs: list, scale: float) -> list:
    groups = dict(tuple(words.groupby([ID_COLUMN, "target"], sort=False, observed=True)))
    out = []
    for d in docs:
        for _, doc in documents[documents[ID_COLUMN].astype(str) == d].iterrows():
            w = groups.get((doc[ID_COLUMN], doc["target"]))
            if w is None:
                continue
            ends = w["end"].to_numpy()
            spaced = np.r_[True, w["start"].to_numpy()[1:] > ends[:-1]]
            items = [(str(x), min(1.0, abs(a) / scale) if scale > 0 and pd.notna(a) else 0.0, a,
                      bool(sp))
                     for x, a, sp in zip(w["word"], w["attribution"], spaced)][:MAX_WORDS]
            if len(w) > MAX_WORDS:
                items.append(("…", 0.0, np.nan, True))
            out.append((_header(doc), items))
    return out


def write_attribution_png(words: pd.DataFrame, documents: pd.DataFrame,
                          path: str | os.PathLike, docs: list | None = None) -> Path:
    """Write the figure of documents ``docs`` (ids; default: the first :data:`FIRST_DOCS`)
    to ``path`` atomically, :data:`WIDTH_IN` inches wide at :data:`DPI` dots per inch (1600
    pixels), as tall as the text needs; the first :data:`MAX_WORDS` words of each document.

    Args:
        words, documents: the frames of :func:`quantformer.audit.explain.explain`.

    Raises:
        InputError: a path not ending in ``.png``, an unknown document id.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties

    check_png_path(path)
    docs = check_png_docs(docs, documents[ID_COLUMN].astype(str).unique())
    shown = words[words[ID_COLUMN].astype(str).isin(docs)]
    vals = shown["attribution"].to_numpy(dtype=np.float64)
    scale = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 0.0
    fig = Figure(figsize=(WIDTH_IN, 1), dpi=DPI)
    renderer = FigureCanvasAgg(fig).get_renderer()

    def measure(s, size):
        return renderer.get_text_width_height_descent(s, FontProperties(size=size),
                                                      ismath=False)[0] / DPI

    blocks = _blocks(words, documents, docs, scale)
    key = ("blue: towards the explained class · orange: against it · grey: not seen · "
           f"full colour = {scale:.3g} logits (Integrated Gradients)")
    placed, height = _layout(blocks + [(key, [])], measure)
    placed[-1] = (key, _MARGIN, placed[-1][2], _SIZE, None, False)  # the key: plain, small
    fig.set_size_inches(WIDTH_IN, height)
    for text, x, y, size, a, bold in placed:
        kw = {"fontsize": size, "va": "baseline", "ha": "left", "transform": fig.dpi_scale_trans}
        if bold:
            kw["fontweight"] = "bold"
        elif a is None:
            kw["color"] = "#444444"
        elif pd.isna(a):
            kw["color"] = "#999999"
        elif scale > 0 and a != 0:
            kw["bbox"] = {"facecolor": (*(_BLUE if a > 0 else _ORANGE),
                                        0.85 * min(1.0, abs(a) / scale)),
                          "edgecolor": "none", "pad": 0.6}
        fig.text(x, height - y, text, **kw)
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)
    return Path(path)
