#' Behavioural tests of a fine-tuned classifier
#'
#' `x` is a fitted model (or its folder); it is tested, nothing is fitted. Invariance, directional and minimum-functionality tests in the manner of CheckList
#' (Ribeiro et al. 2020), without its package: perturb the documents of `newdata` and check
#' that the predicted class stays the same (`expect = "same"`) or that the probability of a
#' class moves up or down (`expect = "up:CLASS"`, `"down:CLASS"`, failing when it moves the
#' other way by more than `tolerance`, or, with `min_change`, when it moves less than
#' `min_change` the expected way), or check that texts get their label
#' (`expect = "label"`: the labels of `newdata`, or every filling of `template`). Built-in
#' English perturbations: `"typos"`, `"names"`, `"locations"`, `"numbers"`, `"punctuation"`,
#' `"negation"` (added grammatically: an auxiliary, copula or modal, a contraction, perfect
#' "have", or do-support after a pronoun; questions and negative statements are skipped),
#' `"negation_removed"`; `"substitutions"` replaces every whole word of the pairs in
#' `substitutions` (any language, all pairs in one pass). Documents a perturbation leaves
#' unchanged are counted in `n_skipped` (why: each test's `skipped`). Runs `quantformer behave`.
#'
#' @param x a classifier fitted by [textmodel_finetune()], a [textmodel_tune()] result (its
#'   refit model), or a model folder.
#' @param newdata documents (a quanteda corpus, a character vector or a data frame with a
#'   `text` column); for `expect = "label"` without a template, with labels in `y`.
#' @param perturb one of the perturbations above (character).
#' @param expect `"same"`, `"up:CLASS"`, `"down:CLASS"` or `"label"`.
#' @param suite instead of `perturb`/`expect`: a suite file (`.yaml` or `.csv`) with one test
#'   per entry: `name`, `expect`, `perturb`, `substitutions`, `template`, `fill`, `label`,
#'   `tolerance`, `min_change`, `preserve_case`.
#' @param substitutions a data frame with columns `from` and `to` (character), one pair a row;
#'   anything else, or no pair, is a `quantformer_input_error` naming "the `substitutions` data
#'   frame".
#' @param preserve_case logical (default `FALSE`): substitutions match any case and keep the
#'   case of the word they replace (`GOD` -> `ALLAH`); `FALSE`: case-sensitive.
#' @param min_change `NULL` (default) or a probability in (0, 1]: directional tests pass a
#'   document only when the class's probability moves at least this much the expected way.
#' @param template,fill,label a minimum-functionality template (`"I {verb} it"`), a named
#'   list of the words of each placeholder, and the class every filled text must get.
#' @param tolerance directional tests: the largest move the wrong way that passes (0.1,
#'   CheckList's default); ignored where `min_change` is given.
#' @param y labels of `newdata` for `expect = "label"` (a docvar name or a vector).
#' @param fit the old name of `x`, accepted with a warning (class `quantformer_deprecated`)
#'   until the next release.
#' @inheritParams textmodel_finetune
#' @param precision `"auto"` (default), `"fp32"` or `"bf16"`: the numeric precision of the
#'   predictions (see [quantformer_precision]; near ties are predicted again in fp32).
#' @return An object of class `textstat_behaviour` (also `textmodel_behaviour`, its class
#'   under its old name): a list with `summary` (a data frame: one
#'   row per test with `name`, `type`, `expect`, `n`, `n_fail`, `fail_rate`, `ci_lower`,
#'   `ci_upper`: a Wilson 95% interval; `n_skipped`: documents the perturbation left
#'   unchanged; directional tests: `change_mean` with `change_ci_lower`, `change_ci_upper` (a
#'   normal 95% interval) and `share_unmoved`, the share of documents whose probability moved
#'   less than 0.01, all on the probability scale) and `tests` (each test's failing examples: original,
#'   perturbed, both predictions; for perturbation tests also `passed_examples`, up to 3 pairs
#'   that passed, so that what the perturbation did shows when nothing failed).
#' @seealso [textstat_attributions()]; `textmodel_behaviour()`, its old name.
#' @export
textstat_behaviour <- function(x, newdata = NULL, perturb = NULL, expect = NULL,
                               suite = NULL, substitutions = NULL, template = NULL,
                               fill = NULL, label = NULL, tolerance = 0.1, y = NULL,
                               text_field = "text", docid_field = "doc_id",
                               verbose = getOption("quantformer.verbose", TRUE),
                               min_change = NULL, preserve_case = FALSE,
                               precision = getOption("quantformer.precision", "auto"), fit) {
  first <- first_arguments(if (!missing(x)) x, if (!missing(fit)) fit, newdata,  # R/arguments.R
                           "fit", "textstat_behaviour", missing(x), missing(fit),
                           is.null(newdata))
  x <- first$x
  newdata <- first$second
  frame <- NULL
  if (!is.null(newdata)) {
    frame <- as_frame(newdata, text_field, docid_field, arg = "newdata")
    cols <- c("doc_id", "text")
    if (!is.null(y)) {
      frame$label <- resolve_y(y, frame)
      cols <- c(cols, "label")
    }
    frame <- frame[cols]
  }
  subs <- if (!is.null(substitutions)) substitutions_input(substitutions)
  if (!is.null(fill))
    fill <- paste(names(fill), vapply(fill, paste, "", collapse = "|"), sep = "=",
                  collapse = ";")
  res <- call_verb("behave", c("--model", model_dir_of(x, "x", exists = TRUE),
                               cli_flags(perturb = perturb, expect = expect, suite = suite,
                                         template = template, fill = fill, label = label,
                                         tolerance = tolerance, min_change = min_change,
                                         preserve_case = isTRUE(preserve_case)),
                               precision_flags(precision)),
                   inputs = list("--input" = frame, "--substitutions" = subs),
                   output = "json", simplify = FALSE, verbose = verbose,
                   r_args = setdiff(names(formals()), "fit"))$output
  cols <- c("name", "type", "expect", "n", "n_fail", "fail_rate", "ci_lower", "ci_upper",
            "n_skipped")
  summary <- do.call(rbind, lapply(res$tests, function(t) {
    ch <- t$change
    row <- c(t[cols], list(change_mean = ch$mean, change_ci_lower = ch$ci_lower,
                           change_ci_upper = ch$ci_upper, share_unmoved = ch$share_unmoved))
    as.data.frame(lapply(row, function(v) if (is.null(v)) NA else v), stringsAsFactors = FALSE)
  }))
  structure(list(summary = summary, tests = res$tests),
            class = c("textstat_behaviour", "textmodel_behaviour"))
}

