venv_python_path <- function() {
  py <- Sys.getenv("QUANTFORMER_PYTHON", "")
  if (!nzchar(py) || !file.exists(py)) skip("QUANTFORMER_PYTHON is not set to a Python with quantformer")
  py
}

# an environment where no candidate works: bad option, no env vars, no venv, empty PATH
local_no_python <- function(env = parent.frame()) {
  empty <- withr::local_tempdir(.local_envir = env)
  withr::local_options(quantformer.python = "/nonexistent/bin/python", .local_envir = env)
  withr::local_envvar(QUANTFORMER_PYTHON = "", RETICULATE_PYTHON = "",
                      QUANTFORMER_VENV = file.path(empty, "no-venv"), PATH = empty,
                      .local_envir = env)
}

test_that("discovery follows the documented order and reports where Python came from", {
  py <- venv_python_path()
  withr::local_envvar(QUANTFORMER_VENV = file.path(tempdir(), "no-venv"), RETICULATE_PYTHON = "")
  # option first
  withr::with_options(list(quantformer.python = py), {
    expect_equal(quantformer:::find_python()$source, "option quantformer.python")
  })
  # a bad option falls through to QUANTFORMER_PYTHON
  withr::with_options(list(quantformer.python = "/nonexistent/python"), {
    f <- quantformer:::find_python()
    expect_equal(f$source, "environment variable QUANTFORMER_PYTHON")
    expect_equal(f$python, py)
  })
  withr::local_options(quantformer.python = NULL)
  # then RETICULATE_PYTHON, then the virtualenv of quantformer_install()
  withr::with_envvar(c(QUANTFORMER_PYTHON = "", RETICULATE_PYTHON = py), {
    expect_equal(quantformer:::find_python()$source, "environment variable RETICULATE_PYTHON")
  })
  withr::with_envvar(c(QUANTFORMER_PYTHON = "", QUANTFORMER_VENV = dirname(dirname(py))), {
    f <- quantformer:::find_python()
    expect_equal(f$source, "virtualenv made by quantformer_install()")
  })
  # candidates are listed in order, empty ones dropped
  withr::with_options(list(quantformer.python = "/a/python"),
    withr::with_envvar(c(QUANTFORMER_PYTHON = "/b/python", RETICULATE_PYTHON = ""), {
      paths <- vapply(quantformer:::python_candidates(), `[[`, "", "path")
      expect_equal(paths[1:2], c("/a/python", "/b/python"))
      expect_false(any(paths == ""))
    }))
})

test_that("Python not found: the error lists what was tried and what to run", {
  local_no_python()
  expect_false(quantformer_available())
  err <- expect_error(textstat_subwords("A text."), "cannot find a Python")
  expect_match(conditionMessage(err), "/nonexistent/bin/python (option quantformer.python): file not found",
               fixed = TRUE)
  expect_match(conditionMessage(err), "quantformer::quantformer_install()", fixed = TRUE)
  expect_match(conditionMessage(err), "options(quantformer.python", fixed = TRUE)
})

test_that("a Python without quantformer is rejected with the import error", {
  py3 <- Sys.which("python3")[[1]]
  if (!nzchar(py3)) skip("no python3 on the PATH")
  withr::local_envvar(PYTHONPATH = NA)  # the tests' own PYTHONPATH may point at the core
  res <- processx::run(py3, c("-c", "import quantformer"), error_on_status = FALSE)
  if (res$status == 0) skip("the python3 on the PATH imports quantformer")
  expect_match(quantformer:::python_imports_quantformer(py3), "No module named 'quantformer'")
})

