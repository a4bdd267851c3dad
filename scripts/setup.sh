#!/usr/bin/env bash
# Set up everything quantformer needs on a fresh machine, idempotently:
#   1. .venv with torch==2.13.0 first (the CPU wheel; an unpinned torch pulls a multi-GB CUDA
#      build), then quantformer itself (editable, with test extras);
#   2. R and the R packages the R side needs (Debian packages) when R is missing and we are
#      root with apt-get; otherwise say what to install.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  echo "== installing torch==2.13.0 (CPU)"
  .venv/bin/pip install -q torch==2.13.0
fi
if ! .venv/bin/python -c "import quantformer, pytest, xgboost, Stemmer" >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.quantformer-installed ]; then
  echo "== installing quantformer and its dependencies into .venv"
  .venv/bin/pip install -q -e ".[test]" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import quantformer" && touch .venv/.quantformer-installed
fi

R_DEBS="r-base-core r-cran-processx r-cran-jsonlite r-cran-testthat r-cran-knitr r-cran-rmarkdown pandoc r-cran-roxygen2"
r_ok() {
  command -v Rscript >/dev/null 2>&1 && command -v pandoc >/dev/null 2>&1 &&
    Rscript -e 'for (p in c("processx","jsonlite","testthat","knitr","rmarkdown","roxygen2")) if (!requireNamespace(p, quietly=TRUE)) quit(status=1)' >/dev/null 2>&1
}
if ! r_ok; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing R and R packages from Debian: $R_DEBS"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $R_DEBS >/dev/null
  else
    echo "== R (or one of its packages) is missing and this is not root with apt-get."
    echo "   Install: $R_DEBS"
    echo "   Until then the R tests are SKIPPED (the check says so)."
  fi
fi
echo "== setup done"
