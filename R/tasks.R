# Regression and multi-label fine-tuning (issue 15): the training frame and CLI flags for
# `textmodel_finetune(task = ...)`, and the R results of `predict()` for those models.
# No ML logic here: the Python core trains, predicts and scores.

# The training frame and label flags of a task (`arg`, `x_arg`: the argument names in
# messages; `name_only`: a length-one character `y` is a docvar name). Returns
# list(train = <data.frame>, args = <CLI flags>, name = <docvar name or NULL>, and `levels`
# (classification) or `labels` (multi-label)).
task_training_frame <- function(task, frame, y, arg = "y", x_arg = "x", name_only = FALSE) {
  base <- frame[c("doc_id", "text")]
  if (task == "classification") {
    yy <- resolve_y(y, frame, arg = arg, name_only = name_only, x_arg = x_arg)
    check_class_labels(yy$y, arg)  # R/label_checks.R
    levels <- label_levels(yy$y)
    label <- as.character(yy$y)
    label[!label %in% levels] <- NA
    # docvars stay in R: the core needs only ids, texts and labels
    train <- data.frame(base, label = enc2utf8(label), stringsAsFactors = FALSE)
    return(list(train = train, args = c("--label-col", "label"), name = yy$name,
                levels = levels))
  }
  if (task == "regression") {
    yy <- resolve_y(y, frame, arg = arg, name_only = name_only, x_arg = x_arg)
    v <- yy$y
    if (is.factor(v) || !(is.numeric(v) || is.logical(v) && all(is.na(v))))
      input_error("task = \"regression\" needs a numeric `", arg, "` (one number per document, NA ",
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
    input_error("give `", arg, "`, the outcome of the ", x_arg, " documents (or name a docvar in `y`)",
               call. = FALSE)
  other <- task_training_frame(task, frame, y, arg = arg, x_arg = x_arg, name_only = name_only)
  if (task == "multilabel" && !setequal(other$labels, train$labels))
    input_error("`", arg, "` has the labels ", paste(other$labels, collapse = ", "), " but `y` has ",
               paste(train$labels, collapse = ", "), "; give the same labels", call. = FALSE)
  if (task == "multilabel") other$train <- other$train[c("doc_id", "text", train$labels)]
  other$train
}

# The labelled training and (optional) test documents of `textmodel_compare()` and
# `textmodel_tune()`: list(inputs = <"--train" and "--test" frames for call_verb()>, args =
# <label flags>, train = <task_training_frame()>). `test_y` NULL: the docvar(s) that named the
# training labels.
labelled_inputs <- function(task, frame, y, tframe = NULL, test_y = NULL) {
  train <- task_training_frame(task, frame, y)
  test <- if (is.null(tframe)) NULL
          else if (task == "classification") classification_test_frame(tframe, test_y, train)
          else task_other_frame(task, tframe, test_y, train, arg = "test_y", x_arg = "test")
  list(inputs = list("--train" = train$train, "--test" = test), args = train$args, train = train)
}

# The labelled test documents of a classifier: `test_y`, else the docvar named by `y` (even for
# one test document); classes need not be the training classes.
classification_test_frame <- function(tframe, test_y, train) {
  name_only <- is.null(test_y)
  if (name_only) {
    if (is.null(train$name))
      input_error("give `test_y`, the classes of the test documents (or name a docvar in `y`)",
                 call. = FALSE)
    test_y <- train$name
  }
  ty <- resolve_y(test_y, tframe, arg = "test_y", name_only = name_only, x_arg = "test")$y
  if (all(is.na(ty))) input_error("`test_y` has no coded test document", call. = FALSE)
  data.frame(tframe[c("doc_id", "text")], label = enc2utf8(as.character(ty)),
             stringsAsFactors = FALSE)
}

# Multi-label `y` as a data frame (documents x labels, NA for uncoded documents):
# a logical/0-1 matrix or data frame with column names, or a character vector of docvar names.
multilabel_matrix <- function(y, frame, arg = "y", x_arg = "x") {
  if (is.character(y) && is.null(dim(y))) {
    missing <- setdiff(y, names(frame_docvars(frame)))
    if (length(missing))
      input_error("`", arg, "` names docvar(s) ", paste0("'", missing, "'", collapse = ", "),
                 " that `", x_arg, "` does not have; its docvars are: ",
                 paste(names(frame_docvars(frame)), collapse = ", "), call. = FALSE)
    y <- frame[y]
  }
  if (!(is.matrix(y) || is.data.frame(y)) || is.null(colnames(y)))
    input_error("for task = \"multilabel\", `", arg, "` must be a logical or 0/1 matrix or data ",
               "frame with one named column per label, or a character vector of docvar names",
               call. = FALSE)
  if (nrow(y) != nrow(frame))
    input_error("`", arg, "` has ", nrow(y), " rows but `", x_arg, "` has ", nrow(frame),
               " documents; give one row per document", call. = FALSE)
  bad <- grepl(",", colnames(y), fixed = TRUE) | colnames(y) %in% c("doc_id", "text")
  if (any(bad))
    input_error("label names must not contain commas or be 'doc_id'/'text': ",
               paste0("'", colnames(y)[bad], "'", collapse = ", "), "; rename the columns",
               call. = FALSE)
  # logical columns become 0/1; other values go as they are (the core names a value not 0/1)
  out <- lapply(as.data.frame(y, stringsAsFactors = FALSE),
                function(v) if (is.logical(v)) as.integer(v) else v)
  structure(as.data.frame(out, stringsAsFactors = FALSE, optional = TRUE),
            names = colnames(y))
}

# The `args` and `inputs` (for call_verb()) of `validation`: a fraction, or validation
# documents with the same kind of labels as training (`train` from task_training_frame): a
# corpus / data frame with the training docvar(s), or list(x = <documents>, y = <labels>).
# Classifiers: validation_args() (R/textmodel_finetune.R).
task_validation_args <- function(task, validation, train, text_field = "text",
                                 docid_field = "doc_id") {
  if (task == "classification")
    return(validation_args(validation, train$name, text_field, docid_field))
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
  list(args = character(), inputs = list("--valid" = valid))
}

# predict() for regression and multi-label models: arguments that do not apply, refused before
# the core runs.
check_task_predict <- function(object, type, calibrated) {
  if (isTRUE(calibrated))
    input_error("`calibrated = TRUE` applies temperature scaling to a classifier's softmax; this is ",
               "a ", object$task, " model: leave it out", call. = FALSE)
  if (identical(object$task, "regression") && type == "probability")
    input_error("a regression model predicts numbers, not probabilities: use type = \"class\" ",
               "(the default)", call. = FALSE)
  invisible(TRUE)
}

# The result of predict() for regression and multi-label models from the core's output frame:
# a numeric vector named by docnames, or a logical (type = "class") / probability (type =
# "probability") documents x labels matrix.
task_prediction_result <- function(object, out, frame, type) {
  if (identical(object$task, "regression"))
    return(stats::setNames(as.numeric(out$predicted), frame$doc_id))
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
