# One real fine-tune of the default model (all-MiniLM-L6-v2) on 40 short SOTU paragraphs,
# 1 epoch, max_length 64, validated on 6 others, made with verbose = FALSE, shared by the
# tests of this file.

train_docs <- function() {
  s <- sotu_sample()
  tr <- s[c(1:20, 181:200), ]
  tr$party[c(3, 25)] <- NA          # uncoded documents: not used for training
  tr
}

# predictions of sotu_sample()[101:106, ], computed once
ref <- new.env()
reference_prediction <- function() {
  if (is.null(ref$p)) ref$p <- predict(fitted_model(), newdata = sotu_sample()[101:106, ])
  ref$p
}

fitted_model <- local({
  fit <- NULL
  function() {
    if (is.null(fit)) {
      tr <- train_docs()
      y <- factor(tr$party, levels = c("Republican", "Democratic"))
      valid <- sotu_sample()[c(21:23, 178:180), ]
      fit <<- textmodel_finetune(tr, y = y, epochs = 1, max_length = 64,
                                 validation = list(x = valid, y = valid$party),
                                 output_dir = tempfile("qf-test-model-"), verbose = FALSE)
    }
    fit
  }
})

test_that("textmodel_finetune fits the default model and keeps the factor's level order", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  expect_s3_class(fit, c("textmodel_finetune", "textmodel", "list"))
  expect_identical(class(fit), c("textmodel_finetune", "textmodel", "list"))
  expect_equal(fit$levels, c("Republican", "Democratic"))
  expect_true(file.exists(file.path(fit$model_dir, "quantformer.json")))
  expect_equal(fit$summary$n_train, 38)
  expect_equal(fit$summary$n_missing_label, 2)
  expect_equal(fit$summary$hyperparameters$epochs, 1)
  expect_equal(fit$summary$hyperparameters$max_length, 64)
  expect_equal(fit$x$doc_id, train_docs()$doc_id)
  expect_output(print(fit), "Classes:   Republican, Democratic")
  s <- summary(fit)
  expect_equal(unname(s$label_counts), c(19, 19))
  expect_equal(names(s$label_counts), c("Republican", "Democratic"))
  expect_output(print(s), "Training documents: 38 \\(2 without a label left out\\)")
  expect_output(print(s), "truncation: +head_tail")
})

test_that("predict gives a factor named by docnames, or a probability matrix", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  s <- sotu_sample()
  new <- s[101:106, ]
  p <- reference_prediction()
  expect_s3_class(p, "factor")
  expect_equal(levels(p), c("Republican", "Democratic"))
  expect_equal(names(p), new$doc_id)
  expect_false(anyNA(p))
  pr <- predict(fit, newdata = new, type = "probability")
  expect_true(is.matrix(pr))
  expect_equal(dimnames(pr), list(new$doc_id, c("Republican", "Democratic")))
  expect_equal(unname(rowSums(pr)), rep(1, 6), tolerance = 1e-5)
  # the class is the most probable one
  expect_equal(unname(as.character(p)), unname(colnames(pr)[max.col(pr, "first")]))
  # newdata = NULL: every training document, the uncoded ones too
  p0 <- predict(fit)
  expect_equal(names(p0), train_docs()$doc_id)
  expect_false(anyNA(p0))
})

test_that("empty and NA texts get NA predictions with a warning; order is kept", {
  skip_if_no_verb("finetune")
  x <- c(a = "We will lower taxes for every family.", b = NA, c = "", d = "Peace and jobs.")
  expect_warning(p <- predict(fitted_model(), newdata = x), "missing or empty")
  expect_equal(names(p), c("a", "b", "c", "d"))
  expect_equal(is.na(p), c(a = FALSE, b = TRUE, c = TRUE, d = FALSE))
})

test_that("predict works on a real quanteda corpus and keeps its docnames", {
  skip_if_no_verb("finetune")
  uk <- readRDS(shared_data("quanteda", "ukimmig2010_corpus.rds"))
  p <- predict(fitted_model(), newdata = uk)
  expect_equal(names(p), names(uk))
  expect_false(anyNA(p))
})

