#!/usr/bin/env bash
# R CMD build + R CMD check --no-manual of the R package, with testthat running against the
# real Python core in the repo's .venv. Fails (exit 1) on any ERROR or WARNING in the check.
# Builds the vignettes when vignettes/*.Rmd exist (QUANTFORMER_SKIP_VIGNETTES=1 skips them).
# Called by scripts/check.sh.
# Usage: scripts/check-r.sh      (from anywhere; needs R with processx, jsonlite, testthat)
set -uo pipefail

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
  # the Python test helpers (tiny models) for R tests: R CMD check copies tests/testthat alone
  export QUANTFORMER_TEST_HELPERS="$root/tests/python"
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
  errors=$(grep -c '\.\.\. *ERROR' "$log")
  warnings=$(grep -c '\.\.\. *WARNING' "$log")
  notes=$(grep -c '\.\.\. *NOTE' "$log")
  echo "== R CMD check: $errors error(s), $warnings warning(s), $notes note(s)"
  if [ "$rc" -ne 0 ] || [ "$errors" -gt 0 ] || [ "$warnings" -gt 0 ]; then return 1; fi
  # the R user's path: this tarball into an empty library, quantformer_install(), fit, predict
  if [ "${QUANTFORMER_SKIP_USER_PATH:-0}" != 1 ]; then
    bash "$root/scripts/check-user-path.sh" "$tarball" || return 1
  fi
  return 0
}

main "$@"
