#' Fine-tune a Transformer classifier on hand-coded documents
#'
#' Fine-tunes a pre-trained Transformer encoder (by default the bundled all-MiniLM-L6-v2) with
#' a classification head on the coded documents of `x`, following Wankmueller (2022),
#' sections 6.1-6.5: head+tail truncation of long documents (section 6.3), optional random
#' oversampling of minority classes (section 6.4), and the Python core's per-model default
#' learning rate and number of epochs. The work is done by `quantformer finetune` in a child
#' Python process; its progress is shown as it runs.
#'
#' Documents whose `y` is `NA` are not used for training (as in
#' `quanteda.textmodels::textmodel_nb()`), but `predict()` without `newdata` classifies them.
#'
#' @param x a quanteda corpus, a character vector (names are docnames; unnamed vectors get
#'   `text1..n`) or a data frame with a `text` column and optionally `doc_id`; other columns
#'   and corpus docvars are kept as docvars.
#' @param y the class of each document (character, factor, logical or numeric, `NA` for
#'   uncoded documents), or the name of a docvar of `x`. When `y` is a factor its level order
#'   is the class order of the model.
#' @param model `NULL` (the bundled all-MiniLM-L6-v2), a Hugging Face hub id or the path of a
#'   local model folder.
#' @param epochs,lr number of training epochs and peak learning rate; `NULL` takes the Python
#'   core's defaults for the model.
#' @param batch_size documents per training step (16).
#' @param max_length maximum subword tokens per document, special tokens included (512);
#'   longer documents are truncated.
#' @param truncation which tokens a long document keeps: `"head_tail"` (the first 128 and the
#'   last 382 of 512, the default, section 6.3), `"head"` or `"tail"`.
#' @param oversample `NULL` (no oversampling) or the minority:majority ratio (in (0, 1]) that
#'   random oversampling of the training documents reaches (section 6.4).
#' @param validation `NULL` (no validation set), a fraction in (0, 1) of the coded documents
#'   held out (stratified) for validation metrics, or labelled validation documents: a corpus
#'   or data frame with the docvar/column named by `y` (when `y` is a docvar name) or `label`,
#'   or a list `list(x = <documents>, y = <labels>)`.
#' @param seed random seed (1).
#' @param device `"auto"` (CUDA, else MPS, else CPU), `"cpu"`, `"cuda"`, `"cuda:N"` or `"mps"`.
#' @param output_dir folder to write the model to; it must not exist unless you pass
#'   `overwrite = TRUE`. The default, a folder in [tempdir()], disappears when the R session
#'   ends: give a permanent folder to keep the model (the fitted object refers to it).
#' @param verbose logical: show the Python core's progress bars and messages live
#'   (with an ETA). Default `getOption("quantformer.verbose", TRUE)`; `FALSE` shows only
#'   warnings and errors. Python tracebacks of internal errors: `options(quantformer.debug = TRUE)`.
#' @param ... further options of `quantformer finetune`, named as R arguments
#'   (`overwrite = TRUE` gives `--overwrite`; `python -m quantformer finetune --help` lists
#'   them all; most have an R argument above).
#' @return An object of class `c("textmodel_finetune", "textmodel", "list")` with
#'   `model_dir` (absolute path), `levels` (class labels in model order), `call`, `summary`
#'   (the run record `quantformer.json`: label counts, number of training documents,
#'   hyperparameters, validation metrics, versions) and `x` (the training documents, used by
#'   `predict()` without `newdata`).
#' @seealso [predict.textmodel_finetune()], [load_finetune()], [textmodel_zeroshot()]
#' @references Wankmueller, S. (2022). Introduction to Neural Transfer Learning with
#'   Transformers for Social Science Text Analysis. Sociological Methods & Research.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   train <- sotu[1:40, ]
#'   fit <- textmodel_finetune(train, y = "party", epochs = 1, max_length = 64)
#'   fit
#'   predict(fit, newdata = sotu[41:50, ])
#' }
#' }
#' @export
textmodel_finetune <- function(x, y, model = NULL, epochs = NULL, lr = NULL, batch_size = 16,
                               max_length = 512,
                               truncation = c("head_tail", "head", "tail"), oversample = NULL,
                               validation = NULL, seed = 1, device = "auto",
                               output_dir = NULL,
                               verbose = getOption("quantformer.verbose", TRUE), ...) {
  call <- match.call()
  truncation <- match.arg(truncation)
  frame <- as_frame(x)
  yy <- resolve_y(y, frame)
  levels <- label_levels(yy$y)
  label <- as.character(yy$y)
  label[!label %in% levels] <- NA
  # docvars stay in R: the core needs only ids, texts and labels
  train <- data.frame(frame[c("doc_id", "text")], label = enc2utf8(label),
                      stringsAsFactors = FALSE)
  if (is.null(output_dir)) output_dir <- tempfile("quantformer-model-")
  output_dir <- normalizePath(output_dir, mustWork = FALSE)
  in_file <- write_input(train)
  on.exit(unlink(in_file), add = TRUE)
  valid_args <- validation_args(validation, yy$name)
  if (!is.null(valid_args$file)) on.exit(unlink(valid_args$file), add = TRUE)
  args <- c("--train", in_file, "--label-col", "label", "--labels", paste(levels, collapse = ","),
            cli_flags(model = model, epochs = epochs, lr = lr, batch_size = batch_size,
                      max_length = max_length, truncation = truncation,
                      oversample = oversample, seed = seed, device = device),
            valid_args$args, "--out", output_dir, cli_flags(...))
  run_cli("finetune", args, verbose = verbose, r_args = names(formals()))
  obj <- load_finetune(output_dir)
  obj$call <- call
  obj$x <- frame
  obj
}

