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
#' in Python never takes the R session down. See [quantformer_install()] and
#' [quantformer_config()] for finding or installing the Python core.
#'
#' Options: `quantformer.python` (the Python to use), `quantformer.verbose` (the default of
#' the `verbose` argument of the long-running functions, [textmodel_finetune()],
#' [textmodel_compare()] and the `predict()` methods; `FALSE` silences the progress output of
#' the Python core; the quick [textstat_subwords()] and [classification_report()] default to
#' `verbose = FALSE`),
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
