test_that("textmodel_compare returns the Table-1 data frame with the long results", {
  skip_if_no_verb("compare")
  s <- sotu_sample()
  test <- seq(2, 200, by = 4)
  tab <- textmodel_compare(s[-test, ], y = "party", test = s[test, ],
                           models = c("svm-bow", "xgb-bow"), train_sizes = c(60, 120),
                           repeats = 2, folds = 2)
  expect_s3_class(tab, "data.frame")
  expect_equal(tab$model, c("svm-bow", "xgb-bow"))
  expect_true(all(c("f1_mean_60", "f1_min_60", "f1_max_60", "f1_mean_120", "seconds_120") %in%
                    names(tab)))
  expect_true(all(tab$f1_min_120 <= tab$f1_mean_120 & tab$f1_mean_120 <= tab$f1_max_120))
  res <- attr(tab, "results")
  expect_equal(nrow(res), 2 * 2 * 2)
  expect_equal(sort(unique(res$train_size)), c(60, 120))
  # the table's means, minima and maxima are those of the draws, per model and size
  for (size in c(60, 120)) for (stat in c("mean", "min", "max")) {
    draws <- res[res$train_size == size, ]
    expect_equal(tab[[paste0("f1_", stat, "_", size)]],
                 as.vector(tapply(draws$macro_f1, draws$model, stat)[tab$model]))
  }
  expect_true(file.exists(file.path(attr(tab, "output_dir"), "table.md")))
  # the same output_dir again: refused (in R's words) unless overwrite = TRUE
  out <- attr(tab, "output_dir")
  expect_error(textmodel_compare(s[-test, ], y = "party", test = s[test, ], models = "svm-bow",
                                 train_sizes = 60, repeats = 1, folds = 2, output_dir = out),
               "pass `overwrite = TRUE` or choose another `output_dir`", fixed = TRUE)
  tab2 <- textmodel_compare(s[-test, ], y = "party", test = s[test, ], models = "svm-bow",
                            train_sizes = 60, repeats = 1, folds = 2, output_dir = out,
                            overwrite = TRUE)
  expect_equal(nrow(attr(tab2, "results")), 1)
})

test_that("textmodel_compare: unknown model names and missing test labels", {
  s <- sotu_sample()
  expect_error(textmodel_compare(s$text[c(1:5, 196:200)], y = s$party[c(1:5, 196:200)],
                                 test = s$text[11:20]),
               "give `test_y`")
  skip_if_no_verb("compare")
  expect_error(textmodel_compare(s[c(1:10, 191:200), ], y = "party", test = s[21:30, ],
                                 models = "svm-xyz"),
               "^unknown model name\\(s\\) in `models`: svm-xyz")
})
