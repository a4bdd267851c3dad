#!/usr/bin/env bash
# The R tarball carries the Python core (issue 11): inst/pycore/ holds pyproject.toml, README.md
# and every module of python/quantformer (R CMD build follows the symlinks in inst/pycore), and
# nothing of tests/python, build output or caches. Exit 1 naming what is missing or extra.
# Usage: scripts/check-tarball.sh quantformer_X.Y.Z.tar.gz   (called by scripts/check-r.sh)
set -uo pipefail
tarball=$1
root=$(cd "$(dirname "$0")/.." && pwd)
names=$(tar tzf "$tarball") || { echo "check-tarball: cannot read $tarball"; exit 1; }
missing=0
want="quantformer/inst/pycore/pyproject.toml quantformer/inst/pycore/README.md"
for f in $(cd "$root/python" && find quantformer -name '*.py' -not -path '*__pycache__*'); do
  want="$want quantformer/inst/pycore/python/$f"
done
for f in $want; do
  grep -qxF "$f" <<<"$names" || { echo "check-tarball: $f is missing from $tarball"; missing=1; }
done
extra=$(grep -E '__pycache__|\.py[co]$|/\.[^/]*_cache(/|$)|/\.cache(/|$)|\.ipynb_checkpoints|\.egg-info|tests/python|/\.venv/' \
  <<<"$names" | head -5)
if [ -n "$extra" ]; then echo "check-tarball: $tarball carries files it must not:"; echo "$extra"; missing=1; fi
[ "$missing" = 0 ] && echo "check-tarball: $(basename "$tarball") carries the Python core ($(wc -w <<<"$want") files)"
exit $missing
