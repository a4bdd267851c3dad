# The coding room from R (issue 26): code_documents() starts the server, read_codes() reads
# the project back. The page's own tests (keyboard, browser) are in tests/python.

# POST to the room's API as the page does (R has no HTTP POST without another package: the
# core's Python sends it); the HTTP status with the body (an error status is an answer).
room_post_status <- function(url, path, body = list()) {
  base <- sub("/\\?token=.*$", "", url)
  token <- sub("^.*token=([^&]+).*$", "\\1", url)
  py <- quantformer:::find_python()$python
  script <- paste0(
    "import json, sys, urllib.request, urllib.error\n",
    "req = urllib.request.Request(sys.argv[1], data=sys.argv[3].encode(), ",
    "headers={'X-Token': sys.argv[2], 'Content-Type': 'application/json'})\n",
    "try:\n    r = urllib.request.urlopen(req, timeout=30); s, b = r.status, r.read()\n",
    "except urllib.error.HTTPError as e:\n    s, b = e.code, e.read()\n",
    "print(json.dumps({'status': s, 'body': json.loads(b)}))\n")
  json <- if (length(body)) as.character(jsonlite::toJSON(body, auto_unbox = TRUE)) else "{}"
  res <- processx::run(py, c("-c", script, paste0(base, path), token, json))
  jsonlite::fromJSON(res$stdout)
}

# The body of a POST that must succeed.
room_post <- function(url, path, body) {
  res <- room_post_status(url, path, body)
  if (res$status != 200) stop("HTTP ", res$status, ": ", res$body$error)
  res$body
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
    # the second code accepts the room's guess; the others are typed
    state <- room_post(url, "/api/code", list(doc_id = doc, label = party,
                                              guess_accepted = i == 2))
    coded[doc] <- party
  }
  room_post(url, "/api/done", list(stop = TRUE))  # the owner stops the room
  proc$wait(20000)
  expect_false(proc$is_alive())
  codes <- read_codes(project)
  expect_equal(names(codes), c("doc_id", "code", "n_coders", "source", "resolved_by"))
  expect_equal(stats::setNames(codes$code, codes$doc_id), coded)
  y <- merge_codes(sotu, codes)  # feeds the corpus' label vector directly
  expect_equal(sum(!is.na(y)), 4)
  every <- read_codes(project, all = TRUE)
  expect_equal(every$coder, rep("coder1", 4))
  expect_equal(every$strategy[1], "cold")
  expect_identical(stats::setNames(every$guess_accepted, every$doc_id)[names(coded)],
                   stats::setNames(c(FALSE, TRUE, FALSE, FALSE), names(coded)))
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
  expect_error(code_documents(sotu, labels = c("a", "b"), new_links = "yes",
                              project = tempfile(fileext = ".sqlite"), browser = FALSE),
               "`new_links` must be TRUE or FALSE")
})

test_that("read_codes refuses another application's database and leaves it untouched (#36)", {
  skip_if_no_verb("code")
  foreign <- tempfile(fileext = ".sqlite")
  py <- quantformer:::find_python()$python
  processx::run(py, c("-c", paste0(
    "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); ",
    "db.execute('CREATE TABLE people (name TEXT)'); db.commit()"), foreign))
  before <- unname(tools::md5sum(foreign))
  err <- expect_error(read_codes(foreign), "other tables \\(people\\)")
  expect_s3_class(err, "quantformer_input_error")
  expect_match(conditionMessage(err), "nothing was written")
  expect_identical(unname(tools::md5sum(foreign)), before)
})

test_that("code_documents passes coders and the fine-tune options to the room (#26)", {
  skip_if_no_verb("code")
  sotu <- sotu_sample()
  project <- withr::local_tempfile(fileext = ".sqlite")
  models <- withr::local_tempdir()
  proc <- code_documents(sotu, labels = c("Democratic", "Republican"), project = project,
                         coders = c("alice", "bob"), browser = FALSE, wait = FALSE,
                         verbose = FALSE, cache_dir = withr::local_tempdir(), overlap = 0,
                         models = models, finetune_epochs = 1,
                         finetune_valid_fraction = 0.5, finetune_min_codes = 2)
  withr::defer(if (proc$is_alive()) proc$kill_tree())
  urls <- attr(proc, "urls")
  expect_equal(names(urls), c("alice", "bob"))
  expect_match(urls[["bob"]], "&coder=bob$")
  expect_equal(attr(proc, "url"), urls[["alice"]])
  token <- function(u) sub("^.*token=([^&]+).*$", "\\1", u)
  expect_false(token(urls[["alice"]]) == token(urls[["bob"]]))
  # alice's link cannot code as bob
  state <- room_get(urls[["alice"]], "/api/state")
  expect_equal(state$coder, "alice")
  as_bob <- room_post_status(urls[["alice"]], "/api/code",
                             list(coder = "bob", doc_id = state$doc$doc_id, label = "Democratic"))
  expect_equal(as_bob$status, 403)
  # finetune_min_codes = 2: refused, naming the labels short of codes
  early <- room_post_status(urls[["alice"]], "/api/finetune")
  expect_equal(early$status, 400)
  expect_match(early$body$error, "at least 2 codes.*Democratic \\(0\\), Republican \\(0\\)")
  counts <- c(Democratic = 0, Republican = 0)
  for (i in 1:30) {
    if (all(counts >= 2)) break
    party <- sotu$party[sotu$doc_id == state$doc$doc_id]
    state <- room_post(urls[["alice"]], "/api/code", list(doc_id = state$doc$doc_id, label = party))
    counts[party] <- counts[party] + 1
  }
  started <- room_post_status(urls[["alice"]], "/api/finetune")
  expect_equal(started$status, 200)
  expect_equal(started$body$state, "running")
  expect_equal(dirname(started$body$model), normalizePath(models))
  deadline <- Sys.time() + 300
  repeat {
    ft <- room_get(urls[["alice"]], "/api/finetune")
    if (ft$state != "running" || Sys.time() > deadline) break
    Sys.sleep(1)
  }
  expect_equal(ft$state, "done", info = ft$error)
  record <- jsonlite::fromJSON(file.path(ft$model, "quantformer.json"))
  expect_equal(record$hyperparameters$epochs, 1)
  # finetune_valid_fraction = 0.5 held out: round(n / 2) documents, halves to even as in Python
  expect_equal(record$n_train, sum(counts) - round(sum(counts) / 2))
  expect_equal(ft$macro_f1, record$validation$macro_f1)
  fit <- load_finetune(ft$model)
  expect_equal(sort(fit$levels), c("Democratic", "Republican"))
  # bob's "done" ends his own session; only alice, who started the room, stops it (#36)
  expect_equal(room_post_status(urls[["bob"]], "/api/done", list(stop = TRUE))$status, 403)
  expect_false(room_post(urls[["bob"]], "/api/done", list(done = TRUE))$stopped)
  Sys.sleep(0.5)
  expect_true(proc$is_alive())
  expect_true(room_post(urls[["alice"]], "/api/done", list(stop = TRUE))$stopped)
  proc$wait(20000)
  expect_false(proc$is_alive())
})

