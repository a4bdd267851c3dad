# Issue 15: regression and multi-label fine-tuning from R (default model, 1 epoch, short texts).

test_that("task = 'regression' trains on numeric y and predict() gives numbers named by docnames", {
  skip_if_no_verb("finetune")
  s <- sotu_sample()[1:30, ]
  fit <- textmodel_finetune(s, y = as.numeric(s$year), task = "regression", epochs = 1,
                            max_length = 32, output_dir = tempfile("qf-task-"))
  expect_identical(fit$task, "regression")
  expect_equal(fit$summary$target_mean, mean(s$year))
  p <- predict(fit, newdata = s[1:5, ])
  expect_identical(names(p), s$doc_id[1:5])
  # each number belongs to its document: the same documents in reverse order give the same
  # number per docname
  expect_equal(predict(fit, newdata = s[5:1, ])[names(p)], p, tolerance = 1e-5)
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
  both <- predict(fit, newdata = s[1:4, ], type = "both")
  expect_identical(names(both), c("doc_id", "predicted_dem", "predicted_long", "prob_dem",
                                  "prob_long"))
  expect_identical(both$doc_id, s$doc_id[1:4])
  expect_identical(both$predicted_long, unname(cls[, "long"]))
  expect_equal(both$prob_dem, unname(pr[, "dem"]))
  y <- as.matrix(s[c("dem", "long")])
  expect_error(textmodel_finetune(s, y = unname(y), task = "multilabel"), "one named column")
  expect_error(textmodel_finetune(s, y = c("dem", "nope"), task = "multilabel"), "'nope'")
  bad <- s
  bad$dem[1] <- 7L
  expect_error(textmodel_finetune(bad, y = c("dem", "long"), task = "multilabel", epochs = 1,
                                  output_dir = tempfile("qf-task-")), "0/1")
  # review finding: the error named the CLI flag (--label-cols) and showed R's numbers as 2.0
  y <- as.matrix(s[c("dem", "long")]) * 1.0
  y[2, "long"] <- 2
  y[1, "dem"] <- NA
  err <- expect_error(textmodel_finetune(s$text, y = y, task = "multilabel", epochs = 1,
                                         output_dir = tempfile("qf-task-")))
  expect_match(conditionMessage(err), paste0("label column 'long' (`y`) must hold 0/1 values, ",
                                             "but it has 2 (row 2); recode it as 0/1"), fixed = TRUE)
  expect_false(grepl("--", conditionMessage(err), fixed = TRUE))
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

test_that("multi-label and regression validation documents take the same kinds of y as training", {
  skip_if_no_verb("finetune")
  s <- sotu_sample()[1:40, ]
  s$dem <- as.integer(s$party == "Democratic")
  s$long <- as.integer(nchar(s$text) > stats::median(nchar(s$text)))
  tr <- s[1:30, ]
  va <- s[31:40, ]
  y <- as.matrix(tr[c("dem", "long")])
  # a matrix y with validation = list(x, y = <logical matrix>), columns in another order
  fit <- textmodel_finetune(tr$text, y = y, task = "multilabel", epochs = 1, max_length = 32,
                            validation = list(x = va$text, y = as.matrix(va[c("long", "dem")]) == 1),
                            output_dir = tempfile("qf-task-"))
  v <- fit$summary$validation
  expect_equal(v$n, 10)
  expect_equal(v$per_label$long$support, sum(va$long))
  expect_equal(v$per_label$dem$support, sum(va$dem))
  # docvar names: the validation corpus needs the same docvars
  fit2 <- textmodel_finetune(tr, y = c("dem", "long"), task = "multilabel", epochs = 1,
                             max_length = 32, validation = va, output_dir = tempfile("qf-task-"))
  expect_equal(fit2$summary$validation$n, 10)
  expect_error(textmodel_finetune(tr, y = c("dem", "long"), task = "multilabel",
                                  validation = va[c("doc_id", "text", "dem")]),
               "`validation` names docvar(s) 'long' that `validation` does not have", fixed = TRUE)
  expect_error(textmodel_finetune(tr, y = c("dem", "long"), task = "multilabel",
                                  validation = list(x = va$text, y = va["dem"])),
               "`validation$y` has the labels dem but `y` has dem, long", fixed = TRUE)
  # regression: a docvar name, as for classification
  reg <- textmodel_finetune(tr, y = "year", task = "regression", epochs = 1, max_length = 32,
                            validation = va, output_dir = tempfile("qf-task-"))
  expect_equal(reg$summary$validation$n, 10)
  expect_true(is.finite(reg$summary$validation$rmse))
})

test_that("textmodel_compare(task = ) runs the task's baselines and metrics", {
  skip_if_no_verb("compare")
  s <- sotu_sample()
  s$dem <- as.integer(s$party == "Democratic")
  s$long <- as.integer(nchar(s$text) > stats::median(nchar(s$text)))
  test <- seq(2, 200, by = 4)
  reg <- textmodel_compare(s[-test, ], y = "year", test = s[test, ], task = "regression",
                           models = "ridge-bow", train_sizes = 100, repeats = 2)
  expect_equal(reg$model, "ridge-bow")
  expect_true(all(c("rmse_mean_100", "rmse_min_100", "rmse_max_100") %in% names(reg)))
  res <- attr(reg, "results")
  expect_equal(names(res), c("model", "train_size", "repeat", "rmse", "mae", "pearson",
                             "spearman", "r2", "seconds"))
  expect_equal(reg$rmse_mean_100, mean(res$rmse))
  ml <- textmodel_compare(s[-test, ], y = c("dem", "long"), test = s[test, ],
                          task = "multilabel", models = c("logit-bow", "svm-bow"),
                          repeats = 1, folds = 2)
  res <- attr(ml, "results")
  expect_equal(ml$model, c("logit-bow", "svm-bow"))
  expect_true(all(c("macro_f1", "micro_f1", "f1_dem", "f1_long") %in% names(res)))
  expect_equal(res$macro_f1, (res$f1_dem + res$f1_long) / 2)
  expect_error(textmodel_compare(s[-test, ], y = "year", test = s[test, ], task = "regression",
                                 models = "xgb-bow"),
               "`models` xgb-bow cannot run with `task` regression", fixed = TRUE)
  expect_error(textmodel_compare(s$text[1:20], y = as.numeric(s$year[1:20]),
                                 test = s$text[21:30], task = "regression"),
               "give `test_y`")
})
