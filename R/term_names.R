# Regression term names as R writes them. The core's `regress` names coefficients as patsy
# does (`Intercept`, `decade[T.1990s]`, `C(x)[T.a]:y`, `x[a]` without an intercept); R users
# read `lm()`'s names: `(Intercept)`, `decade1990s`, `C(x)a:y`, `xa`. Only the printed names
# change (the core's names stay in its files, the frame contract).
r_term_names <- function(term) {
  term <- as.character(term)
  term[term == "Intercept"] <- "(Intercept)"
  term <- gsub("\\[T\\.([^]]*)\\]", "\\1", term)
  gsub("\\[([^]]*)\\]", "\\1", term)
}
