# The one round trip between R and the Python core: write the input frames to temporary
# files, run the CLI verb (in the worker, R/worker.R, or as one process), read its output and
# delete the files, whatever happens. Every R function that calls the core goes through
# call_verb(); run_cli() below it runs the verb and turns its output into R messages, warnings
# and errors.

#' Run a CLI verb on R inputs and read its output
#'
#' @param verb the CLI verb, e.g. `"predict"`.
#' @param args further arguments (character), without the input and output files.
#' @param inputs a named list: each name is a flag (`"--input"`, `"--valid"`, ...), each value
#'   a data frame (written with saveRDS()) or a character vector (a text file, one element a
#'   line, UTF-8); `NULL` values are left out.
#' @param output what the verb writes: `"none"` (nothing R reads, or a folder the caller
#'   names in `args`), `"rds"` (a frame, read with read_output()), `"json"` (a JSON file) or
#'   `"stdout"` (JSON printed on stdout); for `"rds"` and `"json"` a temporary file is passed
#'   as `--out`.
#' @param doc_id for `output = "rds"`: the document names the output must have, in order.
#' @param compress compress the input .rds files (FALSE: the same frame gives the same bytes
#'   on every call, which keeps caches keyed by file content valid).
#' @inheritParams run_cli
#' @return The list of run_cli() with `output` added: the data frame, the parsed JSON, or
#'   `NULL`.
#' @keywords internal
#' @noRd
call_verb <- function(verb, args = character(), inputs = list(),
                      output = c("none", "rds", "json", "stdout"), doc_id = NULL,
                      compress = TRUE, verbose = getOption("quantformer.verbose", TRUE),
                      r_args = NULL) {
  output <- match.arg(output)
  inputs <- inputs[!vapply(inputs, is.null, TRUE)]
  files <- character()
  on.exit(unlink(files), add = TRUE)
  input_args <- character()
  for (flag in names(inputs)) {
    files <- c(files, write_input(inputs[[flag]], compress = compress))
    input_args <- c(input_args, flag, files[length(files)])
  }
  out_args <- character()
  if (output %in% c("rds", "json")) {
    files <- c(files, out_path(paste0(".", output)))
    out_args <- c("--out", files[length(files)])
  }
  res <- run_cli(verb, c(input_args, args, out_args), verbose = verbose, r_args = r_args)
  res$output <- switch(output,
    none = NULL,
    rds = read_output(files[length(files)], doc_id),  # R/frames.R
    json = jsonlite::read_json(files[length(files)], simplifyVector = TRUE),
    stdout = jsonlite::fromJSON(res$stdout, simplifyVector = TRUE))
  res
}

# A temporary file name for a verb's output (the verb writes it; the caller unlinks it).
out_path <- function(ext = ".rds") tempfile("qf-output-", fileext = ext)

# Write one input of a verb to a temporary file: a data frame as .rds, a character vector as a
# UTF-8 text file with one element a line. Returns the path.
write_input <- function(x, compress = TRUE) {
  if (is.data.frame(x)) {
    path <- tempfile("qf-input-", fileext = ".rds")
    saveRDS(x, path, version = 2, compress = compress)
  } else {
    path <- tempfile("qf-input-", fileext = ".txt")
    writeLines(enc2utf8(as.character(x)), path, useBytes = TRUE)
  }
  path
}

