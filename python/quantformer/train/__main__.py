"""``python -m quantformer.train SPEC OUT``: fine-tune from a JSON spec, a library entry point
for callers inside the package that need a child process (the coding room's "fine-tune now").

``SPEC`` is a JSON object: ``train`` (a corpus file :func:`quantformer.io.frames.read_frame`
reads), ``overwrite`` (bool) and ``finetune`` (keyword arguments of
:func:`quantformer.train.finetune.finetune`); ``OUT`` is the model folder written. Exit status
0 when the folder is written, 2 for an input error, 1 otherwise; the one-line reason goes to
standard error. The command line of the ``finetune`` verb stays in ``cli/``.
"""

from __future__ import annotations

import json
import sys

from .._core.errors import InputError
from ..io.frames import read_frame
from .finetune import finetune


def run_spec(spec: dict, out: str) -> None:
    """Fine-tune as ``spec`` says and save the model to ``out``."""
    train = read_frame(spec["train"], require_label=True)
    clf = finetune(train, **spec.get("finetune", {}))
    clf.save(out, overwrite=bool(spec.get("overwrite", False)))


def main(argv: list[str]) -> int:
    """Run ``argv = [SPEC, OUT]``; the exit status (see the module docstring)."""
    if len(argv) != 2:
        print("usage: python -m quantformer.train SPEC.json OUT", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as handle:
            run_spec(json.load(handle), argv[1])
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
