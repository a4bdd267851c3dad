test_that("regression terms are named as lm() names them, not as patsy does (issue 27)", {
  d <- data.frame(y = c(0, 1, 0, 1, 1, 0, 1, 0), party = rep(c("D", "R"), 4),
                  decade = rep(c("1980s", "1980s", "1990s", "1990s"), 2), x = 1:8)
  # the names the core's regress writes (patsy), in lm()'s order
  patsy <- c("Intercept", "party[T.R]", "decade[T.1990s]", "x", "party[T.R]:decade[T.1990s]")
  expect_identical(quantformer:::r_term_names(patsy),
                   names(stats::coef(stats::lm(y ~ party * decade + x, data = d))))
  expect_identical(quantformer:::r_term_names(c("party[D]", "party[R]")),
                   names(stats::coef(stats::lm(y ~ party - 1, data = d))))
  expect_identical(quantformer:::r_term_names("decade[T.1990s]"), "decade1990s")
})
