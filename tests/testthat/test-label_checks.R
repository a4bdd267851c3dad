# Issue 27 (point 2 and 4): labels of a classifier checked in R before the core is called.

frame12 <- function(n = 26) data.frame(doc_id = paste0("d", seq_len(n)),
                                       text = paste("text", seq_len(n)))

test_that("a numeric y with more than 10 values warns and names task = \"regression\"", {
  f <- frame12()
  years <- 1990 + seq_len(26) - 1
  expect_warning(tt <- quantformer:::task_training_frame("classification", f, years),
                 paste0("`y` is numeric with 26 distinct values (1990, 1991, ..., 2015); they ",
                        "become 26 classes, one per value. For a numeric outcome (a year, a ",
                        "score) use task = \"regression\"; to keep them as classes, pass ",
                        "factor(y)"), fixed = TRUE)
  expect_length(tt$levels, 26)
  # 10 numeric codes, the same years as a factor or as text: no warning
  expect_no_warning(quantformer:::task_training_frame("classification", f, rep(1:10, length.out = 26)))
  expect_no_warning(quantformer:::task_training_frame("classification", f, factor(years)))
  expect_no_warning(quantformer:::task_training_frame("classification", f, as.character(years)))
  # the argument is named as the calling function names it
  expect_warning(quantformer:::task_training_frame("classification", f, years, arg = "test_y"),
                 "`test_y` is numeric with 26 distinct values", fixed = TRUE)
})

test_that("textmodel_finetune() warns about a numeric y before any work", {
  skip_if_no_verb("finetune")
  f <- frame12()
  expect_warning(
    expect_error(textmodel_finetune(f, y = 1990 + seq_len(26), epochs = 0,
                                    output_dir = tempfile("qf-years-")), "epochs"),
    "use task = \"regression\"", fixed = TRUE)
})

test_that("an unused factor level of y is named, not dropped silently", {
  f <- frame12(6)
  y <- factor(c("a", "b", "a", "b", NA, "a"), levels = c("a", "b", "c", "d"))
  expect_message(tt <- quantformer:::task_training_frame("classification", f, y),
                 "factor level(s) of `y` without a coded document left out of the classes: 'c', 'd'",
                 fixed = TRUE)
  expect_identical(tt$levels, c("a", "b"))
  expect_no_message(quantformer:::task_training_frame("classification", f, droplevels(y)))
})
