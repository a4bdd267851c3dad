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
  beh <- textstat_behaviour(fit, new, perturb = "punctuation", expect = "same")
  expect_s3_class(beh, "textmodel_behaviour")
  expect_s3_class(beh, c("textstat_behaviour", "textmodel_behaviour"), exact = TRUE)
  expect_output(print(beh), "Behavioural tests")
  # issue 44: the old name warns once a session (it fits nothing) and gives the same result
  assign("renamed_warned", NULL, envir = quantformer:::.qf)
  expect_warning(old <- textmodel_behaviour(fit, new, perturb = "punctuation", expect = "same"),
                 "textmodel_behaviour\\(\\) is now textstat_behaviour\\(\\)",
                 class = "quantformer_deprecated")
  expect_equal(old, beh)
  expect_silent(textmodel_behaviour(fit, new, perturb = "punctuation", expect = "same"))
  expect_output(print(structure(unclass(beh), class = "textmodel_behaviour")),
                "Behavioural tests")
  expect_equal(beh$summary$n, 2L)
  expect_equal(beh$summary$fail_rate, beh$summary$n_fail / 2)
  expect_error(textstat_behaviour(fit, new, perturb = "typos", expect = "up:nope"),
               "not a class")
  # issue 36: expect without perturb names `perturb`; min_change and preserve_case reach the core
  err <- expect_error(textstat_behaviour(fit, new, expect = "same"), "give `perturb`",
                      class = "quantformer_input_error")
  expect_false(grepl("''", conditionMessage(err), fixed = TRUE))
  up <- colnames(probs)[1]
  neg <- data.frame(doc_id = c("a", "b", "c"),
                    text = c("Taxes are high.", "I like the war.", "What do you think?"))
  strict <- textstat_behaviour(fit, neg, perturb = "negation", expect = paste0("up:", up),
                               min_change = 1)
  expect_equal(strict$summary$n, 2L)
  expect_equal(strict$summary$n_skipped, 1L)
  expect_equal(strict$summary$n_fail, 2L)  # no probability moves by 1
  p0 <- predict(fit, newdata = neg$text[1:2], type = "probability")[, up]
  p1 <- predict(fit, newdata = c("Taxes are not high.", "I do not like the war."),
                type = "probability")[, up]
  expect_equal(strict$summary$change_mean, mean(p1 - p0), tolerance = 1e-4)
  subs <- data.frame(from = c("taxes", "nation"), to = c("levies", "country"))
  kept <- textstat_behaviour(fit, new, perturb = "substitutions", expect = "same",
                             substitutions = subs, preserve_case = TRUE)
  shown <- c(kept$tests[[1]]$failures, kept$tests[[1]]$passed_examples)
  expect_setequal(vapply(shown, `[[`, "", "perturbed"),
                  c("Levies rose, café owners said.", "We will defend the country."))
  # issue 36: the core's message about the substitutions speaks of R's data frame
  for (bad in list(data.frame(old = "taxes", new = "levies"), subs[0, ])) {
    err <- expect_error(textstat_behaviour(fit, new, perturb = "substitutions",
                                           expect = "same", substitutions = bad),
                        "^the `substitutions` data frame needs columns from and to",
                        class = "quantformer_input_error")
    expect_false(grepl("file|--substitutions|qf-input", conditionMessage(err)))
  }
})

