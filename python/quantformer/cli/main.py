"""Command-line interface: ``quantformer <verb>`` or ``python -m quantformer <verb>``.

The CLI is the one contract between R and Python. Each verb module defines ``add_cli(sub)``,
which adds its sub-parser and sets ``func``; this module holds the options every verb shares
and maps errors to exit codes:

* 0: success
* 2: usage or input error (:class:`~quantformer._core.errors.InputError`, bad flags); no output file
  is left behind
* 1: internal error (a bug, or a failure inside torch/transformers)
* 130: interrupted

Verb modules keep heavy imports (torch, transformers, scikit-learn) inside functions so that
``--help`` and light verbs start fast.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import traceback
import warnings

from .._core.version import __version__
from .._core.errors import InputError

# modules that define add_cli(sub), in the order their verbs are listed in --help
VERB_MODULES = [
    "quantformer.models.tokenize",
    "quantformer.io.datasets",
    "quantformer.train.finetune",
    "quantformer.infer.classifier",
    "quantformer.score.evaluate",
    "quantformer.measure.prevalence",
    "quantformer.measure.regress",
    "quantformer.score.calibration",
    "quantformer.select.demo",
    "quantformer.infer.zeroshot",
    "quantformer.infer.embed",
    "quantformer.select.tune",
    "quantformer.select.compare",
    "quantformer.label.suggest",
    "quantformer.cli.serve",
]


# ------------------------------------------------------------------------------------------
# shared options


def add_corpus_options(p: argparse.ArgumentParser, *, label: bool = True) -> None:
    """--text-col, --label-col, --id-col and --format, identical for every verb."""
    g = p.add_argument_group("corpus columns")
    g.add_argument("--text-col", default=None, help="text column (default: text)")
    if label:
        g.add_argument("--label-col", default=None,
                       help="label column (default: label, when it exists)")
    g.add_argument("--id-col", default=None,
                   help="document id column (default: doc_id when it exists, else text1..textN)")
    g.add_argument("--format", dest="in_format", default=None,
                   help="input format when the extension does not tell: parquet, csv, tsv, "
                        "txt (sniffed), lines (one document a line), jsonl, rds")
    g.add_argument("--quoting", default="auto", choices=["auto", "csv", "none"],
                   help="quotes in CSV/TSV: csv (RFC 4180), none (every line is one row, "
                        "quotes are text: files made with paste or exported unquoted), auto "
                        "(csv, but refuses a TSV where a quote would merge lines) (auto)")


def add_labels_file_option(p: argparse.ArgumentParser, corpus: str = "--input") -> None:
    """--labels-file: labels one a line in a file of their own (train_text.txt +
    train_labels.txt), for the corpus given with ``corpus``."""
    p.add_argument("--labels-file", default=None,
                   help=f"labels of the {corpus} documents in a file of their own, one a line "
                        f"in document order (e.g. {corpus} train_text.txt --labels-file "
                        "train_labels.txt); instead of --label-col")


def corpus_kwargs(args, *, label: bool = True) -> dict:
    """The read_frame keyword arguments from the shared corpus options (``labels_file`` is
    left out: it belongs to one input of the verb, which passes it itself)."""
    kw = {"text_col": args.text_col, "id_col": args.id_col, "fmt": args.in_format,
          "quoting": args.quoting}
    if label:
        kw["label_col"] = getattr(args, "label_col", None)
    return kw


def add_task_options(p: argparse.ArgumentParser, how: str) -> None:
    """--task, --label-cols, --label-sep (tune, compare, evaluate; see
    :mod:`quantformer.models.tasks`); ``how`` says what the task changes for the verb."""
    from ..train.arguments import TASKS

    g = p.add_argument_group("what is measured")
    g.add_argument("--task", default="classification", choices=TASKS,
                   help=f"classification (default), regression or multilabel; {how}")
    g.add_argument("--label-cols", default=None,
                   help="multilabel: comma-separated 0/1 columns, one per label")
    g.add_argument("--label-sep", default=None,
                   help="multilabel: separator of the labels in one label column (e.g. '|')")


def task_kwargs(args) -> dict:
    """``task``, ``label_cols`` (a list) and ``label_sep`` from :func:`add_task_options`,
    checked by :func:`check_task_flags`."""
    cols = check_task_flags(args)
    return {"task": args.task, "label_cols": cols, "label_sep": args.label_sep}


def check_task_flags(args) -> list[str] | None:
    """``--label-cols`` as a list, after checking that ``--task multilabel`` has exactly one of
    ``--label-cols`` and ``--label-sep``: checked before any file is read, so the error names
    them rather than a missing ``--label-col``.

    Raises:
        InputError: naming ``--label-cols`` and ``--label-sep``.
    """
    cols = [c.strip() for c in args.label_cols.split(",") if c.strip()] \
        if args.label_cols else None
    if args.task == "multilabel":
        from ..models.multilabel import Multilabel

        Multilabel.for_training(None, cols, args.label_sep)
    return cols


def add_partition_options(p: argparse.ArgumentParser) -> None:
    """--input (one file, or a folder / glob / several files = a partitioned corpus),
    --scheduler and --resume, identical for predict, zeroshot and embed
    (see :mod:`quantformer.scale.dask`)."""
    p.add_argument("--input", required=True, nargs="+",
                   help="corpus file; or a folder, a quoted glob ('tweets/*.parquet') or "
                        "several files: a partitioned corpus, then --out is a folder with one "
                        "Parquet file per partition and a manifest.json (also with one file "
                        "when --out is a folder or has no extension)")
    g = add_scheduler_option(p, "partitions")
    g.add_argument("--resume", action="store_true",
                   help="continue a partitioned run in --out: skip partitions whose output is "
                        "complete (without it a non-empty --out is refused)")


def add_scheduler_option(p: argparse.ArgumentParser, what: str = "runs"):
    """--scheduler (``local:N`` or a Dask scheduler address); returns its argument group."""
    g = p.add_argument_group("Dask")
    g.add_argument("--scheduler", default=None,
                   help="local:N (N worker processes here) or tcp://host:8786 (a running Dask "
                        f"scheduler); default: {what} one after another in this process")
    return g


def partitioned(args) -> bool:
    """True when the verb's arguments ask for a partitioned run; else sets ``args.input`` to
    the one corpus file (today's single-file path)."""
    from ..scale.dask import is_partitioned

    if is_partitioned(args.input, args.scheduler, args.resume, args.out):
        return True
    args.input = args.input[0]
    return False


def add_model_option(p: argparse.ArgumentParser, help_extra: str = "") -> None:
    p.add_argument("--model", default=None,
                   help="hub id or local model folder (default: the bundled all-MiniLM-L6-v2)"
                        + help_extra)


def add_device_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto",
                   help="auto (CUDA, else MPS, else CPU), cpu, cuda, cuda:N or mps (auto)")


