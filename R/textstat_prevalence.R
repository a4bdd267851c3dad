#' Prevalence of each class with valid confidence intervals
#'
#' `x` is a classifier's predictions for every document of the corpus (classes or class
#' probabilities) and `gold` the hand codes of a random sample.
#' The share of documents in each class (per group of docvars), from a classifier's
#' predictions for the whole corpus and a random sample of hand-coded ("gold") documents.
#' Shares of predicted labels are biased even at 80-90% accuracy and their textbook
#' intervals do not cover the truth (Egami et al. 2023); prediction-powered inference
#' (Angelopoulos et al. 2023, Science) corrects the predicted share by the classifier's mean
#' error on the gold sample, and its power-tuned form PPI++ (Angelopoulos, Duchi & Zrnic 2023)
#' is never much wider than the gold sample's own interval. Runs `quantformer estimate`
#' (ppi-python's estimators).
#'
#' @param x the predictions for every document of the corpus, named by docnames: a factor
#'   of classes (`predict(fit, newdata, type = "class")`), a matrix of class probabilities
#'   (`type = "prob"`, one column per class), or a machine coder's data frame as it comes:
#'   [annotate_llm()]'s codes (`doc_id`, `label`, `prob_<label>`, which are `NA` where an
#'   endpoint gave no token log-probabilities) or a predictions frame (`doc_id`, `predicted`,
#'   `prob_<class>`). Probabilities make the PPI interval narrower; a document without them
#'   is predicted by its class, and the `note` column says so. For `print()`: the result.
#' @param gold the hand-coded classes of a random sample of those documents: a vector or
#'   factor named by docnames (documents not coded may be left out or be `NA`), or a data
#'   frame with `doc_id` and `label` columns.
#' @param by `NULL` (the whole corpus), the name(s) of docvars of `data`, or grouping values:
#'   a vector or data frame with one value (row) per document of `x`.
#' @param data a quanteda corpus or a data frame with the docvars named in `by`, one document
#'   per element of `x`, in the same order.
#' @param method `"ppi"` (prediction-powered inference, the default), `"naive"` (the share of
#'   predicted labels with a Wald interval: what ignoring classification error gives; shown
#'   for contrast), `"gold"` (the hand-coded sample alone) or `"dsl"` (design-based supervised
#'   learning, Egami et al. 2023: each document's prediction corrected, for a gold document, by
#'   its error divided by its known probability of being hand-coded; valid with unequal
#'   `inclusion_prob` too, and for surrogate codes from [annotate_llm()]).
#' @param level confidence level, a number in (0, 1) (default 0.95).
#' @param inclusion_prob `NULL` for a simple random gold sample, else each gold document's
#'   known probability of being drawn (a number in (0, 1] per element of `gold`, e.g. from a
#'   stratified sample); documents are weighted by its inverse.
#' @param target_halfwidth `NULL`, or a half-width (e.g. `0.02`, two percentage points): adds
#'   `n_gold_needed`, the number of hand-coded documents that gives intervals that narrow,
#'   planned from `gold` as a pilot (as `dsl::power_dsl()` does).
#' @template verbose
#' @param pred the old name of `x`, accepted with a warning (class
#'   `quantformer_deprecated`) until the next release.
#' @return A data frame of class `textstat_prevalence`, one row per group and class: the `by`
#'   columns, `class`, `estimate`, `ci_low`, `ci_high` (proportions), `method`, `n_gold`
#'   (hand-coded documents used), `n_total` (documents), `note` (why an estimate is pooled or
#'   missing, e.g. a group without gold documents, whose PPI correction is pooled over all
#'   groups; why an interval is the exact Clopper-Pearson one: the gold documents of a group
#'   all agree, e.g. 3 of 3, and a zero-width interval such as `[1, 1]` would look certain; why
#'   `n_gold_needed` exceeds the documents: coding all of them is the most one can do) and,
#'   with `target_halfwidth`, `n_gold_needed`. Groups with fewer than 10 gold
#'   documents give a warning; a gold sample of fewer than 10 documents, gold documents that
#'   are not in `x` and classes the model does not know are errors.
#' @references Angelopoulos, A. N., Bates, S., Fannjiang, C., Jordan, M. I., & Zrnic, T.
#'   (2023). Prediction-powered inference. *Science*, 382(6671), 669-674.
#'
#'   Angelopoulos, A. N., Duchi, J. C., & Zrnic, T. (2023). PPI++: Efficient
#'   prediction-powered inference. arXiv:2311.01453.
#'
#'   Egami, N., Hinck, M., Stewart, B. M., & Wei, H. (2023). Using imperfect surrogates for
#'   downstream inference: Design-based supervised learning for social science applications
#'   of large language models. *NeurIPS 36*.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   set.seed(1)
#'   truth <- sample(c("econ", "other"), 500, replace = TRUE, prob = c(0.3, 0.7))
#'   pred <- factor(ifelse(runif(500) < 0.8, truth, "other"))
#'   names(pred) <- paste0("text", 1:500)
#'   coded <- sample(500, 100)
#'   gold <- setNames(truth[coded], names(pred)[coded])
#'   textstat_prevalence(pred, gold)
#' }
#' }
#' @export
textstat_prevalence <- function(x, gold, by = NULL, data = NULL,
                                method = c("ppi", "naive", "gold", "dsl"), level = 0.95,
                                inclusion_prob = NULL, target_halfwidth = NULL,
                                verbose = FALSE, pred) {
  first <- first_arguments(if (!missing(x)) x, if (!missing(pred)) pred,  # R/arguments.R
                           if (!missing(gold)) gold, "pred", "textstat_prevalence", missing(x),
                           missing(pred), missing(gold))
  x <- first$x
  gold <- first$second
  method <- match_choice(method)
  gold_in <- gold_inputs(x, gold, by, data, inclusion_prob)
  res <- call_verb("estimate",
                   c(if (length(gold_in$by)) c("--by", paste(gold_in$by, collapse = ",")),
                     if (!is.null(inclusion_prob)) c("--weight-col", "inclusion_prob"),
                     cli_flags(method = method, level = level,
                               target_halfwidth = target_halfwidth)),
                   inputs = gold_in$inputs, output = "rds", verbose = verbose,
                   r_args = setdiff(names(formals()), "pred"))$output
  class(res) <- c("textstat_prevalence", "textstat", "data.frame")
  res
}

