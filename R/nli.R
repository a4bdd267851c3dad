# textmodel_finetune(method = "nli"): the label phrases travel to the core in a file, one
# CLASS=PHRASE a line (`--label-phrases-file`), so phrases may contain commas. Returns the
# `inputs` of call_verb() (an empty list without phrases).
nli_phrase_inputs <- function(label_phrases) {
  if (is.null(label_phrases)) return(list())
  phrases <- unlist(label_phrases)
  if (!is.character(phrases) || is.null(names(phrases)) || any(!nzchar(names(phrases))) ||
      anyNA(phrases))
    input_error("`label_phrases` must be a named character vector, one phrase per class, e.g. ",
         "c(pro = \"in favor of\", con = \"against\")", call. = FALSE)
  list("--label-phrases-file" = enc2utf8(paste0(names(phrases), "=", phrases)))
}
