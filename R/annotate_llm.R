#' Code documents with a large language model from the codebook
#'
#' Runs `quantformer annotate` in a child Python process: a large language model reads the
#' codebook (labels, descriptions, examples) and, optionally, `shots` examples drawn from
#' human codes, and codes every document. A local causal language model (a Hugging Face id or
#' folder, prompted through its tokenizer's chat template) scores each label by the summed
#' log-probability of the label's tokens, normalised over the labels, so every document gets a
#' label and probabilities (the codebook prefix's key-value cache is computed once). A server
#' speaking the OpenAI chat-completions protocol (Ollama, vLLM, llama.cpp's server,
#' `transformers serve`) answers through structured output (a JSON schema whose label is an
#' enum); an answer that does not parse is marked `unparsed`, counted and warned, never
#' guessed. Finished codes go to a SQLite cache, so a rerun or an interrupted run computes only
#' what is missing. Treat the model as one more coder: check its codes against human codes
#' (intercoder reliability) before using them, and correct estimates built on them with a gold
#' sample (prediction-powered inference, [textstat_prevalence()]); Ziems et al. (2024,
#' Computational Linguistics), Egami et al. (2023, NeurIPS).
#'
#' @param x documents: a quanteda corpus, a character vector or a data frame with a `text`
#'   column.
#' @param codebook the codebook: a data frame with a `label` column and optional
#'   `description` and `examples` (several separated by `|`), or the path of a codebook file
#'   (`.json`, `.csv`, `.tsv`) as the coding room reads it. At least two labels.
#' @param model character: a causal language model (Hugging Face id or folder) or, with
#'   `endpoint`, the model name the server serves.
#' @param endpoint `NULL` (default: load `model` locally) or the base URL of an
#'   OpenAI-compatible server, e.g. `"http://127.0.0.1:11434/v1"`. Checked before any work.
#' @param api_key_env `NULL` or the name of an environment variable holding the endpoint's API
#'   key (never the key itself; the key is not printed, logged, cached or written).
#' @param shots integer >= 0 (default 0, zero-shot): k-shot examples drawn from `shots_from`.
#' @param shots_from `NULL` or human codes: a data frame with `doc_id`, `text` and `label`;
#'   none of its documents may be among `x`'s (checked).
#' @param cache path of the SQLite cache of finished codes (default: one file in [tempdir()]).
#' @param seed integer: the seed of the shots' draw.
#' @param ... further flags of `quantformer annotate` (e.g. `concurrency = 8`, `timeout = 30`,
#'   `retries = 4`, `raw = TRUE`, `device = "cuda"`, `keep_text = TRUE`: the text column
#'   after `doc_id`, so the codes can train [textmodel_finetune()] as surrogate labels).
#' @template verbose
#' @return A data frame of codes, one row per document in the order of `x`: `doc_id`, `label`,
#'   `prob_<label>` for each label (`NA` through an endpoint), `unparsed`, `coder` (the model),
#'   and `raw` with `raw = TRUE`: the shape of a human coder's codes.
#' @examples
#' \donttest{
#' if (quantformer_available() && nzchar(Sys.getenv("OLLAMA_HOST"))) {
#'   cb <- data.frame(label = c("pro", "contra"),
#'                    description = c("supports the policy", "opposes the policy"))
#'   codes <- annotate_llm(c(a = "We must do it.", b = "A terrible idea."), cb,
#'                         model = "llama3.1", endpoint = "http://127.0.0.1:11434/v1")
#' }
#' }
#' @export
annotate_llm <- function(x, codebook, model, endpoint = NULL, api_key_env = NULL, shots = 0,
                         shots_from = NULL,
                         cache = file.path(tempdir(), "quantformer-llm-cache.sqlite"),
                         seed = 0, ..., verbose = getOption("quantformer.verbose", TRUE)) {
  if (!is.character(model) || length(model) != 1 || !nzchar(model))
    input_error("`model` must be one model name or folder", call. = FALSE)
  book <- codebook_file(codebook)
  on.exit(if (!is.null(attr(book, "temp"))) unlink(book), add = TRUE)
  frame <- as_frame(x)
  args <- cli_flags(codebook = book, llm = model, endpoint = endpoint,
                    api_key_env = api_key_env, shots = if (shots > 0) shots, seed = seed,
                    cache = cache, ...)
  call_verb("annotate", args,
            inputs = list("--input" = frame[c("doc_id", "text")],
                          "--shots-from" = shots_from),
            output = "rds", verbose = verbose, r_args = names(formals()))$output
}

# The codebook as a file `quantformer annotate` reads: a path as it is, a data frame written
# to a temporary CSV (attribute "temp" set, for the caller to unlink).
codebook_file <- function(codebook) {
  if (is.character(codebook) && length(codebook) == 1) return(codebook)
  if (!is.data.frame(codebook) || !"label" %in% names(codebook))
    input_error("`codebook` must be a data frame with a `label` column or a codebook file",
                call. = FALSE)
  path <- tempfile("qf-codebook-", fileext = ".csv")
  utils::write.csv(codebook, path, row.names = FALSE, fileEncoding = "UTF-8")
  structure(path, temp = TRUE)
}
