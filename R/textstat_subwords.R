#' Subword token counts per document
#'
#' `x` is the documents (a quanteda corpus, a character vector or a data frame).
#' Counts the subword tokens (special tokens included) a model's tokenizer makes of each
#' document and flags the documents longer than `max_length`, which fine-tuning and
#' prediction truncate (head+tail by default; Wankmueller 2022, section 6.3). Use it to choose
#' `max_length` and to see how much text truncation removes. Runs `quantformer tokenize`.
#'
#' `predict()` of a fine-tuned model warns how many documents it truncated (as
#' `textmodel_zeroshot()` does); `textstat_subwords(x, model = fit)` shows which: with a
#' fitted model (or its model folder) the token limit and truncation strategy default to the
#' ones the model was trained and predicts with, so `truncated` marks exactly the documents
#' `predict(fit, x)` cuts. For a model fitted with `method = "nli"` each document is counted
#' as the premise of its longest class hypothesis (prediction pairs it with every class's
#' hypothesis and cuts the premise of each pair to fit), so `n_tokens` includes that
#' hypothesis.
#'
#' @param x documents: a quanteda corpus, a character vector or a data frame with a `text`
#'   column.
#' @param model `NULL` (the bundled all-MiniLM-L6-v2), a hub id, a local model folder, an
#'   encoder from [pretrain_encoder()], or a model fitted by [textmodel_finetune()] (its
#'   tokenizer, limit and truncation strategy).
#' @param max_length the token limit, special tokens included (integer). Default `NULL`: the
#'   limit of a fitted `model` (the `max_length` it was trained with), else 512.
#' @param truncation `NULL` (the default: a fitted `model`'s strategy, else `"head_tail"`) or
#'   `"chunks"`, to count the windows of `max_length` tokens each document is read in when
#'   `truncation = "chunks"` reads it whole (see [textmodel_finetune()]); `"head_tail"`,
#'   `"head"` and `"tail"` count the same tokens and flag the same documents.
#' @param stride,max_chunks `truncation = "chunks"` only: tokens neighbouring windows share
#'   (integer, smaller than the window) and the first windows kept per document at most
#'   (integer >= 1). `NULL` (the default): those a `model` fitted with chunks was trained
#'   with, else a quarter of the window and all windows.
#' @param docvars if `TRUE`, the docvars of `x` are added as further columns.
#' @inheritParams textmodel_finetune
#' @return A data frame with one row per document, in the order of `x`: `document`
#'   (docnames;
#'   every textstat_* frame names it `document`, as quanteda's do; frames that go back to the
#'   core, such as `predict(type = "both")`, keep `doc_id`), `n_tokens` (integer; 0 for empty or `NA` texts), `truncated` (logical: more
#'   than `max_length` tokens: cut by fine-tuning and prediction; with chunks: more windows
#'   than `max_chunks`, whose last windows are dropped), with chunks `n_windows` (integer: the
#'   windows the document is read in, at most `max_chunks`), then the docvars when
#'   `docvars = TRUE`.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   textstat_subwords(c(short = "A short text.", long = strrep("Many words here. ", 200)),
#'                     max_length = 128)
#' }
#' }
#' @export
textstat_subwords <- function(x, model = NULL, max_length = NULL, truncation = NULL,
                              stride = NULL, max_chunks = NULL, docvars = FALSE,
                              text_field = "text", docid_field = "doc_id", verbose = FALSE) {
  model <- model_dir_of(encoder_path(model), null_ok = TRUE,  # R/arguments.R
                        what = "a pretrain_encoder() result, a model folder or a hub id")
  truncation <- match_truncation(truncation)  # R/reading.R
  frame <- as_frame(x, text_field, docid_field)
  out <- call_verb("tokenize", cli_flags(model = model, max_length = max_length,
                                         truncation = truncation, stride = stride,
                                         max_chunks = max_chunks),
                   inputs = list("--input" = frame[c("doc_id", "text")]), output = "rds",
                   doc_id = frame$doc_id, verbose = verbose, r_args = names(formals()))$output
  res <- data.frame(document = frame$doc_id, n_tokens = as.integer(out$n_tokens),
                    truncated = as.logical(out$truncated), stringsAsFactors = FALSE)
  if (!is.null(out$n_windows)) res$n_windows <- as.integer(out$n_windows)
  if (docvars) res <- cbind(res, frame_docvars(frame))
  class(res) <- c("textstat_subwords", "textstat", "data.frame")
  res
}