def add_quiet_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def add_results_dir_options(p: argparse.ArgumentParser) -> None:
    """``--out`` (a results folder, new or empty) and ``--overwrite`` (tune, compare)."""
    p.add_argument("--out", required=True, help="output folder (new or empty)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out folder (no earlier file is kept)")


def positive(kind):
    """argparse type: a number > 0 of ``kind`` (int or float).

    Args:
        kind: ``int`` or ``float``.

    Returns:
        A converter that raises ``argparse.ArgumentTypeError`` ("'1.5' is not an integer",
        "'x' is not a number", "must be greater than 0, not 0") for a bad value.
    """
    noun = {int: "an integer", float: "a number"}.get(kind, f"a {kind.__name__}")

    def conv(s: str):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{s}' is not {noun}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, not {s}")
        return v

    conv.__name__ = f"positive {kind.__name__}"
    return conv


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


# ------------------------------------------------------------------------------------------
# info verb: what R's quantformer_config() shows


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="versions, default model and devices (--json for machines)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--model", default=None,
                   help="a model directory written by finetune: print its checked run record "
                        "(quantformer.json) instead of the versions")
    p.set_defaults(func=_run_info)


def _run_info(args) -> int:
    from importlib import metadata

    from ..models.hub import DEFAULT_MODEL_NAME, default_model_path

    if args.model is not None:
        from ..io.modeldir import read_record

        record = read_record(args.model)
        if args.json:
            print_json(record)
        else:
            for k, v in record.items():
                print(f"{k:20s} {v}")
        return 0
    info = {"quantformer": __version__, "python": sys.version.split()[0],
            "executable": sys.executable, "default_model": DEFAULT_MODEL_NAME,
            "default_model_path": default_model_path()}
    for pkg in ("torch", "transformers", "tokenizers", "pandas", "numpy", "pyarrow", "pyreadr",
                "scikit-learn", "xgboost-cpu"):
        try:
            info[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            info[pkg] = None
    try:
        import torch

        info["cuda"] = torch.cuda.is_available()
        mps = getattr(torch.backends, "mps", None)
        info["mps"] = bool(mps is not None and mps.is_available())
    except Exception:  # pragma: no cover
        info["cuda"] = info["mps"] = False
    if args.json:
        print_json(info)
    else:
        for k, v in info.items():
            print(f"{k:20s} {v}")
    return 0


# ------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``quantformer <verb>: error: ...`` and where to get help.

    argparse's default prints the whole usage block before the message; users (and R, which
    shows the CLI's message as its error) need only the problem and the fix. Abbreviated
    flags are refused (``allow_abbrev=False``, also in every verb's sub-parser, which is of
    this class): ``tune --epochs`` is an error, not ``--epochs-grid``.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # argparse takes "-1e-5" for an option (its pattern knows "-1" and "-.5" only), so
        # `--lr -1e-5` said "expected one argument" instead of "must be positive"
        self._negative_number_matcher = re.compile(
            r"^-\d+$|^-\d*\.\d+$|^-(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown flag is reported by the verb's parser
        (``quantformer tune: error: ...``) with the flags it may have meant."""
        args, unknown = self.parse_known_args(args, namespace)
        if unknown:
            parser = self._verb_parser(getattr(args, "verb", None))
            parser.error(f"unrecognized arguments: {' '.join(unknown)}"
                         + parser._did_you_mean(unknown))
        return args

    def _verb_parser(self, verb) -> argparse.ArgumentParser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and verb in action.choices:
                return action.choices[verb]
        return self

    def _did_you_mean(self, unknown: list[str]) -> str:
        """``" (did you mean --epochs-grid?)"``: this parser's flags that start with, or are
        close to, the first unknown flag (abbreviations are not accepted)."""
        import difflib

        flag = next((u.split("=", 1)[0] for u in unknown if u.startswith("--")), None)
        if flag is None:
            return ""
        known = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
        near = [o for o in known if o.startswith(flag)] or \
            difflib.get_close_matches(flag, known, n=3, cutoff=0.75)
        return f" (did you mean {' or '.join(near)}?)" if near else ""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="quantformer",
        description="Measure concepts in text with Transformer transfer learning "
                    "(Wankmüller 2022): fine-tune, predict, zero-shot, evaluate, baselines.",
    )
    parser.add_argument("--version", action="version", version=f"quantformer {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show Python tracebacks on errors")
    sub = parser.add_subparsers(dest="verb", metavar="<verb>")
    sub.required = True
    for name in VERB_MODULES:
        importlib.import_module(name).add_cli(sub)
    _add_info(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"quantformer: warning: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 usage or input error, 1 internal error).

    Usage errors (unknown verb or flag, a bad flag value) and ``--help`` return argparse's
    code (2 and 0) instead of raising ``SystemExit``, so in-process callers get a code too.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    debug = args.debug or os.environ.get("QUANTFORMER_DEBUG") == "1"
    with warnings.catch_warnings():
        # Python's usual filter for user warnings, reset so that a second in-process run
        # shows its warnings again; each is printed as one short line
        warnings.filterwarnings("default", category=UserWarning)
        if not debug:
            warnings.showwarning = _show_warning
        return _run(args, debug)


def _run(args, debug: bool) -> int:
    try:
        code = args.func(args)
    except InputError as exc:
        if debug:
            traceback.print_exc()
        print(f"quantformer {args.verb}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        print(f"quantformer {args.verb}: interrupted", file=sys.stderr, flush=True)
        return 130
    except Exception as exc:  # internal errors: short message, traceback with --debug
        if debug:
            traceback.print_exc()
        print(f"quantformer {args.verb}: internal error: {type(exc).__name__}: {exc}"
              + ("" if debug else " (run with --debug for the traceback)"),
              file=sys.stderr, flush=True)
        return 1
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
