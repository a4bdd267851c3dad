# Plots of textstat_attributions() results: a keyness-style chart of the terms a model keys on,
# and documents with their words highlighted (base graphics, on the open device or a PNG).

#' Plot what a model keys on, or documents with their words highlighted
#'
#' `type = "terms"`: a keyness-style chart (as `quanteda.textplots::textplot_keyness()` users
#' know) of the terms with the highest mean attribution across documents for one target
#' class. When `x` has the `terms` attribute of [textstat_attributions()] (`terms = TRUE` or
#' `bow_data`), the bars are the core's means with their 95% bootstrap intervals and, when it
#' was run with `bow_data`, a second panel beside them gives the same terms' bag-of-words
#' logistic-regression coefficients (the class's top terms by coefficient added; each stem is
#' labelled by its most frequent word in the texts, the `word` column), with the
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
  type <- match_choice(type)
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
  # each (stemmed) term shown as its most frequent word in the texts (`word`; older core: term)
  shown <- if (!is.null(t$word)) ifelse(is.na(t$word), t$term, t$word) else t$term
  label <- ifelse(is.na(t$mean_attribution), paste0(shown, " *"), shown)
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
    graphics::barplot(b, names.arg = shown, horiz = TRUE, las = 1,
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

