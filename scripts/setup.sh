#!/usr/bin/env bash
# Set up everything quantformer needs on a fresh machine, idempotently:
#   1. .venv with torch==2.13.0 first (the CPU wheel; an unpinned torch pulls a multi-GB CUDA
#      build), then quantformer itself (editable, with test extras). Where pip's index has
#      only the CUDA build of torch, set TORCH_INDEX_URL to PyTorch's CPU wheel index; the
#      test extras bring transformers[serving] (`transformers serve`, a real OpenAI-compatible
#      server for the annotate tests) without changing the torch or transformers installed;
#      PYTHON names the interpreter (3.10 or newer; default python3);
#   2. R and the R packages the R side needs (Debian packages) when R is missing and we are
#      root with apt-get; otherwise say what to install;
#   3. Debian's chromium and chromium-driver for the coding room's browser tests, the same way.
# apt-get waits for another process' apt/dpkg lock up to APT_LOCK_TIMEOUT seconds (600); an
# install that still fails makes setup fail. It ends with what was set up, what was already
# there and what was skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
APT_LOCK_TIMEOUT=${APT_LOCK_TIMEOUT:-600}
DONE=() THERE=() SKIPPED=() FAILED=()
# apt-get that waits for another process' lock (update and install), its progress hidden
apt_install() {
  apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" update -q >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" \
      install -y -q "$@" >/dev/null
}

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
  DONE+=("torch")
else
  THERE+=("torch")
fi
if ! .venv/bin/python -c "import quantformer, pytest, xgboost, Stemmer, captum, fastapi, uvicorn, openai" >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.quantformer-installed ]; then
  echo "== installing quantformer and its dependencies into .venv"
  pip_install -e ".[test]"
  .venv/bin/python -c "import quantformer.cli.main" && touch .venv/.quantformer-installed
  DONE+=("quantformer in .venv")
else
  THERE+=("quantformer in .venv")
fi

R_DEBS="r-base-core r-cran-processx r-cran-jsonlite r-cran-testthat r-cran-withr r-cran-knitr r-cran-rmarkdown pandoc r-cran-roxygen2 r-cran-pkgdown r-cran-reticulate"
r_ok() {
  command -v Rscript >/dev/null 2>&1 && command -v pandoc >/dev/null 2>&1 &&
    Rscript -e 'for (p in c("processx","jsonlite","testthat","withr","knitr","rmarkdown","roxygen2","pkgdown","reticulate")) if (!requireNamespace(p, quietly=TRUE)) quit(status=1)' >/dev/null 2>&1
}
if ! r_ok; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing R and R packages from Debian (waiting up to ${APT_LOCK_TIMEOUT} s for" \
         "another apt): $R_DEBS"
    if apt_install $R_DEBS && r_ok; then
      DONE+=("R and its packages")
    else
      echo "== installing R failed (apt-get's errors above; its progress output is hidden)"
      FAILED+=("R and its packages")
    fi
  else
    echo "== R (or one of its packages) is missing and this is not root with apt-get."
    echo "   Install: $R_DEBS"
    SKIPPED+=("R (not root with apt-get; make check fails at the R part, scripts/check.sh python runs the Python tests alone)")
  fi
else
  THERE+=("R and its packages")
fi
# the coding room's browser tests (tests/python/label/test_code_browser.py) drive Debian's headless
# Chromium through Debian's chromedriver with Selenium (the test extra); nothing is downloaded
BROWSER_DEBS="chromium chromium-driver"
if ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing $BROWSER_DEBS from Debian (browser tests of the coding room; waiting" \
         "up to ${APT_LOCK_TIMEOUT} s for another apt)"
    if apt_install $BROWSER_DEBS; then
      DONE+=("chromium")
    else
      echo "== installing $BROWSER_DEBS failed (apt-get's errors above)"
      FAILED+=("chromium")
    fi
  else
    echo "== $BROWSER_DEBS missing and this is not root with apt-get: install them to run the"
    echo "   coding room's browser tests"
    SKIPPED+=("chromium (not root with apt-get; the coding room's browser tests are skipped)")
  fi
else
  THERE+=("chromium")
fi
list() { local IFS=","; echo "${*:-none}" | sed 's/,/, /g'; }
echo "== setup: set up now: $(list "${DONE[@]+"${DONE[@]}"}")"
echo "   already there: $(list "${THERE[@]+"${THERE[@]}"}")"
echo "   skipped: $(list "${SKIPPED[@]+"${SKIPPED[@]}"}")"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "   FAILED: $(list "${FAILED[@]}")" >&2
  echo "setup failed" >&2
  exit 1
fi
echo "== setup done"
