#' Evaluate numeric predictions against true values
#'
#' The regression sibling of [classification_report()]: root mean squared error and mean
#' absolute error (in the outcome's units), Pearson and Spearman correlation and R^2
#' (1 - SSE/SST), computed by the Python core (`quantformer evaluate --task regression`,
#' scikit-learn and scipy). Pairs with a missing value are left out and counted.
#'
#' @param predicted numeric predictions, e.g. `predict()` of a
#'   `textmodel_finetune(task = "regression")` model.
#' @param truth the true values, in the same order.
#' @template verbose
#' @return A list of class `regression_report` with `n`, `n_missing`, `rmse`, `mae`,
#'   `pearson`, `spearman`, `r2`, `mean_truth`, `mean_predicted`.
#' @seealso [classification_report()], [textmodel_finetune()]
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   regression_report(c(1.5, 2, 2.5, 5), c(1, 2, 3, 4))
#' }
#' }
#' @export
regression_report <- function(predicted, truth, verbose = FALSE) {
  if (length(predicted) != length(truth))
    input_error("`predicted` has ", length(predicted), " value(s) but `truth` has ", length(truth),
         "; give one prediction per true value, in the same order", call. = FALSE)
  if (!is.numeric(predicted) || !is.numeric(truth))
    input_error("`predicted` and `truth` must be numeric; use classification_report() for classes",
         call. = FALSE)
  frame <- data.frame(doc_id = paste0("text", seq_along(truth)), predicted = predicted,
                      truth = truth)
  rep <- call_verb("evaluate", c("--truth-col", "truth", "--task", "regression"),
                   inputs = list("--pred" = frame), output = "json", verbose = verbose)$output
  structure(rep, class = "regression_report")
}

#' @rdname regression_report
#' @param x a `regression_report` object (for `print()`).
#' @param digits decimal places of the printed metrics (3).
#' @param ... not used.
#' @return `print()` returns `x` invisibly.
#' @export
print.regression_report <- function(x, digits = 3, ...) {
  cat("Regression report (", x$n, " documents", if (x$n_missing) paste0(", ", x$n_missing,
      " left out") else "", ")\n", sep = "")
  vals <- unlist(x[c("rmse", "mae", "pearson", "spearman", "r2")])
  names(vals) <- c("RMSE", "MAE", "Pearson r", "Spearman rho", "R^2")
  print(round(vals, digits))
  invisible(x)
}
