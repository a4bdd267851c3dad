test_that("zero-shot with the default model: a factor named by docnames, or probabilities", {
  skip_if_no_verb("zeroshot")
  x <- c(econ = "Taxes, jobs, wages and economic growth for working families.",
         war = "Our soldiers fight the enemy; the war and our troops abroad.",
         none = NA)
  zs <- textmodel_zeroshot(x, labels = c("the economy", "war"),
                           hypothesis = "This text is about {}.")
  expect_s3_class(zs, c("textmodel_zeroshot", "textmodel", "list"))
  expect_output(print(zs), "Labels:     the economy, war")
  expect_warning(p <- predict(zs), "missing or empty")
  expect_equal(levels(p), c("the economy", "war"))
  expect_equal(names(p), c("econ", "war", "none"))
  expect_equal(as.character(p), c("the economy", "war", NA))
  pr <- suppressWarnings(predict(zs, type = "probability"))
  expect_equal(dimnames(pr), list(c("econ", "war", "none"), c("the economy", "war")))
  expect_equal(unname(rowSums(pr[1:2, ])), c(1, 1), tolerance = 1e-5)
  expect_true(all(is.na(pr["none", ])))
  p2 <- predict(zs, newdata = c(d1 = "Inflation and unemployment rose.", d2 = "Tanks."))
  expect_equal(names(p2), c("d1", "d2"))
})

test_that("zero-shot label phrases may contain commas and non-ASCII characters", {
  skip_if_no_verb("zeroshot")
  x <- c(a = "Taxes and public spending must fall.", b = "Die Truppen kehren heim.")
  labs <- c("taxes, spending", "Krieg, Frieden und Soldaten", " war ")
  zs <- textmodel_zeroshot(x, labels = labs, method = "embedding")
  expect_equal(zs$labels, c("taxes, spending", "Krieg, Frieden und Soldaten", "war"))
  expect_output(print(zs), 'Labels:     "taxes, spending", "Krieg, Frieden und Soldaten", "war"',
                fixed = TRUE)
  pr <- predict(zs, type = "probability")
  expect_equal(colnames(pr), zs$labels)
  expect_equal(unname(rowSums(pr)), c(1, 1), tolerance = 1e-5)
  p <- predict(zs)
  expect_equal(levels(p), zs$labels)
  expect_false(anyNA(p))
})

test_that("zero-shot keeps the docnames of a real quanteda corpus", {
  skip_if_no_verb("zeroshot")
  uk <- readRDS(shared_data("quanteda", "ukimmig2010_corpus.rds"))
  zs <- textmodel_zeroshot(uk, labels = c("immigration", "sports"), method = "embedding")
  p <- predict(zs)
  expect_equal(names(p), names(uk))
  expect_false(anyNA(p))
  expect_equal(levels(p), c("immigration", "sports"))
})

test_that("zero-shot bad inputs: one label, no template slot", {
  skip_if_no_python()  # the label rules come from the core (core_rules())
  expect_error(textmodel_zeroshot("A text.", labels = "economy"),
               "`labels` must name at least two classes")
  expect_error(textmodel_zeroshot("A text.", labels = c("economy", "economy")),
               "`labels` has duplicates: 'economy'")
  expect_error(textmodel_zeroshot("A text.", labels = c("a", "b"), hypothesis = "About it."),
               "with `\\{\\}` where the label goes")
  expect_error(textmodel_zeroshot("A text.", labels = c("jobs\nwages", "war")),
               "no line breaks")
  expect_error(textmodel_zeroshot("A text.", labels = c(" ", "war")), "non-empty")
})

# --- issue #17 ------------------------------------------------------------------------------

test_that("#17: summary() of a zero-shot model is a proper method: hypotheses per label", {
  zs <- textmodel_zeroshot(c(a = "Taxes.", b = NA), labels = c("the economy", "war"),
                           hypothesis = "This text is about {}.")
  s <- summary(zs)
  expect_s3_class(s, "summary.textmodel_zeroshot")
  expect_equal(s$hypotheses$hypothesis, c("This text is about the economy.",
                                          "This text is about war."))
  expect_equal(c(s$n_documents, s$n_empty), c(2, 1))
  out <- capture.output(print(s))
  expect_match(out, "This text is about war.", fixed = TRUE, all = FALSE)
  expect_match(out, "Documents: 2 \\(1 with empty or missing text", all = FALSE)
  expect_match(out, "labels compete", all = FALSE)
})

test_that("#17: textmodel_zeroshot takes verbose, text_field and docid_field", {
  df <- data.frame(id = c("d1", "d2"), body = c("Taxes.", "Troops."))
  zs <- textmodel_zeroshot(df, labels = c("economy", "war"), text_field = "body",
                           docid_field = "id", verbose = FALSE)
  expect_equal(zs$x$doc_id, c("d1", "d2"))
  expect_identical(zs$verbose, FALSE)
  expect_null(textmodel_zeroshot("A text.", labels = c("a", "b"))$verbose)
})

test_that("#17: zero-shot predict(): quiet as made, unknown arguments warned, type both", {
  skip_if_no_verb("zeroshot")
  x <- c(econ = "Taxes, jobs, wages and economic growth.", war = "Our troops abroad, the war.")
  withr::local_options(quantformer.verbose = TRUE)
  zs <- textmodel_zeroshot(x, labels = c("the economy", "war"), method = "embedding",
                           verbose = FALSE)
  err <- utils::capture.output(out <- utils::capture.output(p <- predict(zs)), type = "message")
  expect_equal(c(out, err), character())
  expect_equal(as.character(p), c("the economy", "war"))
  expect_warning(predict(zs, tpye = "probability"),
                 "`tpye` is not an argument of predict.textmodel_zeroshot")
  both <- predict(zs, type = "both")
  expect_equal(names(both), c("doc_id", "predicted", "prob_the economy", "prob_war"))
  expect_equal(both$predicted, unname(p))
  expect_equal(unname(rowSums(both[3:4])), c(1, 1), tolerance = 1e-5)
})