#' @rdname textstat_behaviour
#' @description `textmodel_behaviour()` is its old name (it fits no model), kept for one
#'   release: it warns once a session (class `quantformer_deprecated`) and calls
#'   `textstat_behaviour()` with the same arguments.
#' @export
textmodel_behaviour <- function() {
  renamed_function("textmodel_behaviour", "textstat_behaviour", "it fits no model: it tests one")
  call <- match.call()
  call[[1L]] <- quote(quantformer::textstat_behaviour)
  eval(call, parent.frame())
}
# the same arguments as textstat_behaviour(), written once
formals(textmodel_behaviour) <- formals(textstat_behaviour)

# The `substitutions` data frame as the CSV input of `behave --substitutions` (R/call.R): its
# `from` and `to` columns as text; the core checks them, and its messages about the file speak
# of "the `substitutions` data frame" (without_temp_files(), R/python.R).
substitutions_input <- function(substitutions) {
  if (!is.data.frame(substitutions))
    input_error("`substitutions` must be a data frame with columns `from` and `to` (one pair ",
                "a row), not ", class(substitutions)[1])  # R/python.R
  cols <- intersect(c("from", "to"), names(substitutions))
  csv_input(as.data.frame(lapply(substitutions[cols], as.character), stringsAsFactors = FALSE,
                          col.names = cols))
}

#' @export
print.textstat_behaviour <- function(x, ...) {
  cat("Behavioural tests (fail rates with Wilson 95% intervals)\n")
  print(x$summary, row.names = FALSE)
  invisible(x)
}

# objects made under the old name (class `textmodel_behaviour` alone) print the same
#' @export
print.textmodel_behaviour <- print.textstat_behaviour
