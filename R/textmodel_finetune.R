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
#'   `text1..n`) or a data frame with a text column (`text_field`) and optionally a
#'   document-name column (`docid_field`); other columns and corpus docvars are kept as
#'   docvars.
#' @param y the class of each document (character, factor, logical or numeric, `NA` for
#'   uncoded documents), or the name of a docvar of `x`. When `y` is a factor its level order
#'   is the class order of the model; levels no coded document has are left out, with a
#'   message. A numeric `y` with more than 10 distinct values (a year, a score) warns that each
#'   value becomes a class: use `task = "regression"` for a numeric outcome, `factor(y)` to keep
#'   the classes. For `task = "regression"` a numeric vector (or docvar name); for
#'   `task = "multilabel"` see `task`.
#' @param model `NULL` (the bundled all-MiniLM-L6-v2), a Hugging Face hub id, the path of a
#'   local model folder or an encoder pretrained further on your texts ([pretrain_encoder()]).
#' @param epochs,lr number of training epochs and peak learning rate; `NULL` takes the Python
#'   core's defaults for the model.
#' @param batch_size documents per training step (16).
#' @param max_length integer or `NULL`: maximum subword tokens per document, special tokens
#'   included; longer documents are truncated. `NULL` (the default) leaves it to the core:
#'   512 for the standard and NLI methods, and for `method = "setfit"` the
#'   sentence-transformer body's own limit (256 for the default model). The value used is
#'   shown by `print()` and `summary()` of the fitted model.
#' @param truncation `NULL` or which tokens a long document keeps: `"head_tail"` (the first 128
#'   and the last 382 of 512, Wankmueller 2022, section 6.3), `"head"` or `"tail"`; or `"chunks"`: nothing is
#'   cut, each document is read as overlapping windows of `max_length` tokens and the loss is
#'   taken on the aggregate of its windows' logits (Pappagari et al. 2019). With
#'   `method = "setfit"` or `"nli"` training cuts each document by head+tail (their recipes
#'   train on single inputs) and prediction reads the windows (SetFit: the mean of the
#'   windows' embeddings goes into the logistic head; NLI: the aggregate of the windows'
#'   entailment logits); the record says so (`chunk_training` `"head_tail"`). `NULL` (the
#'   default) leaves it to the core: `"head_tail"`, and `"head"` for `method = "setfit"` (as
#'   sentence-transformers cuts).
#' @param stride,max_chunks,aggregate `truncation = "chunks"` only: tokens neighbouring
#'   windows share (integer, smaller than the window; `NULL`: a quarter of it), the first
#'   windows kept per document at most (integer >= 1; `NULL`: all, a warning counts the
#'   documents with more), and how window logits make the document's: `"mean"` (default) or
#'   `"max"` (regression: the mean or max output). The model records them and [predict()]
#'   reads documents the same way. Each window as a training example with its document's
#'   label instead: `chunk_training = "labels"` (passed through `...`).
#' @param oversample `NULL` (no oversampling) or the minority:majority ratio (in (0, 1]) that
#'   random oversampling of the training documents reaches (section 6.4).
#' @param validation `NULL` (no validation set), a fraction in (0, 1) of the coded documents
#'   held out (stratified) for validation metrics, or labelled validation documents: a corpus
#'   or data frame with the docvar/column named by `y` (when `y` is a docvar name) or `label`,
#'   or a list `list(x = <documents>, y = <labels>)`. A data frame is read with the same
#'   `text_field` and `docid_field` as `x`.
#' @param task `"classification"` (the default; numeric codes stay classes), `"regression"`
#'   (numeric `y`; the model predicts a number, trained on standardised values) or
#'   `"multilabel"` (`y` a logical/0-1 matrix or data frame with one named column per label, or
#'   a character vector of docvar names). Validation documents take the same kinds of
#'   labels: `list(x = <documents>, y = <numbers / matrix / docvar names>)`, or a corpus or
#'   data frame with the docvar(s) named by `y` (for a matrix `y`: its column names).
#' @param seed random seed (1).
#' @param method `"standard"` (this fine-tuning recipe) or `"setfit"`: few-shot fine-tuning
#'   for 8-64 coded documents per class (SetFit, Tunstall et al. 2022: contrastive training of
#'   the sentence-transformer body on document pairs, then a logistic-regression head);
#'   `epochs`, `lr` and `batch_size` apply to the body (defaults 1 epoch, 1e-4, 16), and
#'   `setfit_iterations = N` (passed in `...`; default 5) sets the pairs drawn per document
#'   and direction; `validation` and `oversample` cannot be used with it; or `"nli"`: an NLI
#'   `model` (one with an "entailment" label, e.g.
#'   `"MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli"`) fine-tuned on the classes written as
#'   hypotheses (Laurer et al. 2023): each coded document is the premise of its class's
#'   hypothesis (entailment) and of other classes' hypotheses (not entailment); `predict()`
#'   gives each class the softmax of its hypothesis's entailment score. Defaults 7 epochs,
#'   `lr` 2e-5; `batch_size` counts document-hypothesis pairs; `oversample` cannot be used.
#' @param hypothesis,label_phrases `method = "nli"` only: the hypothesis template, with `{}`
#'   where the class's phrase goes (default `"This text is about {}."`), and a named
#'   character vector giving each class its phrase, e.g. `c(pro = "in favor of", con =
#'   "against")` (default: the class names themselves; every class needs one).
#' @param device `"auto"` (CUDA, else MPS, else CPU), `"cpu"`, `"cuda"`, `"cuda:N"` or `"mps"`.
#' @param output_dir folder to write the model to; it must not exist unless you pass
#'   `overwrite = TRUE`. The default is a new folder in the persistent per-user model folder,
#'   `tools::R_user_dir("quantformer", "data")/models/<id>`, so a fit saved with [saveRDS()]
#'   is usable in a later session; [quantformer_models()] lists those models and
#'   [quantformer_remove_model()] deletes them. `print()` shows the folder, and marks a model
#'   in [tempdir()] as temporary.
#' @param text_field,docid_field for data frames: the column holding the texts (default
#'   `"text"`) and the one holding the document names (default `"doc_id"`; when absent, row
#'   names or `text1..n` are used), each by name or number, as in `quanteda::corpus()`.
#'   Ignored for corpora and character vectors.
#' @template verbose
#' @param ... further options of `quantformer finetune`, named as R arguments
#'   (`overwrite = TRUE` gives `--overwrite`; `python -m quantformer finetune --help` lists
#'   them all; most have an R argument above).
#' @return An object of class `c("textmodel_finetune", "textmodel", "list")` with
#'   `model_dir` (absolute path), `levels` (class labels in model order), `call`, `summary`
#'   (the run record `quantformer.json`: label counts, number of training documents,
#'   hyperparameters, validation metrics, versions), `x` (the training documents, used by
#'   `predict()` without `newdata`), `temporary` (`TRUE` when `model_dir` is in [tempdir()])
#'   and `verbose` (the `verbose` given, else `NULL`; the default of `predict()`).
#' @seealso [predict.textmodel_finetune()], [load_finetune()], [textmodel_zeroshot()]
#' @references Wankmueller, S. (2022). Introduction to Neural Transfer Learning with
#'   Transformers for Social Science Text Analysis. Sociological Methods & Research.
#'
#'   Laurer, M., van Atteveldt, W., Casas, A. and Welbers, K. (2023). Less Annotating, More
#'   Classifying: Addressing the Data Scarcity Issue of Supervised Machine Learning with Deep
#'   Transfer Learning and BERT-NLI. Political Analysis.
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
#' \dontrun{
#' # few codes: an NLI model (downloaded from the Hugging Face hub once) and the classes as
#' # hypotheses (Laurer et al. 2023)
#' fit <- textmodel_finetune(train, y = "party", method = "nli",
#'                           model = "MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli",
#'                           hypothesis = "This speech is by a {} president.")
#' }
#' @export
textmodel_finetune <- function(x, y, model = NULL, epochs = NULL, lr = NULL, batch_size = 16,
                               max_length = NULL,
                               truncation = NULL, oversample = NULL,
                               validation = NULL, stride = NULL, max_chunks = NULL,
                               aggregate = NULL,
                               task = c("classification", "regression", "multilabel"),
                               seed = 1, method = c("standard", "setfit", "nli"),
                               hypothesis = NULL, label_phrases = NULL, device = "auto",
                               output_dir = NULL, text_field = "text", docid_field = "doc_id",
                               verbose = getOption("quantformer.verbose", TRUE), ...) {
  call <- match.call()
  truncation <- match_truncation(truncation)  # R/reading.R
  if (!is.null(list(...)$precision)) check_precision(list(...)$precision, "train")  # R/precision.R
  task <- match_choice(task)
  method <- match_choice(method)
  frame <- as_frame(x, text_field, docid_field)
  yy <- task_training_frame(task, frame, y)  # R/tasks.R
  label_args <- c(yy$args, if (task == "classification")
    c("--labels", paste(yy$levels, collapse = ",")))
  if (is.null(output_dir)) output_dir <- new_model_dir()  # R/models.R
  output_dir <- normalizePath(output_dir, mustWork = FALSE)
  valid <- task_validation_args(task, validation, yy, text_field, docid_field)  # R/tasks.R
  args <- c(label_args,
            cli_flags(model = model, epochs = epochs, lr = lr, batch_size = batch_size,
                      max_length = max_length, truncation = truncation,
                      oversample = oversample, seed = seed, device = device,
                      method = if (method != "standard") method, hypothesis = hypothesis,
                      stride = stride, max_chunks = max_chunks, aggregate = aggregate),
            valid$args, "--out", output_dir, cli_flags(...))
  res <- call_verb("finetune", args, inputs = c(list("--train" = yy$train), valid$inputs,
                                          nli_phrase_inputs(label_phrases)),  # R/nli.R
                   outputs = list("--record" = "json"),  # the record comes with the answer
                   verbose = verbose, r_args = names(formals()))
  obj <- finetune_object(output_dir, res$outputs[[1]])
  obj$call <- call
  obj$x <- frame
  obj$verbose <- given_verbose(verbose, !missing(verbose))
  obj
}

