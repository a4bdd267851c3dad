utf8_texts <- c(
  umlaut = "Grüße aus Köln – Äpfel, Öl und Übermut; ß",
  emoji = "emoji 😀👍🏽 and a flag 🇩🇪",
  cjk = "中文文本，日本語のテキスト，한국어",
  quotes = "\"double\" 'single' „German“ «guillemets» ‘curly’",
  missing = NA,
  empty = "",
  lines = "tab\there\nnewline\r\nand CRLF",
  na_word = "NA"
)

test_that("character vectors get quanteda's text1..n names; names are kept", {
  f <- quantformer:::as_frame(c("a", "b", "c"))
  expect_equal(f$doc_id, c("text1", "text2", "text3"))
  expect_equal(quantformer:::as_frame(c(x = "a", y = "b"))$doc_id, c("x", "y"))
  expect_error(quantformer:::as_frame(c(x = "a", x = "b")), "must be unique, but 'x' repeats")
  expect_error(quantformer:::as_frame(character()), "has no documents")
  expect_error(quantformer:::as_frame(list(1, 2)), "must be a quanteda corpus")
})

test_that("data frames: text and doc_id columns, other columns are docvars", {
  df <- data.frame(doc_id = c("d1", "d2"), text = c("a", "b"), party = c("x", "y"),
                   year = 1:2)
  f <- quantformer:::as_frame(df)
  expect_equal(names(f), c("doc_id", "text", "party", "year"))
  expect_equal(f$doc_id, c("d1", "d2"))
  expect_equal(quantformer:::as_frame(df[c("text", "party")])$doc_id, c("text1", "text2"))
  expect_error(quantformer:::as_frame(data.frame(body = "a")),
               "without a 'text' column; its columns are: body")
  expect_equal(quantformer:::as_frame(data.frame(body = "a"), text_field = "body")$text, "a")
})

test_that("real quanteda corpora are recognised by structure, without quanteda", {
  x <- readRDS(shared_data("quanteda", "inaugural_sentences_corpus.rds"))
  expect_false("quanteda" %in% loadedNamespaces())
  expect_true(quantformer:::is_corpus(x))
  f <- quantformer:::as_frame(x)
  expect_equal(nrow(f), length(x))
  expect_equal(f$doc_id, names(x))
  expect_equal(f$doc_id[1], "1789-Washington.1")
  expect_equal(names(f), c("doc_id", "text", "Year", "President", "FirstName", "Party"))
  expect_true(is.factor(f$Party))
  expect_equal(unname(f$text), unname(as.character(unclass(x))))
  uk <- readRDS(shared_data("quanteda", "ukimmig2010_corpus.rds"))
  fu <- quantformer:::as_frame(uk)
  expect_equal(fu$doc_id, c("BNP", "Coalition", "Conservative", "Greens", "Labour", "LibDem",
                            "PC", "SNP", "UKIP"))
  expect_equal(names(fu), c("doc_id", "text", "party"))
  # a plain character vector with a 'corpus' class but no docvars is not a corpus
  expect_false(quantformer:::is_corpus(structure("a", class = c("corpus", "character"))))
})

test_that("R-side argument errors are quantformer_input_error, like the core's", {
  f <- quantformer:::as_frame(data.frame(text = c("a", "b", "c"), party = c("x", "y", "x")))
  err <- tryCatch(quantformer:::resolve_y("nope", f), quantformer_input_error = function(e) e)
  expect_s3_class(err, c("quantformer_input_error", "quantformer_error", "error", "condition"),
                  exact = TRUE)
  expect_identical(err$status, 2L)
  expect_null(conditionCall(err))
  expect_equal(conditionMessage(err),
               paste("`y` = 'nope' is not a docvar of `x`; its docvars are: party.",
                     "Give a docvar name or one label per document"))
  expect_error(quantformer:::as_frame(character()), "`x` has no documents",
               class = "quantformer_input_error")
  expect_error(classification_report(c("a", "b"), "a"), "`predicted` has 2 value",
               class = "quantformer_input_error")
})

test_that("y: a docvar name or one value per document", {
  f <- quantformer:::as_frame(data.frame(text = c("a", "b", "c"), party = c("x", "y", "x")))
  expect_equal(quantformer:::resolve_y("party", f)$y, c("x", "y", "x"))
  expect_error(quantformer:::resolve_y(c("x", "y"), f),
               "`y` has 2 value\\(s\\) but `x` has 3 document\\(s\\)")
  expect_error(quantformer:::resolve_y("partei", f),
               "'partei' is not a docvar of `x`; its docvars are: party")
  # a column called "label" is a docvar like any other
  fl <- quantformer:::as_frame(data.frame(text = c("a", "b", "c"), label = c("p", "q", NA)))
  expect_equal(quantformer:::resolve_y("label", fl), list(y = c("p", "q", NA), name = "label"))
  expect_equal(quantformer:::label_levels(factor(c("b", "a", NA), levels = c("z", "b", "a"))),
               c("b", "a"))
  expect_error(quantformer:::label_levels(c("a", "a", NA)), "at least two classes")
  expect_error(quantformer:::label_levels(c("a,b", "c")), "must not contain commas")
})

