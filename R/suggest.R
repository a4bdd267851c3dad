#' Which documents to code next (active learning)
#'
#' Chooses the `n` uncoded documents whose codes would help a classifier most, so that fewer
#' documents need hand-coding. Runs `quantformer suggest` in a child Python process: the
#' corpus is embedded once with the bundled all-MiniLM-L6-v2 (the vectors are cached, keyed
#' by the model and the corpus content, so later rounds take seconds), a logistic regression
#' is fitted on the coded documents' embeddings, and the uncoded documents are ranked by a
#' query strategy. Without codes of two classes, a cold start picks diverse documents
#' (k-means centres of the embeddings). Fine-tune once at the end with
#' [textmodel_finetune()] (Vysogorets & Gopal 2024 show this matches fine-tuning every round
#' at far lower cost). Measured in `bench/RESULTS.md` (3 seeds): with one toxic comment in ten,
#' the model fine-tuned on 200 suggested codes matched it fine-tuned on 300 random codes, and
#' on 175 when the final fine-tuning oversampled the rare class to balance
#' (`textmodel_finetune(..., oversample = 1)`; without it 175 codes gave macro-F1 0.79, with it
#' 0.84, as 300 random codes; worth doing below about 200 codes); on
#' abortion stance tweets (three classes, none rare) it was below random on a test set drawn
#' unlike the pool (macro-F1 0.53 vs 0.58 at 300 codes) and level with it inside the pool
#' (0.620 vs 0.626, 5-fold cross-validation). Active learning pays off most when a class is
#' rare.
#'
#' @param x documents: a quanteda corpus, a character vector or a data frame with a `text`
#'   column.
#' @param y the codes so far: a vector with one value per document (`NA` = not coded yet), or
#'   the name of a docvar of `x`; `NULL` (default) = nothing coded yet (cold start).
#' @param n integer >= 1: how many documents to suggest (default 50). More than the uncoded
#'   documents returns them all, with a warning.
#' @param strategy `"margin"` (default: the smallest gap between the two most probable classes,
#'   "breaking ties", Scheffer et al. 2001; the strongest simple strategy in Schroeder,
#'   Niekler & Potthast 2022), `"least_confidence"` (Lewis & Gale 1994), `"entropy"` (Settles
#'   2009), `"random"` (a simple random sample, for comparison) or `"cold"` (k-means centres;
#'   used automatically, with a warning, while fewer than two classes are coded).
#' @param stratify `NULL` or the name of a docvar: a cold start spreads the documents over its
#'   levels in proportion to their size.
#' @param diversity logical: the diversity guard of the uncertainty strategies (Zhdanov 2019):
#'   the `10 * n` most uncertain documents are clustered into `n` groups and the most
#'   uncertain document of each is chosen, so a batch is not `n` near-duplicates.
#' @param random_share number from 0 to 1 (default 0): the share of an uncertainty batch drawn
#'   at random from the uncoded documents instead ("epsilon-greedy" active learning, Osugi,
#'   Kim & Scott 2005), which keeps the coded sample partly representative where uncertainty
#'   sampling alone over-samples ambiguous documents (Karamcheti et al. 2021). Those documents
#'   have `strategy` `"random"`.
#' @param model `NULL` (a logistic regression over embeddings) or a fine-tuned model (a
#'   [textmodel_finetune()] object or its model directory) whose probabilities rank the
#'   documents instead.
#' @param seed integer: the same inputs and seed give the same suggestions.
#' @param cache_dir folder for the embedding cache (default: a folder in [tempdir()], which
#'   lasts for the R session; give a lasting folder to reuse the vectors across sessions).
#' @param precision `"auto"` (default: bf16 autocast where the CPU has AMX or AVX-512 BF16 or
#'   the GPU supports it, fp32 elsewhere), `"fp32"` or `"bf16"` (character, one value; see
#'   [quantformer_precision]): of the embeddings (part of their cache's key) and of `model`.
#'   The embeddings' uncertainty scores are not rechecked in fp32 (they only order documents);
#'   `model`'s probabilities are, as in `predict()`: documents whose top-two margin is below
#'   0.05 are scored again in fp32. The core prints the precision used and why. Default from
#'   the option `quantformer.precision`.
#' @template verbose
#' @return A data frame with one row per suggested document, most informative first:
#'   `doc_id`, `text`, the docvars of `x`, `rank`, `score` (the uncertainty that chose the
#'   document; `NA` for cold and random), `strategy` (the one that chose the document),
#'   `guess` (the current
#'   model's most probable class; `NA` without codes), `guess_prob` and an empty `code`
#'   column. Write it with [write_suggestions()] for coding in a spreadsheet.
#' @seealso [write_suggestions()], [read_suggestions()], [merge_codes()]
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   first <- suggest_documents(sotu, n = 5)            # nothing coded yet: a cold start
#'   f <- write_suggestions(first, tempfile(fileext = ".csv"))
#'   # ... fill in the code column in a spreadsheet, then:
#'   codes <- merge_codes(sotu, read_suggestions(f))
#' }
#' }
#' @export
suggest_documents <- function(x, y = NULL, n = 50,
                              strategy = c("margin", "least_confidence", "entropy", "random",
                                           "cold"),
                              stratify = NULL, diversity = TRUE, random_share = 0,
                              model = NULL, seed = 1,
                              cache_dir = file.path(tempdir(), "quantformer-embeddings"),
                              precision = getOption("quantformer.precision", "auto"),
                              verbose = getOption("quantformer.verbose", TRUE)) {
  strategy <- match_choice(strategy)
  precision <- precision_flags(precision)  # R/precision.R
  if (!is.numeric(n) || length(n) != 1 || is.na(n) || n < 1 || n != round(n))
    input_error("`n` must be one whole number of at least 1, not ", format(n), call. = FALSE)
  if (!is.numeric(random_share) || length(random_share) != 1 || is.na(random_share) ||
      random_share < 0 || random_share > 1)
    input_error("`random_share` must be one number from 0 to 1 (e.g. 0.2), not ",
         format(random_share), call. = FALSE)
  frame <- as_frame(x)
  codes <- if (is.null(y)) rep(NA_character_, nrow(frame)) else
    as.character(resolve_y(y, frame)$y)
  if (!is.null(stratify) && !stratify %in% names(frame_docvars(frame)))
    input_error("`stratify` = '", stratify, "' is not a docvar of `x`", call. = FALSE)
  args <- cli_flags(n = n, strategy = strategy, stratify = stratify,
                    no_diversity = !isTRUE(diversity),
                    random_share = if (random_share > 0) random_share,
                    model = model_dir_of(model, null_ok = TRUE),
                    seed = seed, cache_dir = cache_dir, quiet = !isTRUE(verbose))
  args <- c(args, precision)
  # uncompressed, so the same documents give the same bytes and the embedding cache is reused
  # across rounds
  out <- call_verb("suggest", args, inputs = suggest_inputs(frame, codes, stratify),
                   output = "rds", compress = FALSE, verbose = verbose,
                   r_args = names(formals()))$output
  added <- c("rank", "score", "strategy", "guess", "guess_prob", "code")
  out <- merge(out[c("doc_id", added)], frame, by = "doc_id", sort = FALSE)
  out <- out[order(out$rank), c("doc_id", "text", setdiff(names(frame), c("doc_id", "text")),
                                added)]
  rownames(out) <- NULL
  out
}

