#' Word attributions of a fine-tuned model's predictions
#'
#' `x` is a fine-tuned model (or its folder) and `newdata` the documents whose predictions
#' it explains.
#' Attributes each document's prediction to the words of its text by Integrated Gradients
#' (Sundararajan et al. 2017) through Captum's `LayerIntegratedGradients` over the input
#' embeddings; the baseline is the document with every word replaced by the pad token
#' (special tokens kept). Subword attributions are summed into words, with character offsets
#' into the text, so `substr(text, start + 1, end)` is the word. Attributions are in logit
#' units and not normalised per document, so documents compare; `completeness_gap` says how
#' far a document's attributions fall short of adding up to its logit difference (raise
#' `steps` when the core warns it is above 5%). Long documents are explained in the window
#' `predict()` uses (head+tail by default); words outside it have `NA` attributions. A model
#' fine-tuned with `truncation = "chunks"` (or `truncation = "chunks"` here) reads every
#' document whole as overlapping windows: every window is explained, and a word's attribution
#' is the mean of its attributions in the windows that read it (`word_windows`), so every word
#' has one. Completeness is then the document's, against the aggregate of its windows' logits:
#' with `aggregate = "mean"` the mean over the windows of their attribution sums against the
#' mean window logit of input minus baseline; with `"max"` the sum of the window with the
#' largest logit against that window's logit difference (the gradient of a maximum reaches
#' only that window).
#' An NLI model (`method = "nli"`; Laurer et al. 2023) is explained by the entailment logit of
#' the target class's (document, hypothesis) pair, attributed to the document's words only; a
#' SetFit model (`method = "setfit"`; Tunstall et al. 2022) by its logistic head's score (the
#' target's log-odds for two classes, its logit for more). Encoder-decoder models (BART, T5)
#' are refused. Runs `quantformer explain`.
#'
#' @param x a model fitted by [textmodel_finetune()] (any method: standard, with
#'   classification, regression or multi-label, `"nli"` or `"setfit"`), a [textmodel_tune()]
#'   result (its refit model), or a model folder.
#' @param newdata documents: a quanteda corpus, a character vector or a data frame with a
#'   `text` column.
#' @param target `NULL` (each document's predicted class; every label of a multi-label
#'   model) or the class (character) whose logit is explained.
#' @param steps `NULL` (adaptive: the trapezoid rule on 9 points of the integration path,
#'   then 17, 33 and 65 points for documents whose completeness gap exceeds 5%, each level
#'   adding the midpoints of the previous one and reusing its gradients; chosen on the
#'   TweetEval Abortion training tweets, see the package's bench/RESULTS.md) or a whole
#'   number >= 1 of Gauss-Legendre steps for every document (Captum's default rule, as
#'   transformers-interpret's `n_steps`).
#' @param check if `TRUE`, also run the deletion test (AOPC of the 5 most attributed words vs
#'   5 random words; Samek et al. 2017) and the model-randomisation check (Spearman rank
#'   correlation with a re-initialised model; Adebayo et al. 2018), returned as the `check`
#'   attribute (a list with `aopc_top`, `aopc_random`, `randomisation_spearman`).
#' @param html `NULL` or a file name ending in `.html`: a self-contained page highlighting
#'   the words.
#' @param precision `"auto"` (default: fp32 whatever the hardware, because Integrated
#'   Gradients needs accurate gradients), `"fp32"` or `"bf16"` (character, one value): bf16
#'   autocast of the forward and backward passes, about 1.9 times fp32's speed on a CPU with
#'   AVX-512 BF16; on 200 tweets the same explained classes and word attributions ranked alike
#'   (Spearman per document median 1.000, lowest 0.94; `bench/RESULTS.md`, "Precision"). The
#'   output's `backend` column says which ran (`"torch"` or `"torch bf16"`). Default from the option
#'   `quantformer.precision` (see [quantformer_precision]).
#' @param scheduler `NULL` (default: in the core's process) or where the explanation runs as
#'   one Dask task: `"local:N"` (a local cluster of N worker processes) or the address of a
#'   running Dask scheduler (`"tcp://host:port"`). The result is the same either way.
#' @param terms if `TRUE`, also summarise per class the `n` terms with the highest mean
#'   attribution across documents (a term's attribution in a document is the sum over its
#'   occurrences, case folded; the mean is over the documents it occurs in, terms in at least 2
#'   documents; 95% percentile bootstrap interval over documents, 1000 resamples), returned as
#'   the `terms` attribute: a data frame `target`, `term` (a stem with `bow_data`), `word`
#'   (the term's most frequent word in the texts), `mean_attribution`, `lower`, `upper`,
#'   `n_docs`, `rank`. Default `FALSE`; `TRUE` when `bow_data` is given.
#' @param bow_data `NULL`, or labelled training data to set the model's terms beside a
#'   bag-of-words model's: a corpus or data frame whose label docvar has the name `y` had in
#'   [textmodel_finetune()] (else `label`), or `list(x = <documents>, y = <labels or docvar
#'   name>)`; its labels must be the model's classes. The core fits a logistic regression
#'   (L2 penalty, C = 1) on the binary bag-of-words of the paper's baselines (Wankmueller 2022:
#'   lowercased, Snowball-stemmed unigrams, punctuation and numbers removed, terms in >= 2
#'   documents and <= 90% of them) and maps the attributed words onto the same stemmed terms.
#'   The `terms` attribute then has per class the `n` terms by mean attribution and the `n`
#'   terms by coefficient, with the columns `bow_coef` (log-odds), `bow_rank`, `in_top`,
#'   `in_bow_top`, and the agreement of the two lists on each row of the class: `top_overlap`
#'   (share of the attribution top also in the coefficient top), `spearman` (Spearman rank
#'   correlation of mean attribution and coefficient over the `n_common` terms with both).
#' @param truncation,stride,max_chunks,aggregate `NULL` (the default): documents are read
#'   as the model was fine-tuned. `truncation = "chunks"` explains every window of every
#'   document (windows of the model's `max_length` tokens, neighbours sharing `stride` tokens,
#'   default a quarter of the window; the first `max_chunks` windows per document, default
#'   all; `aggregate` `"mean"` or `"max"` of the windows' logits, default as fine-tuned);
#'   another `truncation` than the training one (`"head_tail"`, `"head"`, `"tail"`) warns,
#'   naming both. `stride`, `max_chunks` and `aggregate` need chunks. Checked before the model
#'   loads.
#' @param n terms per class in the `terms` attribute (integer, default 20; the same name as
#'   in [textplot_attributions()]).
#' @param top the old name of `n`, accepted with a warning (class `quantformer_deprecated`)
#'   until the next release.
#' @param fit the old name of `x`, accepted with a warning (class `quantformer_deprecated`)
#'   until the next release.
#' @inheritParams textmodel_finetune
#' @return A data frame with one row per word (and target): `document` (docnames;
#'   every textstat_* frame names it `document`, as quanteda's do; frames that go back to the
#'   core, such as `predict(type = "both")`, keep `doc_id`),
#'   `word_id`, `word`, `start`, `end` (0-based, end-exclusive character offsets), 
#'   `attribution` (logits; `NA`: not seen by the model), `target`, `completeness_gap`,
#'   `steps` (integration points the document used), `predicted` and `probability` (of the
#'   predicted class; a multi-label model has no `predicted`). Documents read in windows add
#'   `word_windows` (integer: windows that read the word, more than 1 in an overlap; 0 with
#'   `NA` attribution for words in windows dropped by `max_chunks`) and `n_windows` (integer:
#'   the document's windows).
#'   With `terms = TRUE` or `bow_data`, the attribute `terms` (see `terms`, `bow_data`).
#'   Errors (from the core): `steps` < 1, a `target` that is not a class, empty or all-missing
#'   texts, a folder that is not a model, an encoder-decoder model, a `scheduler` that is
#'   neither `"local:N"` nor a reachable address, `bow_data` without labels or with labels
#'   that are not the model's classes, an unknown `truncation` or `aggregate`, `stride` not
#'   smaller than the window, `max_chunks` < 1, window settings without chunks, chunks with an
#'   NLI or SetFit model or a Longformer (checked before the model loads).
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   s <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   fit <- textmodel_finetune(s[c(1:12, 181:192), ], y = "party", epochs = 1,
#'                             max_length = 64)
#'   textstat_attributions(fit, s[101:102, ])
#'   keys <- textstat_attributions(fit, s[c(13:20, 193:200), ], bow_data = s[1:60, ])
#'   attr(keys, "terms")
#' }
#' }
#' @export
textstat_attributions <- function(x, newdata, target = NULL, steps = NULL, check = FALSE,
                                  html = NULL, terms = FALSE, bow_data = NULL, n = 20L,
                                  text_field = "text", docid_field = "doc_id",
                                  verbose = getOption("quantformer.verbose", TRUE),
                                  scheduler = NULL, truncation = NULL, stride = NULL,
                                  max_chunks = NULL, aggregate = NULL,
                                  precision = getOption("quantformer.precision", "auto"),
                                  fit, top) {
  first <- first_arguments(if (!missing(x)) x, if (!missing(fit)) fit,  # R/arguments.R
                           if (!missing(newdata)) newdata, "fit", "textstat_attributions",
                           missing(x), missing(fit), missing(newdata))
  x <- first$x
  newdata <- first$second
  if (!missing(top)) n <- renamed_argument(top, "top", "n", "textstat_attributions",
                                                 "the name textplot_attributions() uses")
  truncation <- match_truncation(truncation)  # R/reading.R
  model <- model_dir_of(x, "x", exists = TRUE)
  frame <- as_frame(newdata, text_field, docid_field, arg = "newdata")
  terms <- isTRUE(terms) || !is.null(bow_data)
  res <- call_verb("explain", c("--model", model,
                                cli_flags(target = target, steps = steps, check = check,
                                          html = html, top = if (terms) n,
                                          scheduler = scheduler, truncation = truncation,
                                          stride = stride, max_chunks = max_chunks,
                                          aggregate = aggregate),
                                precision_flags(precision)),  # R/precision.R
                   inputs = list("--input" = frame[c("doc_id", "text")],
                                 "--bow-data" = bow_frame(bow_data, x, text_field,
                                                          docid_field)),
                   output = "rds", outputs = if (terms) list("--by-term" = "rds"),
                   beside = if (isTRUE(check)) c(check = ".check.json"),
                   verbose = verbose, r_args = setdiff(names(formals()), c("fit", "top")))
  out <- res$output
  if (terms) attr(out, "terms") <- res$outputs[["--by-term"]]
  names(out)[names(out) == "doc_id"] <- "document"
  for (col in intersect(c("word_id", "start", "end", "word_windows", "n_windows"),
                        names(out)))
    out[[col]] <- as.integer(out[[col]])
  if (isTRUE(check)) attr(out, "check") <- res$beside$check
  class(out) <- c("textstat_attributions", "textstat", "data.frame")
  out
}

# `bow_data` of textstat_attributions() as a frame doc_id, text, label (NULL when not given).
# The label is `y`'s docvar name of the fitted model when it was one, else "label", or the `y`
# of list(x = , y = ).
bow_frame <- function(bow_data, model, text_field, docid_field) {
  if (is.null(bow_data)) return(NULL)
  if (is.list(bow_data) && !is.data.frame(bow_data) && !is_corpus(bow_data) &&
      all(c("x", "y") %in% names(bow_data))) {
    bframe <- as_frame(bow_data$x, text_field, docid_field, arg = "bow_data$x")
    y <- resolve_y(bow_data$y, bframe, arg = "bow_data$y", x_arg = "bow_data$x")$y
  } else {
    bframe <- as_frame(bow_data, text_field, docid_field, arg = "bow_data")
    yname <- if (inherits(model, "textmodel_finetune") && is.character(model$call$y)) model$call$y
             else "label"
    dv <- setdiff(names(bframe), c("doc_id", "text"))
    if (!yname %in% dv)
      input_error("`bow_data` needs its labels in the docvar '", yname, "' (",
                  if (yname == "label") "the default" else "the `y` of textmodel_finetune()",
                  "), which it lacks; ",
                  if (length(dv)) paste0("its docvars are: ", paste(dv, collapse = ", "))
                  else "it has no docvars",
                  ". Name the labels with bow_data = list(x = <documents>, y = <docvar name ",
                  "or one label per document>)")
    y <- bframe[[yname]]
  }
  data.frame(bframe[c("doc_id", "text")], label = enc2utf8(as.character(y)),
             stringsAsFactors = FALSE)
}
