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
#' @param x documents (quanteda corpus, character vector or data frame with a text column),
#'   classified by `predict()` when it has no `newdata`.
#' @param labels the class labels (at least two), e.g. `c("economy", "foreign policy")`; each
#'   is inserted into `hypothesis`. Label phrases may contain commas (`"taxes, spending"`);
#'   surrounding whitespace is removed; line breaks and empty labels are refused.
#' @param hypothesis the hypothesis template, with `{}` where the label goes.
#' @param model `NULL` (the Python core's default for `method`), a hub id or a local folder.
#' @param method `"auto"`, `"nli"` or `"embedding"`.
#' @param multi_label if `TRUE`, each label is scored independently (probabilities need not
#'   sum to one); if `FALSE`, the labels compete (softmax over labels).
#' @param max_length `NULL` (the core's default: 512 or the model's limit for NLI, where it
#'   bounds premise and hypothesis; the model's sentence-transformers `max_seq_length`, 256
#'   for the default model, for embeddings) or the tokens per input (integer).
#' @param truncation `NULL` (the core's `"head_tail"`), `"head_tail"`, `"head"`, `"tail"` or
#'   `"chunks"`: every document read whole as overlapping windows of `max_length` tokens. The
#'   embedding method then compares the mean of a document's window embeddings with each
#'   hypothesis (as [textstat_embeddings()] with `truncation = "chunks"`); NLI pairs every
#'   window with each hypothesis and takes the `aggregate` of the windows' entailment logits
#'   per document and label.
#' @param stride,max_chunks `truncation = "chunks"` only, as in [textstat_embeddings()] (NLI:
#'   `stride` counts the tokens of the premise's window, which leaves room for the
#'   hypothesis).
#' @param aggregate `truncation = "chunks"` with NLI only: `"mean"` (default) or `"max"` of the
#'   windows' entailment logits.
#' @inheritParams textmodel_finetune
#' @template verbose
#' @return An object of class `c("textmodel_zeroshot", "textmodel", "list")` with `x`,
#'   `labels` (the levels of predictions), `hypothesis`, `model`, `method`, `multi_label`,
#'   `reading` (the list of `max_length`, `truncation`, `stride`, `max_chunks` and
#'   `aggregate` given), `verbose` (as given, else `NULL`) and `call`. `summary()` gives the label, the
#'   hypothesis each label makes, the model and the documents.
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
                               method = c("auto", "nli", "embedding"), multi_label = FALSE,
                               max_length = NULL, truncation = NULL, stride = NULL,
                               max_chunks = NULL, aggregate = NULL,
                               text_field = "text", docid_field = "doc_id",
                               verbose = getOption("quantformer.verbose", TRUE)) {
  call <- match.call()
  method <- match_choice(method)
  truncation <- match_truncation(truncation)  # R/reading.R
  if (missing(labels) || !is.character(labels) || anyNA(labels))
    input_error("`labels` must be a character vector of class labels, e.g. c(\"economy\", \"war\")",
               call. = FALSE)
  labels <- check_zeroshot_labels(enc2utf8(labels), isTRUE(multi_label))
  if (!is.character(hypothesis) || length(hypothesis) != 1 || !grepl("{}", hypothesis, fixed = TRUE))
    input_error("`hypothesis` must be one string with `{}` where the label goes, e.g. ",
               "\"This text is about {}.\"", call. = FALSE)
  frame <- as_frame(x, text_field, docid_field)
  structure(list(x = frame, labels = labels, hypothesis = enc2utf8(hypothesis), model = model,
                 method = method, multi_label = isTRUE(multi_label),
                 reading = list(max_length = max_length, truncation = truncation,
                                stride = stride, max_chunks = max_chunks,
                                aggregate = aggregate),
                 verbose = given_verbose(verbose, !missing(verbose)), call = call),
            class = c("textmodel_zeroshot", "textmodel", "list"))
}

