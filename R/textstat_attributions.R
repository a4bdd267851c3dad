#' Word attributions of a fine-tuned model's predictions
#'
#' Attributes each document's prediction to the words of its text by Integrated Gradients
#' (Sundararajan et al. 2017) through Captum's `LayerIntegratedGradients` over the input
#' embeddings; the baseline is the document with every word replaced by the pad token
#' (special tokens kept). Subword attributions are summed into words, with character offsets
#' into the text, so `substr(text, start + 1, end)` is the word. Attributions are in logit
#' units and not normalised per document, so documents compare; `completeness_gap` says how
#' far a document's attributions fall short of adding up to its logit difference (raise
#' `steps` when the core warns it is above 5\%). Long documents are explained in the window
#' `predict()` uses (head+tail by default); words outside it have `NA` attributions.
#' Runs `quantformer explain`.
#'
#' @param fit a model fitted by [textmodel_finetune()] (the standard method; classification,
#'   regression or multi-label), or its model folder.
#' @param newdata documents: a quanteda corpus, a character vector or a data frame with a
#'   `text` column.
#' @param target `NULL` (each document's predicted class; every label of a multi-label
#'   model) or the class (character) whose logit is explained.
#' @param steps `NULL` (adaptive: the trapezoid rule on 9 points of the integration path,
#'   then 17, 33 and 65 points for documents whose completeness gap exceeds 5\%, each level
#'   adding the midpoints of the previous one and reusing its gradients; chosen on the
#'   TweetEval Abortion training tweets, see the package's bench/RESULTS.md) or a whole number
#'   >= 1 of Gauss-Legendre steps for every document (Captum's default rule, as
#'   transformers-interpret's `n_steps`).
#' @param check if `TRUE`, also run the deletion test (AOPC of the 5 most attributed words vs
#'   5 random words; Samek et al. 2017) and the model-randomisation check (Spearman rank
#'   correlation with a re-initialised model; Adebayo et al. 2018), returned as the `check`
#'   attribute (a list with `aopc_top`, `aopc_random`, `randomisation_spearman`).
#' @param html `NULL` or a file name ending in `.html`: a self-contained page highlighting
#'   the words.
#' @inheritParams textmodel_finetune
#' @return A data frame with one row per word (and target): `document` (docnames;
#'   every textstat_* frame names it `document`, as quanteda's do; frames that go back to the
#'   core, such as `predict(type = "both")`, keep `doc_id`),
#'   `word_id`, `word`, `start`, `end` (0-based, end-exclusive character offsets), 
#'   `attribution` (logits; `NA`: not seen by the model), `target`, `completeness_gap`.
#'   Errors (from the core): `steps` < 1, a `target` that is not a class, empty or all-missing
#'   texts, a folder that is not a model.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   s <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   fit <- textmodel_finetune(s[c(1:12, 181:192), ], y = "party", epochs = 1,
#'                             max_length = 64)
#'   textstat_attributions(fit, s[101:102, ])
#' }
#' }
#' @export
textstat_attributions <- function(fit, newdata, target = NULL, steps = NULL, check = FALSE,
                                  html = NULL, text_field = "text", docid_field = "doc_id",
                                  verbose = FALSE) {
  model <- if (inherits(fit, "textmodel_finetune")) fit$model_dir else fit
  frame <- as_frame(newdata, text_field, docid_field, arg = "newdata")
  in_file <- write_input(frame[c("doc_id", "text")])
  out_file <- out_path()
  check_file <- sub("\\.rds$", ".check.json", out_file)
  on.exit(unlink(c(in_file, out_file, check_file)), add = TRUE)
  run_cli("explain", c("--model", model, "--input", in_file, "--out", out_file,
                       cli_flags(target = target, steps = steps, check = check, html = html),
                       if (!isTRUE(verbose)) "--quiet"),
          verbose = verbose, r_args = names(formals()))
  out <- read_output(out_file)
  names(out)[names(out) == "doc_id"] <- "document"
  for (col in c("word_id", "start", "end")) out[[col]] <- as.integer(out[[col]])
  if (isTRUE(check)) attr(out, "check") <- jsonlite::read_json(check_file, simplifyVector = TRUE)
  class(out) <- c("textstat_attributions", "textstat", "data.frame")
  out
}

#' Plot what a model keys on: mean word attributions across documents
#'
#' A keyness-style chart (as `quanteda.textplots::textplot_keyness()` users know) of the
#' terms with the highest and lowest mean attribution across documents for one target class,
#' from the result of [textstat_attributions()]. A term's attribution in a document is the
#' sum over its occurrences (case folded); its mean is over the documents it occurs in.
#'
#' @param x the result of [textstat_attributions()].
#' @param target the class to plot (default: the first in `x`).
#' @param n terms shown at each end (default 10).
#' @param min_docs terms in fewer documents are left out (default 2).
#' @param file `NULL` (the current device) or a `.png` file to draw into.
#' @return The plotted terms (a data frame `term`, `mean_attribution`, `n_docs`), invisibly.
#' @export
textplot_attributions <- function(x, target = NULL, n = 10L, min_docs = 2L, file = NULL) {
  if (!inherits(x, "textstat_attributions"))
    stop("`x` must be the result of textstat_attributions()", call. = FALSE)
  if (is.null(target)) target <- as.character(x$target[1])
  w <- x[x$target == target & !is.na(x$attribution), ]
  if (!nrow(w)) stop("`target` '", target, "' has no attributions in `x`", call. = FALSE)
  w$term <- tolower(w$word)
  per_doc <- stats::aggregate(attribution ~ term + document, data = w, FUN = sum)
  terms <- stats::aggregate(attribution ~ term, data = per_doc, FUN = mean)
  names(terms)[2] <- "mean_attribution"
  terms$n_docs <- as.integer(table(per_doc$term)[terms$term])
  terms <- terms[terms$n_docs >= min_docs, ]
  terms <- terms[order(terms$mean_attribution), ]
  keep <- unique(c(utils::head(seq_len(nrow(terms)), n), utils::tail(seq_len(nrow(terms)), n)))
  terms <- terms[keep, ]
  if (!is.null(file)) {
    grDevices::png(file, width = 800, height = 120 + 24 * nrow(terms))
    on.exit(grDevices::dev.off(), add = TRUE)
  }
  graphics::par(mar = c(4, 10, 3, 1))
  graphics::barplot(terms$mean_attribution, names.arg = terms$term, horiz = TRUE, las = 1,
                    col = ifelse(terms$mean_attribution > 0, "#2166ac", "#e66101"),
                    xlab = "mean attribution (logits)",
                    main = paste0("What the model keys on: ", target))
  rownames(terms) <- NULL
  invisible(terms)
}
