# Issue 32: quanteda's argument names (old names warn for one release), R's own input errors as
# quantformer_input_error, docnames() methods, the one model_dir_of() and the core's rules read
# once a session.

prevalence_sample <- function() {
  set.seed(3)
  ids <- paste0("d", 1:60)
  pred <- stats::setNames(factor(sample(c("a", "b"), 60, replace = TRUE)), ids)
  gold <- stats::setNames(as.character(pred)[1:30], ids[1:30])
  gold[1:6] <- ifelse(gold[1:6] == "a", "b", "a")
  list(pred = pred, gold = gold)
}

test_that("issue 32: the old first-argument names still work, with a deprecation warning", {
  skip_if_no_verb("estimate")
  s <- prevalence_sample()
  new <- textstat_prevalence(s$pred, s$gold)
  expect_warning(old <- textstat_prevalence(pred = s$pred, gold = s$gold),
                 "`pred` of textstat_prevalence\\(\\) is now `x`",
                 class = "quantformer_deprecated")
  expect_equal(old, new)
  # derived from the data: the naive estimate is the predicted share, under either name
  expect_warning(naive <- textstat_prevalence(pred = s$pred, s$gold, method = "naive"),
                 class = "quantformer_deprecated")
  expect_equal(naive$estimate[naive$class == "a"], mean(s$pred == "a"))
  expect_error(textstat_prevalence(s$pred, s$gold, pred = s$pred), "not both",
               class = "quantformer_input_error")
  expect_error(textstat_prevalence(gold = s$gold), "`x` is missing",
               class = "quantformer_input_error")
  expect_warning(expect_error(textstat_regression(pred = s$pred, gold = s$gold, formula = "a"),
                              "two-sided formula", class = "quantformer_input_error"),
                 class = "quantformer_deprecated")
  expect_warning(expect_error(textstat_attributions(fit = 1, "text"), "`x` must be",
                              class = "quantformer_input_error"),
                 "`fit` of textstat_attributions\\(\\) is now `x`")
  expect_warning(expect_error(textstat_behaviour(fit = NA), "`x` must be",
                              class = "quantformer_input_error"),
                 class = "quantformer_deprecated")
})

test_that("a model folder that does not exist is R's input error in R's words (issue 36)", {
  gone <- file.path(withr::local_tempdir(), "nope")
  for (f in list(function() textstat_attributions(gone, "a text"),
                 function() textstat_behaviour(gone, "a text", perturb = "typos",
                                               expect = "same"))) {
    err <- expect_error(f(), "`x` must be .*'.*nope' is no folder",
                        class = "quantformer_input_error")
    expect_false(grepl("--out|quantformer finetune", conditionMessage(err)))
  }
  expect_warning(expect_error(textstat_attributions(gone, "a text", top = 5),
                              class = "quantformer_input_error"),
                 "`top` of textstat_attributions\\(\\) is now `n`",
                 class = "quantformer_deprecated")
  expect_identical(formals(textstat_attributions)$verbose,
                   formals(textmodel_finetune)$verbose)
  expect_identical(formals(textmodel_behaviour)$verbose, formals(textmodel_finetune)$verbose)
  expect_identical(formals(textstat_behaviour)$verbose, formals(textmodel_finetune)$verbose)
  # issue 44: the old name takes the new one's arguments
  expect_identical(formals(textmodel_behaviour), formals(textstat_behaviour))
})

test_that("issue 32: every input error R raises itself is a quantformer_input_error", {
  skip_if_no_python()
  caught <- function(expr) {
    tryCatch({ expr; "no error" }, quantformer_input_error = function(e) "input error",
             error = function(e) paste("other error:", conditionMessage(e)))
  }
  s <- sotu_sample()[1:10, ]
  expect_equal(caught(textmodel_finetune(s, y = "nope")), "input error")
  expect_equal(caught(textmodel_finetune(s, y = s$party, task = "regression")), "input error")
  expect_equal(caught(textmodel_zeroshot("A text.", labels = "economy")), "input error")
  expect_equal(caught(textstat_prevalence(list(1), c(a = "x"))), "input error")
  expect_equal(caught(textstat_regression(factor("a"), c(a = "x"), y ~ z)), "input error")
  expect_equal(caught(textstat_embeddings("a text", normalize = "yes")), "input error")
  expect_equal(caught(predict_files("no/such/model", "x.csv", tempfile())), "input error")
  expect_equal(caught(textstat_subwords("a text", model = 3)), "input error")
})

