# Issue 15: regression and multi-label fine-tuning from R (default model, 1 epoch, short texts).

test_that("task = 'regression' trains on numeric y and predict() gives numbers named by docnames", {
  skip_if_no_verb("finetune")
  s <- sotu_sample()[1:30, ]
  fit <- textmodel_finetune(s, y = as.numeric(s$year), task = "regression", epochs = 1,
                            max_length = 32, output_dir = tempfile("qf-task-"))
  expect_identical(fit$task, "regression")
  expect_equal(fit$summary$target_mean, mean(s$year))
  p <- predict(fit, newdata = s[1:5, ])
  expect_type(p, "double")
  expect_identical(names(p), s$doc_id[1:5])
  expect_true(all(p > 1700 & p < 2100))
  expect_output(print(fit), "Task:      regression")
  expect_error(predict(fit, newdata = s[1:2, ], type = "probability"), "predicts numbers")
  expect_error(textmodel_finetune(s, y = s$party, task = "regression", epochs = 1),
               "needs a numeric `y`")
})

test_that("task = 'multilabel' takes a 0/1 matrix or docvar names; predict() gives a logical matrix", {
  skip_if_no_verb("finetune")
  s <- sotu_sample()[1:30, ]
  s$dem <- as.integer(s$party == "Democratic")
  s$long <- as.integer(nchar(s$text) > stats::median(nchar(s$text)))
  fit <- textmodel_finetune(s, y = c("dem", "long"), task = "multilabel", epochs = 1,
                            max_length = 32, output_dir = tempfile("qf-task-"))
  expect_identical(fit$levels, c("dem", "long"))
  cls <- predict(fit, newdata = s[1:4, ])
  expect_true(is.logical(cls) && is.matrix(cls))
  expect_identical(dimnames(cls), list(s$doc_id[1:4], c("dem", "long")))
  pr <- predict(fit, newdata = s[1:4, ], type = "probability")
  expect_true(all(pr > 0 & pr < 1))
  expect_identical(cls, pr >= 0.5)
  y <- as.matrix(s[c("dem", "long")])
  expect_error(textmodel_finetune(s, y = unname(y), task = "multilabel"), "one named column")
  expect_error(textmodel_finetune(s, y = c("dem", "nope"), task = "multilabel"), "'nope'")
  bad <- s
  bad$dem[1] <- 7L
  expect_error(textmodel_finetune(bad, y = c("dem", "long"), task = "multilabel", epochs = 1,
                                  output_dir = tempfile("qf-task-")), "0/1")
})

test_that("regression_report() gives hand-computed RMSE, MAE and R^2", {
  skip_if_no_verb("evaluate")
  r <- regression_report(c(1.5, 2, 2.5, 5, NA), c(1, 2, 3, 4, 3))
  expect_s3_class(r, "regression_report")
  expect_equal(r$n, 4)
  expect_equal(r$n_missing, 1)
  expect_equal(r$rmse, sqrt(1.5 / 4))
  expect_equal(r$mae, 0.5)
  expect_equal(r$r2, 1 - 1.5 / 5)
  expect_output(print(r), "RMSE")
  expect_error(regression_report(c("a", "b"), c(1, 2)), "must be numeric")
})
