# textstat_reliability() (issue 35): every pair of coders, human or machine, on the same documents.

test_that("textstat_reliability gives each pair's alpha and kappa on the common documents", {
  skip_if_no_verb("reliability")
  set.seed(2)
  n <- 40
  truth <- sample(c("a", "b"), n, replace = TRUE)
  coder <- function(acc) ifelse(runif(n) < acc, truth, sample(c("a", "b"), n, replace = TRUE))
  ids <- paste0("d", seq_len(n))
  ann <- coder(0.9)
  ben <- coder(0.8)
  ben[1:4] <- NA  # skipped
  llm <- coder(0.7)
  room <- data.frame(doc_id = rep(ids, 2), coder = rep(c("ann", "ben"), each = n),
                     label = c(ann, ben))
  machine <- data.frame(doc_id = ids, label = llm, unparsed = FALSE)
  res <- textstat_reliability(list(room = room, llm = machine), n_boot = 50)
  expect_s3_class(res, "textstat_reliability")
  expect_identical(res$coder_1, c("ann", "ann", "ben"))
  expect_identical(res$coder_2, c("ben", "llm", "llm"))
  expect_equal(res$n_documents, rep(n - 4, 3))
  common <- 5:n
  kappa <- function(x, y) {  # Cohen (1960)
    po <- mean(x == y)
    pe <- sum(table(factor(x, c("a", "b"))) * table(factor(y, c("a", "b")))) / length(x)^2
    (po - pe) / (1 - pe)
  }
  # Krippendorff's alpha (nominal, two coders, no missing): 1 - D_o / D_e from the
  # coincidence matrix of the pairable values
  alpha <- function(x, y) {
    v <- c(x, y)
    do <- mean(x != y)
    nv <- table(v)
    de <- (length(v)^2 - sum(nv^2)) / (length(v) * (length(v) - 1))
    1 - do / de
  }
  codes <- list(ann = ann, ben = ben, llm = llm)
  for (i in seq_len(nrow(res))) {
    x <- codes[[res$coder_1[i]]][common]
    y <- codes[[res$coder_2[i]]][common]
    expect_equal(res$cohen_kappa[i], kappa(x, y), tolerance = 1e-10)
    expect_equal(res$krippendorff_alpha[i], alpha(x, y), tolerance = 1e-10)
    expect_equal(res$percent_agreement[i], mean(x == y))
  }
  pair <- textstat_reliability(list(room = room, llm = machine), documents = "pair", n_boot = 20)
  expect_equal(pair$n_documents, c(n - 4, n, n - 4))
  expect_error(textstat_reliability(list(machine)), "without a `coder` column")
  expect_error(textstat_reliability(machine["doc_id"]), "label")
  expect_error(textstat_reliability(room[room$coder == "ann", ]), "at least two")
  expect_error(textstat_reliability(list(room = room, llm = machine), level = 1.5),
               "`level` must be in \\(0, 1\\) such as 0.95, not 1.5")
})
