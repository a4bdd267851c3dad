# Helpers shared by the textmodel classes (textmodel_finetune, textmodel_zeroshot,
# textmodel_tune) and their methods: unused arguments, the `verbose` rule, model folders in the
# session's temporary directory, and the pieces of their print() and summary() output.

# Warn about arguments passed through `...` that a method does not use, as
# quanteda.textmodels' check_dots() does (predict(fit, tpye = "prob") would otherwise be
# ignored without a word). `fun` names the function in the message.
check_dots <- function(..., fun) {
  if (!...length()) return(invisible(character()))
  dots <- ...names()                       # names only: the arguments are not evaluated
  if (is.null(dots)) dots <- rep("", ...length())
  named <- !is.na(dots) & nzchar(dots)
  unused <- c(dots[named], if (any(!named)) paste(sum(!named), "unnamed argument(s)"))
  if (length(unused))
    warning(paste0("`", unused, "`", collapse = ", "), " ",
            if (length(unused) == 1) "is not an argument" else "are not arguments",
            " of ", fun, " and ", if (length(unused) == 1) "is" else "are",
            " ignored; see ?", fun, " for its arguments", call. = FALSE)
  invisible(unused)
}

# The one `verbose` rule: an explicit `verbose` wins; else the `verbose` given when the model
# was made (kept in the model object as `verbose`, NULL when it was not given); else the
# option quantformer.verbose (TRUE when unset).
model_verbose <- function(verbose, object) {
  if (!is.null(verbose)) return(isTRUE(verbose))
  if (!is.null(object$verbose)) return(isTRUE(object$verbose))
  isTRUE(getOption("quantformer.verbose", TRUE))
}

# The `verbose` a model object keeps: the caller's `verbose` when it was given, else NULL.
given_verbose <- function(verbose, given) if (given) isTRUE(verbose) else NULL

# Is `dir` inside this R session's temporary directory (deleted when the session ends)?
in_tempdir <- function(dir) {
  tmp <- normalizePath(tempdir(), winslash = "/", mustWork = FALSE)
  dir <- normalizePath(dir, winslash = "/", mustWork = FALSE)
  startsWith(dir, paste0(tmp, "/"))
}

# Where a model folder lives, for print() and summary(): a note for a temporary folder (how to
# keep the model) or a missing one (why, and the fix).
model_dir_note <- function(object) {
  missing_dir <- !dir.exists(object$model_dir)
  if (temporary_dir_gone(object))
    return(paste0("(MISSING: it was in the temporary folder of the R session that fitted the ",
                  "model, deleted when that session ended; fit again with `output_dir` set to a ",
                  "permanent folder)"))
  if (missing_dir) return("(MISSING)")
  home <- normalizePath(models_home(), mustWork = FALSE)  # R/models.R
  if (startsWith(normalizePath(object$model_dir, mustWork = FALSE), home))
    return(paste0("(in the per-user model folder: quantformer_models() lists, ",
                  "quantformer_remove_model() deletes)"))
  if (isTRUE(object$temporary))
    return(paste0("(temporary: deleted when this R session ends; to keep the model, fit with ",
                  "`output_dir` set to a permanent folder, or copy this folder and ",
                  "load_finetune() the copy)"))
  ""
}

# TRUE when the model folder was in the tempdir() of another, ended R session (a fit saved
# with saveRDS() and read in a new session): the folder is gone and was not this session's.
temporary_dir_gone <- function(object) {
  isTRUE(object$temporary) && !dir.exists(object$model_dir) && !in_tempdir(object$model_dir)
}

# ------------------------------------------------------------------------------------------
# print() and summary() pieces

# The frame of every print.summary.* method: the title with "(quantformer)", the call, then
# `body()` (the class's own sections); returns `x` invisibly, as print methods do.
print_summary <- function(x, title, body) {
  cat(title, " (quantformer)\n", sep = "")
  print_call(x$call)
  body()
  invisible(x)
}

print_call <- function(call) {
  if (!is.null(call)) cat("\nCall:\n", paste(deparse(call), collapse = "\n"), "\n", sep = "")
}

# "Directory: <path>" and, on the next line, the note on a temporary or missing folder
print_model_dir <- function(label, object) {
  cat(label, object$model_dir, "\n", sep = "")
  note <- model_dir_note(object)
  if (nzchar(note)) cat(strwrap(note, indent = nchar(label), exdent = nchar(label) + 1),
                        sep = "\n")
}

# "name: value" lines under a heading
print_fields <- function(title, values) {
  if (!length(values)) return(invisible())
  cat("\n", title, ":\n", sep = "")
  vals <- vapply(values, function(v) paste(format(v, digits = 4), collapse = ", "), "")
  cat(sprintf("  %-*s %s", max(nchar(names(vals))) + 1, paste0(names(vals), ":"), vals),
      sep = "\n")
}

format_or_na <- function(v) if (is.null(v) || !length(v)) "NA" else paste(format(v), collapse = ", ")
