"""A small labelled toy corpus for the fine-tuning, prediction and evaluation tests."""

from __future__ import annotations

import pandas as pd

from tiny_models import TINY_CORPUS

_TAX = ("tax", "deficit", "econom", "jobs", "spending", "trade")


def toy_frame(n: int = 48) -> pd.DataFrame:
    """``n`` documents from the tiny corpus; label ``econ`` when the text is about money, else
    ``other``; a docvar ``year``."""
    texts = [TINY_CORPUS[i % len(TINY_CORPUS)] for i in range(n)]
    labels = ["econ" if any(w in t.lower() for w in _TAX) else "other" for t in texts]
    return pd.DataFrame({"doc_id": [f"d{i:03d}" for i in range(n)], "text": texts,
                         "label": labels, "year": list(range(2000, 2000 + n))})
