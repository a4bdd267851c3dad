# The persistent Python worker (issue 11) and a child that dies with R (issue 17). Every test
# runs real child processes: the worker of this session, or a child R session with its own.

local_worker <- function(env = parent.frame()) {
  skip_if_no_python()
  skip_on_os("windows")
  withr::local_options(quantformer.worker = TRUE, .local_envir = env)
  withr::defer(quantformer_stop(), envir = env)
}

alive <- function(pid) {
  stat <- file.path("/proc", pid, "stat")
  if (!file.exists(stat)) return(tools::pskill(pid, 0L))
  state <- tryCatch(strsplit(sub(".*\\) ", "", readLines(stat, warn = FALSE)), " ")[[1]][1],
                    error = function(e) "gone")
  !state %in% c("Z", "X", "gone")
}

# TRUE when `pid` still runs after `seconds` (a busy machine may take a few to end it)
wait_gone <- function(pid, seconds = 30) {
  deadline <- Sys.time() + seconds
  while (alive(pid) && Sys.time() < deadline) Sys.sleep(0.25)
  alive(pid)
}

cmdline <- function(pid) {
  raw <- tryCatch(readBin(file.path("/proc", pid, "cmdline"), "raw", 65536),
                  error = function(e) raw())
  raw[raw == as.raw(0)] <- as.raw(32)
  rawToChar(raw)
}

# A child R session running `code` with this package; stdout and stderr piped.
child_r <- function(code) {
  processx::process$new(file.path(R.home("bin"), "Rscript"), c("-e", code),
                        stdout = "|", stderr = "|",
                        env = c("current", R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep)))
}

wait_for_file <- function(path, seconds = 120) {
  deadline <- Sys.time() + seconds
  while ((!file.exists(path) || !length(readLines(path, warn = FALSE))) && Sys.time() < deadline)
    Sys.sleep(0.2)
  expect_true(file.exists(path))
  readLines(path, warn = FALSE)
}

finetune_args <- function(out) {
  f <- tempfile(fileext = ".rds")
  saveRDS(sotu_sample(), f)
  c("--train", f, "--label-col", "party", "--out", out, "--epochs", "3")
}

# sh code: wait (120 s at most) until process %d has used 1 s more CPU time than now (the
# request it got is running), then run `%s %s`; sprintf(busy_then, pid, pid, command, arg)
busy_then <- paste(
  "ticks() { awk '{print $14 + $15}' /proc/$1/stat 2>/dev/null || echo 0; };",
  "t0=$(ticks %d); i=0;",
  "while [ $i -lt 600 ] && [ $(( $(ticks %d) - t0 )) -lt 100 ]; do sleep 0.2; i=$((i+1)); done;",
  "%s %s")

skip_unless_installed <- function() {
  if (!length(find.package("quantformer", lib.loc = .libPaths(), quiet = TRUE)))
    skip("quantformer is not installed (tests run from the source tree)")
}

test_that("the worker is reused: same pid, the model stays loaded, same results as one-off (#11)", {
  local_worker()
  s <- sotu_sample()
  tr <- s[c(which(s$party == "Democratic")[1:12], which(s$party == "Republican")[1:12]), ]
  fit <- textmodel_finetune(tr, y = "party", epochs = 1, max_length = 16,
                            output_dir = file.path(withr::local_tempdir(), "model"))
  pid <- quantformer:::worker_pid()
  expect_false(is.na(pid))
  docs <- sotu_sample()$text[101:110]
  p1 <- predict(fit, docs, type = "probability")
  r1 <- quantformer:::worker_last_reply()
  p2 <- predict(fit, docs, type = "probability")
  r2 <- quantformer:::worker_last_reply()
  expect_equal(quantformer:::worker_pid(), pid)          # one process for all calls
  expect_equal(r2$models_loaded, r1$models_loaded)       # not read from disk again
  expect_equal(r2$cache_hits, r1$cache_hits + 1L)
  expect_equal(p2, p1)
  # every verb also works as a one-off process, with the same result
  withr::with_options(list(quantformer.worker = FALSE),
                      p0 <- predict(fit, docs, type = "probability"))
  expect_equal(p0, p1, tolerance = 1e-6)
  # relative paths follow R's working directory, as for a one-off process
  dir <- withr::local_tempdir()
  file.symlink(fit$model_dir, file.path(dir, "my-model"))
  sw <- withr::with_dir(dir, textstat_subwords(c(a = "One text."), model = "my-model"))
  expect_equal(sw, textstat_subwords(c(a = "One text."), model = fit))
  expect_equal(quantformer:::worker_pid(), pid)
  # progress streams live and the core's warnings become R warnings, as from a one-off process
  msgs <- capture.output(
    expect_warning(predict(fit, c(a = "Some text.", b = ""), verbose = TRUE), "empty"),
    type = "message")
  expect_true(any(grepl("predicting", msgs)))
  # errors arrive as from the CLI, and the worker stays
  expect_error(textstat_subwords("A text.", model = file.path(dir, "no-such-model")),
               "no-such-model", class = "quantformer_input_error")
  expect_equal(quantformer:::worker_pid(), pid)
  expect_true(quantformer_stop())
  expect_false(wait_gone(pid, 10))
  expect_true(is.na(quantformer:::worker_pid()))
  expect_false(quantformer_stop())
})

