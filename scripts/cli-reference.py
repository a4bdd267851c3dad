#!/usr/bin/env python3
"""Write the command-line reference page from the CLI's own help text.

Runs ``PYTHON -m quantformer --help``, reads the verbs it lists, runs
``PYTHON -m quantformer VERB --help`` for each and writes one page (R Markdown with no code
chunks, so pkgdown renders it as an article) with the help text of every verb, in the order
``--help`` lists them. The verb list is never written here: a verb added to the CLI appears on
the page at the next build.

Usage: python3 scripts/cli-reference.py --python .venv/bin/python --out PAGE.Rmd
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys


def run_help(python: str, *args: str) -> str:
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    proc = subprocess.run([python, "-m", "quantformer", *args, "--help"], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"cli-reference: `quantformer {' '.join(args)} --help` failed "
                 f"(exit {proc.returncode}):\n{proc.stderr}")
    return proc.stdout.rstrip() + "\n"


def list_verbs(top_help: str) -> list[tuple[str, str]]:
    """(verb, one-line description) in the order of the top-level help's verb list.

    argparse lists subcommands under the positional argument, indented by four spaces, with
    their help either on the same line or (long names) on the next; continuation lines are
    indented further.
    """
    verbs: list[tuple[str, str]] = []
    in_section = False
    for line in top_help.splitlines():
        if re.match(r"^positional arguments:", line):
            in_section = True
            continue
        if in_section and line and not line.startswith(" "):
            break                                  # next section (options:)
        m = re.match(r"^    ([a-z][a-z0-9_-]*)(?:\s{2,}(.*))?$", line)
        if in_section and m:
            verbs.append((m.group(1), (m.group(2) or "").strip()))
        elif in_section and verbs and re.match(r"^\s{6,}\S", line):
            verb, desc = verbs[-1]
            verbs[-1] = (verb, (desc + " " + line.strip()).strip())
    if not verbs:
        sys.exit("cli-reference: found no verbs in `quantformer --help`")
    return verbs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter that has quantformer (default: this one)")
    ap.add_argument("--out", required=True, help="the page to write (.Rmd or .md)")
    a = ap.parse_args()

    top = run_help(a.python)
    verbs = list_verbs(top)
    fence = "````"                                 # help text may contain ``` itself
    out = [
        "---",
        'title: "Command-line reference"',
        "---",
        "",
        "Every verb of `quantformer` (or `python -m quantformer`) with its options, as printed by",
        "`quantformer VERB --help`. This page is generated from the help text when the site is",
        "built (`scripts/cli-reference.py`), so it always matches the installed version. The same",
        "verbs are Python functions (`quantformer.finetune()`, `quantformer.predict()`, ...) and,",
        "for most of them, R functions; the files they all read and write are described in the",
        "[frame contract](contract.html).",
        "",
        "| verb | what it does |",
        "|---|---|",
    ]
    out += [f"| [`{v}`](#{v}) | {d.replace('|', '/')} |" for v, d in verbs]
    out += ["", "## quantformer", "", fence + "text", top.rstrip(), fence, ""]
    for verb, _ in verbs:
        out += [f"## {verb} {{#{verb}}}", "", fence + "text", run_help(a.python, verb).rstrip(),
                fence, ""]
    text = "\n".join(out)
    if re.search(r"`r[ #]", text):                 # knitr would run it as inline R code
        text = re.sub(r"`r([ #])", r"` r\1", text)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"cli-reference: {len(verbs)} verbs -> {a.out}")


if __name__ == "__main__":
    main()