# The frames `quantformer suggest` reads, as call_verb() inputs: the corpus (doc_id, text and
# the stratifying docvar only) and the codes (none when nothing is coded).
suggest_inputs <- function(frame, codes, stratify) {
  coded <- !is.na(codes)
  list("--input" = frame[c("doc_id", "text", stratify)],
       "--labelled" = if (any(coded))
         data.frame(doc_id = frame$doc_id[coded], label = enc2utf8(codes[coded]),
                    stringsAsFactors = FALSE))
}

#' Code suggested documents in a spreadsheet
#'
#' `write_suggestions()` writes the documents from [suggest_documents()] to a UTF-8 CSV file
#' with an empty `code` column (open it in a spreadsheet, fill in `code`, save as CSV);
#' `read_suggestions()` reads the filled-in file back as `doc_id` and `code`; [merge_codes()]
#' adds the codes to the label vector of the corpus by docname.
#'
#' @param x the data frame returned by [suggest_documents()].
#' @param file path of the CSV file.
#' @return `write_suggestions()`: `file`, invisibly. `read_suggestions()`: a data frame
#'   `doc_id`, `code` (character; empty cells are `NA`), one row per line of the file.
#' @export
write_suggestions <- function(x, file) {
  if (!is.data.frame(x) || !all(c("doc_id", "text") %in% names(x)))
    input_error("`x` must be the data frame returned by suggest_documents() (with doc_id and text)",
         call. = FALSE)
  if (!"code" %in% names(x)) x$code <- NA_character_
  utils::write.csv(x, file, row.names = FALSE, na = "", fileEncoding = "UTF-8")
  invisible(file)
}