test_that("the fitted object survives saveRDS/readRDS in a new R session", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  if (!length(find.package("quantformer", lib.loc = .libPaths(), quiet = TRUE)))
    skip("quantformer is not installed (tests run from the source tree)")
  new <- sotu_sample()[101:106, ]
  expected <- reference_prediction()
  f <- tempfile(fileext = ".rds")
  saveRDS(list(fit = fit, new = new), f)
  code <- sprintf(paste0("suppressMessages(library(quantformer)); options(quantformer.verbose = FALSE); ",
                         "o <- readRDS('%s'); p <- predict(o$fit, newdata = o$new); ",
                         "cat(paste(names(p), as.character(p), sep = '=', collapse = ';'))"), f)
  res <- processx::run(file.path(R.home("bin"), "Rscript"), c("-e", code),
                       error_on_status = FALSE,
                       env = c("current", R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep)))
  expect_equal(res$status, 0L, info = res$stderr)
  expect_equal(res$stdout, paste(names(expected), as.character(expected), sep = "=", collapse = ";"))
})

test_that("load_finetune rebuilds a model from its directory alone", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  loaded <- load_finetune(fit$model_dir)
  expect_s3_class(loaded, "textmodel_finetune")
  expect_equal(loaded$levels, fit$levels)
  expect_null(loaded$x)
  new <- sotu_sample()[101:106, ]
  expect_equal(predict(loaded, newdata = new), reference_prediction())
  expect_error(predict(loaded), "holds no training documents; give `newdata`")
})

test_that("a model directory deleted after fitting gives a clear error", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  copy <- file.path(tempdir(), "qf-copy")
  dir.create(copy)
  file.copy(list.files(fit$model_dir, full.names = TRUE), copy, recursive = TRUE)
  moved <- load_finetune(copy)
  unlink(copy, recursive = TRUE)
  expect_error(predict(moved, newdata = "A text."),
               "model directory '.*qf-copy' of this model no longer exists")
  expect_output(print(moved), "\\(MISSING\\)")
  expect_error(load_finetune(copy), "does not exist")
  incomplete <- withr::local_tempdir()
  expect_error(load_finetune(incomplete), "not a quantformer model directory")
})

test_that("bad inputs fail in R before any training, with the fix in the message", {
  tr <- train_docs()
  expect_error(textmodel_finetune(tr, y = c("a", "b")),
               "`y` has 2 value\\(s\\) but `x` has 40 document\\(s\\)")
  expect_error(textmodel_finetune(tr, y = "partei"),
               "'partei' is not a docvar of `x`; its docvars are: year, president, party")
  expect_error(textmodel_finetune(tr, y = rep("Democratic", 40)),
               "at least two classes.*every coded document is 'Democratic'")
  expect_error(textmodel_finetune(tr$text, y = "party"), "`x` has no docvars")
  expect_error(textmodel_finetune(tr, y = "party", validation = 2),
               "between 0 and 1")
  expect_error(textmodel_finetune(tr, y = "party", truncation = "middle"),
               paste("`truncation` must be one of \"head_tail\", \"head\", \"tail\",",
                     "\"chunks\", not \"middle\""),
               class = "quantformer_input_error")
})

test_that("the CLI's own errors reach R: an existing output folder", {
  skip_if_no_verb("finetune")
  tr <- train_docs()
  out <- withr::local_tempdir()
  expect_error(textmodel_finetune(tr, y = "party", epochs = 1, output_dir = out),
               "exists; pass `overwrite = TRUE`", class = "quantformer_input_error")
})

test_that("an unknown option passed through ... gives argparse's message", {
  skip_if_no_verb("finetune")
  s <- sotu_sample()[c(1:5, 196:200), ]
  err <- expect_error(textmodel_finetune(s, y = "party", epochs = 1, no_such_option = 3),
                      "unrecognized arguments: --no-such-option 3")
  expect_false(grepl("^usage", conditionMessage(err)))
})

