#!/usr/bin/env bash
# R CMD build, then R CMD check --no-manual of the built tarball (the .tar.gz as a user gets it,
# never the source tree), with testthat running against the real Python core in the repo's
# .venv. Fails (exit 1) unless the check ends with "Status: OK" or NOTEs only.
# Builds the vignettes when vignettes/*.Rmd exist (QUANTFORMER_SKIP_VIGNETTES=1 skips them).
# Called by scripts/check.sh.
# Usage: scripts/check-r.sh      (from anywhere; needs R with processx, jsonlite, testthat)
set -uo pipefail

# "Status: OK" or "Status: 1 NOTE" / "Status: 2 NOTEs" passes; any ERROR or WARNING fails
check_status_ok() {
  [[ "$1" =~ ^Status:\ (OK|[0-9]+\ NOTEs?)$ ]]
}

# everything in a function: bash parses it whole before running, so editing this file during
# a (long) check cannot break the running check
main() {
  root=$(cd "$(dirname "$0")/.." && pwd)
  cd "$root"

  export QUANTFORMER_PYTHON="$root/.venv/bin/python"
  if [ ! -x "$QUANTFORMER_PYTHON" ]; then
    echo "check-r: $QUANTFORMER_PYTHON not found; run scripts/setup.sh first"; return 1
  fi
  # the tests must not skip for want of Python (they would skip visibly elsewhere)
  export QUANTFORMER_REQUIRE_PYTHON=1
  # the tests get nothing else from the clone: what they build (a tiny LLM) they build from
  # what the tarball carries (tests/testthat/tiny_llama.py), as a user's R CMD check does
  unset QUANTFORMER_TEST_HELPERS
  # real data and quanteda corpora for the tests; R CMD check runs them from a copy of the package
  if [ -d "$root/../shared/data" ]; then
    export QUANTFORMER_TEST_DATA=$(cd "$root/../shared/data" && pwd)
  fi
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
  export LANG=${LANG:-C.UTF-8} LC_ALL=${LC_ALL:-C.UTF-8}
  export _R_CHECK_FORCE_SUGGESTS_=false      # quanteda and arrow are not installable here
  export _R_CHECK_CRAN_INCOMING_=false _R_CHECK_CRAN_INCOMING_REMOTE_=false
  export _R_CHECK_SYSTEM_CLOCK_=0 NOT_CRAN=true

  work=$(mktemp -d "${TMPDIR:-/tmp}/quantformer-rcheck.XXXXXX")
  trap 'rm -rf "$work"' EXIT

  build_opts=(--no-manual)
  check_opts=(--no-manual)
  # QUANTFORMER_SKIP_VIGNETTES=1 checks the package and its tests without knitting the vignettes
  # (for quick runs while developing; the full check builds them)
  if [ "${QUANTFORMER_SKIP_VIGNETTES:-0}" = 1 ]; then
    echo "== R CMD build (vignettes skipped: QUANTFORMER_SKIP_VIGNETTES=1)"
    build_opts+=(--no-build-vignettes)
    check_opts+=(--ignore-vignettes)
  elif ls vignettes/*.Rmd >/dev/null 2>&1; then
    echo "== R CMD build (with vignettes)"
    # R CMD build knits every vignette (and fails on any error); check would knit them all
    # again and rerun their R code, doubling the time of the slowest part of the check
    check_opts+=(--no-vignettes)
  else
    echo "== R CMD build (no vignettes/*.Rmd yet)"
    build_opts+=(--no-build-vignettes)
    check_opts+=(--ignore-vignettes)
  fi
  # from a staged copy without .venv (R CMD build would copy it whole before pruning)
  tarball=$(bash "$root/scripts/build-tarball.sh" "$work" "${build_opts[@]}") ||
    { echo "check-r: R CMD build failed"; return 1; }
  bash "$root/scripts/check-tarball.sh" "$tarball" || return 1

  echo "== R CMD check ${check_opts[*]} $(basename "$tarball")"
  ( cd "$work" && R CMD check "${check_opts[@]}" "$tarball" )
  rc=$?
  log="$work/quantformer.Rcheck/00check.log"
  if [ -f "$work/quantformer.Rcheck/tests/testthat.Rout.fail" ]; then
    echo "== tests/testthat.Rout.fail (tail)"; tail -n 80 "$work/quantformer.Rcheck/tests/testthat.Rout.fail"
  fi
  # the testthat summary, so skips are visible
  for f in "$work"/quantformer.Rcheck/tests/testthat.Rout*; do
    [ -f "$f" ] && grep -E '^\[ FAIL|^── Skip|^• ' "$f" | tail -n 30
  done
  if [ ! -f "$log" ]; then echo "check-r: no check log"; return 1; fi
  # the verdict is the log's last "Status:" line (a failing test step writes its ERROR on a line
  # of its own, which a per-step grep misses): OK or NOTEs only passes
  status=$(grep -E '^Status: ' "$log" | tail -n 1)
  echo "== R CMD check of $(basename "$tarball"): ${status:-no Status line} (exit $rc)"
  grep -E '\.\.\. *(ERROR|WARNING)$|^ *(ERROR|WARNING)$' -B2 "$log" | head -n 40
  if ! check_status_ok "$status" || [ "$rc" -ne 0 ]; then
    echo "check-r: R CMD check must end with Status OK or NOTEs only"; return 1
  fi
  # the R user's path: this tarball into an empty library, quantformer_install(), fit, predict
  if [ "${QUANTFORMER_SKIP_USER_PATH:-0}" != 1 ]; then
    bash "$root/scripts/check-user-path.sh" "$tarball" || return 1
  fi
  return 0
}

# run when executed, not when sourced (tests/python/test_packaging.py sources check_status_ok)
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