test_that("quantformer_install() installs torch first, then the bundled core with all extras (#11)", {
  withr::local_envvar(TORCH_INDEX_URL = NA)
  env <- file.path(tempdir(), "qf-venv")
  cmds <- quantformer_install(envdir = env, python = "/usr/bin/python3", dry_run = TRUE)
  py <- file.path(env, "bin", "python")
  core <- normalizePath(system.file("pycore", package = "quantformer"))
  expect_true(file.exists(file.path(core, "pyproject.toml")))
  expect_true(file.exists(file.path(core, "python", "quantformer", "cli", "serve.py")))
  expect_equal(cmds[[1]], c("/usr/bin/python3", "-m", "venv", env))
  expect_equal(cmds[[3]], c(py, "-m", "pip", "install", "torch==2.13.0", "--index-url",
                            "https://download.pytorch.org/whl/cpu"))
  expect_equal(cmds[[4]], c(py, "-m", "pip", "install", paste0(core, "[all]")))
  # a local checkout, the CUDA build, chosen extras
  src <- withr::local_tempdir()
  file.create(file.path(src, "pyproject.toml"))
  cmds <- quantformer_install(path = src, envdir = env, cuda = TRUE, extras = "onnx",
                              dry_run = TRUE)
  expect_equal(cmds[[3]], c(py, "-m", "pip", "install", "torch==2.13.0"))
  expect_equal(cmds[[4]], c(py, "-m", "pip", "install", paste0(normalizePath(src), "[onnx]")))
  # TORCH_INDEX_URL as in scripts/setup.sh: empty = pip's own configuration
  withr::with_envvar(c(TORCH_INDEX_URL = ""), {
    cmds <- quantformer_install(envdir = env, extras = character(), dry_run = TRUE)
    expect_equal(cmds[[3]], c(py, "-m", "pip", "install", "torch==2.13.0"))
    expect_equal(cmds[[4]], c(py, "-m", "pip", "install", core))
  })
  # uv when it is on the PATH
  cmds <- quantformer:::install_commands(core, env, "python3", "2.13.0", TRUE, "all", "/x/uv")
  expect_equal(cmds[[1]], c("/x/uv", "venv", "--allow-existing", "--python", "python3", env))
  expect_equal(cmds[[3]], c("/x/uv", "pip", "install", "--python", py, paste0(core, "[all]")))
  expect_error(quantformer_install(path = tempfile(), dry_run = TRUE), "is not a folder")
  expect_error(quantformer_install(path = withr::local_tempdir(), dry_run = TRUE),
               "has no pyproject.toml")
  # issue 36: a `python =` that does not run is an input error like every other, nothing made
  src <- withr::local_tempdir()
  writeLines("[project]", file.path(src, "pyproject.toml"))
  env <- file.path(withr::local_tempdir(), "env")
  no_py <- file.path(withr::local_tempdir(), "python3")
  writeLines("#!/bin/sh\nexit 3", no_py)
  Sys.chmod(no_py, "0755")
  expect_error(quantformer_install(path = src, envdir = env, python = no_py),
               "does not run.*pass `python =`", class = "quantformer_input_error")
  expect_error(quantformer_install(path = src, envdir = env, python = ""),
               "no Python found", class = "quantformer_input_error")
  expect_false(dir.exists(env))
})

test_that("quantformer_install() installs into the absolute path it returns (#27)", {
  dir <- withr::local_tempdir()
  withr::local_dir(dir)
  cmds <- quantformer_install(envdir = "qf-rel-venv", python = "/usr/bin/python3",
                              dry_run = TRUE)
  env <- file.path(getwd(), "qf-rel-venv")
  expect_identical(attr(cmds, "envdir"), env)
  expect_equal(cmds[[1]], c("/usr/bin/python3", "-m", "venv", env))
  expect_identical(cmds[[3]][1], file.path(env, "bin", "python"))
})

test_that("?textstat_prevalence keeps its text after a percent sign (#27)", {
  rd <- tools::Rd_db("quantformer")[["textstat_prevalence.Rd"]]
  if (is.null(rd)) rd <- tools::parse_Rd(test_path("..", "..", "man", "textstat_prevalence.Rd"))
  txt <- paste(utils::capture.output(tools::Rd2txt(rd, options = list(underline_titles = FALSE))),
               collapse = " ")
  expect_match(gsub("\\s+", " ", txt), "biased even at 80-90% accuracy and their textbook")
})

