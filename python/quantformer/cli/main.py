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
import os
import re
import sys
import traceback
import warnings

from .._core.errors import InputError, ParamWarning
from .._core.parameters import cli_flag, cli_setting, r_argument, r_flags, r_setting
from .._core.show import print_json
from .._core.version import __version__, versions
from ._rules import caller_rules
from ..io.modeldir import encoder_record, read_record
from ..models.hub import DEFAULT_MODEL_NAME, default_model_path
from ..models.precision import describe_hardware

# modules that define add_cli(sub), in the order their verbs are listed in --help
VERB_MODULES = [
    "quantformer.cli.tokenize",
    "quantformer.cli.example",
    "quantformer.cli.finetune",
    "quantformer.cli.pretrain",
    "quantformer.cli.predict",
    "quantformer.cli.evaluate",
    "quantformer.cli.reliability",
    "quantformer.cli.estimate",
    "quantformer.cli.regress",
    "quantformer.cli.calibrate",
    "quantformer.cli.demo",
    "quantformer.cli.zeroshot",
    "quantformer.cli.embed",
    "quantformer.cli.partition",
    "quantformer.cli.tune",
    "quantformer.cli.compare",
    "quantformer.cli.suggest",
    "quantformer.cli.explain",
    "quantformer.cli.behave",
    "quantformer.cli.code",
    "quantformer.cli.serve",
    "quantformer.cli.annotate",
]


# ------------------------------------------------------------------------------------------
# info verb: what R's quantformer_config() shows


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="versions, default model and devices (--json for machines)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--model", default=None,
                   help="a model directory written by finetune (or an encoder folder written "
                        "by pretrain): print its checked run record (quantformer.json) instead "
                        "of the versions")
    p.add_argument("--verbs", action="store_true",
                   help="print the verbs (with whether each takes --quiet) and the rules a "
                        "caller checks before a run (the labels of zeroshot, the most "
                        "numeric classes before a numeric-outcome warning) instead of the "
                        "versions")
    p.set_defaults(func=_run_info)


def verb_options() -> dict:
    """Every verb of the CLI with ``{"quiet": <whether it takes --quiet>}``, from the parser."""
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {name: {"quiet": any("--quiet" in a.option_strings for a in sub._actions)}
                    for name, sub in sorted(action.choices.items())}
    return {}


def _print_info(answer: dict, as_json: bool) -> int:
    """Print ``info``'s answer as JSON or as aligned ``key value`` lines; return exit code 0."""
    if as_json:
        print_json(answer)
    else:
        for k, v in answer.items():
            print(f"{k:20s} {v}")
    return 0


def _run_info(args) -> int:
    if args.verbs:
        return _print_info({"quantformer": __version__, "verbs": verb_options(), **caller_rules()},
                           args.json)
    if args.model is not None:
        return _print_info(encoder_record(args.model) or read_record(args.model), args.json)
    info = {"quantformer": __version__, "python": sys.version.split()[0],
            "executable": sys.executable, "default_model": DEFAULT_MODEL_NAME,
            "default_model_path": default_model_path()}
    info.update(versions(("torch", "transformers", "tokenizers", "pandas", "numpy", "pyarrow",
                          "pyreadr", "scikit-learn", "xgboost-cpu")))
    try:
        import torch

        info["cuda"] = torch.cuda.is_available()
        mps = getattr(torch.backends, "mps", None)
        info["mps"] = bool(mps is not None and mps.is_available())
    except Exception:  # pragma: no cover
        info["cuda"] = info["mps"] = False
    hw = describe_hardware()  # what --precision auto picks here, and why (flat: R prints it)
    info.update({"cpu_model": hw["cpu_model"],
                 "cpu_isa": " ".join(k for k, v in hw["isa"].items() if v) or "none found",
                 "precision_auto": hw["auto_precision_cpu"],
                 "precision_reason": hw["auto_precision_reason"]})
    return _print_info(info, args.json)


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

    #: the calling R function's arguments (``--r-names``), read before parsing so that
    #: argparse's own errors name them too
    r_names: list[str] | None = None

    def error(self, message: str):
        if _Parser.r_names is not None:
            message = r_flags(message, _Parser.r_names)
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
    # R passes the calling function's arguments: errors then name them instead of flags
    parser.add_argument("--r-names", default=None, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="verb", metavar="<verb>")
    sub.required = True
    for name in VERB_MODULES:
        importlib.import_module(name).add_cli(sub)
    _add_info(sub)
    return parser


def _r_names(argv: list[str]) -> list[str] | None:
    """The ``--r-names`` value of an argument vector, before the verb (None when absent)."""
    for i, a in enumerate(argv[:-1]):
        if a == "--r-names":
            return [x for x in argv[i + 1].split(",") if x]
        if not a.startswith("-"):
            return None  # the verb: global options come before it
    return None


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"quantformer: warning: {warning_text(message, _Parser.r_names)}", file=sys.stderr,
          flush=True)


def warning_text(message, r_names: list[str] | None) -> str:
    """A warning's one line: a :class:`ParamWarning` names its parameters as flags, or, when R
    called (``r_names``: the calling R function's arguments), as R arguments in its R
    wording; other warnings as they are."""
    if not isinstance(message, ParamWarning):
        return str(message)
    if r_names is None:
        return message.render(cli_setting)
    return message.render(lambda field: r_setting(field, r_names), r=True)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 usage or input error, 1 internal error).

    Usage errors (unknown verb or flag, a bad flag value) and ``--help`` return argparse's
    code (2 and 0) instead of raising ``SystemExit``, so in-process callers get a code too.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    _Parser.r_names = _r_names(sys.argv[1:] if argv is None else argv)
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


def _message(exc: InputError, args) -> str:
    """The error's text naming each library parameter as its flag, or, when R called
    (``--r-names``), as the calling R function's argument."""
    if args.r_names is None:
        return exc.render(cli_flag)
    r_args = [a for a in args.r_names.split(",") if a]
    return r_flags(exc.render(lambda name: r_argument(name, r_args), r=True), r_args)


def _run(args, debug: bool) -> int:
    try:
        args.error_text = lambda exc: _message(exc, args)  # for a verb's own answers
        code = args.func(args)
    except InputError as exc:
        if debug:
            traceback.print_exc()
        print(f"quantformer {args.verb}: error: {_message(exc, args)}", file=sys.stderr,
              flush=True)
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
