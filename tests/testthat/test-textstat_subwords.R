test_that("textstat_subwords counts subwords and flags truncation, one row per document", {
  skip_if_no_python()
  x <- c(short = "A short text.", long = paste(rep("Many more words here.", 60), collapse = " "),
         none = NA)
  expect_warning(res <- textstat_subwords(x, max_length = 64),
                 "1 of 3 documents have missing or empty text")
  expect_s3_class(res, "data.frame")
  expect_equal(res$document, c("short", "long", "none"))
  # [CLS] a short text . [SEP] with the MiniLM (BERT uncased) tokenizer
  expect_equal(res$n_tokens[1], 6L)
  expect_gt(res$n_tokens[2], 64L)
  expect_equal(res$truncated, c(FALSE, TRUE, FALSE))
  expect_equal(res$n_tokens[3], 0L)
})

test_that("textstat_subwords works on a real quanteda corpus and keeps docvars", {
  skip_if_no_python()
  uk <- readRDS(shared_data("quanteda", "ukimmig2010_corpus.rds"))
  res <- textstat_subwords(uk, max_length = 512, docvars = TRUE)
  expect_equal(res$document, names(uk))
  expect_equal(res$party, attr(uk, "docvars")$party)
  expect_true(all(res$n_tokens > 100))
  expect_equal(res$truncated, res$n_tokens > 512)
  expect_true(any(res$truncated))
})

test_that("predict() warns how many documents it truncated and textstat_subwords(x, fit) shows which (#17)", {
  skip_if_no_verb("finetune")
  s <- sotu_sample()
  fit <- textmodel_finetune(s[c(1:12, 181:192), ], y = "party", epochs = 1, max_length = 32,
                            output_dir = file.path(withr::local_tempdir("qf-trunc-"), "model"))
  new <- s[101:103, ]
  new$text <- c("Taxes are too high.",
                paste(rep("The economy of the nation is strong.", 20), collapse = " "),
                "We will defend the nation.")
  # once per call, with the share, in R terms (issue 27, point 3)
  warned <- character()
  withCallingHandlers(predict(fit, newdata = new), warning = function(w) {
    warned <<- c(warned, conditionMessage(w))
    invokeRestart("muffleWarning")
  })
  expect_identical(warned, paste0("1 of 3 document(s) truncated to 32 tokens (head_tail), 33% ",
                                  "of the documents; textstat_subwords(x, model = fit) shows ",
                                  "which"))
  res <- textstat_subwords(new, model = fit)
  expect_equal(res$document, new$doc_id)
  expect_equal(res$truncated, res$n_tokens > 32)
  expect_equal(res$truncated[2], TRUE)
  expect_equal(sum(res$truncated), 1L)
})
