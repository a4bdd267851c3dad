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
  c("current", LD_LIBRARY_PATH = paste(keep, collapse = ":"),
    TOKENIZERS_PARALLELISM = "false", PYTHONIOENCODING = "utf-8", PYTHONUTF8 = "1")
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

# TRUE when `python` runs and imports quantformer; else a one-line reason.
python_imports_quantformer <- function(python) {
  if (!file.exists(python)) return("file not found")
  res <- tryCatch(
    processx::run(python, c("-c", "import quantformer"), error_on_status = FALSE,
                  timeout = 60, env = child_env()),
    error = function(e) list(status = -1L, stderr = conditionMessage(e))
  )
  if (identical(res$status, 0L)) return(TRUE)
  lines <- strsplit(res$stderr, "\n", fixed = TRUE)[[1]]
  lines <- lines[nzchar(trimws(lines))]
  if (length(lines)) utils::tail(lines, 1) else paste("exit status", res$status)
}

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
    if (isTRUE(ok)) {
      # not normalizePath(): resolving the symlink of a virtualenv's python leaves the venv
      found <- list(python = absolute_path(c$path), source = c$source)
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
    "  quantformer::quantformer_install()                  # PyPI, into ", quantformer_venv(), "\n",
    "  quantformer::quantformer_install(path = \"<source>\")  # a local copy of the Python core\n",
    "  options(quantformer.python = \"/path/to/python\")     # a Python that imports quantformer"
  )
}

#' Install the quantformer Python core into a virtual environment
#'
#' Creates a virtual environment (by default in the user's data directory, see Details) and
#' pip-installs into it first PyTorch (`torch == 2.13.0` by default, the CPU build unless
#' `cpu = FALSE`), then the quantformer Python package, from PyPI or from a local source
#' folder. [quantformer_config()] then finds it without further setup.
#'
#' The folder is `tools::R_user_dir("quantformer", "data")/venv` unless `envdir` or the
#' environment variable `QUANTFORMER_VENV` says otherwise. Torch is installed first so that pip
#' does not pull a multi-gigabyte CUDA build as a dependency of the core.
#'
#' @param path `NULL` (install `quantformer` from PyPI) or the path of a local copy of the
#'   Python core (the folder holding `pyproject.toml`), installed with `pip install <path>`.
#' @param envdir folder of the virtual environment to create (or reuse).
#' @param python the Python (>= 3.10) used to create the environment.
#' @param torch the PyTorch version to install first (`"2.13.0"`); `NULL` skips this step.
#' @param cpu if `TRUE` (default), torch comes from PyTorch's CPU-only wheel index; use `FALSE`
#'   on a machine with a CUDA GPU.
#' @param dry_run if `TRUE`, return the commands without running them.
#' @return Invisibly, the commands (a list of character vectors: program then arguments);
#'   run for their side effect unless `dry_run = TRUE`.
#' @examples
#' # the commands it would run, without running them
#' quantformer_install(dry_run = TRUE, envdir = file.path(tempdir(), "qf-venv"))
#' @export
quantformer_install <- function(path = NULL, envdir = quantformer_venv(),
                                python = Sys.which("python3")[[1]], torch = "2.13.0",
                                cpu = TRUE, dry_run = FALSE) {
  if (!is.null(path)) {
    if (!is.character(path) || length(path) != 1 || !dir.exists(path))
      stop("`path` must be the folder of a local copy of the quantformer Python core; ",
           "'", path, "' is not a folder", call. = FALSE)
    if (!file.exists(file.path(path, "pyproject.toml")) &&
        !file.exists(file.path(path, "setup.py")))
      stop("'", path, "' has no pyproject.toml: give the folder that holds the Python core's ",
           "pyproject.toml", call. = FALSE)
    path <- normalizePath(path)
  }
  if (!nzchar(python) && !dry_run)
    stop("no python3 on the PATH: install Python >= 3.10, or pass `python =` its path",
         call. = FALSE)
  envdir <- path.expand(envdir)
  py <- venv_python(envdir)
  cmds <- list(c(if (nzchar(python)) python else "python3", "-m", "venv", envdir),
               c(py, "-m", "pip", "install", "--upgrade", "pip"))
  if (!is.null(torch)) {
    cmds <- c(cmds, list(c(py, "-m", "pip", "install", paste0("torch==", torch),
                           if (cpu) c("--index-url", "https://download.pytorch.org/whl/cpu"))))
  }
  cmds <- c(cmds, list(c(py, "-m", "pip", "install", if (is.null(path)) "quantformer" else path)))
  if (dry_run) return(invisible(cmds))
  for (cmd in cmds) {
    message("$ ", paste(shQuote(cmd), collapse = " "))
    res <- processx::run(cmd[1], cmd[-1], error_on_status = FALSE, echo = TRUE,
                         spinner = FALSE)
    if (res$status != 0)
      stop("this step of the installation failed (exit status ", res$status, "): ",
           paste(cmd, collapse = " "), call. = FALSE)
  }
  .qf$found <- NULL
  message("quantformer is installed in ", envdir)
  invisible(cmds)
}

