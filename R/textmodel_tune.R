#' Choose the learning rate and number of epochs by cross-validation
#'
#' A grid search for fine-tuning (Wankmueller 2022, section 6.4): every learning rate x epochs
#' pair of the grid is fine-tuned on each of `folds` stratified training folds and scored on
#' the held-out fold (classification: macro-F1; `task = "regression"`: RMSE;
#' `task = "multilabel"`: macro-F1 over labels, on plain shuffled folds). The configuration
#' with the best mean score wins (ties: fewer epochs, then the lower rate); it is refit on all
#' coded documents and, when `test` is given, scored on the test documents. Oversampling is
#' applied to the training folds only. Runs `quantformer tune`, which writes its results into
#' `output_dir` (`cv_results`, `cv_summary`, `best.json`, the refit model in `model/` and, with
#' a test set, `test_predictions` and `test_report.json`).
#'
#' The grid needs `length(lr) * length(epochs) * folds + 1` fine-tuning runs: with the
#' defaults (3 x 3 x 5 + 1 = 46) that is many times one [textmodel_finetune()]. `max_runs`
#' refuses a larger grid before any work; `scheduler` spreads the runs over a Dask cluster (see
#' [predict_files()]).
#'
#' @inheritParams textmodel_finetune
#' @param truncation `NULL` or which tokens a long document keeps: `"head_tail"` (the first 128
#'   and the last 382 of 512, Wankmueller 2022, section 6.3), `"head"` or `"tail"`. `NULL` (the default) leaves
#'   it to the core: `"head_tail"`, and `"head"` for `method = "setfit"` (as
#'   sentence-transformers cuts). `"chunks"`: every run reads each document whole as
#'   overlapping windows, in training and in scoring the held-out fold (see
#'   [textmodel_finetune()]; no time estimate is printed); `stride`, `max_chunks` and
#'   `aggregate` as there.
#' @param lr,epochs the grid: learning rates (numbers > 0) and numbers of epochs (whole
#'   numbers >= 1). `NULL` takes the core's grid for the model's size: small models (such as the
#'   bundled all-MiniLM-L6-v2) `c(5e-5, 8e-5, 1e-4)` x `3:5`, base models `c(1e-5, 2e-5, 3e-5)`
#'   x `2:4`, large ones `c(5e-6, 1e-5, 2e-5)` x `2:4`; `method = "setfit"` `c(2e-5, 5e-5,
#'   1e-4)` x `1:2`; `method = "nli"` `c(1e-5, 2e-5, 5e-5)` x `c(7, 10)`.
#' @param folds number of cross-validation folds (5); every class needs at least `folds`
#'   coded documents.
#' @param test `NULL` (no test set) or test documents (a corpus, character vector or data frame,
#'   read with `text_field` and `docid_field`) on which the refit best configuration is
#'   scored.
#' @param test_y the labels of `test` (one per document), or a docvar name of `test`; by default
#'   the docvar named by `y` when `y` is a name (multi-label: the docvars named as the labels of
#'   `y`).
#' @param method `"standard"` fine-tuning, `"setfit"` (the grid is over the body's learning
#'   rate and epochs over contrastive pairs) or `"nli"` (see [textmodel_finetune()]).
#' @param oversample `NULL` or the minority:majority ratio the training folds are oversampled
#'   to (validation folds never are).
#' @param max_runs `NULL` or the most fine-tuning runs allowed: a larger grid is an error before
#'   any work.
#' @param scheduler `NULL` (runs one after another in one process), `"local:N"` or the address
#'   of a Dask scheduler (`"tcp://host:port"`).
#' @param output_dir the results folder (new or empty, or `overwrite = TRUE`); default a new
#'   folder in [tempdir()]. The refit model is `output_dir/model`.
#' @param overwrite `TRUE` replaces an existing non-empty `output_dir`; `FALSE` (default) makes
#'   it an error, raised before any work.
#' @param ... further options of `quantformer tune` as named R arguments (e.g.
#'   `setfit_iterations = 10`; `python -m quantformer tune --help` lists them).
#' @return An object of class `c("textmodel_tune", "textmodel", "list")`: `results` (a data
#'   frame, one row per configuration, best first: `lr`, `epochs`, `mean_<metric>`,
#'   `sd_<metric>` over folds, the mean of a second metric (`mean_pearson` for regression,
#'   `mean_micro_f1` for multi-label), `folds` and `rank`, 1 for the chosen one),
#'   `cv_results` (one row per configuration and fold: `lr`, `epochs`, `fold`, the metrics and
#'   `seconds`), `best` (a list: `lr`, `epochs`, `mean_<metric>`, `sd_<metric>`), `metric`
#'   (`"macro_f1"` or `"rmse"`), `test` (`NULL`, or the test metrics of the refit model: a list
#'   with `macro_f1`, `accuracy`, `n`; regression `rmse`, `mae`, ...), `model` (the refit
#'   model, a [textmodel_finetune()] object for [predict.textmodel_finetune()]), `info`
#'   (settings and counts: model, folds, seed, grid, runs, seconds), `task`, `output_dir` and
#'   `call`. Bad arguments (a grid value that is not positive, fewer coded documents of a
#'   class than `folds`, more runs than `max_runs`) are errors of class
#'   `quantformer_input_error` that name the R argument.
#' @seealso [textmodel_finetune()] to fit one configuration, [textmodel_compare()] to compare
#'   against baselines.
#' @references Wankmueller, S. (2022). Introduction to Neural Transfer Learning with
#'   Transformers for Social Science Text Analysis. Sociological Methods & Research.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   tuned <- textmodel_tune(sotu[c(1:15, 101:115), ], y = "party", lr = c(1e-4, 3e-4),
#'                           epochs = 1, folds = 2, max_length = 64)
#'   tuned
#'   predict(tuned$model, newdata = sotu[41:45, ])
#' }
#' }
#' @export
textmodel_tune <- function(x, y, lr = NULL, epochs = NULL, folds = 5, test = NULL,
                           test_y = NULL, model = NULL, method = c("standard", "setfit", "nli"),
                           task = c("classification", "regression", "multilabel"),
                           oversample = NULL, max_runs = NULL, batch_size = 16,
                           max_length = NULL, truncation = NULL, stride = NULL,
                           max_chunks = NULL, aggregate = NULL, seed = 1, hypothesis = NULL, label_phrases = NULL, device = "auto",
                           scheduler = NULL, output_dir = NULL, overwrite = FALSE,
                           text_field = "text", docid_field = "doc_id",
                           verbose = getOption("quantformer.verbose", TRUE), ...) {
  call <- match.call()
  method <- match_choice(method)
  task <- match_choice(task)
  truncation <- match_truncation(truncation)  # R/reading.R
  frame <- as_frame(x, text_field, docid_field)
  tframe <- if (!is.null(test)) as_frame(test, text_field, docid_field, arg = "test")
  labelled <- labelled_inputs(task, frame, y, tframe, test_y)  # R/tasks.R
  if (is.null(output_dir)) output_dir <- tempfile("quantformer-tune-")
  output_dir <- normalizePath(output_dir, mustWork = FALSE)
  args <- c(labelled$args,
            cli_flags(lrs = lr, epochs_grid = epochs, folds = folds, model = model,
                      method = if (method != "standard") method, oversample = oversample,
                      max_runs = max_runs, batch_size = batch_size, max_length = max_length,
                      truncation = truncation, stride = stride, max_chunks = max_chunks,
                      aggregate = aggregate, seed = seed, hypothesis = hypothesis,
                      device = device, scheduler = scheduler),
            "--out", output_dir, cli_flags(overwrite = isTRUE(overwrite), ...))
  res <- call_verb("tune", args, inputs = c(labelled$inputs, nli_phrase_inputs(label_phrases)),
                   outputs = list("--record" = "json"),  # the refit model's record comes along
                   verbose = verbose, r_args = names(formals()))
  tune_result(output_dir, task, call, record = res$outputs[[1]])
}

