#' Zero-shot classification without training data
#'
#' Sets up a zero-shot classifier (Wankmueller 2022, section 6.5 and Appendix J): each label is
#' put into the `hypothesis` template and a natural-language-inference model scores whether
#' the document entails it (`method = "nli"`), or documents and hypotheses are embedded and
#' compared by cosine similarity (`method = "embedding"`; `"auto"` picks NLI for NLI models and
#' embeddings otherwise, e.g. for the bundled all-MiniLM-L6-v2). Nothing is trained: the
#' documents are classified by [predict.textmodel_zeroshot()], which runs
#' `quantformer zeroshot` in a child Python process.
#'
#' @param x documents (quanteda corpus, character vector or data frame with a `text` column),
#'   classified by `predict()` when it has no `newdata`.
#' @param labels the class labels (at least two), e.g. `c("economy", "foreign policy")`; each
#'   is inserted into `hypothesis`. Label phrases may contain commas (`"taxes, spending"`);
#'   surrounding whitespace is removed; line breaks and empty labels are refused.
#' @param hypothesis the hypothesis template, with `{}` where the label goes.
#' @param model `NULL` (the Python core's default for `method`), a hub id or a local folder.
#' @param method `"auto"`, `"nli"` or `"embedding"`.
#' @param multi_label if `TRUE`, each label is scored independently (probabilities need not
#'   sum to one); if `FALSE`, the labels compete (softmax over labels).
#' @return An object of class `c("textmodel_zeroshot", "textmodel", "list")` with `x`,
#'   `labels` (the levels of predictions), `hypothesis`, `model`, `method`, `multi_label` and
#'   `call`.
#' @seealso [textmodel_finetune()]
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   zs <- textmodel_zeroshot(c(a = "Taxes are too high.", b = "Our troops will come home."),
#'                            labels = c("the economy", "war"),
#'                            hypothesis = "This text is about {}.")
#'   predict(zs)
#' }
#' }
#' @export
textmodel_zeroshot <- function(x, labels, hypothesis = "This text is about {}.", model = NULL,
                               method = c("auto", "nli", "embedding"), multi_label = FALSE) {
  call <- match.call()
  method <- match.arg(method)
  if (missing(labels) || !is.character(labels) || anyNA(labels))
    stop("`labels` must be a character vector of class labels, e.g. c(\"economy\", \"war\")",
         call. = FALSE)
  # the core strips surrounding whitespace from label phrases too: keep the levels equal
  labels <- trimws(enc2utf8(labels))
  if (anyDuplicated(labels))
    stop("`labels` has duplicates: ",
         paste0("'", unique(labels[duplicated(labels)]), "'", collapse = ", "),
         "; give each class once", call. = FALSE)
  if (length(labels) < 2)
    stop("`labels` must name at least two classes (zero-shot classification chooses among ",
         "labels), but it has ", length(labels), call. = FALSE)
  bad <- !nzchar(labels) | grepl("[\r\n]", labels)
  if (any(bad))
    stop("labels must be non-empty and on one line (no line breaks): ",
         paste0("'", labels[bad], "'", collapse = ", "), call. = FALSE)
  if (!is.character(hypothesis) || length(hypothesis) != 1 || !grepl("{}", hypothesis, fixed = TRUE))
    stop("`hypothesis` must be one string with `{}` where the label goes, e.g. ",
         "\"This text is about {}.\"", call. = FALSE)
  frame <- as_frame(x)
  structure(list(x = frame, labels = labels, hypothesis = enc2utf8(hypothesis), model = model,
                 method = method, multi_label = isTRUE(multi_label), call = call),
            class = c("textmodel_zeroshot", "textmodel", "list"))
}

#' Classify documents zero-shot
#'
#' @param object a `textmodel_zeroshot` object.
#' @param newdata documents to classify; `NULL` classifies the documents given to
#'   [textmodel_zeroshot()].
#' @param type `"class"` (a factor) or `"probability"` (a matrix).
#' @param batch_size,device passed to `quantformer zeroshot` when not `NULL`.
#' @param backend,quantize `"torch"` (default) or `"onnx"` (ONNX Runtime on the CPU, faster;
#'   the export is cached), and `"none"` or `"int8"` (onnx only): see [quantformer_backend].
#'   Defaults from the options `quantformer.backend` and `quantformer.quantize`.
#' @param verbose logical: show the Python core's progress bars and messages live
#'   (with an ETA). Default `getOption("quantformer.verbose", TRUE)`; `FALSE` shows only
#'   warnings and errors. Python tracebacks of internal errors: `options(quantformer.debug = TRUE)`.
#' @param ... unused.
#' @return For `type = "class"`, a factor with levels `labels`, named by docnames; for
#'   `type = "probability"`, a documents x labels matrix. Documents with empty or `NA` text get
#'   `NA`, with a warning.
#' @export
predict.textmodel_zeroshot <- function(object, newdata = NULL,
                                       type = c("class", "probability"), batch_size = NULL,
                                       device = NULL,
                                       backend = getOption("quantformer.backend", "torch"),
                                       quantize = getOption("quantformer.quantize", "none"),
                                       verbose = getOption("quantformer.verbose", TRUE), ...) {
  type <- match.arg(type)
  backend <- backend_flags(backend, quantize)
  frame <- if (is.null(newdata)) object$x else as_frame(newdata, arg = "newdata")
  # one label a line: label phrases may contain commas, which --labels would split on
  labels_file <- tempfile("qf-labels-", fileext = ".txt")
  writeLines(enc2utf8(object$labels), labels_file, useBytes = TRUE)
  on.exit(unlink(labels_file), add = TRUE)
  args <- c("--labels-file", labels_file,
            "--hypothesis", object$hypothesis,
            cli_flags(model = object$model, method = object$method,
                      multi_label = object$multi_label, batch_size = batch_size,
                      device = device), backend)
  classify_via_cli("zeroshot", args, frame, object$labels, type, verbose = verbose,
                   r_args = c(names(formals()), names(formals(textmodel_zeroshot))))
}

#' @export
print.textmodel_zeroshot <- function(x, ...) {
  cat("Zero-shot classifier (quantformer)\n")
  if (!is.null(x$call)) cat("\nCall:\n", paste(deparse(x$call), collapse = "\n"), "\n", sep = "")
  labs <- x$labels
  if (any(grepl(",", labs, fixed = TRUE))) labs <- paste0('"', labs, '"')  # unambiguous
  cat("\nLabels:     ", paste(labs, collapse = ", "), "\n", sep = "")
  cat("Hypothesis: ", x$hypothesis, "\n", sep = "")
  cat("Model:      ", if (is.null(x$model)) "(default)" else x$model, ", method ", x$method,
      if (x$multi_label) ", multi-label", "\n", sep = "")
  cat("Documents:  ", nrow(x$x), "\n", sep = "")
  invisible(x)
}
