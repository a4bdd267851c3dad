#' Regress a measured class on docvars with valid confidence intervals
#'
#' `x` is a classifier's predictions for every document of the corpus (classes or class
#' probabilities), `gold` the hand codes of a random sample and `data` the docvars.
#' A linear probability model (OLS) or a logistic regression of one class's indicator (1 when
#' a document is in the class) on docvars, with prediction-powered inference: the classifier's
#' predictions for the whole corpus corrected by a random sample of hand-coded documents
#' (Angelopoulos et al. 2023; PPI++ power tuning, Angelopoulos, Duchi & Zrnic 2023).
#' Regressing predicted labels instead attenuates the coefficients and gives intervals that do
#' not cover (Egami et al. 2023). Runs `quantformer regress` (ppi-python's estimators).
#'
#' @inheritParams textstat_prevalence
#' @param formula a formula with a class of the model on the left and docvars of `data` on
#'   the right, e.g. `economy ~ party + decade` (patsy syntax: `C(x)`, `a:b`, `- 1` work; a
#'   character or factor docvar gets treatment dummies).
#' @param data a quanteda corpus or a data frame with the docvars of `formula`, one document
#'   per element of `x`, in the same order.
#' @param family `"ols"` (linear probability model, the default) or `"logistic"` (log-odds).
#' @param method `"ppi"` (default), `"naive"` (predicted labels as the outcome; for
#'   contrast), `"gold"` (the hand-coded documents alone) or `"dsl"` (design-based supervised
#'   learning, Egami et al. 2023: every document's outcome replaced by its prediction plus,
#'   for a hand-coded document, its error divided by its known probability of being coded,
#'   `inclusion_prob`; then OLS or the logistic moment equations with sandwich (HC0) standard
#'   errors, statsmodels; valid for unequal inclusion probabilities and for surrogate codes
#'   from [annotate_llm()]).
#' @param pred the old name of `x`, accepted with a warning (class
#'   `quantformer_deprecated`) until the next release.
#' @return A data frame of class `textstat_regression`, one row per coefficient: `outcome`,
#'   `term` (named as [lm()] names coefficients: `(Intercept)`, `partyR`, `decade1990s`,
#'   `partyR:decade1990s`; the core's files use patsy's `Intercept`, `party[T.R]`), `estimate`, `ci_low`, `ci_high`, `family`, `method`, `n_gold`, `n_total`,
#'   `note` (which predictions were used where some documents have no probabilities: their
#'   class; empty otherwise, and not printed).
#'   Documents with a missing covariate are an error, never dropped silently.
#' @references See [textstat_prevalence()].
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   set.seed(1)
#'   party <- sample(c("D", "R"), 500, replace = TRUE)
#'   truth <- ifelse(runif(500) < ifelse(party == "R", 0.4, 0.2), "econ", "other")
#'   pred <- factor(ifelse(runif(500) < 0.8, truth, "other"))
#'   names(pred) <- paste0("text", 1:500)
#'   coded <- sample(500, 150)
#'   gold <- setNames(truth[coded], names(pred)[coded])
#'   textstat_regression(pred, gold, econ ~ party, data = data.frame(party = party))
#' }
#' }
#' @export
textstat_regression <- function(x, gold, formula, data, family = c("ols", "logistic"),
                                method = c("ppi", "naive", "gold", "dsl"), level = 0.95,
                                inclusion_prob = NULL, verbose = FALSE, pred) {
  first <- first_arguments(if (!missing(x)) x, if (!missing(pred)) pred,  # R/arguments.R
                           if (!missing(gold)) gold, "pred", "textstat_regression", missing(x),
                           missing(pred), missing(gold))
  x <- first$x
  gold <- first$second
  family <- match_choice(family)
  method <- match_choice(method)
  if (!inherits(formula, "formula") || length(formula) != 3)
    input_error("`formula` must be a two-sided formula such as `economy ~ party`, with a class on ",
               "the left", call. = FALSE)
  covariates <- regression_docvars(formula, data)
  gold_in <- gold_inputs(x, gold, inclusion_prob = inclusion_prob, extra = covariates)
  spec <- paste(deparse(formula, width.cutoff = 500L), collapse = " ")
  res <- call_verb("regress",
                   c("--formula", spec,
                     if (!is.null(inclusion_prob)) c("--weight-col", "inclusion_prob"),
                     cli_flags(family = family, method = method, level = level)),
                   inputs = gold_in$inputs, output = "rds", verbose = verbose,
                   r_args = setdiff(names(formals()), "pred"))$output
  res$term <- r_term_names(res$term)
  class(res) <- c("textstat_regression", "textstat", "data.frame")
  res
}

# The docvars of `data` that the right-hand side of `formula` uses (a data frame).
regression_docvars <- function(formula, data) {
  if (missing(data) || is.null(data))
    input_error("`data` is missing: give the corpus or data frame with the docvars of `formula`",
               call. = FALSE)
  dv <- if (is.data.frame(data) && !"text" %in% names(data)) data
        else frame_docvars(as_frame(data, arg = "data"))
  wanted <- all.vars(formula[[3]])
  used <- intersect(wanted, names(dv))
  unknown <- setdiff(wanted, names(dv))
  if (length(unknown))
    input_error("`formula` uses ", paste(unknown, collapse = ", "), " but `data` has ",
               "no such docvar; its docvars are: ", paste(names(dv), collapse = ", "), call. = FALSE)
  out <- dv[used]
  for (i in seq_along(out)) if (is.factor(out[[i]])) out[[i]] <- as.character(out[[i]])
  rownames(out) <- NULL
  out
}

#' @rdname textstat_regression
#' @param digits decimal places of the estimates and intervals (3).
#' @param ... further arguments of [print.data.frame()].
#' @return `print()` returns `x` invisibly.
#' @export
print.textstat_regression <- function(x, digits = 3, ...) {
  y <- as.data.frame(unclass(x), stringsAsFactors = FALSE)
  if ("note" %in% names(y) && !any(nzchar(y$note) & !is.na(y$note))) y$note <- NULL
  num <- intersect(c("estimate", "ci_low", "ci_high"), names(y))
  y[num] <- lapply(y[num], round, digits)
  print(y, row.names = FALSE, ...)
  invisible(x)
}