test_that("quantformer_install() refuses what it cannot use, saying what to do (#11)", {
  not_venv <- withr::local_tempdir()
  writeLines("x", file.path(not_venv, "notes.txt"))
  expect_error(quantformer_install(envdir = not_venv, dry_run = TRUE),
               "is not a Python virtual environment")
  expect_error(quantformer_install(envdir = tempfile(), python = ""), "no Python found")
  old <- tempfile("python3.8-")
  writeLines(c("#!/bin/sh", "echo 3.8"), old)
  Sys.chmod(old, "0755")
  expect_error(quantformer_install(envdir = tempfile(), python = old),
               "is Python 3.8; the quantformer core needs Python 3.10 or newer")
  novenv <- tempfile("python-novenv-")
  writeLines(c("#!/bin/sh", "echo \"ModuleNotFoundError: No module named 'venv'\" >&2", "exit 1"),
             novenv)
  Sys.chmod(novenv, "0755")
  expect_error(quantformer_install(envdir = tempfile(), python = novenv), "apt install python3-venv")
})

test_that("a half-built environment is never used, and says how to finish it (#11)", {
  py <- venv_python_path()
  env <- withr::local_tempdir()
  dir.create(file.path(env, "bin"))
  writeLines(c("#!/bin/sh", sprintf("exec '%s' \"$@\"", py)), file.path(env, "bin", "python"))
  Sys.chmod(file.path(env, "bin", "python"), "0755")
  expect_true(is.list(quantformer:::python_imports_quantformer(file.path(env, "bin", "python"))))
  writeLines("now", file.path(env, ".quantformer-installing"))
  expect_match(quantformer:::python_imports_quantformer(file.path(env, "bin", "python")),
               "half-built.*quantformer_install\\(\\) again")
})

test_that("QUANTFORMER_PYTHON naming a program that is not Python says so (#17)", {
  true <- Sys.which("true")[[1]]
  if (!nzchar(true)) skip("no `true` program")
  local_no_python()
  withr::local_envvar(QUANTFORMER_PYTHON = true)
  err <- expect_error(textstat_subwords("A text."), "cannot find a Python")
  expect_match(conditionMessage(err), paste0(true, " (environment variable QUANTFORMER_PYTHON): ",
                                             "it ran but did not report a quantformer version: ",
                                             "it is not a Python that imports the quantformer ",
                                             "package"), fixed = TRUE)
  expect_false(grepl("cannot open", conditionMessage(err)))
})

test_that("a core of another version than the R package is named once, with the fix (#11)", {
  fake <- tempfile("old-core-")
  writeLines(c("#!/bin/sh", "if [ \"$1\" = \"-c\" ]; then echo 'quantformer 0.0.9 -'; exit 0; fi",
               "echo '{}'"), fake)
  Sys.chmod(fake, "0755")
  withr::local_options(quantformer.python = fake)
  expect_warning(quantformer:::run_cli("info"),
                 "is version 0.0.9 but this R package is version .*quantformer_install\\(\\)")
  expect_silent(quantformer:::run_cli("info"))  # once per Python
})

test_that("quantformer_config() reports the Python, versions and the default model", {
  skip_if_no_python()
  cfg <- quantformer_config()
  expect_s3_class(cfg, "quantformer_config")
  expect_true(file.exists(cfg$python))
  expect_match(cfg$quantformer, "^[0-9]+\\.[0-9]+")
  expect_equal(cfg$default_model, "all-MiniLM-L6-v2")
  expect_true(dir.exists(cfg$default_model_path))
  expect_output(print(cfg), "default_model_path")
  # one row per name: the interpreter's path is `python`, the core's Python version
  # `python_version` (issue 27, point 4)
  expect_false(anyDuplicated(names(cfg)) > 0)
  expect_match(cfg$python_version, "^3\\.[0-9]+\\.[0-9]+")
})