#' Classify documents zero-shot
#'
#' One run of `quantformer zeroshot` gives both the class and the probabilities of each
#' document; `type` chooses what R keeps (`"both"` keeps both).
#'
#' @param object a `textmodel_zeroshot` object.
#' @param newdata documents to classify; `NULL` classifies the documents given to
#'   [textmodel_zeroshot()].
#' @param type `"class"` (a factor), `"probability"` (a matrix) or `"both"` (a data frame).
#' @param batch_size,device passed to `quantformer zeroshot` when not `NULL`.
#' @inheritParams predict.textmodel_finetune
#' @template verbose
#' @param backend,quantize `"torch"` (default) or `"onnx"` (ONNX Runtime on the CPU, faster;
#'   the export is cached), and `"none"` or `"int8"` (onnx only): see [quantformer_backend].
#'   Defaults from the options `quantformer.backend` and `quantformer.quantize`.
#' @param precision `"auto"` (default: bf16 where the CPU has AMX or AVX-512 BF16 or the GPU
#'   supports it, fp32 elsewhere; multi-label runs stay fp32), `"fp32"` or `"bf16"` (character,
#'   one value): the numeric precision of the model (see [quantformer_precision]). In bf16,
#'   documents whose top-two label probability margin is below 0.05 are scored again in fp32,
#'   so labels match fp32's; probabilities can differ in the third decimal with the batch
#'   (0.014 from Hugging Face's fp32 NLI pipeline): `"fp32"` is the reproducible choice.
#'   Default from the option `quantformer.precision`. `"bf16"` with
#'   `backend = "onnx"` or `multi_label = TRUE` is an error.
#' @return For `type = "class"`, a factor with levels `labels`, named by docnames; for
#'   `type = "probability"`, a documents x labels matrix; for `type = "both"`, a data frame:
#'   `doc_id`, `predicted` (the factor) and one `prob_<label>` column per label. Documents
#'   with empty or `NA` text get `NA`, with a warning.
#' @export
predict.textmodel_zeroshot <- function(object, newdata = NULL,
                                       type = c("class", "probability", "both"),
                                       batch_size = NULL, device = NULL, text_field = "text",
                                       docid_field = "doc_id",
                                       backend = getOption("quantformer.backend", "torch"),
                                       quantize = getOption("quantformer.quantize", "none"),
                                       precision = getOption("quantformer.precision", "auto"),
                                       verbose = NULL, ...) {
  check_dots(..., fun = "predict.textmodel_zeroshot")
  type <- match_choice(type)
  backend <- c(backend_flags(backend, quantize), precision_flags(precision))  # R/precision.R
  frame <- if (is.null(newdata)) object$x
           else as_frame(newdata, text_field, docid_field, arg = "newdata")
  # one label a line: label phrases may contain commas, which --labels would split on
  args <- c("--hypothesis", object$hypothesis,
            cli_flags(model = object$model, method = object$method,
                      multi_label = object$multi_label, batch_size = batch_size,
                      device = device),
            do.call(cli_flags, as.list(object$reading)), backend)
  out <- predict_frame("zeroshot", args, frame, inputs = list("--labels-file" = object$labels),
                       verbose = model_verbose(verbose, object),
                       r_args = c(names(formals()), names(formals(textmodel_zeroshot))))
  prediction_result(out, frame, object$labels, type)
}

