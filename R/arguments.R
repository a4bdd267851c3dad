# Arguments shared by the exported functions: the old names of renamed arguments and the model
# folder a fitted object stands for (unused `...` arguments: check_dots(),
# R/textmodel-methods.R).

# The value of an argument renamed in this release: the old name (`fit = `, `pred = `) still
# works for one release, with a warning of class `quantformer_deprecated` (a
# `deprecatedWarning`, as base R's .Deprecated() gives) naming the new one.
renamed_argument <- function(value, old, new, fun,
                             why = "quanteda's name for the first argument") {
  warning(structure(class = c("quantformer_deprecated", "deprecatedWarning", "warning",
                              "condition"),
                    list(message = paste0("`", old, "` of ", fun, "() is now `", new,
                                          "` (", why, "); `", old,
                                          "` will be removed in the next release"),
                         call = NULL)))
  value
}

# A function renamed in this release: its old name still works for one release and warns
# once a session (class `quantformer_deprecated`, a `deprecatedWarning` as .Deprecated() gives)
# naming the new one; `why` says why it was renamed.
renamed_function <- function(old, new, why) {
  if (isTRUE(.qf$renamed_warned[[old]])) return(invisible(FALSE))
  .qf$renamed_warned[[old]] <- TRUE
  warning(structure(class = c("quantformer_deprecated", "deprecatedWarning", "warning",
                              "condition"),
                    list(message = paste0(old, "() is now ", new, "() (", why, "); ", old,
                                          "() will be removed in the next release"),
                         call = NULL, old = old, new = new, package = "quantformer")))
  invisible(TRUE)
}

# The first two arguments of a function whose first argument was renamed, as a list (`x`,
# `second`): `x` as given, or the value under its old name (with the warning of
# renamed_argument()). A call such as `f(fit = m, d)` puts `d` into `x`: with the old name
# given and the second argument missing, the value in `x` is the second argument. An input
# error when `x` is missing, or when `x`, the old name and the second argument are all given.
first_arguments <- function(x, old_value, second, old, fun, x_missing, old_missing,
                            second_missing) {
  if (old_missing) {
    if (x_missing) input_error("`x` is missing: give it as the first argument of ", fun, "()")
    return(list(x = x, second = if (!second_missing) second))
  }
  if (!x_missing && !second_missing) input_error("give `x` or its old name `", old, "`, not both")
  list(x = renamed_argument(old_value, old, "x", fun),
       second = if (!x_missing) x else if (!second_missing) second)
}

# The folder of a fitted model: a textmodel_finetune object's (which must still exist), a
# textmodel_tune object's refit model, or a path as it is (made absolute when it exists: the
# worker may run in another working directory). `NULL` stays `NULL` when `null_ok`; a path must
# be an existing folder when `exists` (a model that cannot be a hub id). `what` names the
# other values the argument takes, for the error.
model_dir_of <- function(model, arg = "model", null_ok = FALSE, exists = FALSE,
                         what = "the folder of a fine-tuned model") {
  if (is.null(model) && null_ok) return(NULL)
  if (inherits(model, "textmodel_tune")) {
    if (is.null(model$model))
      input_error("`", arg, "` is a textmodel_tune() result without a refit model (its ",
                  "folder has no model/): give a textmodel_finetune object or a model folder")
    model <- model$model
  }
  if (inherits(model, "textmodel_finetune")) {
    check_model_dir(model)  # R/load_finetune.R
    return(model$model_dir)
  }
  one_path <- is.character(model) && length(model) == 1 && !is.na(model) && nzchar(model)
  if (one_path && (!exists || dir.exists(model))) return(normalizePath(model, mustWork = FALSE))
  input_error("`", arg, "` must be ", if (null_ok) "NULL, ",
              "a textmodel_finetune object or ", what,
              if (one_path) paste0("; '", model, "' is no folder") else " (one path)")
}

# The folder of a pretrain_encoder() result (a `quantformer_encoder`), so that every `model`
# argument that takes a hub id or a folder takes an encoder too; any other value as it is.
encoder_path <- function(model) {
  if (inherits(model, "quantformer_encoder")) model$path else model
}

# match.arg() whose bad value is an input error naming the argument (class
# `quantformer_input_error`, as every input error R raises), instead of base R's plain "'arg'
# should be one of". `choices` default to the calling function's default for the argument;
# the default vector itself (or NULL) gives its first element, a unique prefix its match.
match_choice <- function(arg, choices) {
  name <- deparse(substitute(arg))
  if (missing(choices))
    choices <- eval(formals(sys.function(sys.parent()))[[name]], envir = parent.frame())
  if (is.null(arg) || identical(arg, choices)) return(choices[1])
  if (is.character(arg) && length(arg) == 1 && !is.na(arg)) {
    i <- pmatch(arg, choices)
    if (!is.na(i)) return(choices[i])
  }
  input_error("`", name, "` must be one of ", paste0("\"", choices, "\"", collapse = ", "),
              ", not ", paste(deparse(arg), collapse = ""))  # R/python.R
}