#' Run one CLI verb
#'
#' Runs the verb in the session's worker (R/worker.R; `options(quantformer.worker = FALSE)`
#' runs it as its own `python -m quantformer <verb>` process instead). Streams the child's
#' stdout and stderr to the console as they arrive (progress bars included) when `verbose`,
#' turns `quantformer: warning: ...` lines into R warnings (always), kills the child when R is
#' interrupted, and turns a non-zero exit status into an R error carrying the CLI's one-line
#' message (a condition of class `quantformer_input_error` or `quantformer_error`, see
#' cli_error()). Verbs are called through call_verb(), which adds the input and output files.
#'
#' @param verb the CLI verb, e.g. `"predict"`.
#' @param args further arguments (character).
#' @param verbose show the Python side's progress bars and messages live; when `FALSE` the
#'   verb gets `--quiet` and nothing but warnings and errors reaches the console. Lines that
#'   name the temporary files R exchanges with the core are never shown.
#' @param debug pass `--debug` so that Python tracebacks come with internal errors (option
#'   `quantformer.debug`).
#' @param r_args the argument names of the calling R function (`names(formals())`), passed to
#'   the core as `--r-names`: its error messages then name these R arguments instead of flags
#'   (the core's one table of parameter names, `quantformer/_core/parameters.py`).
#' @return A list (`status`, `stdout`, `stderr`, `warnings`; `reply` from the worker),
#'   invisibly.
#' @keywords internal
#' @noRd
run_cli <- function(verb, args = character(),
                    verbose = getOption("quantformer.verbose", TRUE),
                    debug = isTRUE(getOption("quantformer.debug", FALSE)),
                    r_args = NULL) {
  found <- find_python()
  check_core_version(found)
  # verbs with progress bars get --quiet when nothing is shown
  quiet_flag <- if (!isTRUE(verbose) && verb %in% c("finetune", "predict", "evaluate",
                                                    "compare", "tune", "zeroshot",
                                                    "embed")) "--quiet"
  stream <- new_stream(echo = isTRUE(verbose))
  names_arg <- if (length(r_args)) paste(r_args, collapse = ",")
  res <- if (worker_wanted(found)) worker_run(found, verb, c(quiet_flag, args), debug, stream,
                                              names_arg)
         else run_process(found, verb, c(quiet_flag, args), debug, stream, names_arg)
  stream_finish(stream)
  stream$warnings <- without_temp_files(stream$warnings)
  for (w in stream$warnings) warning(w, call. = FALSE)
  if (res$status != 0) stop(cli_error(verb, res, debug))  # R/python.R
  res$warnings <- stream$warnings
  invisible(res)
}

# The one-off path (options(quantformer.worker = FALSE)): `python -m quantformer <verb>` as a
# child process, killed with its children when R is interrupted.
run_process <- function(found, verb, args, debug, stream, r_names = NULL) {
  full <- c("-m", "quantformer", if (debug) "--debug", if (!is.null(r_names))
    c("--r-names", r_names), verb, args)
  processx::run(found$python, full, error_on_status = FALSE, echo = FALSE,
                stdout_callback = function(x, proc) stream_stdout(stream, x),
                stderr_callback = function(x, proc) stream_stderr(stream, x),
                spinner = FALSE, env = child_env(), cleanup_tree = TRUE)
}

# ------------------------------------------------------------------------------------------
# the child's output, as it arrives: shown when `echo`, warnings collected, R's temporary file
# names hidden ("wrote ... to /tmp/RtmpXXX/qf-out-....rds" is not news). Shared by the one-off
# process and the worker.

new_stream <- function(echo) {
  s <- new.env(parent = emptyenv())
  s$echo <- echo
  s$partial <- c(out = "", err = "")
  s$warnings <- character()
  s$stdout <- ""
  s$stderr <- ""
  s$tmp_dir <- normalizePath(tempdir(), winslash = "/", mustWork = FALSE)
  s
}

# split a chunk into lines ending in \n or \r; keep an unfinished piece for the next chunk
stream_lines <- function(s, x, which) {
  txt <- paste0(s$partial[[which]], x)
  pieces <- regmatches(txt, gregexpr("[^\r\n]*(\r\n|\r|\n)", txt))[[1]]
  s$partial[[which]] <- substring(txt, sum(nchar(pieces)) + 1L)
  pieces
}

stream_stdout <- function(s, x) {
  s$stdout <- paste0(s$stdout, x)
  for (p in stream_lines(s, x, "out")) {
    if (s$echo && !grepl(s$tmp_dir, p, fixed = TRUE)) cat(p)
  }
}

stream_stderr <- function(s, x) {
  s$stderr <- paste0(s$stderr, x)
  for (p in stream_lines(s, x, "err")) stream_stderr_line(s, p)
}

stream_stderr_line <- function(s, p) {
  line <- sub("(\r\n|\r|\n)$", "", p)
  if (startsWith(line, "quantformer: warning: ")) {
    s$warnings <- c(s$warnings, sub("^quantformer: warning: ", "", line))
  } else if (s$echo && !grepl(CLI_ERROR_LINE, line) && !grepl(s$tmp_dir, line, fixed = TRUE)) {
    cat(p, file = stderr())
  }
}

# a last line without a newline
stream_finish <- function(s) {
  last <- s$partial[["out"]]
  if (s$echo && nzchar(last) && !grepl(s$tmp_dir, last, fixed = TRUE)) cat(last, "\n", sep = "")
  if (nzchar(s$partial[["err"]])) stream_stderr_line(s, s$partial[["err"]])
  s$partial <- c(out = "", err = "")
}

