# truncation = "chunks" (issue 34): long documents read whole as windows in training and
# prediction, the settings recorded, bad settings named as R arguments.

test_that("textmodel_finetune with truncation = 'chunks' records it and predict() reads windows", {
  skip_if_no_verb("finetune")
  s <- sotu_sample()
  tr <- s[c(1:8, 181:188), ]
  fit <- textmodel_finetune(tr, y = "party", epochs = 1, max_length = 32,
                            truncation = "chunks", stride = 8, aggregate = "max",
                            output_dir = tempfile("qf-chunks-"), verbose = FALSE)
  hp <- jsonlite::read_json(file.path(fit$model_dir, "quantformer.json"))$hyperparameters
  expect_equal(hp$truncation, "chunks")
  expect_equal(hp$stride, 8)
  expect_equal(hp$aggregate, "max")
  expect_output(print(fit), "read whole in windows of 32 tokens \\(chunks, stride 8; max of")
  new <- s[101:104, ]
  p <- predict(fit, newdata = new, type = "probability")
  expect_equal(dim(p), c(4L, 2L))
  expect_equal(rownames(p), new$doc_id)
  expect_equal(unname(rowSums(p)), rep(1, 4), tolerance = 1e-6)
  # mean instead of max: another aggregate gives other probabilities
  q <- predict(fit, newdata = new, type = "probability", aggregate = "mean")
  expect_false(isTRUE(all.equal(p, q)))
  # the first window alone is the head of the document: max_chunks = 1 reads as "head" does
  h <- suppressWarnings(predict(fit, newdata = new, type = "probability", truncation = "head"))
  one <- suppressWarnings(predict(fit, newdata = new, type = "probability", max_chunks = 1))
  expect_equal(one, h, tolerance = 1e-6)
  # windows past max_chunks are not dropped silently: one R warning counting the documents
  w <- testthat::capture_warnings(predict(fit, newdata = new, max_chunks = 1))
  expect_equal(sum(grepl("need more than", w)), 1L)
  expect_match(w, paste0("3 of 4 document\\(s\\) need more than `max_chunks` 1 windows; ",
                         "only their first 1 are read \\(the later ones are dropped\\)"),
               all = FALSE)
  w <- testthat::capture_warnings(predict(fit, newdata = new, truncation = "head_tail"))
  expect_match(w, "fine-tuned with `truncation` chunks and predicts with head_tail", all = FALSE)
  expect_match(w, "truncated to 32 tokens \\(head_tail\\)", all = FALSE)
  # neither takes a max_length: a stride too large names the model's window
  err <- tryCatch(textstat_attributions(fit, new, truncation = "chunks", stride = 40),
                  error = conditionMessage)
  expect_match(err, "`stride` 40 must be .*30 content tokens at the model's window of 32 tokens")
  expect_no_match(err, "max_length")
  expect_error(predict(fit, newdata = new, stride = 40), "at the model's window of 32 tokens")
  # textstat_subwords counts the windows predict() reads, with the fitted model's stride
  sw <- textstat_subwords(new, model = fit)
  expect_equal(sw$document, new$doc_id)
  expect_equal(sw$n_windows, as.integer(ceiling(pmax(sw$n_tokens - 2 - 30, 0) / 22) + 1))
  expect_true(max(sw$n_windows) > 1)
  expect_false(any(sw$truncated))
  w <- testthat::capture_warnings(one <- textstat_subwords(new, model = fit, max_chunks = 1))
  expect_match(w, "need more than `max_chunks` 1 windows", all = FALSE)
  expect_equal(one$n_windows, pmin(sw$n_windows, 1L))
  expect_equal(one$truncated, sw$n_windows > 1)
})

test_that("bad window settings are named as R arguments before training", {
  skip_if_no_verb("finetune")
  s <- sotu_sample()[c(1:6, 181:186), ]
  expect_error(textmodel_finetune(s, y = "party", max_length = 32, truncation = "chunks",
                                  stride = 40, verbose = FALSE), "`stride` 40 must be")
  expect_error(textmodel_finetune(s, y = "party", max_length = 32, stride = 4,
                                  verbose = FALSE), "`stride` applies to `truncation` chunks")
})

test_that("textstat_embeddings with truncation = 'chunks': a document is the mean of its windows", {
  skip_if_no_verb("embed")
  all <- sotu_sample()
  s <- all[c(order(-nchar(all$text))[1:2], 181), ]  # the two longest, and one made empty
  s$text[3] <- ""
  emb <- suppressWarnings(textstat_embeddings(s, max_length = 24, truncation = "chunks",
                                              stride = 4, windows = TRUE))
  win <- attr(emb, "windows")
  expect_equal(names(win)[1:4], c("doc_id", "chunk", "start", "end"))
  expect_true(all(table(win$doc_id) > 1))
  expect_false(s$doc_id[3] %in% win$doc_id)
  dims <- grep("^dim_", names(win), value = TRUE)
  for (d in s$doc_id[1:2]) {
    rows <- as.matrix(win[win$doc_id == d, dims])
    expect_equal(unname(emb[d, ]), unname(colMeans(rows)), tolerance = 1e-5)
    # the last window ends at the document's last character
    expect_equal(max(win$end[win$doc_id == d]), nchar(s$text[s$doc_id == d]))
  }
  expect_true(all(is.na(emb[3, ])))
  cut <- textstat_embeddings(s[1:2, ], max_length = 24)
  expect_false(isTRUE(all.equal(unname(cut[1, ]), unname(emb[1, ]), tolerance = 1e-3)))
})

