# textmodel_finetune(method = "nli") (#13; Laurer et al. 2023). No real NLI model is available
# offline: the test model is the bundled all-MiniLM-L6-v2 with a new, random 3-way NLI head
# (contradiction, neutral, entailment), which tests the code path, not accuracy.

nli_test_model <- function(dir) {
  code <- paste(
    "import sys",
    "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
    "from quantformer.models.hub import default_model_path",
    "ids = {0: 'contradiction', 1: 'neutral', 2: 'entailment'}",
    "path = default_model_path()",
    "m = AutoModelForSequenceClassification.from_pretrained(path, num_labels=3, id2label=ids,",
    "    label2id={v: k for k, v in ids.items()})",
    "m.save_pretrained(sys.argv[1]); AutoTokenizer.from_pretrained(path).save_pretrained(sys.argv[1])",
    sep = "\n")
  py <- quantformer:::find_python()$python
  processx::run(py, c("-c", code, dir), env = quantformer:::child_env())
  dir
}

test_that("textmodel_finetune(method = \"nli\") fine-tunes an NLI model that predict() uses (#13)", {
  skip_if_no_python()
  model <- nli_test_model(withr::local_tempdir())
  sotu <- sotu_sample()
  idx <- c(which(sotu$party == "Democratic")[1:4], which(sotu$party == "Republican")[1:4])
  phrases <- c(Republican = "the Republican party, its values", Democratic = "the Democrats")
  fit <- textmodel_finetune(sotu[idx, ], y = "party", method = "nli", model = model,
                            hypothesis = "This speech is by {}.", label_phrases = phrases,
                            epochs = 1, max_length = 64, seed = 3,
                            output_dir = file.path(withr::local_tempdir(), "m"))
  expect_equal(fit$summary$method, "nli")
  expect_equal(fit$summary$hypothesis, "This speech is by {}.")
  # the phrase with a comma arrives whole
  expect_equal(fit$summary$label_phrases$Republican, "the Republican party, its values")
  expect_equal(fit$levels, c("Democratic", "Republican"))
  expect_equal(fit$summary$n_pairs_entailment, 8)
  expect_output(print(fit), "Method:    nli (hypothesis \"This speech is by {}.\")", fixed = TRUE)
  # the premise is cut (head_tail) so that it fits with the hypothesis, and counted
  expect_warning(p <- predict(fit, newdata = sotu[1:5, ]),
                 "1 of 5 document\\(s\\) truncated to 64 tokens")
  expect_equal(names(p), sotu$doc_id[1:5])
  expect_equal(levels(p), c("Democratic", "Republican"))
  probs <- suppressWarnings(predict(fit, newdata = sotu[1:5, ], type = "probability"))
  expect_equal(unname(rowSums(probs)), rep(1, 5), tolerance = 1e-6)
  expect_equal(colnames(probs), c("Democratic", "Republican"))
  expect_equal(as.character(p), colnames(probs)[max.col(probs, "first")])
  # textstat_subwords counts each document with its longest hypothesis, as predict() cuts
  sub <- textstat_subwords(sotu[1:5, ], model = fit)
  expect_equal(sum(sub$truncated), 1)
  alone <- textstat_subwords(sotu[1:5, ], model = model, max_length = 64)
  expect_true(all(sub$n_tokens > alone$n_tokens + 5))
})

test_that("method = \"nli\" refuses a model without NLI labels and a class without a phrase (#13)", {
  skip_if_no_python()
  sotu <- sotu_sample()
  idx <- c(which(sotu$party == "Democratic")[1:3], which(sotu$party == "Republican")[1:3])
  expect_error(textmodel_finetune(sotu[idx, ], y = "party", method = "nli", epochs = 1),
               "needs an NLI model")
  expect_error(textmodel_finetune(sotu[idx, ], y = "party", method = "nli",
                                  label_phrases = c("the Democrats")),
               "must be a named character vector")
  model <- nli_test_model(withr::local_tempdir())
  expect_error(textmodel_finetune(sotu[idx, ], y = "party", method = "nli", model = model,
                                  label_phrases = c(Democratic = "the Democrats"), epochs = 1),
               "'Republican' have no label phrase")
})

test_that("textmodel_compare() passes hypothesis and label_phrases to its nli model (#13)", {
  skip_if_no_verb("compare")
  model <- nli_test_model(withr::local_tempdir())
  sotu <- sotu_sample()
  dem <- which(sotu$party == "Democratic")
  rep <- which(sotu$party == "Republican")
  idx <- c(dem[1:4], rep[1:4])
  test <- c(dem[5:6], rep[5:6])
  phrases <- c(Republican = "the Republican party, its values", Democratic = "the Democrats")
  tab <- suppressWarnings(  # the test speeches are cut to 64 tokens
    textmodel_compare(sotu[idx, ], y = "party", test = sotu[test, ], models = "nli",
                      model = model, hypothesis = "This speech is by {}.",
                      label_phrases = phrases, repeats = 1, epochs = 1, max_length = 64,
                      output_dir = file.path(withr::local_tempdir(), "c")))
  expect_equal(tab$model, "nli")
  summary <- jsonlite::read_json(file.path(attr(tab, "output_dir"), "summary.json"))
  expect_equal(summary$nli$hypothesis, "This speech is by {}.")
  expect_equal(summary$nli$label_phrases$Republican, "the Republican party, its values")
  expect_equal(summary$nli$nli_pairs, "balanced")
  expect_match(paste(readLines(file.path(attr(tab, "output_dir"), "table.md")), collapse = "\n"),
               "Democratic: 'This speech is by the Democrats.'", fixed = TRUE)
  # the options without an nli model: refused before any run, in R's words
  expect_error(textmodel_compare(sotu[idx, ], y = "party", test = sotu[test, ],
                                 models = "svm-bow", hypothesis = "This speech is by {}.",
                                 folds = 2, repeats = 1),
               "`hypothesis` is for compare's nli model; add nli to `models`", fixed = TRUE)
})
