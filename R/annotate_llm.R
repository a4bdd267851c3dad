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
#' enum), its label probabilities from the answer's token log-probabilities where the server
#' returns them; an answer that does not parse is marked `unparsed`, counted and warned, never
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
#'   none of its documents may be among `x`'s (checked). Only with `shots` above 0.
#' @param cache path of the SQLite cache of finished codes (default: one file in [tempdir()]).
#' @param seed integer: the seed of the shots' draw.
#' @param ... further flags of `quantformer annotate` (with `endpoint`: `concurrency = 8`,
#'   `timeout = 30`, `retries = 4`, `top_logprobs = 20`, `max_tokens = 64`; without it:
#'   `device = "cuda"`; each is an error where it would not be used; `raw = TRUE`,
#'   `keep_text = TRUE`: the text column after `doc_id`, so the codes can train
#'   [textmodel_finetune()] as surrogate labels).
#' @template verbose
#' @return A data frame of codes, one row per document in the order of `x`: `doc_id`, `label`
#'   (a factor whose levels are the codebook's labels in the codebook's order, as [predict()]
#'   gives classes; `NA` for a document without a code: an unparsed answer, an empty text),
#'   `prob_<label>` for each label (through an endpoint: from the answer's token
#'   log-probabilities where the server returns them, else `NA`; the record beside the output
#'   says why), `unparsed`, `coder` (the model), `status` (`coded`, `unparsed`, `failed` or
#'   `empty`), `reason` (why a document has no code), and `raw` with `raw = TRUE`: the shape of
#'   a human coder's codes. A run in which some documents failed past `retries` (through an
#'   endpoint) is an error that counts them; the answers received are cached, so the same
#'   call again asks only for those documents. For a partitioned corpus or a Dask cluster see
#'   [annotate_files()].
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
                    api_key_env = api_key_env, shots = shots, seed = seed,
                    cache = cache, ...)
  codes <- call_verb("annotate", args,
                     inputs = list("--input" = frame[c("doc_id", "text")],
                                   "--shots-from" = shots_from),
                     output = "rds", verbose = verbose, r_args = names(formals()))$output
  codes_as_factor(codes)
}

# The codes' `label` as a factor whose levels are the codebook's labels in the codebook's
# order: the core writes one `prob_<label>` column per label, in that order (as predict()
# gives its classes). A document without a code (unparsed, empty text) is NA.
codes_as_factor <- function(codes) {
  probs <- names(codes)[startsWith(names(codes), "prob_")]
  codes$label <- factor(as.character(codes$label), levels = substring(probs, 6L))
  codes
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

#' Code a partitioned corpus with a large language model, on one machine or a Dask cluster
#'
#' Runs `quantformer annotate` over many corpus files (partitions), as [predict_files()] does
#' for a fine-tuned model: one Parquet file of codes per partition in `output_dir` (the columns
#' of [annotate_llm()]'s result), a `manifest.json` updated after every partition, and
#' `resume = TRUE` to compute only the partitions without a complete output. With a local
#' model each Dask worker loads it once; with an `endpoint` all workers share it and at most
#' `concurrency` requests are in flight in total (a Dask semaphore). Finished codes also go to
#' the SQLite `cache` (default: beside `output_dir`), so a partition interrupted midway costs
#' only its missing documents. The API key variable named by `api_key_env` must be set where
#' the workers run (a `"local:N"` cluster inherits this session's environment).
#'
#' @param files character: corpus files, folders or globs (each file one partition).
#' @param codebook,model,endpoint,api_key_env,shots,shots_from,seed as [annotate_llm()]; the
#'   shots are checked against every partition before any work.
#' @param output_dir the output folder (new or empty; or the folder of a run to resume).
#' @param scheduler `NULL` (default: the files one after another in one Python process),
#'   `"local:N"` or the address of a Dask scheduler (`"tcp://host:port"`).
#' @param resume logical: continue the run recorded in `output_dir` (default `FALSE`).
#' @param cache `NULL` (default: `output_dir` with `.cache.sqlite` appended) or the path of the
#'   SQLite cache of finished codes.
#' @param concurrency `NULL` or an integer: endpoint requests in flight across all workers
#'   (`NULL`: 4). With `endpoint` only (without it, an error: a local model does not use it).
#' @param text_field,docid_field names of the text and document-id columns in the files
#'   (defaults `text` and `doc_id`; without an id column ids are `textN`).
#' @param ... further flags of `quantformer annotate` (with `endpoint`: `timeout = 30`,
#'   `retries = 4`, `top_logprobs = 20`, `max_tokens = 64`; without it: `device = "cuda"`; each
#'   is an error where it would not be used; `raw = TRUE`).
#' @template verbose
#' @return A data frame with one row per partition, as [predict_files()]: `input`, `output`
#'   (the Parquet path), `rows`, `seconds`, `worker`, `finished` and `run`; the manifest's
#'   path is the attribute `"manifest"`.
#' @seealso [annotate_llm()] for documents in memory.
#' @references Dask Development Team (2016). Dask: Library for dynamic task scheduling.
#'   <https://dask.org>
#' @examples
#' \donttest{
#' if (quantformer_available() && nzchar(Sys.getenv("OLLAMA_HOST"))) {
#'   cb <- data.frame(label = c("pro", "contra"),
#'                    description = c("supports the policy", "opposes the policy"))
#'   dir <- tempfile()
#'   dir.create(dir)
#'   write.csv(data.frame(doc_id = c("a", "b"), text = c("We must do it.", "No.")),
#'             file.path(dir, "part-1.csv"), row.names = FALSE)
#'   annotate_files(dir, cb, model = "llama3.1", output_dir = tempfile("codes-"),
#'                  endpoint = "http://127.0.0.1:11434/v1", scheduler = "local:2")
#' }
#' }
#' @export
annotate_files <- function(files, codebook, model, output_dir, endpoint = NULL,
                           api_key_env = NULL, shots = 0, shots_from = NULL, seed = 0,
                           scheduler = NULL, resume = FALSE, cache = NULL, concurrency = NULL,
                           text_field = NULL, docid_field = NULL, ...,
                           verbose = getOption("quantformer.verbose", TRUE)) {
  if (!is.character(model) || length(model) != 1 || !nzchar(model))
    input_error("`model` must be one model name or folder", call. = FALSE)
  output_dir <- check_files_output(files, output_dir)  # R/predict_files.R
  if (!dir.exists(output_dir)) {  # a folder: even one file is a partitioned run
    dir.create(output_dir, recursive = TRUE)
    on.exit(if (!length(dir(output_dir, all.files = TRUE, no.. = TRUE)))
      unlink(output_dir, recursive = TRUE), add = TRUE)
  }
  book <- codebook_file(codebook)
  on.exit(if (!is.null(attr(book, "temp"))) unlink(book), add = TRUE)
  args <- c("--input", path.expand(files), "--out", output_dir,
            cli_flags(codebook = book, llm = model, endpoint = endpoint,
                      api_key_env = api_key_env, shots = shots, seed = seed,
                      cache = cache, scheduler = scheduler, resume = isTRUE(resume),
                      concurrency = concurrency, text_col = text_field, id_col = docid_field,
                      ...))
  call_verb("annotate", args, inputs = list("--shots-from" = shots_from), verbose = verbose,
            r_args = names(formals()))
  read_manifest(output_dir)  # R/predict_files.R
}
