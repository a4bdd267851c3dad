# Finding the Python core, installing it, and running CLI verbs with processx.
#
# The CLI (`python -m quantformer <verb>`) is the one contract between R and Python: R writes
# its input with saveRDS(), runs the verb as a child process, and reads the .rds the verb wrote.
# Nothing Python runs inside the R session, so a crash in torch cannot take R down.

.qf <- new.env(parent = emptyenv())

#' Where quantformer_install() puts its virtual environment
#'
#' The environment variable `QUANTFORMER_VENV` overrides the default, a folder under
#' [tools::R_user_dir()] (`quantformer/venv` in the user's data directory).
#' @return A path (character scalar); the folder may not exist.
#' @keywords internal
#' @noRd
quantformer_venv <- function() {
  env <- Sys.getenv("QUANTFORMER_VENV", "")
  if (nzchar(env)) return(path.expand(env))
  file.path(tools::R_user_dir("quantformer", "data"), "venv")
}

venv_python <- function(dir) {
  if (.Platform$OS.type == "windows") file.path(dir, "Scripts", "python.exe")
  else file.path(dir, "bin", "python")
}

# The child's environment. R on Linux puts its own library folders and the system library
# folder first in LD_LIBRARY_PATH, which outranks the RUNPATH of a Python built with
# --enable-shared (pyenv, conda), so the child would load the system's libpython and fail in
# C extensions (e.g. "_ssl...: undefined symbol"). The child gets LD_LIBRARY_PATH without R's
# and the default system folders (searched anyway), keeping the user's own entries.
child_env <- function() {
  ld <- Sys.getenv("LD_LIBRARY_PATH", "")
  parts <- strsplit(ld, ":", fixed = TRUE)[[1]]
  drop <- c(R.home("lib"), "/lib", "/usr/lib", "/lib64", "/usr/lib64",
            Sys.glob(c("/lib/*-linux-gnu", "/usr/lib/*-linux-gnu")))
  keep <- parts[nzchar(parts) & !sub("/+$", "", parts) %in% drop &
                  !grepl("/jvm/.*/server$", parts)]
  # QUANTFORMER_PARENT_PID: the child asks Linux to end it when this R process dies (issue 17)
  c("current", LD_LIBRARY_PATH = paste(keep, collapse = ":"),
    TOKENIZERS_PARALLELISM = "false", PYTHONIOENCODING = "utf-8", PYTHONUTF8 = "1",
    QUANTFORMER_PARENT_PID = as.character(Sys.getpid()))
}

# Candidates in the documented order, each with where it came from.
python_candidates <- function() {
  opt <- getOption("quantformer.python")
  cands <- list(
    list(source = "option quantformer.python", path = if (is.null(opt)) "" else opt),
    list(source = "environment variable QUANTFORMER_PYTHON",
         path = Sys.getenv("QUANTFORMER_PYTHON", "")),
    list(source = "environment variable RETICULATE_PYTHON",
         path = Sys.getenv("RETICULATE_PYTHON", "")),
    list(source = "virtualenv made by quantformer_install()",
         path = venv_python(quantformer_venv())),
    list(source = "python3 on the PATH", path = Sys.which("python3")[[1]])
  )
  Filter(function(c) length(c$path) == 1 && !is.na(c$path) && nzchar(c$path), cands)
}

# What a candidate Python says about its core: `quantformer <version>`. It imports the
# package and nothing under it: what the core can do (its verbs, `serve` among them) R asks
# the CLI (core_rules()).
HANDSHAKE <- "import quantformer; print('quantformer', quantformer.__version__)"