test_that("code_documents: bad coders, host and fine-tune options are input errors (#26)", {
  sotu <- sotu_sample()
  bad <- list(
    list(coders = c("ann", "ann"), msg = "`coders` must be"),
    list(coders = "a,b", msg = "`coders` must be"),
    list(coders = c("ann", "bob"), coder = "zed", msg = "`coder` \"zed\" is not one of `coders`"),
    list(host = c("a", "b"), msg = "`host` must be"),
    list(models = 1, msg = "`models` must be"),
    list(finetune_model = NA_character_, msg = "`finetune_model` must be"),
    list(finetune_epochs = 1.5, msg = "`finetune_epochs` must be"),
    list(finetune_min_codes = 0, msg = "`finetune_min_codes` must be"),
    list(finetune_valid_fraction = 1, msg = "`finetune_valid_fraction` must be"))
  for (case in bad) {
    args <- c(list(sotu, labels = c("a", "b"), project = tempfile(fileext = ".sqlite"),
                   browser = FALSE, wait = FALSE, verbose = FALSE),
              case[names(case) != "msg"])
    expect_error(do.call(code_documents, args), case$msg, class = "quantformer_input_error")
  }
  expect_error(code_documents(sotu, project = tempfile(), browser = FALSE), "one of the two",
               class = "quantformer_input_error")
})

test_that("code_documents adds a language model's codes as a machine coder (#35)", {
  skip_if_no_verb("code")
  sotu <- sotu_sample()
  project <- withr::local_tempfile(fileext = ".sqlite")
  docs <- as.character(sotu$doc_id)
  llm <- data.frame(doc_id = docs, label = as.character(sotu$party), unparsed = FALSE,
                    coder = "tiny-llm", stringsAsFactors = FALSE)
  llm$label[1] <- if (llm$label[1] == "Democratic") "Republican" else "Democratic"
  bad <- llm
  bad$doc_id[2] <- "no-such-doc"
  expect_error(code_documents(sotu, labels = c("Democratic", "Republican"), project = project,
                              llm_codes = bad, browser = FALSE, verbose = FALSE),
               "llm_codes.*no-such-doc", class = "quantformer_input_error")
  expect_false(file.exists(project))  # refused before the project file was made
  expect_error(code_documents(sotu, labels = c("Democratic", "Republican"), project = project,
                              llm_coder = "gpt", browser = FALSE, verbose = FALSE),
               "`llm_coder` names the coder of `llm_codes`; give `llm_codes` or leave",
               fixed = TRUE, class = "quantformer_input_error")
  expect_false(file.exists(project))
  proc <- code_documents(sotu, labels = c("Democratic", "Republican"), project = project,
                         llm_codes = llm, browser = FALSE, wait = FALSE, verbose = FALSE,
                         cache_dir = withr::local_tempdir())
  withr::defer(if (proc$is_alive()) proc$kill_tree())
  url <- attr(proc, "url")
  state <- room_get(url, "/api/state")
  expect_equal(state$progress$machine_coders, "tiny-llm")
  expect_equal(state$progress$coded, 0)  # the machine's codes train nothing
  for (i in 1:4) {
    doc <- state$doc$doc_id
    state <- room_post(url, "/api/code",
                       list(doc_id = doc, label = as.character(sotu$party[docs == doc])))
  }
  agree <- room_get(url, "/api/agreement")
  for (i in 1:60) {
    if (!isTRUE(agree$updating)) break
    Sys.sleep(0.5)
    agree <- room_get(url, "/api/agreement")
  }
  expect_equal(agree$machine$coder, "coder1")
  expect_equal(agree$machine$machine, "tiny-llm")
  expect_equal(agree$machine$n, 4)
  room_post(url, "/api/done", list(stop = TRUE))
  proc$wait(20000)
  every <- read_codes(project, all = TRUE)
  expect_equal(sum(every$coder == "tiny-llm"), length(docs))
  expect_true(all(every$strategy[every$coder == "tiny-llm"] == "machine"))
  expect_equal(nrow(read_codes(project)), 4)  # one code per document: the human's only
})