test_that("texts and docnames round-trip byte-exactly through the CLI (saveRDS -> pyreadr -> readRDS)", {
  skip_if_no_python()
  x <- utf8_texts
  names(x) <- paste0(names(x), c("-ü", "-😀", "-中", "-\"q\"", "", "", "-\t", ""))
  latin <- iconv("Café naïve", "UTF-8", "latin1")   # a latin1-marked string is sent as UTF-8
  x <- c(x, latin1 = latin)
  df <- data.frame(doc_id = names(x), text = unname(x), copy = unname(x),
                   stringsAsFactors = FALSE)
  expect_warning(res <- textstat_subwords(df, max_length = 16, docvars = TRUE),
                 "2 of 9 documents have missing or empty text")
  expect_identical(res$document, enc2utf8(names(x)))
  expect_identical(res$copy, enc2utf8(unname(x)))   # a docvar carried through the core
  expect_true(is.na(res$copy[5]))
  expect_identical(res$copy[8], "NA")
  expect_identical(res$copy[6], "")
  expect_identical(charToRaw(res$copy[2]), charToRaw("emoji 😀👍🏽 and a flag 🇩🇪"))
  expect_identical(res$copy[9], "Café naïve")
  expect_equal(res$n_tokens[5:6], c(0L, 0L))
})

# --- issue #17 ------------------------------------------------------------------------------

# a one-document quanteda corpus, cut from a real one without quanteda
one_document_corpus <- function() {
  uk <- readRDS(shared_data("quanteda", "ukimmig2010_corpus.rds"))
  attrs <- attributes(uk)
  attrs$names <- names(uk)[1]
  attrs$docvars <- attrs$docvars[1, , drop = FALSE]
  one <- unclass(uk)[[1]]
  attributes(one) <- attrs
  one
}

test_that("#17: a length-1 y names the docvar of a one-document corpus or data frame", {
  one <- one_document_corpus()
  f <- quantformer:::as_frame(one)
  expect_equal(nrow(f), 1)
  expect_equal(quantformer:::resolve_y("party", f), list(y = "BNP", name = "party"))
  df <- quantformer:::as_frame(data.frame(text = "a", party = "x"))
  expect_equal(quantformer:::resolve_y("party", df)$y, "x")
  # not a docvar of a one-document x: the label of that document
  expect_equal(quantformer:::resolve_y("Labour", df), list(y = "Labour", name = NULL))
  # ... unless it must be a name (the validation label is always a docvar)
  expect_error(quantformer:::resolve_y("Party", df, name_only = TRUE, x_arg = "validation"),
               "'Party' is not a docvar of `validation`; its docvars are: party")
})

test_that("#17: a one-document validation corpus sends its docvar, not the docvar's name", {
  one <- one_document_corpus()
  sent <- quantformer:::validation_args(one, "party")$inputs[["--valid"]]
  expect_equal(sent$doc_id, "BNP")
  expect_equal(sent$label, "BNP")
  expect_error(quantformer:::validation_args(one, "Party"),
               "`y` = 'Party' is not a docvar of `validation`")
})

test_that("#17: text_field and docid_field pick data frame columns by name or number", {
  df <- data.frame(id = c("d1", "d2"), body = c("a", "b"), year = 1:2)
  f <- quantformer:::as_frame(df, text_field = "body", docid_field = "id")
  expect_equal(names(f), c("doc_id", "text", "year"))
  expect_equal(f$doc_id, c("d1", "d2"))
  expect_equal(f$text, c("a", "b"))
  expect_equal(quantformer:::as_frame(df, text_field = 2, docid_field = 1), f)
  # the default docid_field is optional; one the user names must exist
  expect_equal(quantformer:::as_frame(df, text_field = "body")$doc_id, c("text1", "text2"))
  expect_error(quantformer:::as_frame(df, text_field = "body", docid_field = "ident"),
               "without a 'ident' column; its columns are: id, body, year. Name its document-name column with `docid_field`")
  expect_error(quantformer:::as_frame(df, text_field = 5), "without a column number 5")
  expect_error(quantformer:::as_frame(df, text_field = c("a", "b")),
               "`text_field` must be one column name or number")
  expect_error(quantformer:::as_frame(df, text_field = "year"),
               "column 'year' of `x` must hold text \\(character\\), not integer; name the text column with `text_field`")
})

test_that("#17: every function that takes a data frame has the text_field it suggests", {
  err <- expect_error(quantformer:::as_frame(data.frame(id = "d1", body = "x")),
                      "Name its text column with `text_field` \\(e.g. `text_field = \"body\"`\\)")
  takes_frames <- list(textmodel_finetune, textmodel_zeroshot, textmodel_compare,
                       textstat_subwords, quantformer:::predict.textmodel_finetune,
                       quantformer:::predict.textmodel_zeroshot)
  for (f in takes_frames)
    expect_true(all(c("text_field", "docid_field") %in% names(formals(f))))
  # the issue's case reaches the core with the arguments
  skip_if_no_python()
  res <- textstat_subwords(data.frame(id = "d1", body = "x"), text_field = "body",
                           docid_field = "id")
  expect_equal(res$document, "d1")
  expect_equal(res$n_tokens, 3L)
})