# list(version) when `python` runs and imports quantformer; else a one-line reason.
python_imports_quantformer <- function(python) {
  if (!file.exists(python)) return("file not found")
  marker <- file.path(dirname(dirname(python)), INSTALLING_MARKER)
  if (file.exists(marker))
    return(paste0("half-built: an installation into ", dirname(dirname(python)),
                  " stopped before the end; run quantformer::quantformer_install() again"))
  res <- tryCatch(
    processx::run(python, c("-c", HANDSHAKE), error_on_status = FALSE,
                  timeout = 60, env = child_env()),
    error = function(e) list(status = -1L, stderr = conditionMessage(e), stdout = "")
  )
  m <- regmatches(res$stdout, regexec("quantformer ([0-9][^ \r\n]*)", res$stdout))[[1]]
  if (identical(res$status, 0L) && length(m)) return(list(version = m[2]))
  if (identical(res$status, 0L))
    return(paste0("it ran but did not report a quantformer version: it is not a Python that ",
                  "imports the quantformer package"))
  lines <- strsplit(res$stderr, "\n", fixed = TRUE)[[1]]
  lines <- lines[nzchar(trimws(lines))]
  if (length(lines)) utils::tail(lines, 1) else paste("exit status", res$status)
}

# The first call with a core of another version than this R package says so, once per Python.
check_core_version <- function(found) {
  r_version <- as.character(utils::packageVersion("quantformer"))
  if (is.null(found$version) || identical(found$version, r_version)) return(invisible(TRUE))
  if (isTRUE(.qf$version_warned[[found$python]])) return(invisible(FALSE))
  .qf$version_warned[[found$python]] <- TRUE
  warning("the quantformer Python core at ", found$python, " (", found$source, ") is version ",
          found$version, " but this R package is version ", r_version, ": some arguments ",
          "may not work. Run quantformer::quantformer_install() to install the matching core",
          call. = FALSE)
  invisible(FALSE)
}

# The core's rules that R checks before a run, read once a session per Python from
# `quantformer info --verbs --json` (python/quantformer/infer/rules.py): `verbs` (each with
# `quiet`: whether it takes --quiet; `serve` among them: whether R can keep a worker),
# `numeric_classes_max`, `zeroshot_labels`, `reading` (how a document is read: R/reading.R).
# R keeps no copy of them: a core that cannot answer (an older one) gives an empty list, and R
# then leaves these checks to the core. The question runs as its own process, never in the
# worker (whether there is one is part of the answer); its warnings are not the caller's news.
core_rules <- function() {
  found <- core_python()  # R/call.R: a core of another version is named here, once
  rules <- .qf$rules[[found$python]]
  if (!is.null(rules)) return(rules)
  rules <- tryCatch(suppressWarnings(call_verb("info", c("--verbs", "--json"),
                                               output = "stdout", verbose = FALSE,
                                               worker = FALSE)$output),
                    error = function(e) list())
  if (!is.list(rules)) rules <- list()
  .qf$rules[[found$python]] <- rules
  rules
}

# Whether the core's `verb` takes --quiet (its progress bars), from core_rules().
verb_takes_quiet <- function(verb) {
  verb != "info" && isTRUE(core_rules()$verbs[[verb]]$quiet)
}

# Whether the core has the CLI verb `verb` (`info --verbs`, core_rules()).
core_has_verb <- function(verb) verb %in% names(core_rules()$verbs)

#' Find the Python interpreter that runs the quantformer core
#'
#' Tries, in order: the option `quantformer.python`, the environment variables
#' `QUANTFORMER_PYTHON` and `RETICULATE_PYTHON`, the virtual environment made by
#' [quantformer_install()], then `python3` on the `PATH`. The first candidate that imports the
#' `quantformer` Python package wins; the result is cached for the session until the option or
#' the environment variables change.
#'
#' @param error If `TRUE` (default), raise an error naming every candidate tried and the
#'   command that fixes it when none works; if `FALSE`, return `NULL` instead.
#' @return A list with `python` (path) and `source` (where it was found), or `NULL`.
#' @keywords internal
#' @noRd
find_python <- function(error = TRUE) {
  cands <- python_candidates()
  key <- paste(vapply(cands, function(c) c$path, ""), collapse = "\r")
  if (!is.null(.qf$found) && identical(.qf$key, key)) return(.qf$found)
  tried <- character()
  for (c in cands) {
    ok <- python_imports_quantformer(c$path)
    if (is.list(ok)) {
      # not normalizePath(): resolving the symlink of a virtualenv's python leaves the venv
      found <- list(python = absolute_path(c$path), source = c$source, version = ok$version)
      .qf$found <- found
      .qf$key <- key
      return(found)
    }
    tried <- c(tried, sprintf("  - %s (%s): %s", c$path, c$source, ok))
  }
  if (!error) return(NULL)
  stop(python_not_found_message(tried), call. = FALSE)
}

