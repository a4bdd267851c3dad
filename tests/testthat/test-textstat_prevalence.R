# textstat_prevalence() (issue 12): the R side of `quantformer estimate`.

biased_sample <- function(n = 600, seed = 1) {
  set.seed(seed)
  party <- sample(c("D", "R"), n, replace = TRUE)
  truth <- ifelse(runif(n) < ifelse(party == "R", 0.3, 0.15), "econ", "other")
  score <- ifelse(truth == "econ", rbeta(n, 4, 3), rbeta(n, 1.5, 6))
  ids <- paste0("p", seq_len(n))
  prob <- cbind(econ = score, other = 1 - score)
  rownames(prob) <- ids
  pred <- factor(ifelse(score > 0.5, "econ", "other"))
  names(pred) <- ids
  coded <- seq(1, n, by = 3)
  list(prob = prob, pred = pred, truth = truth, ids = ids,
       data = data.frame(doc_id = ids, text = "", party = party, stringsAsFactors = FALSE),
       gold = stats::setNames(truth[coded], ids[coded]))
}

test_that("textstat_prevalence gives PPI estimates per class and group (issue 12)", {
  skip_if_no_verb("estimate")
  s <- biased_sample()
  res <- textstat_prevalence(s$prob, s$gold, by = "party", data = s$data)
  expect_s3_class(res, "textstat_prevalence")
  expect_identical(names(res), c("party", "class", "estimate", "ci_low", "ci_high", "method",
                                 "n_gold", "n_total", "note"))
  expect_identical(res$party, c("D", "D", "R", "R"))
  expect_identical(res$class, c("econ", "other", "econ", "other"))
  expect_true(all(res$ci_low < res$estimate & res$estimate < res$ci_high))
  expect_equal(sum(res$n_gold) / 2, length(s$gold))
  expect_equal(sum(res$n_total) / 2, length(s$pred))
  expect_identical(unique(res$method), "ppi")
  # grouping values given directly, and a factor prediction with the naive method
  naive <- textstat_prevalence(s$pred, s$gold, by = s$data$party, method = "naive")
  expect_identical(names(naive)[1], "group")
  share <- mean(s$pred[s$data$party == "D"] == "econ")
  expect_equal(naive$estimate[naive$group == "D" & naive$class == "econ"], share)
  out <- capture.output(print(res))
  expect_true(any(grepl("estimate", out)))
})

test_that("textstat_prevalence plans the gold sample size and takes a data frame gold", {
  skip_if_no_verb("estimate")
  s <- biased_sample()
  gold <- data.frame(doc_id = names(s$gold), label = unname(s$gold))
  res <- textstat_prevalence(s$prob, gold, method = "gold", target_halfwidth = 0.05)
  p <- mean(s$gold == "econ")
  expect_equal(res$n_gold_needed[res$class == "econ"],
               ceiling(qnorm(0.975)^2 * p * (1 - p) / 0.05^2), tolerance = 0.01)
})

test_that("textstat_prevalence refuses bad gold samples with the core's message", {
  skip_if_no_verb("estimate")
  s <- biased_sample()
  expect_error(textstat_prevalence(s$prob, s$gold[1:5]), "at least 10")
  bad <- s$gold
  names(bad)[1] <- "nope"
  # in R's terms: the names of `gold` and the docnames of `x`, not a file and `id_col`
  expect_error(textstat_prevalence(s$prob, bad),
               "not in `x` .*nope.*check that the names of `gold` are docnames of `x`")
  bad <- s$gold
  bad[1] <- "sports"
  expect_error(textstat_prevalence(s$prob, bad), "does not know: sports")
  expect_error(textstat_prevalence(s$prob, unname(s$gold)), "named by docnames")
  expect_error(textstat_prevalence(s$prob, s$gold, by = "party"), "`data` is missing")
  expect_error(textstat_prevalence(s$prob, s$gold, by = "year", data = s$data),
               "no such docvar")
})

