# One persistent Python worker per R session (`python -m quantformer serve`).
#
# The shape follows callr's r_session: a processx child with explicit states (starting, idle,
# busy), requests as JSON lines on its stdin, replies on a connection of their own (the
# processx "poll connection", file descriptor 3 in the child) so that stdout and stderr stay
# free for the verbs' progress bars and warnings, which stream into R as for a one-off
# process. End of file on the reply connection is a crash, never a hang. A request is the
# same verb with the same flags as `python -m quantformer <verb>`; R keeps no other protocol.
#
# The worker ends with R: at end of file on its stdin (R closed it, or R died), by the
# parent-death signal it asks Linux for (QUANTFORMER_PARENT_PID, see child_env()), and by
# processx's cleanup when the process object is collected. An interrupt (Ctrl-C) during a
# request kills it; the next call starts a fresh one. Each R session starts its own.

# Use the worker for this Python? Option quantformer.worker (default TRUE); a core whose verbs
# (`info --verbs`, core_rules()) do not include `serve` (older than this package) runs every
# verb as its own process.
worker_wanted <- function(found) {
  isTRUE(getOption("quantformer.worker", TRUE)) && core_has_verb("serve")  # R/python.R
}

# The worker is tied to one Python and one environment: changing either (a test's
# withr::local_envvar(), Sys.setenv(CUDA_VISIBLE_DEVICES = ...)) starts a fresh one.
worker_key <- function(found) {
  env <- Sys.getenv()
  paste(c(found$python, paste(names(env), env, sep = "=")), collapse = "\n")
}

# The running worker for `found`, started when there is none (or it died, or the key changed).
worker_get <- function(found) {
  w <- .qf$worker
  key <- worker_key(found)
  if (!is.null(w) && w$proc$is_alive() && identical(w$key, key) && w$state == "idle")
    return(w)
  worker_stop_now()
  .qf$worker <- worker_start(found, key)
  .qf$worker
}

worker_start <- function(found, key) {
  cmd <- cli_command(found, "serve", c("--reply-fd", "3"))  # R/call.R
  proc <- processx::process$new(
    cmd$python, cmd$args, stdin = "|", stdout = "|", stderr = "|", poll_connection = TRUE,
    env = cmd$env, cleanup = TRUE, cleanup_tree = TRUE)
  w <- new.env(parent = emptyenv())
  w$proc <- proc
  w$key <- key
  w$python <- found$python
  w$state <- "starting"
  w$buffer <- ""
  w$next_id <- 1L
  w$last_reply <- NULL
  s <- new_stream(echo = FALSE)
  ready <- worker_wait(w, s, verb = "serve")
  if (!isTRUE(ready$ready)) worker_crash(w, "serve", s)
  w$state <- "idle"
  w
}

# Run one verb in the worker. Returns a list like processx::run()'s: status, stdout, stderr,
# plus the reply. An interrupt or an R error while waiting kills the worker (the request
# cannot be taken back); the next call starts a fresh one.
worker_run <- function(found, verb, args, debug, stream, r_names = NULL) {
  w <- worker_get(found)
  id <- w$next_id
  w$next_id <- id + 1L
  # no `r_names` field without names (a NULL list element would be sent as {})
  req <- jsonlite::toJSON(c(list(id = id, verb = verb, args = I(as.character(args)),
                                 cwd = normalizePath(getwd(), winslash = "/"), debug = debug),
                            if (!is.null(r_names)) list(r_names = r_names)),
                          auto_unbox = TRUE)
  w$state <- "busy"
  finished <- FALSE
  on.exit(if (!finished) worker_stop_now(grace_ms = 0), add = TRUE)
  w$proc$write_input(paste0(req, "\n"))
  reply <- worker_wait(w, stream, verb)
  finished <- TRUE
  w$state <- "idle"
  w$last_reply <- reply
  list(status = as.integer(reply$status), stdout = stream$stdout, stderr = stream$stderr,
       reply = reply)
}