absolute_path <- function(p) {
  p <- path.expand(p)
  if (grepl("^(/|[A-Za-z]:[/\\\\])", p)) p else file.path(getwd(), p)
}

python_not_found_message <- function(tried) {
  paste0(
    "quantformer cannot find a Python with the quantformer package installed.\n",
    if (length(tried)) paste0("Tried:\n", paste(tried, collapse = "\n"), "\n")
    else "No candidate Python was found.\n",
    "Fix it with one of:\n",
    "  quantformer::quantformer_install()                  # the bundled core, into ",
    quantformer_venv(), "\n",
    "  quantformer::quantformer_install(path = \"<source>\")  # a local copy of the Python core\n",
    "  Sys.setenv(QUANTFORMER_VENV = \"<envdir>\")           # the envdir of an earlier install\n",
    "  options(quantformer.python = \"/path/to/python\")     # a Python that imports quantformer"
  )
}

#' Which Python and quantformer core R uses
#'
#' Finds the Python interpreter (see [quantformer_install()] for the search order) and asks it
#' for versions, the default model and the devices it sees (`quantformer info --json`).
#'
#' @return A list of class `quantformer_config`: `python` (path), `source` (where it was found),
#'   and the fields reported by the core (`quantformer`, `python_version`, `torch`,
#'   `transformers`, ..., `default_model`, `default_model_path`, `cuda`, `mps`). Printed as a
#'   table. Before the core is installed (no Python with quantformer found) it does not fail:
#'   `python` and `source` are `NA`, `quantformer` is `"not installed"` and `missing` says
#'   what is missing and how to install it ([quantformer_install()]).
#' @examples
#' \donttest{
#' if (quantformer_available()) quantformer_config()
#' }
#' @export
quantformer_config <- function() {
  found <- tryCatch(find_python(), error = function(e) e)
  if (inherits(found, "error"))  # no core yet: say what is missing instead of failing
    return(structure(list(python = NA_character_, source = NA_character_,
                          quantformer = "not installed", missing = conditionMessage(found)),
                     class = "quantformer_config"))
  info <- call_verb("info", "--json", output = "stdout", verbose = FALSE)$output
  # the core's `python` is its version; `python` here is the interpreter's path
  names(info)[names(info) == "python"] <- "python_version"
  structure(c(list(python = found$python, source = found$source), info),
            class = "quantformer_config")
}

#' @rdname quantformer_config
#' @param x a `quantformer_config` object.
#' @param ... not used.
#' @return `print()` returns `x` invisibly.
#' @export
print.quantformer_config <- function(x, ...) {
  cat("quantformer configuration\n")
  rows <- unclass(x)[names(x) != "missing"]
  vals <- vapply(rows, function(v) if (is.null(v)) "NA" else paste(format(v), collapse = ", "),
                 "")
  w <- max(nchar(names(vals)))
  cat(sprintf("  %-*s %s", w, names(vals), vals), sep = "\n")
  if (!is.null(x$missing)) cat("\nmissing: ", x$missing, "\n", sep = "")
  invisible(x)
}

#' Is the quantformer Python core available?
#'
#' @return `TRUE` when a Python that imports `quantformer` is found (see
#'   [quantformer_install()]), else `FALSE`. Never raises an error.
#' @examples
#' quantformer_available()
#' @export
quantformer_available <- function() {
  !is.null(tryCatch(find_python(error = FALSE), error = function(e) NULL))
}

