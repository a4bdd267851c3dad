#' Intercoder reliability of every pair of coders, human or machine
#'
#' `x` is the codes of two or more coders (one data frame, or a named list of them).
#' Krippendorff's alpha (nominal; the `krippendorff` package) and Cohen's kappa
#' (scikit-learn), each with a percentile bootstrap interval over documents (Hayes &
#' Krippendorff 2007), and the share of documents coded alike, for every pair of coders: human
#' coders (the coding room's export, [code_documents()]), a large language model's codes
#' ([annotate_llm()]) or a model's predictions, each one more coder. In one call a language
#' model's agreement with each human sits beside the humans' agreement with each other, on the
#' same documents: the validation Ziems et al. (2024) and Halterman & Keith (2025) ask for
#' before a machine's codes are used. Runs `quantformer reliability`.
#'
#' @param x the codes: a data frame with one row per code, `doc_id`, `label` and `coder`
#'   (the coding room's export and [annotate_llm()]'s output have these columns), or a named
#'   list of such data frames; a data frame of the list without a `coder` column is one coder
#'   named by its list name. A missing `label` (a skipped document, an unparsed answer) is no
#'   code. A coder who appears in two list elements is two coders, named `coder (name)`.
#' @param documents `"common"` (default): every pair on the documents that every coder coded,
#'   so that the pairs' statistics are comparable; `"pair"`: each pair on the documents both
#'   of its coders coded.
#' @param level confidence level of the bootstrap intervals (0.95).
#' @param n_boot bootstrap resamples of the documents (1000).
#' @param seed seed of the resampling (0); the same seed gives the same intervals.
#' @template verbose
#' @return A data frame of class `textstat_reliability`, one row per pair of coders (in the
#'   order the coders first appear): `coder_1`, `coder_2`, `n_documents`,
#'   `percent_agreement`, `krippendorff_alpha`, `alpha_ci_low`, `alpha_ci_high`,
#'   `cohen_kappa`, `kappa_ci_low`, `kappa_ci_high` (`NA` where a statistic is undefined,
#'   e.g. one class only). Fewer than two coders, a coder with two codes for one document and
#'   a pair with fewer than two shared documents are errors.
#' @references Hayes, A. F., & Krippendorff, K. (2007). Answering the call for a standard
#'   reliability measure for coding data. *Communication Methods and Measures*, 1(1), 77-89.
#'
#'   Ziems, C., Held, W., Shaikh, O., Chen, J., Zhang, Z., & Yang, D. (2024). Can large
#'   language models transform computational social science? *Computational Linguistics*,
#'   50(1), 237-291.
#'
#'   Halterman, A., & Keith, K. A. (2025). Codebook LLMs: Evaluating LLMs as measurement
#'   tools for political science concepts. *Political Analysis*.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   humans <- data.frame(doc_id = rep(paste0("d", 1:6), 2),
#'                        coder = rep(c("ann", "ben"), each = 6),
#'                        label = c("a", "a", "b", "b", "a", "b", "a", "b", "b", "b", "a", "b"))
#'   machine <- data.frame(doc_id = paste0("d", 1:6), label = c("a", "a", "b", "a", "a", "b"))
#'   textstat_reliability(list(room = humans, llm = machine))
#' }
#' }
#' @export
textstat_reliability <- function(x, documents = c("common", "pair"), level = 0.95,
                                 n_boot = 1000, seed = 0, verbose = FALSE) {
  documents <- match_choice(documents)
  res <- call_verb("reliability",
                   cli_flags(documents = documents, level = level, n_boot = n_boot, seed = seed),
                   inputs = list("--codes" = codes_frame(x)), output = "rds", verbose = verbose,
                   r_args = names(formals()))$output
  class(res) <- c("textstat_reliability", "textstat", "data.frame")
  res
}

# x (a data frame of codes, or a named list of them) -> one long frame doc_id, coder, label
codes_frame <- function(x) {
  if (is.data.frame(x)) x <- list(x)
  if (!is.list(x) || !length(x) || !all(vapply(x, is.data.frame, TRUE)))
    input_error("`x` must be a data frame of codes (doc_id, coder, label) or a named list of ",
                "them", call. = FALSE)
  labels <- names(x)
  if (is.null(labels)) labels <- rep("", length(x))
  parts <- Map(function(codes, name) {
    miss <- setdiff(c("doc_id", "label"), names(codes))
    if (length(miss))
      input_error("`x` has codes without the column(s) ", paste(miss, collapse = ", "),
                  "; give doc_id, label and coder", call. = FALSE)
    coder <- if ("coder" %in% names(codes)) as.character(codes$coder)
             else if (nzchar(name)) rep(name, nrow(codes))
             else input_error("`x` has codes without a `coder` column and without a name in ",
                              "the list; name it, e.g. list(llm = codes)", call. = FALSE)
    data.frame(doc_id = enc2utf8(as.character(codes$doc_id)), coder = enc2utf8(coder),
               label = enc2utf8(as.character(codes$label)), part = name,
               stringsAsFactors = FALSE)
  }, x, labels)
  out <- do.call(rbind, parts)
  twice <- names(which(tapply(out$part, out$coder, function(p) length(unique(p))) > 1))
  again <- out$coder %in% twice
  out$coder[again] <- paste0(out$coder[again], " (", out$part[again], ")")
  out$part <- NULL
  rownames(out) <- NULL
  out
}

#' @rdname textstat_reliability
#' @param x a `textstat_reliability` object (for `print()`).
#' @param digits decimal places of the statistics (3).
#' @param ... further arguments of [print.data.frame()].
#' @return `print()` returns `x` invisibly.
#' @export
print.textstat_reliability <- function(x, digits = 3, ...) {
  y <- as.data.frame(unclass(x), stringsAsFactors = FALSE)
  num <- vapply(y, is.double, TRUE)
  y[num] <- lapply(y[num], round, digits)
  print(y, row.names = FALSE, ...)
  invisible(x)
}
