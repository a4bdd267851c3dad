# textmodel_tune(): `quantformer tune` on a tiny grid (2 learning rates x 1 epoch x 2 folds).

tune_docs <- function() {
  s <- sotu_sample()
  s[c(which(s$party == "Democratic")[1:10], which(s$party == "Republican")[1:10]), ]
}

test_that("tune picks the configuration its own results table ranks best", {
  skip_if_no_verb("tune")
  s <- sotu_sample()
  test <- s[c(which(s$party == "Democratic")[11:13], which(s$party == "Republican")[11:13]), ]
  # the refit model's record comes with tune's answer: no second call to `quantformer info`
  ns <- asNamespace("quantformer")
  suppressMessages(trace("model_record", where = ns, print = FALSE,
                         tracer = quote(stop("textmodel_tune() asked `quantformer info` again"))))
  withr::defer(suppressMessages(untrace("model_record", where = ns)))
  tuned <- textmodel_tune(tune_docs(), y = "party", lr = c(1e-4, 5e-4), epochs = 1, folds = 2,
                          test = test, max_length = 128, batch_size = 8, verbose = FALSE)
  expect_s3_class(tuned, c("textmodel_tune", "textmodel", "list"), exact = TRUE)
  expect_equal(tuned$metric, "macro_f1")
  res <- tuned$results
  expect_equal(nrow(res), 2L)
  expect_equal(sort(res$lr), c(1e-4, 5e-4))
  expect_equal(res$rank, 1:2)
  # 2 configurations x 2 folds, and the table's means are the means of those folds
  cv <- tuned$cv_results
  expect_equal(nrow(cv), 4L)
  expect_setequal(cv$fold, 1:2)
  for (i in seq_len(nrow(res)))
    expect_equal(res$mean_macro_f1[i],
                 mean(cv$macro_f1[cv$lr == res$lr[i] & cv$epochs == res$epochs[i]]))
  # the best configuration is the top of the table: the highest mean macro-F1, ties to the
  # lower learning rate (one epoch each)
  top <- order(-round(res$mean_macro_f1, 9), res$lr)[1]
  expect_equal(tuned$best$lr, res$lr[top])
  expect_equal(tuned$best$epochs, 1L)
  expect_equal(tuned$best$mean_macro_f1, max(res$mean_macro_f1))
  # the refit model and its test score
  expect_s3_class(tuned$model, "textmodel_finetune")
  expect_equal(tuned$model$levels, c("Democratic", "Republican"))
  expect_equal(tuned$model$summary$hyperparameters$lr, tuned$best$lr)
  expect_equal(tuned$test$n, 6L)
  pred <- predict(tuned$model, newdata = test, verbose = FALSE)
  expect_equal(tuned$test$accuracy, mean(as.character(pred) == test$party))
  # issue 32: predict() of the grid is its refit model's, and warns about unused arguments
  expect_identical(predict(tuned, newdata = test, verbose = FALSE), pred)
  expect_warning(predict(tuned, newdata = test, tpye = "probability", verbose = FALSE),
                 "`tpye` is not an argument")
  expect_output(print(tuned), "Best: lr ")
  expect_output(print(summary(tuned)), "Scores per fold")
})

test_that("bad grids are refused with the R argument named", {
  skip_if_no_verb("tune")
  err <- expect_error(textmodel_tune(tune_docs(), y = "party", lr = c(1e-4, 5e-4),
                                     epochs = c(1, 2), folds = 2, max_runs = 3,
                                     verbose = FALSE),
                      class = "quantformer_input_error")
  expect_match(conditionMessage(err), "`max_runs`", fixed = TRUE)
  expect_match(conditionMessage(err), "`lr`", fixed = TRUE)
  expect_error(textmodel_tune(tune_docs(), y = "partei"), "'partei' is not a docvar of `x`")
})