# The CLI's error lines: `quantformer <verb>: error: ...` (exit 2), `... internal error: ...`
# (exit 1), and argparse's `quantformer [<verb>]: error: ...` for unknown flags.
CLI_ERROR_LINE <- "^quantformer( [a-z-]+)?: (error|internal error|interrupted)"

# The error of a failed verb, a condition users can catch with tryCatch(): class
# `quantformer_input_error` for exit status 2 (bad input or arguments: the message says what to
# fix), else `quantformer_error` (an internal error of the core); both are `error`s and carry
# `verb`, `status` (the exit status) and `stderr` (everything the core wrote there). A crash of
# the worker is a `quantformer_worker_crash` (R/worker.R), also a `quantformer_error`.
cli_error <- function(verb, res, debug = FALSE) {
  status <- as.integer(res$status)
  structure(class = c(if (identical(status, 2L)) "quantformer_input_error", "quantformer_error",
                      "error", "condition"),
            list(message = cli_error_message(verb, res, debug), call = NULL,
                 verb = verb, status = status, stderr = res$stderr))
}

# An error in the caller's arguments found on the R side, before any Python runs: the same
# class as the core's bad-input errors (`quantformer_input_error`, a `quantformer_error`), so
# that one tryCatch() handler catches both. Arguments are pasted together as stop() does;
# `call.` is accepted for the look of stop() calls and ignored (the message names the argument).
input_error <- function(..., call. = FALSE) {
  stop(structure(class = c("quantformer_input_error", "quantformer_error", "error", "condition"),
                 list(message = paste0(...), call = NULL, status = 2L)))
}

# Core messages name the temporary files R exchanges with it (`'<tempdir>/qf-input-....rds'`):
# an R user never made them, and the message names the R argument already. Dropped, with the
# space before them; a CSV input is a data frame the user gave (call_verb()'s csv_input(), such
# as `substitutions`), so "`substitutions` '<tempdir>/qf-input-1.csv'" reads "the
# `substitutions` data frame".
without_temp_files <- function(msg) {
  tmp <- gsub("([][{}()+*^$|\\\\?.])", "\\\\\\1", normalizePath(tempdir(), winslash = "/"))
  msg <- gsub(paste0("(`[^`]+`) '", tmp, "/qf-input-[^']*[.]csv'"), "the \\1 data frame", msg)
  gsub(paste0("( of| in)? ?'", tmp, "/qf-[^']*'"), "", msg)
}

# The message of a failed verb: the CLI's `quantformer <verb>: error: ...` line(s), else the
# last lines of stderr.
cli_error_message <- function(verb, res, debug = FALSE) {
  lines <- strsplit(res$stderr, "\r?\n|\r")[[1]]
  tb <- grep("^Traceback", lines)
  trace <- if (debug && length(tb)) lines[tb[1]:length(lines)] else character()
  hit <- grep(CLI_ERROR_LINE, lines, value = TRUE)
  msg <- if (length(hit)) hit else utils::tail(lines[nzchar(trimws(lines))], 5)
  if (!length(msg)) msg <- paste("the Python process stopped with exit status", res$status)
  # the CLI's own hint names its flag; R gives its own hint below. The core already names R's
  # arguments instead of flags (run_cli() passes --r-names)
  msg <- sub(" \\(run with --debug for the traceback\\)$", "", msg)
  # argparse's pointer to the verb's --help is for command-line users; R's help is ?function
  msg <- sub(" \\(see 'quantformer( [a-z-]+)? --help'\\)$", "", msg)
  msg <- without_temp_files(msg)
  # a bad input reads as R's own errors do: the message alone (`status` and the condition's
  # class say it came from the core); internal errors and interruptions keep their prefix
  msg <- sub("^quantformer( [a-z-]+)?: error: ", "", msg)
  if (length(trace)) msg <- c(trace, setdiff(msg, trace))
  paste0(paste(msg, collapse = "\n"),
         if (res$status == 2 || length(trace)) "" else
           paste0("\n(exit status ", res$status, "; set options(quantformer.debug = TRUE) and ",
                  "rerun for the Python traceback)"))
}