test_that("issue 36: a value that is not one of an argument's choices is an input error", {
  s <- sotu_sample()[1:4, ]
  err <- expect_error(textmodel_finetune(s, y = "party", task = "nope"),
                      "`task` must be one of \"classification\", .*not \"nope\"",
                      class = "quantformer_input_error")
  expect_equal(err$status, 2L)
  expect_error(textmodel_finetune(s, y = "party", method = 1), "`method` must be one of",
               class = "quantformer_input_error")
  expect_error(textmodel_zeroshot("A text.", labels = c("a", "b"), method = "x"),
               "`method` must be one of \"auto\", \"nli\"", class = "quantformer_input_error")
  expect_error(textstat_regression(factor("a"), c(a = "x"), y ~ z, family = "poisson"),
               "`family` must be one of", class = "quantformer_input_error")
  expect_error(textplot_attributions(data.frame(), type = "bars"), "`type` must be one of",
               class = "quantformer_input_error")
  expect_error(textstat_embeddings("a text", truncation = "middle"),
               "`truncation` must be one of", class = "quantformer_input_error")
  # the default, a unique prefix and an exact value as match.arg() gives them
  f <- function(kind = c("alpha", "beta", "betamax")) quantformer:::match_choice(kind)
  expect_equal(c(f(), f("al"), f("beta"), f("betam")), c("alpha", "alpha", "beta", "betamax"))
  expect_error(f("b"), "`kind` must be one of", class = "quantformer_input_error")
  expect_error(f(c("alpha", "beta")), "not c\\(\"alpha\", \"beta\"\\)",
               class = "quantformer_input_error")
  # a `substitutions` that is not a data frame is refused before any Python runs
  expect_error(textstat_behaviour(withr::local_tempdir(), "a text", perturb = "substitutions",
                                   expect = "same", substitutions = c(God = "Allah")),
               "`substitutions` must be a data frame with columns `from` and `to`",
               class = "quantformer_input_error")
})

test_that("issue 32: model_dir_of() is the one way from a fit to its folder", {
  dir <- withr::local_tempdir()
  expect_equal(quantformer:::model_dir_of(dir), normalizePath(dir))
  expect_null(quantformer:::model_dir_of(NULL, null_ok = TRUE))
  expect_error(quantformer:::model_dir_of(NULL), "`model` must be a textmodel_finetune",
               class = "quantformer_input_error")
  expect_error(quantformer:::model_dir_of(file.path(dir, "none"), exists = TRUE),
               "is no folder", class = "quantformer_input_error")
  fit <- structure(list(model_dir = dir), class = c("textmodel_finetune", "textmodel", "list"))
  expect_equal(quantformer:::model_dir_of(fit), dir)
  tuned <- structure(list(model = fit), class = c("textmodel_tune", "textmodel", "list"))
  expect_equal(quantformer:::model_dir_of(tuned, "x"), dir)
  expect_error(quantformer:::model_dir_of(structure(list(model = NULL),
                                                      class = "textmodel_tune"), "x"),
               "`x` is a textmodel_tune\\(\\) result without a refit model")
  gone <- structure(list(model_dir = file.path(dir, "gone")), class = "textmodel_finetune")
  expect_error(quantformer:::model_dir_of(gone), "no longer exists")
})

