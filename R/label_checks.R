# Checks of classification labels in R terms, before anything is sent to the core: a numeric
# `y` with many values (a year, a score) that would become one class per value, and factor
# levels no coded document has (left out of the model's classes).

# Warn about `y` (the labels of a classifier; `arg`: its argument name) as described above.
check_class_labels <- function(y, arg = "y") {
  coded <- y[!is.na(y)]
  # more distinct numbers than the core's numeric_classes_max look like a numeric outcome
  # (models/tasks.py, read through core_rules()): 0-10 rating scales stay quiet
  if (is.numeric(y) && !is.factor(y) && !is.null(most <- core_rules()$numeric_classes_max) &&
      length(unique(coded)) > most) {
    values <- sort(unique(coded))
    warning("`", arg, "` is numeric with ", length(values), " distinct values (",
            format(values[1]), ", ", format(values[2]), ", ..., ",
            format(values[length(values)]), "); they become ", length(values),
            " classes, one per value. For a numeric outcome (a year, a score) use ",
            "task = \"regression\"; to keep them as classes, pass factor(", arg, ")",
            call. = FALSE)
  }
  if (is.factor(y)) {
    unused <- setdiff(levels(y), as.character(unique(coded)))
    if (length(unused))
      message("factor level(s) of `", arg, "` without a coded document left out of the ",
              "classes: ", paste0("'", unused, "'", collapse = ", "),
              "; the model predicts only classes it was trained on")
  }
  invisible(y)
}