#' Print or summarise a zero-shot classifier
#'
#' @param x,object a `textmodel_zeroshot` object (for `print.summary...`, its summary).
#' @param ... not used.
#' @return `print()` returns `x` invisibly. `summary()` returns an object of class
#'   `summary.textmodel_zeroshot`: `call`, `model` (`NULL` for the core's default), `method`,
#'   `multi_label`, `hypotheses` (a data frame: `label` and the `hypothesis` the model tests
#'   for it), `n_documents` and `n_empty` (documents with empty or `NA` text, which get `NA`).
#' @name summary.textmodel_zeroshot
#' @export
print.textmodel_zeroshot <- function(x, ...) {
  cat("Zero-shot classifier (quantformer)\n")
  print_call(x$call)
  labs <- x$labels
  if (any(grepl(",", labs, fixed = TRUE))) labs <- paste0('"', labs, '"')  # unambiguous
  cat("\nLabels:     ", paste(labs, collapse = ", "), "\n", sep = "")
  cat("Hypothesis: ", x$hypothesis, "\n", sep = "")
  cat("Model:      ", if (is.null(x$model)) "(default)" else x$model, ", method ", x$method,
      if (x$multi_label) ", multi-label", "\n", sep = "")
  cat("Documents:  ", nrow(x$x), "\n", sep = "")
  invisible(x)
}

#' @rdname summary.textmodel_zeroshot
#' @export
summary.textmodel_zeroshot <- function(object, ...) {
  hyp <- vapply(object$labels, function(l) sub("{}", l, object$hypothesis, fixed = TRUE), "")
  empty <- is.na(object$x$text) | !nzchar(trimws(object$x$text))
  structure(list(call = object$call, model = object$model, method = object$method,
                 multi_label = object$multi_label,
                 hypotheses = data.frame(label = object$labels, hypothesis = unname(hyp),
                                         stringsAsFactors = FALSE),
                 n_documents = nrow(object$x), n_empty = sum(empty)),
            class = "summary.textmodel_zeroshot")
}

#' @rdname summary.textmodel_zeroshot
#' @export
print.summary.textmodel_zeroshot <- function(x, ...) {
  print_summary(x, "Zero-shot classifier", function() {  # R/textmodel-methods.R
    cat("\nModel:     ", if (is.null(x$model)) "(the core's default for the method)" else x$model,
        "\nMethod:    ", x$method,
        if (x$multi_label) " (multi-label: each label scored on its own)"
        else " (labels compete: probabilities sum to 1)",
        "\nDocuments: ", x$n_documents,
        if (x$n_empty) paste0(" (", x$n_empty, " with empty or missing text: NA predictions)"),
        "\n\nHypotheses tested, one per label:\n", sep = "")
    print(x$hypotheses, row.names = FALSE, right = FALSE)
  })
}

# `labels` checked by the core's rules (core_rules()$zeroshot_labels, the rules of
# quantformer.infer.zeroshot.check_labels) before any documents are sent: stripped as the core
# strips them (so that the levels of the predictions are the labels), then non-empty, on one
# line, distinct and enough of them. Returns the labels as the core will see them.
check_zeroshot_labels <- function(labels, multi_label) {
  rules <- core_rules()$zeroshot_labels  # R/python.R
  if (is.null(rules)) return(labels)
  if (isTRUE(rules$strip)) labels <- trimws(labels)
  bad <- (isTRUE(rules$nonempty) & !nzchar(labels)) |
    (isTRUE(rules$one_line) & grepl("[\r\n]", labels))
  if (any(bad))
    input_error("labels must be non-empty and on one line (no line breaks): ",
                paste0("'", labels[bad], "'", collapse = ", "))
  if (isTRUE(rules$distinct) && anyDuplicated(labels))
    input_error("`labels` has duplicates: ",
                paste0("'", unique(labels[duplicated(labels)]), "'", collapse = ", "),
                "; give each class once")
  fewest <- if (multi_label) rules$min_labels_multi_label else rules$min_labels
  if (length(labels) < fewest)
    input_error("`labels` must name at least ",
                if (fewest %in% 1:3) c("one", "two", "three")[fewest] else fewest,
                " class", if (fewest > 1) "es",
                if (!multi_label) " (zero-shot classification chooses among labels; with ",
                if (!multi_label) "multi_label = TRUE each label is scored on its own)",
                ", but it has ", length(labels))
  labels
}
