# Regression and multi-label fine-tuning (issue 15): the training frame and CLI flags for
# `textmodel_finetune(task = ...)`, and the R results of `predict()` for those models.
# No ML logic here: the Python core trains, predicts and scores.

# The training frame and label flags for a regression or multi-label task (`arg`, `x_arg`:
# the argument names in messages; `name_only`: a length-one character `y` is a docvar name).
# Returns list(train = <data.frame>, args = <CLI flags>, name = <docvar name or NULL>).
task_training_frame <- function(task, frame, y, arg = "y", x_arg = "x", name_only = FALSE) {
  base <- frame[c("doc_id", "text")]
  if (task == "regression") {
    yy <- resolve_y(y, frame, arg = arg, name_only = name_only, x_arg = x_arg)
    v <- yy$y
    if (is.factor(v) || !(is.numeric(v) || is.logical(v) && all(is.na(v))))
      stop("task = \"regression\" needs a numeric `", arg, "` (one number per document, NA ",
           "for uncoded ones), not ", class(v)[1], "; convert it with as.numeric() or use ",
           "task = \"classification\"", call. = FALSE)
    train <- data.frame(base, label = as.numeric(v), stringsAsFactors = FALSE)
    return(list(train = train, args = c("--task", "regression", "--label-col", "label"),
                name = yy$name))
  }
  labels <- multilabel_matrix(y, frame, arg = arg, x_arg = x_arg)
  train <- data.frame(base, labels, stringsAsFactors = FALSE, check.names = FALSE)
  list(train = train, name = NULL, labels = colnames(labels),
       args = c("--task", "multilabel", "--label-cols", paste(colnames(labels), collapse = ",")))
}

# The labelled frame of other documents (validation or test) for the same task: `y` as for
# training; by default (`y` NULL) the docvar(s) that named the training labels (`train`, from
# task_training_frame), for multi-label the training label names; else `fallback`.
task_other_frame <- function(task, frame, y, train, arg, x_arg, fallback = NULL) {
  name_only <- is.null(y)
  if (name_only) y <- if (task == "multilabel") train$labels else train$name
  if (is.null(y)) y <- fallback
  if (is.null(y))
    stop("give `", arg, "`, the outcome of the ", x_arg, " documents (or name a docvar in `y`)",
         call. = FALSE)
  other <- task_training_frame(task, frame, y, arg = arg, x_arg = x_arg, name_only = name_only)
  if (task == "multilabel" && !setequal(other$labels, train$labels))
    stop("`", arg, "` has the labels ", paste(other$labels, collapse = ", "), " but `y` has ",
         paste(train$labels, collapse = ", "), "; give the same labels", call. = FALSE)
  if (task == "multilabel") other$train <- other$train[c("doc_id", "text", train$labels)]
  other$train
}

# The training and test files of a regression or multi-label comparison: list(train, test,
# args) (`test_y` NULL: the docvar(s) that named the training labels).
task_compare_files <- function(task, frame, y, tframe, test_y) {
  train <- task_training_frame(task, frame, y)
  test <- task_other_frame(task, tframe, test_y, train, arg = "test_y", x_arg = "test")
  list(train = write_input(train$train, prefix = "qf-train-"),
       test = write_input(test, prefix = "qf-test-"), args = train$args)
}

# Multi-label `y` as a data frame (documents x labels, NA for uncoded documents):
# a logical/0-1 matrix or data frame with column names, or a character vector of docvar names.
multilabel_matrix <- function(y, frame, arg = "y", x_arg = "x") {
  if (is.character(y) && is.null(dim(y))) {
    missing <- setdiff(y, names(frame_docvars(frame)))
    if (length(missing))
      stop("`", arg, "` names docvar(s) ", paste0("'", missing, "'", collapse = ", "),
           " that `", x_arg, "` does not have; its docvars are: ",
           paste(names(frame_docvars(frame)), collapse = ", "), call. = FALSE)
    y <- frame[y]
  }
  if (!(is.matrix(y) || is.data.frame(y)) || is.null(colnames(y)))
    stop("for task = \"multilabel\", `", arg, "` must be a logical or 0/1 matrix or data ",
         "frame with one named column per label, or a character vector of docvar names",
         call. = FALSE)
  if (nrow(y) != nrow(frame))
    stop("`", arg, "` has ", nrow(y), " rows but `", x_arg, "` has ", nrow(frame),
         " documents; give one row per document", call. = FALSE)
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

# CLI flags of `validation` for a regression or multi-label task: a fraction, or validation
# documents with the same kind of labels as training (`train` from task_training_frame): a
# corpus / data frame with the training docvar(s), or list(x = <documents>, y = <labels>).
task_validation_args <- function(task, validation, train, text_field = "text",
                                 docid_field = "doc_id") {
  if (is.null(validation) || is.numeric(validation) && length(validation) == 1)
    return(validation_args(validation, train$name))
  if (is.list(validation) && !is.data.frame(validation) && all(c("x", "y") %in% names(validation))) {
    vframe <- as_frame(validation$x, text_field, docid_field, arg = "validation$x")
    vy <- validation$y
    arg <- "validation$y"
  } else {
    vframe <- as_frame(validation, text_field, docid_field, arg = "validation")
    vy <- NULL
    arg <- "validation"
  }
  valid <- task_other_frame(task, vframe, vy, train, arg = arg, x_arg = "validation",
                            fallback = "label")
  file <- write_input(valid, prefix = "qf-valid-")
  list(args = c("--valid", file), file = file)
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
  if (type == "both") {  # doc_id, predicted_<label> (logical), prob_<label> (number)
    cols <- c(paste0("predicted_", object$levels), paste0("prob_", object$levels))
    both <- data.frame(doc_id = frame$doc_id, out[cols], check.names = FALSE)
    for (col in cols[seq_along(object$levels)]) both[[col]] <- as.logical(both[[col]])
    rownames(both) <- NULL
    return(both)
  }
  prefix <- if (type == "class") "predicted_" else "prob_"
  m <- as.matrix(out[paste0(prefix, object$levels)])
  storage.mode(m) <- if (type == "class") "logical" else "double"
  dimnames(m) <- list(frame$doc_id, object$levels)
  m
}