test_that("quantformer_config() before the core is installed says what is missing (#27)", {
  local_no_python()
  cfg <- expect_no_error(quantformer_config())
  expect_identical(cfg$quantformer, "not installed")
  expect_true(is.na(cfg$python))
  expect_match(cfg$missing, "cannot find a Python with the quantformer package installed")
  out <- capture.output(print(cfg))
  expect_match(out, "^  quantformer +not installed$", all = FALSE)
  expect_match(out, "^missing: quantformer cannot find a Python", all = FALSE)
  expect_match(paste(out, collapse = "\n"), "quantformer_install()", fixed = TRUE)
})

test_that("the CLI failing mid-run gives an R error with its message; R carries on", {
  skip_if_no_python()
  fit <- structure(list(model_dir = tempdir(), levels = c("a", "b"), x = NULL),
                   class = c("textmodel_finetune", "textmodel", "list"))
  file.create(file.path(tempdir(), "quantformer.json"))
  on.exit(unlink(file.path(tempdir(), "quantformer.json")), add = TRUE)
  withr::with_options(list(quantformer.python = fake_python()), {
    err <- expect_error(predict(fit, newdata = c("one text", "another")),
                        "quantformer predict: internal error: RuntimeError: CUDA out of memory")
    expect_match(conditionMessage(err), "exit status 1")
    expect_match(conditionMessage(err), "options(quantformer.debug = TRUE)", fixed = TRUE)
  })
  # a real user error from the real core: exit status 2, its one-line message, no traceback
  err <- expect_error(textstat_subwords("A text.", model = file.path(tempdir(), "no-such-model")),
                      "no-such-model", class = "quantformer_input_error")
  expect_false(grepl("quantformer tokenize: error:", conditionMessage(err), fixed = TRUE))
  expect_false(grepl("Traceback", conditionMessage(err)))
  # ... and with options(quantformer.debug = TRUE) the traceback comes along
  withr::with_options(list(quantformer.debug = TRUE), {
    err <- expect_error(textstat_subwords("A text.",
                                          model = file.path(tempdir(), "no-such-model")),
                        "Traceback")
  })
  # the session goes on: the next call works
  expect_equal(textstat_subwords(c(a = "Still working."))$document, "a")
})

test_that("warnings of the core become R warnings and progress is streamed", {
  skip_if_no_python()
  f <- tempfile()
  writeLines(c("#!/bin/sh", fake_handshake(),
               "echo 'step 1/2' >&2", "echo 'quantformer: warning: 2 documents are empty' >&2",
               "echo 'done'", "exit 0"), f)
  Sys.chmod(f, "0755")
  withr::local_options(quantformer.python = f, quantformer.verbose = TRUE)
  out <- capture.output(
    msgs <- capture.output(
      expect_warning(res <- quantformer:::run_cli("info"), "^2 documents are empty$"),
      type = "message"))
  expect_equal(out, "done")
  expect_equal(msgs, "step 1/2")
  expect_equal(res$warnings, "2 documents are empty")
})

test_that("verbose = FALSE shows only warnings; lines naming R's temporary files never show", {
  skip_if_no_python()
  f <- tempfile()
  tmp_line <- sprintf("wrote predictions for 2 documents to %s/qf-out-1.rds",
                      normalizePath(tempdir(), winslash = "/"))
  # the core's rules (`info --verbs --json`): predict takes --quiet
  writeLines(c("#!/bin/sh", fake_handshake(),
               paste("if [ \"$3\" = info ]; then",
                     "echo '{\"verbs\": {\"predict\": {\"quiet\": true}}}'; exit 0; fi"),
               "echo \"args: $*\"", "echo 'predicting 50%' >&2",
               "echo 'quantformer: warning: 1 document is empty' >&2",
               sprintf("echo '%s'", tmp_line), "exit 0"), f)
  Sys.chmod(f, "0755")
  withr::local_options(quantformer.python = f)
  # verbose = TRUE: progress and messages shown, the temporary-file line is not
  out <- capture.output(msgs <- capture.output(
    expect_warning(quantformer:::run_cli("predict", "--x", verbose = TRUE), "^1 document"),
    type = "message"))
  expect_equal(out, "args: -m quantformer predict --x")
  expect_equal(msgs, "predicting 50%")
  # verbose = FALSE: the verb gets --quiet, nothing is printed, the warning still comes
  out <- capture.output(msgs <- capture.output(
    expect_warning(res <- quantformer:::run_cli("predict", "--x", verbose = FALSE),
                   "^1 document"),
    type = "message"))
  expect_equal(c(out, msgs), character())
  expect_match(res$stdout, "args: -m quantformer predict --quiet --x", fixed = TRUE)
  # the option sets the default of every verbose argument
  withr::local_options(quantformer.verbose = FALSE)
  expect_equal(capture.output(suppressWarnings(quantformer:::run_cli("predict"))), character())
  expect_identical(formals(textmodel_finetune)$verbose,
                   quote(getOption("quantformer.verbose", TRUE)))
})

