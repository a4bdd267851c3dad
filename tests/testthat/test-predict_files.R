# predict_files(): a partitioned corpus in, one Parquet per file out (issue 14). One small
# fine-tune of the default model, shared by the tests of this file.

files_model <- local({
  fit <- NULL
  function() {
    if (is.null(fit)) {
      s <- sotu_sample()
      fit <<- textmodel_finetune(s[c(1:10, 181:190), ], y = "party", epochs = 1,
                                 max_length = 32,
                                 output_dir = file.path(tempfile("qf-files-"), "model"))
    }
    fit
  }
})

partition_dir <- function() {
  s <- sotu_sample()
  dir <- withr::local_tempdir(.local_envir = parent.frame())
  utils::write.csv(s[41:60, ], file.path(dir, "a.csv"), row.names = FALSE)
  saveRDS(s[61:75, ], file.path(dir, "b.rds"))
  dir
}

test_that("predict_files writes one Parquet per file and returns one row per file (#14)", {
  skip_if_no_verb("predict")
  dir <- partition_dir()
  out <- file.path(withr::local_tempdir(), "preds")
  res <- predict_files(files_model(), dir, out)
  expect_s3_class(res, "data.frame")
  expect_equal(basename(res$output), c("a.parquet", "b.parquet"))
  expect_equal(res$rows, c(20L, 15L))
  expect_true(all(file.exists(res$output)))
  expect_equal(res$run, c(1L, 1L))
  man <- jsonlite::fromJSON(attr(res, "manifest"))
  expect_equal(res$seconds, unname(vapply(man$partitions, function(p) p$seconds, 0)))
  expect_equal(man$job$verb, "predict")
  expect_equal(normalizePath(man$job$model), normalizePath(files_model()$model_dir))
  # the Parquet's rows, read by the core's pandas (R's arrow is not installed here)
  py <- quantformer:::find_python()$python
  got <- processx::run(py, c("-c", paste0("import sys, pandas; print(*pandas.read_parquet(",
                                           "sys.argv[1])['doc_id'], sep='\\n')"),
                             res$output[[2]]), env = quantformer:::child_env())$stdout
  expect_equal(strsplit(trimws(got), "\n")[[1]], sotu_sample()$doc_id[61:75])
})

test_that("predict_files refuses a used folder and resumes only what is missing (#14)", {
  skip_if_no_verb("predict")
  dir <- partition_dir()
  out <- file.path(withr::local_tempdir(), "preds")
  first <- predict_files(files_model(), file.path(dir, c("b.rds", "a.csv")), out,
                         verbose = FALSE)
  expect_equal(basename(first$output), c("b.parquet", "a.parquet"))
  expect_error(predict_files(files_model(), dir, out, verbose = FALSE),
               "exists and is not empty")
  unlink(first$output[[2]])
  again <- predict_files(files_model(), dir, out, resume = TRUE, verbose = FALSE)
  expect_equal(again$run[match(c("a.parquet", "b.parquet"), basename(again$output))],
               c(2L, 1L))
})

test_that("predict_files: bad files, model or scheduler give clear errors (#14)", {
  skip_if_no_verb("predict")
  out <- file.path(withr::local_tempdir(), "preds")
  expect_error(predict_files("no/such/model", "x.csv", out), "fine-tuned model")
  expect_error(predict_files(files_model(), file.path(tempdir(), "none-*.csv"), out,
                             verbose = FALSE), "matches no files")
  expect_error(predict_files(files_model(), partition_dir(), out, scheduler = "slurm",
                             verbose = FALSE), "local:N")
  expect_false(dir.exists(out) && length(dir(out)) > 0)
})

test_that("predict_files with one file still writes a folder (#14)", {
  skip_if_no_verb("predict")
  dir <- partition_dir()
  out <- file.path(withr::local_tempdir(), "preds.d")
  res <- predict_files(files_model(), file.path(dir, "a.csv"), out, verbose = FALSE)
  expect_equal(res$output, file.path(normalizePath(out), "a.parquet"))
  expect_equal(res$rows, 20L)
})

test_that("a file without document ids is numbered text1..N with one R warning (issue 36)", {
  skip_if_no_verb("predict")
  dir <- withr::local_tempdir()
  s <- sotu_sample()[41:45, ]
  utils::write.csv(data.frame(text = s$text), file.path(dir, "no_ids.csv"), row.names = FALSE)
  out <- file.path(withr::local_tempdir(), "preds")
  warned <- character()
  res <- withCallingHandlers(
    predict_files(files_model(), file.path(dir, "no_ids.csv"), out, verbose = FALSE),
    warning = function(w) {
      warned <<- c(warned, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  numbered <- grep("text1..textN", warned, value = TRUE)
  expect_length(numbered, 1)
  expect_match(numbered, "no_ids.csv' has no id column", fixed = TRUE)
  expect_match(numbered, "name their column with `docid_field`", fixed = TRUE)
  expect_equal(res$rows, 5L)
})
