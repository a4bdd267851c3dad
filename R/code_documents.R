#' Hand-code documents in the browser while a model learns (the coding room)
#'
#' Starts `quantformer code`: a local web page that shows one document at a time with its
#' docvars and the codebook. The digit keys 1-9 code it with the k-th label; `s` skips it,
#' `n` marks it not applicable, `b` (or Backspace) goes back and undoes the last code, `c`
#' adds a comment, `g` shows the model's guess (hidden by default, as it anchors coders) and
#' `a` accepts it, `r` opens the reconciliation of two coders' disagreements, `q` ends.
#' Every code is committed to the `project` file (SQLite) the moment its key is pressed, so
#' closing the browser, an interrupted R session or a crash loses nothing; calling
#' `code_documents()` again with the same project resumes where the coder stopped.
#'
#' The next documents come from the strategies of [suggest_documents()] (a cold start, then
#' uncertainty sampling with a diversity guard and a random share); a logistic regression
#' over cached embeddings of the bundled all-MiniLM-L6-v2 retrains in the background every
#' `retrain_every` codes without blocking the page, which shows its cross-validated macro-F1
#' as a learning curve and says when its predictions have stopped changing (stabilising
#' predictions: Cohen's kappa of successive rounds' predictions of at least 0.99 over three
#' rounds; Bloodgood & Vijay-Shanker 2009). One link is one person: a second coder joins with
#' another `coder` name in a later room of their own, or with a link of their own (`coders`)
#' on the same project; a share `overlap` of the documents is shown to both, blind (the model
#' learns such a document only once two coders coded it, so its guess never passes one
#' coder's code on), and the
#' page reports Krippendorff's alpha and Cohen's kappa on it with bootstrap intervals.
#'
#' A language model as one more coder (`llm_codes`, e.g. the codes of [annotate_llm()]): its
#' codes are imported into the project as a machine coder before the room starts. They are
#' validated against the human coders, not trusted (Ziems et al. 2024, Computational
#' Linguistics; Bucher & Martini 2024): never shown on the page, never learnt from by the room's
#' model or a fine-tune, never taking a document off the coders' queues and never in the
#' one-code-per-document result of [read_codes()]. The agreement panel shows each human coder's
#' Krippendorff's alpha and Cohen's kappa with it on the documents both coded, beside the
#' human-human figures, and the reconciliation view (`r`) lists the documents where it differs
#' from the humans, marked as such. `read_codes(all = TRUE)` lists its codes (`coder` names it,
#' `strategy` `"machine"`).
#'
#' "Fine-tune now" (the page's button, or the key `f`) fine-tunes a Transformer on the codes
#' so far, as [textmodel_finetune()] would, in a background process while coding goes on: the
#' page shows whether it is running, done (with the model folder and its validation
#' macro-F1), failed (with the error) or stopped. The model goes to a `finetune-<UTC time>`
#' folder in `models`; load it with [load_finetune()]. The state of the last run is kept in
#' the project file, so a restart shows it; stopping the coding room stops a running
#' fine-tune. A run is refused while a label has fewer than `finetune_min_codes` codes.
#'
#' The page is served on 127.0.0.1 (this computer only) on a free port and needs the random
#' token in its address; no document text is written to any log. Several coders on one
#' shared server (`coders`, with `host = "0.0.0.0"` to reach it from other computers): each
#' coder gets a link with a token of their own, which cannot code as another coder; a
#' `host` other than 127.0.0.1 makes the page reachable on the network (a warning says so).
#'
#' @param x documents: a quanteda corpus, a character vector or a data frame with a `text`
#'   column (see [suggest_documents()]).
#' @param labels character vector of at least two labels (keys 1-9 in this order), or `NULL`
#'   when `codebook` is given.
#' @param codebook `NULL`, a data frame with a `label` column and optional `description`,
#'   `examples` (several separated by `|`) and `key` (one character; required for more
#'   than nine labels) columns, or the path of such a `.csv`/`.tsv`/`.json` file.
#' @param project path of the project file (default `"coding.sqlite"`): created when
#'   absent, resumed when present; a project made for another corpus is refused.
#' @param coder the coder's name (default `"coder1"`); with `coders`, the one of them whose
#'   page opens here (default: the first).
#' @param coders `NULL` (default: one coder, `coder`) or a character vector of distinct
#'   coder names without commas: each gets a link with a token of their own, for one server
#'   shared by several coders.
#' @param host address to serve on: `"127.0.0.1"` (default, this computer only) or, to share
#'   the page on the network, `"0.0.0.0"` (all of this computer's addresses).
#' @param strategy which document comes next: `"margin"` (default), `"least_confidence"`,
#'   `"entropy"`, `"random"` or `"cold"`; switchable on the page.
#' @param random_share number from 0 to 1 (default 0.1): share of an uncertainty batch drawn
#'   at random.
#' @param retrain_every whole number >= 1 (default 10): codes between two retrainings.
#' @param overlap number from 0 to 1 (default 0.2): share of documents every coder codes.
#' @param port port number; 0 (default) takes a free one.
#' @param browser logical: open the page in the RStudio viewer or the web browser.
#' @param wait logical: `TRUE` (default) waits until the coder presses `q` (done) on the page
#'   and returns the codes; `FALSE` returns at once with the running server (stop it with
#'   `$kill()`; read the codes at any time with [read_codes()]).
#' @param new_links logical (default `FALSE`): revoke the links of earlier starts of this
#'   `project`. A coder's link (its token) keeps working after a restart by default: the
#'   project file keeps each token's SHA-256 hash, never the token.
#' @param cache_dir folder for the embedding cache (default: a folder in [tempdir()]).
#' @param precision `"auto"` (default: bf16 autocast where the CPU has AMX or AVX-512 BF16 or
#'   the GPU supports it, fp32 elsewhere), `"fp32"` or `"bf16"` (character, one value; see
#'   [quantformer_precision]): of the embeddings the room's light classifier learns from
#'   (part of their cache's key; recorded in the project file and in the page's model state).
#'   Default from the option `quantformer.precision`.
#' @param models folder for the models of "fine-tune now" (default `NULL`: a folder named
#'   after the project, `<project>-models`, next to it).
#' @param finetune_model the pretrained model "fine-tune now" starts from: a hub id or a local
#'   folder (default `NULL`: the bundled all-MiniLM-L6-v2).
#' @param finetune_epochs `NULL` (default: by model size, 4 for small models) or a whole
#'   number >= 1: passes over the codes.
#' @param finetune_valid_fraction number from 0 to below 1 (default 0.2): share of the codes
#'   held out to report the fine-tuned model's validation macro-F1 (0: none).
#' @param finetune_min_codes whole number >= 1 (default 5): the fewest codes of every label
#'   before "fine-tune now" runs.
#' @param llm_codes `NULL` (default) or a machine coder's codes: a data frame with `doc_id`,
#'   `label` and optionally `coder` (one name) and `unparsed` (as [annotate_llm()] returns),
#'   or the path of such a file. Rows marked `unparsed` or without a label are skipped (the
#'   core says how many); doc_ids not in `x` and labels not in the codebook are errors, with
#'   nothing written. Calling again with the same coder replaces their codes.
#' @param llm_coder `NULL` (default: the codes' `coder` value, the model's name) or the
#'   machine coder's name; it must not be a human coder's. Only with `llm_codes`.
#' @param verbose logical: show the Python core's messages.
#' @return With `wait = TRUE`, the codes as [read_codes()] returns them. With
#'   `wait = FALSE`, the server's `processx::process`, with the page's address in its
#'   `url` attribute (the first coder's with `coders`) and every coder's link in its `urls`
#'   attribute (named by coder), invisibly.
#'
#'   Bad arguments are errors of class `quantformer_input_error` (raised before the server
#'   starts), as are the core's refusals (an unwritable project, another corpus, ...).
#' @seealso [read_codes()], [suggest_documents()], [textmodel_finetune()], [load_finetune()]
#' @examples
#' \dontrun{
#' sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#' codes <- code_documents(sotu, labels = c("economy", "other"), project = "sotu.sqlite")
#' y <- merge_codes(sotu, codes)
#' }
#' @export
code_documents <- function(x, labels = NULL, codebook = NULL, project = "coding.sqlite",
                           coder = "coder1", coders = NULL, host = "127.0.0.1",
                           strategy = c("margin", "least_confidence", "entropy", "random",
                                        "cold"),
                           random_share = 0.1, retrain_every = 10, overlap = 0.2, port = 0,
                           browser = interactive(), wait = TRUE, new_links = FALSE,
                           cache_dir = file.path(tempdir(), "quantformer-embeddings"),
                           models = NULL, finetune_model = NULL, finetune_epochs = NULL,
                           finetune_valid_fraction = 0.2, finetune_min_codes = 5,
                           llm_codes = NULL, llm_coder = NULL,
                           precision = getOption("quantformer.precision", "auto"),
                           verbose = getOption("quantformer.verbose", TRUE)) {
  strategy <- match_choice(strategy)
  precision <- precision_flags(precision)  # R/precision.R
  if (!isTRUE(new_links) && !isFALSE(new_links))
    input_error("`new_links` must be TRUE or FALSE, not ", deparse(new_links))
  if (is.null(labels) == is.null(codebook))
    input_error("give the labels with `labels` or a codebook with `codebook`, one of the two")
  check_room_args(coders, host, models, finetune_model, finetune_epochs,
                  finetune_valid_fraction, finetune_min_codes)
  if (!is.null(llm_coder) && is.null(llm_codes))
    input_error("`llm_coder` names the coder of `llm_codes`; give `llm_codes` or leave ",
                "`llm_coder` out")
  if (!is.null(coders)) {
    # `coder` with `coders`: whose link opens here (listed first); the core gets the order
    if (!missing(coder)) {
      if (!coder %in% coders)
        input_error(sprintf("`coder` \"%s\" is not one of `coders`; name one of them or leave it out",
                            coder))
      coders <- c(coder, setdiff(coders, coder))
    }
    coder <- NULL
  }
  frame <- as_frame(x)
  corpus_file <- file.path(tempdir(), paste0("qf-code-corpus-", coding_key(frame), ".rds"))
  if (!file.exists(corpus_file)) saveRDS(frame, corpus_file, version = 2, compress = FALSE)
  book <- codebook_args(labels, codebook)
  if (!is.null(llm_codes))
    add_llm_coder(corpus_file, book, project, llm_codes, llm_coder, verbose, names(formals()))
  dir.create(cache_dir, showWarnings = FALSE, recursive = TRUE)
  args <- c("--input", corpus_file, book,
            cli_flags(project = normalizePath(project, mustWork = FALSE), coder = coder,
                      coders = coders, host = host,
                      strategy = strategy, random_share = random_share,
                      retrain_every = retrain_every, overlap = overlap, port = port,
                      cache_dir = cache_dir,
                      models = if (!is.null(models)) normalizePath(models, mustWork = FALSE),
                      finetune_model = local_path(finetune_model),
                      finetune_epochs = finetune_epochs,
                      finetune_valid_fraction = finetune_valid_fraction,
                      finetune_min_codes = finetune_min_codes, new_links = new_links,
                      quiet = !isTRUE(verbose)),
            precision, "--no-browser")
  proc <- start_room(args, r_args = names(formals()), n_links = max(1, length(coders)))
  url <- attr(proc, "url")
  if (!is.null(coders)) attr(proc, "urls") <- stats::setNames(attr(proc, "urls"), coders)
  if (isTRUE(browser)) open_page(url)
  if (!isTRUE(wait)) return(invisible(proc))
  on.exit(if (proc$is_alive()) proc$kill_tree(), add = TRUE)
  message("Coding at ", paste(attr(proc, "urls"), collapse = "\n"),
          "\nPress q on the page (or its 'done' button) when finished.")
  while (proc$is_alive()) proc$wait(500)
  read_codes(project)
}