# Wait for the next reply line, passing stdout and stderr to `stream` as they arrive.
worker_wait <- function(w, stream, verb) {
  con <- w$proc$get_poll_connection()
  repeat {
    reply <- worker_take_reply(w)
    if (!is.null(reply)) break
    ev <- processx::poll(list(w$proc), 500)[[1]]
    worker_drain(w, stream)
    if (ev[["process"]] == "ready")
      w$buffer <- paste0(w$buffer, processx::conn_read_chars(con))
    if (is.null(reply <- worker_take_reply(w)) &&
        (ev[["process"]] == "closed" || !processx::conn_is_incomplete(con) ||
         !w$proc$is_alive())) {
      worker_crash(w, verb, stream)
    }
    if (!is.null(reply)) break
  }
  worker_drain(w, stream)  # the verb flushed its output before it replied
  reply
}

worker_drain <- function(w, stream) {
  if (w$proc$is_incomplete_output()) stream_stdout(stream, w$proc$read_output())
  if (w$proc$is_incomplete_error()) stream_stderr(stream, w$proc$read_error())
}

# One complete JSON line from the reply buffer, or NULL.
worker_take_reply <- function(w) {
  nl <- regexpr("\n", w$buffer, fixed = TRUE)
  if (nl < 0) return(NULL)
  line <- substr(w$buffer, 1L, nl - 1L)
  w$buffer <- substring(w$buffer, nl + 1L)
  jsonlite::fromJSON(line, simplifyVector = FALSE)
}

# The worker died: collect what it said, forget it, and raise an R error of class
# `quantformer_worker_crash` that says so.
worker_crash <- function(w, verb, stream) {
  w$proc$wait(2000)
  if (w$proc$is_alive()) w$proc$kill()
  try(worker_drain(w, stream), silent = TRUE)
  status <- w$proc$get_exit_status()
  how <- if (is.null(status)) "for an unknown reason"
         else if (status < 0) paste0("(killed by signal ", -status, ")")
         else paste0("with exit status ", status)
  if (identical(.qf$worker, w)) .qf$worker <- NULL
  w$state <- "finished"
  last <- utils::tail(strsplit(stream$stderr, "\r?\n|\r")[[1]], 5)
  msg <- paste0("the quantformer Python worker (pid ", w$proc$get_pid(), ") stopped ", how,
                " while running `", verb, "`; the next call starts a fresh worker",
                if (length(last) && any(nzchar(last)))
                  paste0("\nits last messages:\n", paste(last, collapse = "\n")))
  stop(structure(class = c("quantformer_worker_crash", "quantformer_error", "error",
                           "condition"),
                 list(message = msg, call = NULL, status = status, stderr = stream$stderr)))
}

# Stop the worker: close its stdin (it exits at end of file), then kill it after `grace_ms`.
worker_stop_now <- function(grace_ms = 2000) {
  w <- .qf$worker
  .qf$worker <- NULL
  if (is.null(w)) return(invisible(FALSE))
  w$state <- "finished"
  if (w$proc$is_alive()) {
    try(close(w$proc$get_input_connection()), silent = TRUE)
    if (grace_ms > 0) w$proc$wait(grace_ms)
    if (w$proc$is_alive()) {
      w$proc$kill_tree()
      w$proc$wait(2000)
    }
  }
  invisible(TRUE)
}

#' Stop the quantformer Python worker
#'
#' The first call of a quantformer function starts one Python process (the worker,
#' `python -m quantformer serve`) that stays for the R session, so that PyTorch is imported
#' once and the last two fine-tuned models stay loaded: a second `predict()` costs the
#' inference, not the start-up. `quantformer_stop()` ends it (freeing its memory, GPU memory
#' included); the next call starts a fresh one. The worker also ends when R ends, and is
#' replaced when it crashes or a call is interrupted.
#'
#' Set `options(quantformer.worker = FALSE)` to run every call as its own Python process, as
#' `python -m quantformer <verb>` on the command line (slower: each call starts Python).
#' Either way the same CLI verbs with the same flags run. Each R session has its own worker.
#'
#' @return Invisibly, `TRUE` when a worker was running, else `FALSE`.
#' @examples
#' quantformer_stop()
#' @export
quantformer_stop <- function() {
  worker_stop_now()
}

# The pid of the running worker (NA when none) and its last reply: for tests and the bench.
worker_pid <- function() {
  w <- .qf$worker
  if (is.null(w) || !w$proc$is_alive()) NA_integer_ else w$proc$get_pid()
}

worker_last_reply <- function() {
  if (is.null(.qf$worker)) NULL else .qf$worker$last_reply
}
