# calibrate_finetune() and predict(calibrated = TRUE): the R side of `quantformer calibrate`
# and `predict --calibrated` (#12: temperature scaling, Guo et al. 2017).

test_that("calibrate_finetune() stores a temperature that predict(calibrated = TRUE) applies", {
  skip_if_no_python()
  sotu <- sotu_sample()
  dem <- which(sotu$party == "Democratic")
  rep <- which(sotu$party == "Republican")
  train <- sotu[c(dem[1:8], rep[1:8]), ]
  fit <- textmodel_finetune(train, y = "party", epochs = 1, max_length = 32, seed = 2,
                            output_dir = file.path(withr::local_tempdir(), "m"))
  new <- sotu[c(dem[19:21], rep[19:20]), ]
  expect_error(suppressWarnings(predict(fit, newdata = new, calibrated = TRUE)),
               "has no calibration")
  valid <- sotu[c(dem[9:18], rep[9:18]), ]
  valid$party[3] <- NA  # uncoded: left out
  fit2 <- suppressWarnings(calibrate_finetune(fit, valid, y = "party"))
  cal <- fit2$summary$calibration
  expect_equal(cal$n, 19)
  expect_true(cal$temperature > 0)
  expect_match(cal$method, "Guo et al. 2017")
  stored <- jsonlite::read_json(file.path(fit$model_dir, "quantformer.json"))
  expect_equal(stored$calibration$temperature, cal$temperature)
  raw <- suppressWarnings(predict(fit2, newdata = new, type = "probability"))
  calibrated <- suppressWarnings(predict(fit2, newdata = new, type = "probability",
                                         calibrated = TRUE))
  # softmax(log(p) / T), row by row
  want <- exp(log(raw) / cal$temperature)
  want <- want / rowSums(want)
  expect_equal(calibrated, want, tolerance = 1e-5)
  expect_equal(max.col(calibrated, "first"), max.col(raw, "first"))  # the classes do not change
})

test_that("calibrate_finetune() names bad input", {
  skip_if_no_python()
  sotu <- sotu_sample()
  fit <- structure(list(model_dir = withr::local_tempdir(), task = "regression"),
                   class = c("textmodel_finetune", "textmodel", "list"))
  expect_error(calibrate_finetune(fit, sotu[1:12, ], y = "party"), "regression model")
  expect_error(calibrate_finetune(list(), sotu[1:12, ], y = "party"),
               "must be a model from textmodel_finetune")
})
