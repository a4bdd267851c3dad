# Installing the Python core into a virtual environment of its own.
#
# The R package carries the core's source (`pycore/`: pyproject.toml, README.md and python/,
# placed there by R CMD build from the symlinks in inst/pycore), so quantformer_install() needs
# no copy of the repository and nothing from PyPI but the core's dependencies.

# Written into the environment when an installation starts, removed when it has finished: an
# environment that still has it was left half-built.
INSTALLING_MARKER <- ".quantformer-installing"
INSTALLED_MARKER <- "quantformer-installed.txt"
TORCH_CPU_INDEX <- "https://download.pytorch.org/whl/cpu"

#' Install the quantformer Python core into a virtual environment
#'
#' Creates a virtual environment (by default in the user's data directory, see Details) and
#' installs into it first PyTorch (`torch == 2.13.0` by default, the CPU build unless
#' `cuda = TRUE`), then the quantformer Python core that ships inside this R package (or a
#' local checkout given as `path`) with its dependencies and `extras`.
#' [quantformer_config()] then finds it without further setup.
#'
#' The folder is `tools::R_user_dir("quantformer", "data")/venv` unless `envdir` or the
#' environment variable `QUANTFORMER_VENV` says otherwise. Torch is installed first so that
#' pip does not pull a multi-gigabyte CUDA build as a dependency of the core; the CPU build
#' comes from PyTorch's CPU wheel index (on Linux and Windows; the environment variable
#' `TORCH_INDEX_URL` overrides it, an empty value uses pip's own configuration, as
#' `scripts/setup.sh` does). `uv` (<https://docs.astral.sh/uv/>) is used when it is on the
#' `PATH` (much faster, as `reticulate::py_require()` does), else `python -m venv` and pip.
#'
#' What can go wrong is said in one message with its fix: no Python (install Python >= 3.10 or
#' pass `python =`), a Python older than 3.10, a Python without the `venv` module, no network
#' to reach the package index (pip's message is shown; set `PIP_INDEX_URL` or
#' `PIP_FIND_LINKS` to a mirror or a folder of wheels). An installation that stops half way
#' leaves a marker in the environment, so that R never uses it (the next
#' `quantformer_install()` completes it); an existing environment is updated in place by pip,
#' which keeps the packages it cannot replace, and is never deleted.
#'
#' @param path `NULL` (default: the core bundled with this R package) or the folder of a local
#'   copy of the Python core (the one holding `pyproject.toml`).
#' @param envdir folder of the virtual environment to create (or update).
#' @param python the Python (>= 3.10) used to create the environment; by default `python3`
#'   (else `python`) on the `PATH`.
#' @param torch the PyTorch version to install first (`"2.13.0"`, the pin of
#'   `scripts/setup.sh`); `NULL` skips this step.
#' @param cuda if `TRUE`, install the CUDA build of torch (pip's default index) for a machine
#'   with an NVIDIA GPU; `FALSE` (default) the CPU build.
#' @param cpu the opposite of `cuda` (kept for compatibility); give one of the two.
#' @param extras the optional parts of the core to install (character): `"all"` (default:
#'   every verb works), or any of `"fewshot"` (SetFit), `"distributed"` (Dask), `"onnx"`
#'   (ONNX Runtime); `character()` for the core alone.
#' @param dry_run if `TRUE`, return the commands without running them.
#' @return Invisibly, the commands (a list of character vectors: program then arguments);
#'   run for their side effect unless `dry_run = TRUE`. Its attribute `envdir` is the absolute
#'   path of the environment, the one the commands install into and R later uses (a relative
#'   `envdir` is taken from the working directory at the call).
#' @examples
#' # the commands it would run, without running them
#' quantformer_install(dry_run = TRUE, envdir = file.path(tempdir(), "qf-venv"))
#' @export
quantformer_install <- function(path = NULL, envdir = quantformer_venv(),
                                python = default_python(), torch = "2.13.0",
                                cuda = FALSE, cpu = !cuda, extras = "all", dry_run = FALSE) {
  source <- core_source(path)
  # absolute, as R later finds it (find_python()): a relative `envdir` would name another
  # folder once the working directory changes
  envdir <- absolute_path(envdir)
  check_envdir(envdir)
  if (!dry_run) check_base_python(python)
  uv <- Sys.which("uv")[[1]]
  cmds <- install_commands(source, envdir, if (nzchar(python)) python else "python3",
                           torch, isTRUE(cpu), extras, uv)
  attr(cmds, "envdir") <- envdir
  if (dry_run) return(invisible(cmds))
  run_install(cmds, envdir, source)
  invisible(cmds)
}

