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
