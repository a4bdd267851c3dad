# The one round trip between R and the Python core: write the input frames to temporary
# files, run the CLI verb (in the worker, R/worker.R, or as one process), read its output and
# delete the files, whatever happens. Every R function that calls the core goes through
# call_verb(); run_cli() below it runs the verb and turns its output into R messages, warnings
# and errors. Every child that runs a verb starts from one command line, cli_command(): the
# one-off process, the worker (`serve`, R/worker.R) and the coding room's server
# (R/code_documents.R, the one verb R starts itself: it serves until the coder is done).

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
#' @param outputs further files the verb writes, a named list: each name a flag (`"--by-term"`,
#'   `"--export"`, ...), each value `"rds"` or `"json"`; a temporary file is passed with each
#'   flag and read back into `$outputs[[flag]]`.
#' @param beside files the verb writes beside its `--out` file, a named character vector of
#'   suffixes that replace the extension of `--out` (`c(check = ".check.json")`); each is read
#'   as JSON into `$beside[[name]]` when the verb wrote it (`NULL` otherwise).
#' @param doc_id for `output = "rds"`: the document names the output must have, in order.
#' @param simplify for `output = "json"` or `"stdout"`: simplify JSON arrays to vectors and
#'   data frames (jsonlite's `simplifyVector`); `FALSE` keeps lists.
#' @param compress compress the input .rds files (FALSE: the same frame gives the same bytes
#'   on every call, which keeps caches keyed by file content valid).
#' @inheritParams run_cli
#' @return The list of run_cli() with `output` added (the data frame, the parsed JSON, or
#'   `NULL`), and `outputs` and `beside` (named lists) when asked for. Every temporary file is
#'   deleted on return, whatever happens.
#' @keywords internal
#' @noRd
call_verb <- function(verb, args = character(), inputs = list(),
                      output = c("none", "rds", "json", "stdout"), doc_id = NULL,
                      outputs = list(), beside = character(), simplify = TRUE,
                      compress = TRUE, verbose = getOption("quantformer.verbose", TRUE),
                      r_args = NULL, worker = TRUE) {
  output <- match.arg(output)
  inputs <- inputs[!vapply(inputs, is.null, TRUE)]
  files <- character()
  on.exit(unlink(files), add = TRUE)
  input_args <- character()
  for (flag in names(inputs)) {
    files <- c(files, write_input(inputs[[flag]], compress = compress))
    input_args <- c(input_args, flag, files[length(files)])
  }
  out_file <- if (output %in% c("rds", "json")) out_path(paste0(".", output))
  beside_files <- vapply(beside, function(suffix) sub("\\.[^.]*$", suffix, out_file), "")
  extra <- vapply(outputs, function(type) out_path(paste0(".", match_output(type))), "")
  # the record some verbs write beside --out (its full name plus ".json"): deleted with it
  record_file <- if (!is.null(out_file)) paste0(out_file, ".json")
  files <- c(files, out_file, record_file, beside_files, extra)
  out_args <- c(if (!is.null(out_file)) c("--out", out_file),
                as.vector(rbind(names(outputs), extra)))
  res <- run_cli(verb, c(input_args, args, out_args), verbose = verbose, r_args = r_args,
                 worker = worker)
  res$output <- switch(output,
    none = NULL,
    rds = read_output(out_file, doc_id),  # R/frames.R
    json = jsonlite::read_json(out_file, simplifyVector = simplify),
    stdout = jsonlite::fromJSON(res$stdout, simplifyVector = simplify))
  if (length(outputs))
    res$outputs <- Map(read_output_file, extra, outputs[names(outputs)])
  if (length(beside))
    res$beside <- lapply(beside_files, function(f) if (file.exists(f)) read_output_file(f, "json"))
  res
}

# The kinds of output file call_verb() reads.
match_output <- function(type) match.arg(type, c("rds", "json"))

# One output file read back: a frame (.rds) or parsed JSON.
read_output_file <- function(path, type) {
  if (match_output(type) == "rds") read_output(path)
  else jsonlite::read_json(path, simplifyVector = TRUE)
}

# A data frame that a verb reads as a CSV file (`behave --substitutions`), for call_verb()'s
# `inputs`.
csv_input <- function(frame) structure(frame, class = c("quantformer_csv", class(frame)))

# A temporary file name for a verb's output (the verb writes it; the caller unlinks it).
out_path <- function(ext = ".rds") tempfile("qf-output-", fileext = ext)

# Write one input of a verb to a temporary file: a data frame as .rds (as a UTF-8 CSV file when
# marked with csv_input()), a character vector as a UTF-8 text file with one element a line.
# Returns the path.
write_input <- function(x, compress = TRUE) {
  if (inherits(x, "quantformer_csv")) {
    path <- tempfile("qf-input-", fileext = ".csv")
    utils::write.csv(as.data.frame(unclass(x), stringsAsFactors = FALSE), path,
                     row.names = FALSE, na = "", fileEncoding = "UTF-8")
  } else if (is.data.frame(x)) {
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
#' @param worker `FALSE` runs the verb as its own process even where the worker is wanted
#'   (core_rules(): whether the core has a worker is part of its answer).
#' @return A list (`status`, `stdout`, `stderr`, `warnings`; `reply` from the worker),
#'   invisibly.
#' @keywords internal
#' @noRd
run_cli <- function(verb, args = character(),
                    verbose = getOption("quantformer.verbose", TRUE),
                    debug = isTRUE(getOption("quantformer.debug", FALSE)),
                    r_args = NULL, worker = TRUE) {
  found <- core_python()
  # verbs with progress bars get --quiet when nothing is shown
  quiet_flag <- if (!isTRUE(verbose) && verb_takes_quiet(verb)) "--quiet"  # R/python.R
  stream <- new_stream(echo = isTRUE(verbose))
  names_arg <- r_names_arg(r_args)
  res <- if (worker && worker_wanted(found)) worker_run(found, verb, c(quiet_flag, args), debug,
                                                        stream, names_arg)
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
  cmd <- cli_command(found, verb, args, debug, r_names)
  processx::run(cmd$python, cmd$args, error_on_status = FALSE, echo = FALSE,
                stdout_callback = function(x, proc) stream_stdout(stream, x),
                stderr_callback = function(x, proc) stream_stderr(stream, x),
                spinner = FALSE, env = cmd$env, cleanup_tree = TRUE)
}

# The Python that runs the core (find_python(), R/python.R), its version checked against this
# package's (one warning per Python when they differ).
core_python <- function() {
  found <- find_python()
  check_core_version(found)
  found
}

# The command line of one verb as its own child process, in one place: `found`'s interpreter,
# `-m quantformer`, the global flags before the verb (`--debug`; `--r-names`, the calling R
# function's arguments: r_names_arg()), the verb and its arguments, and the child's environment
# (child_env(), R/python.R). A list: `python`, `args`, `env`. The one-off process, the worker
# (R/worker.R) and the coding room's server (R/code_documents.R) all start from it.
cli_command <- function(found, verb, args = character(), debug = FALSE, r_names = NULL) {
  list(python = found$python,
       args = c("-m", "quantformer", if (isTRUE(debug)) "--debug",
                if (!is.null(r_names)) c("--r-names", r_names), verb, args),
       env = child_env())
}

# The value of `--r-names`: the calling function's argument names, comma-separated (NULL when
# none).
r_names_arg <- function(r_args) if (length(r_args)) paste(r_args, collapse = ",")

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

