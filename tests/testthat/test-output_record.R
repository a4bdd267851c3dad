# The record a verb writes beside its --out file (OUT.json, naming the precision used) is a
# temporary file of R's round trip too: deleted with the output, whatever the verb.

test_that("the record beside a verb's temporary output is deleted with it", {
  skip_if_no_verb("embed")
  before <- dir(tempdir(), pattern = "^qf-output-.*\\.json$")
  emb <- textstat_embeddings(c(a = "A short text about taxes.", b = "Another one."),
                             precision = "fp32")
  expect_equal(attr(emb, "backend"), "torch")
  expect_equal(dir(tempdir(), pattern = "^qf-output-.*\\.json$"), before)
})