# Import a machine coder's codes into the project (`quantformer code --add-coder`) before the
# room starts; the core checks doc_ids, labels and the name and writes nothing when refused.
add_llm_coder <- function(corpus_file, book, project, llm_codes, llm_coder, verbose, r_args) {
  path <- is.character(llm_codes) && length(llm_codes) == 1 && !is.na(llm_codes)
  if (!is.data.frame(llm_codes) && !path)
    input_error("`llm_codes` must be a data frame of codes (doc_id, label, coder; as ",
                "annotate_llm() returns) or the path of such a file")
  if (!is.null(llm_coder) && !(is.character(llm_coder) && length(llm_coder) == 1 &&
                               !is.na(llm_coder) && nzchar(llm_coder)))
    input_error("`llm_coder` must be NULL or one non-empty name")
  args <- c("--input", corpus_file, book,
            cli_flags(project = normalizePath(project, mustWork = FALSE),
                      add_coder = if (path) normalizePath(llm_codes, mustWork = FALSE),
                      coder_name = llm_coder, quiet = !isTRUE(verbose)))
  codes <- if (!path) as.data.frame(llm_codes, stringsAsFactors = FALSE)
  call_verb("code", args, inputs = list("--add-coder" = codes), verbose = verbose,
            r_args = r_args)
  invisible(NULL)
}

