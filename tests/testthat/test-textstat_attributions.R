test_that("textstat_attributions gives words with offsets into the texts, by docnames", {
  skip_if_no_verb("explain")
  s <- sotu_sample()
  fit <- textmodel_finetune(s[c(1:12, 181:192), ], y = "party", epochs = 1, max_length = 32,
                            output_dir = file.path(withr::local_tempdir("qf-expl-"), "model"))
  new <- data.frame(doc_id = c("a", "b"),
                    text = c("Taxes rose, café owners said.", "We will defend the nation."))
  res <- textstat_attributions(fit, new, steps = 8, check = TRUE)
  expect_s3_class(res, "textstat_attributions")
  expect_equal(unique(res$document), c("a", "b"))
  texts <- setNames(new$text, new$doc_id)
  expect_equal(unname(substr(texts[res$document], res$start + 1L, res$end)), res$word)
  probs <- predict(fit, newdata = new, type = "probability")
  expect_equal(unique(res$target[res$document == "a"]),
               colnames(probs)[max.col(probs, "first")][1])
  expect_true(all(c("aopc_top", "aopc_random", "randomisation_spearman") %in%
                    names(attr(res, "check"))))
  png <- withr::local_tempfile(fileext = ".png")
  terms <- textplot_attributions(res, min_docs = 1L, file = png)
  expect_true(file.exists(png))
  expect_equal(nrow(terms), length(unique(tolower(res$word[res$target == res$target[1]]))))
  expect_error(textstat_attributions(fit, new, steps = 0), "`steps` must be a whole number")
  on_dask <- textstat_attributions(fit, new, steps = 8, scheduler = "local:1")
  here <- textstat_attributions(fit, new, steps = 8)
  expect_equal(on_dask$word, here$word)
  expect_equal(on_dask$attribution, here$attribution, tolerance = 1e-6)
  expect_error(textstat_attributions(fit, new, scheduler = "slurm"), "local:N")
  beh <- textmodel_behaviour(fit, new, perturb = "punctuation", expect = "same")
  expect_s3_class(beh, "textmodel_behaviour")
  expect_equal(beh$summary$n, 2L)
  expect_equal(beh$summary$fail_rate, beh$summary$n_fail / 2)
  expect_error(textmodel_behaviour(fit, new, perturb = "typos", expect = "up:nope"),
               "not a class")
})
