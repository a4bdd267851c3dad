"""The ppi-python library of prediction-powered inference (Angelopoulos et al. 2023,
"Prediction-powered inference", Science 382), imported without its side effect."""

from __future__ import annotations

import sys
import warnings


def ppi_py():
    """The ppi-python module, imported without its side effect: its ``ppi.py`` calls
    ``warnings.simplefilter("ignore")`` at import, which would silence every later warning of
    the session (ours included); the filters are restored after the import."""
    if "ppi_py" not in sys.modules:
        with warnings.catch_warnings():
            import ppi_py  # noqa: F401
    return sys.modules["ppi_py"]
