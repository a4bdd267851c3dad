#!/usr/bin/env bash
# Run every test: pytest (tests/python), then the R package's R CMD build + check (which runs
# tests/testthat and builds the vignettes), then the pkgdown site with its links checked. Exits non-zero on any failure; pytest's "no tests
# collected" (exit 5) counts as a failure, and so does missing R: skipped tests are not passed
# tests (`scripts/check.sh python` runs the Python tests alone, on a machine without R). Under
# CI=true any skip (pytest or testthat) fails the run unless its reason names a GPU.
# Usage: scripts/check.sh [all|python|r] [extra pytest arguments...]   (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
[ $# -gt 0 ] && shift
case "$what" in all|python|r) ;; *) echo "usage: scripts/check.sh [all|python|r] [pytest args]"; exit 2;; esac
status=0
failed=()
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1

if [ ! -x .venv/bin/python ]; then
  echo "check: .venv/bin/python not found; run scripts/setup.sh (or make check) first"
  exit 1
fi

if [ "$what" = all ] || [ "$what" = python ]; then
  echo "== lint-imports (the layers of docs/architecture.md)"
  if ! PYTHONPATH=python .venv/bin/lint-imports; then status=1; failed+=(lint-imports); fi
  echo "== pytest"
  .venv/bin/python -m pytest tests/python -q -p no:cacheprovider "$@"
  rc=$?
  if [ $rc -eq 5 ]; then echo "== pytest collected no tests: FAILING"; status=1; failed+=(pytest);
  elif [ $rc -ne 0 ]; then status=1; failed+=(pytest); fi
fi

if [ "$what" = all ] || [ "$what" = r ]; then
  if [ -f DESCRIPTION ] && [ -d R ] && ls R/*.R >/dev/null 2>&1; then
    if ! command -v Rscript >/dev/null 2>&1; then
      echo "== R tests NOT RUN: Rscript not found: FAILING (run scripts/setup.sh as root with"
      echo "   apt-get, or install R >= 4.1 with processx, jsonlite, testthat, withr, knitr,"
      echo "   rmarkdown and pandoc; scripts/check.sh python runs the Python tests alone)"
      status=1; failed+=("R (not installed)")
    elif ! missing=$(Rscript -e 'p <- c("processx","jsonlite","testthat","withr"); m <- p[!vapply(p, requireNamespace, TRUE, quietly = TRUE)]; cat(m); quit(status = length(m) > 0)' 2>/dev/null); then
      echo "== R tests NOT RUN: R packages missing: ${missing:-?}: FAILING (run scripts/setup.sh"
      echo "   as root, or install them in R; scripts/check.sh python runs the Python tests alone)"
      status=1; failed+=("R (packages missing)")
    elif [ ! -f scripts/check-r.sh ]; then
      echo "== R check script scripts/check-r.sh is missing: FAILING"; status=1; failed+=(R)
    else
      rlog=$(mktemp)
      bash scripts/check-r.sh 2>&1 | tee "$rlog"
      [ "${PIPESTATUS[0]}" -eq 0 ] || { status=1; failed+=(R); }
      # under CI=true a testthat skip is a failure unless its reason names a GPU (the same rule
      # as tests/python/conftest.py; check-r.sh prints the "Skipped tests" bullets)
      if [ "${CI:-}" = true ] && grep -E '^• ' "$rlog" | grep -vE 'GPU|CUDA' >/dev/null; then
        echo "== testthat skipped tests under CI=true (only GPU-only skips may skip in CI): FAILING"
        grep -E '^• ' "$rlog" | grep -vE 'GPU|CUDA'
        status=1; failed+=("R (skipped tests)")
      fi
      rm -f "$rlog"
      # the documentation site (pkgdown) with its internal links checked
      echo "== documentation site"
      bash scripts/build-site.sh || { status=1; failed+=(site); }
    fi
  else
    echo "== R package not present yet: no R tests"
  fi
fi
if [ $status -eq 0 ]; then echo "== check passed ($what)"; else echo "== check FAILED: ${failed[*]}"; fi
exit $status
