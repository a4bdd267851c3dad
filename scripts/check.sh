#!/usr/bin/env bash
# Run every test: pytest (tests/python), then the R package's R CMD build + check (which runs
# tests/testthat and builds the vignettes). Exits non-zero on any failure; "no tests collected"
# counts as a failure. Usage: scripts/check.sh [python|r]   (default: both)
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
status=0
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1

if [ "$what" = all ] || [ "$what" = python ]; then
  echo "== pytest"
  .venv/bin/python -m pytest tests/python -q -p no:cacheprovider
  rc=$?
  if [ $rc -eq 5 ]; then echo "pytest collected no tests: failing"; status=1;
  elif [ $rc -ne 0 ]; then status=1; fi
fi

if [ "$what" = all ] || [ "$what" = r ]; then
  if [ -f DESCRIPTION ] && [ -d R ] && ls R/*.R >/dev/null 2>&1; then
    if command -v Rscript >/dev/null 2>&1; then
      bash scripts/check-r.sh || status=1
    else
      echo "== R TESTS SKIPPED: Rscript not found (run scripts/setup.sh as root, or install R)"
    fi
  else
    echo "== R package not present yet: no R tests"
  fi
fi
exit $status
