# The inference backend (issue 16), shared by predict() for fine-tuned and zero-shot models.

#' Inference backend options
#'
#' `predict()` on [textmodel_finetune()] and [textmodel_zeroshot()] models runs the Python core
#' with PyTorch by default. `backend = "onnx"` runs ONNX Runtime on the CPU instead: the model
#' is exported once (with `torch.onnx`) and cached (inside the model directory, or for the
#' bundled default model and hub models in `$QUANTFORMER_CACHE`, else
#' `$XDG_CACHE_HOME/quantformer`, else `~/.cache/quantformer`); a cached export is rebuilt when
#' the weights or library versions change or when it is damaged. `quantize = "int8"` adds ONNX
#' Runtime's dynamic int8 quantization (Zafrir et al. 2019, "Q8BERT"; the first encoder layer
#' stays fp32), the fastest option on CPUs (about 1.2x fp32 ONNX on a 2-core CPU without
#' VNNI), with labels that agreed with fp32 on 98.2-98.9 % of the Abortion test tweets and
#' 99.3-99.7 % of Toxic comments (`bench/RESULTS.md`). For classifiers fine-tuned the standard
#' way (not `method = "nli"` or `"setfit"`), documents whose int8 top-two probability margin is
#' below 0.05 are predicted again in fp32 (2.5 % of the Abortion test tweets; it halved the
#' labels int8 changed there, and costs 6-25 % of pure int8's speed), and `predict_files()`
#' marks their rows `onnx fp32 recheck` in its `backend` column. The fp32 ONNX export is fused for ONNX
#' Runtime's CPU kernels (outputs within 1e-4 of PyTorch).
#' Longformer models are not supported with ONNX. Set defaults for a session with
#' `options(quantformer.backend = "onnx", quantformer.quantize = "int8")`.
#'
#' @param backend `"torch"` or `"onnx"` (default `getOption("quantformer.backend", "torch")`).
#' @param quantize `"none"` or `"int8"` (onnx only; default
#'   `getOption("quantformer.quantize", "none")`).
#' @return A character vector of CLI flags (`--backend`, `--quantize`), empty for the defaults.
#' @name quantformer_backend
#' @keywords internal
NULL

backend_flags <- function(backend = getOption("quantformer.backend", "torch"),
                          quantize = getOption("quantformer.quantize", "none")) {
  if (!is.character(backend) || length(backend) != 1 || !backend %in% c("torch", "onnx"))
    input_error("`backend` must be \"torch\" or \"onnx\", not ", deparse(backend), call. = FALSE)
  if (!is.character(quantize) || length(quantize) != 1 || !quantize %in% c("none", "int8"))
    input_error("`quantize` must be \"none\" or \"int8\", not ", deparse(quantize), call. = FALSE)
  if (quantize == "int8" && backend != "onnx")
    input_error("`quantize = \"int8\"` needs `backend = \"onnx\"`", call. = FALSE)
  cli_flags(backend = if (backend != "torch") backend,
            quantize = if (quantize != "none") quantize)
}
