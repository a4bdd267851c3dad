#' Calibrate a fine-tuned classifier's probabilities (temperature scaling)
#'
#' Fits one temperature \eqn{T} on hand-coded validation documents that were not used in
#' training, so that `softmax(logits / T)` is calibrated (Guo et al. 2017), and stores it in
#' the model directory (`quantformer.json`, `calibration`). `predict(object, calibrated =
#' TRUE)` then applies it; the predicted classes do not change, only their probabilities (a
#' temperature above 1 softens overconfident ones). Runs `quantformer predict` on the
#' validation documents and `quantformer calibrate` on its output.
#'
#' @param object a `textmodel_finetune` classifier ([textmodel_finetune()] or
#'   [load_finetune()]; not a regression or multi-label model).
#' @param newdata the validation documents: a quanteda corpus, character vector or data frame
#'   (read with `text_field` and `docid_field`). At least 10 must have a class (a few hundred
#'   give a stable temperature).
#' @param y their true classes (one per document, `NA` for uncoded ones, which are left out)
#'   or the name of a docvar of `newdata`; every class must be one of `object`'s classes.
#' @param batch_size,device,text_field,docid_field as in [predict.textmodel_finetune()].
#' @template verbose
#' @return `object` with `summary$calibration` updated: `temperature`, `n`, `ece_before`,
#'   `ece_after` (expected calibration error over 10 equal-width confidence bins) and `method`. The model
#'   directory is changed in place.
#' @seealso [predict.textmodel_finetune()] (`calibrated = TRUE`), [classification_report()]
#'   (the expected calibration error of predictions)
#' @references Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. (2017). On Calibration of
#'   Modern Neural Networks. Proceedings of the 34th International Conference on Machine
#'   Learning (ICML).
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   fit <- textmodel_finetune(sotu[1:40, ], y = "party", epochs = 1, max_length = 64)
#'   fit <- calibrate_finetune(fit, sotu[41:80, ], y = "party")
#'   fit$summary$calibration$temperature
#'   predict(fit, newdata = sotu[81:85, ], type = "probability", calibrated = TRUE)
#' }
#' }
#' @export
calibrate_finetune <- function(object, newdata, y, batch_size = 64, device = "auto",
                               text_field = "text", docid_field = "doc_id", verbose = NULL) {
  if (!inherits(object, "textmodel_finetune"))
    input_error("`object` must be a model from textmodel_finetune() or load_finetune()", call. = FALSE)
  if (!is.null(object$task) && object$task != "classification")
    input_error("temperature scaling calibrates a classifier's softmax; this is a ", object$task,
         " model", call. = FALSE)
  model_dir <- model_dir_of(object, "object")  # R/arguments.R
  frame <- as_frame(newdata, text_field, docid_field, arg = "newdata")
  label <- resolve_y(y, frame, x_arg = "newdata")$y
  valid <- data.frame(frame[c("doc_id", "text")], label = enc2utf8(as.character(label)),
                      stringsAsFactors = FALSE)
  verbose <- model_verbose(verbose, object)
  r_args <- names(formals())
  pred <- call_verb("predict", c("--model", model_dir, "--label-col", "label",
                                 cli_flags(batch_size = batch_size, device = device)),
                    inputs = list("--input" = valid), output = "rds", doc_id = valid$doc_id,
                    verbose = verbose, r_args = r_args)$output
  call_verb("calibrate", c("--model", model_dir), inputs = list("--pred" = pred),
            verbose = verbose, r_args = r_args)
  object$summary <- model_record(model_dir)  # R/load_finetune.R
  object
}
