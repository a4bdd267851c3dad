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
