# textmodel_finetune(method = "nli"): the label phrases travel to the core in a file, one
# CLASS=PHRASE a line (`--label-phrases-file`), so phrases may contain commas.
nli_phrase_args <- function(label_phrases) {
  if (is.null(label_phrases)) return(list(args = character()))
  phrases <- unlist(label_phrases)
  if (!is.character(phrases) || is.null(names(phrases)) || any(!nzchar(names(phrases))) ||
      anyNA(phrases))
    stop("`label_phrases` must be a named character vector, one phrase per class, e.g. ",
         "c(pro = \"in favor of\", con = \"against\")", call. = FALSE)
  file <- tempfile("quantformer-phrases-", fileext = ".txt")
  writeLines(enc2utf8(paste0(names(phrases), "=", phrases)), file, useBytes = TRUE)
  list(args = c("--label-phrases-file", file), file = file)
}
