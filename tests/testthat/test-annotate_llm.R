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
                               "coder", "status", "reason"))
  expect_equal(codes$status, rep("coded", 3))
  expect_equal(codes$prob_pro + codes$prob_contra, c(1, 1, 1), tolerance = 1e-6)
  expect_equal(as.character(codes$label),
               ifelse(codes$prob_pro > codes$prob_contra, "pro", "contra"))
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

test_that("annotate_llm returns label as a factor with the codebook's labels in its order", {
  skip_if_no_verb("annotate")
  llm <- tiny_llama()
  x <- c(a = "We must reduce the deficit.", b = "Climate change is real.",
         c = "Thank you for the reply.", d = "")
  # the codebook's order is not the alphabetical one
  cb <- data.frame(label = c("pro", "contra", "neutral"))
  codes <- suppressWarnings(annotate_llm(x, cb, model = llm, cache = tempfile(fileext = ".sqlite"),
                                         verbose = FALSE))
  expect_s3_class(codes$label, "factor")
  expect_identical(levels(codes$label), c("pro", "contra", "neutral"))
  probs <- as.matrix(codes[c("prob_pro", "prob_contra", "prob_neutral")])
  expect_identical(as.character(codes$label[1:3]),
                   c("pro", "contra", "neutral")[max.col(probs[1:3, ], ties.method = "first")])
  expect_true(is.na(codes$label[4]))  # an empty text gets no code
})

# codes as annotate_llm() returns them from an endpoint that gave no token log-probabilities
endpoint_codes <- function(n = 300, seed = 1) {
  set.seed(seed)
  truth <- sample(c("pro", "contra"), n, replace = TRUE, prob = c(0.3, 0.7))
  said <- ifelse(runif(n) < 0.85, truth, ifelse(truth == "pro", "contra", "pro"))
  codes <- data.frame(doc_id = paste0("text", seq_len(n)),
                      label = factor(said, levels = c("pro", "contra")),
                      prob_pro = NA_real_, prob_contra = NA_real_, unparsed = FALSE,
                      coder = "tiny-llm", stringsAsFactors = FALSE)
  list(codes = codes, truth = truth)
}

test_that("endpoint codes without probabilities go into textstat_prevalence, textstat_regression, textstat_reliability and classification_report as they are", {
  skip_if_no_verb("estimate")
  e <- endpoint_codes()
  coded <- 1:120
  gold <- data.frame(doc_id = e$codes$doc_id[coded], label = e$truth[coded])
  naive <- textstat_prevalence(e$codes, gold, method = "naive")
  expect_equal(naive$estimate[naive$class == "pro"], mean(e$codes$label == "pro"))
  dsl <- textstat_prevalence(e$codes, gold, method = "dsl")
  yhat <- as.numeric(e$codes$label == "pro")
  pseudo <- yhat
  pseudo[coded] <- yhat[coded] + (as.numeric(e$truth[coded] == "pro") - yhat[coded]) * 300 / 120
  expect_equal(dsl$estimate[dsl$class == "pro"], mean(pseudo))
  expect_true(all(dsl$note == "predictions: hard labels (no probabilities)"))
  ppi <- textstat_prevalence(e$codes, gold)
  expect_true(all(ppi$n_total == 300) && all(ppi$n_gold == 120))
  party <- data.frame(party = rep(c("D", "R"), 150))
  fit <- textstat_regression(e$codes, gold, pro ~ party, data = party, method = "dsl")
  expect_identical(fit$term, c("(Intercept)", "partyR"))
  expect_true(all(fit$note == "predictions: hard labels (no probabilities)"))
  rel <- textstat_reliability(list(ann = data.frame(doc_id = gold$doc_id, label = gold$label),
                                   llm = e$codes), n_boot = 20)
  expect_equal(rel$percent_agreement, mean(as.character(e$codes$label[coded]) == e$truth[coded]))
  rep <- classification_report(e$codes$label[coded], e$truth[coded])
  expect_equal(rep$accuracy, mean(as.character(e$codes$label[coded]) == e$truth[coded]))
})

test_that("a codebook data frame with an empty or NA label is refused with its row, before any work", {
  skip_if_no_verb("annotate")
  x <- c(a = "We must reduce the deficit.", b = "Climate change is real.")
  for (empty in list(NA_character_, "", "  ")) {
    cb <- data.frame(label = c("pro", empty, "contra"))
    expect_error(annotate_llm(x, cb, model = file.path(tempdir(), "no-such-model"),
                              verbose = FALSE),
                 "`codebook`: row 2 has no label (an empty or missing 'label'); give every row a label, or remove the row",
                 fixed = TRUE, class = "quantformer_input_error")
  }
})

test_that("classification_report of codes without probabilities says the ECE is not available, and why", {
  skip_if_no_verb("evaluate")
  e <- endpoint_codes(n = 40)
  rep <- classification_report(e$codes$label, e$truth)
  expect_true(is.na(rep$calibration$ece))
  expect_match(rep$calibration$reason, "the predictions have no probabilities", fixed = TRUE)
  expect_false(any(grepl("calibration", capture.output(print(rep)))))
})
