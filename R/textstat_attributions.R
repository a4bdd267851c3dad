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
#' An NLI model (`method = "nli"`; Laurer et al. 2023) is explained by the entailment logit of
#' the target class's (document, hypothesis) pair, attributed to the document's words only; a
#' SetFit model (`method = "setfit"`; Tunstall et al. 2022) by its logistic head's score (the
#' target's log-odds for two classes, its logit for more). Encoder-decoder models (BART, T5)
#' are refused. Runs `quantformer explain`.
#'
#' @param fit a model fitted by [textmodel_finetune()] (any method: standard, with
#'   classification, regression or multi-label, `"nli"` or `"setfit"`), or its model folder.
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
#' @param scheduler `NULL` (default: in the core's process) or where the explanation runs as
#'   one Dask task: `"local:N"` (a local cluster of N worker processes) or the address of a
#'   running Dask scheduler (`"tcp://host:port"`). The result is the same either way.
#' @param terms if `TRUE`, also summarise per class the `top` terms with the highest mean
#'   attribution across documents (a term's attribution in a document is the sum over its
#'   occurrences, case folded; the mean is over the documents it occurs in, terms in at least 2
#'   documents; 95\% percentile bootstrap interval over documents, 1000 resamples), returned as
#'   the `terms` attribute: a data frame `target`, `term`, `mean_attribution`, `lower`,
#'   `upper`, `n_docs`, `rank`. Default `FALSE`; `TRUE` when `bow_data` is given.
#' @param bow_data `NULL`, or labelled training data to set the model's terms beside a
#'   bag-of-words model's: a corpus or data frame whose label docvar has the name `y` had in
#'   [textmodel_finetune()] (else `label`), or `list(x = <documents>, y = <labels or docvar
#'   name>)`; its labels must be the model's classes. The core fits a logistic regression
#'   (L2 penalty, C = 1) on the binary bag-of-words of the paper's baselines (Wankmueller 2022:
#'   lowercased, Snowball-stemmed unigrams, punctuation and numbers removed, terms in >= 2
#'   documents and <= 90\% of them) and maps the attributed words onto the same stemmed terms.
#'   The `terms` attribute then has per class the `top` terms by mean attribution and the `top`
#'   terms by coefficient, with the columns `bow_coef` (log-odds), `bow_rank`, `in_top`,
#'   `in_bow_top`, and the agreement of the two lists on each row of the class: `top_overlap`
#'   (share of the attribution top also in the coefficient top), `spearman` (Spearman rank
#'   correlation of mean attribution and coefficient over the `n_common` terms with both).
#' @param top terms per class in the `terms` attribute (default 20).
#' @inheritParams textmodel_finetune
#' @return A data frame with one row per word (and target): `document` (docnames;
#'   every textstat_* frame names it `document`, as quanteda's do; frames that go back to the
#'   core, such as `predict(type = "both")`, keep `doc_id`),
#'   `word_id`, `word`, `start`, `end` (0-based, end-exclusive character offsets), 
#'   `attribution` (logits; `NA`: not seen by the model), `target`, `completeness_gap`.
#'   With `terms = TRUE` or `bow_data`, the attribute `terms` (see `terms`, `bow_data`).
#'   Errors (from the core): `steps` < 1, a `target` that is not a class, empty or all-missing
#'   texts, a folder that is not a model, an encoder-decoder model, a `scheduler` that is
#'   neither `"local:N"` nor a reachable address, `bow_data` without labels or with labels
#'   that are not the model's classes (checked before the model loads).
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
textstat_attributions <- function(fit, newdata, target = NULL, steps = NULL, check = FALSE,
                                  html = NULL, terms = FALSE, bow_data = NULL, top = 20L,
                                  text_field = "text", docid_field = "doc_id",
                                  verbose = FALSE, scheduler = NULL) {
  model <- if (inherits(fit, "textmodel_finetune")) fit$model_dir else fit
  frame <- as_frame(newdata, text_field, docid_field, arg = "newdata")
  bow <- bow_frame(bow_data, fit, text_field, docid_field)
  terms <- isTRUE(terms) || !is.null(bow)
  in_file <- write_input(frame[c("doc_id", "text")])
  bow_file <- if (!is.null(bow)) write_input(bow)
  out_file <- out_path()
  terms_file <- if (terms) out_path()
  check_file <- sub("\\.rds$", ".check.json", out_file)
  on.exit(unlink(c(in_file, bow_file, out_file, terms_file, check_file)), add = TRUE)
  run_cli("explain", c("--model", model, "--input", in_file, "--out", out_file,
                       cli_flags(target = target, steps = steps, check = check, html = html,
                                 by_term = terms_file, bow_data = bow_file,
                                 top = if (terms) top, scheduler = scheduler),
                       if (!isTRUE(verbose)) "--quiet"),
          verbose = verbose, r_args = names(formals()))
  out <- read_output(out_file)
  if (terms) attr(out, "terms") <- read_output(terms_file)
  names(out)[names(out) == "doc_id"] <- "document"
  for (col in c("word_id", "start", "end")) out[[col]] <- as.integer(out[[col]])
  if (isTRUE(check)) attr(out, "check") <- jsonlite::read_json(check_file, simplifyVector = TRUE)
  class(out) <- c("textstat_attributions", "textstat", "data.frame")
  out
}

