"""The one table of parameter names: the library's, the CLI's flag, the R arguments.

Library functions raise :class:`~quantformer._core.errors.InputError` naming their own
parameters; the CLI renders those names as flags, or as the R arguments of the R function that
called it. A parameter missing here is ``--name-with-dashes`` on the command line and ``name``
in R.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# library name -> (CLI flag, R arguments in order of preference)
PARAMETERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "out": ("--out", ("output_dir",)),
    "train": ("--train", ("x",)),
    "input": ("--input", ("newdata", "x")),
    "inputs": ("--input", ("newdata", "x")),
    "valid": ("--valid", ("validation",)),
    "valid_fraction": ("--valid-fraction", ("validation",)),
    "label_col": ("--label-col", ("y",)),
    "label_cols": ("--label-cols", ("y",)),
    "label_sep": ("--label-sep", ("y",)),
    "labels": ("--labels", ("y", "labels")),
    "labels_file": ("--labels-file", ("y",)),
    "text_col": ("--text-col", ("text_field",)),
    "id_col": ("--id-col", ("docid_field",)),
    "in_format": ("--format", ("format",)),
    "fmt": ("--format", ("format",)),
    "lrs": ("--lrs", ("lr",)),
    "epochs_grid": ("--epochs-grid", ("epochs",)),
}
# switches: in R they are passed as `name = TRUE`
SWITCHES = ("overwrite", "keep_text", "multi_label", "resume", "tune_thresholds", "calibrated")


def cli_flag(name: str) -> str:
    """The command-line flag of library parameter ``name`` (``max_length`` -> ``--max-length``)."""
    entry = PARAMETERS.get(name)
    return entry[0] if entry else "--" + name.replace("_", "-")


def r_argument(name: str, r_args: Iterable[str] | None = None) -> str:
    """The R argument of library parameter ``name``: the first of its R names that the calling
    R function has (``r_args``; all of them when not given), written as R users read it."""
    entry = PARAMETERS.get(name)
    names = entry[1] if entry else (name,)
    if r_args is not None:
        have = set(r_args)
        names = tuple(n for n in names if n in have) or (name,)
    if name in SWITCHES and (r_args is None or name not in r_args):
        return f"`{names[0]} = TRUE`"  # passed through `...`
    return f"`{names[0]}`"


def _flag_names() -> dict[str, str]:
    """CLI flag -> library parameter, for the flags of :data:`PARAMETERS`."""
    return {flag: name for name, (flag, _) in PARAMETERS.items()}


def r_flags(text: str, r_args: Iterable[str]) -> str:
    """A message of the command-line layer itself (argparse's, or a verb's own) with each flag
    that an argument of the calling R function sets written as that argument; other flags stay.

    Library errors name their parameters as fields (:class:`~quantformer._core.errors.
    InputError`) and need no such reading; this serves the few messages written in flags.
    """
    have = set(r_args)
    by_flag = _flag_names()

    def one(match: re.Match) -> str:
        flag = match.group(0)
        name = by_flag.get(flag, flag[2:].replace("-", "_"))
        entry = PARAMETERS.get(name)
        candidates = [n for n in (entry[1] if entry else (name,)) if n in have]
        if name in SWITCHES and "..." in have and name not in have:
            return f"`{name} = TRUE`"
        return f"`{candidates[0]}`" if candidates else flag

    return re.sub(r"--[a-z][a-z0-9-]*", one, text)