# CLI arguments for `validation`: `args`, a fraction, or `inputs`, labelled documents for
# call_verb(). The
# label of validation documents is always a docvar name (`y`'s name, else "label"), even for
# one document.
validation_args <- function(validation, yname, text_field = "text", docid_field = "doc_id") {
  if (is.null(validation)) return(list(args = character(), inputs = list()))
  if (is.numeric(validation) && length(validation) == 1) {
    if (!(validation > 0 && validation < 1))
      input_error("`validation` as a number is the share of coded documents held out: give a value ",
                 "between 0 and 1, not ", validation, call. = FALSE)
    return(list(args = c("--valid-fraction", format(validation, scientific = FALSE)),
                inputs = list()))
  }
  if (is.list(validation) && !is.data.frame(validation) && all(c("x", "y") %in% names(validation))) {
    vframe <- as_frame(validation$x, text_field, docid_field, arg = "validation$x")
    vy <- resolve_y(validation$y, vframe, arg = "validation$y", x_arg = "validation$x")$y
  } else {
    vframe <- as_frame(validation, text_field, docid_field, arg = "validation")
    name <- if (!is.null(yname)) yname else "label"
    vy <- resolve_y(name, vframe, arg = if (is.null(yname)) "the validation label" else "y",
                    name_only = TRUE, x_arg = "validation")$y
  }
  vframe <- data.frame(vframe[c("doc_id", "text")], label = enc2utf8(as.character(vy)),
                       stringsAsFactors = FALSE)
  list(args = character(), inputs = list("--valid" = vframe))
}

