#' @param verbose logical: `TRUE` shows the Python core's progress bars and messages live
#'   (with an ETA), `FALSE` only its warnings and errors. One rule for every function: the
#'   default is `getOption("quantformer.verbose", TRUE)`, except for the quick
#'   [textstat_subwords()], [classification_report()], [regression_report()],
#'   [textstat_prevalence()] and [textstat_regression()], which default to `FALSE`; the
#'   `predict()` methods and [calibrate_finetune()] (default `NULL`) use the `verbose` given
#'   when the model was made ([textmodel_finetune()], [textmodel_zeroshot()]), else the option.
#'   Python tracebacks of internal errors: `options(quantformer.debug = TRUE)`.
