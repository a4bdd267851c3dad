# A fine-tuned model from its model directory, and the checks of that directory: the core
# reads and checks the directory (`quantformer info --model`), R only asks.

#' Rebuild a fine-tuned model object from its model directory
#'
#' Asks the Python core for the checked run record (`quantformer.json`, through
#' `quantformer info --model dir --json`) of a model directory written by
#' [textmodel_finetune()] or `quantformer finetune`, so a model trained elsewhere (or in an
#' earlier session) can be used with [predict.textmodel_finetune()].
#'
#' @param dir the model directory.
#' @return A `textmodel_finetune` object (see [textmodel_finetune()]) without training
#'   documents, so `predict()` needs `newdata`; `temporary` is `TRUE` when `dir` is in
#'   [tempdir()]. A folder that does not exist is an error; one that is not a finished
#'   quantformer model directory (no or an incomplete `quantformer.json`) is an error of class
#'   `quantformer_input_error` with the core's message.
#' @examples
#' \dontrun{
#' fit <- load_finetune("models/sotu-party")
#' predict(fit, newdata = c("We will cut taxes.", "Health care for all."))
#' }
#' @export
load_finetune <- function(dir) {
  if (!is.character(dir) || length(dir) != 1 || !dir.exists(dir))
    input_error("model directory '", dir, "' does not exist; give the folder written by ",
         "textmodel_finetune(output_dir = ...)", call. = FALSE)
  finetune_object(dir, model_record(dir))
}

# The fitted-model object of a model directory whose checked record `rec` the core returned
# (with the fitting verb's answer, or from `quantformer info --model`).
finetune_object <- function(dir, rec) {
  task <- if (is.null(rec$task)) "classification" else rec$task
  structure(list(model_dir = normalizePath(dir), levels = as.character(rec$labels),
                 task = task, call = NULL, summary = rec, x = NULL,
                 temporary = in_tempdir(dir), verbose = NULL),
            class = c("textmodel_finetune", "textmodel", "list"))
}

# The run record (quantformer.json) of a model directory, as the core reads and checks it
# (`quantformer info --model`): the core is the one reader of the model-directory format. An
# incomplete or foreign folder is a `quantformer_input_error` with the core's message.
model_record <- function(dir) {
  # r_args: the core's "--out folder of a finished finetune" is `output_dir` in R
  call_verb("info", c("--model", normalizePath(dir, mustWork = FALSE), "--json"),
            output = "stdout", verbose = FALSE, r_args = "output_dir")$output
}

# The model directory of a fitted object still exists (the core checks what is in it when it
# loads the model); else an error that says why it is gone and what to do.
check_model_dir <- function(object) {
  if (dir.exists(object$model_dir)) return(invisible(TRUE))
  if (temporary_dir_gone(object))
    input_error("the model directory '", object$model_dir, "' of this model no longer exists: it was ",
         "in the temporary folder of the R session that fitted the model, which R deleted when ",
         "that session ended. Fit again with `output_dir` set to a permanent folder (e.g. ",
         "textmodel_finetune(..., output_dir = \"models/my-model\")); then the saved object ",
         "works in later sessions", call. = FALSE)
  input_error("the model directory '", object$model_dir, "' of this model no longer exists; fine-tune ",
       "again, or load_finetune() a copy of the directory", call. = FALSE)
}
