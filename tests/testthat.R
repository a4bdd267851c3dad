library(testthat)
library(quantformer)

test_check("quantformer")
