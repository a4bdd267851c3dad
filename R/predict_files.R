#' Classify a partitioned corpus, file by file, on one machine or a Dask cluster
#'
#' Runs `quantformer predict` over many corpus files (partitions) and writes one Parquet file
#' of predictions per input file into `output_dir`, named after it (`part-01.csv` ->
#' `part-01.parquet`), with the documents in input order and their docvars. Nothing is held in
#' R's memory: the function returns one row per partition, not per document. Read the
#' predictions with `arrow::open_dataset(output_dir)` (or `arrow::read_parquet()` per file).
#'
#' `output_dir/manifest.json` records the model, the options, the versions, and for each
#' partition its rows, seconds, worker and finishing time; it is updated after every
#' partition, and outputs are written atomically, so an interrupted or preempted job loses
#' nothing: run the same call again with `resume = TRUE` and only the partitions without a
#' complete output are computed. Without `resume`, an existing non-empty `output_dir` is
#' refused. doc_ids must be unique across all files (checked before any work); files
#' without an id column get `text1 .. textN` numbered across the files in order.
#'
#' The work is spread with Dask (the Python packages `dask` and `distributed`): `scheduler =
#' "local:4"` starts 4 worker processes on this machine (each with cores / 4 torch
#' threads); `scheduler = "tcp://host:8786"` uses a running Dask scheduler, e.g. one started
#' on a SLURM cluster with `dask-jobqueue` (see the guide `docs/cluster.md`). Each worker loads
#' the model once; a task whose worker dies is run again elsewhere.
#'
#' @param model a [textmodel_finetune()] object or the path of a model directory written by
#'   `quantformer finetune` (character scalar).
#' @param files character: corpus files (`.parquet`, `.csv`, `.tsv`, `.txt`, `.jsonl`, `.rds`),
#'   folders (all their files) or quoted globs such as `"tweets/*.parquet"`; in the order
#'   given.
#' @param output_dir character scalar: the output folder (new or empty; or the folder of an
#'   interrupted run with `resume = TRUE`).
#' @param scheduler `NULL` (default: the files one after another in one Python process),
#'   `"local:N"` or the address of a Dask scheduler (`"tcp://host:port"`).
#' @param resume logical: continue the run recorded in `output_dir` (default `FALSE`).
#' @param batch_size documents per forward pass at most (default 64; long documents go in
#'   smaller batches of at most 4096 padded tokens).
#' @param device `"auto"` (default), `"cpu"`, `"cuda"`, `"cuda:N"` or `"mps"`.
#' @param text_field,docid_field names of the text and document-id columns in the files
#'   (defaults `text` and `doc_id`; without an id column ids are `textN`).
#' @param keep_text logical: keep the text column in the outputs (default `FALSE`).
#' @param precision `"auto"` (default), `"fp32"` or `"bf16"`: see [quantformer_precision];
#'   each output row's `backend` says which precision produced it, and `manifest.json` each
#'   partition's `precision`. In bf16 probabilities can differ in the third decimal from one
#'   `predict()` call on the same documents (labels do not); `"fp32"` is the reproducible
#'   choice.
#' @template verbose
#' @return A data frame with one row per partition: `input`, `output` (the Parquet path),
#'   `rows`, `seconds`, `worker`, `finished` (UTC time) and `run` (which call of the job
#'   computed it: 1 for the first, 2 for the first `resume`, ...). The manifest's path is the
#'   attribute `"manifest"`.
#' @seealso [textmodel_finetune()], [predict.textmodel_finetune()] for documents in memory.
#' @references Dask Development Team (2016). Dask: Library for dynamic task scheduling.
#'   <https://dask.org>
#' @examples
#' \donttest{
#' if (quantformer_available()) {
#'   sotu <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
#'   fit <- textmodel_finetune(sotu[1:40, ], y = "party", epochs = 1, max_length = 64)
#'   dir <- tempfile()
#'   dir.create(dir)
#'   write.csv(sotu[41:70, ], file.path(dir, "a.csv"), row.names = FALSE)
#'   write.csv(sotu[71:100, ], file.path(dir, "b.csv"), row.names = FALSE)
#'   predict_files(fit, dir, tempfile("preds-"))
#' }
#' }
#' @export
predict_files <- function(model, files, output_dir, scheduler = NULL, resume = FALSE,
                          batch_size = 64, device = "auto", text_field = NULL,
                          docid_field = NULL, keep_text = FALSE,
                          verbose = getOption("quantformer.verbose", TRUE),
                          precision = getOption("quantformer.precision", "auto")) {
  model_dir <- model_dir_of(model, exists = TRUE)  # R/arguments.R
  output_dir <- check_files_output(files, output_dir)
  # an existing folder makes even one file a partitioned run; ours goes if the run fails empty
  if (!dir.exists(output_dir)) {
    dir.create(output_dir, recursive = TRUE)
    on.exit(if (!length(dir(output_dir, all.files = TRUE, no.. = TRUE)))
      unlink(output_dir, recursive = TRUE), add = TRUE)
  }
  args <- c("--model", model_dir, "--input", path.expand(files), "--out", output_dir,
            cli_flags(scheduler = scheduler, resume = isTRUE(resume), batch_size = batch_size,
                      device = device, text_col = text_field, id_col = docid_field,
                      keep_text = isTRUE(keep_text)),
            precision_flags(precision))  # R/precision.R
  call_verb("predict", args, verbose = verbose, r_args = names(formals()))
  read_manifest(output_dir)
}

# `files` and `output_dir` of a partitioned run, checked; the folder's absolute path.
check_files_output <- function(files, output_dir) {
  if (!is.character(files) || !length(files) || anyNA(files))
    input_error("`files` must be a character vector of corpus files, folders or globs",
         call. = FALSE)
  if (!is.character(output_dir) || length(output_dir) != 1 || is.na(output_dir))
    input_error("`output_dir` must be one folder path", call. = FALSE)
  normalizePath(output_dir, mustWork = FALSE)
}

# One row per partition from the run's manifest.json.
read_manifest <- function(output_dir) {
  path <- file.path(output_dir, "manifest.json")
  man <- jsonlite::fromJSON(path, simplifyVector = FALSE)
  parts <- man$partitions
  field <- function(name, fn) unname(vapply(parts, function(p) fn(p[[name]]), fn(NA)))
  out <- data.frame(
    input = field("input", as.character),
    output = file.path(output_dir, names(parts)),
    rows = field("rows", as.integer),
    seconds = field("seconds", as.numeric),
    worker = field("worker", as.character),
    finished = field("finished", as.character),
    run = field("run", as.integer),
    stringsAsFactors = FALSE
  )
  attr(out, "manifest") <- path
  out
}
