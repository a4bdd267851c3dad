#!/usr/bin/env bash
# R CMD build of the package from a staged copy of the repository: the copy leaves out .venv,
# .git and other large folders that R CMD build would otherwise copy whole (following the
# .venv symlink of a worktree) before applying .Rbuildignore, and every tool's cache at any
# depth (__pycache__, *.pyc, .import_linter_cache, .pytest_cache, .mypy_cache, .ruff_cache,
# .ipynb_checkpoints; .Rbuildignore leaves them out of a plain R CMD build too), and keeps the
# symlinks in inst/pycore, which R CMD build then follows so that the tarball carries the
# Python core.
# Usage: scripts/build-tarball.sh OUTDIR [R CMD build options...]   prints the tarball's path
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(cd "$1" && pwd)
shift
stage=$(mktemp -d "${TMPDIR:-/tmp}/quantformer-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/quantformer"
tar -C "$root" --exclude=./.venv --exclude=./.git --exclude=./runs --exclude=./demo-output \
  --exclude=./build --exclude=./dist --exclude='*.Rcheck' --exclude='*.egg-info' \
  --exclude='quantformer_*.tar.gz' --exclude='__pycache__' --exclude='*.py[co]' \
  --exclude='.*_cache' --exclude=.cache --exclude=.ipynb_checkpoints -cf - . |
  tar -C "$stage/quantformer" -xf -
( cd "$out" && R CMD build "$@" "$stage/quantformer" ) >&2
for opt in "$@"; do
  if [ "$opt" = --no-build-vignettes ]; then
    # R lists only knitted vignettes; knitting needs the Python core (docs/install.md)
    echo "note: the vignettes were not built, so vignette(package = \"quantformer\") lists" \
      "none: read them in vignettes/ (or the articles of the site that make check builds in" \
      "site/), or, once quantformer_install() has run, rebuild without --no-build-vignettes" \
      "(it knits them, fine-tuning small models: minutes on a CPU) and install that tarball" >&2
  fi
done
ls "$out"/quantformer_*.tar.gz | head -1