# CLI arguments for `validation`: a fraction or labelled documents written to a file.
validation_args <- function(validation, yname) {
  if (is.null(validation)) return(list(args = character()))
  if (is.numeric(validation) && length(validation) == 1) {
    if (!(validation > 0 && validation < 1))
      stop("`validation` as a number is the share of coded documents held out: give a value ",
           "between 0 and 1, not ", validation, call. = FALSE)
    return(list(args = c("--valid-fraction", format(validation, scientific = FALSE))))
  }
  if (is.list(validation) && !is.data.frame(validation) && all(c("x", "y") %in% names(validation))) {
    vframe <- as_frame(validation$x, arg = "validation$x")
    vy <- resolve_y(validation$y, vframe, arg = "validation$y")$y
  } else {
    vframe <- as_frame(validation, arg = "validation")
    name <- if (!is.null(yname)) yname else "label"
    vy <- resolve_y(name, vframe, arg = "the validation label")$y
  }
  vframe <- data.frame(vframe[c("doc_id", "text")], label = enc2utf8(as.character(vy)),
                       stringsAsFactors = FALSE)
  file <- write_input(vframe, prefix = "qf-valid-")
  list(args = c("--valid", file), file = file)
}

#' Rebuild a fine-tuned model object from its model directory
#'
#' Reads the run record (`quantformer.json`) of a model directory written by
#' [textmodel_finetune()] or `quantformer finetune`, so a model trained elsewhere (or in an
#' earlier session) can be used with [predict.textmodel_finetune()].
#'
#' @param dir the model directory.
#' @return A `textmodel_finetune` object (see [textmodel_finetune()]) without training
#'   documents, so `predict()` needs `newdata`.
#' @examples
#' \dontrun{
#' fit <- load_finetune("models/sotu-party")
#' predict(fit, newdata = c("We will cut taxes.", "Health care for all."))
#' }
#' @export
load_finetune <- function(dir) {
  if (!is.character(dir) || length(dir) != 1 || !dir.exists(dir))
    stop("model directory '", dir, "' does not exist; give the folder written by ",
         "textmodel_finetune(output_dir = ...)", call. = FALSE)
  rec_file <- file.path(dir, "quantformer.json")
  if (!file.exists(rec_file))
    stop("'", dir, "' is not a quantformer model directory (no quantformer.json); it may be ",
         "incomplete: fine-tune again", call. = FALSE)
  rec <- jsonlite::read_json(rec_file, simplifyVector = TRUE)
  if (!isTRUE(rec$complete))
    stop("the model in '", dir, "' is incomplete (training did not finish); fine-tune again",
         call. = FALSE)
  structure(list(model_dir = normalizePath(dir), levels = as.character(rec$labels),
                 call = NULL, summary = rec, x = NULL),
            class = c("textmodel_finetune", "textmodel", "list"))
}

check_model_dir <- function(object) {
  if (!dir.exists(object$model_dir) ||
      !file.exists(file.path(object$model_dir, "quantformer.json")))
    stop("the model directory '", object$model_dir, "' of this model no longer exists (or lost ",
         "its quantformer.json); fine-tune again, or load_finetune() a copy of the directory",
         call. = FALSE)
}