default_python <- function() {
  for (p in c("python3", "python")) {
    found <- Sys.which(p)[[1]]
    if (nzchar(found)) return(found)
  }
  ""
}

# The core bundled with the installed R package (pycore/), or the `path` a user gave.
bundled_core <- function() system.file("pycore", package = "quantformer")

core_source <- function(path) {
  if (is.null(path)) {
    path <- bundled_core()
    if (!nzchar(path) || !file.exists(file.path(path, "pyproject.toml")))
      stop("this installation of the quantformer R package carries no Python core ",
           "(it was installed from a source without inst/pycore). Reinstall the R package from ",
           "its built tarball or GitHub, or pass `path =` the folder of a clone that holds ",
           "pyproject.toml", call. = FALSE)
    return(normalizePath(path))
  }
  if (!is.character(path) || length(path) != 1 || !dir.exists(path))
    input_error("`path` must be the folder of a local copy of the quantformer Python core; ",
               "'", path, "' is not a folder", call. = FALSE)
  if (!file.exists(file.path(path, "pyproject.toml")) &&
      !file.exists(file.path(path, "setup.py")))
    input_error("'", path, "' has no pyproject.toml: give the folder that holds the Python core's ",
               "pyproject.toml", call. = FALSE)
  normalizePath(path)
}

# An existing folder must be a virtual environment (or empty): never pip into something else.
check_envdir <- function(envdir) {
  if (!dir.exists(envdir) || !length(list.files(envdir, all.files = TRUE, no.. = TRUE)))
    return(invisible(TRUE))
  if (!file.exists(file.path(envdir, "pyvenv.cfg")))
    input_error("'", envdir, "' exists and is not a Python virtual environment (no pyvenv.cfg): ",
               "choose another `envdir`, or remove that folder", call. = FALSE)
  invisible(TRUE)
}

# Python found, >= 3.10, with venv: else an input error (`python =`) that says which and what
# to do.
check_base_python <- function(python) {
  if (!nzchar(python) || (!file.exists(python) && !nzchar(Sys.which(python))))
    input_error("no Python found (python3 or python on the PATH): install Python 3.10 or newer ",
         "(https://www.python.org/downloads/ or your system's package manager), or pass ",
         "`python =` the path of one", call. = FALSE)
  res <- processx::run(python, c("-c", paste0("import sys, venv; ",
                                              "print('%d.%d' % sys.version_info[:2])")),
                       error_on_status = FALSE, env = child_env())
  if (res$status != 0) {
    if (grepl("venv", res$stderr))
      input_error(python, " has no `venv` module (on Debian/Ubuntu: apt install python3-venv), ",
           "or pass `python =` another Python 3.10+", call. = FALSE)
    input_error(python, " does not run (", trimws(res$stderr), "): pass `python =` a working ",
         "Python 3.10 or newer", call. = FALSE)
  }
  v <- numeric_version(trimws(res$stdout))
  if (v < "3.10")
    input_error(python, " is Python ", v, "; the quantformer core needs Python 3.10 or newer: ",
         "install one and pass `python =` its path", call. = FALSE)
  invisible(v)
}

torch_index <- function(cpu) {
  if (!is.na(Sys.getenv("TORCH_INDEX_URL", NA))) {
    url <- Sys.getenv("TORCH_INDEX_URL")
    return(if (nzchar(url)) url else NULL)
  }
  if (cpu && Sys.info()[["sysname"]] != "Darwin") TORCH_CPU_INDEX else NULL
}