#' @rdname write_suggestions
#' @param code name of the column holding the codes (default `"code"`).
#' @export
read_suggestions <- function(file, code = "code") {
  if (!file.exists(file)) input_error("file not found: '", file, "'", call. = FALSE)
  df <- utils::read.csv(file, colClasses = "character", na.strings = "",
                        encoding = "UTF-8", check.names = FALSE)
  miss <- setdiff(c("doc_id", code), names(df))
  if (length(miss))
    input_error("'", file, "' has no column ", paste0("'", miss, "'", collapse = ", "),
         "; its columns are: ", paste(names(df), collapse = ", "),
         ". Keep the doc_id column and fill in the '", code, "' column", call. = FALSE)
  out <- data.frame(doc_id = df$doc_id, code = trimws(df[[code]]), stringsAsFactors = FALSE)
  out$code[!is.na(out$code) & !nzchar(out$code)] <- NA_character_
  out
}

#' Add new codes to the codes of a corpus, by docname
#'
#' @param x the documents (a quanteda corpus, character vector or data frame), as given to
#'   [suggest_documents()].
#' @param coded a data frame with `doc_id` and `code` (from [read_suggestions()]); uncoded
#'   rows (`NA`) are ignored.
#' @param y the codes so far (one per document, `NA` = uncoded, or a docvar name), or `NULL`
#'   (default: none). Pass the codes of earlier rounds here: with `NULL` the result holds only
#'   the codes in `coded`.
#' @return A character vector of codes, one per document of `x` in its order, named by
#'   docnames (`NA` = not coded yet): pass it as `y` to [suggest_documents()] or
#'   [textmodel_finetune()].
#' @export
merge_codes <- function(x, coded, y = NULL) {
  frame <- as_frame(x)
  codes <- if (is.null(y)) rep(NA_character_, nrow(frame)) else
    as.character(resolve_y(y, frame)$y)
  if (!is.data.frame(coded) || !all(c("doc_id", "code") %in% names(coded)))
    input_error("`coded` must be a data frame with columns doc_id and code (see read_suggestions())",
         call. = FALSE)
  coded <- coded[!is.na(coded$code), c("doc_id", "code")]
  pos <- match(coded$doc_id, frame$doc_id)
  if (anyNA(pos))
    input_error(sum(is.na(pos)), " doc_id(s) in `coded` are not docnames of `x`, first: '",
         coded$doc_id[is.na(pos)][1], "'; code documents of this corpus only", call. = FALSE)
  clash <- !is.na(codes[pos]) & codes[pos] != coded$code
  if (any(clash))
    input_error(sum(clash), " document(s) already have another code in `y`, first: '",
         coded$doc_id[clash][1], "'; keep one code per document", call. = FALSE)
  codes[pos] <- coded$code
  stats::setNames(codes, frame$doc_id)
}