# --- issue #17: R and quanteda conventions ------------------------------------------------

# stdout and stderr (progress bars, messages) of `expr`, as one string
console_output <- function(expr) {
  err <- utils::capture.output(out <- utils::capture.output(invisible(force(expr))),
                               type = "message")
  paste(c(out, err), collapse = "\n")
}

test_that("#17: a one-document validation set with y = <docvar> uses that docvar as its label", {
  skip_if_no_verb("finetune")
  s <- sotu_sample()
  one <- s[101, ]
  fit <- textmodel_finetune(s[c(1:6, 195:200), ], y = "party", epochs = 1, max_length = 32,
                            validation = one, output_dir = tempfile("qf-one-valid-"))
  v <- fit$summary$validation
  expect_equal(v$n, 1)
  # the one validation document's class is its party, not the string "party"
  expect_equal(names(v$per_class), fit$levels)
  support <- vapply(v$per_class, function(r) as.integer(r$support), 0L)
  expect_equal(unname(support[one$party]), 1L)
  expect_equal(sum(support), 1L)
})

test_that("#17: predict() warns about arguments it does not use (tpye, new_data)", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  new <- sotu_sample()[101:106, ]
  expect_warning(p <- predict(fit, newdata = new, tpye = "probability"),
                 "`tpye` is not an argument of predict.textmodel_finetune and is ignored")
  expect_equal(p, reference_prediction())
  expect_warning(predict(fit, new_data = new), "`new_data` is not an argument")
})

test_that("#17: a fit made with verbose = FALSE stays quiet in predict() unless told otherwise", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  expect_identical(fit$verbose, FALSE)
  new <- sotu_sample()[101:102, ]
  withr::local_options(quantformer.verbose = TRUE)
  expect_equal(console_output(p <- predict(fit, newdata = new)), "")
  expect_equal(p, reference_prediction()[1:2])
  # predict's own verbose wins; a loaded model (no verbose given) follows the option
  expect_match(console_output(predict(fit, newdata = new, verbose = TRUE)), "[^[:space:]]")
  expect_match(console_output(predict(load_finetune(fit$model_dir), newdata = new)),
               "[^[:space:]]")
})

test_that("#17: type = \"both\" gives classes and probabilities of one run, in a data frame", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  new <- sotu_sample()[101:106, ]
  both <- predict(fit, newdata = new, type = "both")
  expect_s3_class(both, "data.frame")
  expect_equal(names(both), c("doc_id", "predicted", "prob_Republican", "prob_Democratic"))
  expect_equal(both$doc_id, new$doc_id)
  expect_equal(both$predicted, unname(reference_prediction()))
  prob <- predict(fit, newdata = new, type = "probability")
  expect_equal(as.matrix(both[c("prob_Republican", "prob_Democratic")]), unname(prob),
               ignore_attr = TRUE)
})

test_that("#17: predict() reads a data frame's text and names by text_field and docid_field", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  new <- sotu_sample()[101:106, ]
  df <- data.frame(id = new$doc_id, body = new$text, stringsAsFactors = FALSE)
  expect_error(predict(fit, newdata = df), "Name its text column with `text_field`")
  p <- predict(fit, newdata = df, text_field = "body", docid_field = "id")
  expect_equal(p, reference_prediction())
  expect_equal(predict(fit, newdata = df, text_field = 2, docid_field = 1), p)
})

test_that("#17: summary() prints the validation metrics as small rounded tables", {
  skip_if_no_verb("finetune")
  s <- summary(fitted_model())
  expect_equal(s$validation$per_class$class, c("Republican", "Democratic"))
  expect_equal(names(s$validation$per_class), c("class", "precision", "recall", "f1", "support"))
  expect_equal(sum(s$validation$per_class$support), 6)
  expect_equal(s$validation$metrics[["n"]], 6)
  out <- capture.output(print(s))
  expect_false(any(grepl("per_class.", out, fixed = TRUE)))
  valid_part <- out[seq(grep("^Validation", out), length(out))]
  expect_match(valid_part, "class +precision +recall +f1 +support", all = FALSE)
  expect_match(valid_part, "^ *Democratic ", all = FALSE)
  # no number with more than 3 decimals
  expect_false(any(grepl("[0-9]\\.[0-9]{4,}", valid_part)))
})

