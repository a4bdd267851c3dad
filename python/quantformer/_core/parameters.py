"""The one table of parameter names: the library's, the CLI's flag, the R arguments.

Library functions raise :class:`~quantformer._core.errors.InputError` naming their own
parameters; the CLI renders those names as flags, or as the R arguments of the R function that
called it. A parameter missing here is ``--name-with-dashes`` on the command line and ``name``
in R.
"""

from __future__ import annotations

from collections.abc import Iterable

# library name -> (CLI flag, R arguments in order of preference)
PARAMETERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "out": ("--out", ("output_dir",)),
    "train": ("--train", ("x",)),
    "input": ("--input", ("newdata", "x")),
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
}
# switches: in R they are passed as `name = TRUE`
SWITCHES = ("overwrite", "keep_text", "multi_label", "resume", "quiet", "calibrated")


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
    if name in SWITCHES:
        return f"`{names[0]} = TRUE`"
    return f"`{names[0]}`"