# The prediction frame (doc_id, group columns, predicted, prob_*) and the gold frame (doc_id,
# label, [inclusion_prob]) of `estimate` and `regress`: list(inputs = <"--pred" and "--gold"
# frames for call_verb()>, by = <the group column names>).
gold_inputs <- function(pred, gold, by = NULL, data = NULL, inclusion_prob = NULL,
                        extra = NULL) {
  frame <- prediction_frame(pred)
  groups <- group_columns(by, data, nrow(frame))
  docvars <- if (is.null(extra)) groups else if (is.null(groups)) extra else cbind(groups, extra)
  if (!is.null(docvars) && ncol(docvars)) frame <- cbind(frame["doc_id"], docvars, frame[-1])
  list(inputs = list("--pred" = frame, "--gold" = gold_frame(gold, inclusion_prob)),
       by = names(groups))
}

# pred (factor or probability matrix, named by docnames; or a machine coder's data frame,
# passed on as it is for the core to read) -> doc_id, predicted, [prob_*]
prediction_frame <- function(pred) {
  if (is.data.frame(pred)) return(machine_frame(pred))
  ids <- if (is.matrix(pred)) rownames(pred) else names(pred)
  n <- if (is.matrix(pred)) nrow(pred) else length(pred)
  if (is.null(ids)) ids <- paste0("text", seq_len(n))
  if (is.matrix(pred)) {
    if (is.null(colnames(pred)) || !is.numeric(pred))
      input_error("`x` is a matrix without class names as column names, or not numeric; give ",
                 "predict(fit, newdata, type = \"prob\") or a factor of classes", call. = FALSE)
    best <- colnames(pred)[max.col(replace(pred, is.na(pred), -1), ties.method = "first")]
    best[rowSums(is.na(pred)) > 0] <- NA
    probs <- as.data.frame(unclass(pred), stringsAsFactors = FALSE)
    names(probs) <- paste0("prob_", colnames(pred))
    rownames(probs) <- NULL
    return(data.frame(doc_id = enc2utf8(ids), predicted = enc2utf8(best), probs,
                      stringsAsFactors = FALSE, check.names = FALSE))
  }
  if (!is.factor(pred) && !is.character(pred))
    input_error("`x` must be a factor of predicted classes or a probability matrix, not ",
               class(pred)[1], call. = FALSE)
  data.frame(doc_id = enc2utf8(ids), predicted = enc2utf8(as.character(pred)),
             stringsAsFactors = FALSE)
}

