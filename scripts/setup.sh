#!/usr/bin/env bash
# Set up everything quantformer needs on a fresh machine, idempotently:
#   1. .venv with torch==2.13.0 first (the CPU wheel; an unpinned torch pulls a multi-GB CUDA
#      build), then quantformer itself (editable, with test extras). Where pip's index has
#      only the CUDA build of torch, set TORCH_INDEX_URL to PyTorch's CPU wheel index;
#      PYTHON names the interpreter (3.10 or newer; default python3);
#   2. R and the R packages the R side needs (Debian packages) when R is missing and we are
#      root with apt-get; otherwise say what to install;
#   3. Debian's chromium and chromium-driver for the coding room's browser tests, the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup: $PYTHON not found; install Python 3.10 or newer (or set PYTHON=...)" >&2
  exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "setup: quantformer needs Python 3.10 or newer; $PYTHON is $("$PYTHON" --version 2>&1)." \
       "Set PYTHON=/path/to/python3.x" >&2
  exit 1
fi
# pip install, quietly: its messages are shown in full only when it fails
pip_install() {
  local log rc=0
  log=$(mktemp)
  .venv/bin/pip install -q "$@" >"$log" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then
    cat "$log" >&2; rm -f "$log"
    echo "setup: pip install $* failed (pip's messages above)" >&2
    exit 1
  fi
  grep -v "^WARNING: Location .* is ignored" "$log" || true
  rm -f "$log"
}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  echo "== installing torch==2.13.0 (CPU)"
  pip_install torch==2.13.0 ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
if ! .venv/bin/python -c "import quantformer, pytest, xgboost, Stemmer, captum" >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.quantformer-installed ]; then
  echo "== installing quantformer and its dependencies into .venv"
  pip_install -e ".[test]"
  .venv/bin/python -c "import quantformer.cli.main" && touch .venv/.quantformer-installed
fi

R_DEBS="r-base-core r-cran-processx r-cran-jsonlite r-cran-testthat r-cran-withr r-cran-knitr r-cran-rmarkdown pandoc r-cran-roxygen2 r-cran-pkgdown r-cran-reticulate"
r_ok() {
  command -v Rscript >/dev/null 2>&1 && command -v pandoc >/dev/null 2>&1 &&
    Rscript -e 'for (p in c("processx","jsonlite","testthat","withr","knitr","rmarkdown","roxygen2","pkgdown","reticulate")) if (!requireNamespace(p, quietly=TRUE)) quit(status=1)' >/dev/null 2>&1
}
if ! r_ok; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing R and R packages from Debian: $R_DEBS"
    if ! { apt-get update -q >/dev/null &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -q $R_DEBS >/dev/null; }; then
      echo "== installing R failed (apt-get's errors above; its progress output is hidden);"
      echo "   make check will fail until R is installed (scripts/check.sh python runs the"
      echo "   Python tests alone)"
    fi
  else
    echo "== R (or one of its packages) is missing and this is not root with apt-get."
    echo "   Install: $R_DEBS"
    echo "   Until then make check fails at the R part (scripts/check.sh python runs the"
    echo "   Python tests alone)."
  fi
fi
# the coding room's browser tests (tests/python/label/test_code_browser.py) drive Debian's headless
# Chromium through Debian's chromedriver with Selenium (the test extra); nothing is downloaded
BROWSER_DEBS="chromium chromium-driver"
if ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing $BROWSER_DEBS from Debian (browser tests of the coding room)"
    if ! { apt-get update -q >/dev/null &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -q $BROWSER_DEBS >/dev/null; }; then
      echo "== installing $BROWSER_DEBS failed; the coding room's browser tests will be skipped"
    fi
  else
    echo "== $BROWSER_DEBS missing and this is not root with apt-get: install them to run the"
    echo "   coding room's browser tests (they are skipped until then)"
  fi
fi
echo "== setup done"
