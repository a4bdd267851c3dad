# textstat_embeddings(): `quantformer embed` of the bundled all-MiniLM-L6-v2.

texts <- c(cat = "The cat sat on the mat.", kitten = "A kitten was sitting on the rug.",
           stocks = "Stock markets fell sharply today.")

test_that("embeddings are a documents x 384 matrix named by docnames, unit rows when asked", {
  skip_if_no_verb("embed")
  raw <- textstat_embeddings(texts, verbose = FALSE)
  expect_true(is.matrix(raw) && is.double(raw))
  expect_equal(dim(raw), c(3L, 384L))
  expect_equal(rownames(raw), c("cat", "kitten", "stocks"))
  expect_equal(colnames(raw)[c(1, 384)], c("dim_1", "dim_384"))
  # mean-pooled vectors are not unit length unless normalised ...
  expect_true(all(abs(sqrt(rowSums(raw^2)) - 1) > 0.01))
  unit <- textstat_embeddings(texts, normalize = TRUE, verbose = FALSE)
  expect_equal(unname(sqrt(rowSums(unit^2))), c(1, 1, 1), tolerance = 1e-6)
  # ... and normalising is dividing each row by its length
  expect_equal(unit, raw / sqrt(rowSums(raw^2)), tolerance = 1e-6)
  # the two sentences about a cat on a mat are closer to each other than to the stock market
  cosine <- unit %*% t(unit)
  expect_gt(cosine["cat", "kitten"], cosine["cat", "stocks"])
  expect_gt(cosine["cat", "kitten"], cosine["kitten", "stocks"])
  # a document embeds the same alone as with others (padding does not leak into the mean)
  alone <- textstat_embeddings(texts["stocks"], normalize = TRUE, verbose = FALSE)
  expect_equal(alone["stocks", ], unit["stocks", ], tolerance = 1e-5)
})

test_that("data frames keep their docnames; empty texts give NA rows with a warning", {
  skip_if_no_verb("embed")
  df <- data.frame(id = c("d1", "d2"), body = c("Taxes are too high.", ""))
  expect_warning(m <- textstat_embeddings(df, text_field = "body", docid_field = "id",
                                          verbose = FALSE), "empty|missing")
  expect_equal(rownames(m), c("d1", "d2"))
  expect_false(anyNA(m["d1", ]))
  expect_true(all(is.na(m["d2", ])))
})

test_that("bad arguments name the R argument", {
  expect_error(textstat_embeddings(texts, normalize = "yes"), "`normalize` must be TRUE or FALSE")
  expect_error(textstat_embeddings(texts, truncation = "middle"), "`truncation` must be one of",
               class = "quantformer_input_error")
  skip_if_no_verb("embed")
  err <- expect_error(textstat_embeddings(texts, batch_size = 0, verbose = FALSE),
                      class = "quantformer_input_error")
  expect_match(conditionMessage(err), "`batch_size`", fixed = TRUE)
})