# A machine coder's data frame (annotate_llm()'s codes: doc_id, label, prob_*, unparsed,
# coder; or predictions: doc_id, predicted, prob_*) with its columns as the core reads them:
# factors as UTF-8 strings, list columns (none expected) refused.
machine_frame <- function(pred) {
  if (!"doc_id" %in% names(pred) || !any(c("predicted", "label") %in% names(pred)))
    input_error("`x` is a data frame without `doc_id` and a `label` (annotate_llm()'s codes) ",
                "or `predicted` column; its columns are: ", paste(names(pred), collapse = ", "),
                call. = FALSE)
  keep <- names(pred) %in% c("doc_id", "predicted", "label", "unparsed") |
    startsWith(names(pred), "prob_")
  out <- as.data.frame(lapply(pred[keep], function(v)
    if (is.factor(v) || is.character(v)) enc2utf8(as.character(v)) else v),
    stringsAsFactors = FALSE, check.names = FALSE)
  rownames(out) <- NULL
  out
}

# gold (named vector/factor or data frame doc_id, label) -> doc_id, label, [inclusion_prob];
# documents without a code are dropped (NA or absent are both "not coded").
gold_frame <- function(gold, inclusion_prob = NULL) {
  if (is.data.frame(gold)) {
    if (!all(c("doc_id", "label") %in% names(gold)))
      input_error("`gold` is a data frame without 'doc_id' and 'label' columns; its columns are: ",
                 paste(names(gold), collapse = ", "), call. = FALSE)
    ids <- as.character(gold$doc_id)
    labels <- as.character(gold$label)
  } else {
    if (is.null(names(gold)))
      input_error("`gold` must be named by docnames (the names of `x`), so that each code ",
                 "finds its document; e.g. `gold <- setNames(codes, docnames)`", call. = FALSE)
    ids <- names(gold)
    labels <- as.character(gold)
  }
  out <- data.frame(doc_id = enc2utf8(ids), label = enc2utf8(labels), stringsAsFactors = FALSE)
  if (!is.null(inclusion_prob)) {
    if (length(inclusion_prob) != nrow(out))
      input_error("`inclusion_prob` has ", length(inclusion_prob), " value(s) but `gold` has ",
                 nrow(out), "; give one inclusion probability per element of `gold`", call. = FALSE)
    out$inclusion_prob <- as.numeric(inclusion_prob)
  }
  out[!is.na(out$label), , drop = FALSE]
}

# `by` -> a data frame of group columns with one row per document (NULL: no groups)
group_columns <- function(by, data, n) {
  if (is.null(by)) return(NULL)
  if (is.character(by) && is.null(dim(by)) && length(by) < n && !is.null(data)) {
    dv <- frame_docvars(as_frame(data, arg = "data"))
    miss <- setdiff(by, names(dv))
    if (length(miss))
      input_error("`by` names ", paste0("'", miss, "'", collapse = ", "), " but `data` has no such ",
                 "docvar; its docvars are: ", paste(names(dv), collapse = ", "), call. = FALSE)
    groups <- dv[by]
  } else if (is.character(by) && length(by) < n) {
    input_error("`by` names docvars (", paste(by, collapse = ", "), ") but `data` is missing: give ",
               "the corpus or data frame that holds them", call. = FALSE)
  } else {
    groups <- if (is.data.frame(by)) by else data.frame(group = by, stringsAsFactors = FALSE)
  }
  if (nrow(groups) != n)
    input_error("`by` has ", nrow(groups), " value(s) but `x` has ", n, " document(s); give one ",
               "group per document", call. = FALSE)
  for (i in seq_along(groups)) if (is.factor(groups[[i]])) groups[[i]] <- as.character(groups[[i]])
  rownames(groups) <- NULL
  groups
}

#' @rdname textstat_prevalence
#' @param digits decimal places of the estimates and intervals (3).
#' @param ... further arguments of [print.data.frame()].
#' @return `print()` returns `x` invisibly.
#' @export
print.textstat_prevalence <- function(x, digits = 3, ...) {
  y <- as.data.frame(unclass(x), stringsAsFactors = FALSE)
  if ("note" %in% names(y) && !any(nzchar(y$note) & !is.na(y$note))) y$note <- NULL
  num <- intersect(c("estimate", "ci_low", "ci_high"), names(y))
  y[num] <- lapply(y[num], round, digits)
  print(y, row.names = FALSE, ...)
  invisible(x)
}
