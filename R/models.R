# The persistent folder of models that textmodel_finetune() writes when no `output_dir` is
# given, so that a fit saved with saveRDS() is usable in a later session.

# The folder of the default model store: tools::R_user_dir("quantformer", "data")/models
# (R_USER_DATA_DIR moves it, e.g. in tests).
models_home <- function() file.path(tools::R_user_dir("quantformer", "data"), "models")

# A new model folder in the store: <date>-<time>-<random hex>.
new_model_dir <- function() {
  id <- paste0(format(Sys.time(), "%Y%m%d-%H%M%S-"),
               paste(sample(c(0:9, letters[1:6]), 6, replace = TRUE), collapse = ""))
  file.path(models_home(), id)
}

#' Models kept in the per-user model folder
#'
#' [textmodel_finetune()] without `output_dir` writes its model to a persistent per-user
#' folder, `tools::R_user_dir("quantformer", "data")/models/<id>` (`<id>`: date, time and a
#' random suffix), so a fit saved with [saveRDS()] can be predicted from or explained in a
#' later session. `quantformer_models()` lists them; `quantformer_remove_model()` deletes them.
#'
#' @return `quantformer_models()`: a data frame with one row per model: `id` (character),
#'   `path` (the folder), `created` (POSIXct, the folder's modification time) and `size_mb`
#'   (numeric, megabytes on disk); no rows when there is none.
#' @export
quantformer_models <- function() {
  home <- models_home()
  dirs <- if (dir.exists(home)) list.dirs(home, recursive = FALSE) else character()
  dirs <- dirs[file.exists(file.path(dirs, "quantformer.json"))]
  size <- vapply(dirs, function(d) {
    f <- list.files(d, recursive = TRUE, full.names = TRUE, all.files = TRUE)
    sum(file.size(f), na.rm = TRUE) / 1024^2
  }, 0)
  data.frame(id = basename(dirs), path = unname(dirs), created = file.mtime(dirs),
             size_mb = unname(size), stringsAsFactors = FALSE)
}

#' @rdname quantformer_models
#' @param id ids (character) of models listed by `quantformer_models()`, or a fitted
#'   [textmodel_finetune()] object whose model lives in that folder.
#' @return `quantformer_remove_model()`: the paths removed, invisibly. An input error
#'   (class `quantformer_input_error`) names an `id` that is not in the model folder; nothing
#'   is removed then.
#' @export
quantformer_remove_model <- function(id) {
  if (inherits(id, "textmodel_finetune")) id <- basename(id$model_dir)
  if (!is.character(id) || !length(id) || anyNA(id))
    input_error("`id` must be ids listed by quantformer_models() or a textmodel_finetune object")
  known <- quantformer_models()
  unknown <- setdiff(id, known$id)
  if (length(unknown))
    input_error("`id` '", unknown[1], "' is not a model in ", models_home(),
                "; see quantformer_models()")
  paths <- known$path[match(id, known$id)]
  unlink(paths, recursive = TRUE)
  invisible(paths)
}
