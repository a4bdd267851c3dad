#' Document embeddings
#'
#' `x` is the documents (a quanteda corpus, a character vector or a data frame).
#' One vector per document: the mean of a Transformer encoder's last-layer token vectors over
#' the document's tokens (the mean pooling of sentence-transformers models such as the bundled
#' all-MiniLM-L6-v2, whose vectors, with `normalize = TRUE`, equal
#' `SentenceTransformer.encode()`). Long documents are truncated on their subword tokens (see
#' [textstat_subwords()]). Use the vectors for similarity, clustering or as features of other
#' models. Runs `quantformer embed` (its output layout `wide`: one column per dimension).
#'
#' @param x documents: a quanteda corpus, a character vector or a data frame with a text
#'   column (`text_field`).
#' @param model `NULL` (the bundled all-MiniLM-L6-v2, 384 dimensions), a Hugging Face hub id,
#'   the path of a local model folder (character scalar) or an encoder from
#'   [pretrain_encoder()].
#' @param normalize logical: scale each vector to unit length, so that the dot product of two
#'   rows is their cosine similarity (default `FALSE`: the mean-pooled vectors as they are, as
#'   `quantformer embed` gives them).
#' @param max_length the token limit per document, special tokens included (integer); `NULL`
#'   (default) takes the model's sentence-transformers `max_seq_length` (256 for the default
#'   model), else 512.
#' @param truncation which tokens a long document keeps: `NULL` (default: the core's
#'   `"head_tail"`), `"head_tail"`, `"head"` or `"tail"` (see [textmodel_finetune()]); or `"chunks"`: nothing is cut, every document is
#'   read whole as overlapping windows of `max_length` tokens and its vector is the mean of
#'   its windows' vectors, each window weighing the same (the averaging the `text` package
#'   does over sentences; with `normalize = TRUE` each window is scaled to unit length before
#'   the mean and the mean again after it).
#' @param stride,max_chunks `truncation = "chunks"` only: tokens neighbouring windows share
#'   (integer, smaller than the window; `NULL`: a quarter of it) and the first windows kept
#'   per document at most (integer >= 1; `NULL`: all, a warning counts the documents with
#'   more).
#' @param windows logical, `truncation = "chunks"` only: `TRUE` attaches the vector of every
#'   window as the attribute `"windows"` of the result, a data frame with `doc_id`, `chunk`
#'   (from 0), `start` and `end` (the window's characters in the document's text, counted
#'   from 0, end exclusive) and `dim_1`, `dim_2`, ... (default `FALSE`).
#' @param batch_size documents per forward pass at most (32; fewer for long documents).
#' @param device `"auto"` (default), `"cpu"`, `"cuda"`, `"cuda:N"` or `"mps"`.
#' @param backend,quantize `"torch"` (default) or `"onnx"`, and `"none"` or `"int8"` (onnx
#'   only): see [quantformer_backend]. Defaults from the options `quantformer.backend` and
#'   `quantformer.quantize`.
#' @param precision `"auto"` (default: bf16 autocast where the CPU has AMX or AVX-512 BF16 or
#'   the GPU supports it, fp32 elsewhere), `"fp32"` or `"bf16"` (character, one value; see
#'   [quantformer_precision]). Embeddings have no labels to recheck: bf16 vectors keep a
#'   cosine similarity with fp32's of at least 0.99997 with the default model on test
#'   documents, but their values depend a little on the batch; `"fp32"` is the reproducible
#'   choice. Default from the option
#'   `quantformer.precision`; `"bf16"` with `backend = "onnx"` is an error. The matrix's
#'   `backend` attribute says which ran (`"torch"`, `"torch bf16"`, `"onnx fp32"`, ...).
#' @inheritParams textmodel_finetune
#' @template verbose
#' @return A numeric matrix, documents x dimensions (384 for the default model), as a quanteda
#'   dfm is documents x features: row names are the docnames, in the order of `x`; column
#'   names `dim_1`, `dim_2`, .... Documents with empty or `NA` text get a row of `NA`, with a
#'   warning. A `model` that is not found is an error of class `quantformer_input_error`. With
#'   `windows = TRUE`, the attribute `"windows"` (see `windows`).
#' @seealso [textstat_subwords()] for the number of tokens per document, [suggest_documents()],
#'   which ranks documents on these vectors.
#' @references Reimers, N. and Gurevych, I. (2019). Sentence-BERT: Sentence Embeddings using
#'   Siamese BERT-Networks. Proceedings of EMNLP-IJCNLP.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   emb <- textstat_embeddings(c(cat = "The cat sat on the mat.",
#'                                kitten = "A kitten was sitting on the rug.",
#'                                stocks = "Stock markets fell sharply today."),
#'                              normalize = TRUE)
#'   dim(emb)
#'   emb %*% t(emb)  # cosine similarities
#' }
#' }
#' @export
textstat_embeddings <- function(x, model = NULL, normalize = FALSE, max_length = NULL,
                                truncation = NULL,
                                batch_size = 32, device = "auto", stride = NULL,
                                max_chunks = NULL, windows = FALSE,
                                backend = getOption("quantformer.backend", "torch"),
                                quantize = getOption("quantformer.quantize", "none"),
                                precision = getOption("quantformer.precision", "auto"),
                                text_field = "text", docid_field = "doc_id",
                                verbose = getOption("quantformer.verbose", TRUE)) {
  truncation <- match_truncation(truncation)  # R/reading.R
  if (!is.logical(normalize) || length(normalize) != 1 || is.na(normalize))
    input_error("`normalize` must be TRUE or FALSE, not ", format(normalize), call. = FALSE)
  model <- encoder_path(model)  # R/arguments.R
  if (!is.null(model) && (!is.character(model) || length(model) != 1 || is.na(model)))
    input_error("`model` must be NULL, a hub id or a model folder (one string)", call. = FALSE)
  frame <- as_frame(x, text_field, docid_field)
  if (!is.logical(windows) || length(windows) != 1 || is.na(windows))
    input_error("`windows` must be TRUE or FALSE, not ", format(windows), call. = FALSE)
  args <- c("--layout", "wide",
            cli_flags(model = model, normalize = normalize, max_length = max_length,
                      truncation = truncation, batch_size = batch_size, device = device,
                      stride = stride, max_chunks = max_chunks),
            backend_flags(backend, quantize), precision_flags(precision))  # R/backend.R, R/precision.R
  res <- call_verb("embed", args, inputs = list("--input" = frame[c("doc_id", "text")]),
                   output = "rds", doc_id = frame$doc_id, verbose = verbose,
                   outputs = if (windows) list("--chunks-out" = "rds"),
                   r_args = names(formals()))
  m <- embedding_matrix(res$output, frame$doc_id)
  if (windows) attr(m, "windows") <- res$outputs[[1]]
  m
}

# The dim_ columns of an embedding table as a numeric matrix with docnames as row names.
embedding_matrix <- function(out, doc_id) {
  dims <- grep("^dim_[0-9]+$", names(out), value = TRUE)
  m <- as.matrix(out[dims])
  storage.mode(m) <- "double"
  dimnames(m) <- list(doc_id, dims)
  attr(m, "backend") <- unique(as.character(out$backend))
  m
}
