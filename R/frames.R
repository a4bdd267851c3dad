# Corpus / character vector / data frame -> the corpus frame the CLI reads (doc_id, text,
# [label], docvars), written with saveRDS(); and results read back with readRDS().

# A quanteda corpus, recognised by its structure so quanteda need not be loaded.
is_corpus <- function(x) {
  dv <- attr(x, "docvars")
  inherits(x, "corpus") && is.character(x) && is.data.frame(dv) &&
    all(c("docname_", "docid_", "segid_") %in% names(dv))
}

#' Turn a corpus, character vector or data frame into a corpus frame
#'
#' @param x a quanteda corpus (recognised by its structure: class `corpus`, attribute
#'   `docvars` with `docname_`, `docid_`, `segid_`), a character vector (names are docnames;
#'   unnamed vectors get `text1..n` as in quanteda), or a data frame with a text column
#'   (`text_field`) and optionally a document-name column (`docid_field`); other columns are
#'   docvars.
#' @param text_field,docid_field the text and document-name columns of a data frame, by name
#'   or number, as in `quanteda::corpus()`; ignored for corpora and character vectors.
#' @param arg name of the argument, for error messages.
#' @return A data frame `doc_id`, `text` (UTF-8, `NA` kept) and the user docvars.
#' @keywords internal
#' @noRd
as_frame <- function(x, text_field = "text", docid_field = "doc_id", arg = "x") {
  if (is_corpus(x)) {
    dv <- attr(x, "docvars")
    ids <- names(x)
    if (is.null(ids)) ids <- as.character(dv$docname_)
    docvars <- dv[setdiff(names(dv), c("docname_", "docid_", "segid_"))]
    text <- as.character(unclass(x))
  } else if (is.data.frame(x)) {
    parts <- data_frame_parts(x, text_field, docid_field, arg)
    text <- parts$text
    ids <- parts$ids
    docvars <- parts$docvars
  } else if (is.character(x) || (is.factor(x) && is.atomic(x))) {
    text <- as.character(x)
    ids <- names(x)
    docvars <- NULL
  } else {
    input_error("`", arg, "` must be a quanteda corpus, a character vector or a data frame with a ",
         "text column (named by `text_field`), not ", class(x)[1], call. = FALSE)
  }
  n <- length(text)
  if (n == 0) input_error("`", arg, "` has no documents", call. = FALSE)
  if (is.null(ids) || all(is.na(ids) | ids == "")) ids <- paste0("text", seq_len(n))
  if (anyNA(ids) || any(ids == ""))
    input_error("`", arg, "` has ", sum(is.na(ids) | ids == ""), " document(s) without a name; ",
         "name every document or none", call. = FALSE)
  if (anyDuplicated(ids))
    input_error("document names in `", arg, "` must be unique, but '", ids[anyDuplicated(ids)],
         "' repeats; make them unique (e.g. with make.unique())", call. = FALSE)
  frame <- data.frame(doc_id = enc2utf8(ids), text = enc2utf8(text), stringsAsFactors = FALSE,
                      check.names = FALSE)
  if (!is.null(docvars) && ncol(docvars)) {
    docvars <- as.data.frame(docvars, stringsAsFactors = FALSE)
    rownames(docvars) <- NULL
    frame <- cbind(frame, docvars)
  }
  for (i in seq_along(frame)) if (is.character(frame[[i]])) frame[[i]] <- enc2utf8(frame[[i]])
  rownames(frame) <- NULL
  frame
}