#' Predict classes or class probabilities with a fine-tuned model
#'
#' One run of `quantformer predict` gives both the class and the class probabilities of each
#' document; `type` chooses what R keeps, and `type = "both"` keeps both (no second run).
#'
#' @param object a `textmodel_finetune` object.
#' @param newdata documents to classify (corpus, character vector or data frame, as `x` in
#'   [textmodel_finetune()]); `NULL` classifies the training documents.
#' @param type `"class"` (a factor), `"probability"` (a matrix) or `"both"` (a data frame).
#' @param batch_size,device inference batch size (64) and device (`"auto"`).
#' @inheritParams textmodel_finetune
#' @template verbose
#' @param ... not used: unknown arguments (e.g. a misspelt `tpye`) give a warning.
#' @param backend,quantize `"torch"` (default) or `"onnx"` (ONNX Runtime on the CPU, faster;
#'   the export is cached in the model directory), and `"none"` or `"int8"` (onnx only): see
#'   [quantformer_backend]. Defaults from the options `quantformer.backend` and
#'   `quantformer.quantize`.
#' @param calibrated `TRUE` applies the temperature stored by [calibrate_finetune()] to the
#'   probabilities (classifiers only; an error when the model has not been calibrated).
#' @param precision `"auto"` (default: bf16 where the CPU has AMX or AVX-512 BF16 or the GPU
#'   supports it, fp32 elsewhere), `"fp32"` or `"bf16"`; in bf16, near ties (top-two margin
#'   under 0.05) are predicted again in fp32: see [quantformer_precision]. In bf16
#'   probabilities can differ in the third decimal with the batch and the partitioning (labels
#'   do not); `"fp32"` is the reproducible choice. Default from the option
#'   `quantformer.precision`.
#' @param truncation,stride,max_chunks,aggregate `NULL` (the default): documents are read as
#'   the model was fine-tuned. `truncation = "chunks"` reads every document whole as
#'   overlapping windows of the model's `max_length` tokens, neighbours sharing `stride`
#'   tokens, at most `max_chunks` windows per document, one prediction per document from the
#'   `"mean"` or `"max"` (`aggregate`) of its windows' logits (SetFit: the mean of the
#'   windows' embeddings into its head; NLI: of the windows' entailment logits); another
#'   `truncation` than the training one (`"head_tail"`, `"head"`, `"tail"`) warns, naming
#'   both.
#' @return For `type = "class"`, a factor with the model's levels, named by docnames; for
#'   `type = "probability"`, a documents x classes matrix with docnames and levels as
#'   dimnames; for `type = "both"`, a data frame with one row per document: `doc_id`,
#'   `predicted` (the factor) and `prob_<class>` (one probability column per class, in level
#'   order). A regression model gives a numeric vector named by docnames; a multi-label
#'   model a logical documents x labels matrix (`type = "probability"`: the probabilities;
#'   `type = "both"`: a data frame of `doc_id`, `predicted_<label>` and `prob_<label>`).
#'   Documents with empty or `NA` text get `NA`, with a warning.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   fit <- textmodel_finetune(sotu[1:40, ], y = "party", epochs = 1, max_length = 64)
#'   predict(fit, newdata = sotu[41:45, ], type = "probability")
#'   predict(fit, newdata = sotu[41:45, ], type = "both")
#' }
#' }
#' @export
predict.textmodel_finetune <- function(object, newdata = NULL,
                                       type = c("class", "probability", "both"),
                                       batch_size = 64, device = "auto", text_field = "text",
                                       docid_field = "doc_id",
                                       backend = getOption("quantformer.backend", "torch"),
                                       quantize = getOption("quantformer.quantize", "none"),
                                       calibrated = FALSE, verbose = NULL,
                                       precision = getOption("quantformer.precision", "auto"),
                                       truncation = NULL, stride = NULL, aggregate = NULL,
                                       max_chunks = NULL, ...) {
  check_dots(..., fun = "predict.textmodel_finetune")
  truncation <- match_truncation(truncation)  # R/reading.R
  type <- match_choice(type)
  check_model_dir(object)
  backend <- c(backend_flags(backend, quantize), precision_flags(precision))  # R/precision.R
  frame <- if (is.null(newdata)) object$x
           else as_frame(newdata, text_field, docid_field, arg = "newdata")
  if (is.null(frame))
    input_error("this model was loaded from its directory and holds no training documents; give ",
               "`newdata`", call. = FALSE)
  classifier <- is.null(object$task) || object$task == "classification"
  if (!classifier) check_task_predict(object, type, calibrated)  # R/tasks.R
  out <- predict_frame("predict", c("--model", object$model_dir,
                                    cli_flags(batch_size = batch_size, device = device,
                                              calibrated = isTRUE(calibrated),
                                              truncation = truncation, stride = stride,
                                              max_chunks = max_chunks,
                                              aggregate = aggregate), backend),
                       frame, verbose = model_verbose(verbose, object), r_args = names(formals()))
  if (classifier) prediction_result(out, frame, object$levels, type)
  else task_prediction_result(object, out, frame, type)
}