# The textmodel_tune object from the results folder of `quantformer tune`; `record`, the refit
# model's checked record when the verb returned it (else the core is asked for it).
tune_result <- function(output_dir, task, call, record = NULL) {
  best <- jsonlite::read_json(file.path(output_dir, "best.json"), simplifyVector = TRUE)
  results <- read_output(file.path(output_dir, "cv_summary.rds"))
  metric <- if (task == "regression") "rmse" else "macro_f1"
  model_dir <- file.path(output_dir, "model")
  keys <- c("lr", "epochs", paste0(c("mean_", "sd_"), metric))
  structure(list(results = results[order(results$rank), , drop = FALSE],
                 cv_results = read_output(file.path(output_dir, "cv_results.rds")),
                 best = best[intersect(names(best), c(keys, grep("^mean_", names(best),
                                                                 value = TRUE)))],
                 metric = metric, test = best$test,
                 model = if (!is.null(record)) finetune_object(model_dir, record)
                         else if (dir.exists(model_dir)) load_finetune(model_dir),
                 info = best[setdiff(names(best), c(keys, "test"))], task = task,
                 output_dir = output_dir, call = call),
            class = c("textmodel_tune", "textmodel", "list"))
}

#' Print or summarise a cross-validated grid search
#'
#' `print()` shows the grid's results table (rounded) and the chosen configuration;
#' `summary()` adds the scores of every fold and the test metrics.
#'
#' @param x,object a `textmodel_tune` object (for `print.summary...`, its summary).
#' @param digits significant digits of the scores (3).
#' @param ... not used.
#' @return `print()` returns `x` invisibly. `summary()` returns an object of class
#'   `summary.textmodel_tune`: `call`, `task`, `metric`, `results` (the table of
#'   configurations, best first), `best`, `cv_results` (one row per configuration and fold),
#'   `test` (`NULL` without a test set) and `model_dir` (the refit model's folder, `NULL` when
#'   there is none); `print()` of it returns it invisibly.
#' @name summary.textmodel_tune
#' @export
print.textmodel_tune <- function(x, digits = 3, ...) {
  cat("Cross-validated fine-tuning grid (quantformer)\n")
  print_call(x$call)  # R/textmodel-methods.R
  print_tune_table(x, digits)
  invisible(x)
}

