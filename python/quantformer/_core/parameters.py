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
    "input": ("--input", ("newdata", "x", "files")),
    "inputs": ("--input", ("newdata", "x", "files")),
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
    "task": ("--task", ("task",)),
    "model": ("--model", ("model", "x")),
    "pred": ("--pred", ("x",)),
    "top": ("--top", ("n", "top")),
    "llm": ("--llm", ("llm", "model")),
    "corpus": ("--corpus", ("x",)),
    "codes": ("--codes", ("x",)),
    "add_coder": ("--add-coder", ("llm_codes",)),
    "coder_name": ("--coder-name", ("llm_coder",)),
    "chunks_out": ("--chunks-out", ("windows",)),
}
# switches: in R they are passed as `name = TRUE`
SWITCHES = ("preserve_case", "overwrite", "keep_text", "multi_label", "resume", "tune_thresholds", "calibrated")


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
    if name in SWITCHES:  # an R argument or one passed through `...`: set to TRUE
        return f"`{names[0]} = TRUE`"
    return f"`{names[0]}`"


def cli_setting(field: str) -> str:
    """A field of a message on the command line: ``"task=regression"`` -> ``--task
    regression``; a plain parameter name -> its flag (:func:`cli_flag`)."""
    name, sep, value = field.partition("=")
    return f"{cli_flag(name)} {value}" if sep else cli_flag(name)


def r_setting(field: str, r_args: Iterable[str] | None = None) -> str:
    """A field of a message in R: ``"task=regression"`` -> `` `task = "regression"` ``
    (numbers and ``TRUE``/``FALSE`` unquoted); a plain parameter name -> its R argument
    (:func:`r_argument`)."""
    name, sep, value = field.partition("=")
    if not sep:
        return r_argument(name, r_args)
    arg = r_argument(name, r_args).strip("`").split(" = ")[0]
    bare = value in ("TRUE", "FALSE") or re.fullmatch(r"-?\d+(\.\d+)?", value)
    shown = value if bare else '"' + value + '"'
    return f"`{arg} = {shown}`"


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
        if name in SWITCHES and ("..." in have or name in have):
            return f"`{name} = TRUE`"
        return f"`{candidates[0]}`" if candidates else flag

    return re.sub(r"--[a-z][a-z0-9-]*", one, text)