#' Predict classes or class probabilities with a fine-tuned model
#'
#' @param object a `textmodel_finetune` object.
#' @param newdata documents to classify (corpus, character vector or data frame, as `x` in
#'   [textmodel_finetune()]); `NULL` classifies the training documents.
#' @param type `"class"` (a factor) or `"probability"` (a matrix).
#' @param batch_size,device inference batch size (64) and device (`"auto"`).
#' @param backend,quantize `"torch"` (default) or `"onnx"` (ONNX Runtime on the CPU, faster;
#'   the export is cached in the model directory), and `"none"` or `"int8"` (onnx only): see
#'   [quantformer_backend]. Defaults from the options `quantformer.backend` and
#'   `quantformer.quantize`.
#' @param verbose logical: show the Python core's progress bars and messages live
#'   (with an ETA). Default `getOption("quantformer.verbose", TRUE)`; `FALSE` shows only
#'   warnings and errors. Python tracebacks of internal errors: `options(quantformer.debug = TRUE)`.
#' @param ... unused.
#' @return For `type = "class"`, a factor with the model's levels, named by docnames; for
#'   `type = "probability"`, a documents x classes matrix with docnames and levels as
#'   dimnames. Documents with empty or `NA` text get `NA`, with a warning.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   fit <- textmodel_finetune(sotu[1:40, ], y = "party", epochs = 1, max_length = 64)
#'   predict(fit, newdata = sotu[41:45, ], type = "probability")
#' }
#' }
#' @export
predict.textmodel_finetune <- function(object, newdata = NULL,
                                       type = c("class", "probability"), batch_size = 64,
                                       device = "auto",
                                       backend = getOption("quantformer.backend", "torch"),
                                       quantize = getOption("quantformer.quantize", "none"),
                                       verbose = getOption("quantformer.verbose", TRUE), ...) {
  type <- match.arg(type)
  check_model_dir(object)
  backend <- backend_flags(backend, quantize)
  frame <- if (is.null(newdata)) object$x else as_frame(newdata, arg = "newdata")
  if (is.null(frame))
    stop("this model was loaded from its directory and holds no training documents; give ",
         "`newdata`", call. = FALSE)
  classify_via_cli("predict", c("--model", object$model_dir,
                                cli_flags(batch_size = batch_size, device = device), backend),
                   frame, object$levels, type, verbose = verbose, r_args = names(formals()))
}

#' @export
print.textmodel_finetune <- function(x, ...) {
  s <- x$summary
  cat("Fine-tuned Transformer classifier (quantformer)\n")
  if (!is.null(x$call)) cat("\nCall:\n", paste(deparse(x$call), collapse = "\n"), "\n", sep = "")
  cat("\nModel:     ", format_or_na(s$model), "\n", sep = "")
  cat("Directory: ", x$model_dir, if (!dir.exists(x$model_dir)) " (MISSING)", "\n", sep = "")
  cat("Classes:   ", paste(x$levels, collapse = ", "), "\n", sep = "")
  cat("Trained on ", format_or_na(s$n_train), " documents\n", sep = "")
  invisible(x)
}

# "name: value" lines under a heading
print_fields <- function(title, values) {
  if (!length(values)) return(invisible())
  cat("\n", title, ":\n", sep = "")
  vals <- vapply(values, function(v) paste(format(v, digits = 4), collapse = ", "), "")
  cat(sprintf("  %-*s %s", max(nchar(names(vals))) + 1, paste0(names(vals), ":"), vals),
      sep = "\n")
}

format_or_na <- function(v) if (is.null(v) || !length(v)) "NA" else paste(format(v), collapse = ", ")

#' @export
summary.textmodel_finetune <- function(object, ...) {
  s <- object$summary
  counts <- unlist(s$label_counts)
  counts <- counts[intersect(object$levels, names(counts))]
  hp <- s$hyperparameters
  hp <- hp[!vapply(hp, function(v) is.null(v) || is.list(v), TRUE)]
  structure(list(call = object$call, model = s$model, model_dir = object$model_dir,
                 levels = object$levels, label_counts = counts, n_train = s$n_train,
                 n_missing_label = s$n_missing_label, hyperparameters = unlist(hp),
                 validation = s$validation, versions = unlist(s$versions), created = s$created),
            class = "summary.textmodel_finetune")
}

#' @export
print.summary.textmodel_finetune <- function(x, ...) {
  cat("Fine-tuned Transformer classifier (quantformer)\n")
  if (!is.null(x$call)) cat("\nCall:\n", paste(deparse(x$call), collapse = "\n"), "\n", sep = "")
  cat("\nModel: ", format_or_na(x$model), "\nDirectory: ", x$model_dir, "\nCreated: ",
      format_or_na(x$created), "\n", sep = "")
  cat("\nTraining documents: ", format_or_na(x$n_train), " (", format_or_na(x$n_missing_label),
      " without a label left out)\n", sep = "")
  if (length(x$label_counts)) {
    cat("\nClass counts:\n")
    print(x$label_counts)
  }
  print_fields("Hyperparameters", x$hyperparameters)
  if (length(x$validation) && !all(vapply(x$validation, is.null, TRUE)))
    print_fields("Validation", unlist(x$validation))
  invisible(x)
}