#' @rdname summary.textmodel_tune
#' @export
summary.textmodel_tune <- function(object, ...) {
  structure(list(call = object$call, task = object$task, metric = object$metric,
                 results = object$results, best = object$best,
                 cv_results = object$cv_results, test = object$test,
                 model_dir = object$model$model_dir),
            class = "summary.textmodel_tune")
}

#' @rdname summary.textmodel_tune
#' @export
print.summary.textmodel_tune <- function(x, digits = 3, ...) {
  print_summary(x, "Cross-validated fine-tuning grid", function() {  # R/textmodel-methods.R
    print_tune_table(x, digits)
    cat("\nScores per fold:\n")
    print(round_numbers(x$cv_results, digits), row.names = FALSE)
    print_fields("Test set (the refit best configuration)", x$test)
    if (!is.null(x$model_dir)) cat("\nRefit model: ", x$model_dir, "\n", sep = "")
  })
}

#' Predict with the refit model of a grid search
#'
#' The configuration [textmodel_tune()] chose, refit on all its training documents, predicts
#' as [predict.textmodel_finetune()] does.
#'
#' @param object a `textmodel_tune` object with a refit model (its `model`).
#' @param newdata,... `newdata` and the further arguments of [predict.textmodel_finetune()]
#'   (`type`, `batch_size`, ...); without `newdata` the refit model holds no documents, so
#'   `newdata` is required.
#' @return As [predict.textmodel_finetune()]: a factor (or probabilities) named by docnames.
#'   Errors: a result without a refit model (its folder has no `model/`), no `newdata`.
#' @seealso [predict.textmodel_finetune()]
#' @export
predict.textmodel_tune <- function(object, newdata = NULL, ...) {
  if (is.null(object$model))
    input_error("`object` has no refit model (its folder ", object$output_dir, " has no ",
                "model/): fit it again with textmodel_tune() to predict")
  if (is.null(newdata))
    input_error("give `newdata`: the refit model of textmodel_tune() holds no documents")
  stats::predict(object$model, newdata = newdata, ...)
}

# The configurations table and the chosen one, for print() and summary().
print_tune_table <- function(x, digits) {
  cat("\n", x$task, ": mean ", x$metric, " over ", x$results$folds[1],
      " folds per configuration\n", sep = "")
  print(round_numbers(x$results, digits), row.names = FALSE)
  cat("\nBest: lr ", format(x$best$lr), ", ", x$best$epochs, " epoch(s), mean ", x$metric, " ",
      format(signif(x$best[[paste0("mean_", x$metric)]], digits)), "\n", sep = "")
  invisible()
}

# A data frame with its metric columns rounded to `digits` significant digits (learning rates
# and counts as they are).
round_numbers <- function(df, digits) {
  keep <- c("lr", "epochs", "fold", "folds", "rank")
  num <- vapply(df, is.double, TRUE) & !names(df) %in% keep
  df[num] <- lapply(df[num], signif, digits)
  df
}
