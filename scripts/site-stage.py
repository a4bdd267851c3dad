#!/usr/bin/env python3
"""Stage the package sources for the pkgdown site (called by scripts/build-site.sh).

Copies what pkgdown needs into STAGE (the R package, its man pages and vignettes,
_pkgdown.yml) and turns the repository's Markdown pages into site pages:

    README.md          -> index.md                        (the home page)
    docs/NAME.md       -> vignettes/articles/NAME.Rmd     (articles/NAME.html)
    bench/RESULTS.md   -> vignettes/articles/benchmarks.Rmd

Relative links between these files are rewritten to the pages they become (anchors kept), so
a link that works on GitHub works on the site; a link to another file of the repository
becomes plain text naming the file. A link whose target does not exist is left as it is, and
the link check (scripts/check-site-links.py) then fails on it.

Without --eval the vignettes' code is shown but not run (R CMD check runs it, and knitting
them again would double the slowest part of make check): a chunk before the setup chunk sets
``eval = FALSE`` and inline R code is replaced by "…".

Usage: python3 scripts/site-stage.py ROOT STAGE [--eval]
"""
from __future__ import annotations

import argparse
import os
import posixpath
import re
import shutil
import sys

LINK = re.compile(r"(!?\[[^\]]*\])\(([^)\s]+)\)")
NO_EVAL_NOTE = (
    "*On this site the code of this article is shown without its output. The vignette built "
    "with the package shows the output: `vignette(\"{name}\", package = \"quantformer\")`.*\n\n"
)


def site_page(repo_path: str) -> str | None:
    """The site page a repository file becomes, relative to the site root, or None."""
    if repo_path == "README.md":
        return "index.html"
    if repo_path == "bench/RESULTS.md":
        return "articles/benchmarks.html"
    m = re.fullmatch(r"(?:vignettes|docs)/([^/]+)\.(?:Rmd|md)", repo_path)
    if m:
        return f"articles/{m.group(1)}.html"
    return None


def rewrite_links(text: str, src: str, page: str, root: str) -> str:
    """Rewrite relative links of the repository file ``src`` for the site page ``page``."""
    src_dir = posixpath.dirname(src)
    page_dir = posixpath.dirname(page)

    def fix(m: re.Match) -> str:
        label, target = m.group(1), m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "//")):
            return m.group(0)
        path, _, frag = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(src_dir, path))
        if not os.path.exists(os.path.join(root, repo_path)):
            return m.group(0)                    # broken: left for the link check to report
        dest = site_page(repo_path)
        if dest is None:                         # another file of the repository
            if label.startswith("!"):
                return m.group(0)
            return f"{label[1:-1]} (`{repo_path}` in the sources)"
        rel = posixpath.relpath(dest, page_dir or ".")
        return f"{label}({rel}{'#' + frag if frag else ''})"

    out, in_fence = [], False
    for line in text.splitlines(keepends=True):
        if re.match(r"^\s*(```|~~~)", line):
            in_fence = not in_fence
        out.append(line if in_fence else LINK.sub(fix, line))
    return "".join(out)


def escape_inline_r(text: str) -> str:
    return re.sub(r"`r([ #])", r"` r\1", text)     # knitr would run `r ...` as R code


def md_to_article(text: str, fallback_title: str) -> str:
    """Markdown page -> R Markdown article: its first level-1 heading becomes the title."""
    m = re.search(r"^# (.+)\n", text, re.M)
    title = fallback_title
    if m:
        title = m.group(1).strip()
        text = text[:m.start()] + text[m.end():]
    title = title.replace("\\", "\\\\").replace('"', '\\"')
    return f'---\ntitle: "{title}"\n---\n\n' + escape_inline_r(text.lstrip("\n"))


def no_eval(rmd: str, name: str) -> str:
    """Show a vignette's code without running it."""
    m = re.match(r"^---\n.*?\n---\n", rmd, re.S)
    if not m:
        sys.exit(f"site-stage: vignettes/{name}.Rmd has no YAML header")
    chunk = "\n```{r site-no-eval, include = FALSE}\nknitr::opts_chunk$set(eval = FALSE)\n```\n\n"
    body = re.sub(r"`r [^`]+`", "…", rmd[m.end():])
    return rmd[:m.end()] + chunk + NO_EVAL_NOTE.format(name=name) + body


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("stage")
    ap.add_argument("--eval", action="store_true", help="run the vignettes' code")
    a = ap.parse_args()
    root, stage = os.path.abspath(a.root), os.path.abspath(a.stage)

    for f in ("DESCRIPTION", "NAMESPACE", "LICENSE", "_pkgdown.yml"):
        if os.path.exists(os.path.join(root, f)):
            shutil.copy2(os.path.join(root, f), stage)
    for d in ("R", "man", "pkgdown"):
        shutil.copytree(os.path.join(root, d), os.path.join(stage, d))
    ignore = shutil.ignore_patterns("*.html", "*_files", "articles")
    shutil.copytree(os.path.join(root, "vignettes"), os.path.join(stage, "vignettes"),
                    ignore=ignore)
    articles = os.path.join(stage, "vignettes", "articles")
    os.makedirs(articles, exist_ok=True)

    for f in sorted(os.listdir(os.path.join(stage, "vignettes"))):
        if not f.endswith(".Rmd"):
            continue
        p = os.path.join(stage, "vignettes", f)
        with open(p, encoding="utf-8") as fh:
            text = fh.read()
        text = rewrite_links(text, f"vignettes/{f}", f"articles/{f[:-4]}.html", root)
        if not a.eval:
            text = no_eval(text, f[:-4])
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)

    pages = [("README.md", os.path.join(stage, "index.md"), None),
             ("bench/RESULTS.md", os.path.join(articles, "benchmarks.Rmd"), "Benchmark results")]
    docs = os.path.join(root, "docs")
    for f in sorted(os.listdir(docs)) if os.path.isdir(docs) else []:
        if f.endswith(".md"):
            pages.append((f"docs/{f}", os.path.join(articles, f[:-3] + ".Rmd"), f[:-3]))
    for src, dest, title in pages:
        with open(os.path.join(root, src), encoding="utf-8") as fh:
            text = rewrite_links(fh.read(), src, site_page(src), root)
        if title is not None:
            text = md_to_article(text, title)
        with open(dest, "w", encoding="utf-8") as fh:
            fh.write(text)
    print(f"site-stage: {len(pages)} pages staged"
          f"{'' if a.eval else ' (vignette code shown, not run)'}")


if __name__ == "__main__":
    main()