# The column a `text_field`/`docid_field` (a name or a number) picks in data frame `x`, as a
# name; NULL when an optional field (the default `docid_field`) is absent.
field_column <- function(x, field, what, arg, required) {
  if ((!is.character(field) && !is.numeric(field)) || length(field) != 1 || is.na(field))
    input_error("`", what, "` must be one column name or number, not ",
         if (length(field) != 1) paste(length(field), "values") else format(field),
         call. = FALSE)
  if (is.numeric(field)) {
    if (field >= 1 && field <= ncol(x) && field == round(field)) return(names(x)[field])
  } else if (field %in% names(x)) {
    return(field)
  }
  if (!required) return(NULL)
  # suggest a column that could be meant: for the texts, the character column with the
  # longest strings, leaving out columns named like ids
  texty <- names(x)[vapply(x, function(v) is.character(v) || is.factor(v), TRUE)]
  named_id <- grepl("(^|[._])(id|doc_?id|docname|name)$", texty, ignore.case = TRUE)
  if (any(!named_id)) texty <- texty[!named_id]
  chars <- vapply(texty, function(n) mean(nchar(as.character(x[[n]])), na.rm = TRUE), 0)
  example <- if (what == "text_field" && length(texty))
    texty[which.max(replace(chars, is.na(chars), -1))] else names(x)[1]
  input_error("`", arg, "` is a data frame without a", if (is.numeric(field))
       paste(" column number", field) else paste0(" '", field, "' column"),
       "; its columns are: ", paste(names(x), collapse = ", "), ". Name its ",
       if (what == "text_field") "text" else "document-name", " column with `", what,
       "` (e.g. `", what, " = \"", example, "\"`)", call. = FALSE)
}

# Text, document names and docvars of a data frame, as quanteda::corpus.data.frame() reads
# them: the default docid_field "doc_id" is optional (else row names, else text1..n), a
# docid_field given by the user must exist.
data_frame_parts <- function(x, text_field, docid_field, arg) {
  text_col <- field_column(x, text_field, "text_field", arg, required = TRUE)
  id_col <- field_column(x, docid_field, "docid_field", arg,
                         required = !identical(docid_field, "doc_id"))
  text <- x[[text_col]]
  if (is.factor(text)) text <- as.character(text)
  if (!is.character(text))
    input_error("column '", text_col, "' of `", arg, "` must hold text (character), not ",
         class(text)[1], "; name the text column with `text_field`", call. = FALSE)
  ids <- if (!is.null(id_col)) as.character(x[[id_col]])
         else if (!identical(rownames(x), as.character(seq_len(nrow(x))))) rownames(x)
         else NULL
  list(text = text, ids = ids, docvars = x[setdiff(names(x), c(text_col, id_col))])
}

# User docvars of a corpus frame (everything after doc_id, text, label).
frame_docvars <- function(frame) {
  frame[setdiff(names(frame), c("doc_id", "text", "label"))]
}

# Resolve `y`: a vector/factor of one value per document, or the name of a docvar.
# A length-1 character `y` is a docvar name, except for a one-document `x` without a docvar of
# that name (then it is that document's label); `name_only = TRUE` makes it always a name.
# Returns list(y = <vector>, name = <docvar name or NULL>).
resolve_y <- function(y, frame, arg = "y", name_only = FALSE, x_arg = "x") {
  n <- nrow(frame)
  if (is.null(y)) input_error("`", arg, "` is missing: give the labels (one per document) or a ",
                       "docvar name", call. = FALSE)
  # any column but doc_id and text, a column named "label" included
  dv <- frame[setdiff(names(frame), c("doc_id", "text"))]
  is_name <- is.character(y) && length(y) == 1 && !is.na(y) &&
    (name_only || n != 1 || y %in% names(dv))
  if (is_name) {
    if (!y %in% names(dv))
      input_error("`", arg, "` = '", y, "' is not a docvar of `", x_arg, "`; ",
           if (ncol(dv)) paste0("its docvars are: ", paste(names(dv), collapse = ", "))
           else paste0("`", x_arg, "` has no docvars"),
           ". Give a docvar name or one label per document", call. = FALSE)
    return(list(y = dv[[y]], name = y))
  }
  if (length(y) != n)
    input_error("`", arg, "` has ", length(y), " value(s) but `", x_arg, "` has ", n,
         " document(s); give one ",
         "label per document (NA for uncoded ones) or a docvar name", call. = FALSE)
  list(y = y, name = NULL)
}