#' Read the codes of a coding-room project
#'
#' @param project path of the project file written by [code_documents()] (or
#'   `quantformer code`).
#' @param all logical: `FALSE` (default) gives one code per document, ready for
#'   [merge_codes()] or `textmodel_finetune(y = ...)`: the reconciled code where two coders
#'   disagreed and reconciled, else the code all its coders gave (documents with an open
#'   disagreement, and skipped or not applicable ones, are left out). `TRUE` gives every
#'   coder's current code with its status, time, strategy and comment.
#' @return A data frame. `all = FALSE`: `doc_id`, `code`, `n_coders`, `source`
#'   (`"single"`, `"agreed"` or `"resolved"`), `resolved_by` (the coder who reconciled the
#'   document; `NA` unless `"resolved"`). `all = TRUE`: `doc_id`, `code` (`NA` for
#'   skipped and not applicable documents), `coder`, `status` (`"code"`, `"skip"`,
#'   `"not_applicable"`; `"uncoded"` for a comment on a document the coder has no code of,
#'   e.g. typed before going back), `time` (UTC, ISO 8601), `strategy` (what showed the document:
#'   `"cold"`, `"margin"`, ..., `"overlap"`, `"back"`), `guess_accepted` (logical),
#'   `comment`.
#' @export
read_codes <- function(project, all = FALSE) {
  if (!is.character(project) || length(project) != 1 || !file.exists(project))
    input_error("`project` must be the path of an existing project file, not ",
                format(project))
  codes <- call_verb("code", c("--project", normalizePath(project), if (!isTRUE(all)) "--final"),
                     outputs = list("--export" = "rds"), verbose = FALSE,
                     r_args = names(formals()))$outputs[["--export"]]  # R/call.R
  names(codes)[names(codes) == "label"] <- "code"
  codes
}

