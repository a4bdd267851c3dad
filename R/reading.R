# How a document is read (truncation, max_length, stride, max_chunks, aggregate). The choices
# and defaults are the core's, `core_rules()$reading` (R/python.R; the core's one owner is
# python/quantformer/models/reading.py): R keeps no copy of them. A core that cannot say (an
# older one) leaves the check to the core itself.

# The truncation choices, the default first (`"head_tail"`, `"head"`, `"tail"`, `"chunks"`
# from this core); NULL when the core does not say.
truncation_choices <- function() {
  rule <- core_rules()$reading$truncation
  if (is.null(rule$choices)) return(NULL)
  choices <- as.character(unlist(rule$choices))
  c(rule$default, setdiff(choices, rule$default))
}

# `truncation` checked against the core's choices: NULL stays NULL (the core's default, or a
# fitted model's); a unique prefix gives its choice; anything else is an input error naming
# `truncation` (match_choice(), R/arguments.R).
match_truncation <- function(truncation) {
  if (is.null(truncation)) return(NULL)
  choices <- truncation_choices()
  if (is.null(choices)) return(truncation)
  match_choice(truncation, choices)
}

