# Numeric precision (issue 37), shared by the functions that run a model.

#' Numeric precision options
#'
#' `predict()` on [textmodel_finetune()] models and [predict_files()] run the model in the
#' precision the processor computes fastest. `precision = "auto"` (the default) uses bfloat16
#' autocast (matrix products in bf16, weights, softmax and layer norms in fp32; Kalamkar et
#' al. 2019, "A study of BFLOAT16 for deep learning training") where the CPU has AMX or
#' AVX-512 BF16 instructions (Intel Xeon from Cooper Lake and Sapphire Rapids, AMD EPYC from
#' Zen 4) or the GPU supports bf16, and fp32 elsewhere: on CPUs that only emulate bf16 it is
#' slower than fp32. `"bf16"` forces it (with a warning naming the slowdown on such CPUs),
#' `"fp32"` turns it off. Answers never change silently: documents whose bf16 top-two
#' probability margin is below 0.05 are predicted again in fp32, and `predict_files()` marks
#' each row's `backend` as `torch bf16`, `torch fp32 recheck` or `torch` (fp32).
#' `quantformer_config()` shows what `"auto"` picks on this machine and why.
#'
#' Reproducibility: under bf16 (what `"auto"` picks on such hardware) a document's
#' probabilities depend a little on which documents share its batch, so they can differ in the
#' third decimal between batch sizes, between [predict_files()] and one `predict()` call, or
#' between machines (up to 1.4e-3 measured on a MiniLM classifier; zero-shot NLI 0.014 from
#' Hugging Face's fp32 pipeline). Labels do not: near ties are predicted again in fp32 one
#' document at a time, so their probabilities are the document's own in every batch.
#' `"fp32"` is the reproducible choice (probabilities agree to about 1e-7 whatever the
#' batching). The result records the precision used: the `backend` column or attribute
#' (`"torch"` is fp32), and for [predict_files()] each partition's `precision` in
#' `manifest.json`.
#'
#' bf16 applies to
#' classifiers fine-tuned the standard way on the torch backend; with `backend = "onnx"`,
#' `quantize` sets the precision. Set a default for a session with
#' `options(quantformer.precision = "fp32")`.
#'
#' The same argument, with the same default, runs the other functions that run a model:
#' `predict()` on [textmodel_zeroshot()] models (near ties scored again in fp32; multi-label
#' runs stay fp32), [textstat_embeddings()] (no labels to recheck: bf16 vectors keep a cosine
#' similarity above 0.99 with fp32's), [textstat_attributions()] (`"auto"` keeps fp32 there:
#' Integrated Gradients needs accurate gradients), [suggest_documents()] and
#' [code_documents()] (the embeddings of the light classifier, and `model`'s probabilities),
#' and [textstat_behaviour()].
#'
#' @param precision `"auto"`, `"fp32"` or `"bf16"` (default
#'   `getOption("quantformer.precision", "auto")`).
#' @return A character vector of CLI flags (`--precision`), empty for the default.
#' @name quantformer_precision
#' @keywords internal
NULL

# The values of `precision` for `use` ("infer": the functions that run a model; "train":
# fine-tuning, which also takes "fp16"): the core's one list (`core_rules()$precision`,
# models/precision.py PRECISION_USES), R's own copy only for a core too old to say.
precision_choices <- function(use = c("infer", "train")) {
  use <- match.arg(use)
  found <- core_rules()$precision[[use]]  # R/python.R
  if (length(found)) unlist(found)
  else c("auto", "fp32", "bf16", if (use == "train") "fp16")
}

# "a", "b" or "c"
or_list <- function(x) {
  if (length(x) < 2) return(x)
  paste(paste(utils::head(x, -1), collapse = ", "), "or", utils::tail(x, 1))
}

check_precision <- function(precision, use = c("infer", "train")) {
  choices <- precision_choices(use)
  if (!is.character(precision) || length(precision) != 1 || !precision %in% choices)
    input_error("`precision` must be ", or_list(paste0("\"", choices, "\"")), ", not ",
                deparse(precision), call. = FALSE)
  invisible(precision)
}

precision_flags <- function(precision = getOption("quantformer.precision", "auto")) {
  check_precision(precision, "infer")
  cli_flags(precision = if (precision != "auto") precision)
}
