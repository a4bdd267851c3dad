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

test_that("zeroshot, embeddings and attributions pass precision to the core (issue 37)", {
  skip_if_no_verb("zeroshot")
  texts <- c(a = "Taxes are too high and spending must fall.", b = "Our troops come home.",
             c = "The economy grew fast this year.", d = "We will defend the nation.")
  zs <- textmodel_zeroshot(texts, labels = c("the economy", "war"), verbose = FALSE)
  p32 <- predict(zs, type = "probability", precision = "fp32")
  p16 <- predict(zs, type = "probability", precision = "bf16")
  expect_equal(max.col(p16), max.col(p32))  # near ties are scored again in fp32
  expect_lt(max(abs(p16 - p32)), 0.05)
  expect_error(predict(zs, backend = "onnx", precision = "bf16"),
               "`precision` bf16 applies to the torch backend")
  e32 <- textstat_embeddings(texts, precision = "fp32", verbose = FALSE)
  e16 <- textstat_embeddings(texts, precision = "bf16", verbose = FALSE)
  expect_equal(attr(e32, "backend"), "torch")
  expect_equal(attr(e16, "backend"), "torch bf16")
  cosine <- rowSums(e16 * e32) / sqrt(rowSums(e16^2) * rowSums(e32^2))
  expect_gt(min(cosine), 0.99)
  expect_error(textstat_embeddings(texts, precision = "half"),
               "`precision` must be \"auto\", \"fp32\" or \"bf16\"")
  s <- sotu_sample()
  fit <- textmodel_finetune(s[c(1:12, 181:192), ], y = "party", epochs = 1, max_length = 32,
                            output_dir = file.path(withr::local_tempdir("qf-prec-"), "model"))
  # 4 steps: a completeness gap is warned (not what is tested here)
  auto <- suppressWarnings(textstat_attributions(fit, texts[1:2], steps = 4, verbose = FALSE))
  expect_equal(unique(auto$backend), "torch")  # auto keeps fp32 for attributions
  bf <- suppressWarnings(textstat_attributions(fit, texts[1:2], steps = 4, precision = "bf16",
                                               verbose = FALSE))
  expect_equal(unique(bf$backend), "torch bf16")
  expect_equal(bf$word, auto$word)
})

test_that("precision and truncation = 'chunks' go together (issues 34 and 37)", {
  skip_if_no_verb("embed")
  s <- sotu_sample()[c(1, 2, 181), ]
  kw <- list(s, max_length = 24, truncation = "chunks", stride = 4, verbose = FALSE)
  e32 <- do.call(textstat_embeddings, c(kw, precision = "fp32"))
  e16 <- do.call(textstat_embeddings, c(kw, precision = "bf16"))
  expect_equal(attr(e16, "backend"), "torch bf16")
  expect_false(isTRUE(all.equal(e16, e32)))  # bf16 ran in the windows
  cosine <- rowSums(e16 * e32) / sqrt(rowSums(e16^2) * rowSums(e32^2))
  expect_gt(min(cosine), 0.99)
  zs <- textmodel_zeroshot(s, labels = c("the economy", "war"), max_length = 40,
                           truncation = "chunks", stride = 5, verbose = FALSE)
  p32 <- predict(zs, type = "both", precision = "fp32")
  p16 <- predict(zs, type = "both", precision = "bf16")
  expect_equal(p16$predicted, p32$predicted)  # near ties read again in fp32, in windows
})

test_that("suggest_documents and code_documents pass precision to the core (issue 37)", {
  skip_if_no_verb("suggest")
  sotu <- sotu_sample()[1:40, ]
  cache <- withr::local_tempdir()
  expect_output(suggest_documents(sotu, n = 3, cache_dir = cache, precision = "fp32",
                                  verbose = TRUE),
                "precision of the embeddings: fp32 \\(fp32 asked for\\)")
  expect_output(suggest_documents(sotu, n = 3, cache_dir = cache, precision = "bf16",
                                  verbose = TRUE),
                "precision of the embeddings: bf16 \\(bf16 asked for")
  expect_equal(length(list.files(cache)), 2)  # the cache is keyed by the precision
  project <- withr::local_tempfile(fileext = ".sqlite")
  proc <- code_documents(sotu, labels = c("Democratic", "Republican"), project = project,
                         browser = FALSE, wait = FALSE, verbose = FALSE, cache_dir = cache,
                         precision = "fp32")
  withr::defer(if (proc$is_alive()) proc$kill_tree())
  url <- attr(proc, "url")
  con <- url(paste0(sub("/\\?token=.*$", "", url), "/api/state?token=",
                    sub("^.*token=([^&]+).*$", "\\1", url)))
  state <- jsonlite::fromJSON(paste(readLines(con, warn = FALSE), collapse = "\n"))
  close(con)
  expect_equal(state$model$precision$precision, "fp32")
  expect_error(code_documents(sotu, labels = c("a", "b"), precision = "fp16"),
               "`precision` must be")
})

test_that("precision's values are the core's one list; fine-tuning checks its own before any run", {
  skip_if_no_python()
  rules <- quantformer:::core_rules()$precision
  expect_equal(unlist(rules$infer), c("auto", "fp32", "bf16"))
  expect_equal(unlist(rules$train), c("auto", "fp32", "bf16", "fp16"))
  expect_equal(quantformer:::precision_choices("train"), c("auto", "fp32", "bf16", "fp16"))
  out <- file.path(withr::local_tempdir("qf-prec-"), "model")
  expect_error(textmodel_finetune(c(a = "good film", b = "bad film"), y = c("pos", "neg"),
                                  epochs = 1, precision = "fp8", output_dir = out),
               "`precision` must be \"auto\", \"fp32\", \"bf16\" or \"fp16\", not \"fp8\"")
  expect_false(dir.exists(out))
})
