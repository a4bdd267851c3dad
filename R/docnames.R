# docnames() for quantformer's objects, as methods of quanteda's generic: registered when
# quanteda's namespace loads (quanteda is suggested, not imported), the way packages register
# methods for a suggested package's generics (vctrs' s3_register()).

#' Document names of quantformer's models and results
#'
#' Methods for quanteda's `docnames()` generic: with quanteda loaded, `docnames(fit)` gives the
#' documents a model was fitted on, and `docnames(x)` of a `textstat_*` result the documents it
#' describes, as for quanteda's own objects. The methods are registered when quanteda is
#' loaded (quantformer does not import it).
#'
#' @param x a `textmodel_finetune` (the training documents; none, `character(0)`, for a model
#'   read with [load_finetune()]), a `textmodel_zeroshot` (the documents to classify), or a
#'   `textstat_attributions` or `textstat_subwords` result (its documents, in order, each
#'   once).
#' @return A character vector of docnames.
#' @name docnames.quantformer
#' @keywords internal
NULL

docnames_textmodel <- function(x) as.character(x$x$doc_id)

docnames_textstat <- function(x) unique(as.character(x$document))

# class -> method
DOCNAMES_METHODS <- list(textmodel_finetune = docnames_textmodel,
                         textmodel_zeroshot = docnames_textmodel,
                         textstat_attributions = docnames_textstat,
                         textstat_subwords = docnames_textstat)

# Register the methods on quanteda's generic now if its namespace is loaded, and whenever it
# loads later (called from .onLoad()).
register_docnames <- function() {
  register <- function(...) {
    ns <- asNamespace("quanteda")
    for (cls in names(DOCNAMES_METHODS))
      registerS3method("docnames", cls, DOCNAMES_METHODS[[cls]], envir = ns)
  }
  if (isNamespaceLoaded("quanteda")) register()
  setHook(packageEvent("quanteda", "onLoad"), register)
  invisible(TRUE)
}

.onLoad <- function(libname, pkgname) {
  register_docnames()
}
