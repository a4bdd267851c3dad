test_that("annotate_llm codes each document from the codebook with label probabilities", {
  skip_if_no_verb("annotate")
  llm <- tiny_llama()
  x <- c(a = "We must reduce the deficit.", b = "Climate change is real.",
         c = "Thank you for the reply.")
  cb <- data.frame(label = c("pro", "contra"),
                   description = c("supports the policy", "opposes the policy"))
  cache <- tempfile(fileext = ".sqlite")
  codes <- annotate_llm(x, cb, model = llm, cache = cache)
  expect_equal(codes$doc_id, c("a", "b", "c"))
  expect_equal(names(codes), c("doc_id", "label", "prob_pro", "prob_contra", "unparsed",
                               "coder"))
  expect_equal(codes$prob_pro + codes$prob_contra, c(1, 1, 1), tolerance = 1e-6)
  expect_equal(codes$label, ifelse(codes$prob_pro > codes$prob_contra, "pro", "contra"))
  expect_equal(annotate_llm(x, cb, model = llm, cache = cache), codes)  # from the cache
  expect_error(annotate_llm(x, cb[1, ], model = llm), "at least two")
  expect_error(annotate_llm(x, cb, model = llm, shots = 2,
                            shots_from = data.frame(doc_id = "a", text = x[["a"]],
                                                    label = "pro")),
               "only 1")
  # a shot that is a document being coded: counted once, worded for data frames
  expect_error(annotate_llm(x, cb, model = llm, shots = 1,
                            shots_from = data.frame(doc_id = "a", text = x[["a"]],
                                                    label = "pro")),
               "`shots_from` shares 1 documents with `x` .*remove them from one of the two")
  # settings that would not be used are errors in R's names, before the model loads
  expect_error(annotate_llm(x, cb, model = llm, shots = -2),
               "`shots` must be a whole number of at least 0, not -2",
               class = "quantformer_input_error")
  expect_error(annotate_llm(x, cb, model = llm,
                            shots_from = data.frame(doc_id = "z", text = "t", label = "pro")),
               "`shots_from` gives the human codes the k-shot examples are drawn from, and `shots` is 0",
               fixed = TRUE, class = "quantformer_input_error")
  expect_error(annotate_llm(x, cb, model = llm, timeout = 5, retries = 1),
               "`timeout`, `retries` are settings of an `endpoint`; a local model does not use them",
               fixed = TRUE, class = "quantformer_input_error")
})

test_that("textmodel_compare(llm =) adds the LLM's rows scored on the same test documents (issue 35)", {
  skip_if_no_verb("compare")
  llm <- tiny_llama()
  sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
  sotu$text <- substr(sotu$text, 1, 200)
  test <- seq(5, 200, by = 10)
  cb <- data.frame(label = c("Democratic", "Republican"),
                   description = c("a Democratic president's address",
                                   "a Republican president's address"))
  tab <- textmodel_compare(sotu[-test, ], y = "party", test = sotu[test, ], models = "svm-bow",
                           repeats = 1, folds = 2, train_sizes = 40, llm = llm, codebook = cb,
                           verbose = FALSE)
  expect_identical(tab$model, c("svm-bow", "llm"))
  res <- attr(tab, "results")
  codes <- annotate_llm(sotu[test, c("doc_id", "text")], cb, model = llm,
                        cache = tempfile(fileext = ".sqlite"), verbose = FALSE)
  truth <- sotu$party[test]
  f1 <- vapply(cb$label, function(k) {
    tp <- sum(codes$label == k & truth == k)
    denom <- sum(codes$label == k) + sum(truth == k)
    if (denom == 0) 0 else 2 * tp / denom
  }, 0)
  expect_equal(res$macro_f1[res$model == "llm"], mean(f1), tolerance = 1e-12)
  expect_error(textmodel_compare(sotu[-test, ], y = "party", test = sotu[test, ],
                                 models = "svm-bow", shots = 2, verbose = FALSE),
               "`llm`")
})

test_that("annotate_files codes a partitioned corpus and resumes from the manifest", {
  skip_if_no_verb("annotate")
  llm <- tiny_llama()
  dir <- withr::local_tempdir()
  utils::write.csv(data.frame(doc_id = c("a", "b"),
                              text = c("We must reduce the deficit.", "Climate change is real.")),
                   file.path(dir, "p1.csv"), row.names = FALSE)
  utils::write.csv(data.frame(doc_id = "c", text = "Thank you for the reply."),
                   file.path(dir, "p2.csv"), row.names = FALSE)
  cb <- data.frame(label = c("pro", "contra"),
                   description = c("supports the policy", "opposes the policy"))
  out <- file.path(withr::local_tempdir(), "codes")
  res <- annotate_files(dir, cb, model = llm, output_dir = out)
  expect_equal(basename(res$output), c("p1.parquet", "p2.parquet"))
  expect_equal(res$rows, c(2L, 1L))
  expect_equal(jsonlite::fromJSON(attr(res, "manifest"))$job$verb, "annotate")
  expect_true(file.exists(paste0(out, ".cache.sqlite")))
  unlink(res$output[2])
  again <- annotate_files(dir, cb, model = llm, output_dir = out, resume = TRUE)
  expect_equal(again$run, c(1L, 2L))
  expect_error(annotate_files(dir, cb[1, ], model = llm, output_dir = tempfile()),
               "at least two")
  expect_error(annotate_files(dir, cb, model = llm, output_dir = tempfile(), keep_text = TRUE),
               "`keep_text = TRUE` is for a single `files` file")
})