test_that("a worker killed mid-call gives an R error that says so; the next call starts a fresh one (#11)", {
  local_worker()
  quantformer:::run_cli("info", "--json")
  pid <- quantformer:::worker_pid()
  # kill it once the finetune request is running: the worker has used 1 s more CPU time
  killer <- processx::process$new("sh", c("-c", sprintf(busy_then, pid, pid, "kill -9", pid)))
  on.exit(killer$kill(), add = TRUE)
  err <- expect_error(quantformer:::run_cli("finetune", finetune_args(tempfile())),
                      class = "quantformer_worker_crash")
  expect_match(conditionMessage(err), sprintf(
    "worker \\(pid %d\\) stopped \\(killed by signal 9\\) while running `finetune`; the next call starts a fresh worker", pid))
  expect_false(file.exists(file.path("/proc", pid)))   # ended and reaped: no zombie
  res <- quantformer:::run_cli("info", "--json")
  expect_equal(jsonlite::fromJSON(res$stdout)$default_model, "all-MiniLM-L6-v2")
  expect_false(quantformer:::worker_pid() %in% c(NA, pid))
})

test_that("an interrupt cancels the request, R goes on, the next call has a fresh worker (#11)", {
  skip_if_no_python()
  skip_on_os("windows")
  skip_unless_installed()
  pidfile <- tempfile()
  code <- sprintf(paste0(
    "options(quantformer.verbose = FALSE); quantformer:::run_cli('info', '--json'); ",
    "pid <- quantformer:::worker_pid(); writeLines(as.character(pid), '%s'); ",
    "tryCatch(quantformer:::run_cli('finetune', c(%s)), interrupt = function(e) cat('interrupted')); ",
    "cat(' and R goes on;', is.na(quantformer:::worker_pid())); ",
    "quantformer:::run_cli('info', '--json'); cat(';', quantformer:::worker_pid() != pid)"),
    pidfile, paste0("'", finetune_args(tempfile()), "'", collapse = ", "))
  r <- child_r(code)
  on.exit(r$kill(), add = TRUE)
  pid <- as.integer(wait_for_file(pidfile))
  expect_true(alive(pid))
  busy <- processx::run("sh", c("-c", sprintf(busy_then, pid, pid, "echo", "running")))
  expect_equal(trimws(busy$stdout), "running")   # the finetune request is running
  r$interrupt()
  r$wait(120000)
  expect_equal(r$read_all_output(), "interrupted and R goes on; TRUE; TRUE")
  expect_false(alive(pid))
})

test_that("the worker ends with R: at exit, and when R is killed by SIGTERM (#11, #17)", {
  skip_if_no_python()
  skip_on_os("windows")
  skip_unless_installed()
  for (how in c("exit", "sigterm")) {
    pidfile <- tempfile()
    code <- sprintf(paste0(
      "quantformer:::run_cli('info', '--json', verbose = FALSE); ",
      "writeLines(as.character(quantformer:::worker_pid()), '%s'); ",
      if (how == "sigterm") "Sys.sleep(300)" else "invisible()"), pidfile)
    r <- child_r(code)
    pid <- as.integer(wait_for_file(pidfile))
    if (how == "sigterm") {
      expect_true(alive(pid))
      # two R sessions never share a worker: this one is the child R's own
      expect_false(identical(pid, quantformer:::worker_pid()))
      expect_equal(as.integer(strsplit(readLines(file.path("/proc", pid, "stat")), " ")[[1]][4]),
                   r$get_pid())
      r$signal(tools::SIGTERM)
    }
    r$wait(60000)
    expect_false(wait_gone(pid), label = paste("worker alive after R", how))
    r$kill()
  }
})

test_that("a one-off Python child dies when R is killed by SIGTERM (#17)", {
  skip_if_no_python()
  skip_on_os("windows")
  skip_unless_installed()
  py <- quantformer:::find_python()$python
  fifo <- tempfile("fifo-")
  if (system2("mkfifo", fifo) != 0) skip("no mkfifo")
  pidfile <- tempfile()
  # `python -m quantformer serve` with a stdin that never ends (a FIFO it holds open itself):
  # only the parent-death signal can end it once R is gone
  wrapper <- tempfile("python-")
  writeLines(c("#!/bin/sh", sprintf("if [ \"$1\" = \"-c\" ]; then exec '%s' \"$@\"; fi", py),
               sprintf("echo $$ > '%s'", pidfile),
               sprintf("exec '%s' \"$@\" 0<>'%s'", py, fifo)), wrapper)
  Sys.chmod(wrapper, "0755")
  code <- sprintf(paste0("options(quantformer.python = '%s', quantformer.worker = FALSE); ",
                         "quantformer:::run_cli('serve')"), wrapper)
  r <- child_r(code)
  on.exit(r$kill(), add = TRUE)
  pid <- as.integer(wait_for_file(pidfile))
  # python runs (a SIGTERM before its prctl call would end it there too: R's pid is gone)
  deadline <- Sys.time() + 60
  while (!startsWith(cmdline(pid), py) && Sys.time() < deadline) Sys.sleep(0.2)
  Sys.sleep(1)
  expect_true(alive(pid))
  r$signal(tools::SIGTERM)
  r$wait(30000)
  still <- wait_gone(pid)
  if (still) tools::pskill(pid, tools::SIGKILL)
  expect_false(still)
})
