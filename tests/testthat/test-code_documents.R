# The coding room from R (issue 26): code_documents() starts the server, read_codes() reads
# the project back. The page's own tests (keyboard, browser) are in tests/python.

# POST to the room's API as the page does (R has no HTTP POST without another package: the
# core's Python sends it).
room_post <- function(url, path, body) {
  base <- sub("/\\?token=.*$", "", url)
  token <- sub("^.*token=([^&]+).*$", "\\1", url)
  py <- quantformer:::find_python()$python
  script <- paste0(
    "import json, sys, urllib.request\n",
    "req = urllib.request.Request(sys.argv[1], data=sys.argv[3].encode(), ",
    "headers={'X-Token': sys.argv[2], 'Content-Type': 'application/json'})\n",
    "print(urllib.request.urlopen(req, timeout=30).read().decode())\n")
  json <- if (length(body)) as.character(jsonlite::toJSON(body, auto_unbox = TRUE)) else "{}"
  res <- processx::run(py, c("-c", script, paste0(base, path), token, json))
  jsonlite::fromJSON(res$stdout)
}

room_get <- function(url, path) {
  base <- sub("/\\?token=.*$", "", url)
  token <- sub("^.*token=([^&]+).*$", "\\1", url)
  con <- url(paste0(base, path, "?token=", token))
  on.exit(close(con))
  jsonlite::fromJSON(paste(readLines(con, warn = FALSE), collapse = "\n"))
}

test_that("code_documents serves the corpus; codes come back with read_codes (#26)", {
  skip_if_no_verb("code")
  sotu <- sotu_sample()
  project <- withr::local_tempfile(fileext = ".sqlite")
  proc <- code_documents(sotu, labels = c("Democratic", "Republican"), project = project,
                         browser = FALSE, wait = FALSE, verbose = FALSE,
                         cache_dir = withr::local_tempdir())
  withr::defer(if (proc$is_alive()) proc$kill_tree())
  url <- attr(proc, "url")
  expect_match(url, "^http://127\\.0\\.0\\.1:[0-9]+/\\?token=[A-Za-z0-9_-]{20,}")
  # no token: 403
  py <- quantformer:::find_python()$python
  status <- processx::run(py, c("-c", paste0(
    "import sys, urllib.request, urllib.error\n",
    "try:\n    urllib.request.urlopen(sys.argv[1]); print(200)\n",
    "except urllib.error.HTTPError as e:\n    print(e.code)\n"),
    sub("\\?token=.*$", "api/state", url)))$stdout
  expect_equal(trimws(status), "403")
  state <- room_get(url, "/api/state")
  expect_true(state$doc$doc_id %in% sotu$doc_id)
  expect_equal(state$codebook$label, c("Democratic", "Republican"))
  coded <- character()
  for (i in 1:4) {
    doc <- state$doc$doc_id
    party <- sotu$party[sotu$doc_id == doc]
    state <- room_post(url, "/api/code", list(doc_id = doc, label = party))
    coded[doc] <- party
  }
  room_post(url, "/api/done", list())
  proc$wait(20000)
  expect_false(proc$is_alive())
  codes <- read_codes(project)
  expect_equal(names(codes), c("doc_id", "code", "n_coders", "source"))
  expect_equal(stats::setNames(codes$code, codes$doc_id), coded)
  y <- merge_codes(sotu, codes)  # feeds the corpus' label vector directly
  expect_equal(sum(!is.na(y)), 4)
  every <- read_codes(project, all = TRUE)
  expect_equal(every$coder, rep("coder1", 4))
  expect_equal(every$strategy[1], "cold")
  expect_type(every$guess_accepted, "logical")
})

test_that("code_documents: bad input is an R error naming the argument (#26)", {
  skip_if_no_verb("code")
  sotu <- sotu_sample()
  expect_error(code_documents(sotu, labels = "only", project = tempfile(fileext = ".sqlite"),
                              browser = FALSE, verbose = FALSE),
               "at least two labels")
  expect_error(code_documents(sotu, project = tempfile(), browser = FALSE),
               "one of the two")
  expect_error(read_codes(tempfile(fileext = ".sqlite")), "existing project file")
})