# `bow_data` of textstat_attributions() as a frame doc_id, text, label (NULL when not given).
# The label is `y`'s docvar name of the fitted model when it was one, else "label", or the `y`
# of list(x = , y = ).
bow_frame <- function(bow_data, fit, text_field, docid_field) {
  if (is.null(bow_data)) return(NULL)
  if (is.list(bow_data) && !is.data.frame(bow_data) && !is_corpus(bow_data) &&
      all(c("x", "y") %in% names(bow_data))) {
    bframe <- as_frame(bow_data$x, text_field, docid_field, arg = "bow_data$x")
    y <- resolve_y(bow_data$y, bframe, arg = "bow_data$y", x_arg = "bow_data$x")$y
  } else {
    bframe <- as_frame(bow_data, text_field, docid_field, arg = "bow_data")
    yname <- if (inherits(fit, "textmodel_finetune") && is.character(fit$call$y)) fit$call$y
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

#' Plot what a model keys on, or documents with their words highlighted
#'
#' `type = "terms"`: a keyness-style chart (as `quanteda.textplots::textplot_keyness()` users
#' know) of the terms with the highest mean attribution across documents for one target
#' class. When `x` has the `terms` attribute of [textstat_attributions()] (`terms = TRUE` or
#' `bow_data`), the bars are the core's means with their 95\% bootstrap intervals and, when it
#' was run with `bow_data`, a second panel beside them gives the same terms' bag-of-words
#' logistic-regression coefficients (the class's top terms by coefficient added), with the
#' top-term overlap and the Spearman correlation in the title. Without that attribute, the
#' means are computed here from the words (case folded; the `n` highest and `n` lowest, no
#' intervals). A term's attribution in a document is the sum over its occurrences; its mean is
#' over the documents it occurs in. Terms only the bag of words ranks (absent from the explained
#' documents) are marked `*`. With `file`, a PNG 1600 pixels wide (2200 with the BoW panel) at
#' 150 dpi.
#'
#' `type = "documents"`: the text of chosen documents with each word on a background whose hue
#' gives the sign of its attribution (blue: towards the explained class, orange: against it)
#' and whose strength and size grow with its absolute value, on one scale for all documents
#' shown, spaced as in the text; words the model did not see are grey. Base graphics, so it draws on the current
#' device (the viewer) or, with `file`, into a PNG 1600 pixels wide (150 dpi) as tall as the
#' text needs.
#'
#' @param x the result of [textstat_attributions()].
#' @param target the class to plot (default: the first in `x`).
#' @param n terms shown (default 10): the top `n` (and with the BoW panel, the class's top `n`
#'   by coefficient too; without the `terms` attribute, the `n` lowest too).
#' @param min_docs without the `terms` attribute: terms in fewer documents are left out
#'   (default 2).
#' @param file `NULL` (the current device) or a `.png` file to draw into.
#' @param type `"terms"` (default) or `"documents"`.
#' @param documents with `type = "documents"`: the docnames shown (default: the first 3
#'   documents of `x`); each at most 150 words.
#' @return `type = "terms"`: the plotted terms (a data frame), invisibly; `"documents"`: the
#'   plotted words (`document`, `word`, `attribution`), invisibly.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   s <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   fit <- textmodel_finetune(s[c(1:12, 181:192), ], y = "party", epochs = 1,
#'                             max_length = 64)
#'   a <- textstat_attributions(fit, s[c(13:20, 193:200), ], bow_data = s[1:60, ])
#'   textplot_attributions(a)
#'   textplot_attributions(a, type = "documents", documents = s$doc_id[13])
#' }
#' }
#' @export
textplot_attributions <- function(x, target = NULL, n = 10L, min_docs = 2L, file = NULL,
                                  type = c("terms", "documents"), documents = NULL) {
  type <- match.arg(type)
  if (!inherits(x, "textstat_attributions"))
    input_error("`x` must be the result of textstat_attributions()")
  if (!is.null(file) && !grepl("\\.png$", file, ignore.case = TRUE))
    input_error("`file` must end in .png, not '", file, "'")
  if (type == "documents") return(plot_documents(x, target, documents, file))
  if (is.null(target)) target <- as.character(x$target[1])
  if (!target %in% x$target)
    input_error("`target` '", target, "' has no attributions in `x`")
  terms <- attr(x, "terms")
  if (!is.null(terms)) return(plot_terms(terms, target, n, file))
  w <- x[x$target == target & !is.na(x$attribution), ]
  if (!nrow(w)) input_error("`target` '", target, "' has no attributions in `x`")
  w$term <- tolower(w$word)
  per_doc <- stats::aggregate(attribution ~ term + document, data = w, FUN = sum)
  terms <- stats::aggregate(attribution ~ term, data = per_doc, FUN = mean)
  names(terms)[2] <- "mean_attribution"
  terms$n_docs <- as.integer(table(per_doc$term)[terms$term])
  terms <- terms[terms$n_docs >= min_docs, ]
  terms <- terms[order(terms$mean_attribution), ]
  keep <- unique(c(utils::head(seq_len(nrow(terms)), n), utils::tail(seq_len(nrow(terms)), n)))
  terms <- terms[keep, ]
  open_png(file, 1600, 2 * (120 + 24 * nrow(terms)), res = 150)
  if (!is.null(file)) on.exit(grDevices::dev.off(), add = TRUE)
  old <- graphics::par(mar = c(4, 10, 3, 1))
  on.exit(graphics::par(old), add = TRUE, after = FALSE)
  graphics::barplot(terms$mean_attribution, names.arg = terms$term, horiz = TRUE, las = 1,
                    col = sign_colour(terms$mean_attribution),
                    xlab = "mean attribution (logits)",
                    main = paste0("What the model keys on: ", target))
  rownames(terms) <- NULL
  invisible(terms)
}

sign_colour <- function(v, alpha = 1) {
  ifelse(is.na(v) | v > 0, grDevices::rgb(33, 102, 172, alpha * 255, maxColorValue = 255),
         grDevices::rgb(230, 97, 1, alpha * 255, maxColorValue = 255))
}

open_png <- function(file, width, height, res = NA) {
  if (!is.null(file)) grDevices::png(file, width = width, height = height, res = res)
}

# The core's per-class terms (textstat_attributions(terms = TRUE) or bow_data): mean
# attributions with intervals, and the bag-of-words coefficients beside when present.
plot_terms <- function(terms, target, n, file) {
  t <- terms[terms$target == target, ]
  bow <- "bow_coef" %in% names(t)
  keep <- !is.na(t$rank) & t$rank <= n
  if (bow) keep <- keep | (!is.na(t$bow_rank) & t$bow_rank <= n)
  t <- t[keep, ]
  if (!nrow(t)) input_error("`target` '", target, "' has no terms in at least 2 documents",
                     call. = FALSE)
  t <- t[order(t$mean_attribution, na.last = FALSE), ]  # bars bottom-up: the top term on top
  open_png(file, if (bow) 2200 else 1600, 2 * (140 + 24 * nrow(t)), res = 150)
  if (!is.null(file)) on.exit(grDevices::dev.off(), add = TRUE)
  old <- graphics::par(mfrow = c(1, if (bow) 2 else 1), mar = c(5, 7, 4, 1))
  on.exit(graphics::par(old), add = TRUE, after = FALSE)
  m <- ifelse(is.na(t$mean_attribution), 0, t$mean_attribution)
  # terms only the bag of words ranks (no attribution in the explained documents): marked *
  label <- ifelse(is.na(t$mean_attribution), paste0(t$term, " *"), t$term)
  lim <- range(c(0, t$lower, t$upper), na.rm = TRUE)
  y <- graphics::barplot(m, names.arg = label, horiz = TRUE, las = 1, xlim = lim,
                         col = sign_colour(t$mean_attribution), cex.main = 0.9,
                         xlab = paste0("mean attribution (logits), 95% CI",
                                       if (anyNA(t$mean_attribution))
                                         "\n* not in the explained documents"),
                         main = paste0("Model: ", target))
  graphics::segments(t$lower, y, t$upper, y, lwd = 1.5)
  if (bow) {
    b <- ifelse(is.na(t$bow_coef), 0, t$bow_coef)
    graphics::barplot(b, names.arg = t$term, horiz = TRUE, las = 1,
                      col = sign_colour(t$bow_coef, 0.6),
                      xlab = "coefficient (log-odds)", cex.main = 0.9,
                      main = sprintf("Bag of words: overlap %.2f,\nSpearman %.2f",
                                     t$top_overlap[1], t$spearman[1]))
  }
  rownames(t) <- NULL
  invisible(t)
}

# Lay out words on lines `width` inches wide (strwidth on the open device): x (inches) and
# line of each word; `spaced`: whether the text has white space before the word.
layout_words <- function(words, cex, width, spaced = rep(TRUE, length(words))) {
  # strwidth uses one cex per call: widths at cex 1, scaled (text scales linearly)
  w <- graphics::strwidth(words, units = "inches") * cex
  if (anyNA(w)) w[is.na(w)] <- graphics::strwidth("m", units = "inches") * cex[is.na(w)]
  sp <- graphics::strwidth(" ", units = "inches") * cex
  x <- numeric(length(words)); line <- integer(length(words))
  cx <- 0; cl <- 1L
  for (i in seq_along(words)) {
    if (spaced[i] && cx > 0) cx <- cx + sp[i]  # a space where the text has one
    if (cx + w[i] > width && cx > 0) { cx <- 0; cl <- cl + 1L }
    x[i] <- cx; line[i] <- cl
    cx <- cx + w[i]
  }
  data.frame(x = x, line = line, w = w)
}

# Highlighted documents (base graphics), on the current device or a PNG.
plot_documents <- function(x, target, documents, file, max_words = 150L) {
  docs <- unique(as.character(x$document))
  if (is.null(documents)) documents <- utils::head(docs, 3L)
  bad <- setdiff(documents, docs)
  if (length(bad))
    input_error("`documents`: ", paste(utils::head(bad, 5), collapse = ", "),
         " is not a document of `x`", call. = FALSE)
  blocks <- lapply(documents, function(d) {
    w <- x[x$document == d, ]
    tg <- if (is.null(target)) as.character(w$target[1]) else target
    w <- utils::head(w[w$target == tg, ], max_words)
    list(document = d, target = tg, w = w)
  })
  shown <- do.call(rbind, lapply(blocks, `[[`, "w"))
  scale <- max(abs(shown$attribution), na.rm = TRUE)
  if (!is.finite(scale) || scale == 0) scale <- 1
  strength <- function(a) ifelse(is.na(a), 0, pmin(1, abs(a) / scale))
  width <- 1600 / 150; margin <- 0.25; lh <- 0.3
  measure <- function() lapply(blocks, function(b)
    layout_words(b$w$word, 0.8 + 0.6 * strength(b$w$attribution), width - 2 * margin,
                 c(TRUE, utils::tail(b$w$start, -1) > utils::head(b$w$end, -1))))
  if (!is.null(file)) {  # measure on a scratch PNG, then open the PNG as tall as needed
    scratch <- tempfile(fileext = ".png")
    grDevices::png(scratch, width = 1600, height = 1600, res = 150, pointsize = 12)
    graphics::plot.new()
    lay <- measure()
    grDevices::dev.off()
    unlink(scratch)
  }
  height <- NULL
  if (!is.null(file)) {
    lines <- sum(vapply(lay, function(l) max(l$line, 0L), 1L)) + 2 * length(blocks) + 2
    height <- 2 * margin + lh * lines
    grDevices::png(file, width = 1600, height = round(height * 150), res = 150, pointsize = 12)
    on.exit(grDevices::dev.off(), add = TRUE)
  }
  old <- graphics::par(mar = c(0, 0, 0, 0), xaxs = "i", yaxs = "i")
  on.exit(graphics::par(old), add = TRUE, after = FALSE)
  graphics::plot.new()
  if (is.null(file)) {  # the open device: lines as wide as it is, text from its top
    width <- graphics::par("pin")[1]; height <- graphics::par("pin")[2]
    lay <- measure()
  }
  graphics::plot.window(c(0, width), c(0, height))
  y <- height - margin - lh / 2
  for (i in seq_along(blocks)) {
    b <- blocks[[i]]; l <- lay[[i]]
    graphics::text(margin, y, paste0(b$document, "  \u00b7  explained: ", b$target), adj = 0,
                   font = 2, cex = 0.9)
    y <- y - lh
    a <- b$w$attribution; cex <- 0.8 + 0.6 * strength(a)
    yy <- y - (l$line - 1) * lh
    seen <- !is.na(a) & a != 0
    graphics::rect(margin + l$x[seen], yy[seen] - lh * 0.4, margin + l$x[seen] + l$w[seen],
                   yy[seen] + lh * 0.4, border = NA,
                   col = sign_colour(a[seen], 0.85 * strength(a[seen])))
    # on a common baseline (adj 0, 0), so that '.' and ',' sit where a reader expects them
    graphics::text(margin + l$x, yy - lh * 0.22, b$w$word, adj = c(0, 0), cex = cex,
                   col = ifelse(is.na(a), "grey60", "black"))
    y <- y - max(l$line, 1L) * lh - lh * 0.6
  }
  graphics::text(margin, y, sprintf(paste(
    "blue: towards the explained class \u00b7 orange: against it \u00b7 grey: not seen",
    "\u00b7 full colour = %.3g logits (Integrated Gradients)"), scale), adj = 0, cex = 0.7,
    col = "grey25")
  invisible(as.data.frame(unclass(shown[c("document", "word", "attribution")]),
                          stringsAsFactors = FALSE))
}