test_that("R passes its arguments to the core, whose errors name them instead of flags", {
  # the one table of names is the core's (quantformer/_core/parameters.py): R sends the calling
  # function's arguments with --r-names before the verb
  skip_if_no_python()
  fake <- tempfile()
  writeLines(c("#!/bin/sh", fake_handshake(), "echo \"args: $*\" >&2",
               "echo 'quantformer predict: error: `batch_size` must be positive' >&2", "exit 2"),
             fake)
  Sys.chmod(fake, "0755")
  withr::local_options(quantformer.python = fake, quantformer.worker = FALSE)
  err <- expect_error(quantformer:::run_cli("predict", "--x", r_args = c("object", "batch_size")),
                      "`batch_size` must be positive", fixed = TRUE)
  expect_match(err$stderr, "args: -m quantformer --r-names object,batch_size predict", fixed = TRUE)
  writeLines(c("#!/bin/sh", fake_handshake(),
               "echo 'quantformer predict: internal error: OSError: disk (run with --debug for the traceback)' >&2",
               "exit 1"), fake)
  err <- expect_error(quantformer:::run_cli("predict"))
  expect_false(grepl("--debug", conditionMessage(err), fixed = TRUE))
  expect_match(conditionMessage(err), "options(quantformer.debug = TRUE)", fixed = TRUE)
})

test_that("the real core names the R arguments of the calling function", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  out <- file.path(dir, "model")
  train <- file.path(dir, "train.csv")
  writeLines(c("text,label", "tax cuts,econ", "war,security", "jobs,econ", "army,security"),
             train)
  # an argparse check and a library check, each shown with R's argument names
  expect_error(quantformer:::run_cli("finetune", c("--train", train, "--out", out,
                                                   "--max-length", "0"),
                                     r_args = c("x", "y", "max_length", "output_dir")),
               "argument `max_length`: must be a whole number of tokens of at least 8",
               fixed = TRUE)
  expect_error(quantformer:::run_cli("finetune", c("--train", train, "--out", out,
                                                   "--tune-thresholds"),
                                     r_args = c("x", "y", "output_dir", "...")),
               "`tune_thresholds = TRUE` is for", fixed = TRUE)
})

test_that("the Python core imports under reticulate", {
  skip_if_not_installed("reticulate")
  py <- venv_python_path()
  # in a fresh R process, so this session does not bind reticulate to a Python
  code <- sprintf(paste0("reticulate::use_python('%s', required = TRUE); ",
                         "qf <- reticulate::import('quantformer'); cat(qf$`__version__`); ",
                         "cat('', reticulate::import('quantformer.models.hub')$DEFAULT_MODEL_NAME)"), py)
  rscript <- file.path(R.home("bin"), "Rscript")
  res <- processx::run(rscript, c("-e", code), error_on_status = FALSE,
                       env = c("current", RETICULATE_PYTHON = py))
  expect_equal(res$status, 0L, info = res$stderr)
  expect_equal(res$stdout, paste(quantformer_config()$quantformer, "all-MiniLM-L6-v2"))
})

