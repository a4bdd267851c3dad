# Regression and multi-label fine-tuning (issue 15): the training frame and CLI flags for
# `textmodel_finetune(task = ...)`, and the R results of `predict()` for those models.
# No ML logic here: the Python core trains, predicts and scores.

# The training frame and label flags for a regression or multi-label task.
# Returns list(train = <data.frame>, args = <CLI flags>, name = <docvar name or NULL>).
task_training_frame <- function(task, frame, y) {
  base <- frame[c("doc_id", "text")]
  if (task == "regression") {
    yy <- resolve_y(y, frame)
    v <- yy$y
    if (is.factor(v) || !(is.numeric(v) || is.logical(v) && all(is.na(v))))
      stop("task = \"regression\" needs a numeric `y` (one number per document, NA for ",
           "uncoded ones), not ", class(v)[1], "; convert it with as.numeric() or use ",
           "task = \"classification\"", call. = FALSE)
    train <- data.frame(base, label = as.numeric(v), stringsAsFactors = FALSE)
    return(list(train = train, args = c("--task", "regression", "--label-col", "label"),
                name = yy$name))
  }
  labels <- multilabel_matrix(y, frame)
  train <- data.frame(base, labels, stringsAsFactors = FALSE, check.names = FALSE)
  list(train = train, name = NULL,
       args = c("--task", "multilabel", "--label-cols", paste(colnames(labels), collapse = ",")))
}

# Multi-label `y` as a data frame (documents x labels, NA for uncoded documents):
# a logical/0-1 matrix or data frame with column names, or a character vector of docvar names.
multilabel_matrix <- function(y, frame) {
  if (is.character(y) && is.null(dim(y))) {
    missing <- setdiff(y, names(frame_docvars(frame)))
    if (length(missing))
      stop("`y` names docvar(s) ", paste0("'", missing, "'", collapse = ", "), " that `x` ",
           "does not have; its docvars are: ", paste(names(frame_docvars(frame)),
                                                     collapse = ", "), call. = FALSE)
    y <- frame[y]
  }
  if (!(is.matrix(y) || is.data.frame(y)) || is.null(colnames(y)))
    stop("for task = \"multilabel\", `y` must be a logical or 0/1 matrix or data frame with ",
         "one named column per label, or a character vector of docvar names", call. = FALSE)
  if (nrow(y) != nrow(frame))
    stop("`y` has ", nrow(y), " rows but `x` has ", nrow(frame), " documents; give one row ",
         "per document", call. = FALSE)
  bad <- grepl(",", colnames(y), fixed = TRUE) | colnames(y) %in% c("doc_id", "text")
  if (any(bad))
    stop("label names must not contain commas or be 'doc_id'/'text': ",
         paste0("'", colnames(y)[bad], "'", collapse = ", "), "; rename the columns",
         call. = FALSE)
  # logical columns become 0/1; other values go as they are (the core names a value not 0/1)
  out <- lapply(as.data.frame(y, stringsAsFactors = FALSE),
                function(v) if (is.logical(v)) as.integer(v) else v)
  structure(as.data.frame(out, stringsAsFactors = FALSE, optional = TRUE),
            names = colnames(y))
}

# CLI flags of `validation` for a regression or multi-label task: a fraction only for
# multi-label (labelled validation documents go through the classification-style path).
task_validation_args <- function(task, validation, name) {
  if (task == "multilabel" && !is.null(validation) &&
      !(is.numeric(validation) && length(validation) == 1))
    stop("for task = \"multilabel\", give `validation` as a fraction of the coded documents ",
         "(e.g. 0.2); validation documents are not supported yet", call. = FALSE)
  validation_args(validation, name)
}

# predict() for regression and multi-label models: a numeric vector named by docnames, or a
# logical (type = "class") / probability (type = "probability") documents x labels matrix.
predict_task <- function(object, frame, type, batch_size, device, verbose, r_args) {
  in_file <- write_input(frame[c("doc_id", "text")])
  out_file <- out_path()
  on.exit(unlink(c(in_file, out_file)), add = TRUE)
  res <- run_cli("predict", c("--input", in_file, "--model", object$model_dir,
                              cli_flags(batch_size = batch_size, device = device),
                              "--out", out_file), verbose = verbose, r_args = r_args)
  out <- read_output(out_file, frame$doc_id)
  warn_empty(frame, already = any(grepl("empty|missing", res$warnings)))
  if (identical(object$task, "regression")) {
    if (type == "probability")
      stop("a regression model predicts numbers, not probabilities: use type = \"class\" ",
           "(the default)", call. = FALSE)
    return(stats::setNames(as.numeric(out$predicted), frame$doc_id))
  }
  prefix <- if (type == "class") "predicted_" else "prob_"
  m <- as.matrix(out[paste0(prefix, object$levels)])
  storage.mode(m) <- if (type == "class") "logical" else "double"
  dimnames(m) <- list(frame$doc_id, object$levels)
  m
}