#' Print or summarise a fine-tuned model
#'
#' `print()` shows the model, its folder, classes and training size; `summary()` adds the class
#' counts, every hyperparameter and the validation metrics as small rounded tables. A model
#' folder in [tempdir()] is marked as temporary, with how to keep it.
#'
#' @param x,object a `textmodel_finetune` object (for `print.summary...`, its summary).
#' @param digits significant digits of the validation metrics (3).
#' @param ... not used.
#' @return `print()` returns `x` invisibly; `summary()` an object of class
#'   `summary.textmodel_finetune`: `call`, `model`, `model_dir`, `temporary`, `levels`,
#'   `label_counts`, `n_train`, `n_missing_label`, `hyperparameters` (a named character
#'   vector), `validation` (`NULL`, or a list: `source`, `metrics` (named numbers: `n`,
#'   `accuracy`, `macro_f1`, ...) and `per_class` (a data frame: `class`, `precision`,
#'   `recall`, `f1`, `support`)), `versions` and `created`.
#' @name summary.textmodel_finetune
#' @export
print.textmodel_finetune <- function(x, ...) {
  s <- x$summary
  cat("Fine-tuned Transformer classifier (quantformer)\n")
  print_call(x$call)
  cat("\nModel:     ", format_or_na(s$model), "\n", sep = "")
  print_model_dir("Directory: ", x)
  if (!is.null(x$task) && x$task != "classification") cat("Task:      ", x$task, "\n", sep = "")
  if (!is.null(s$method) && s$method != "standard")
    cat("Method:    ", s$method, if (!is.null(s$hypothesis))
      paste0(" (hypothesis \"", s$hypothesis, "\")"), "\n", sep = "")
  if (length(x$levels)) cat(if (identical(x$task, "multilabel")) "Labels:    " else "Classes:   ",
                            paste(x$levels, collapse = ", "), "\n", sep = "")
  cat("Trained on ", format_or_na(s$n_train), " documents\n", sep = "")
  hp <- s$hyperparameters
  if (!is.null(hp$max_length))
    if (identical(hp$truncation, "chunks"))
      cat("Documents: read whole in windows of ", hp$max_length, " tokens (chunks, stride ",
          if (is.null(hp$stride)) "a quarter of the window" else hp$stride,
          if (!is.null(hp$max_chunks)) paste0(", at most ", hp$max_chunks, " windows"),
          "; ", if (is.null(hp$aggregate)) "mean" else hp$aggregate, " of the window logits)\n",
          sep = "")
    else
      cat("Documents: up to ", hp$max_length, " tokens",
          if (!is.null(hp$truncation)) paste0(" (", hp$truncation, " truncation)"), "\n", sep = "")
  invisible(x)
}