test_that("interrupting R kills the Python process", {
  skip_on_os("windows")
  if (!length(find.package("quantformer", lib.loc = .libPaths(), quiet = TRUE)))
    skip("quantformer is not installed (tests run from the source tree)")
  pidfile <- tempfile()
  fake <- tempfile("slow-python-")
  writeLines(c("#!/bin/sh", fake_handshake(),
               sprintf("echo $$ > '%s'", pidfile), "exec sleep 120"), fake)
  Sys.chmod(fake, "0755")
  code <- sprintf(paste0("options(quantformer.python = '%s'); ",
                         "r <- tryCatch(quantformer:::run_cli('predict'), ",
                         "interrupt = function(e) cat('interrupted')); cat(' and R goes on')"),
                  fake)
  r <- processx::process$new(file.path(R.home("bin"), "Rscript"), c("-e", code),
                             stdout = "|", stderr = "|",
                             env = c("current", R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep)))
  on.exit(r$kill(), add = TRUE)
  deadline <- Sys.time() + 60
  while (!file.exists(pidfile) || !length(readLines(pidfile, warn = FALSE))) {
    if (Sys.time() > deadline) break
    Sys.sleep(0.2)
  }
  expect_true(file.exists(pidfile))
  pid <- as.integer(readLines(pidfile))
  expect_true(tools::pskill(pid, 0L))        # the child runs
  Sys.sleep(0.5)
  r$interrupt()
  r$wait(30000)
  expect_equal(r$read_all_output(), "interrupted and R goes on")
  Sys.sleep(0.5)
  expect_false(tools::pskill(pid, 0L))       # ... and is gone
})

test_that("#11: an install into another envdir is used in this session and says how later", {
  withr::local_envvar(QUANTFORMER_VENV = NA)
  d <- tempfile("qf-envdir-")
  expect_message(quantformer:::remember_envdir(d), "set QUANTFORMER_VENV=.*~/.Renviron")
  expect_equal(Sys.getenv("QUANTFORMER_VENV"), d)
  expect_equal(quantformer:::quantformer_venv(), d)
  # the default folder needs nothing
  withr::local_envvar(QUANTFORMER_VENV = NA)
  expect_silent(quantformer:::remember_envdir(quantformer:::quantformer_venv()))
})

test_that("core messages lose the names of R's temporary files; install names TORCH_INDEX_URL", {
  tmp <- normalizePath(tempdir(), winslash = "/")
  expect_equal(quantformer:::without_temp_files(c(
    sprintf("the labels of `bow_data` '%s/qf-input-ab12.rds' are not the model's classes", tmp),
    sprintf("the text column 'text' of '%s/qf-input-1.rds' holds float64 values", tmp),
    "`x` '/data/qf-mine.rds' has 3 documents",
    sprintf("`substitutions` '%s/qf-input-9f.csv' needs columns from and to", tmp),
    sprintf("cannot read `substitutions` '%s/qf-input-9f.csv': bad", tmp))),
    c("the labels of `bow_data` are not the model's classes",
      "the text column 'text' holds float64 values",
      "`x` '/data/qf-mine.rds' has 3 documents",
      # issue 36: a data frame given as a CSV input is the argument's data frame
      "the `substitutions` data frame needs columns from and to",
      "cannot read the `substitutions` data frame: bad"))
  # a torch step that cannot reach its index says how to use pip's own configuration
  skip_if_no_python()
  cmd <- c(quantformer:::find_python()$python, "-c", "import sys; print('ERROR: No matching distribution found'); sys.exit(1)",
           "--index-url", "https://download.pytorch.org/whl/cpu")
  err <- expect_error(suppressMessages(capture.output(
    quantformer:::run_install_step(cmd, tempfile(), marked = TRUE))))
  expect_match(conditionMessage(err), "Sys.setenv(TORCH_INDEX_URL = \"\")", fixed = TRUE)
  expect_match(conditionMessage(err), "reads torch from https://download.pytorch.org/whl/cpu only",
               fixed = TRUE)
})
