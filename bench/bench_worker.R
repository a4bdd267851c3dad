# The persistent worker against one Python process per call (issue 11): from R, 10 consecutive
# predict() calls of 10 documents with a fine-tuned default model (all-MiniLM-L6-v2, fine-tuned
# here for one epoch on 80 sotu_sample paragraphs); the median time per call after the first,
# worker vs process-per-call, measured in the same run (the machine is shared: read the ratio).
# Usage (from the repository root, with the core importable by QUANTFORMER_PYTHON or the
# environment of quantformer_install()):
#   R CMD INSTALL -l /tmp/qflib . && R_LIBS=/tmp/qflib Rscript bench/bench_worker.R [calls]
suppressPackageStartupMessages(library(quantformer))
options(quantformer.verbose = FALSE)
args <- commandArgs(trailingOnly = TRUE)
n_calls <- if (length(args)) as.integer(args[1]) else 10L
d <- readRDS(system.file("extdata", "sotu_sample.rds", package = "quantformer"))
fit <- textmodel_finetune(d[c(1:40, 101:140), ], y = "party", epochs = 1, max_length = 64,
                          output_dir = file.path(tempdir(), "bench-model"))
docs <- d$text[c(41:45, 141:145)]

time_calls <- function(worker) {
  options(quantformer.worker = worker)
  quantformer_stop()
  vapply(seq_len(n_calls), function(i) {
    t <- system.time(p <- predict(fit, docs, type = "probability"))[["elapsed"]]
    stopifnot(nrow(p) == 10)
    t
  }, 0)
}
one_off <- time_calls(FALSE)
worker <- time_calls(TRUE)
quantformer_stop()
med <- function(x) stats::median(x[-1])
cat(sprintf("load average: %s\n", paste(readLines("/proc/loadavg", warn = FALSE), collapse = "")))
cat(sprintf("process per call: first %.2f s, median of calls 2-%d %.3f s\n", one_off[1], n_calls,
            med(one_off)))
cat(sprintf("worker:           first %.2f s, median of calls 2-%d %.3f s\n", worker[1], n_calls,
            med(worker)))
cat(sprintf("ratio (process per call / worker, median after the first): %.1fx\n",
            med(one_off) / med(worker)))