# A short digest of the documents, so that the same corpus is written to the same file and
# its embeddings are cached once per R session.
coding_key <- function(frame) {
  f <- tempfile()
  on.exit(unlink(f))
  saveRDS(frame, f, version = 2, compress = FALSE)
  substr(unname(tools::md5sum(f)), 1, 16)
}

# The --labels or --codebook arguments; a data frame codebook goes to a CSV file.
codebook_args <- function(labels, codebook) {
  if (!is.null(labels)) {
    if (!is.character(labels) || anyNA(labels) || any(grepl(",", labels, fixed = TRUE)))
      input_error("`labels` must be a character vector of labels without commas")
    return(c("--labels", paste(labels, collapse = ",")))
  }
  if (is.character(codebook) && length(codebook) == 1)
    return(c("--codebook", normalizePath(codebook, mustWork = FALSE)))
  if (!is.data.frame(codebook) || !"label" %in% names(codebook))
    input_error("`codebook` must be a data frame with a `label` column, or a file path")
  f <- tempfile("qf-codebook-", fileext = ".csv")
  utils::write.csv(codebook, f, row.names = FALSE, na = "", fileEncoding = "UTF-8")
  c("--codebook", f)
}

# The coders, host and fine-tune arguments, checked before anything starts.
check_room_args <- function(coders, host, models, finetune_model, finetune_epochs,
                            finetune_valid_fraction, finetune_min_codes) {
  one_string <- function(v) is.character(v) && length(v) == 1 && !is.na(v) && nzchar(v)
  whole <- function(v) is.numeric(v) && length(v) == 1 && !is.na(v) && v >= 1 && v == round(v)
  if (!is.null(coders) && (!is.character(coders) || !length(coders) || anyNA(coders) ||
                           any(!nzchar(trimws(coders))) ||
                           any(grepl(",", coders, fixed = TRUE)) || anyDuplicated(coders)))
    input_error("`coders` must be NULL or a character vector of distinct coder names without ",
                "commas, not ", deparse(coders))
  if (!one_string(host))
    input_error("`host` must be one address such as \"127.0.0.1\" (this computer) or ",
                "\"0.0.0.0\" (the network), not ", deparse(host))
  paths <- list(models = models, finetune_model = finetune_model)
  for (arg in names(paths)) {
    if (!is.null(paths[[arg]]) && !one_string(paths[[arg]]))
      input_error("`", arg, "` must be NULL or one path, not ", deparse(paths[[arg]]))
  }
  if (!is.null(finetune_epochs) && !whole(finetune_epochs))
    input_error("`finetune_epochs` must be NULL or a whole number >= 1, not ",
                deparse(finetune_epochs))
  if (!whole(finetune_min_codes))
    input_error("`finetune_min_codes` must be a whole number >= 1, not ",
                deparse(finetune_min_codes))
  if (!is.numeric(finetune_valid_fraction) || length(finetune_valid_fraction) != 1 ||
      is.na(finetune_valid_fraction) || finetune_valid_fraction < 0 ||
      finetune_valid_fraction >= 1)
    input_error("`finetune_valid_fraction` must be a number from 0 to below 1, not ",
                deparse(finetune_valid_fraction))
  invisible(TRUE)
}

