# Active learning and the spreadsheet round trip (issue 13).

test_that("suggest_documents: cold start, then margin on the codes, never coded documents (#13)", {
  skip_if_no_verb("suggest")
  sotu <- sotu_sample()
  cache <- withr::local_tempdir()
  expect_no_warning(first <- suggest_documents(sotu, n = 4, cache_dir = cache))  # usual start
  expect_equal(nrow(first), 4)
  expect_equal(names(first), c("doc_id", "text", setdiff(names(sotu), c("doc_id", "text")),
                               "rank", "score", "strategy", "guess", "guess_prob", "code"))
  expect_true(all(first$strategy == "cold"))
  expect_true(all(is.na(first$code)))
  expect_equal(length(list.files(cache)), 1)  # embeddings cached
  # a second round with codes of two classes: margin, no document suggested twice
  coded <- c(which(sotu$party == "Democratic")[1:5], which(sotu$party == "Republican")[1:5])
  y <- rep(NA_character_, nrow(sotu))
  y[coded] <- sotu$party[coded]
  second <- suggest_documents(sotu, y = y, n = 5, cache_dir = cache)
  expect_true(all(second$strategy == "margin"))
  expect_false(any(second$doc_id %in% sotu$doc_id[coded]))
  expect_true(all(second$guess %in% c("Democratic", "Republican")))
  expect_equal(length(list.files(cache)), 1)  # the same corpus reuses its vectors
  expect_identical(suggest_documents(sotu, y = y, n = 5, cache_dir = cache)$doc_id,
                   second$doc_id)  # a seed gives the same suggestions
  # random_share: the least uncertain 2 of 5 are replaced by documents drawn at random
  mixed <- suggest_documents(sotu, y = y, n = 5, random_share = 0.4, cache_dir = cache)
  expect_equal(mixed$strategy, c(rep("margin", 3), rep("random", 2)))
  expect_equal(mixed$doc_id[1:3], second$doc_id[1:3])
  expect_false(any(mixed$doc_id %in% sotu$doc_id[coded]))
})

test_that("spreadsheet round trip: write, fill in, read back, merge by docname (#13)", {
  skip_if_no_verb("suggest")
  sotu <- sotu_sample()
  picks <- suppressWarnings(suggest_documents(sotu, n = 3, strategy = "random",
                                              cache_dir = withr::local_tempdir()))
  f <- withr::local_tempfile(fileext = ".csv")
  write_suggestions(picks, f)
  sheet <- utils::read.csv(f, colClasses = "character", na.strings = "")
  expect_equal(sheet$doc_id, picks$doc_id)
  expect_true(all(is.na(sheet$code)))
  sheet$code <- c("Democratic", "Republican", "")  # one left uncoded
  utils::write.csv(sheet, f, row.names = FALSE)
  back <- read_suggestions(f)
  expect_equal(back$code, c("Democratic", "Republican", NA))
  codes <- merge_codes(sotu, back)
  expect_equal(names(codes), sotu$doc_id)
  expect_equal(unname(codes[picks$doc_id]), c("Democratic", "Republican", NA))
  expect_equal(sum(!is.na(codes)), 2)
  expect_error(merge_codes(sotu, data.frame(doc_id = "nope", code = "x")),
               "not docnames of `x`")
  expect_error(merge_codes(sotu, back, y = ifelse(sotu$doc_id == picks$doc_id[1], "other",
                                                  NA)), "another code")
  expect_error(read_suggestions(f, code = "label"), "no column 'label'")
})

test_that("suggest_documents: bad input is refused before any work (#13)", {
  skip_if_no_verb("suggest")
  sotu <- sotu_sample()
  expect_error(suggest_documents(sotu, n = 0), "`n` must be one whole number")
  expect_error(suggest_documents(sotu, random_share = 2), "`random_share` must be one number")
  expect_error(suggest_documents(sotu, stratify = "region"), "not a docvar")
  expect_error(suggest_documents(sotu, y = rep("a", 3)), "value\\(s\\) but `x` has")
  expect_warning(all <- suggest_documents(sotu[1:6, ], n = 10, strategy = "random",
                                          cache_dir = withr::local_tempdir()),
                 "only 6 are uncoded")
  expect_equal(sort(all$doc_id), sort(sotu$doc_id[1:6]))
})

test_that("textmodel_finetune(method = \"setfit\") writes a model that predict() uses (#13)", {
  skip_if_no_verb("suggest")
  sotu <- sotu_sample()
  idx <- c(which(sotu$party == "Democratic")[1:4], which(sotu$party == "Republican")[1:4])
  fit <- textmodel_finetune(sotu[idx, ], y = "party", method = "setfit", epochs = 1,
                            batch_size = 32)
  expect_equal(fit$summary$method, "setfit")
  p <- predict(fit, newdata = sotu[1:5, ])
  expect_equal(names(p), sotu$doc_id[1:5])
  expect_equal(levels(p), c("Democratic", "Republican"))
  expect_error(textmodel_finetune(sotu[idx, ], y = "party", method = "setfit",
                                  oversample = 0.5),
               "`oversample` cannot be used with `method` setfit (not yet)", fixed = TRUE)
})
