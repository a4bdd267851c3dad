# Numeric precision (issue 37): `precision` on predict() and predict_files().

test_that("bad precision fails in R with the fix; the default passes no flag (issue 37)", {
  expect_error(quantformer:::precision_flags("fp16"),
               "`precision` must be \"auto\", \"fp32\" or \"bf16\", not \"fp16\"")
  expect_error(quantformer:::precision_flags(c("fp32", "bf16")), "`precision` must be")
  expect_equal(quantformer:::precision_flags("auto"), character())
  expect_equal(quantformer:::precision_flags("bf16"), c("--precision", "bf16"))
  withr::local_options(quantformer.precision = "fp32")
  expect_equal(quantformer:::precision_flags(), c("--precision", "fp32"))
})

test_that("predict(precision = 'bf16') gives fp32's labels; predict_files takes it (issue 37)", {
  skip_if_no_verb("predict")
  s <- sotu_sample()
  tr <- s[c(1:15, 186:200), ]
  fit <- textmodel_finetune(tr, y = factor(tr$party), epochs = 1, max_length = 32)
  new <- s[101:110, ]
  p32 <- suppressWarnings(predict(fit, newdata = new, type = "probability",
                                  precision = "fp32"))  # truncation at 32 tokens
  p16 <- suppressWarnings(predict(fit, newdata = new, type = "probability", precision = "bf16"))
  expect_equal(dimnames(p16), dimnames(p32))
  expect_equal(max.col(p16), max.col(p32))  # near ties are predicted again in fp32
  expect_lt(max(abs(p16 - p32)), 0.05)
  dir <- tempfile("prec-")
  dir.create(dir)
  write.csv(new, file.path(dir, "a.csv"), row.names = FALSE)
  out <- tempfile("preds-")
  man <- suppressWarnings(predict_files(fit, dir, out, precision = "bf16"))
  expect_equal(man$rows, 10L)
  expect_error(predict(fit, newdata = new, backend = "onnx", precision = "bf16"),
               "`precision` bf16 applies to the torch backend; with `backend` onnx")
})