# A local folder as an absolute path (the server may run elsewhere); a hub id as it is.
local_path <- function(path) {
  if (!is.null(path) && file.exists(path)) normalizePath(path) else path
}

# Start the server process (`quantformer code`, `args` its arguments) and read its address
# from the first line of its stdout (and the other coders' links from the next `n_links - 1`
# lines); a start that fails (bad input: exit status 2) becomes an R error with the core's
# message. The one verb that does not go through call_verb() (R/call.R), as it serves until
# the coder is done while R returns its process (`wait = FALSE`) or waits on it: neither a
# round trip nor a request the worker could answer (docs/contract.md, "Between R and
# Python"). Its command line is call_verb()'s (cli_command(): the same interpreter, version
# check, `--debug`, `--r-names` and environment).
start_room <- function(args, r_args = NULL, timeout = 600, n_links = 1,
                       debug = isTRUE(getOption("quantformer.debug", FALSE))) {
  cmd <- cli_command(core_python(), "code", args, debug, r_names_arg(r_args))  # R/call.R
  # stderr goes to a file: a pipe nobody reads would fill up and stall the server
  err_file <- tempfile("qf-code-", fileext = ".log")
  proc <- processx::process$new(cmd$python, cmd$args, stdout = "|", stderr = err_file,
                                env = cmd$env, cleanup_tree = TRUE)
  deadline <- Sys.time() + timeout
  line <- character()
  while (!length(line) && Sys.time() < deadline) {
    proc$poll_io(200)
    line <- proc$read_output_lines(1)
    if (!length(line) && !proc$is_alive()) break
  }
  if (!length(line) || !startsWith(line, "http")) {
    proc$wait(5000)
    err <- paste(readLines(err_file, warn = FALSE), collapse = "\n")
    if (proc$is_alive()) proc$kill_tree()
    status <- proc$get_exit_status()
    res <- list(status = if (is.null(status)) 1L else status, stdout = "", stderr = err)
    stop(cli_error("code", res, debug))  # R/python.R: a classed condition naming R's arguments
  }
  links <- line
  while (length(links) < n_links && Sys.time() < deadline && proc$is_alive()) {
    proc$poll_io(200)
    links <- c(links, proc$read_output_lines(n_links - length(links)))
  }
  attr(proc, "url") <- line
  attr(proc, "urls") <- links
  attr(proc, "log") <- err_file
  proc
}

# The RStudio viewer when there is one (it shows local addresses), else the web browser.
open_page <- function(url) {
  viewer <- getOption("viewer")
  if (is.function(viewer)) viewer(url) else utils::browseURL(url)
}