#' @rdname summary.textmodel_finetune
#' @export
summary.textmodel_finetune <- function(object, ...) {
  s <- object$summary
  counts <- unlist(s$label_counts)
  counts <- counts[intersect(object$levels, names(counts))]
  hp <- s$hyperparameters
  hp <- hp[!vapply(hp, function(v) is.null(v) || is.list(v), TRUE)]
  structure(list(call = object$call, model = s$model, model_dir = object$model_dir,
                 temporary = isTRUE(object$temporary), levels = object$levels,
                 label_counts = counts, n_train = s$n_train,
                 n_missing_label = s$n_missing_label, hyperparameters = unlist(hp),
                 validation = validation_tables(s$validation, object$levels),
                 versions = unlist(s$versions), created = s$created),
            class = "summary.textmodel_finetune")
}

# The validation record of quantformer.json as tables: `metrics` (named numbers: every scalar
# metric) and `per_class` (a data frame, classes in model order); NULL without validation.
validation_tables <- function(v, levels) {
  if (is.null(v) || !length(v) || all(vapply(v, is.null, TRUE))) return(NULL)
  scalar <- vapply(v, function(e) is.numeric(e) && length(e) == 1, TRUE)
  per_class <- NULL
  if (is.list(v$per_class) && length(v$per_class)) {
    classes <- c(intersect(levels, names(v$per_class)), setdiff(names(v$per_class), levels))
    rows <- lapply(classes, function(k) as.data.frame(lapply(v$per_class[[k]], as.numeric)))
    per_class <- cbind(data.frame(class = classes, stringsAsFactors = FALSE),
                       do.call(rbind, rows))
  }
  list(source = if (is.character(v$source)) v$source, metrics = unlist(v[scalar]),
       per_class = per_class)
}

#' @rdname summary.textmodel_finetune
#' @export
print.summary.textmodel_finetune <- function(x, digits = 3, ...) {
  print_summary(x, "Fine-tuned Transformer classifier", function() {  # R/textmodel-methods.R
    cat("\nModel:     ", format_or_na(x$model), "\n", sep = "")
    print_model_dir("Directory: ", x)
    cat("Created:   ", format_or_na(x$created), "\n", sep = "")
    cat("\nTraining documents: ", format_or_na(x$n_train), " (",
        format_or_na(x$n_missing_label), " without a label left out)\n", sep = "")
    if (length(x$label_counts)) {
      cat("\nClass counts:\n")
      print(x$label_counts)
    }
    print_fields("Hyperparameters", x$hyperparameters)
    print_validation(x$validation, digits)
  })
}

# The validation metrics, rounded: one line of overall metrics, then the per-class table.
print_validation <- function(v, digits = 3) {
  if (is.null(v)) return(invisible())
  cat("\nValidation", if (!is.null(v$source)) paste0(" (", v$source, ")"), ":\n", sep = "")
  m <- v$metrics
  if (length(m)) print(noquote(vapply(m, function(e) format(signif(e, digits)), "")))
  pc <- v$per_class
  if (!is.null(pc)) {
    num <- vapply(pc, is.numeric, TRUE) & names(pc) != "support"
    pc[num] <- lapply(pc[num], function(e) round(e, digits))
    cat("\n")
    print(pc, row.names = FALSE)
  }
  invisible()
}
