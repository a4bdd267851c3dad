# call_verb(): the one round trip (input files, the verb, the output, clean-up) and the classed
# conditions of a failed verb.

# A fake "python" (a one-off process: no `serve` verb) that runs `body` for every verb.
fake_core <- function(body) {
  f <- tempfile("fake-core-")
  writeLines(c("#!/bin/sh", fake_handshake(), body), f)
  Sys.chmod(f, "0755")
  f
}

qf_files <- function() list.files(tempdir(), pattern = "^qf-(input|output)-")

test_that("a failed verb is a classed condition carrying its exit status and stderr", {
  skip_on_os("windows")
  # the core names R's arguments itself (R passes them with --r-names); R shows its message
  withr::local_options(quantformer.python = fake_core(c(
    "echo 'quantformer predict: error: `batch_size` must be positive' >&2", "exit 2")))
  err <- tryCatch(quantformer:::call_verb("predict", r_args = "batch_size"),
                  quantformer_input_error = function(e) e)
  expect_s3_class(err, c("quantformer_input_error", "quantformer_error", "error", "condition"),
                  exact = TRUE)
  expect_identical(err$status, 2L)
  expect_identical(err$verb, "predict")
  expect_equal(err$stderr, "quantformer predict: error: `batch_size` must be positive\n")
  # the message alone, as R's own errors read (the stderr keeps the core's prefix)
  expect_equal(conditionMessage(err), "`batch_size` must be positive")

  withr::local_options(quantformer.python = fake_core(c(
    "echo 'quantformer predict: internal error: OSError: disk full' >&2", "exit 1")))
  caught <- tryCatch(quantformer:::call_verb("predict"),
                     quantformer_input_error = function(e) "input error",
                     quantformer_error = function(e) e)
  expect_s3_class(caught, c("quantformer_error", "error", "condition"), exact = TRUE)
  expect_identical(caught$status, 1L)
  expect_match(caught$stderr, "OSError: disk full", fixed = TRUE)
})

test_that("argparse's pointer to --help is not shown to R users", {
  skip_on_os("windows")
  withr::local_options(quantformer.python = fake_core(c(
    paste("echo \"quantformer finetune: error: argument \\`max_length\\`: must be a whole",
          "number, not 0 (see 'quantformer finetune --help')\" >&2"), "exit 2")))
  err <- tryCatch(quantformer:::call_verb("finetune"), quantformer_input_error = function(e) e)
  expect_equal(conditionMessage(err), "argument `max_length`: must be a whole number, not 0")
})

test_that("call_verb() writes its inputs, passes their paths and removes them, even on error", {
  skip_on_os("windows")
  before <- qf_files()
  # $1..$4 = -m quantformer <verb> --labels-file; $5 its path
  withr::local_options(quantformer.python = fake_core(c("cat \"$5\"", "exit 0")))
  res <- quantformer:::call_verb("zeroshot-labels",
                                 inputs = list("--labels-file" = c("taxes, spending", "war"),
                                               "--unused" = NULL),
                                 verbose = FALSE)
  expect_equal(res$stdout, "taxes, spending\nwar\n")
  expect_null(res$output)
  expect_equal(qf_files(), before)
  withr::local_options(quantformer.python = fake_core("exit 2"))
  expect_error(quantformer:::call_verb("predict", inputs = list("--input" = data.frame(a = 1)),
                                       output = "rds", verbose = FALSE),
               class = "quantformer_input_error")
  expect_equal(qf_files(), before)
})

test_that("a folder that is not a model directory: the core's message, a classed error (#24)", {
  skip_if_no_python()
  empty <- withr::local_tempdir()
  err <- expect_error(load_finetune(empty), class = "quantformer_input_error")
  expect_match(conditionMessage(err), "not a quantformer model directory")
  expect_identical(err$status, 2L)
  expect_match(conditionMessage(err), "`output_dir`", fixed = TRUE)
})

test_that("every child starts from one command line: one-off, worker and coding room (#44)", {
  skip_on_os("windows")
  found <- list(python = "/opt/py/bin/python")
  cmd <- quantformer:::cli_command(found, "predict", c("--model", "m"), debug = TRUE,
                                   r_names = quantformer:::r_names_arg(c("object", "newdata")))
  expect_equal(cmd$python, "/opt/py/bin/python")
  expect_equal(cmd$args, c("-m", "quantformer", "--debug", "--r-names", "object,newdata",
                           "predict", "--model", "m"))
  expect_equal(cmd$env, quantformer:::child_env())
  expect_null(quantformer:::r_names_arg(NULL))
  # the coding room's server is started from it too: the same flags before the verb
  fake <- fake_core(c("echo 'http://127.0.0.1:1/?token=t'", "sleep 30"))
  withr::local_options(quantformer.python = fake)
  proc <- quantformer:::start_room(c("--project", "p.sqlite"), r_args = c("x", "project"))
  on.exit(proc$kill_tree(), add = TRUE)
  expect_equal(attr(proc, "url"), "http://127.0.0.1:1/?token=t")
  expect_equal(proc$get_cmdline()[-(1:2)],
               c("-m", "quantformer", "--r-names", "x,project", "code", "--project", "p.sqlite"))
})

test_that("a core whose verbs do not include serve runs each verb as its own process (#44)", {
  skip_on_os("windows")
  # the handshake imports the package only; whether there is a worker the CLI says
  withr::local_options(quantformer.python = fake_core(c(
    "if [ \"$3\" = info ]; then echo '{\"verbs\": {\"predict\": {\"quiet\": true}}}'; exit 0; fi",
    "echo \"args: $*\"", "exit 0")), quantformer.worker = TRUE)
  expect_false(quantformer:::worker_wanted(quantformer:::find_python()))
  res <- quantformer:::run_cli("predict", verbose = FALSE)
  expect_match(res$stdout, "args: -m quantformer predict --quiet", fixed = TRUE)
  expect_null(res$reply)
})
