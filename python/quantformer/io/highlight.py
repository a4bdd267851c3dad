"""One self-contained HTML page that highlights word attributions (no scripts, no links out).

Each document is shown as its original text with every attributed word on a background whose
hue gives the sign (blue: towards the target, orange: against it; a colour-blind-safe pair)
and whose strength gives the size, on one scale for the whole page (the largest absolute
attribution shown), so documents compare. Words the model did not see (outside its window)
are struck through in grey. Beside each document: its target, the prediction and the
probabilities, and the completeness gap.
"""

from __future__ import annotations

import html
import os

import numpy as np
import pandas as pd

from .._core.atomic import write_text
from .._core.errors import InputError
from .columns import ID_COLUMN, PREDICTED_COLUMN, PROB_PREFIX

_STYLE = """body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;line-height:1.7}
.doc{border-top:1px solid #ccc;padding:.6em 0}.meta{font-size:.85em;color:#444}
.unseen{color:#999;text-decoration:line-through}mark{border-radius:3px;padding:0 1px}
.key span{padding:0 .4em;margin-right:.5em}"""


def check_html_path(path: str | os.PathLike) -> None:
    """Raises InputError unless ``path`` ends in ``.html`` or ``.htm``."""
    if not str(path).lower().endswith((".html", ".htm")):
        raise InputError(f"{{html}} '{path}' must end in .html", params=["html"])


def _colour(a: float, scale: float) -> str:
    strength = min(1.0, abs(a) / scale) if scale > 0 else 0.0
    rgb = "33,102,172" if a > 0 else "230,97,1"
    return f"rgba({rgb},{0.85 * strength:.3f})"


def highlight(text: str, words: pd.DataFrame, scale: float) -> str:
    """``text`` as HTML with each word of ``words`` (``start``, ``end``, ``attribution``)
    highlighted on the shared ``scale``."""
    parts, pos = [], 0
    for s, e, a in zip(words["start"], words["end"], words["attribution"]):
        parts.append(html.escape(text[pos:s]))
        w = html.escape(text[s:e])
        if pd.isna(a):
            parts.append(f'<span class="unseen" title="not seen by the model">{w}</span>')
        else:
            parts.append(f'<mark style="background:{_colour(a, scale)}" '
                         f'title="{a:+.4f}">{w}</mark>')
        pos = e
    parts.append(html.escape(text[pos:]))
    return "".join(parts)


def _meta(doc: pd.Series) -> str:
    probs = ", ".join(f"{html.escape(c[5:])} {doc[c]:.3f}" for c in doc.index
                      if c.startswith(PROB_PREFIX))
    pred = doc.get(PREDICTED_COLUMN)
    return (f'<div class="meta"><b>{html.escape(str(doc[ID_COLUMN]))}</b> · target '
            f'<b>{html.escape(str(doc["target"]))}</b> · predicted {html.escape(str(pred))}'
            + (f" · {probs}" if probs else "")
            + f' · completeness gap {doc["completeness_gap"]:.1%}, {doc["steps"]} steps</div>')


def attribution_page(words: pd.DataFrame, documents: pd.DataFrame, texts: dict,
                     title: str = "Word attributions") -> str:
    """The HTML page (a string).

    Args:
        words, documents: the frames of :func:`quantformer.audit.explain.explain`.
        texts: ``doc_id -> text``.
    """
    vals = words["attribution"].to_numpy(dtype=np.float64)
    scale = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 0.0
    body = []
    groups = dict(tuple(words.groupby([ID_COLUMN, "target"], sort=False, observed=True)))
    for _, doc in documents.iterrows():
        w = groups.get((doc[ID_COLUMN], doc["target"]))
        if w is None:
            continue
        body.append(f'<div class="doc">{_meta(doc)}<div>'
                    f'{highlight(texts[doc[ID_COLUMN]], w, scale)}</div></div>')
    key = (f'<p class="key"><span style="background:{_colour(1, 1)}">towards the target</span>'
           f'<span style="background:{_colour(-1, 1)}">against it</span>'
           f'<span class="unseen">not seen</span> full colour = {scale:.3g} logits '
           "(Integrated Gradients; hover a word for its attribution)</p>")
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}'
            f"</title><style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{key}"
            + "".join(body) + "</body></html>")


def write_attribution_page(words: pd.DataFrame, documents: pd.DataFrame, texts: dict,
                           path: str | os.PathLike, title: str = "Word attributions"):
    """Write :func:`attribution_page` to ``path`` atomically."""
    check_html_path(path)
    return write_text(path, attribution_page(words, documents, texts, title))
