#' quantformer: Transformer transfer learning for social science text analysis
#'
#' Fine-tune Transformer encoders on a few hundred hand-coded documents
#' ([textmodel_finetune()]), classify zero-shot ([textmodel_zeroshot()]), count subword tokens
#' ([textstat_subwords()]), evaluate predictions ([classification_report()]) and compare
#' against bag-of-words baselines ([textmodel_compare()]), following Wankmueller (2022).
#'
#' All the work is done by the quantformer Python package, run as a child process through its
#' command-line interface (`python -m quantformer <verb>`): R writes the documents with
#' [saveRDS()], the Python core reads them, and R reads back the `.rds` it writes. A failure
#' in Python never takes the R session down. Data frames are read as `quanteda::corpus()`
#' reads them (`text_field`, `docid_field`), and `predict()` returns a factor named by
#' docnames, a probability matrix, or both (`type = "both"`) from one run of the core. See
#' [quantformer_install()] and [quantformer_config()] for finding or installing the Python core.
#'
#' Options: `quantformer.python` (the Python to use), `quantformer.verbose` (the default
#' `verbose` of the functions that train or classify, `TRUE` when unset; the one rule for
#' `verbose` is documented under that argument of [textmodel_finetune()]: the quick
#' [textstat_subwords()] and [classification_report()] default to `FALSE`, and `predict()`
#' follows the `verbose` the model was made with),
#' `quantformer.debug` (`TRUE` adds the Python traceback to internal errors),
#' `quantformer.worker` (`TRUE`, the default: one persistent Python worker per R session, see
#' [quantformer_stop()]; `FALSE`: one Python process per call).
#'
#' @section Example data:
#' `system.file("extdata", "sotu_sample.rds", package = "quantformer")` is a data frame of
#' 200 State of the Union paragraphs (1981 onwards, 100 Democratic and 100 Republican, 8 to 60
#' words) with columns `doc_id`, `text`, `year`, `president`, `party`, `address` and
#' `paragraph`. The texts are public domain (The American Presidency Project, UC Santa
#' Barbara), taken from the `sotu` Python package by `scripts/make_extdata.py`.
#' @keywords internal
"_PACKAGE"