test_that("textstat_prevalence warns about a group without gold documents", {
  skip_if_no_verb("estimate")
  s <- biased_sample()
  region <- ifelse(seq_along(s$pred) <= 590, "north", "south")
  gold <- s$gold[names(s$gold) %in% s$ids[1:590]]
  expect_warning(res <- textstat_prevalence(s$prob, gold, by = region),
                 "no gold documents: group=south")
  expect_true(all(grepl("pooled", res$note[res$group == "south"])))
})

test_that("textstat_prevalence weights a stratified gold sample", {
  skip_if_no_verb("estimate")
  s <- biased_sample(n = 900, seed = 3)
  p <- ifelse(s$data$party == "R", 0.4, 0.1)
  set.seed(4)
  coded <- which(runif(900) < p)
  gold <- stats::setNames(s$truth[coded], s$ids[coded])
  w <- textstat_prevalence(s$prob, gold, method = "gold", inclusion_prob = p[coded])
  expect_equal(w$estimate[w$class == "econ"],
               stats::weighted.mean(gold == "econ", 1 / p[coded]))
})

test_that("textstat_regression gives PPI coefficients for a docvar (issue 12)", {
  skip_if_no_verb("regress")
  s <- biased_sample()
  res <- textstat_regression(s$prob, s$gold, econ ~ party, data = s$data)
  expect_s3_class(res, "textstat_regression")
  # R's names for the terms, as lm() gives them (issue 27)
  expect_identical(res$term, names(stats::coef(stats::lm(rep(0, nrow(s$data)) ~ party,
                                                          data = s$data))))
  expect_identical(res$term, c("(Intercept)", "partyR"))
  expect_true(all(res$ci_low < res$estimate & res$estimate < res$ci_high))
  gold <- textstat_regression(s$pred, s$gold, econ ~ party, data = s$data, method = "gold")
  coded <- match(names(s$gold), s$ids)
  fit <- stats::lm(I(s$gold == "econ") ~ s$data$party[coded])
  expect_equal(gold$estimate, unname(stats::coef(fit)), tolerance = 1e-6)
  logit <- textstat_regression(s$prob, s$gold, econ ~ party, data = s$data,
                               family = "logistic")
  expect_identical(unique(logit$family), "logistic")
  expect_error(textstat_regression(s$prob, s$gold, ~ party, data = s$data), "two-sided")
  expect_error(textstat_regression(s$prob, s$gold, econ ~ year, data = s$data),
               "no such docvar")
  # one unknown docvar among known ones is named too (not the core's patsy error)
  expect_error(textstat_regression(s$prob, s$gold, econ ~ party + nosuch, data = s$data),
               "`formula` uses nosuch but `data` has no such docvar")
  bad <- s$gold
  names(bad)[1] <- "nope"
  err <- tryCatch(textstat_regression(s$prob, bad, econ ~ party, data = s$data),
                  error = conditionMessage)
  expect_match(err, "not in `x` .*nope.*the names of `gold` are docnames of `x`")
  expect_no_match(err, "id_col|prediction file")
})

test_that("textstat_regression(method = 'dsl') regresses the design-based pseudo-outcomes (issue 35)", {
  skip_if_no_verb("regress")
  s <- biased_sample()
  res <- textstat_regression(s$prob, s$gold, econ ~ party, data = s$data, method = "dsl")
  coded <- match(names(s$gold), s$ids)
  pseudo <- s$prob[, "econ"]
  pseudo[coded] <- pseudo[coded] + ((s$gold == "econ") - pseudo[coded]) *
    length(pseudo) / length(coded)
  fit <- stats::lm(pseudo ~ party, data = s$data)
  expect_equal(res$estimate, unname(stats::coef(fit)), tolerance = 1e-8)
  # the HC0 sandwich standard errors
  x <- stats::model.matrix(fit)
  bread <- solve(crossprod(x))
  se <- sqrt(diag(bread %*% crossprod(x * stats::residuals(fit)) %*% bread))
  expect_equal(res$ci_high - res$estimate, unname(stats::qnorm(0.975) * se), tolerance = 1e-8)
  expect_identical(unique(res$method), "dsl")
})