#' Which Python and quantformer core R uses
#'
#' Finds the Python interpreter (see [quantformer_install()] for the search order) and asks it
#' for versions, the default model and the devices it sees (`quantformer info --json`).
#'
#' @return A list of class `quantformer_config`: `python` (path), `source` (where it was found),
#'   and the fields reported by the core (`quantformer`, `torch`, `transformers`, ...,
#'   `default_model`, `default_model_path`, `cuda`, `mps`). Printed as a table.
#' @examples
#' \donttest{
#' if (quantformer_available()) quantformer_config()
#' }
#' @export
quantformer_config <- function() {
  found <- find_python()
  res <- run_cli("info", "--json", verbose = FALSE)
  info <- jsonlite::fromJSON(res$stdout, simplifyVector = TRUE)
  structure(c(list(python = found$python, source = found$source), info),
            class = "quantformer_config")
}

#' @export
print.quantformer_config <- function(x, ...) {
  cat("quantformer configuration\n")
  vals <- vapply(unclass(x), function(v) if (is.null(v)) "NA" else paste(format(v), collapse = ", "),
                 "")
  w <- max(nchar(names(vals)))
  cat(sprintf("  %-*s %s", w, names(vals), vals), sep = "\n")
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

# ------------------------------------------------------------------------------------------
# running a verb

#' Run one CLI verb
#'
#' Streams the child's stdout and stderr to the console as they arrive (progress bars
#' included) when `verbose`, turns `quantformer: warning: ...` lines into R warnings (always),
#' kills the process when R is interrupted (processx does this on interrupt), and turns a
#' non-zero exit status into an R error carrying the CLI's one-line message.
#'
#' @param verb the CLI verb, e.g. `"predict"`.
#' @param args further arguments (character).
#' @param verbose show the Python side's progress bars and messages live; when `FALSE` the
#'   verb gets `--quiet` and nothing but warnings and errors reaches the console. Lines that
#'   name the temporary files R exchanges with the core are never shown.
#' @param debug pass `--debug` so that Python tracebacks come with internal errors (option
#'   `quantformer.debug`).
#' @param r_args the argument names of the calling R function (`names(formals())`): flags in
#'   the CLI's error message that correspond to one are shown as that R argument.
#' @return The processx result list (`status`, `stdout`, `stderr`, `warnings`), invisibly.
#' @keywords internal
#' @noRd
run_cli <- function(verb, args = character(),
                    verbose = getOption("quantformer.verbose", TRUE),
                    debug = isTRUE(getOption("quantformer.debug", FALSE)),
                    r_args = NULL) {
  found <- find_python()
  # verbs with progress bars get --quiet when nothing is shown
  quiet_flag <- if (!isTRUE(verbose) && verb %in% c("finetune", "predict", "evaluate",
                                                    "compare", "tune", "zeroshot")) "--quiet"
  full <- c("-m", "quantformer", if (debug) "--debug", verb, quiet_flag, args)
  echo <- isTRUE(verbose)
  tmp_dir <- normalizePath(tempdir(), winslash = "/", mustWork = FALSE)
  state <- new.env(parent = emptyenv())
  state$partial <- c(out = "", err = "")
  state$warnings <- character()
  # split a chunk into lines ending in \n or \r; keep an unfinished piece for the next chunk
  lines_of <- function(x, stream) {
    txt <- paste0(state$partial[[stream]], x)
    pieces <- regmatches(txt, gregexpr("[^\r\n]*(\r\n|\r|\n)", txt))[[1]]
    state$partial[[stream]] <- substring(txt, sum(nchar(pieces)) + 1L)
    pieces
  }
  out_cb <- function(x, proc) {
    for (p in lines_of(x, "out")) {
      # "wrote ... to /tmp/RtmpXXX/qf-out-....rds": R's own temporary files, not news
      if (echo && !grepl(tmp_dir, p, fixed = TRUE)) cat(p)
    }
  }
  err_cb <- function(x, proc) {
    for (p in lines_of(x, "err")) {
      line <- sub("(\r\n|\r|\n)$", "", p)
      if (startsWith(line, "quantformer: warning: ")) {
        state$warnings <- c(state$warnings, sub("^quantformer: warning: ", "", line))
      } else if (echo && !grepl(CLI_ERROR_LINE, line) && !grepl(tmp_dir, line, fixed = TRUE)) {
        cat(p, file = stderr())
      }
    }
  }
  env <- child_env()
  res <- processx::run(found$python, full, error_on_status = FALSE, echo = FALSE,
                       stdout_callback = out_cb, stderr_callback = err_cb,
                       spinner = FALSE, env = env, cleanup_tree = TRUE)
  last <- state$partial[["out"]]  # a last line without a newline
  if (echo && nzchar(last) && !grepl(tmp_dir, last, fixed = TRUE)) cat(last, "\n", sep = "")
  for (w in state$warnings) warning(w, call. = FALSE)
  if (res$status != 0) stop(cli_error_message(verb, res, debug, r_args), call. = FALSE)
  res$warnings <- state$warnings
  invisible(res)
}

# The CLI's error lines: `quantformer <verb>: error: ...` (exit 2), `... internal error: ...`
# (exit 1), and argparse's `quantformer [<verb>]: error: ...` for unknown flags.
CLI_ERROR_LINE <- "^quantformer( [a-z-]+)?: (error|internal error|interrupted)"

# The message of a failed verb: the CLI's `quantformer <verb>: error: ...` line(s), else the
# last lines of stderr.
cli_error_message <- function(verb, res, debug = FALSE, r_args = NULL) {
  lines <- strsplit(res$stderr, "\r?\n|\r")[[1]]
  tb <- grep("^Traceback", lines)
  trace <- if (debug && length(tb)) lines[tb[1]:length(lines)] else character()
  hit <- grep(CLI_ERROR_LINE, lines, value = TRUE)
  msg <- if (length(hit)) hit else utils::tail(lines[nzchar(trimws(lines))], 5)
  if (!length(msg)) msg <- paste("the Python process stopped with exit status", res$status)
  # the CLI's own hint names its flag; R gives its own hint below
  msg <- sub(" \\(run with --debug for the traceback\\)$", "", msg)
  msg <- r_flag_names(msg, r_args)
  if (length(trace)) msg <- c(trace, setdiff(msg, trace))
  paste0(paste(msg, collapse = "\n"),
         if (res$status == 2 || length(trace)) "" else
           paste0("\n(exit status ", res$status, "; set options(quantformer.debug = TRUE) and ",
                  "rerun for the Python traceback)"))
}

# Show the CLI's flags in an error message as the R arguments that set them: `--max-length`
# becomes `max_length`, `--out` `output_dir`, a switch such as `--overwrite` `overwrite = TRUE`
# (passed through `...`); flags with no R counterpart stay as they are. Python's
# "(overwrite=True)" asides are dropped.
R_SWITCHES <- c("overwrite", "keep_text", "multi_label")
r_flag_names <- function(msg, r_args) {
  if (is.null(r_args)) return(msg)
  msg <- gsub(" ?\\([a-z_]+=(True|False)\\)", "", msg)
  m <- gregexpr("--[a-z][a-z0-9-]*", msg)
  regmatches(msg, m) <- lapply(regmatches(msg, m), function(flags) {
    vapply(flags, function(f) {
      nm <- gsub("-", "_", substring(f, 3), fixed = TRUE)
      if (nm == "out" && "output_dir" %in% r_args) return("`output_dir`")
      if (nm %in% R_SWITCHES && "..." %in% r_args) return(paste0("`", nm, " = TRUE`"))
      if (nm %in% r_args) paste0("`", nm, "`") else f
    }, "", USE.NAMES = FALSE)
  })
  msg
}
