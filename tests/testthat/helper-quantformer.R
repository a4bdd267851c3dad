# Shared test helpers. The tests run the real Python core: scripts/check-r.sh points
# QUANTFORMER_PYTHON at the repo's .venv and sets QUANTFORMER_REQUIRE_PYTHON=1, so a missing
# core fails there instead of skipping.

options(quantformer.verbose = FALSE)

skip_if_no_python <- function() {
  if (quantformer_available()) return(invisible(TRUE))
  if (identical(Sys.getenv("QUANTFORMER_REQUIRE_PYTHON"), "1"))
    stop("QUANTFORMER_REQUIRE_PYTHON=1 but no Python with quantformer was found (set ",
         "QUANTFORMER_PYTHON)")
  testthat::skip("no Python with the quantformer core (set QUANTFORMER_PYTHON)")
}

# A CLI verb exists in the installed core? The core's list of verbs (`info --verbs`), read
# once a session by core_rules(), not one Python start per test.
skip_if_no_verb <- function(verb) {
  skip_if_no_python()
  if (verb %in% c("info", names(quantformer:::core_rules()$verbs))) return(invisible(TRUE))
  py <- quantformer:::find_python()$python
  if (identical(Sys.getenv("QUANTFORMER_REQUIRE_PYTHON"), "1"))
    stop("QUANTFORMER_REQUIRE_PYTHON=1 but the Python core at ", py, " has no '", verb,
         "' verb (`info --verbs` does not list it): install the core of this source tree")
  testthat::skip(paste0("the Python core has no '", verb, "' verb yet"))
}

# ../shared/data: from QUANTFORMER_TEST_DATA (set by scripts/check-r.sh), else relative to the
# source tree when the tests run in place (tests/testthat -> repo -> ..).
shared_data <- function(...) {
  dir <- Sys.getenv("QUANTFORMER_TEST_DATA", "")
  if (!nzchar(dir)) dir <- file.path(testthat::test_path(), "..", "..", "..", "shared", "data")
  path <- file.path(dir, ...)
  if (!file.exists(path)) {
    if (identical(Sys.getenv("CI"), "true"))
      stop("shared test data absent under CI=true: ", path, " (set QUANTFORMER_TEST_DATA)")
    testthat::skip(paste0("shared test data absent: ", path))
  }
  path
}

sotu_sample <- function() {
  readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
}

# The first line(s) of a fake "python": it answers R's handshake (`-c ...`) as a core of this
# package's version without the `serve` verb, so R runs it as a one-off process per call.
fake_handshake <- function() {
  sprintf("if [ \"$1\" = \"-c\" ]; then echo 'quantformer %s -'; exit 0; fi",
          utils::packageVersion("quantformer"))
}

# A fake "python" that imports fine but fails its verb after printing progress, as a crash
# in the middle of a run looks.
fake_python <- function(status = 1L, message = "quantformer predict: internal error: RuntimeError: CUDA out of memory (run with --debug for the traceback)") {
  f <- tempfile("fake-python-")
  writeLines(c(
    "#!/bin/sh",
    fake_handshake(),
    "echo 'loading model' >&2",
    "echo 'predicting:  40%|####      | 4/10' >&2",
    sprintf("echo '%s' >&2", message),
    sprintf("exit %d", status)
  ), f)
  Sys.chmod(f, "0755")
  f
}

# A tiny causal LM (2-layer Llama, random weights, byte-level tokenizer, chat template), built
# once a session by tests/testthat/tiny_llama.py with the Python the package found. The script
# travels with these tests and needs only the core's own dependencies, so the tests of a built
# tarball build it as a clone's do.
tiny_llama <- function() {
  skip_if_no_python()
  dir <- file.path(tempdir(), "tiny-llama")
  if (!dir.exists(dir)) {
    script <- testthat::test_path("tiny_llama.py")
    if (!file.exists(script)) stop("tiny_llama.py is missing beside the tests: ", script)
    processx::run(quantformer:::find_python()$python, c(normalizePath(script), dir),
                  env = quantformer:::child_env())
  }
  dir
}