test_that("textstat_attributions sets the model's terms beside a bag-of-words model's", {
  skip_if_no_verb("explain")
  s <- sotu_sample()
  train <- s[c(1:12, 181:192), ]
  fit <- textmodel_finetune(train, y = "party", epochs = 1, max_length = 32,
                            output_dir = file.path(withr::local_tempdir("qf-expl-"), "model"))
  expect_warning(res <- textstat_attributions(fit, s[c(13:16, 193:196), ], steps = 64,
                                              bow_data = train, n = 5L), "truncated")
  terms <- attr(res, "terms")
  expect_named(terms, c("target", "term", "word", "mean_attribution", "lower", "upper", "n_docs",
                        "rank", "bow_coef", "bow_rank", "in_top", "in_bow_top",
                        "top_overlap", "spearman", "n_common"))
  classes <- levels(predict(fit, newdata = s[1:2, ]))
  expect_setequal(unique(terms$target), classes)
  for (cl in classes) {
    t <- terms[terms$target == cl, ]
    expect_equal(sum(t$in_bow_top), 5L)
    expect_equal(sort(t$bow_rank[t$in_bow_top]), 1:5)
    top <- t[t$in_bow_top, ]
    expect_true(all(diff(top$bow_coef[order(top$bow_rank)]) <= 0))
    expect_equal(length(unique(t$top_overlap)), 1L)
  }
  # a binary model's coefficients: one class's are the other's negated
  both <- merge(terms[terms$target == classes[1], c("term", "bow_coef")],
                terms[terms$target == classes[2], c("term", "bow_coef")], by = "term")
  expect_equal(both$bow_coef.x, -both$bow_coef.y, tolerance = 1e-6)
  png1 <- withr::local_tempfile(fileext = ".png")
  plotted <- textplot_attributions(res, target = classes[1], n = 5L, file = png1)
  expect_true(all(plotted$in_top | plotted$in_bow_top))
  expect_identical(readBin(png1, "raw", 8), as.raw(c(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a,
                                                     0x1a, 0x0a)))
  png2 <- withr::local_tempfile(fileext = ".png")
  words <- textplot_attributions(res, type = "documents", documents = unique(res$document)[1:2],
                                 file = png2)
  expect_equal(unique(words$document), unique(res$document)[1:2])
  dims <- readBin(png2, "integer", n = 6, size = 4, endian = "big")[5:6]  # IHDR width, height
  expect_equal(dims[1], 1600L)
  expect_gt(dims[2], 200L)
  expect_error(textplot_attributions(res, type = "documents", documents = "nope"),
               "not a document of `x`")
  expect_error(textplot_attributions(res, file = "f.pdf"), "must end in .png")
  expect_warning(plain <- textstat_attributions(fit, s[c(13:16, 193:196), ], steps = 64,
                                                terms = TRUE, n = 3L), "truncated")
  pt <- attr(plain, "terms")
  expect_named(pt, c("target", "term", "word", "mean_attribution", "lower", "upper", "n_docs",
                     "rank"))
  seen <- !is.na(terms$mean_attribution)  # issue 36: each stem shown as a word of the texts
  expect_true(all(terms$word[seen] %in% tolower(res$word)))
  expect_true(all(pt$rank <= 3L) && all(pt$n_docs >= 2L))
  expect_true(all(pt$lower <= pt$mean_attribution & pt$mean_attribution <= pt$upper))
  png3 <- withr::local_tempfile(fileext = ".png")
  expect_equal(nrow(textplot_attributions(plain, target = pt$target[1], file = png3)),
               sum(pt$target == pt$target[1]))
  expect_true(file.size(png3) > 0)
  wrong <- data.frame(doc_id = c("a", "b", "c"), text = c("x y", "y z", "z x"),
                      label = c("p", "q", "p"))
  expect_error(textstat_attributions(fit, s[13:14, ], bow_data = wrong),
               paste0("`bow_data` needs its labels in the docvar 'party' (the `y` of ",
                      "textmodel_finetune()), which it lacks; its docvars are: label. Name the ",
                      "labels with bow_data = list(x = <documents>, y = "), fixed = TRUE,
               class = "quantformer_input_error")
  err <- expect_error(textstat_attributions(fit, s[13:14, ],
                                            bow_data = list(x = wrong, y = "label")),
                      "the labels of `bow_data` are not the model's classes",
                      class = "quantformer_input_error")
  expect_false(grepl("qf-input", conditionMessage(err)))  # no temporary file of R's named
  expect_error(textplot_attributions(plain, file = "x.jpg"), "`file` must end in .png",
               class = "quantformer_input_error")
})
