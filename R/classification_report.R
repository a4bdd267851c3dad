#' Evaluate predicted classes against hand-coded ones
#'
#' Accuracy, macro-averaged F1, per-class precision, recall and F1, and the confusion matrix,
#' computed by `quantformer evaluate` (scikit-learn's metrics), so R and Python report the
#' same numbers. Pairs where the prediction or the true class is `NA` are left out, with a
#' warning that counts them. Macro-F1 averages the F1 of the classes that occur in the truth or
#' the predictions (Wankmueller 2022 reports macro-F1 on the test set).
#'
#' The name follows scikit-learn's `classification_report()`; it avoids
#' `quanteda.classifiers::performance()` and `textmodel_evaluate()`, which users may have
#' loaded and which do something else (a metric of one table; cross-validated grid search).
#'
#' @param predicted predicted classes: a factor (e.g. from [predict.textmodel_finetune()]) or
#'   a character vector.
#' @param truth the true classes, same length and order.
#' @inheritParams textmodel_finetune
#' @return An object of class `classification_report`, a list with `accuracy`, `macro_f1`
#'   (numbers in \[0, 1\]), `per_class` (a data frame: `class`, `precision`, `recall`, `f1`,
#'   `support`), `confusion` (a table, rows = true class, columns = predicted class), `n`
#'   (documents evaluated), `n_missing_truth` and `n_missing_pred` (left out), and
#'   `agreement`, a data frame of intercoder reliability between the model and the human codes
#'   (the model as one more coder): `statistic` (Krippendorff's alpha, nominal, from the
#'   `krippendorff` package; Cohen's kappa), `estimate`, `ci_low`, `ci_high` (95 % percentile
#'   bootstrap interval over documents, 1,000 resamples; Hayes & Krippendorff 2007), and
#'   `calibration`: a list with `ece` (the expected calibration error, Guo et al. 2017) and
#'   `reason`; from classes alone `ece` is `NA` (not available: an ECE needs probabilities,
#'   `quantformer evaluate --pred` on a file with `prob_<class>` columns) and `reason` says
#'   so. Classes
#'   are in the level order of `predicted` (or `truth`) when they are factors. `print()` says
#'   how many documents were left out and why (no prediction, no true class).
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   truth <- factor(c("pos", "pos", "neg", "neg", "neg"))
#'   pred  <- factor(c("pos", "neg", "neg", "neg", "pos"), levels = levels(truth))
#'   classification_report(pred, truth)
#' }
#' }
#' @export
classification_report <- function(predicted, truth, verbose = FALSE) {
  if (length(predicted) != length(truth))
    input_error("`predicted` has ", length(predicted), " value(s) but `truth` has ", length(truth),
         "; give one prediction per true class, in the same order", call. = FALSE)
  if (!length(truth)) input_error("`truth` is empty: nothing to evaluate", call. = FALSE)
  ids <- names(predicted)
  if (is.null(ids) || anyDuplicated(ids) || anyNA(ids)) ids <- paste0("text", seq_along(truth))
  frame <- data.frame(doc_id = enc2utf8(ids),
                      predicted = enc2utf8(as.character(predicted)),
                      label = enc2utf8(as.character(truth)), stringsAsFactors = FALSE)
  rep <- call_verb("evaluate", c("--truth-col", "label"), inputs = list("--pred" = frame),
                   output = "json", verbose = verbose)$output
  labels <- as.character(rep$labels)
  # present the classes in factor order when there is one (Python sorts them)
  pref <- c(if (is.factor(predicted)) levels(predicted), if (is.factor(truth)) levels(truth))
  order <- c(intersect(pref, labels), setdiff(labels, pref))
  idx <- match(order, labels)
  pc <- rep$per_class[order]
  per_class <- data.frame(class = order,
                          precision = vapply(pc, function(r) as.numeric(r$precision), 0),
                          recall = vapply(pc, function(r) as.numeric(r$recall), 0),
                          f1 = vapply(pc, function(r) as.numeric(r$f1), 0),
                          support = vapply(pc, function(r) as.integer(r$support), 0L),
                          stringsAsFactors = FALSE, row.names = NULL)
  cm <- rep$confusion_matrix        # jsonlite makes the nested rows a matrix
  if (!is.matrix(cm)) cm <- do.call(rbind, lapply(cm, unlist))
  storage.mode(cm) <- "integer"
  cm <- cm[idx, idx, drop = FALSE]
  confusion <- as.table(cm)
  dimnames(confusion) <- list(true = order, predicted = order)
  structure(list(accuracy = rep$accuracy, macro_f1 = rep$macro_f1, per_class = per_class,
                 confusion = confusion, n = rep$n, n_missing_truth = rep$n_missing_truth,
                 n_missing_pred = rep$n_missing_pred, agreement = agreement_table(rep$agreement),
                 calibration = list(ece = if (is.null(rep$calibration$ece)) NA_real_
                                          else as.numeric(rep$calibration$ece),
                                    reason = if (is.null(rep$calibration$reason)) NA_character_
                                             else rep$calibration$reason)),
            class = "classification_report")
}

# The report's "agreement" JSON -> data frame statistic, estimate, ci_low, ci_high
agreement_table <- function(a) {
  stats <- c(krippendorff_alpha = "Krippendorff's alpha", cohen_kappa = "Cohen's kappa")
  num <- function(v) if (is.null(v)) NA_real_ else as.numeric(v)
  data.frame(statistic = unname(stats),
             estimate = vapply(names(stats), function(s) num(a[[s]]$estimate), 0),
             ci_low = vapply(names(stats), function(s) num(a[[s]]$ci_low), 0),
             ci_high = vapply(names(stats), function(s) num(a[[s]]$ci_high), 0),
             stringsAsFactors = FALSE, row.names = NULL)
}

#' @rdname classification_report
#' @param x a `classification_report` object (for `print()`).
#' @param digits decimal places of the printed numbers (3).
#' @param ... not used.
#' @return `print()` returns `x` invisibly.
#' @export
print.classification_report <- function(x, digits = 3, ...) {
  cat("Classification report (", x$n, " documents", left_out_note(x), ")\n\n", sep = "")
  cat("Accuracy: ", format(round(x$accuracy, digits), nsmall = digits), "\n", sep = "")
  cat("Macro-F1: ", format(round(x$macro_f1, digits), nsmall = digits), "\n\n", sep = "")
  pc <- x$per_class
  num <- c("precision", "recall", "f1")
  pc[num] <- lapply(pc[num], function(v) format(round(v, digits), nsmall = digits))
  print(pc, row.names = FALSE)
  cat("\nConfusion matrix (rows: true, columns: predicted)\n")
  print(x$confusion)
  if (!is.null(x$agreement)) {
    cat("\nAgreement with the human codes (95% bootstrap intervals)\n")
    ag <- x$agreement
    ag[-1] <- lapply(ag[-1], function(v) round(v, digits))
    print(ag, row.names = FALSE)
  }
  invisible(x)
}

# ", left out: 1 without a prediction, 2 without a true class" (empty when none was left out)
left_out_note <- function(x) {
  parts <- c(if (x$n_missing_pred) paste(x$n_missing_pred, "without a prediction"),
             if (x$n_missing_truth) paste(x$n_missing_truth, "without a true class"))
  if (length(parts)) paste0(", left out: ", paste(parts, collapse = ", ")) else ""
}