# Class levels from training labels: factor order when y is a factor, else sorted values.
label_levels <- function(y) {
  present <- unique(as.character(y[!is.na(y)]))
  lev <- if (is.factor(y)) intersect(levels(y), present) else sort(present)
  if (length(lev) < 2)
    input_error("`y` must have at least two classes among the coded documents, but ",
         if (length(lev)) paste0("every coded document is '", lev, "'") else "every label is NA",
         "; code documents of another class too", call. = FALSE)
  if (any(grepl(",", lev, fixed = TRUE)))
    input_error("class labels must not contain commas (the command line separates labels with ",
         "commas): ", paste0("'", lev[grepl(",", lev, fixed = TRUE)], "'", collapse = ", "),
         "; rename them, e.g. `y <- gsub(\",\", \";\", y)`", call. = FALSE)
  lev
}

# Read a CLI output .rds: a plain data.frame with pyreadr's attributes removed and strings
# marked as UTF-8; checks that doc_ids come back in input order.
read_output <- function(path, doc_id = NULL) {
  out <- readRDS(path)
  attr(out, "datalabel") <- NULL
  attr(out, "var.labels") <- NULL
  for (i in seq_along(out)) {
    if (is.character(out[[i]])) Encoding(out[[i]]) <- "UTF-8"
  }
  out <- as.data.frame(out, stringsAsFactors = FALSE)
  rownames(out) <- NULL
  if (!is.null(doc_id) && !identical(as.character(out$doc_id), as.character(doc_id)))
    stop("the Python core returned documents in another order or with other names than the ",
         "input (a bug: please report it)", call. = FALSE)
  out
}

# Build the result of predict() from the core's one output frame (`predicted` and one
# `prob_<label>` column per class): a factor (type "class"), a probability matrix
# ("probability"), or both in a data frame ("both"), each in document order.
prediction_result <- function(out, frame, levels, type) {
  ids <- frame$doc_id
  pred <- factor(as.character(out$predicted), levels = levels)
  if (type == "class") {
    names(pred) <- ids
    return(pred)
  }
  cols <- paste0("prob_", levels)
  miss <- setdiff(cols, names(out))
  if (length(miss))
    stop("the Python core returned no probability column(s) ", paste(miss, collapse = ", "),
         call. = FALSE)
  m <- as.matrix(out[cols])
  storage.mode(m) <- "double"
  if (type == "both") {
    both <- data.frame(doc_id = ids, predicted = pred, stringsAsFactors = FALSE)
    both[cols] <- as.data.frame(m)
    return(both)
  }
  dimnames(m) <- list(ids, levels)
  m
}

# Run a per-document verb (predict, zeroshot) on the documents of `frame` and return its
# output frame, in document order; warns about empty texts unless the core already did.
# `inputs`: further input files of the verb (see call_verb()).
predict_frame <- function(verb, args, frame, inputs = list(),
                          verbose = getOption("quantformer.verbose", TRUE), r_args = NULL) {
  res <- call_verb(verb, args, inputs = c(list("--input" = frame[c("doc_id", "text")]), inputs),
                   output = "rds", doc_id = frame$doc_id, verbose = verbose, r_args = r_args)
  warn_empty(frame, already = any(grepl("empty|missing", res$warnings)))
  res$output
}

# Warn about empty or NA texts (they get NA predictions), unless the core already said so.
warn_empty <- function(frame, already = FALSE) {
  bad <- is.na(frame$text) | !nzchar(trimws(frame$text))
  if (any(bad) && !already)
    warning(sum(bad), " document(s) with empty or missing text get NA predictions: ",
            paste(utils::head(frame$doc_id[bad], 5), collapse = ", "),
            if (sum(bad) > 5) ", ...", call. = FALSE)
  invisible(bad)
}

# CLI flags from named R arguments: NULL values are dropped, names turn into --kebab-case,
# TRUE gives a bare flag, FALSE drops it.
cli_flags <- function(...) {
  args <- list(...)
  out <- character()
  for (nm in names(args)) {
    v <- encoder_path(args[[nm]])  # R/arguments.R
    if (is.null(v) || identical(v, FALSE)) next
    flag <- paste0("--", gsub("_", "-", nm, fixed = TRUE))
    val <- if (is.numeric(v)) format(v, scientific = FALSE, trim = TRUE, digits = 15)
           else as.character(v)
    out <- c(out, if (isTRUE(v)) flag else c(flag, paste(val, collapse = ",")))
  }
  out
}
