"""Printing what the CLI shows users: aligned plain-text tables and JSON."""

from __future__ import annotations

import json
import sys


def print_table(df, title: str | None = None, file=None, floatfmt: str = "{:.4f}") -> None:
    """Print a DataFrame as an aligned plain-text table (what the CLI shows users)."""
    import pandas as pd

    out = file or sys.stdout
    if title:
        print(title, file=out)
    with pd.option_context("display.width", 200, "display.max_columns", 50,
                           "display.max_rows", 200,
                           "display.float_format", lambda x: floatfmt.format(x)):
        # missing cells (e.g. precision in the accuracy row) print blank, not "NaN"
        print(df.to_string(na_rep=""), file=out)
    out.flush()


def print_json(obj) -> None:
    print(json.dumps(obj, indent=2, default=str))