test_that("#17: a model in tempdir() is marked temporary; a permanent folder is not", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  expect_true(fit$temporary)
  expect_output(print(fit), "temporary: deleted when this R session ends")
  expect_output(print(fit), "`output_dir`")
  expect_output(print(summary(fit)), "temporary: deleted when this R session ends")
  # a folder outside this session's tempdir()
  keep <- tempfile("qf-kept-", tmpdir = dirname(tempdir()))
  dir.create(keep)
  withr::defer(unlink(keep, recursive = TRUE))
  file.copy(list.files(fit$model_dir, full.names = TRUE), keep, recursive = TRUE)
  kept <- load_finetune(keep)
  expect_false(kept$temporary)
  expect_false(any(grepl("temporary", capture.output(print(kept)))))
})

test_that("#17: a saved fit whose temporary model folder died with its session names the fix", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  if (!length(find.package("quantformer", lib.loc = .libPaths(), quiet = TRUE)))
    skip("quantformer is not installed (tests run from the source tree)")
  f <- tempfile(fileext = ".rds")
  # another R session puts the model in its own tempdir() and saves the fit, then ends
  code <- sprintf(paste0("suppressMessages(library(quantformer)); ",
                         "d <- tempfile('quantformer-model-'); dir.create(d); ",
                         "file.copy(list.files('%s', full.names = TRUE), d, recursive = TRUE); ",
                         "saveRDS(load_finetune(d), '%s')"), fit$model_dir, f)
  res <- processx::run(file.path(R.home("bin"), "Rscript"), c("-e", code),
                       error_on_status = FALSE,
                       env = c("current", R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep)))
  expect_equal(res$status, 0L, info = res$stderr)
  old <- readRDS(f)
  expect_true(old$temporary)
  expect_false(dir.exists(old$model_dir))
  expect_error(predict(old, newdata = "A text."),
               "temporary folder of the R session that fitted the model.*`output_dir`")
  expect_output(print(old), "MISSING: it was in the temporary folder")
})

test_that("predict(backend = 'onnx') equals torch; int8 agrees (issue 16)", {
  skip_if_no_verb("finetune")
  fit <- fitted_model()
  new <- sotu_sample()[101:106, ]
  pr <- predict(fit, newdata = new, type = "probability", precision = "fp32")  # ONNX runs fp32
  po <- predict(fit, newdata = new, type = "probability", backend = "onnx")
  expect_equal(dimnames(po), dimnames(pr))
  expect_equal(po, pr, tolerance = 1e-4)
  expect_true(file.exists(file.path(fit$model_dir, "onnx", "proba-fp32", "model.onnx")))
  withr::local_options(quantformer.backend = "onnx", quantformer.quantize = "int8")
  p8 <- predict(fit, newdata = new)
  expect_equal(names(p8), new$doc_id)
  expect_equal(levels(p8), levels(reference_prediction()))
  expect_gte(mean(p8 == reference_prediction()), 5 / 6)
  expect_true(file.exists(file.path(fit$model_dir, "onnx", "proba-int8", "model.onnx")))
})

test_that("bad backend options fail in R with the fix (issue 16)", {
  expect_error(quantformer:::backend_flags("tf"), "`backend` must be \"torch\" or \"onnx\"")
  expect_error(quantformer:::backend_flags("torch", "int8"), "needs `backend = \"onnx\"`")
  expect_error(quantformer:::backend_flags("onnx", "fp16"), "`quantize` must be \"none\" or \"int8\"")
  expect_equal(quantformer:::backend_flags("onnx", "int8"), c("--backend", "onnx", "--quantize", "int8"))
  expect_equal(quantformer:::backend_flags("torch", "none"), character())
})
