#!/usr/bin/env bash
# The R user's path, as someone without a clone gets it (issue 11): install the built R tarball
# into an empty temporary R library, run quantformer_install(envdir = <temp>) (the Python core
# bundled in the tarball, torch first; pip may use its cache and its configured wheel folders),
# then, with that environment only (no QUANTFORMER_PYTHON, no PYTHONPATH), fine-tune the
# default model briefly on sotu_sample.rds and predict from R.
# Usage: scripts/check-user-path.sh [quantformer_X.Y.Z.tar.gz]   (builds one when not given;
# called by scripts/check-r.sh; QUANTFORMER_SKIP_USER_PATH=1 there skips it)
# TORCH_INDEX_URL is passed on (empty: pip's own configuration, as scripts/setup.sh).
# The check isolates itself from what this machine has: R's user folders (R_USER_DATA_DIR,
# R_USER_CONFIG_DIR, R_USER_CACHE_DIR, where quantformer_install() puts its default
# environment) and the backend cache (XDG_CACHE_HOME) point into its own temporary folder, so
# an environment made by trying the R path by hand is never found. HOME stays (pip's
# configuration and cache, e.g. a wheel folder, still apply); QUANTFORMER_CHECK_HOME=1 gives
# it an empty HOME too (pip then sees only its site-wide configuration).
set -uo pipefail

main() {
  root=$(cd "$(dirname "$0")/.." && pwd)
  work=$(mktemp -d "${TMPDIR:-/tmp}/quantformer-userpath.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  tarball=${1:-}
  if [ -z "$tarball" ]; then
    tarball=$(bash "$root/scripts/build-tarball.sh" "$work" --no-build-vignettes --no-manual \
              2>"$work/build.log") ||
      { cat "$work/build.log"; echo "user-path: R CMD build failed"; return 1; }
  fi
  mkdir -p "$work/lib" "$work/user/data" "$work/user/config" "$work/user/cache"
  home=$HOME
  if [ "${QUANTFORMER_CHECK_HOME:-0}" = 1 ]; then home="$work/home"; mkdir -p "$home"; fi
  echo "== user path: R CMD INSTALL $(basename "$tarball") into an empty library"
  R CMD INSTALL --no-docs --no-multiarch -l "$work/lib" "$tarball" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; echo "user-path: R CMD INSTALL failed"; return 1; }
  echo "== user path: quantformer_install(envdir = <temp>), then fine-tune and predict"
  start=$(date +%s)
  env -u QUANTFORMER_PYTHON -u PYTHONPATH -u RETICULATE_PYTHON -u QUANTFORMER_VENV \
    R_LIBS="$work/lib" QF_ENV="$work/venv" TORCH_INDEX_URL="${TORCH_INDEX_URL:-}" \
    R_USER_DATA_DIR="$work/user/data" R_USER_CONFIG_DIR="$work/user/config" \
    R_USER_CACHE_DIR="$work/user/cache" XDG_CACHE_HOME="$work/user/cache" HOME="$home" \
    OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" HF_HUB_OFFLINE=1 \
    Rscript --vanilla -e '
      library(quantformer)
      env <- Sys.getenv("QF_ENV")
      stopifnot(startsWith(tools::R_user_dir("quantformer", "data"),
                           Sys.getenv("R_USER_DATA_DIR")))
      stopifnot(!quantformer_available() || !identical(quantformer:::find_python()$source,
                                                         "virtualenv made by quantformer_install()"))
      quantformer_install(envdir = env)
      Sys.setenv(QUANTFORMER_VENV = env)
      cfg <- quantformer_config()
      print(cfg)
      stopifnot(cfg$source == "virtualenv made by quantformer_install()",
                startsWith(cfg$python, env),
                cfg$quantformer == as.character(packageVersion("quantformer")))
      d <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
      fit <- textmodel_finetune(d[c(1:20, 101:120), ], y = "party", epochs = 1, max_length = 32,
                                output_dir = file.path(tempdir(), "model"), verbose = FALSE)
      p <- predict(fit, d$text[c(21:25, 121:125)], verbose = FALSE)
      pr <- predict(fit, d$text[1:3], type = "probability", verbose = FALSE)
      stopifnot(length(p) == 10, all(p %in% c("Democratic", "Republican")),
                all(abs(rowSums(pr) - 1) < 1e-5))
      cat("user path: predicted", length(p), "documents:", paste(table(p), collapse = "/"), "\n")
    ' || { echo "user-path: FAILED"; return 1; }
  echo "== user path passed in $(( $(date +%s) - start )) s"
}

main "$@"