test_that("textmodel_zeroshot with truncation = 'chunks' compares the mean window embedding", {
  skip_if_no_verb("zeroshot")
  s <- sotu_sample()[c(1, 2, 3, 181), ]
  labs <- c("the economy", "war")
  zs <- textmodel_zeroshot(s, labels = labs, method = "embedding", max_length = 24,
                           truncation = "chunks", stride = 4)
  # fp32 throughout: the derivation below is exact (bf16 in windows: test-precision.R)
  p <- predict(zs, type = "probability", precision = "fp32")
  docs <- textstat_embeddings(s, max_length = 24, truncation = "chunks", stride = 4,
                              normalize = TRUE, precision = "fp32")
  hyps <- textstat_embeddings(sprintf("This text is about %s.", labs), max_length = 24,
                              normalize = TRUE, precision = "fp32")
  sims <- docs %*% t(hyps)
  sd0 <- apply(sims, 2, function(v) sqrt(mean((v - mean(v))^2)))  # standardised per label
  z <- sweep(sweep(sims, 2, colMeans(sims)), 2, sd0, "/")
  want <- exp(z) / rowSums(exp(z))
  expect_equal(unname(p), unname(want), tolerance = 1e-5)
})

test_that("textstat_subwords: window settings are named as R arguments", {
  skip_if_no_verb("tokenize")
  expect_error(textstat_subwords("a text", stride = 4), "`stride` applies to `truncation`")
  expect_error(textstat_subwords("a text", truncation = "chunks", max_chunks = 0),
               "`max_chunks`", class = "quantformer_input_error")
  expect_error(textstat_subwords("a text", truncation = "window"),
               "`truncation` must be one of", class = "quantformer_input_error")
  sw <- textstat_subwords(c(a = strrep("word ", 300), b = "short"), max_length = 128,
                          truncation = "chunks")
  expect_equal(sw$n_windows[2], 1L)
  expect_true(sw$n_windows[1] >= 3)
})

test_that("window settings without chunks are named as R arguments before any work", {
  skip_if_no_verb("embed")
  expect_error(textstat_embeddings(c(a = "text"), windows = TRUE),
               "`windows` writes one row per window; add `truncation` chunks")
  expect_error(textstat_embeddings(c(a = "text"), stride = 3),
               "`stride` applies to `truncation` chunks only (documents read whole as windows): add `truncation` chunks or leave it out",
               fixed = TRUE)
  s <- sotu_sample()[c(1:6, 181:186), ]
  expect_error(textmodel_tune(s, y = "party", lr = 1e-3, epochs = 1, folds = 2, stride = 4,
                              verbose = FALSE),
               "`stride` applies to `truncation` chunks only")
})

test_that("textstat_attributions explains every window: no NA beyond the first window", {
  skip_if_no_verb("explain")
  s <- sotu_sample()
  fit <- textmodel_finetune(s[c(1:8, 181:188), ], y = "party", epochs = 1, max_length = 32,
                            truncation = "chunks", stride = 8,
                            output_dir = tempfile("qf-chunks-expl-"), verbose = FALSE)
  new <- data.frame(doc_id = c("a", "b"), text = c(
    paste(rep("Taxes rose and the deficit grew while the war went on.", 8), collapse = " "),
    paste(rep("We will defend the nation and its people.", 8), collapse = " ")))
  res <- textstat_attributions(fit, new)  # adaptive steps: completeness within 5 %
  expect_false(anyNA(res$attribution))
  expect_true(all(res$n_windows > 1L))
  expect_true(any(res$word_windows == 2L))
  # the last word of each document, far beyond the first window of 32 tokens, is attributed
  ends <- tapply(res$end, res$document, max)
  expect_equal(as.vector(ends[new$doc_id]), nchar(new$text))
  texts <- setNames(new$text, new$doc_id)
  expect_equal(unname(substr(texts[res$document], res$start + 1L, res$end)), res$word)
  # max instead of mean: other probabilities (the aggregate) beside the same words
  top <- textstat_attributions(fit, new, aggregate = "max")
  expect_equal(top$word, res$word)
  expect_false(isTRUE(all.equal(top$probability, res$probability)))
  # only the first window: the words after it are not seen
  first <- suppressWarnings(textstat_attributions(fit, new, steps = 4, max_chunks = 1))
  expect_true(anyNA(first$attribution))
  expect_equal(is.na(first$attribution), first$word_windows == 0L)
  expect_error(textstat_attributions(fit, new, stride = 40), "`stride` 40 must be")
  expect_error(textstat_attributions(fit, new, truncation = "head", aggregate = "max"),
               "`aggregate` applies to `truncation` chunks only")
})