# The commands: create the environment, torch, then the core with its extras.
install_commands <- function(source, envdir, python, torch, cpu, extras, uv = "") {
  py <- venv_python(envdir)
  target <- if (length(extras)) paste0(source, "[", paste(extras, collapse = ","), "]") else source
  index <- torch_index(cpu)
  if (nzchar(uv)) {
    pip <- c(uv, "pip", "install", "--python", py)
    create <- list(c(uv, "venv", "--allow-existing", "--python", python, envdir))
  } else {
    pip <- c(py, "-m", "pip", "install")
    create <- list(c(python, "-m", "venv", envdir), c(pip, "--upgrade", "pip"))
  }
  c(create,
    if (!is.null(torch)) list(c(pip, paste0("torch==", torch),
                                if (!is.null(index)) c("--index-url", index))),
    list(c(pip, target)))
}

run_install <- function(cmds, envdir, source) {
  marker <- file.path(envdir, INSTALLING_MARKER)
  # a new (or half-built) environment is marked until the end; a working one is updated in
  # place and stays usable if a step fails
  if (!file.exists(file.path(envdir, "pyvenv.cfg")) || file.exists(marker)) {
    dir.create(envdir, recursive = TRUE, showWarnings = FALSE)
    writeLines(format(Sys.time()), marker)
  }
  # pip builds in the source folder: build from a copy, the R library may be read-only
  copy <- tempfile("quantformer-core-")
  on.exit(unlink(copy, recursive = TRUE), add = TRUE)
  dir.create(copy)
  file.copy(list.files(source, full.names = TRUE), copy, recursive = TRUE)
  cmds[[length(cmds)]] <- sub(source, copy, cmds[[length(cmds)]], fixed = TRUE)
  for (cmd in cmds) run_install_step(cmd, envdir, file.exists(marker))
  unlink(marker)
  writeLines(c(paste("quantformer core installed from", source), format(Sys.time())),
             file.path(envdir, INSTALLED_MARKER))
  .qf$found <- NULL
  message("quantformer is installed in ", envdir)
  remember_envdir(envdir)
}

# A folder other than the default is found in this session through QUANTFORMER_VENV; say how
# to find it in later sessions too.
remember_envdir <- function(envdir) {
  if (normalizePath(envdir, mustWork = FALSE) ==
      normalizePath(quantformer_venv(), mustWork = FALSE)) return(invisible())
  Sys.setenv(QUANTFORMER_VENV = envdir)
  message("This R session now uses it. In later sessions, set QUANTFORMER_VENV=", envdir,
          " (e.g. a line in ~/.Renviron) so that quantformer finds it.")
}

run_install_step <- function(cmd, envdir, marked) {
  message("$ ", paste(shQuote(cmd), collapse = " "))
  res <- processx::run(cmd[1], cmd[-1], error_on_status = FALSE, echo = TRUE, spinner = FALSE,
                       env = child_env(), stderr_to_stdout = TRUE)
  if (res$status == 0) return(invisible(TRUE))
  offline <- grepl(paste0("Failed to establish a new connection|Temporary failure in name ",
                          "resolution|Network is unreachable|No matching distribution|",
                          "Could not find a version|Failed to fetch|dns error"), res$stdout)
  stop("this step of the installation failed (exit status ", res$status, "): ",
       paste(cmd, collapse = " "), "\n",
       if (offline) paste0("The package index could not be reached or has no such package ",
                           "(no network?). Connect, or set PIP_INDEX_URL / PIP_FIND_LINKS to ",
                           "a mirror or a folder of wheels, and run quantformer_install() ",
                           "again.\n",
                           if ("--index-url" %in% cmd)
                             paste0("This step reads torch from ", cmd[which(cmd == "--index-url") + 1],
                                    " only, which overrides PIP_INDEX_URL and the mirrors of ",
                                    "pip's configuration: set Sys.setenv(TORCH_INDEX_URL = \"\") ",
                                    "to take torch from pip's own configuration instead (a ",
                                    "mirror or folder of CPU wheels), or TORCH_INDEX_URL to ",
                                    "another index.\n")),
       if (marked) paste0("The environment ", envdir, " is marked half-built and is not ",
                          "used until quantformer_install() completes it.")
       else paste0("The environment ", envdir, " was there before and is left as pip left ",
                   "it (pip rolls back a package it could not replace)."), call. = FALSE)
}
