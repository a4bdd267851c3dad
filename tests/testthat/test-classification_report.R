test_that("classification_report matches hand-computed metrics, in factor order", {
  skip_if_no_verb("evaluate")
  truth <- factor(c("pos", "pos", "pos", "neg", "neg", "neu"), levels = c("pos", "neu", "neg"))
  pred <- factor(c("pos", "neg", "pos", "neg", "pos", "neu"), levels = c("pos", "neu", "neg"))
  r <- classification_report(pred, truth)
  expect_s3_class(r, "classification_report")
  expect_equal(r$n, 6)
  expect_equal(r$accuracy, 4 / 6)
  # pos: P 2/3 R 2/3; neg: P 1/2 R 1/2; neu: P 1 R 1
  expect_equal(r$per_class$class, c("pos", "neu", "neg"))
  expect_equal(r$per_class$precision, c(2 / 3, 1, 1 / 2))
  expect_equal(r$per_class$recall, c(2 / 3, 1, 1 / 2))
  expect_equal(r$per_class$f1, c(2 / 3, 1, 1 / 2))
  expect_equal(r$per_class$support, c(3L, 1L, 2L))
  expect_equal(r$macro_f1, mean(c(2 / 3, 1, 1 / 2)))
  expect_equal(dimnames(r$confusion), list(true = c("pos", "neu", "neg"),
                                           predicted = c("pos", "neu", "neg")))
  expect_equal(unclass(r$confusion)["pos", "neg"], 1L)
  expect_equal(unclass(r$confusion)["neg", "pos"], 1L)
  expect_equal(sum(diag(r$confusion)), 4L)
  expect_equal(r$confusion, table(true = truth, predicted = pred), ignore_attr = TRUE)
  expect_output(print(r), "Macro-F1: 0.722")
})

test_that("NA predictions and truths are left out with a warning; lengths must match", {
  skip_if_no_verb("evaluate")
  w <- character()
  r <- withCallingHandlers(
    classification_report(c("a", NA, "b", "a"), c("a", "b", "b", NA)),
    warning = function(cnd) {
      w <<- c(w, conditionMessage(cnd))
      invokeRestart("muffleWarning")
    })
  expect_match(w, "1 document\\(s\\) have no true label", all = FALSE)
  expect_match(w, "1 document\\(s\\) have no prediction", all = FALSE)
  expect_equal(r$n, 2)
  expect_equal(r$accuracy, 1)
  expect_error(classification_report(c("a", "b"), c("a", "b", "a")),
               "`predicted` has 2 value\\(s\\) but `truth` has 3")
})

test_that("#17: print() says it is the prediction that is missing, not a class", {
  skip_if_no_verb("evaluate")
  r <- suppressWarnings(classification_report(factor(c("A", NA)), c("A", "B")))
  expect_equal(c(r$n, r$n_missing_pred, r$n_missing_truth), c(1, 1, 0))
  out <- capture.output(print(r))
  expect_match(out[1], "Classification report (1 documents, left out: 1 without a prediction)",
               fixed = TRUE)
  expect_false(any(grepl("missing class", out)))
  r2 <- suppressWarnings(classification_report(c("A", "B", NA), c(NA, "B", "A")))
  expect_output(print(r2), "left out: 1 without a prediction, 1 without a true class")
})

test_that("classification_report gives Krippendorff's alpha and Cohen's kappa (issue 12)", {
  skip_if_no_verb("evaluate")
  truth <- factor(c("pos", "pos", "pos", "neg", "neg", "neu"), levels = c("pos", "neu", "neg"))
  pred <- factor(c("pos", "neg", "pos", "neg", "pos", "neu"), levels = c("pos", "neu", "neg"))
  r <- classification_report(pred, truth)
  ag <- r$agreement
  expect_identical(ag$statistic, c("Krippendorff's alpha", "Cohen's kappa"))
  # by hand: kappa = (4/6 - 14/36) / (1 - 14/36); alpha = 1 - 11 * 4 / 88 (coincidences)
  expect_equal(ag$estimate, c(0.5, 10 / 22))
  expect_true(all(ag$ci_low <= ag$estimate & ag$estimate <= ag$ci_high))
  expect_output(print(r), "Krippendorff's alpha")
})
