#!/usr/bin/env bash
# Build the documentation site (pkgdown) into site/ and check its internal links.
#   home page      README.md
#   reference      man/*.Rd
#   articles       vignettes/*.Rmd, docs/*.md, bench/RESULTS.md (as "benchmarks")
#   command line   generated from `python -m quantformer [VERB] --help` (scripts/cli-reference.py)
# The vignettes' code is shown without running it (R CMD check runs it);
# QUANTFORMER_SITE_EVAL=1 runs it with the Python core, as for a published site.
# Fails (exit 1) when pkgdown fails or a relative link or anchor does not resolve.
# Needs R with pkgdown (Debian: r-cran-pkgdown) and .venv (scripts/setup.sh).
# Usage: scripts/build-site.sh [OUTDIR]    (default: site/ in the repository)
set -uo pipefail

main() {
  root=$(cd "$(dirname "$0")/.." && pwd)
  out=${1:-$root/site}
  python=$root/.venv/bin/python
  if [ ! -x "$python" ]; then echo "build-site: $python not found; run scripts/setup.sh"; return 1; fi
  if ! Rscript -e 'quit(status = !requireNamespace("pkgdown", quietly = TRUE))' >/dev/null 2>&1; then
    echo "build-site: the R package pkgdown is missing (Debian: apt-get install r-cran-pkgdown;"
    echo "   scripts/setup.sh installs it)"; return 1
  fi
  stage=$(mktemp -d "${TMPDIR:-/tmp}/quantformer-site.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  eval_flag=()
  [ "${QUANTFORMER_SITE_EVAL:-0}" = 1 ] && eval_flag=(--eval)

  echo "== site: staging pages"
  mkdir -p "$stage/pkg"
  "$python" "$root/scripts/site-stage.py" "$root" "$stage/pkg" "${eval_flag[@]}" || return 1
  PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" "$python" "$root/scripts/cli-reference.py" \
    --python "$python" --out "$stage/pkg/vignettes/articles/cli.Rmd" || return 1

  echo "== site: pkgdown::build_site()"
  mkdir -p "$stage/lib"
  R CMD INSTALL --no-test-load -l "$stage/lib" "$stage/pkg" >"$stage/install.log" 2>&1 ||
    { cat "$stage/install.log"; echo "build-site: R CMD INSTALL failed"; return 1; }
  ( cd "$stage/pkg" &&
    QUANTFORMER_PYTHON="$python" R_LIBS="$stage/lib${R_LIBS:+:$R_LIBS}" LANG=C.UTF-8 \
      OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 \
      Rscript -e 'pkgdown::build_site(".", examples = FALSE, preview = FALSE,
                    override = list(destination = "site"), new_process = FALSE,
                    install = FALSE)' >"$stage/pkgdown.log" 2>&1 ) ||
    { tail -n 60 "$stage/pkgdown.log"; echo "build-site: pkgdown failed"; return 1; }
  grep -iE "^(Warning|Error)|warning:" "$stage/pkgdown.log" | head -n 20

  rm -rf "$out"
  cp -r "$stage/pkg/site" "$out" || return 1
  echo "== site: checking links"
  python3 "$root/scripts/check-site-links.py" "$out" || return 1
  echo "== site built: $out/index.html"
}

main "$@"
