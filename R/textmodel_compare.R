#' Compare a fine-tuned Transformer with SVM and XGBoost baselines (Table 1)
#'
#' Trains each model on stratified samples of each training size (repeated draws) and scores
#' it by macro-F1 on the test documents, as in Wankmueller (2022), Table 1 and Figure 10. The
#' models are the fine-tuned Transformer (`"default"`: `model`, by default all-MiniLM-L6-v2)
#' and the baselines `"svm-bow"`, `"svm-vec"`, `"xgb-bow"` and `"xgb-vec"` (support vector
#' machine and XGBoost on bag-of-words or averaged word vectors, each tuned by
#' cross-validation). Runs `quantformer compare`, which also writes `table.md`, `figure10.png`
#' and `summary.json` into `output_dir`.
#'
#' With `task = "regression"` the models are `"default"` and `"ridge-bow"` (ridge regression,
#' `RidgeCV`, on bag-of-words), scored by RMSE (the table), MAE, Pearson and Spearman
#' correlation and R^2; with `task = "multilabel"` they are `"default"`, `"logit-bow"` and
#' `"svm-bow"` (one-vs-rest logistic regression / linear SVM on bag-of-words, tuned by
#' cross-validated macro-F1), scored by macro-F1 over labels (the table), micro-F1, subset
#' accuracy, Hamming loss and per-label F1. Samples are then plain random draws. XGBoost, the
#' `-vec` baselines and SetFit are classification only.
#'
#' @param x training documents (quanteda corpus, character vector or data frame).
#' @param y their classes, or the name of a docvar of `x`; `NA` documents are not used. For
#'   `task = "regression"` numbers (or a docvar name); for `task = "multilabel"` a logical/0-1
#'   matrix or data frame with one named column per label, or a character vector of docvar
#'   names (see [textmodel_finetune()]).
#' @param test test documents.
#' @param test_y their classes, or a docvar name of `test`; by default the docvar named by `y`
#'   when `y` is a name (multi-label: the docvars named as the labels of `y`). Data frames `x`
#'   and `test` are both read with `text_field` and `docid_field`.
#' @param models the models, in table order (by default all of the task's: the five above
#'   for classification; also `"setfit"`, SetFit few-shot fine-tuning of `model`, and `"nli"`,
#'   an NLI `model` fine-tuned on the classes as hypotheses, see [textmodel_finetune()]).
#' @param hypothesis,label_phrases the `"nli"` model's hypothesis template (with `{}`; default
#'   `"This text is about {}."`) and label phrases (a named character vector, one phrase per
#'   class; default the class names), used in every run of that model and recorded in
#'   `summary.json` and `table.md` (see [textmodel_finetune()]); an error when `models` has no
#'   `"nli"`.
#' @param llm `NULL` (default) or a large language model that codes the test documents from
#'   `codebook`, as [annotate_llm()] does: a causal language model (Hugging Face id or folder)
#'   or, with `endpoint`, the model name an OpenAI-compatible server serves. Adds the row
#'   `"llm"` (zero-shot) and, with `shots`, `"llm-<k>shot"` beside the other models, scored by
#'   the same metrics on the same test documents; its `seconds` are those of coding the test
#'   documents (it is not trained). Classification only. Fine-tuned encoders have beaten zero-
#'   and few-shot LLMs on most coding tasks (Ziems et al. 2024, Computational Linguistics;
#'   Bucher & Martini 2024); this row shows whether they do on your data.
#' @param codebook the LLM's codebook (with `llm`): a data frame with `label` and optional
#'   `description` and `examples`, or a codebook file (see [annotate_llm()]); its labels must
#'   include every class.
#' @param shots integer >= 0 (default 0): with `llm`, also a k-shot row, its examples drawn from
#'   each training sample's codes (never test documents).
#' @param endpoint,api_key_env `NULL`, or the base URL of an OpenAI-compatible server and the
#'   name of the environment variable holding its API key (see [annotate_llm()]).
#' @param task `"classification"` (the default), `"regression"` or `"multilabel"`.
#' @param train_sizes training sizes to draw (e.g. `c(500, 1000, 2000)`); `NULL` uses all
#'   coded training documents.
#' @param repeats draws per training size (5).
#' @param seed base seed (1).
#' @param folds cross-validation folds for tuning the baselines (5).
#' @param model the Transformer of `"default"`: `NULL` (all-MiniLM-L6-v2), a hub id, a folder
#'   or a [pretrain_encoder()] result.
#' @param epochs,lr fine-tuning epochs and learning rate; `NULL` takes the defaults by model
#'   size.
#' @param max_length integer or `NULL`: tokens per document for the Transformer; `NULL` (the
#'   default) leaves it to the core (512; for `method = "setfit"` the body's own limit).
#' @param device `"auto"`, `"cpu"`, `"cuda"` or `"mps"`.
#' @param output_dir folder for the result files (created; written whole at the end); default a
#'   new folder in [tempdir()].
#' @param overwrite if `TRUE`, replace an existing non-empty `output_dir` (all its files);
#'   if `FALSE` (default) such a folder is an error, raised before any work.
#' @inheritParams textmodel_finetune
#' @param ... further options of `quantformer compare` as named R arguments (e.g.
#'   `vectors = "glove.6B.300d.txt"`).
#' @return The Table-1 data frame: one row per model with `model`, `description`, and for each
#'   training size `s` the columns `f1_mean_s`, `f1_min_s`, `f1_max_s` (regression:
#'   `rmse_mean_s`, `rmse_min_s`, `rmse_max_s`) and `seconds_s` (mean training seconds).
#'   Attributes: `results` (one row per model x size x repeat: `model`, `train_size`,
#'   `repeat`, then `macro_f1`, `accuracy`; regression `rmse`, `mae`, `pearson`, `spearman`,
#'   `r2`; multilabel `macro_f1`, `micro_f1`, `subset_accuracy`, `hamming_loss`,
#'   `f1_<label>`; then `seconds`) and `output_dir`.
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   test <- seq(2, 200, by = 4)
#'   tab <- textmodel_compare(sotu[-test, ], y = "party", test = sotu[test, ],
#'                            models = c("svm-bow", "xgb-bow"), repeats = 1, folds = 2)
#'   tab
#' }
#' }
#' @export
textmodel_compare <- function(x, y, test, test_y = NULL,
                              models = c("default", "svm-bow", "svm-vec", "xgb-bow", "xgb-vec"),
                              train_sizes = NULL, repeats = 5, seed = 1, folds = 5, model = NULL,
                              epochs = NULL, lr = NULL, max_length = NULL, device = "auto",
                              output_dir = NULL, overwrite = FALSE, text_field = "text",
                              docid_field = "doc_id",
                              task = c("classification", "regression", "multilabel"),
                              hypothesis = NULL, label_phrases = NULL, llm = NULL,
                              codebook = NULL, shots = 0, endpoint = NULL, api_key_env = NULL,
                              verbose = getOption("quantformer.verbose", TRUE), ...) {
  task <- match_choice(task)
  if (task != "classification" && missing(models)) models <- NULL  # the task's models
  frame <- as_frame(x, text_field, docid_field)
  tframe <- as_frame(test, text_field, docid_field, arg = "test")
  labelled <- labelled_inputs(task, frame, y, tframe, test_y)  # R/tasks.R
  book <- if (!is.null(codebook)) codebook_file(codebook)  # R/annotate_llm.R
  on.exit(if (!is.null(attr(book, "temp"))) unlink(book), add = TRUE)
  if (is.null(output_dir)) output_dir <- tempfile("quantformer-compare-")
  output_dir <- normalizePath(output_dir, mustWork = FALSE)
  args <- c(labelled$args,
            cli_flags(models = models, train_sizes = train_sizes, repeats = repeats,
                      seed = seed, folds = folds, model = model, epochs = epochs, lr = lr,
                      max_length = max_length, device = device, hypothesis = hypothesis,
                      llm = llm, codebook = book, shots = shots,
                      endpoint = endpoint, api_key_env = api_key_env),
            "--out", output_dir, cli_flags(overwrite = isTRUE(overwrite), ...))
  call_verb("compare", args, inputs = c(labelled$inputs, nli_phrase_inputs(label_phrases)),
            verbose = verbose, r_args = names(formals()))
  table <- read_output(file.path(output_dir, "table.rds"))
  attr(table, "results") <- read_output(file.path(output_dir, "results.rds"))
  attr(table, "output_dir") <- output_dir
  table
}