test_that("issue 32: what R checks before a run comes from the core, read once a session", {
  skip_if_no_verb("info")
  py <- quantformer:::find_python()$python
  core <- jsonlite::fromJSON(processx::run(py, c("-m", "quantformer", "info", "--verbs",
                                                 "--json"), env = quantformer:::child_env())$stdout)
  rules <- quantformer:::core_rules()
  expect_equal(rules, core)
  expect_identical(quantformer:::.qf$rules[[py]], rules)  # cached for the session
  quiet <- vapply(names(core$verbs), quantformer:::verb_takes_quiet, TRUE)
  expect_equal(unname(quiet), vapply(core$verbs, function(v) isTRUE(v$quiet), TRUE,
                                     USE.NAMES = FALSE) & names(core$verbs) != "info")
  expect_true(quantformer:::verb_takes_quiet("predict"))
  expect_true(quantformer:::verb_takes_quiet("behave"))  # verbose = FALSE passes --quiet
  expect_false(quantformer:::verb_takes_quiet("estimate"))
  # the numeric-outcome warning starts one value above the core's numeric_classes_max
  most <- core$numeric_classes_max
  expect_silent(quantformer:::check_class_labels(seq_len(most)))
  expect_warning(quantformer:::check_class_labels(seq_len(most + 1)),
                 paste0("numeric with ", most + 1, " distinct values"))
  # zero-shot: one label is refused for single-label and accepted with multi_label, as the
  # core's check_labels does
  expect_error(textmodel_zeroshot("A text.", labels = "economy"), "at least two classes",
               class = "quantformer_input_error")
  zs <- textmodel_zeroshot("A text.", labels = " economy ", multi_label = TRUE)
  expect_equal(zs$labels, "economy")
})

test_that("issue 32: predict() of a textmodel_tune needs its refit model and newdata", {
  tuned <- structure(list(model = NULL, output_dir = "grid"),
                     class = c("textmodel_tune", "textmodel", "list"))
  expect_error(predict(tuned, newdata = "a"), "has no refit model",
               class = "quantformer_input_error")
  fit <- structure(list(model_dir = tempdir()), class = c("textmodel_finetune", "textmodel"))
  tuned$model <- fit
  expect_error(predict(tuned), "give `newdata`", class = "quantformer_input_error")
})

test_that("issue 32: docnames() methods are registered on quanteda's generic when it loads", {
  if (!requireNamespace("quanteda", quietly = TRUE)) {
    # quanteda is not installable here: a stand-in package named quanteda with the same
    # generic, so that the registration on its namespace is what is tested
    src <- file.path(withr::local_tempdir(), "quanteda")
    dir.create(file.path(src, "R"), recursive = TRUE)
    writeLines(c("Package: quanteda", "Version: 0.0.1", "Title: Stand-in",
                 "Description: A stand-in.", "License: MIT",
                 "Authors@R: person('a', 'b', role = c('aut', 'cre'), email = 'a@b.org')"),
               file.path(src, "DESCRIPTION"))
    writeLines("export(docnames)", file.path(src, "NAMESPACE"))
    writeLines("docnames <- function(x) UseMethod(\"docnames\")",
               file.path(src, "R", "docnames.R"))
    lib <- withr::local_tempdir()
    res <- processx::run(file.path(R.home("bin"), "R"),
                         c("CMD", "INSTALL", "--no-test-load", "-l", lib, src),
                         error_on_status = FALSE)
    expect_equal(res$status, 0L)
    withr::local_libpaths(lib, action = "prefix")
    withr::defer(unloadNamespace("quanteda"))
  }
  loadNamespace("quanteda")
  fit <- structure(list(x = data.frame(doc_id = c("d1", "d2"), text = c("a", "b"))),
                   class = c("textmodel_finetune", "textmodel", "list"))
  expect_equal(quanteda::docnames(fit), c("d1", "d2"))
  zs <- structure(list(x = data.frame(doc_id = "z", text = "a")),
                  class = c("textmodel_zeroshot", "textmodel", "list"))
  expect_equal(quanteda::docnames(zs), "z")
  attr_res <- structure(data.frame(document = c("a", "a", "b"), word = c("x", "y", "z")),
                        class = c("textstat_attributions", "textstat", "data.frame"))
  expect_equal(quanteda::docnames(attr_res), c("a", "b"))
  sub <- structure(data.frame(document = c("p", "q"), n_tokens = 1:2),
                   class = c("textstat_subwords", "textstat", "data.frame"))
  expect_equal(quanteda::docnames(sub), c("p", "q"))
})

test_that("the truncation choices are the core's (core_rules()$reading), the default first (#44)", {
  skip_if_no_python()
  reading <- quantformer:::core_rules()$reading$truncation
  expect_equal(quantformer:::truncation_choices()[1], reading$default)
  expect_setequal(quantformer:::truncation_choices(), unlist(reading$choices))
  expect_null(quantformer:::match_truncation(NULL))
  expect_equal(quantformer:::match_truncation("head_"), "head_tail")
  expect_equal(quantformer:::match_truncation(quantformer:::truncation_choices()), "head_tail")
})
